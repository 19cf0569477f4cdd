"""``[servers.NAME.oauth]``: how agenthost authorizes to one remote server.

Every key is optional: with none, a server that answers 401 is authorized with the
authorization-code flow (a browser on an interactive terminal) and a client registered
through a Client ID Metadata Document or Dynamic Client Registration. Values from the
environment (``client_secret = "${MY_SECRET}"``) are expanded by the config loader and
never shown: ``repr()`` hides the secret and the private key.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, get_args
from urllib.parse import urlsplit

import attrs

from agenthost.errors import ConfigError

__all__ = [
    "GRANTS",
    "KEYS",
    "TOKEN_AUTH_METHODS",
    "OAuthSettings",
    "is_loopback",
    "issuer_url_ok",
    "parse_oauth_table",
]

Grant = Literal["authorization_code", "client_credentials", "enterprise", "jwt_bearer"]
TokenAuthMethod = Literal["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]
GRANTS: Final = get_args(Grant)
TOKEN_AUTH_METHODS: Final = get_args(TokenAuthMethod)

#: Every key of ``[servers.NAME.oauth]``.
KEYS: Final = (
    "enabled", "grant", "client_id", "client_secret", "token_endpoint_auth_method",
    "private_key", "private_key_file", "signing_algorithm", "client_metadata_url", "scopes",
    "redirect_port", "client_name", "open_browser", "login_timeout",
    "idp_token_endpoint", "idp_client_id", "idp_client_secret", "id_token", "assertion",
    "assertion_file", "issuer", "exchange_timeout", "dpop",
)  # fmt: skip


def issuer_url_ok(url: str) -> bool:
    """An authorization server URL we may talk to: https, or http on a loopback host
    (plain http elsewhere would put codes and tokens on the wire in clear)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return False
    if not host or parts.query or parts.fragment or any(ord(c) < 0x21 for c in url):
        return False
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and is_loopback(host)


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hidden(value: object) -> str:
    return "None" if value is None else "'***'"


