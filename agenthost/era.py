"""The era strategy of one session: what differs between ``initialize`` and 2026-07-28.

A :class:`~agenthost.session.ClientSession` holds exactly one of these, installed when its
era is settled (``initialize``: :class:`LegacyEra`; ``server/discover``:
:class:`ModernEra`), so the typed API has no era branches: it asks its era to send a
request, to ping, to set the log level, to (un)subscribe, to say the roots changed, and to
fetch a list page. The decisions themselves are pure and live in
:mod:`agenthost.protocol.lifecycle` (the :class:`~agenthost.protocol.lifecycle.Stamp`, the
-32022 retry choice); the MRTR loop is :func:`agenthost.mrtr.run_exchange`.

Both eras expose the same two send paths, shaped like :meth:`agenthost.rpc.RPC.call`:
``call`` (a request whose result must be complete) and ``exchange`` (``tools/call``,
``prompts/get``, ``resources/read``: may need input on 2026-07-28). On a legacy session
both *are* ``RPC.call``, bound once: the stdio hot path pays no frame for the strategy.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

import trio

from agenthost._util import DEFAULT, Timeout
from agenthost.errors import (
    AgentHostError,
    BackChannelRequired,
    JSONRPCError,
    ProtocolError,
    UnsupportedRevision,
)
from agenthost.mrtr import run_exchange
from agenthost.protocol import jsonrpc
from agenthost.protocol import methods as m
from agenthost.protocol.converter import structure
from agenthost.protocol.headers import Mirror, param_header_paths
from agenthost.protocol.lifecycle import (
    HEADER_MISMATCH,
    UNSUPPORTED_PROTOCOL_VERSION,
    Stamp,
    retry_revision,
    server_info,
    shown_revisions,
    supported_revisions,
)
from agenthost.protocol.types import (
    ServerCapabilities,
    SetLevelRequestParams,
    SubscribeRequestParams,
    SubscriptionFilter,
    SubscriptionsListenRequestParams,
    Tool,
    UnsubscribeRequestParams,
)
from agenthost.rpc import RPC
from agenthost.transports.base import NO_OPTIONS, SendOptions

if TYPE_CHECKING:
    from agenthost.asks import AskRouter

__all__ = ["EraHost", "LegacyEra", "ModernEra", "SessionEra"]

log = logging.getLogger("agenthost.session")

P = TypeVar("P")
R = TypeVar("R")

_COMPLETE_ONLY: Final = frozenset({"complete"})
#: A plain send (stdio: no headers, no abort), typed.
_PLAIN: Final[SendOptions] = NO_OPTIONS
#: The longest a list result is cached, whatever ``ttlMs`` the server asks for.
_MAX_LIST_TTL: Final = 24 * 3600.0


class EraHost(Protocol):
    """What an era needs of its session (:class:`agenthost.session.ClientSession`)."""

    revision: str | None
    _server_info: dict[str, Any] | None
    _log_level: str | None

    @property
    def name(self) -> str: ...
    @property
    def _asks(self) -> AskRouter: ...
    @property
    def max_input_rounds(self) -> int: ...
    @property
    def _offer(self) -> str: ...
    @property
    def _rpc(self) -> RPC: ...
    def _new_stamp(self, revision: str) -> Stamp: ...
    @property
    def closed(self) -> bool: ...
    @property
    def server_capabilities(self) -> ServerCapabilities | None: ...
    def has_listener(self, method: str) -> bool: ...
    def _params(self, params: Any) -> dict[str, Any] | None: ...
    async def request(
        self,
        spec: m.RequestSpec[P, R],
        params: P | None = None,
        *,
        timeout: Timeout = DEFAULT,
        cancellable: bool = True,
    ) -> R: ...
    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None: ...
    async def list_tools(self, *, timeout: Timeout = DEFAULT) -> list[Tool]: ...


class LegacyEra:
    """``initialize`` era (and a session whose era is not settled yet): requests go to
    :meth:`agenthost.rpc.RPC.call` as they are; the server may send its own requests."""

    modern: Final = False

    def __init__(self, session: EraHost) -> None:
        self._session = session
        # Bound once: the legacy call path is RPC.call itself (bench: client CPU/call).
        self.call = session._rpc.call
        self.exchange = session._rpc.call

    @property
    def offer(self) -> str:
        """The revision params are shaped for before one is settled."""
        return self._session._offer

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float | None,
        cancellable: bool = True,
        options: SendOptions = NO_OPTIONS,
        extensions: Mapping[str, Any] | None = None,
        final_kinds: frozenset[str] = _COMPLETE_ONLY,
    ) -> dict[str, Any]:
        """A raw request (extensions are a 2026-07-28 notion: ignored here)."""
        return await self.call(
            method, params, timeout=timeout, cancellable=cancellable, options=options
        )

    def refuse_request(self, method: str) -> None:
        """A legacy server may send requests: nothing to refuse."""

    async def ping(self, timeout: float | None) -> None:
        structure(await self.call(m.PING, None, timeout=timeout), m.PING_SPEC.result)

    async def set_level(self, level: str) -> None:
        params = SetLevelRequestParams(level=level)  # type: ignore[arg-type]
        await self._session.request(m.LOGGING_SET_LEVEL_SPEC, params)

    async def subscribe(self, uri: str) -> None:
        await self._session.request(m.RESOURCES_SUBSCRIBE_SPEC, SubscribeRequestParams(uri=uri))

    async def unsubscribe(self, uri: str) -> None:
        params = UnsubscribeRequestParams(uri=uri)
        await self._session.request(m.RESOURCES_UNSUBSCRIBE_SPEC, params)

    async def roots_changed(self) -> None:
        await self._session.notify(m.NOTIFICATION_ROOTS_LIST_CHANGED)

    def listen(self) -> None:
        """Legacy servers send change notifications unasked: nothing to open."""

    async def page(
        self, spec: m.RequestSpec[Any, R], params: dict[str, Any] | None, timeout: float | None
    ) -> tuple[R, float]:
        """One list page and how long it may be cached (legacy: not at all)."""
        return structure(await self.call(spec.method, params, timeout=timeout), spec.result), 0.0

    def tools_listed(self, tools: list[Tool]) -> list[Tool]:
        return tools


class ModernEra:
    """2026-07-28: every request stamped (:class:`~agenthost.protocol.lifecycle.Stamp`),
    no server requests (asks come back as MRTR), no ``ping`` / ``logging/setLevel`` /
    ``resources/subscribe`` (``server/discover``, ``_meta`` and ``subscriptions/listen``
    instead), list results cached for their ``ttlMs``."""

    modern: Final = True

    def __init__(self, session: EraHost, revision: str) -> None:
        self._session = session
        self.stamp = session._new_stamp(revision)
        #: ``x-mcp-header`` mirrors of each tool (HTTP only).
        self._param_headers: dict[str, tuple[Mirror, ...]] = {}
        #: The ``subscriptions/listen`` stream: its resource filter, its scope (cancelled
        #: to re-send it with a new filter) and whether it runs.
        self._listen_uris: set[str] = set()
        self._listen_scope: trio.CancelScope | None = None
        self._listening = False
        session._rpc.transport.set_protocol_version(revision)
        # The short path of exchange(), set up once (bench: "stdio calls/s ..., MCP
        # 2026-07-28"): the call bound, trio's clock (cheaper than trio.current_time()),
        # and whether the transport allows the path, known at the first exchange (a
        # probing transport has no kind before its first message: server/discover).
        self._call = session._rpc.call
        #: Trio's clock, read where a request starts (``started`` of RPC.call).
        self.now = trio.lowlevel.current_clock().current_time
        #: The short path applies (see :meth:`stamped`; None: not known yet).
        self.short: bool | None = None

    @property
    def offer(self) -> str:
        return self.stamp.revision

    def enter(self, revision: str) -> None:
        """Speak ``revision`` from now on (the server picked it, or asked for it)."""
        self.stamp = self._session._new_stamp(revision)
        self._session._rpc.transport.set_protocol_version(revision)

    def _options(self, method: str, params: Mapping[str, Any]) -> SendOptions:
        """HTTP headers and cancel-by-abort for one request (nothing on stdio)."""
        if not self._session._rpc.transport.exchanges_per_request:
            return _PLAIN
        headers = self.stamp.headers(method, params, self._param_headers)
        return SendOptions(headers=headers, abort_on_cancel=True)

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None,
        cancellable: bool = True,
        options: SendOptions = NO_OPTIONS,
        final: bool = True,
        retry: bool = True,
        extensions: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One stamped request with its headers (``options`` are computed, not taken); the
        raw result. ``final``: it must be complete. A -32022 naming a modern revision we
        speak is retried once at that revision."""
        session = self._session
        stamped = self.stamp.params(params, extensions)
        try:
            raw = await session._rpc.call(
                method,
                stamped,
                timeout=timeout,
                cancellable=cancellable,
                options=self._options(method, stamped),
            )
        except JSONRPCError as exc:
            if exc.code != UNSUPPORTED_PROTOCOL_VERSION:
                raise
            return await self._refused(
                exc,
                method,
                params,
                timeout=timeout,
                cancellable=cancellable,
                final=final,
                retry=retry,
                extensions=extensions,
            )
        info = server_info(raw)
        if info is not None:
            session._server_info = info
        if final and raw.get("resultType", "complete") != "complete":
            raise ProtocolError(
                f"{method}: unexpected resultType {str(raw.get('resultType'))[:64]!r}",
                server=session.name,
            )
        return raw

    async def _refused(
        self,
        exc: JSONRPCError,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None,
        cancellable: bool,
        final: bool,
        retry: bool,
        extensions: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """A -32022 answer to :meth:`call`: the request again at the revision the server
        names, once (shared by the short path of :meth:`exchange`)."""
        session = self._session
        mutual = retry_revision(exc.raw_data)
        if not retry or mutual is None:
            raise self._unsupported(exc) from None
        log.info("%s: %s refused our version; retrying at %s", session.name, method, mutual)
        self.enter(mutual)
        if session.revision is not None:
            session.revision = mutual
        return await self.call(
            method,
            params,
            timeout=timeout,
            cancellable=cancellable,
            final=final,
            retry=False,
            extensions=extensions,
        )

    def _unsupported(self, exc: JSONRPCError) -> UnsupportedRevision:
        """-32022: name both sides; ``supported`` keeps the server's list (for a caller
        deciding whether to fall back)."""
        supported = supported_revisions(exc.raw_data)
        return UnsupportedRevision(
            f"server does not support protocol version {self.stamp.revision} ({exc.message});"
            f" it supports {shown_revisions(exc.data)}",
            supported=supported,
            server=self._session.name,
            code=exc.code,
        )

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float | None,
        cancellable: bool = True,
        options: SendOptions = NO_OPTIONS,
        extensions: Mapping[str, Any] | None = None,
        final_kinds: frozenset[str] | None = None,
    ) -> dict[str, Any]:
        """A raw request: one round (``final_kinds`` None) or the MRTR exchange."""
        if final_kinds is None:
            return await self.call(
                method,
                params,
                timeout=timeout,
                cancellable=cancellable,
                final=False,
                extensions=extensions,
            )
        return await self._exchange(
            method, params, timeout, extensions=extensions, final_kinds=final_kinds
        )

    async def exchange(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float | None,
        cancellable: bool = True,
        retry: bool = True,
        extensions: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A table request that may need input (MRTR); a pre-2026 back-channel refusal is
        :class:`~agenthost.errors.BackChannelRequired`; a ``tools/call`` refused for its
        headers (-32020) re-reads the tools (their ``x-mcp-header``) and is retried once.
        ``extensions``: declared for this request only (an extension's method).

        The short path (stdio, no per-request extensions: the common request) is
        :meth:`_exchange` and :meth:`call` inlined: coroutine frames fewer to resume, no
        :class:`SendOptions` to compute, and the stamp spliced in as the bytes it was
        serialised to once (:meth:`stamped`; bench: "stdio calls/s ..., MCP 2026-07-28").
        Only a plain result returns here; the rest is :meth:`recover` and :meth:`finish`,
        which ``ClientSession.call_tool`` uses around its own inline ``RPC.call`` (this
        method's frame was 4.5% of a call's instructions). ``tests/test_hot_path_modern.py``
        checks that both send what the general path sends.
        """
        stamped = self.stamped(params) if extensions is None else None
        if stamped is None:
            try:
                return await self._exchange(method, params, timeout, extensions=extensions)
            except JSONRPCError as exc:
                return await self._mapped(exc, method, params, timeout, retry, extensions)
        started = self.now()
        try:
            first = await self._call(method, stamped, timeout=timeout, started=started)
        except JSONRPCError as exc:
            return await self.recover(exc, method, params, timeout, started, retry=retry)
        if "_meta" in first or "resultType" in first:
            return await self.finish(first, method, params, timeout, started, retry=retry)
        return first

    def stamped(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """``params`` stamped for the short path (sent by ``RPC.call`` as they are), or
        None where it does not apply: a transport that does not serialise, or whose
        requests are exchanges of their own (HTTP: headers and aborts per request), known
        once the first request went out (a probing transport has no kind before it)."""
        short = self.short
        if short is None:
            short = self.know_transport()
        return self.stamp.spliced(params) if short else None

    def know_transport(self) -> bool:
        """Settle :attr:`short` (once a request went out: the transport has its kind)."""
        transport = self._session._rpc.transport
        self.short = transport.serialises and not transport.exchanges_per_request
        return self.short

    async def finish(
        self,
        first: dict[str, Any],
        method: str,
        params: dict[str, Any] | None,
        timeout: float | None,
        started: float,
        *,
        retry: bool = True,
    ) -> dict[str, Any]:
        """Round 1 of a short-path request answered with more than a plain result: the
        server's info in its ``_meta``, and the MRTR rounds if it asks for input
        (``started``: when round 1 began; errors as :meth:`exchange` maps them)."""
        try:
            if first.get("_meta") is not None:
                info = server_info(first)
                if info is not None:
                    self._session._server_info = info
            if first.get("resultType", "complete") == "complete":
                return first
            return await self._rounds(method, params, timeout, started, first)
        except JSONRPCError as exc:
            return await self._mapped(exc, method, params, timeout, retry, None)

    async def recover(
        self,
        exc: JSONRPCError,
        method: str,
        params: dict[str, Any] | None,
        timeout: float | None,
        started: float,
        *,
        retry: bool = True,
    ) -> dict[str, Any]:
        """Round 1 of a short-path request failed: refused for its revision (-32022) it
        goes again at the server's, once; else the error as :meth:`exchange` maps it."""
        if exc.code != UNSUPPORTED_PROTOCOL_VERSION:
            return await self._mapped(exc, method, params, timeout, retry, None)
        try:
            first = await self._refused(
                exc,
                method,
                params,
                timeout=timeout,
                cancellable=True,
                final=False,
                retry=True,
                extensions=None,
            )
        except JSONRPCError as again:
            return await self._mapped(again, method, params, timeout, retry, None)
        return await self.finish(first, method, params, timeout, started, retry=retry)

    async def _mapped(
        self,
        exc: JSONRPCError,
        method: str,
        params: dict[str, Any] | None,
        timeout: float | None,
        retry: bool,
        extensions: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """An exchange failed: a ``tools/call`` refused for its headers (-32020) re-reads
        the tools and goes once more; the SDK's back-channel refusal becomes
        :class:`~agenthost.errors.BackChannelRequired`; anything else is raised as is."""
        if exc.code == HEADER_MISMATCH and method == m.TOOLS_CALL and retry:
            await self._session.list_tools(timeout=timeout)
            return await self.exchange(
                method, params, timeout=timeout, retry=False, extensions=extensions
            )
        needs = _back_channel_error(exc, method, params, self._session.name)
        if needs is None:
            raise exc
        raise needs from None

    async def _exchange(
        self,
        method: str,
        params: dict[str, Any] | None,
        timeout: float | None,
        *,
        extensions: Mapping[str, Any] | None = None,
        final_kinds: frozenset[str] = _COMPLETE_ONLY,
    ) -> dict[str, Any]:
        """The MRTR loop over :meth:`call`.

        Round 1 is sent here directly: most calls complete at once, and then pay nothing
        for the loop's set-up (bench: the 2026-07-28 call path). ``final_kinds``: the
        ``resultType`` values that end the exchange (``"task"`` too, for a caller that
        declared the tasks extension in ``extensions``).
        """
        started = trio.current_time()
        first = await self.call(method, params, timeout=timeout, final=False, extensions=extensions)
        if first.get("resultType", "complete") in final_kinds:
            return first
        return await self._rounds(
            method, params, timeout, started, first, extensions=extensions, final_kinds=final_kinds
        )

    async def _rounds(
        self,
        method: str,
        params: dict[str, Any] | None,
        timeout: float | None,
        started: float,
        first: dict[str, Any],
        *,
        extensions: Mapping[str, Any] | None = None,
        final_kinds: frozenset[str] = _COMPLETE_ONLY,
    ) -> dict[str, Any]:
        """Rounds 2 and on of the MRTR loop: ``first`` asked for input."""
        session = self._session
        if timeout is not None:
            timeout = max(0.0, timeout - (trio.current_time() - started))
        base = params or {}
        origin_name = base.get("uri") if method == m.RESOURCES_READ else base.get("name")

        async def send(round_params: dict[str, Any], left: float | None) -> dict[str, Any]:
            return await self.call(
                method, round_params, timeout=left, final=False, extensions=extensions
            )

        return await run_exchange(
            send,
            base,
            method=method,
            asks=session._asks,
            revision=session.revision or self.offer,
            origin_name=str(origin_name) if origin_name is not None else None,
            timeout=timeout,
            max_rounds=session.max_input_rounds,
            server=session.name,
            first=first,
            final_kinds=final_kinds,
        )

    def refuse_request(self, method: str) -> None:
        # 2026-07-28: a server MUST NOT send requests (asks come back as MRTR).
        raise JSONRPCError(-32601, f"Method not found: {method} (this is a 2026-07-28 session)")

    async def ping(self, timeout: float | None) -> None:
        """2026-07-28 has no ``ping``: ``server/discover`` answers for it."""
        await self.call(m.SERVER_DISCOVER, None, timeout=timeout)

    async def set_level(self, level: str) -> None:
        """No ``logging/setLevel``: the level rides on every request's ``_meta``."""
        self._session._log_level = level
        self.stamp = self.stamp.with_level(level)

    async def subscribe(self, uri: str) -> None:
        """The URI joins the session's ``subscriptions/listen`` filter."""
        self._update_listen(uri, True)

    async def unsubscribe(self, uri: str) -> None:
        self._update_listen(uri, False)

    def _update_listen(self, uri: str, add: bool) -> None:
        """``uri`` joins (or leaves) the ``subscriptions/listen`` filter; the running
        listen is re-sent with it."""
        if add:
            self._listen_uris.add(uri)
        else:
            self._listen_uris.discard(uri)
        if self._listen_scope is not None:
            self._listen_scope.cancel()  # re-listen with the new filter
        if add:
            self.listen()

    def listen(self) -> None:
        """Keep a ``subscriptions/listen`` open for the change notifications the session
        handles (started once; a no-op while it runs)."""
        if not self._listening:
            self._listening = self._session._rpc.spawn(self._listen)

    async def _listen(self) -> None:
        """Re-sent (with the new filter) when a subscription changes the URIs, and after
        a pause when the server ends it. A server that refuses it, or a session that
        ends, ends the loop."""
        try:
            await self._listen_loop(self._session.server_capabilities)
        finally:
            self._listening = False
            self._listen_scope = None

    async def _listen_loop(self, caps: ServerCapabilities | None) -> None:
        session = self._session
        while not session.closed:
            notifications = SubscriptionFilter(
                tools_list_changed=_wants(session, caps, "tools"),
                prompts_list_changed=_wants(session, caps, "prompts"),
                resources_list_changed=_wants(session, caps, "resources"),
                resource_subscriptions=sorted(self._listen_uris) or None,
            )
            params = session._params(SubscriptionsListenRequestParams(notifications=notifications))
            with trio.CancelScope() as scope:
                self._listen_scope = scope
                try:
                    await self.call(m.SUBSCRIPTIONS_LISTEN, params, timeout=None, final=False)
                except JSONRPCError as exc:
                    log.info("%s: subscriptions/listen refused: %s", session.name, exc.message)
                    return
                except AgentHostError as exc:
                    log.debug("%s: subscriptions/listen ended: %s", session.name, exc)
                    return
            if not scope.cancelled_caught:
                await trio.sleep(1.0)  # the server ended it: listen again, gently

    async def roots_changed(self) -> None:
        """No such notification: the server asks for roots in each request needing them."""

    async def page(
        self, spec: m.RequestSpec[Any, R], params: dict[str, Any] | None, timeout: float | None
    ) -> tuple[R, float]:
        """One list page and how long it may be cached (its ``ttlMs``, capped; 0: not)."""
        raw = await self.call(spec.method, params, timeout=timeout)
        ttl_ms = raw.get("ttlMs")
        ttl = min(ttl_ms / 1000, _MAX_LIST_TTL) if type(ttl_ms) is int and ttl_ms > 0 else 0.0
        return structure(raw, spec.result), ttl

    def tools_listed(self, tools: list[Tool]) -> list[Tool]:
        """Over HTTP, record each tool's ``x-mcp-header`` mirrors; drop tools whose are
        invalid (the spec: a client MUST exclude them, and SHOULD say why)."""
        if not self._session._rpc.transport.exchanges_per_request:
            return tools
        kept: list[Tool] = []
        self._param_headers = {}
        for tool in tools:
            try:
                mirrors = param_header_paths(tool.input_schema)
            except ValueError as exc:
                log.warning("%s: ignoring tool %r: %s", self._session.name, tool.name[:100], exc)
                continue
            if mirrors:
                self._param_headers[tool.name] = mirrors
            kept.append(tool)
        return kept


def _wants(session: EraHost, caps: ServerCapabilities | None, kind: str) -> bool | None:
    """Whether to ask for ``<kind>/list_changed`` on the listen stream: the server has
    the capability with ``listChanged`` and someone listens."""
    cap = getattr(caps, kind, None) if caps is not None else None
    if cap is None or not getattr(cap, "list_changed", None):
        return None
    return True if session.has_listener(f"notifications/{kind}/list_changed") else None


#: Either era; the session holds one.
SessionEra = LegacyEra | ModernEra

#: The official Python SDK's ``NoBackChannelError`` (``mcp.shared.exceptions``): a tool
#: that sent its own request on a 2026-07-28 connection, which has no back-channel.
_NO_BACK_CHANNEL: Final = re.compile(
    r"Cannot send '(sampling/createMessage|elicitation/create|roots/list)': this transport"
    r" context has no back-channel for server-initiated requests"
)


def _back_channel_error(
    exc: JSONRPCError, method: str, params: Mapping[str, Any] | None, server: str
) -> BackChannelRequired | None:
    """``exc`` as a :class:`BackChannelRequired` when it is the SDK's "no back-channel"
    refusal (-32600 and its exact wording: a generic -32600 is not enough), else None."""
    if exc.code != jsonrpc.INVALID_REQUEST or isinstance(exc, BackChannelRequired):
        return None
    match = _NO_BACK_CHANNEL.match(exc.message)
    if match is None:
        return None
    ask = match.group(1)
    key = "uri" if method == m.RESOURCES_READ else "name"
    target = (params or {}).get(key)
    name = str(target)[:200] if target is not None else None
    what = f"{method} {name!r}" if name is not None else method
    return BackChannelRequired(
        exc.code,
        f"{what} failed: the server's code sent {ask} as its own request, which MCP"
        " 2026-07-28 does not carry (it asks through MRTR instead); this server works in"
        ' the initialize era: set protocol = "legacy" for it (the server said:'
        f" {exc.message})",
        exc.data,
        server=server,
        ask=ask,
        request=method,
        name=name,
    )
