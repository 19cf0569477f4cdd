"""Talking to an authorization server's endpoints: the half of the OAuth flow that sends.

Why apart from :mod:`agenthost.auth.flow`: these are the steps where our credentials and
the server's answers meet, and each has a rule of its own: a configured credential goes
only to the configured issuer (:meth:`Exchange._check_issuer`); an answer is read up to
:data:`~agenthost.auth.discovery.MAX_DOCUMENT` bytes, streamed (:meth:`Exchange._post`);
one deadline covers a whole exchange however slowly it drips (:meth:`Exchange._deadline`);
text quoted from an answer is scrubbed of every secret (:class:`Redactor`). The flow
(:class:`~agenthost.auth.flow.OAuth`) inherits them and drives the order of things.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
import orjson
import trio
from authlib.oauth2.rfc6749.parameters import prepare_token_request

from agenthost.auth.discovery import MAX_DOCUMENT, AuthServerMetadata, canonical_resource
from agenthost.auth.dpop import (
    DPoPKey,
    Nonces,
    asks_for_nonce,
    nonce_of,
    proof,
    uses_dpop,
    valid_nonce,
)
from agenthost.auth.grants import client_auth, default_alg, token_form
from agenthost.auth.loopback import UrlOpener
from agenthost.auth.settings import OAuthSettings
from agenthost.auth.state import Client, IssuerState, Tokens, now
from agenthost.errors import AuthorizationError
from agenthost.redaction import add_runtime_secret, add_secret, redact_url
from agenthost.transports._httpx import failure_name

__all__ = ["Exchange", "Redactor"]

log = logging.getLogger("agenthost.auth")

_MAX_TEXT: Final = 200


def _error_code(raw: bytes) -> str | None:
    """The OAuth ``error`` of an error answer, if it is a JSON object with one."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, str) else None


class Redactor:
    """The secrets of one flow, scrubbed from text quoted in its errors (and registered
    process-wide: configured ones for good, run-time ones under their bound)."""

    def __init__(self, *configured: str | None) -> None:
        self.secrets: set[str] = set()
        self.configured = frozenset(value for value in configured if value)
        self.add(*configured)

    def add(self, *values: str | None) -> None:
        for value in values:
            if value and len(value) >= 4:
                self.secrets.add(value)
                # And the process-wide registry: every log record, the CLI's output and
                # errors built from server text are scrubbed of it too. Configured values
                # are never forgotten there; the rest came from a server at run time.
                if value in self.configured:
                    add_secret(value)
                else:
                    add_runtime_secret(value, credential=True)

    def __call__(self, text: str) -> str:
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        text = " ".join(text.split())
        return text[:_MAX_TEXT] + ("..." if len(text) > _MAX_TEXT else "")


