"""OAuth 2.1 for remote MCP servers (the MCP authorization spec), as an ``httpx.Auth``.

* :class:`OAuth`: the flow for one server; the HTTP transports put it on their client.
* :class:`OAuthSettings`: ``[servers.NAME.oauth]``.
* :class:`TokenStore` and its implementations: where client registrations and tokens
  persist (the OS keyring, else 0600 files under the XDG data directory).
* :data:`URL_OPENER`: how an interactive login shows its URL (unset: headless).

Names load on first use: loading a config never imports Authlib or the keyring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agenthost._util import lazy_getattr

_LAZY = {
    "MAX_STEP_UPS": "agenthost.auth.flow",
    "OAuth": "agenthost.auth.flow",
    "OAuthStatus": "agenthost.auth.flow",
    "URL_OPENER": "agenthost.auth.loopback",
    "UrlOpener": "agenthost.auth.loopback",
    "terminal_opener": "agenthost.auth.loopback",
    "OAuthSettings": "agenthost.auth.settings",
    "parse_oauth_table": "agenthost.auth.settings",
    "FileTokenStore": "agenthost.auth.store",
    "KeyringTokenStore": "agenthost.auth.store",
    "MemoryTokenStore": "agenthost.auth.store",
    "TokenStore": "agenthost.auth.store",
    "TOKEN_STORE": "agenthost.auth.store",
    "auth_context": "agenthost.auth.store",
    "default_token_store": "agenthost.auth.store",
}

if TYPE_CHECKING:
    from agenthost.auth.flow import MAX_STEP_UPS, OAuth, OAuthStatus
    from agenthost.auth.loopback import URL_OPENER, UrlOpener, terminal_opener
    from agenthost.auth.settings import OAuthSettings, parse_oauth_table
    from agenthost.auth.store import (
        TOKEN_STORE,
        FileTokenStore,
        KeyringTokenStore,
        MemoryTokenStore,
        TokenStore,
        auth_context,
        default_token_store,
    )

__all__ = [
    "MAX_STEP_UPS",
    "TOKEN_STORE",
    "URL_OPENER",
    "FileTokenStore",
    "KeyringTokenStore",
    "MemoryTokenStore",
    "OAuth",
    "OAuthSettings",
    "OAuthStatus",
    "TokenStore",
    "UrlOpener",
    "auth_context",
    "default_token_store",
    "parse_oauth_table",
    "terminal_opener",
]


__getattr__ = lazy_getattr(__name__, _LAZY)
