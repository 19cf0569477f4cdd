"""Era negotiation as pure verdicts, and the 2026-07-28 per-request stamp (sans-I/O).

The session and :mod:`agenthost.connection` do the I/O (send ``server/discover`` or
``initialize``, open a fresh transport); every *decision* about what an answer means is
made here, once, from plain values, so it can be tested with plain dicts (the h11 way):

* :func:`probe_refusal`: an error answer to the ``server/discover`` probe -> raise it
  (modern or authentication) or fall back to ``initialize`` (and why);
* :func:`discover_revision`: a ``server/discover`` result -> the revision we speak;
* :func:`retry_revision`: a -32022 refusal -> the modern revision to retry once at;
* :func:`modern_evidence`: "is this error evidence of the modern era?", written once for
  the probe, the ``initialize`` correction and the era cache;
* :class:`Stamp`: what every 2026-07-28 request carries (``_meta`` and the HTTP headers);
* :func:`first_plan` and :func:`next_plan`: the one transition table of reaching a
  server (probe -> fallback -> cache): which era to try first, and after a failure,
  which to try next (or none: the failure is final).

Nothing here imports trio or httpx (``tests/test_layers.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

import attrs
import orjson

from agenthost.protocol import methods as m
from agenthost.protocol.headers import Mirror, request_headers, tool_param_headers
from agenthost.protocol.revisions import LEGACY_REVISIONS, MODERN_REVISIONS, is_modern

__all__ = [
    "EXITED",
    "HEADER_MISMATCH",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_PROTOCOL_VERSION",
    "META_SERVER_INFO",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "MODERN_ERROR_CODES",
    "NOT_MODERN",
    "REFUSED",
    "REFUSED_MODERN",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "Plan",
    "Stamp",
    "discover_revision",
    "falls_back",
    "first_plan",
    "modern_evidence",
    "next_plan",
    "probe_refusal",
    "retry_revision",
    "server_info",
    "shown_revisions",
    "supported_revisions",
]

#: 2026-07-28 error codes (``basic/index.mdx``, "Error Codes"): a server that answers with
#: one of these speaks the modern era, whatever else it refused.
HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
MODERN_ERROR_CODES: Final = frozenset(
    {HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
)
#: ``_meta`` keys of the per-request protocol fields (2026-07-28).
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"

#: HTTP statuses that are authentication, never era evidence.
_AUTH_STATUSES: Final = frozenset({401, 403})


def supported_revisions(data: Any) -> tuple[str, ...]:
    """The revisions an error's ``data.supported`` names (``()`` when it names none)."""
    supported = data.get("supported") if isinstance(data, Mapping) else None
    return tuple(map(str, supported)) if isinstance(supported, list) else ()


def shown_revisions(data: Any) -> str:
    """The revisions an error's ``data.supported`` names, for an error message: the first
    eight, each cut to 40 characters (a server chooses them: a megabyte "version" must not
    become a megabyte message). Pass the *shown* data (``JSONRPCError.data``, scrubbed of
    our secrets), never ``raw_data``; decisions read :func:`supported_revisions`."""
    supported = supported_revisions(data)
    if not supported:
        return "(not said)"
    more = f" and {len(supported) - 8} more" if len(supported) > 8 else ""
    return ", ".join(v if len(v) <= 40 else v[:40] + "..." for v in supported[:8]) + more


def modern_evidence(code: int | None, supported: Collection[str] = ()) -> bool:
    """Whether an error proves the server speaks 2026-07-28: a modern error code, or a
    revision list naming a modern revision."""
    return code in MODERN_ERROR_CODES or any(is_modern(v) for v in supported)


def probe_refusal(code: int, data: Any) -> str | None:
    """What an error answer to the ``server/discover`` probe means.

    None: raise it (a modern error is a modern server refusing us; 401/403 is
    authentication). Else the reason to fall back to ``initialize``: any other error is a
    legacy server that does not know the method (never keyed to one code).
    """
    if code in MODERN_ERROR_CODES:
        return None
    status = data.get("httpStatus") if isinstance(data, Mapping) else None
    if status in _AUTH_STATUSES:
        return None
    return f"server/discover refused ({code})"


