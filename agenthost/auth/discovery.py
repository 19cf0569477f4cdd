"""Finding the authorization server from a 401: the MCP authorization spec's discovery.

Order of things (``basic/authorization`` of 2025-11-25 and 2026-07-28):

1. The 401's ``WWW-Authenticate: Bearer resource_metadata="...", scope="..."``.
2. Protected Resource Metadata (RFC 9728): the ``resource_metadata`` URL when given, else
   ``/.well-known/oauth-protected-resource/<path>`` then ``/.well-known/oauth-protected-
   resource`` at the server's origin. Its ``resource`` must be this server's URL, or the
   origin for the origin's root document (:func:`resource_allowed`; it becomes the RFC
   8707 ``resource`` parameter);
   the configured or saved issuer when listed, else ``authorization_servers[0]``, is used.
3. Authorization server metadata: for an issuer with a path, RFC 8414 path insertion,
   then OpenID Connect path insertion, then OpenID path appending; without a path, RFC
   8414 then OpenID. The document's ``issuer`` must be identical to the issuer we built
   the URL from (mix-up defence).
4. 2025-03-26 fallback, when there is no PRM at all: the MCP server's origin is the
   authorization server; its RFC 8414 metadata at the origin (whose ``issuer`` must be
   on that origin), else the default endpoints ``/authorize``, ``/token``, ``/register``.

Everything here is bounded: documents are read up to :data:`MAX_DOCUMENT` bytes, and
every value from a server is checked before use (it is untrusted input).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import attrs
import httpx
import orjson

from agenthost.auth.settings import is_loopback
from agenthost.redaction import redact_url
from agenthost.transports._httpx import failure_name

__all__ = [
    "AuthServerMetadata",
    "Challenge",
    "DiscoveryError",
    "ResourceMetadata",
    "as_metadata_urls",
    "canonical_resource",
    "check_outward",
    "parse_www_authenticate",
    "prm_urls",
    "resource_allowed",
    "root_prm_url",
    "same_origin",
]

log = logging.getLogger("agenthost.auth")

#: The largest metadata document (or token response) read from a server.
MAX_DOCUMENT: Final = 256 * 1024
_MAX_SCOPES: Final = 256
_MAX_URL: Final = 2048

_AUTH_PARAM = re.compile(
    r'\s*([!#$%&\'*+\-.^_`|~0-9A-Za-z]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*(?:,|$)'
)


_SCHEME = re.compile(r"(?:^|,)\s*([A-Za-z][A-Za-z0-9_-]*)(?=\s+[^=\s,]+=|\s*$|\s*,)")


class DiscoveryError(Exception):
    """A metadata problem, said in words fit for the user (no secrets, no raw bodies)."""


@attrs.frozen(kw_only=True)
class Challenge:
    """One ``WWW-Authenticate`` challenge of the Bearer or DPoP scheme."""

    params: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def resource_metadata(self) -> str | None:
        return self.params.get("resource_metadata") or None

    @property
    def scopes(self) -> tuple[str, ...] | None:
        value = self.params.get("scope")
        return tuple(value.split()[:_MAX_SCOPES]) if value else None

    @property
    def error(self) -> str | None:
        return self.params.get("error") or None


def parse_www_authenticate(values: Iterable[str], *, scheme: str | None = None) -> Challenge | None:
    """The Bearer challenge among ``WWW-Authenticate`` header values (RFC 9110 11.6.1),
    else the DPoP one; only the ``scheme`` one when given.

    Only those schemes matter to us (a server taking DPoP-bound tokens may challenge
    with ``DPoP`` alone, RFC 9449 section 7.1); a header with several challenges
    (``Basic realm="x", Bearer scope="y"``) is split at each scheme name.
    """
    wanted = scheme.lower() if scheme else None
    fallback: Challenge | None = None
    for value in values:
        text = value.strip()
        # Split "Scheme params, Scheme2 params" into challenges at scheme tokens.
        for match in _SCHEME.finditer(text):
            name = match.group(1).lower()
            accepted = name == wanted if wanted else name in ("bearer", "dpop")
            if not accepted:
                continue
            challenge = Challenge(params=_auth_params(text[match.end() :]))
            if wanted or name == "bearer":
                return challenge
            fallback = fallback or challenge
    return fallback


def _auth_params(rest: str) -> dict[str, str]:
    params: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        m = _AUTH_PARAM.match(rest, pos)
        if m is None:
            break
        name = m.group(1).lower()
        quoted = m.group(2)
        val = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else m.group(3)
        params.setdefault(name, val)
        pos = m.end()
    return params


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def canonical_resource(url: str) -> str:
    """The server URL as an RFC 8707 resource, normalised as RFC 3986 section 6.2.2-6.2.3
    allows: lowercase scheme and host, no default port, no fragment, no trailing slash
    (the spec's canonical form: ``https://mcp.example.com``, not ``.../``)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    if parts.username is not None or parts.password is not None:
        netloc = parts.netloc.rpartition("@")[0] + "@" + netloc
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def resource_allowed(server_url: str, resource: str, *, fetched_from: str | None = None) -> bool:
    """True if the PRM ``resource`` names the resource its document was found for (RFC
    9728 section 3.3), compared in canonical form: the server's URL, or, for the document
    at the origin's root well-known URL (``fetched_from``; RFC 9728 builds that URL from
    the origin), the origin too. The origin's root document is its operator's word, and
    an origin-wide audience is then checked by the flow (refused with configured secrets).

    Never a path prefix: a server at ``https://h/a/mcp`` whose own document (at
    ``/.well-known/oauth-protected-resource/a/mcp`` or its challenge's
    ``resource_metadata``) names ``https://h/a`` or ``https://h`` would get a token valid
    at every server under it, its neighbours included. The path compares exactly, bar a
    trailing slash; a resource without a query names the server whatever query its URL
    carries (the well-known URL has none either); one with a query must match it.
    """
    want = urlsplit(canonical_resource(server_url))
    have = urlsplit(canonical_resource(resource))
    if (want.scheme, want.netloc) != (have.scheme, have.netloc):
        return False
    if fetched_from == root_prm_url(server_url) and not have.path and not have.query:
        return True
    query = want.query if have.query else ""
    return (want.path, query) == (have.path, have.query)


def root_prm_url(server_url: str) -> str:
    """The Protected Resource Metadata URL RFC 9728 builds from the server's origin."""
    return f"{_origin(server_url)}/.well-known/oauth-protected-resource"


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``host`` is written as, in any spelling the resolver takes as one
    without asking DNS: dotted quads, and also ``127.1``, ``2130706433`` and ``0x7f.1``
    (``inet_aton``); an IPv4-mapped IPv6 address as its IPv4 one."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _inward(host: str) -> bool:
    """This machine (loopback, ``localhost`` and its subdomains, the unspecified address,
    which Linux connects to loopback) or the link (169.254/16, fe80::/10: where cloud
    metadata services answer), however the address is spelled (a trailing dot too)."""
    name = host.strip("[]").lower()
    name = name[:-1] if name.endswith(".") else name
    if is_loopback(name) or name.endswith(".localhost"):
        return True
    address = _address(name)
    return address is not None and (
        address.is_loopback or address.is_link_local or address.is_unspecified
    )


def check_outward(server_url: str, url: str, what: str) -> None:
    """Refuse a URL a remote server's discovery leads to when it points at this machine
    or the link: a server elsewhere may not aim our requests at local services (each
    discovery step is a GET or POST of ours). A server on this machine may (tests, a
    local gateway). Only addresses written as such are caught, not names resolving there.

    Raises:
        DiscoveryError: ``url`` is inward and ``server_url`` is not.
    """
    host = urlsplit(url).hostname or ""
    if _inward(host) and not _inward(urlsplit(server_url).hostname or ""):
        raise DiscoveryError(
            f"{what} {redact_url(url)!r} points at this machine or its link, and the server"
            " is not on it (refused: nothing was sent there)"
        )


def prm_urls(server_url: str, challenge: Challenge | None) -> list[str]:
    """Where to look for Protected Resource Metadata, in the spec's order."""
    if challenge is not None and challenge.resource_metadata:
        return [_http_url(challenge.resource_metadata, "the challenge's resource_metadata")]
    parts = urlsplit(server_url)
    origin = _origin(server_url)
    urls = []
    path = parts.path.rstrip("/")
    if path:
        urls.append(f"{origin}/.well-known/oauth-protected-resource{path}")
    urls.append(root_prm_url(server_url))
    return urls


def as_metadata_urls(issuer: str) -> list[str]:
    """Where to look for an issuer's metadata: RFC 8414, then OpenID, in the spec's order."""
    parts = urlsplit(issuer)
    origin = _origin(issuer)
    path = parts.path.rstrip("/")
    if path:
        return [
            f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration",
        ]
    return [
        f"{origin}/.well-known/oauth-authorization-server",
        f"{origin}/.well-known/openid-configuration",
    ]


def _http_url(value: object, what: str, *, destination: bool = True) -> str:
    """A URL from a server, checked before any use: parsable (no control character or
    space, a closed IPv6 bracket, a valid port), https (http only for a loopback host: a
    code, a secret or a token must not cross a network in clear), no fragment."""
    if not isinstance(value, str) or not value:
        raise DiscoveryError(f"{what} is missing or not a string")
    if len(value) > _MAX_URL or any(ord(c) <= 0x20 or 0x7F <= ord(c) <= 0x9F for c in value):
        raise DiscoveryError(f"{what} is not a valid URL (a control character or a space)")
    try:
        parts = urlsplit(value)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise DiscoveryError(f"{what} is not a valid URL (its host or port)") from None
    if parts.scheme not in ("https", "http") or not parts.netloc or not host:
        raise DiscoveryError(f"{what} is not an http(s) URL")
    if destination and parts.scheme == "http" and not is_loopback(host):
        raise DiscoveryError(
            f"{what} is plain http:// on a host that is not this machine (https is required)"
        )
    if parts.fragment:
        raise DiscoveryError(f"{what} has a fragment")
    return value


def _str_list(value: object, what: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DiscoveryError(f"{what} is not a list of strings")
    return tuple(value[:_MAX_SCOPES])


def _lenient_str_list(value: object) -> tuple[str, ...] | None:
    """An optional extension's list: a malformed one counts as absent, not as broken
    metadata (the server still works without the extension)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return tuple(value[:_MAX_SCOPES])


@attrs.frozen(kw_only=True)
class ResourceMetadata:
    """The parts of RFC 9728 metadata we use."""

    resource: str | None
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None = None

    @classmethod
    def from_json(cls, data: object) -> ResourceMetadata:
        if not isinstance(data, dict):
            raise DiscoveryError("protected resource metadata is not a JSON object")
        resource = data.get("resource")
        if resource is not None:
            resource = _http_url(resource, "its 'resource'", destination=False)
        servers = _str_list(data.get("authorization_servers"), "its 'authorization_servers'")
        if not servers:
            raise DiscoveryError("protected resource metadata lists no authorization_servers")
        for server in servers:
            _http_url(server, "an authorization server")
        return cls(
            resource=resource,
            authorization_servers=servers,
            scopes_supported=_str_list(data.get("scopes_supported"), "its 'scopes_supported'"),
        )


@attrs.frozen(kw_only=True)
class AuthServerMetadata:
    """The parts of RFC 8414 / OpenID metadata we use, checked."""

    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str
    registration_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    code_challenge_methods_supported: tuple[str, ...] | None = None
    token_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    grant_types_supported: tuple[str, ...] | None = None
    client_id_metadata_document_supported: bool = False
    authorization_response_iss_parameter_supported: bool = False
    #: RFC 9449: the algorithms it takes in DPoP proofs (None: no DPoP advertised).
    dpop_signing_alg_values_supported: tuple[str, ...] | None = None
    #: True when we made these up from the 2025-03-26 default endpoints.
    defaults: bool = False

    @classmethod
    def from_json(cls, data: object, *, expected_issuer: str | None) -> AuthServerMetadata:
        """Parse and check a metadata document.

        Args:
            expected_issuer: the issuer the document's URL was built from; the document's
                ``issuer`` must equal it exactly (RFC 8414 section 3.3). None for the
                2025-03-26 fallback (the document was found at the MCP server's origin,
                not from an issuer): the caller checks the issuer's origin then.
        """
        if not isinstance(data, dict):
            raise DiscoveryError("authorization server metadata is not a JSON object")
        issuer = data.get("issuer")
        if expected_issuer is not None and issuer != expected_issuer:
            shown = issuer if isinstance(issuer, str) else "(none)"
            raise DiscoveryError(
                f"its issuer {shown[:_MAX_URL]!r} is not the expected {expected_issuer!r}"
                " (refused: a mismatched issuer is how mix-up attacks work)"
            )
        issuer = _http_url(issuer, "its 'issuer'")
        auth = data.get("authorization_endpoint")
        return cls(
            issuer=issuer,
            authorization_endpoint=(
                _http_url(auth, "its 'authorization_endpoint'") if auth is not None else None
            ),
            token_endpoint=_http_url(data.get("token_endpoint"), "its 'token_endpoint'"),
            registration_endpoint=(
                _http_url(data["registration_endpoint"], "its 'registration_endpoint'")
                if data.get("registration_endpoint") is not None
                else None
            ),
            scopes_supported=_str_list(data.get("scopes_supported"), "scopes_supported"),
            code_challenge_methods_supported=_str_list(
                data.get("code_challenge_methods_supported"), "code_challenge_methods_supported"
            ),
            token_endpoint_auth_methods_supported=_str_list(
                data.get("token_endpoint_auth_methods_supported"),
                "token_endpoint_auth_methods_supported",
            ),
            grant_types_supported=_str_list(
                data.get("grant_types_supported"), "grant_types_supported"
            ),
            client_id_metadata_document_supported=data.get("client_id_metadata_document_supported")
            is True,
            authorization_response_iss_parameter_supported=data.get(
                "authorization_response_iss_parameter_supported"
            )
            is True,
            dpop_signing_alg_values_supported=_lenient_str_list(
                data.get("dpop_signing_alg_values_supported")
            ),
        )

    @classmethod
    def legacy_defaults(cls, server_url: str) -> AuthServerMetadata:
        """2025-03-26: no metadata anywhere; the default endpoints at the server's origin."""
        origin = _http_url(_origin(server_url), "the server's origin, as its authorization server")
        return cls(
            issuer=origin,
            authorization_endpoint=f"{origin}/authorize",
            token_endpoint=f"{origin}/token",
            registration_endpoint=f"{origin}/register",
            # That revision made PKCE S256 mandatory for every client and server.
            code_challenge_methods_supported=("S256",),
            defaults=True,
        )


def same_origin(a: str, b: str) -> bool:
    """Whether two URLs have one origin (scheme, host and port, in canonical form)."""
    x, y = urlsplit(canonical_resource(a)), urlsplit(canonical_resource(b))
    return (x.scheme, x.netloc) == (y.scheme, y.netloc)


async def fetch_json(client: httpx.AsyncClient, url: str) -> tuple[int, Any]:
    """GET a JSON document: (status, parsed body or None). Bounded in size.

    Raises:
        DiscoveryError: the server could not be reached, or answered 2xx with no JSON.
    """
    try:
        async with client.stream(
            "GET", url, headers={"Accept": "application/json"}, follow_redirects=False
        ) as response:
            status = response.status_code
            if status != 200:
                return status, None
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT:
                    raise DiscoveryError(f"{url} is larger than {MAX_DOCUMENT} bytes")
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise DiscoveryError(f"cannot fetch {url}: {failure_name(exc)}") from None
    try:
        return status, orjson.loads(body)
    except orjson.JSONDecodeError:
        raise DiscoveryError(f"{url} did not answer with JSON") from None
