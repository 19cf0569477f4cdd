"""ClientSession: the typed MCP API for one server, over the request machinery of rpc.py.

Layers (DESIGN.md, "Where the design goes next"): :mod:`agenthost.rpc` owns the JSON-RPC
endpoint (reader, pending requests, deadlines, cancellation); this module decides what
the messages mean. Every request is built from the typed method table
(:mod:`agenthost.methods`): params are typed objects unstructured for the negotiated
revision, results are structured into the spec's result type. Server asks (roots,
sampling, elicitation) go through :func:`agenthost.asks.answer_ask`, the one path both
eras share.

Error handling: when the transport ends, every pending request fails at once with
:class:`~agenthost.errors.TransportClosed` naming the server, and every later request
fails the same way. A server request for a method we do not handle gets -32601; a handler
that raises gets an error response and the session lives on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from types import EllipsisType
from typing import Any, Final, TypeVar

import attrs
import orjson
import trio

from agenthost import __version__
from agenthost import methods as m
from agenthost._util import collapse_single_group
from agenthost.asks import answer_ask
from agenthost.converter import structure, unstructure
from agenthost.errors import (
    AgentHostError,
    JSONRPCError,
    OutputValidationError,
    ProtocolError,
    TransportClosed,
    UnsupportedRevision,
)
from agenthost.jsonrpc import Request, RequestId
from agenthost.revisions import LATEST_REVISION, SUPPORTED_REVISIONS
from agenthost.rpc import DEFAULT_MAX_PEER_REQUESTS, RPC
from agenthost.transports.base import NO_OPTIONS, SendOptions, Transport
from agenthost.types import (
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    CompleteRequestParams,
    CompleteResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitationCapability,
    ElicitRequestParams,
    ElicitResult,
    GetPromptRequestParams,
    GetPromptResult,
    Implementation,
    InitializeRequestParams,
    InitializeResult,
    ListRootsResult,
    ListToolsResult,
    PaginatedRequestParams,
    Prompt,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    RootsCapability,
    SamplingCapability,
    SetLevelRequestParams,
    SubscribeRequestParams,
    Tool,
    UnsubscribeRequestParams,
)

__all__ = [
    "ClientHandlers",
    "ClientSession",
    "NotificationListener",
    "ProgressCallback",
    "RequestContext",
    "open_session",
]

log = logging.getLogger("agenthost.session")

P = TypeVar("P")
R = TypeVar("R")

#: The longest server logger name kept in a log record.
_LOGGER_NAME_MAX: Final = 200

#: Server requests one session answers at once (see :mod:`agenthost.rpc`).
DEFAULT_MAX_SERVER_REQUESTS: Final = DEFAULT_MAX_PEER_REQUESTS

#: ``notifications/message`` levels (RFC 5424 names) -> Python logging levels.
_LOG_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


@attrs.frozen(kw_only=True)
class RequestContext:
    """What a handler knows about the message it is handling."""

    session: ClientSession
    server: str
    revision: str
    method: str
    #: The id of the server's request; None for notifications.
    request_id: RequestId | None = None
    meta: Mapping[str, Any] | None = None


#: ``async (progress, total, message) -> None`` for one call's progress notifications.
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]
#: ``async (ctx, params) -> None`` for a notification.
NotificationListener = Callable[[RequestContext, Mapping[str, Any]], Awaitable[None]]

RootsHandler = Callable[[RequestContext, Mapping[str, Any]], Awaitable[ListRootsResult]]
SamplingHandler = Callable[
    [RequestContext, CreateMessageRequestParams], Awaitable[CreateMessageResult]
]
ElicitationHandler = Callable[[RequestContext, ElicitRequestParams], Awaitable[ElicitResult]]


@attrs.frozen(kw_only=True)
class ClientHandlers:
    """Everything the client does for the server, in one place (STYLE.md 6).

    A capability is declared in ``initialize`` only when its handler exists, so a server
    never asks for something we cannot do. Request handlers: ``async (ctx, params) ->
    result``; raise :class:`~agenthost.errors.JSONRPCError` to answer with an error.
    Notification listeners: ``async (ctx, params) -> None``; params are the raw object.
    """

    roots: RootsHandler | None = None
    sampling: SamplingHandler | None = None
    elicitation: ElicitationHandler | None = None
    #: 2025-11-25: declare that sampling requests may carry ``tools``/``toolChoice``.
    sampling_tools: bool = False
    #: Declare support for ``includeContext`` other than "none" (soft-deprecated).
    sampling_context: bool = False
    #: Elicitation modes offered from 2025-11-25 on.
    elicitation_modes: tuple[str, ...] = ("form", "url")
    #: Listeners keyed by notification method, e.g. ``"notifications/tools/list_changed"``.
    notifications: Mapping[str, NotificationListener] = attrs.field(factory=dict)


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
    ) -> None:
        if protocol_version not in SUPPORTED_REVISIONS:
            raise UnsupportedRevision(
                f"cannot offer protocol version {protocol_version!r}; agenthost speaks "
                + ", ".join(SUPPORTED_REVISIONS)
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
        self._offer = protocol_version
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
        self._output_validators: dict[str, Any] = {}
        self._tools_by_name: dict[str, Tool] = {}
        #: Set by :meth:`initialize`.
        self.revision: str | None = None
        self.initialize_result: InitializeResult | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def _transport(self) -> Transport:
        return self._rpc.transport

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
    def server_capabilities(self) -> Any:
        return self.initialize_result.capabilities if self.initialize_result else None

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

    def _limit(self, timeout: float | None | EllipsisType) -> float | None:
        return self.request_timeout if isinstance(timeout, EllipsisType) else timeout

    async def send_request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None | EllipsisType = ...,
        cancellable: bool = True,
        options: SendOptions = NO_OPTIONS,
    ) -> dict[str, Any]:
        """Send a request as raw JSON and return the raw ``result`` object.

        The escape hatch for methods outside the table (extensions); MCP methods go
        through :meth:`request`.

        Raises:
            JSONRPCError: the server answered with an error.
            AgentHostTimeout: no answer within ``timeout`` (the server is told to cancel).
            TransportClosed: the server is gone (before or while waiting).

        Cancellation: the server receives ``notifications/cancelled`` for this request.
        """
        return await self._rpc.call(
            method, params, timeout=self._limit(timeout), cancellable=cancellable, options=options
        )

    async def request(
        self,
        spec: m.RequestSpec[P, R],
        params: P | None = None,
        *,
        timeout: float | None | EllipsisType = ...,
        cancellable: bool = True,
    ) -> R:
        """Send ``spec.method`` with typed ``params``; the result as ``spec.result``.

        Params are shaped for the negotiated revision (fields it lacks are left out, or
        refused when dropping them would change the meaning).
        """
        raw_params = self._params(params)
        raw = await self.send_request(
            spec.method, raw_params, timeout=timeout, cancellable=cancellable
        )
        return structure(raw, spec.result)

    def _params(self, params: Any) -> dict[str, Any] | None:
        if params is None:
            return None
        out: dict[str, Any] = unstructure(params, self.revision or self._offer)
        return out

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification."""
        await self._rpc.notify(method, params)

    # ------------------------------------------------------------------ lifecycle requests

    def _capabilities(self, revision: str) -> ClientCapabilities:
        """What we declare: only what has a handler (the revision trims the rest)."""
        handlers = self.handlers
        return ClientCapabilities(
            roots=RootsCapability(list_changed=True) if handlers.roots is not None else None,
            sampling=SamplingCapability(
                tools={} if handlers.sampling_tools else None,
                context={} if handlers.sampling_context else None,
            )
            if handlers.sampling is not None
            else None,
            elicitation=ElicitationCapability(
                form={} if "form" in handlers.elicitation_modes else None,
                url={} if "url" in handlers.elicitation_modes else None,
            )
            if handlers.elicitation is not None
            else None,
        )

    def client_capabilities(self, revision: str) -> dict[str, Any]:
        """The capabilities we declare under ``revision``, as sent."""
        caps: dict[str, Any] = unstructure(self._capabilities(revision), revision)
        return caps

    def _implementation(self) -> Implementation:
        return structure(self._client_info, Implementation)

    async def initialize(self, *, timeout: float | None = 30.0) -> InitializeResult:
        """Negotiate the revision: offer ours, accept any supported one the server picks.

        Raises:
            UnsupportedRevision: the server chose a revision we do not speak (the message
                names both sides), or rejected ours naming the ones it supports.
        """
        params = InitializeRequestParams(
            protocol_version=self._offer,
            capabilities=self._capabilities(self._offer),
            client_info=self._implementation(),
        )
        try:
            raw = await self.send_request(
                m.INITIALIZE,
                unstructure(params, self._offer),
                timeout=timeout,
                cancellable=False,
            )
        except JSONRPCError as exc:
            supported = exc.data.get("supported") if isinstance(exc.data, dict) else None
            if supported:
                raise UnsupportedRevision(
                    f"server rejected protocol version {self._offer} ({exc.message}); it"
                    f" supports {', '.join(map(str, supported))}, agenthost speaks"
                    f" {', '.join(SUPPORTED_REVISIONS)}",
                    server=self.name,
                ) from None
            raise
        result = structure(raw, m.INITIALIZE_SPEC.result)
        version = result.protocol_version
        if version not in SUPPORTED_REVISIONS:
            raise UnsupportedRevision(
                f"server answered protocol version {version!r}; agenthost speaks"
                f" {', '.join(SUPPORTED_REVISIONS)}",
                server=self.name,
            )
        self.revision = version
        self.initialize_result = result
        self._transport.set_protocol_version(version)
        await self.notify(m.NOTIFICATION_INITIALIZED)
        return result

    async def ping(self, *, timeout: float | None | EllipsisType = ...) -> None:
        await self.request(m.PING_SPEC, None, timeout=timeout)

    async def set_logging_level(self, level: str) -> None:
        """Ask the server to send ``notifications/message`` at ``level`` and above."""
        await self.request(m.LOGGING_SET_LEVEL_SPEC, SetLevelRequestParams(level=level))  # type: ignore[arg-type]

    async def notify_roots_list_changed(self) -> None:
        await self.notify(m.NOTIFICATION_ROOTS_LIST_CHANGED)

    # ------------------------------------------------------------------ server features

    async def _all_pages(
        self,
        spec: m.RequestSpec[PaginatedRequestParams, Any],
        key: str,
        timeout: float | None | EllipsisType,
    ) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            params = PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await self.request(spec, params, timeout=timeout)
            items.extend(getattr(page, key))
            cursor = page.next_cursor
            if not cursor:
                return items
            if cursor in seen:  # a server that loops its cursors must not loop us
                raise ProtocolError(
                    f"{spec.method}: server repeated cursor {cursor!r}", server=self.name
                )
            seen.add(cursor)

    async def list_tools(self, *, timeout: float | None | EllipsisType = ...) -> list[Tool]:
        """All tools, across every page. Remembers output schemas for :meth:`call_tool`."""
        tools: list[Tool] = await self._all_pages(m.TOOLS_LIST_SPEC, "tools", timeout)
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
        timeout: float | None | EllipsisType = ...,
        progress: ProgressCallback | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> CallToolResult:
        """Call a tool.

        A tool error is a result with ``is_error`` set, not an exception: it is meant for
        the model to read. When the tool declared an ``outputSchema`` (seen by
        :meth:`list_tools`), ``structured_content`` is validated against it.

        Raises:
            OutputValidationError: structured content missing or not matching the schema.
            JSONRPCError, AgentHostTimeout, TransportClosed: as :meth:`send_request`.
        """
        call_meta: dict[str, Any] | None = None
        token: str | None = None
        if meta or progress is not None:
            call_meta = dict(meta or {})
        if progress is not None:
            assert call_meta is not None
            token = f"p{self._rpc.next_id()}"
            call_meta["progressToken"] = token
            self._progress[token] = progress
        params = CallToolRequestParams(name=name, arguments=dict(arguments or {}), meta=call_meta)
        try:
            result = await self.request(m.TOOLS_CALL_SPEC, params, timeout=timeout)
            if token is not None:
                # The response wakes us directly, while the progress the server sent
                # before it may still be queued for the dispatcher: deliver those first.
                await self._rpc.notifications_delivered(self._rpc.notifications_queued())
        finally:
            if token is not None:
                self._progress.pop(token, None)
        tool = self._tools_by_name.get(name)
        if tool is not None and tool.output_schema is not None and not result.is_error:
            self._validate_output(tool, result)
        return result

    def _validate_output(self, tool: Tool, result: CallToolResult) -> None:
        if result.structured_content is None:
            raise OutputValidationError(
                f"{self.name}: tool {tool.name!r} declares an outputSchema but returned no"
                " structuredContent"
            )
        validator = self._output_validators.get(tool.name)
        if validator is None:
            import jsonschema  # deferred: only sessions with output schemas pay for it

            schema = tool.output_schema
            cls = jsonschema.validators.validator_for(
                schema, default=jsonschema.Draft202012Validator
            )
            validator = cls(schema)
            self._output_validators[tool.name] = validator
        error = next(iter(validator.iter_errors(result.structured_content)), None)
        if error is not None:
            path = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise OutputValidationError(
                f"{self.name}: tool {tool.name!r} returned structuredContent that does not"
                f" match its outputSchema at {path}: {error.message}"
            )

    async def list_prompts(self, *, timeout: float | None | EllipsisType = ...) -> list[Prompt]:
        return await self._all_pages(m.PROMPTS_LIST_SPEC, "prompts", timeout)

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None | EllipsisType = ...,
    ) -> GetPromptResult:
        params = GetPromptRequestParams(
            name=name,
            arguments={key: str(value) for key, value in arguments.items()} if arguments else None,
        )
        return await self.request(m.PROMPTS_GET_SPEC, params, timeout=timeout)

    async def list_resources(self, *, timeout: float | None | EllipsisType = ...) -> list[Resource]:
        return await self._all_pages(m.RESOURCES_LIST_SPEC, "resources", timeout)

    async def list_resource_templates(
        self, *, timeout: float | None | EllipsisType = ...
    ) -> list[ResourceTemplate]:
        return await self._all_pages(m.RESOURCES_TEMPLATES_LIST_SPEC, "resource_templates", timeout)

    async def read_resource(
        self, uri: str, *, timeout: float | None | EllipsisType = ...
    ) -> ReadResourceResult:
        return await self.request(
            m.RESOURCES_READ_SPEC, ReadResourceRequestParams(uri=uri), timeout=timeout
        )

    async def subscribe_resource(self, uri: str) -> None:
        """Ask for ``notifications/resources/updated`` about ``uri``.

        Listen with ``add_listener("notifications/resources/updated", ...)``.
        """
        await self.request(m.RESOURCES_SUBSCRIBE_SPEC, SubscribeRequestParams(uri=uri))

    async def unsubscribe_resource(self, uri: str) -> None:
        await self.request(m.RESOURCES_UNSUBSCRIBE_SPEC, UnsubscribeRequestParams(uri=uri))

    async def complete(
        self,
        ref: Mapping[str, Any],
        argument: str,
        value: str,
        *,
        context: Mapping[str, str] | None = None,
        timeout: float | None | EllipsisType = ...,
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

    async def _deliver(self, method: str, params: Mapping[str, Any]) -> None:
        if method == "notifications/progress":
            token = params.get("progressToken")
            hashable = type(token) is str or type(token) is int
            callback = self._progress.get(token) if hashable else None  # type: ignore[arg-type]
            if callback is not None:
                await callback(
                    float(params.get("progress", 0)), params.get("total"), params.get("message")
                )
        elif method == "notifications/message":
            level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
            logger = params.get("logger")
            if self._server_log.isEnabledFor(level):
                # The server's own logger name goes in the record (``mcp_logger``), never
                # into the logger hierarchy (issue 14: 200k names = 200k loggers, 153 MiB).
                name = str(logger)[:_LOGGER_NAME_MAX] if logger is not None else None
                self._server_log.log(
                    level,
                    "%s",
                    _render_log_data(params.get("data")),
                    extra={"mcp_logger": name},
                )
        listeners = self._listeners.get(method)
        if not listeners:
            return
        ctx = RequestContext(
            session=self,
            server=self.name,
            revision=self.revision or self._offer,
            method=method,
            meta=params.get("_meta"),
        )
        for listener in list(listeners):
            await listener(ctx, params)

    # ------------------------------------------------------------------ requests in

    async def _handle(self, request: Request) -> dict[str, Any]:
        """A legacy server's own request: ``ping`` here, asks through :mod:`agenthost.asks`."""
        method = request.method
        params = request.params or {}
        if method == m.PING:
            return {}
        ctx = RequestContext(
            session=self,
            server=self.name,
            revision=self.revision or self._offer,
            method=method,
            request_id=request.id,
            meta=params.get("_meta"),
        )
        return await answer_ask(self.handlers, ctx, params)


def _render_log_data(data: Any) -> str:
    if isinstance(data, str):
        return data
    try:
        return orjson.dumps(data).decode()
    except TypeError:
        return repr(data)


@asynccontextmanager
async def open_session(
    transport: Transport,
    *,
    name: str,
    handlers: ClientHandlers | None = None,
    request_timeout: float | None = 60.0,
    initialize_timeout: float | None = 30.0,
    protocol_version: str = LATEST_REVISION,
    client_info: Mapping[str, Any] | None = None,
) -> AsyncIterator[ClientSession]:
    """Run a session over ``transport`` and initialize it.

    Resource handling: the session's tasks stop when the block exits; the transport is
    closed too (it belongs to the caller's ``async with``, which still tears it down).

    Raises:
        UnsupportedRevision: no common revision.
        AgentHostTimeout: the server did not answer ``initialize`` in time.
    """
    session = ClientSession(
        transport,
        name=name,
        handlers=handlers,
        request_timeout=request_timeout,
        protocol_version=protocol_version,
        client_info=client_info,
    )
    with collapse_single_group():
        async with trio.open_nursery() as nursery:
            await nursery.start(session.run)
            try:
                await session.initialize(timeout=initialize_timeout)
                yield session
            finally:
                nursery.cancel_scope.cancel()
                session._close(TransportClosed("session closed by the client", server=name))