@attrs.frozen(kw_only=True)
class OAuthSettings:
    """OAuth for one server. See docs/config.md, "OAuth"."""

    #: False: never authorize (a 401 is an error; use ``headers`` for a static token).
    enabled: bool = True
    #: ``authorization_code`` (a person logs in once), ``client_credentials`` (headless),
    #: ``enterprise`` (cross-app access: the enterprise IdP's ID token is exchanged for
    #: an ID-JAG, which the authorization server takes in the jwt-bearer grant), or
    #: ``jwt_bearer`` (workload identity: a JWT the platform issues to this workload).
    grant: Grant = "authorization_code"
    #: A pre-registered client; used before any other way of getting one.
    client_id: str | None = None
    client_secret: str | None = attrs.field(default=None, repr=_hidden)
    #: How to authenticate at the token endpoint; default: chosen from the server's list.
    token_endpoint_auth_method: TokenAuthMethod | None = None
    #: PEM private key for ``private_key_jwt`` (or ``private_key_file``).
    private_key: str | None = attrs.field(default=None, repr=_hidden)
    #: A file holding that PEM key (read when the settings are made; relative paths are
    #: relative to the working directory here, to the config file's in the config).
    private_key_file: str | None = None
    #: JWS algorithm of the client assertion; default: from the key (RS256, ES256...).
    signing_algorithm: str | None = None
    #: An HTTPS URL serving our Client ID Metadata Document, used as the client_id.
    client_metadata_url: str | None = None
    #: Extra scopes to ask for, beyond what the server's challenge asks.
    scopes: tuple[str, ...] = ()
    #: Port of the loopback redirect (127.0.0.1); 0 picks a free one each time.
    redirect_port: int = 0
    client_name: str = "agenthost"
    #: Open the browser for the login (the URL is printed either way).
    open_browser: bool = True
    #: Seconds to wait for the browser to come back to the loopback redirect.
    login_timeout: float = 300.0
    #: Seconds for one whole exchange with the authorization server (discovery, client
    #: registration, the token request; or a refresh), however slowly it answers. The
    #: browser's time is not counted.
    exchange_timeout: float = 60.0
    #: ``enterprise``: the IdP's token endpoint (RFC 8693 token exchange) and our client
    #: there, and the user's ID token from the IdP's single sign-on.
    idp_token_endpoint: str | None = None
    idp_client_id: str | None = None
    idp_client_secret: str | None = attrs.field(default=None, repr=_hidden)
    id_token: str | None = attrs.field(default=None, repr=_hidden)
    #: ``jwt_bearer``: the workload's JWT, or a file holding it (read at every token
    #: request, since platforms rotate it, e.g. a Kubernetes projected token).
    assertion: str | None = attrs.field(default=None, repr=_hidden)
    assertion_file: str | None = None
    #: The authorization server's issuer URL. Configured credentials (a client secret, a
    #: private key, an assertion) are sent only to this issuer's endpoints; with such
    #: credentials and no ``issuer`` nothing is sent (no trust on first use for secrets).
    #: Without credentials it pins the issuer a login may use.
    issuer: str | None = None
    #: DPoP-bound tokens (RFC 9449): ``True`` always (a Bearer token is refused),
    #: ``False`` never, ``"auto"`` when the authorization server advertises ES256 proofs.
    dpop: bool | Literal["auto"] = "auto"

    @property
    def holds_secret(self) -> bool:
        """True when a credential of ours (not one the server issued) is configured."""
        return bool(
            self.client_secret
            or self.private_key
            or self.assertion
            or self.assertion_file
            or self.id_token
            or self.idp_client_secret
        )

    def __attrs_post_init__(self) -> None:
        if self.private_key_file is not None:
            if self.private_key is not None:
                raise ConfigError("give private_key or private_key_file, not both", key=None)
            path = Path(self.private_key_file).expanduser()
            try:
                pem = path.read_text("utf-8")
            except OSError as exc:
                raise ConfigError(
                    f"cannot read {str(path)!r}: {exc.strerror}", key="private_key_file"
                ) from None
            object.__setattr__(self, "private_key", pem)  # frozen: set once, here
        if self.grant not in GRANTS:
            raise ConfigError(f"must be one of {', '.join(GRANTS)}", key="grant")
        method = self.token_endpoint_auth_method
        if method is not None and method not in TOKEN_AUTH_METHODS:
            raise ConfigError(
                f"must be one of {', '.join(TOKEN_AUTH_METHODS)}", key="token_endpoint_auth_method"
            )
        if method == "private_key_jwt" and self.private_key is None:
            raise ConfigError("private_key_jwt needs private_key or private_key_file", key=None)
        if method in ("client_secret_basic", "client_secret_post") and not self.client_secret:
            raise ConfigError(f"{method} needs client_secret", key="client_secret")
        if self.grant == "client_credentials" and (
            not self.client_id or not (self.client_secret or self.private_key)
        ):
            raise ConfigError(
                "the client_credentials grant needs client_id and client_secret (or"
                " private_key for private_key_jwt)",
                key="grant",
            )
        if self.grant == "enterprise" and not (
            self.idp_token_endpoint and self.id_token and self.client_id
        ):
            raise ConfigError(
                "the enterprise grant needs idp_token_endpoint, id_token and client_id",
                key="grant",
            )
        if self.grant == "jwt_bearer" and not (
            self.client_id and (self.assertion or self.assertion_file)
        ):
            raise ConfigError(
                "the jwt_bearer grant needs client_id and assertion (or assertion_file)",
                key="grant",
            )
        if self.client_metadata_url is not None and not self.client_metadata_url.startswith(
            "https://"
        ):
            raise ConfigError("must be an https:// URL", key="client_metadata_url")
        if self.issuer is not None and not issuer_url_ok(self.issuer):
            raise ConfigError(
                "must be an https:// URL (http:// only for localhost), without query or fragment",
                key="issuer",
            )
        if not 0 <= self.redirect_port <= 65535:
            raise ConfigError("must be a port number (0 for any free port)", key="redirect_port")
        if not (isinstance(self.dpop, bool) or self.dpop == "auto"):
            raise ConfigError('must be true, false or "auto"', key="dpop")
        for key in ("login_timeout", "exchange_timeout"):
            if not getattr(self, key) > 0:
                raise ConfigError("must be a positive number of seconds", key=key)

    @property
    def auth_method(self) -> TokenAuthMethod | None:
        """The configured method, or the one the configured credentials imply."""
        if self.token_endpoint_auth_method is not None:
            return self.token_endpoint_auth_method
        if self.private_key is not None:
            return "private_key_jwt"
        return None


