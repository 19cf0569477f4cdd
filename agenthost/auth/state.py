"""What the OAuth flow knows per server: its client at each authorization server, the
tokens, the scopes asked for, and the saved form of all of it.

Plain attrs data and two pure functions (:func:`parse_state`, :func:`dump_state`), so the
saved format can be read and tested without an ``httpx.Auth`` driver around it. The
store (:mod:`agenthost.auth.store`) keeps the text; nothing here does I/O.
"""

from __future__ import annotations

import time
from typing import Any, Final

import attrs
import orjson

__all__ = [
    "REFRESH_LEEWAY",
    "STATE_VERSION",
    "Client",
    "IssuerState",
    "SavedState",
    "Tokens",
    "dump_state",
    "now",
    "parse_state",
]

#: Refresh this many seconds before the access token expires.
REFRESH_LEEWAY: Final = 60.0
#: The version of the saved format; another version is ignored (a fresh login).
STATE_VERSION: Final = 1


def now() -> float:
    return time.time()


@attrs.define(kw_only=True)
class Client:
    client_id: str
    client_secret: str | None = attrs.field(default=None, repr=False)
    method: str = "none"
    redirect_uris: tuple[str, ...] = ()
    #: "config", "cimd" or "dcr"; only "dcr" clients are saved.
    source: str = "config"


@attrs.define(kw_only=True)
class Tokens:
    access_token: str = attrs.field(repr=False)
    refresh_token: str | None = attrs.field(default=None, repr=False)
    expires_at: float | None = None
    scope: str | None = None
    #: Seconds the token was issued for (``expires_in``): a short-lived token is
    #: refreshed at half its life, not a whole :data:`REFRESH_LEEWAY` early (which
    #: would refresh a 30 s token before every request).
    lifetime: float | None = None
    #: "Bearer", or "DPoP" for a token bound to the issuer state's ``dpop_key``.
    token_type: str = "Bearer"

    @property
    def dpop(self) -> bool:
        return self.token_type == "DPoP"

    def expiring(self, leeway: float = REFRESH_LEEWAY) -> bool:
        if self.lifetime is not None:
            leeway = min(leeway, self.lifetime / 2)
        return self.expires_at is not None and now() >= self.expires_at - leeway


@attrs.define(kw_only=True)
class IssuerState:
    token_endpoint: str
    client: Client | None = None
    tokens: Tokens | None = None
    #: Scopes asked for so far (the step-up union grows from it).
    scopes: tuple[str, ...] | None = None
    #: Authorization server facts needed to refresh without re-discovering.
    auth_methods: tuple[str, ...] | None = None
    #: The private JWK of our DPoP key at this authorization server (RFC 9449): its
    #: tokens (the refresh token too) are bound to it. A secret: never in a repr.
    dpop_key: dict[str, Any] | None = attrs.field(default=None, repr=False)


@attrs.define(kw_only=True)
class SavedState:
    """Everything the flow keeps for one server between runs."""

    issuers: dict[str, IssuerState] = attrs.field(factory=dict)
    #: The issuer whose tokens are in use (None: none yet).
    current: str | None = None
    #: The RFC 8707 resource the tokens were asked for.
    resource: str | None = None


def parse_state(raw: str, url: str) -> SavedState | None:
    """The saved state of the server at ``url``; None if it is for another URL (its
    tokens are not for this resource) or another format version.

    Raises:
        ValueError, AttributeError, KeyError, TypeError: the text is damaged (the
        caller ignores it and logs in afresh).
    """
    data = orjson.loads(raw)
    if data.get("version") != STATE_VERSION or data.get("url") != url:
        return None
    state = SavedState(resource=data.get("resource"))
    for issuer, entry in data.get("issuers", {}).items():
        client = entry.get("client")
        tokens = entry.get("tokens")
        state.issuers[issuer] = IssuerState(
            token_endpoint=entry["token_endpoint"],
            client=Client(**client) if client else None,
            tokens=Tokens(**tokens) if tokens else None,
            scopes=tuple(entry["scopes"]) if entry.get("scopes") is not None else None,
            auth_methods=(tuple(entry["auth_methods"]) if entry.get("auth_methods") else None),
            dpop_key=entry["dpop_key"] if isinstance(entry.get("dpop_key"), dict) else None,
        )
    current = data.get("current")
    state.current = current if current in state.issuers else None
    return state


def dump_state(url: str, state: SavedState) -> str:
    """The text :func:`parse_state` reads back. Only registered (``dcr``) clients are
    saved: a configured or CIMD client comes from the config every time."""
    issuers: dict[str, Any] = {}
    for issuer, entry in state.issuers.items():
        client = entry.client
        issuers[issuer] = {
            "token_endpoint": entry.token_endpoint,
            "client": attrs.asdict(client) if client and client.source == "dcr" else None,
            "tokens": attrs.asdict(entry.tokens) if entry.tokens else None,
            "scopes": list(entry.scopes) if entry.scopes is not None else None,
            "auth_methods": list(entry.auth_methods) if entry.auth_methods else None,
            "dpop_key": entry.dpop_key,
        }
    data = {
        "version": STATE_VERSION,
        "url": url,
        "resource": state.resource,
        "current": state.current,
        "issuers": issuers,
    }
    return orjson.dumps(data).decode()
