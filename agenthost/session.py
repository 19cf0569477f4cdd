"""ClientSession: the typed MCP API for one server, over the request machinery of rpc.py.

Layers (DESIGN.md, "Where the design goes next"): :mod:`agenthost.rpc` owns the JSON-RPC
endpoint (reader, pending requests, deadlines, cancellation); this module decides what
the messages mean. Every request is built from the typed method table
(:mod:`agenthost.protocol.methods`): params are typed objects unstructured for the negotiated
revision, results are structured into the spec's result type. Server asks (roots,
sampling, elicitation) go through :class:`agenthost.asks.AskRouter`, the one path both
eras share.

Two eras (:mod:`agenthost.protocol.revisions`): a legacy session is opened with ``initialize``;
a modern one (2026-07-28) with ``server/discover``, after which every request carries the
protocol version, client capabilities and client info in ``_meta`` (and, over HTTP, the
``Mcp-Method`` / ``Mcp-Name`` / ``Mcp-Param-*`` headers, handed to the transport as
:class:`~agenthost.transports.base.SendOptions`). A modern ``tools/call``, ``prompts/get``
or ``resources/read`` may come back ``input_required``: :mod:`agenthost.mrtr` answers the
asks through the same handlers and retries. :meth:`ClientSession.negotiate` picks the era
(``auto`` probes with ``server/discover`` and falls back to ``initialize``).

Error handling: when the transport ends, every pending request fails at once with
:class:`~agenthost.errors.TransportClosed` naming the server, and every later request
fails the same way. A server request for a method we do not handle gets -32601; a handler
that raises gets an error response and the session lives on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final, TypeVar

import trio

from agenthost._util import DEFAULT, Timeout
from agenthost._version import __version__
from agenthost.ask_tasks import AskTaskStore
from agenthost.asks import (
    AskRouter,
    ClientHandlers,
    NotificationListener,
    RequestContext,
)
from agenthost.era import LegacyEra, ModernEra, SessionEra
from agenthost.errors import (
    AgentHostError,
    JSONRPCError,
    NotModern,
    OutputValidationError,
    ProtocolError,
    SchemaRefused,
    TransportClosed,
    UnsupportedRevision,
)
from agenthost.mrtr import DEFAULT_MAX_ROUNDS
from agenthost.protocol import methods as m
from agenthost.protocol.converter import structure, unstructure
from agenthost.protocol.jsonrpc import Request
from agenthost.protocol.lifecycle import (
    Stamp,
    discover_revision,
    shown_revisions,
    supported_revisions,
)
from agenthost.protocol.revisions import (
    LATEST_MODERN,
    LATEST_REVISION,
    MODERN_REVISIONS,
    SUPPORTED_REVISIONS,
    Era,
    is_known,
    is_modern,
)
from agenthost.protocol.types import (
    CallToolResult,
    CompleteRequestParams,
    CompleteResult,
    DiscoverResult,
    GetPromptRequestParams,
    GetPromptResult,
    Implementation,
    InitializeRequestParams,
    InitializeResult,
    ListToolsResult,
    PaginatedRequestParams,
    Prompt,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    ServerCapabilities,
    Tool,
)
from agenthost.rpc import DEFAULT_MAX_PEER_REQUESTS, RPC
from agenthost.server_log import log_server_message
from agenthost.transports.base import Transport

if TYPE_CHECKING:
    from agenthost_policies.schemas import PeerSchema

__all__ = [
    "ClientSession",
    "ProgressCallback",
]

log = logging.getLogger("agenthost.session")

P = TypeVar("P")
R = TypeVar("R")


#: The list each change notification makes stale.
_STALE_BY: Final = {
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/prompts/list_changed": ("prompts/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
}


#: ``async (progress, total, message) -> None`` for one call's progress notifications.
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]


class ClientSession:
    """An MCP client session. Open one with :func:`open_session` or ``agenthost.connect``.

    Every request method takes ``timeout`` (seconds; default the session's
    ``request_timeout``, None for no limit).

    Cancellation: cancelling a request (a cancel scope around it, or a timeout) sends
    ``notifications/cancelled`` to the server and raises as usual; the session stays usable.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        name: str,
        handlers: ClientHandlers | None = None,
        client_info: Mapping[str, Any] | None = None,
        request_timeout: float | None = 60.0,
        protocol_version: str = LATEST_REVISION,
        notification_buffer: int = 1024,
        max_server_requests: int = DEFAULT_MAX_PEER_REQUESTS,
        max_input_rounds: int = DEFAULT_MAX_ROUNDS,
    ) -> None:
        if not is_known(protocol_version):
            raise UnsupportedRevision(
                f"cannot offer protocol version {protocol_version!r}; agenthost speaks "
                + ", ".join((*MODERN_REVISIONS, *SUPPORTED_REVISIONS))
            )
        self.name = name
        self.handlers = handlers or ClientHandlers()
        self.request_timeout = request_timeout
        self._rpc = RPC(
            transport,
            name=name,
            handle_request=self._handle,
            deliver=self._deliver,
            notification_buffer=notification_buffer,
            max_peer_requests=max_server_requests,
        )
        #: What ``initialize`` offers (legacy) and ``server/discover`` asks for (modern).
        self._offer = protocol_version if not is_modern(protocol_version) else LATEST_REVISION
        self._modern_offer = protocol_version if is_modern(protocol_version) else LATEST_MODERN
        self.max_input_rounds = max_input_rounds
        #: What differs between the eras (:mod:`agenthost.era`): legacy until settled.
        self._legacy = LegacyEra(self)
        self._era: SessionEra = self._legacy
        self._log_level: str | None = None
        #: Cached list results (2026-07-28 ``ttlMs``): method -> (expires, items).
        self._list_cache: dict[str, tuple[float, list[Any]]] = {}
        self._client_info = dict(
            client_info or {"name": "agenthost", "title": "agenthost", "version": __version__}
        )
        #: One logger per server for its ``notifications/message`` (Python never frees a
        #: logger, so a logger per server-chosen name would be a leak).
        self._server_log = logging.getLogger(f"agenthost.server.{name}")
        self._progress: dict[str | int, ProgressCallback] = {}
        self._listeners: dict[str, list[NotificationListener]] = {}
        for method, listener in self.handlers.notifications.items():
            self._listeners.setdefault(method, []).append(listener)
        #: Each tool's compiled outputSchema, or why it was refused (bounded by the
        #: tools listed; cleared with each listing).
        self._output_validators: dict[str, PeerSchema | str] = {}
        self._tools_by_name: dict[str, Tool] = {}
        #: The asks this session runs as tasks for its server (None: not offered).
        self.ask_tasks: AskTaskStore | None = None
        if self.handlers.ask_tasks is not None:
            self.ask_tasks = AskTaskStore(
                self.handlers.ask_tasks, server=name, spawn=self._rpc.spawn, notify=self.notify
            )
        #: Answers the server's asks, in either era, from the method table.
        self._asks = AskRouter(self.handlers, server=name, ask_tasks=self.ask_tasks)
        #: Set by :meth:`initialize` or :meth:`discover`.
        self.revision: str | None = None
        self.era: Era | None = None
        #: How the era and revision were learned (for ``agenthost servers`` / ``check``).
        self.learned: str | None = None
        self.initialize_result: InitializeResult | None = None
        self.discover_result: DiscoverResult | None = None
        self._server_info: dict[str, Any] | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def _transport(self) -> Transport:
        return self._rpc.transport

    def requests_watched(self) -> int:
        """Requests waiting with a deadline (0 at rest: a finished request leaves the
        watchdog at once, however long its limit)."""
        return self._rpc.watched()

    @property
    def transport(self) -> Transport:
        """The transport under this session (its ``pid``, ``kind`` ... for status)."""
        return self._rpc.transport

    @property
    def closed(self) -> bool:
        return self._rpc.closed

    @property
    def close_reason(self) -> AgentHostError | None:
        """Why the session ended (None while it is open)."""
        return self._rpc.close_reason

    async def wait_closed(self) -> AgentHostError:
        """Wait until the session ends (the server exited, the stream broke, or we closed)."""
        return await self._rpc.wait_closed()

    @property
    def server_capabilities(self) -> ServerCapabilities | None:
        if self.discover_result is not None:
            return self.discover_result.capabilities
        return self.initialize_result.capabilities if self.initialize_result else None

    @property
    def server_info(self) -> dict[str, Any] | None:
        """The server's self-reported identity (``serverInfo``; modern: the latest
        result's ``_meta``). For display only: it is not verified."""
        if self._server_info is not None:
            return self._server_info
        if self.initialize_result is not None:
            info: dict[str, Any] = unstructure(
                self.initialize_result.server_info, self.revision or self._offer
            )
            return info
        return None

    @property
    def instructions(self) -> str | None:
        if self.discover_result is not None:
            return self.discover_result.instructions
        return self.initialize_result.instructions if self.initialize_result else None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the reader and the notification dispatcher until the transport ends.

        For callers that want the session in their own nursery
        (``await nursery.start(session.run)``); :func:`open_session` does this for you.
        Returns when the transport is closed; raises nothing for a peer that went away
        (pending requests get the error instead).
        """
        await self._rpc.run(task_status=task_status)

    def _close(self, exc: AgentHostError) -> None:
        self._rpc.close(exc)

    async def aclose(self) -> None:
        """Close the transport; pending requests fail. Idempotent."""
        await self._rpc.aclose()

    # ------------------------------------------------------------------ requests

    def _limit(self, timeout: Timeout) -> float | None:
        return self.request_timeout if timeout is DEFAULT else timeout

    async def request(
        self,
        spec: m.RequestSpec[P, R],
        params: P | None = None,
        *,
        timeout: Timeout = DEFAULT,
        cancellable: bool = True,
    ) -> R:
        """Send ``spec.method`` with typed ``params``; the result as ``spec.result``.

        Params are shaped for the negotiated revision (fields it lacks are left out, or
        refused when dropping them would change the meaning). An extension's method
        (``spec.extension``) is declared in this request's client capabilities on
        2026-07-28.

        Raises:
            ProtocolError: the negotiated revision, or the extensions the server declared,
                lack ``spec.method`` (nothing is sent).
        """
        revision = self.revision or self._era.offer
        extensions = m.declared_extensions(self.server_capabilities) if spec.extension else ()
        if not m.available(spec, revision, extensions):
            needs = f"the {spec.extension} extension" if spec.extension else "it"
            raise ProtocolError(
                f"{spec.method} is not available: this session speaks {revision}"
                f" (the method is in {spec.since}..{spec.until or 'now'}) or the server did"
                f" not declare {needs}",
                server=self.name,
            )
        return await self._call(spec, self._params(params), timeout, cancellable=cancellable)

    async def _call(
        self,
        spec: m.RequestSpec[Any, R],
        params: dict[str, Any] | None,
        timeout: Timeout,
        *,
        cancellable: bool = True,
    ) -> R:
        """The one path of a table request into the era (and so into ``rpc.call``), with
        params already in their wire shape. A request that may need input (``spec.mrtr``)
        goes through the era's exchange: MRTR on 2026-07-28, a plain call before."""
        era = self._era
        limit = self._limit(timeout)
        if spec.extension is not None and isinstance(era, ModernEra):
            # An extension's method declares its extension in this request's capabilities.
            declared: dict[str, Any] = {spec.extension: {}}
            if spec.mrtr:
                raw = await era.exchange(
                    spec.method, params, timeout=limit, cancellable=cancellable, extensions=declared
                )
            else:
                raw = await era.call(
                    spec.method, params, timeout=limit, cancellable=cancellable, extensions=declared
                )
        else:
            send = era.exchange if spec.mrtr else era.call
            raw = await send(spec.method, params, timeout=limit, cancellable=cancellable)
        return structure(raw, spec.result)

    def _params(self, params: Any) -> dict[str, Any] | None:
        if params is None:
            return None
        out: dict[str, Any] = unstructure(params, self.revision or self._era.offer)
        return out

    def _new_stamp(self, revision: str) -> Stamp:
        """What every 2026-07-28 request carries, for ``revision`` (for :mod:`agenthost.era`)."""
        info = unstructure(self._implementation(), revision)
        if info.get("title") == info["name"]:
            # A title defaults to the name (BaseMetadata): the same bytes again in every
            # request, for the server to parse (bench: "MCP 2026-07-28" rows).
            del info["title"]
        return Stamp(revision, self.client_capabilities(revision), info, self._log_level)

    async def answer_input_requests(
        self,
        requests: Mapping[str, Any],
        *,
        origin: str,
        origin_name: str | None,
        round_no: int,
    ) -> dict[str, Any]:
        """Answer the ``inputRequests`` of a running task (2026-07-28 tasks extension)
        through the session's handlers, exactly as an MRTR round's asks: same consent,
        same audit (the context names ``origin``, the request the task runs, and the
        round). Returns the ``inputResponses`` map for ``tasks/update``."""
        return await self._asks.answer_input_requests(
            requests,
            round_no=round_no,
            revision=self.revision or self._modern_offer,
            origin=origin,
            origin_name=origin_name,
        )

    async def exchange(
        self,
        spec: m.RequestSpec[Any, Any],
        params: dict[str, Any] | None,
        *,
        timeout: Timeout = DEFAULT,
        extensions: Mapping[str, Any] | None = None,
        final_kinds: frozenset[str] = frozenset({"complete"}),
    ) -> dict[str, Any]:
        """``spec``'s request with params in wire shape, its result as raw JSON: for an
        extension that changes a table method's result (the tasks extension's
        ``CreateTaskResult`` for ``tools/call``, ``final_kinds`` ``{"complete", "task"}``),
        declared in ``extensions`` for this request. On 2026-07-28 it may need input
        (MRTR); on a legacy session it is a plain request.
        """
        return await self._era.send(
            spec.method,
            params,
            timeout=self._limit(timeout),
            extensions=extensions,
            final_kinds=final_kinds,
        )

    async def discover(self, *, timeout: float | None = 30.0) -> DiscoverResult:
        """``server/discover``: speak 2026-07-28 with this server.

        Raises:
            NotModern: the server answered but offers no modern revision we speak.
            UnsupportedRevision: the server is modern but shares no revision with us.
            JSONRPCError, AgentHostTimeout, TransportClosed: as any request.
        """
        modern = ModernEra(self, self._modern_offer)
        self._era = modern
        try:
            raw = await modern.call(m.SERVER_DISCOVER, None, timeout=timeout, cancellable=False)
        except BaseException:
            self._era = self._legacy  # not settled: the caller may initialize instead
            raise
        modern.know_transport()  # the short call path applies from the first tools/call
        try:
            result = structure(raw, m.SERVER_DISCOVER_SPEC.result)
        except ProtocolError as exc:
            # A legacy server may answer any unknown method with a generic result (the
            # conformance suite's 0.1.16 servers do): an answer that is not a
            # DiscoverResult is evidence of a legacy server, not a broken modern one.
            self._era = self._legacy
            raise NotModern(
                "server/discover answered with something that is not a DiscoverResult"
                f" ({str(exc).removeprefix(f'{self.name}: ')})",
                server=self.name,
            ) from None
        revision = discover_revision(result.supported_versions)
        if revision is None:
            self._era = self._legacy
            raise NotModern(
                "server/discover offers only " + ", ".join(map(str, result.supported_versions[:8])),
                server=self.name,
            )
        if revision != self._modern_offer:
            modern.enter(revision)
        self.revision = revision
        self.era = Era.MODERN
        self.discover_result = result
        return result

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification."""
        await self._rpc.notify(method, params)

    # ------------------------------------------------------------------ lifecycle requests

    def client_capabilities(self, revision: str) -> dict[str, Any]:
        """The capabilities we declare under ``revision``, as sent."""
        caps: dict[str, Any] = unstructure(self._asks.capabilities(revision), revision)
        return caps

    def _implementation(self) -> Implementation:
        return structure(self._client_info, Implementation)

    async def initialize(self, *, timeout: float | None = 30.0) -> InitializeResult:
        """Negotiate the revision: offer ours, accept any supported one the server picks.

        A server that refuses our offer naming revisions it supports (``data.supported``,
        as -32602 or 2026-07-28's -32022 carry it) is offered the newest one both sides
        speak, once, within the same ``timeout``.

        Raises:
            UnsupportedRevision: the server chose a revision we do not speak (the message
                names both sides), or rejected ours and shares none with us.
        """
        deadline = trio.current_time() + timeout if timeout is not None else None
        retried = False
        while True:
            params = InitializeRequestParams(
                protocol_version=self._offer,
                capabilities=self._asks.capabilities(self._offer),
                client_info=self._implementation(),
            )
            left = None if deadline is None else max(0.0, deadline - trio.current_time())
            try:
                raw = await self._legacy.call(
                    m.INITIALIZE, unstructure(params, self._offer), timeout=left, cancellable=False
                )
                break
            except JSONRPCError as exc:
                supported = supported_revisions(exc.raw_data)
                if not supported:
                    raise
                mutual = [v for v in SUPPORTED_REVISIONS if v in supported]
                if mutual and not retried and mutual[0] != self._offer:
                    log.info(
                        "%s: initialize refused %s; offering %s", self.name, self._offer, mutual[0]
                    )
                    self._offer, retried = mutual[0], True
                    continue
                raise UnsupportedRevision(
                    f"server rejected protocol version {self._offer} ({exc.message}); it"
                    f" supports {shown_revisions(exc.data)}"
                    + ("" if mutual else f", agenthost speaks {', '.join(SUPPORTED_REVISIONS)}"),
                    supported=supported,
                    server=self.name,
                ) from None
        result = structure(raw, m.INITIALIZE_SPEC.result)
        version = result.protocol_version
        if version not in SUPPORTED_REVISIONS:
            raise UnsupportedRevision(
                f"server answered protocol version {version!r}; agenthost speaks"
                f" {', '.join(SUPPORTED_REVISIONS)}",
                supported=(version,),
                server=self.name,
            )
        self.revision = version
        self.era = Era.LEGACY
        self.initialize_result = result
        self._transport.set_protocol_version(version)
        await self.notify(m.NOTIFICATION_INITIALIZED)
        return result

    async def ping(self, *, timeout: Timeout = DEFAULT) -> None:
        """Check the server answers. 2026-07-28 has no ``ping``: ``server/discover`` then."""
        await self._era.ping(self._limit(timeout))

    async def set_logging_level(self, level: str) -> None:
        """Ask the server to send ``notifications/message`` at ``level`` and above.

        2026-07-28 has no ``logging/setLevel``: the level rides on every request's
        ``_meta`` instead.
        """
        await self._era.set_level(level)

    async def notify_roots_list_changed(self) -> None:
        """Tell the server the roots changed (2026-07-28 has no such notification: the
        server asks for roots in each request that needs them)."""
        await self._era.roots_changed()

    # ------------------------------------------------------------------ server features

    async def _all_pages(
        self,
        spec: m.RequestSpec[PaginatedRequestParams, Any],
        key: str,
        timeout: Timeout,
    ) -> list[Any]:
        """Every page of a list; a modern list is cached for its ``ttlMs`` (the shortest
        of its pages), until a change notification makes it stale."""
        cached = self._list_cache.get(spec.method)
        if cached is not None and cached[0] > trio.current_time():
            return list(cached[1])
        items: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        ttl: float | None = None
        limit = self._limit(timeout)
        while True:
            params = PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page, page_ttl = await self._era.page(spec, self._params(params), limit)
            ttl = page_ttl if ttl is None else min(ttl, page_ttl)
            items.extend(getattr(page, key))
            cursor = page.next_cursor
            if not cursor:
                if ttl:
                    self._list_cache[spec.method] = (trio.current_time() + ttl, list(items))
                return items
            if cursor in seen:  # a server that loops its cursors must not loop us
                raise ProtocolError(
                    f"{spec.method}: server repeated cursor {cursor!r}", server=self.name
                )
            seen.add(cursor)

    async def list_tools(self, *, timeout: Timeout = DEFAULT) -> list[Tool]:
        """All tools, across every page. Remembers output schemas for :meth:`call_tool`."""
        tools: list[Tool] = await self._all_pages(m.TOOLS_LIST_SPEC, "tools", timeout)
        tools = self._era.tools_listed(tools)
        self._tools_by_name = {tool.name: tool for tool in tools}
        self._output_validators.clear()
        return tools

    async def list_tools_page(self, cursor: str | None = None) -> ListToolsResult:
        return await self.request(
            m.TOOLS_LIST_SPEC, PaginatedRequestParams(cursor=cursor) if cursor else None
        )

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: Timeout = DEFAULT,
        progress: ProgressCallback | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> CallToolResult:
        """Call a tool.

        A tool error is a result with ``is_error`` set, not an exception: it is meant for
        the model to read. When the tool declared an ``outputSchema`` (seen by
        :meth:`list_tools`), ``structured_content`` is validated against it.

        Raises:
            OutputValidationError: structured content missing or not matching the schema.
            SchemaRefused: the tool's outputSchema is one agenthost will not apply (a
                ``$ref`` that is not local, a pattern RE2 cannot run, over a bound): the
                call is not sent; or checking the result exceeded its bounds.
            JSONRPCError, AgentHostTimeout, TransportClosed: as :meth:`request`.
        """
        tool = self._tools_by_name.get(name)
        # Compiled before the call: a tool whose results cannot be checked is not run.
        checker = None if tool is None else self._output_checker(tool)
        call_meta: dict[str, Any] | None = None
        token: str | None = None
        if meta or progress is not None:
            call_meta = dict(meta or {})
        if progress is not None:
            assert call_meta is not None
            token = f"p{self._rpc.next_id()}"
            call_meta["progressToken"] = token
            self._progress[token] = progress
        params = m.call_tool_params(name, arguments, call_meta)
        try:
            # The common call, inline: on a legacy session the era's exchange is
            # ``RPC.call`` itself (bench: client CPU/call); on a 2026-07-28 one, the short
            # path of ModernEra.exchange is here, its frame less to resume (bench: "stdio
            # calls/s ..., MCP 2026-07-28").
            limit = self.request_timeout if timeout is DEFAULT else timeout
            era = self._era
            if type(era) is ModernEra and era.short:  # known after its first exchange
                started = era.now()
                try:
                    raw = await self._rpc.call(
                        m.TOOLS_CALL, era.stamp.spliced(params), timeout=limit, started=started
                    )
                except JSONRPCError as exc:
                    raw = await era.recover(exc, m.TOOLS_CALL, params, limit, started)
                else:
                    if "_meta" in raw or "resultType" in raw:
                        raw = await era.finish(raw, m.TOOLS_CALL, params, limit, started)
            else:
                raw = await era.exchange(m.TOOLS_CALL, params, timeout=limit)
            result = structure(raw, CallToolResult)
            if token is not None or self._listeners.get(m.NOTIFICATION_MESSAGE):
                # The response wakes us directly, while the progress (or log lines) the
                # server sent before it may still be queued for the dispatcher: deliver
                # those first, so that they are seen as part of this call.
                await self._rpc.notifications_delivered(self._rpc.notifications_queued())
        finally:
            if token is not None:
                self._progress.pop(token, None)
        if checker is not None and tool is not None and not result.is_error:
            await self._validate_output(tool, checker, result)
        return result

    def refuse_unusable(self, name: str) -> None:
        """Raise when tool ``name``'s outputSchema is one agenthost will not apply, so that
        a call made another way (as a task) is not sent either; cheap (cached).

        Raises:
            SchemaRefused: as :meth:`call_tool` would before sending.
        """
        tool = self._tools_by_name.get(name)
        if tool is not None:
            self._output_checker(tool)

    async def checked_output(self, name: str, result: CallToolResult) -> CallToolResult:
        """``result`` of tool ``name`` that came another way than :meth:`call_tool` (a
        task's), checked against the tool's outputSchema as :meth:`call_tool` does.

        Raises:
            OutputValidationError, SchemaRefused: as :meth:`call_tool`.
        """
        tool = self._tools_by_name.get(name)
        checker = None if tool is None else self._output_checker(tool)
        if checker is not None and tool is not None and not result.is_error:
            await self._validate_output(tool, checker, result)
        return result

    def _output_checker(self, tool: Tool) -> PeerSchema | None:
        """The tool's compiled ``outputSchema`` (None without one), cached per tool.

        Raises:
            SchemaRefused: the server's schema is one agenthost will not apply (a remote
                ``$ref``, a pattern RE2 cannot run, too large, ...); also cached, so the
                refusal costs nothing on the next call.
        """
        if tool.output_schema is None:
            return None
        checker = self._output_validators.get(tool.name)
        if checker is None:
            # deferred: only sessions with output schemas pay for jsonschema and RE2
            from agenthost_policies.schemas import compile_peer_schema

            try:
                checker = compile_peer_schema(
                    tool.output_schema, who=f"tool {tool.name!r} outputSchema"
                )
            except SchemaRefused as exc:
                checker = f"{exc}; the tool was not called"
            self._output_validators[tool.name] = checker
        if isinstance(checker, str):  # a fresh error each time: a raised one keeps its frames
            raise SchemaRefused(checker, server=self.name)
        return checker

    async def _validate_output(
        self, tool: Tool, checker: PeerSchema, result: CallToolResult
    ) -> None:
        content = result.structured_content
        if content is None:
            raise OutputValidationError(
                f"{self.name}: tool {tool.name!r} declares an outputSchema but returned no"
                " structuredContent"
            )
        try:
            # Seconds of jsonschema for a large result (bounded by the checker): in a
            # thread, the loop and every other server go on.
            error = await checker.check(content, server=self.name)
        except SchemaRefused as exc:
            raise SchemaRefused(str(exc), server=self.name) from None
        if error is not None:
            raise OutputValidationError(
                f"{self.name}: tool {tool.name!r} returned structuredContent that does not"
                f" match its outputSchema at {error.where}: {error.message}"
            )

    async def list_prompts(self, *, timeout: Timeout = DEFAULT) -> list[Prompt]:
        return await self._all_pages(m.PROMPTS_LIST_SPEC, "prompts", timeout)

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: Timeout = DEFAULT,
    ) -> GetPromptResult:
        params = GetPromptRequestParams(
            name=name,
            arguments={key: str(value) for key, value in arguments.items()} if arguments else None,
        )
        return await self.request(m.PROMPTS_GET_SPEC, params, timeout=timeout)

    async def list_resources(self, *, timeout: Timeout = DEFAULT) -> list[Resource]:
        return await self._all_pages(m.RESOURCES_LIST_SPEC, "resources", timeout)

    async def list_resource_templates(
        self, *, timeout: Timeout = DEFAULT
    ) -> list[ResourceTemplate]:
        return await self._all_pages(m.RESOURCES_TEMPLATES_LIST_SPEC, "resource_templates", timeout)

    async def read_resource(self, uri: str, *, timeout: Timeout = DEFAULT) -> ReadResourceResult:
        return await self.request(
            m.RESOURCES_READ_SPEC, ReadResourceRequestParams(uri=uri), timeout=timeout
        )

    async def subscribe_resource(self, uri: str) -> None:
        """Ask for ``notifications/resources/updated`` about ``uri``.

        Listen with ``add_listener("notifications/resources/updated", ...)``. On 2026-07-28
        the URI joins the session's ``subscriptions/listen`` filter instead.
        """
        await self._era.subscribe(uri)

    async def unsubscribe_resource(self, uri: str) -> None:
        await self._era.unsubscribe(uri)

    async def complete(
        self,
        ref: Mapping[str, Any],
        argument: str,
        value: str,
        *,
        context: Mapping[str, str] | None = None,
        timeout: Timeout = DEFAULT,
    ) -> CompleteResult:
        """``completion/complete`` for a prompt or resource-template argument.

        ``ref`` is ``{"type": "ref/prompt", "name": ...}`` or ``{"type": "ref/resource",
        "uri": ...}``; ``context`` (earlier arguments) is sent from 2025-06-18 on.
        """
        wire: dict[str, Any] = {"ref": dict(ref), "argument": {"name": argument, "value": value}}
        if context:
            wire["context"] = {"arguments": dict(context)}
        params = structure(wire, CompleteRequestParams)
        return await self.request(m.COMPLETION_COMPLETE_SPEC, params, timeout=timeout)

    # ------------------------------------------------------------------ notifications in

    def add_listener(self, method: str, listener: NotificationListener) -> Callable[[], None]:
        """Call ``listener`` for every notification ``method``; returns an unsubscriber."""
        listeners = self._listeners.setdefault(method, [])
        listeners.append(listener)

        def remove() -> None:
            with suppress(ValueError):
                listeners.remove(listener)

        return remove

    def listen_if_wanted(self) -> None:
        """2026-07-28: keep a ``subscriptions/listen`` open when anyone listens to change
        notifications (legacy servers send them unasked: nothing to do)."""
        if any(
            self.has_listener(method) for method in (*_STALE_BY, "notifications/resources/updated")
        ):
            self._era.listen()

    def closed_by_client(self) -> None:
        """The client is done with the session: requests still waiting fail with
        :class:`~agenthost.errors.TransportClosed` rather than hang."""
        self._close(TransportClosed("session closed by the client", server=self.name))

    def has_listener(self, method: str) -> bool:
        """Whether anyone listens to notification ``method`` (2026-07-28 asks the server
        for only those)."""
        return bool(self._listeners.get(method))

    async def _deliver(self, method: str, params: Mapping[str, Any]) -> None:
        for stale in _STALE_BY.get(method, ()):
            self._list_cache.pop(stale, None)
        if method == "notifications/progress":
            token = params.get("progressToken")
            hashable = type(token) is str or type(token) is int
            callback = self._progress.get(token) if hashable else None  # type: ignore[arg-type]
            if callback is not None:
                await callback(
                    float(params.get("progress", 0)), params.get("total"), params.get("message")
                )
        elif method == "notifications/message":
            log_server_message(self._server_log, params)
        listeners = self._listeners.get(method)
        if not listeners:
            return
        ctx = RequestContext(
            server=self.name,
            revision=self.revision or self._offer,
            method=method,
            meta=params.get("_meta"),
        )
        for listener in list(listeners):
            await listener(ctx, params)

    # ------------------------------------------------------------------ requests in

    async def _handle(self, request: Request) -> dict[str, Any]:
        """A server's own request: refused on 2026-07-28, else the ask router's
        (:mod:`agenthost.asks`: ``ping``, ask tasks, asks)."""
        method = request.method
        params = request.params or {}
        self._era.refuse_request(method)
        return await self._asks.handle_request(
            method, params, revision=self.revision or self._offer, request_id=request.id
        )
