"""The 2026-07-28 side of the server: per-request protocol fields, checked and stamped.

A modern client opens no session: every request carries its protocol version and client
capabilities in ``_meta`` (``basic/index.mdx``, "Per-request protocol fields"), and every
result carries the server's identity. Pure functions over plain dicts, so the rules can
be read (and tested) apart from any transport:

* a request with ``io.modelcontextprotocol/protocolVersion`` is a modern request;
* a version we do not speak: -32022 with ``data.supported`` (every revision we serve,
  both eras) and ``data.requested`` (``basic/versioning.mdx``);
* no ``io.modelcontextprotocol/clientCapabilities``: -32602 (the request is malformed);
* each result's ``_meta`` names us (``io.modelcontextprotocol/serverInfo``), and never
  the upstream: an upstream's own protocol keys are dropped from what it answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agenthost.errors import JSONRPCError
from agenthost.protocol import jsonrpc
from agenthost.protocol.converter import unstructure
from agenthost.protocol.revisions import LEGACY_REVISIONS, MODERN_REVISIONS
from agenthost.protocol.types import Implementation

__all__ = [
    "CACHEABLE",
    "META_CLIENT_CAPABILITIES",
    "META_PROTOCOL_VERSION",
    "META_SERVER_INFO",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "check_stamp",
    "modern_stamp",
    "stamp_result",
    "without_upstream_meta",
]

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
#: Methods whose results carry ``ttlMs`` and ``cacheScope`` (``server/utilities/caching``).
CACHEABLE: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
#: ``_meta`` keys the protocol reserves for itself.
_PROTOCOL_META: Final = "io.modelcontextprotocol/"


def modern_stamp(meta: Mapping[str, Any] | None) -> str | None:
    """The protocol version a request names in its ``_meta`` (None: not a modern request)."""
    if meta is None:
        return None
    version = meta.get(META_PROTOCOL_VERSION)
    return version if isinstance(version, str) else None


def check_stamp(version: str, meta: Mapping[str, Any]) -> str:
    """The revision to serve a modern request at.

    Raises:
        JSONRPCError: -32022 for a version we do not serve; -32602 for a request
            without its client capabilities.
    """
    if version not in MODERN_REVISIONS:
        raise JSONRPCError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": [*MODERN_REVISIONS, *LEGACY_REVISIONS], "requested": version[:64]},
        )
    if not isinstance(meta.get(META_CLIENT_CAPABILITIES), Mapping):
        raise JSONRPCError(
            jsonrpc.INVALID_PARAMS,
            f"_meta[{META_CLIENT_CAPABILITIES!r}] is required on every {version} request",
        )
    return version


def without_upstream_meta(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` without the protocol's own ``_meta`` keys an upstream put there (its
    ``serverInfo`` on 2026-07-28): they describe the upstream's session, not ours."""
    meta = result.get("_meta")
    if isinstance(meta, dict) and any(k.startswith(_PROTOCOL_META) for k in meta):
        kept = {k: v for k, v in meta.items() if not k.startswith(_PROTOCOL_META)}
        result = {k: v for k, v in result.items() if k != "_meta"}
        if kept:
            result["_meta"] = kept
    return result


def stamp_result(
    result: dict[str, Any], server_info: Implementation, revision: str, method: str
) -> dict[str, Any]:
    """``result`` as a modern client expects it: complete, naming this server, and for a
    cacheable method with its caching hints (an upstream's own, else "stale at once,
    private": what the gateway lists depends on this user's policy and upstreams)."""
    meta = dict(result.get("_meta") or {})
    meta[META_SERVER_INFO] = unstructure(server_info, revision)
    out = {**result, "resultType": result.get("resultType", "complete"), "_meta": meta}
    if method in CACHEABLE:
        out.setdefault("ttlMs", 0)
        out.setdefault("cacheScope", "private")
    return out