class Exchange:
    """The sending half of :class:`~agenthost.auth.flow.OAuth` (a base class of it)."""

    server: str
    url: str
    settings: OAuthSettings
    _http: httpx.AsyncClient
    _opener: UrlOpener | None
    _redact: Redactor
    _current: str | None
    _resource: str | None
    _relogin: bool
    _refused: bool
    _exchange: trio.CancelScope | None
    #: DPoP: the servers' nonces, and the key last loaded from the saved state.
    _nonces: Nonces
    _dpop_loaded: DPoPKey | None

    def _error(self, problem: str, fix: str | None = None) -> AuthorizationError:
        text = f"authorization failed: {self._redact(problem)}"
        if fix:
            text += f"; {fix}"
        return AuthorizationError(text, server=self.server)

    def _login_hint(self) -> str:
        return f"run `agenthost auth login {self.server}`"

    def _check_audience(self, resource: str) -> None:
        """A ``resource`` that is the origin root while the server has a path asks for a
        token valid at every server of that origin (only the origin's root document may,
        :func:`~agenthost.auth.discovery.resource_allowed`): a warning, and refused
        outright with configured credentials (ours, so the widest audience is ours to lose)."""
        parts = urlsplit(canonical_resource(resource))
        if parts.path or not urlsplit(canonical_resource(self.url)).path:
            return
        if self.settings.holds_secret:
            raise self._error(
                f"the server asks for tokens for its whole origin {resource!r}, valid at"
                " every server there (refused with configured client credentials)",
                "ask the server's operator to set its resource to the server's own URL",
            )
        log.warning(
            "%s: the server asks for tokens for its whole origin %s: they are valid at"
            " every server there",
            self.server,
            resource,
        )

    def _choose_issuer(self, listed: tuple[str, ...]) -> str:
        """The authorization server to use among those a PRM lists (RFC 9728 section 7.6
        leaves the choice to the client): the configured ``issuer``, else the one of the
        saved login, when listed; else the first. Listing a thief first must not send a
        person to its login page, nor turn a pinned login into a refusal."""
        for known in (self.settings.issuer, self._current):
            if known is not None and known in listed:
                return known
        return listed[0]

    def _check_issuer(self, named: str) -> None:
        """Refuse an authorization server the user did not choose, before anything is sent.

        A configured credential goes only to the configured ``issuer`` (none configured:
        refused, naming the issuer to set). Without credentials, a server that names
        another issuer than the one of the saved login gets nothing until the user logs
        in again (``auth login``, or the browser login when a person is there).
        """
        settings = self.settings
        where = f"[servers.{self.server}.oauth]"
        if settings.issuer is not None:
            if named != settings.issuer:
                raise self._error(
                    f"the server names the authorization server {named!r}, not the issuer"
                    f" {settings.issuer!r} of {where} (refused: nothing was sent to it)",
                    f'if the server really moved, set issuer = "{named}" in {where}',
                )
            return
        if settings.holds_secret:
            raise self._error(
                f"the server names the authorization server {named!r}; configured client"
                " credentials are sent only to an issuer named in the config (nothing was"
                " sent)",
                f'if you trust it, set issuer = "{named}" in {where}',
            )
        current = self._current
        if current is None or named == current or self._relogin:
            return
        if self._opener is not None:
            # A person is there: the browser login at the new server is the user's
            # choice (SEP-2352: register again there; nothing of the old one is reused).
            log.warning(
                "%s: the server moved to the authorization server %s; logging in there",
                self.server,
                named,
            )
        else:
            raise self._error(
                f"the server now names the authorization server {named!r}, not {current!r}"
                " of the saved login (refused: no token or secret goes to it)",
                self._login_hint() + " to trust it",
            )

    def _configured_client(self, meta: AuthServerMetadata) -> Client | None:
        settings = self.settings
        if not settings.client_id:
            return None
        method = settings.auth_method
        if method is None:
            if settings.client_secret:
                supported = meta.token_endpoint_auth_methods_supported
                method = (
                    "client_secret_post"
                    if supported
                    and "client_secret_basic" not in supported
                    and "client_secret_post" in supported
                    else "client_secret_basic"
                )
            else:
                method = "none"
        return Client(
            client_id=settings.client_id,
            client_secret=settings.client_secret,
            method=method,
            source="config",
        )

    async def _register(self, meta: AuthServerMetadata, redirect_uri: str, scopes: Any) -> Client:
        supported = meta.token_endpoint_auth_methods_supported
        if supported is None or "none" in supported:
            method = "none"
        elif "client_secret_basic" in supported:
            method = "client_secret_basic"
        elif "client_secret_post" in supported:
            method = "client_secret_post"
        else:
            method = "none"
        body: dict[str, Any] = {
            "client_name": self.settings.client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": "native",
        }
        if scopes:
            body["scope"] = " ".join(scopes)
        endpoint = meta.registration_endpoint
        assert endpoint is not None
        response, raw = await self._post("registration endpoint", endpoint, json=body)
        data = self._json_object(response, raw, "registration endpoint", endpoint)
        if response.status_code not in (200, 201) or not isinstance(data.get("client_id"), str):
            raise self._error(
                f"client registration at {redact_url(endpoint)} failed (HTTP {response.status_code}"
                f"{self._oauth_error(data)})",
                f"set client_id in [servers.{self.server}.oauth] to use a pre-registered client",
            )
        secret = data.get("client_secret")
        secret = secret if isinstance(secret, str) and secret else None
        self._redact.add(secret)
        granted = data.get("token_endpoint_auth_method")
        if isinstance(granted, str) and granted in (
            "none",
            "client_secret_basic",
            "client_secret_post",
        ):
            method = granted
        if method != "none" and secret is None:
            method = "none"
        log.info("%s: registered a client with %s", self.server, meta.issuer)
        return Client(
            client_id=data["client_id"],
            client_secret=secret,
            method=method,
            redirect_uris=(redirect_uri,),
            source="dcr",
        )

    async def _token_request(
        self,
        endpoint: str,
        client: Client,
        params: dict[str, Any],
        *,
        issuer: str,
        dpop: DPoPKey | None = None,
    ) -> Tokens:
        """POST to the token endpoint with client authentication (and a DPoP proof with
        ``dpop``: the tokens are then bound to that key); parse the answer."""
        self._refused = False
        if self.settings.holds_secret and issuer != self.settings.issuer:
            # Here too, not only at discovery: a refresh of a login saved before the
            # secret was configured goes to the saved issuer, which no one pinned.
            self._check_issuer(issuer)
        grant, form = token_form(params, self._resource)
        for attempt in range(2):
            headers = {
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            }
            # Signed afresh for the retry: an assertion's jti may be used once only.
            body, headers = self._client_auth(client, endpoint, form, headers, issuer)
            if dpop is not None:
                headers["DPoP"] = proof(dpop, "POST", endpoint, nonce=self._nonces.get(endpoint))
            response, raw = await self._post(
                "token endpoint",
                endpoint,
                fix="check your network, then retry",
                content=body.encode(),
                headers=headers,
            )
            if dpop is None or not self._nonces.update(
                endpoint, response.headers.get("dpop-nonce")
            ):
                break
            if attempt or response.status_code not in (400, 401):
                break
            if _error_code(raw) != "use_dpop_nonce":
                break
            # RFC 9449 section 8: retry once with the nonce the server just gave.
        data = self._json_object(response, raw, "token endpoint", endpoint)
        self._refused = response.status_code in (400, 401)
        if response.status_code != 200:
            error = data.get("error")
            fix = (
                self._login_hint()
                if error == "invalid_grant"
                else f"check the client settings in [servers.{self.server}.oauth]"
            )
            raise self._error(
                f"the token endpoint {redact_url(endpoint)} refused the {grant} request"
                f" (HTTP {response.status_code}{self._oauth_error(data)})",
                fix,
            )
        access = data.get("access_token")
        if not isinstance(access, str) or not access:
            raise self._error(f"the token endpoint {redact_url(endpoint)} returned no access_token")
        token_type = self._token_type(endpoint, data.get("token_type"), dpop)
        refresh = data.get("refresh_token")
        refresh = refresh if isinstance(refresh, str) and refresh else None
        self._redact.add(access, refresh)
        expires_in = data.get("expires_in")
        lifetime: float | None = None
        if (
            isinstance(expires_in, (int, float))
            and not isinstance(expires_in, bool)
            and math.isfinite(expires_in)
        ):
            # expires_in <= 0: expired already (used for the request at hand, refreshed
            # before the next), never "forever".
            lifetime = max(0.0, float(expires_in))
        expires_at = now() + lifetime if lifetime is not None else None
        scope = data.get("scope")
        return Tokens(
            access_token=access,
            refresh_token=refresh,
            expires_at=expires_at,
            scope=scope if isinstance(scope, str) else None,
            lifetime=lifetime,
            token_type=token_type,
        )

    def _token_type(self, endpoint: str, token_type: object, dpop: DPoPKey | None) -> str:
        """``DPoP`` (only when we sent a proof) or ``Bearer``; a Bearer token when we asked
        for DPoP is taken (RFC 9449 section 5: the server chose not to bind it) unless
        ``dpop = true`` says the binding matters, as the RFC lets a client decide."""
        kind = token_type.lower() if isinstance(token_type, str) else None
        if kind == "dpop" and dpop is not None:
            return "DPoP"
        if kind == "bearer" and dpop is not None and self.settings.dpop is True:
            raise self._error(
                f"the token endpoint {redact_url(endpoint)} issued a Bearer token, not a"
                " DPoP-bound one (refused: dpop = true)",
                f'set dpop = "auto" in [servers.{self.server}.oauth] to accept Bearer tokens',
            )
        if kind == "bearer":
            return "Bearer"
        expected = "DPoP or Bearer" if dpop is not None else "Bearer"
        raise self._error(
            f"the token endpoint {redact_url(endpoint)} returned a token of type"
            f" {str(token_type)[:20]!r}, not {expected}"
        )

    # -- DPoP (RFC 9449)

    def _dpop_key(self, state: IssuerState, meta: AuthServerMetadata | None) -> DPoPKey | None:
        """The key to prove possession with at ``state``'s authorization server, or None.

        A saved key is used as long as ``dpop`` is not false (its tokens, the refresh
        token too, are bound to it); else a new one is made when :func:`uses_dpop` says
        so for ``meta`` (None, for a refresh: no new key).
        """
        if self.settings.dpop is False:
            return None
        if state.dpop_key is not None:
            cached = self._dpop_loaded
            if cached is not None and cached.matches(state.dpop_key):
                return cached
            try:
                key = DPoPKey.from_saved(state.dpop_key)
            except ValueError:
                log.warning("%s: ignoring an unreadable saved DPoP key", self.server)
                state.dpop_key = None
            else:
                self._redact.add(key.secret)
                self._dpop_loaded = key
                return key
        if meta is None or not uses_dpop(
            self.settings.dpop, meta.dpop_signing_alg_values_supported
        ):
            return None
        key = self._dpop_loaded = DPoPKey.generate()
        state.dpop_key = key.saved()
        self._redact.add(key.secret)
        return key

    def _present(
        self, request: httpx.Request, token: str | None, state: IssuerState | None
    ) -> None:
        """Put ``token`` on ``request``: ``DPoP`` with a fresh proof for a DPoP-bound
        token (RFC 9449 section 7.1), else ``Bearer``."""
        if token is None:
            return
        tokens = state.tokens if state is not None else None
        key = self._dpop_key(state, None) if state is not None and tokens and tokens.dpop else None
        if key is None:
            request.headers["Authorization"] = f"Bearer {token}"
            request.headers.pop("DPoP", None)
            return
        request.headers["Authorization"] = f"DPoP {token}"
        nonce = self._nonces.get(request.url)
        request.headers["DPoP"] = proof(
            key, request.method, request.url, access_token=token, nonce=nonce
        )

    def _nonce_retry(
        self, request: httpx.Request, response: httpx.Response, state: IssuerState | None
    ) -> bool:
        """Remember the nonce a response to a DPoP request carries; True (the request
        re-signed with it) when the server refused the request for want of it: a 401
        ``DPoP error="use_dpop_nonce"`` with a nonce other than the one sent (RFC 9449
        section 9). Once per request: the caller never asks twice."""
        sent = request.headers.get("DPoP")
        if sent is None:
            return False
        given = response.headers.get("dpop-nonce")
        self._nonces.update(request.url, given)
        if response.status_code != 401 or valid_nonce(given) is None or given == nonce_of(sent):
            return False
        if not asks_for_nonce(response.headers.get_list("www-authenticate")):
            return False
        token = request.headers["Authorization"].partition(" ")[2]
        self._present(request, token, state)
        return True

    async def _workload_jwt(self) -> str:
        """The workload's JWT: configured, or read from its file now (it rotates)."""
        path = self.settings.assertion_file
        if path is None:
            assert self.settings.assertion is not None
            value = self.settings.assertion
        else:
            try:
                value = (await trio.Path(path).read_text("utf-8")).strip()
            except OSError as exc:
                raise self._error(
                    f"cannot read the assertion_file {path!r}: {exc.strerror}",
                    f"check assertion_file in [servers.{self.server}.oauth]",
                ) from None
        self._redact.add(value)
        return value

    async def _id_jag(self, audience: str, scopes: tuple[str, ...] | None) -> str:
        """Cross-app access: exchange the IdP's ID token for an ID-JAG (RFC 8693).

        The ID-JAG names the authorization server (``audience``) and this MCP server
        (``resource``); the authorization server takes it as a jwt-bearer assertion.
        """
        settings = self.settings
        endpoint = settings.idp_token_endpoint
        assert endpoint is not None and settings.id_token is not None
        self._redact.add(settings.id_token, settings.idp_client_secret)
        fields: dict[str, str] = {
            "subject_token": settings.id_token,
            "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
            "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
            "audience": audience,
            "resource": self._resource or canonical_resource(self.url),
        }
        if scopes:
            fields["scope"] = " ".join(scopes)
        body: str = prepare_token_request(
            "urn:ietf:params:oauth:grant-type:token-exchange", **fields
        )
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        if settings.idp_client_id:
            idp_client = Client(
                client_id=settings.idp_client_id,
                client_secret=settings.idp_client_secret,
                method="client_secret_basic" if settings.idp_client_secret else "none",
            )
            body, headers = self._client_auth(idp_client, endpoint, body, headers, "")
        response, raw = await self._post(
            "identity provider", endpoint, content=body.encode(), headers=headers
        )
        data = self._json_object(response, raw, "identity provider token endpoint", endpoint)
        jag = data.get("access_token")
        if response.status_code != 200 or not isinstance(jag, str) or not jag:
            raise self._error(
                f"the identity provider {redact_url(endpoint)} refused the token exchange"
                f" (HTTP {response.status_code}{self._oauth_error(data)})",
                "sign in to your identity provider again and update id_token",
            )
        self._redact.add(jag)
        return jag

    def _client_auth(
        self, client: Client, endpoint: str, body: str, headers: dict[str, str], issuer: str
    ) -> tuple[str, dict[str, str]]:
        """:func:`~agenthost.auth.grants.client_auth` with this server's signing key; the
        signed assertion joins the secrets scrubbed from messages."""
        key = alg = None
        if client.method == "private_key_jwt":
            key = self._signing_key()
            alg = self.settings.signing_algorithm or default_alg(key)
        body, headers, assertion = client_auth(
            client, endpoint, body, headers, issuer=issuer, key=key, alg=alg
        )
        self._redact.add(assertion)
        return body, headers

    def _signing_key(self) -> Any:
        from joserfc.jwk import ECKey, OKPKey, RSAKey

        pem = self.settings.private_key
        if not pem:
            raise self._error("private_key_jwt needs a private key", "set private_key_file")
        for kind in (RSAKey, ECKey, OKPKey):
            try:
                return kind.import_key(pem)
            except Exception:  # joserfc raises several types; try the next kind
                continue
        raise self._error(
            "the configured private key is not an RSA, EC or OKP PEM key",
            f"check private_key in [servers.{self.server}.oauth]",
        )

    async def _post(
        self, what: str, endpoint: str, *, fix: str | None = None, **request: Any
    ) -> tuple[httpx.Response, bytes]:
        """POST to an authorization-server endpoint and read the answer, streamed and
        given up at :data:`MAX_DOCUMENT` bytes (a 200 MiB answer is never held).

        Error handling: any httpx error becomes one :class:`AuthorizationError` naming
        ``what`` and the (redacted) endpoint, with only the error's type: httpx's own
        message can quote the request.
        """
        try:
            async with self._http.stream("POST", endpoint, **request) as response:
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_DOCUMENT:
                        raise self._error(
                            f"the {what} {redact_url(endpoint)} answered more than"
                            f" {MAX_DOCUMENT // 1024} KiB (refused)"
                        )
            return response, bytes(body)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise self._error(
                f"cannot reach the {what} {redact_url(endpoint)}: {failure_name(exc)}", fix
            ) from None

    @contextmanager
    def _deadline(self, what: str) -> Iterator[None]:
        """One deadline for a whole exchange with the authorization server, however slowly
        each of its answers drips (httpx's timeouts are per read). Nested: the outer one
        governs; :meth:`_authorization_code` lifts it while the browser has the user."""
        if self._exchange is not None:
            yield
            return
        seconds = self.settings.exchange_timeout
        with trio.move_on_after(seconds) as scope:
            self._exchange = scope
            try:
                yield
            finally:
                self._exchange = None
        if scope.cancelled_caught:
            raise self._error(
                f"the authorization server did not finish {what} within {seconds:g} s",
                "retry later, or raise exchange_timeout in"
                f" [servers.{self.server}.oauth] for a slow authorization server",
            )

    def _json_object(
        self, response: httpx.Response, raw: bytes, what: str, url: str
    ) -> dict[str, Any]:
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        try:
            data = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            data = None
        if not isinstance(data, dict):
            raise self._error(
                f"the {what} {redact_url(url)} answered HTTP {response.status_code} with"
                f" {kind or 'no content type'}, not a JSON object",
                "check the server's authorization setup (a proxy or login page may be in the way)",
            )
        return data

    def _oauth_error(self, data: dict[str, Any]) -> str:
        error = data.get("error")
        if not isinstance(error, str):
            return ""
        text = f": {error}"
        description = data.get("error_description")
        if isinstance(description, str) and description:
            text += f": {description}"
        return self._redact(text)