def falls_back(supported: Collection[str]) -> bool:
    """A modern server sharing no modern revision with us: fall back to ``initialize``
    only when it also names a legacy one we speak (a dual-era server)."""
    return any(v in LEGACY_REVISIONS for v in supported)


def discover_revision(supported_versions: Sequence[str]) -> str | None:
    """The newest modern revision both sides speak, or None (the server is not modern
    for us: fall back)."""
    return next((v for v in MODERN_REVISIONS if v in supported_versions), None)


def retry_revision(data: Any) -> str | None:
    """The revision to retry a -32022 refusal at, once (``basic/versioning.mdx``: the
    client retries with a mutually supported version), or None (raise)."""
    return discover_revision(supported_revisions(data))


def server_info(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``serverInfo`` a modern result carries in its ``_meta`` (None: absent or bad)."""
    meta = result.get("_meta")
    if isinstance(meta, dict):
        info = meta.get(META_SERVER_INFO)
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            return info
    return None


@attrs.frozen
class Stamp:
    """What every request of a 2026-07-28 session carries: the protocol version, client
    capabilities and client info (and the log level, when set) in ``_meta``, and, over
    HTTP, the ``Mcp-Method`` / ``Mcp-Name`` / ``Mcp-Param-*`` headers.

    Immutable: a new level or revision is a new stamp (:meth:`with_level`), so a request
    in flight keeps the one it was sent with.
    """

    revision: str
    capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any]
    log_level: str | None = None
    #: The ``_meta`` fields, built once.
    meta: dict[str, Any] = attrs.field(init=False)
    #: The same, serialised once: what :meth:`spliced` puts in a request.
    encoded: orjson.Fragment = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        meta: dict[str, Any] = {
            META_PROTOCOL_VERSION: self.revision,
            META_CLIENT_CAPABILITIES: self.capabilities,
            META_CLIENT_INFO: self.client_info,
        }
        if self.log_level is not None:
            meta[META_LOG_LEVEL] = self.log_level
        object.__setattr__(self, "meta", meta)
        object.__setattr__(self, "encoded", orjson.Fragment(orjson.dumps(meta)))

    def with_level(self, level: str) -> Stamp:
        return attrs.evolve(self, log_level=level)

    def params(
        self, params: Mapping[str, Any] | None, extensions: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``params`` with the stamp merged into ``_meta`` (the caller's keys kept);
        ``extensions`` are declared for this request only, on top of the session's."""
        out = dict(params) if params else {}
        stamp = self.meta
        if extensions:
            caps = dict(self.capabilities)
            caps["extensions"] = {**(caps.get("extensions") or {}), **extensions}
            stamp = {**stamp, META_CLIENT_CAPABILITIES: caps}
        meta = out.get("_meta")
        out["_meta"] = {**meta, **stamp} if meta else stamp
        return out

    def spliced(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """:meth:`params` (no per-request extensions), with the stamp as its serialised bytes
        when the caller sent no ``_meta`` of its own: an ``orjson.Fragment``, which
        :func:`~agenthost.protocol.jsonrpc.encode_line` copies into the request line
        instead of serialising the same dictionaries for every request (bench: "stdio
        calls/s 64 in flight, MCP 2026-07-28"; ``tests/test_hot_path_modern.py`` checks
        that the bytes decode to what :meth:`params` gives).

        Only for a transport that serialises the message itself
        (:attr:`agenthost.transports.base.Transport.serialises`): a fragment is not a
        value a peer that receives the objects can read.
        """
        if not params:
            return {"_meta": self.encoded}
        if "_meta" in params:
            return self.params(params)
        out = dict(params)
        out["_meta"] = self.encoded
        return out

    def headers(
        self,
        method: str,
        params: Mapping[str, Any],
        mirrors: Mapping[str, tuple[Mirror, ...]] | None = None,
    ) -> dict[str, str]:
        """The HTTP headers of one request; ``mirrors``: each tool's ``x-mcp-header``
        properties (``tools/call`` copies those arguments into ``Mcp-Param-*``)."""
        spec = m.request_spec(method)
        name_param = spec.name_param if spec is not None else None
        if spec is None and method.startswith("tasks/"):
            # The tasks extension routes by task: Mcp-Name carries params.taskId.
            name_param = "taskId"
        headers = request_headers(
            self.revision, method, params.get(name_param) if name_param else None
        )
        if method == m.TOOLS_CALL and mirrors:
            tool_mirrors = mirrors.get(params.get("name", ""))
            if tool_mirrors:
                headers.update(tool_param_headers(tool_mirrors, params.get("arguments") or {}))
        return headers

    def stamp(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        extensions: Mapping[str, Any] | None = None,
        mirrors: Mapping[str, tuple[Mirror, ...]] | None = None,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """One request, stamped: ``(params, headers)``."""
        out = self.params(params, extensions)
        return out, self.headers(method, out, mirrors)


# --- reaching a server: the probe -> fallback -> cache transitions ---------------------

#: How an attempt failed, as :func:`next_plan` reads it (the I/O side maps errors to these).
NOT_MODERN: Final = "not-modern"  # the probe found a legacy server (fall back on a fresh one)
EXITED: Final = "exited"  # the process exited on the probe
REFUSED: Final = "refused"  # an error answer (JSON-RPC error, no revision in common)
REFUSED_MODERN: Final = "refused-modern"  # ... carrying 2026-07-28 evidence


@attrs.frozen
class Plan:
    """One attempt at reaching a server: the era to try (``"auto"`` probes) and how that
    was decided (shown by ``agenthost servers``; None while a probe has to find out)."""

    era: str
    learned: str | None = None

    @property
    def cached(self) -> bool:
        """The era came from the era cache (which a failure then makes stale)."""
        return self.learned is not None and self.learned.startswith("cached")


def first_plan(mode: str, transport: str, cached: tuple[bool, str | None] | None) -> Plan:
    """The first attempt for a server whose config says ``protocol = mode``.

    ``cached``: what the era cache holds for it (modern?, why), read only for ``auto``.
    ``sse`` and ``websocket`` are legacy: 2026-07-28 defines neither binding.
    """
    if mode == "legacy":
        return Plan("legacy", "config: protocol = legacy")
    if mode != "auto":
        return Plan("modern", f"config: protocol = {mode}")
    if transport in ("sse", "websocket"):
        return Plan("legacy", f"{transport} transport (no 2026-07-28 binding)")
    if cached is None:
        return Plan("auto")
    modern, why = cached
    return Plan("modern" if modern else "legacy", f"cached ({why})" if why else "cached")


def next_plan(mode: str, plan: Plan, outcome: str, *, stdio: bool, reason: str = "") -> Plan | None:
    """After ``plan`` failed with ``outcome``: the next attempt, or None (raise the error).

    The whole table (a caller drops the cache entry whenever ``plan.cached`` moves on):

    ========================  ==================  ==========================================
    plan                      outcome             next
    ========================  ==================  ==========================================
    auto (probe)              NOT_MODERN          legacy on a fresh connection
    auto (probe), stdio       EXITED              legacy on a restarted process
    cached                    any                 auto: probe again (the server changed)
    legacy, mode auto         REFUSED_MODERN      modern: initialize was refused the 2026 way
    anything else             -                   None
    ========================  ==================  ==========================================
    """
    if plan.era == "auto" and outcome == NOT_MODERN:
        return Plan("legacy", f"probe: {reason}; initialize")
    if plan.era == "auto" and outcome == EXITED and stdio:
        return Plan("legacy", "probe: the server exited on server/discover; restarted; initialize")
    if plan.cached:
        # Whatever failed under a cached era (refused, or the process exited on the
        # first message of that era) may be the era: probe again rather than fail on
        # every run until the cache file is deleted by hand (issue 28 M6).
        return Plan("auto")
    if outcome == REFUSED_MODERN and mode == "auto" and plan.era == "legacy":
        # The probe was wrong (it timed out on a slow start, say): the server says it
        # is modern.
        return Plan("modern", "probe: initialize refused with a 2026-07-28 error")
    return None