def parse_oauth_table(value: object, *, base_dir: Path | None = None) -> OAuthSettings:
    """Build :class:`OAuthSettings` from a TOML value (``false`` or a table).

    Raises:
        ConfigError: with ``key`` relative to the ``oauth`` table.
    """
    if value is False:
        return OAuthSettings(enabled=False)
    if value is True:
        return OAuthSettings()
    if not isinstance(value, Mapping):
        raise ConfigError("must be a table ([servers.NAME.oauth]) or false", key=None)
    table: Mapping[str, Any] = value
    for key in table:
        if key not in KEYS:
            raise ConfigError.unknown_key(key, key, KEYS)
    fields: dict[str, Any] = {}

    def text(key: str) -> str | None:
        raw = table.get(key)
        if raw is None:
            return None
        if not isinstance(raw, str) or not raw:
            raise ConfigError("must be a non-empty string", key=key)
        return raw

    for key in (
        "grant", "client_id", "client_secret", "token_endpoint_auth_method", "private_key",
        "signing_algorithm", "client_metadata_url", "client_name", "idp_token_endpoint",
        "idp_client_id", "idp_client_secret", "id_token", "assertion", "issuer",
    ):  # fmt: skip
        if (got := text(key)) is not None:
            fields[key] = got
    if (path := text("private_key_file")) is not None:
        if "private_key" in fields:
            raise ConfigError("give private_key or private_key_file, not both", key=None)
        file = Path(path).expanduser()
        if not file.is_absolute() and base_dir is not None:
            file = base_dir / file
        try:
            fields["private_key"] = file.read_text("utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read {str(file)!r}: {exc.strerror}", key="private_key_file"
            ) from None
    if (assertion_file := text("assertion_file")) is not None:
        file = Path(assertion_file).expanduser()
        if not file.is_absolute() and base_dir is not None:
            file = base_dir / file
        fields["assertion_file"] = str(file)
    for key in ("enabled", "open_browser"):
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError("must be true or false", key=key)
            fields[key] = table[key]
    if "dpop" in table:
        if not (isinstance(table["dpop"], bool) or table["dpop"] == "auto"):
            raise ConfigError('must be true, false or "auto"', key="dpop")
        fields["dpop"] = table["dpop"]
    if "scopes" in table:
        scopes = table["scopes"]
        if isinstance(scopes, str):
            scopes = scopes.split()
        if not isinstance(scopes, list) or not all(isinstance(s, str) and s for s in scopes):
            raise ConfigError("must be a list of scope strings", key="scopes")
        fields["scopes"] = tuple(scopes)
    if "redirect_port" in table:
        port = table["redirect_port"]
        if not isinstance(port, int) or isinstance(port, bool):
            raise ConfigError("must be a port number", key="redirect_port")
        fields["redirect_port"] = port
    for key in ("login_timeout", "exchange_timeout"):
        if key in table:
            seconds = table[key]
            if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
                raise ConfigError("must be a number of seconds", key=key)
            fields[key] = float(seconds)
    return OAuthSettings(**fields)
