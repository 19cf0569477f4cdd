"""ClientSession: one MCP client session with one server, over any transport.

The session negotiates the revision, correlates requests with responses, enforces
timeouts, turns Trio cancellation into ``notifications/cancelled``, routes notifications
and progress, pages through lists, and answers the server's own requests through one
:class:`ClientHandlers` object.

Concurrency model (STYLE.md 2): one reader task per session takes every message off the
transport and dispatches it by type. A response wakes the task that sent the request
(no channel hop: the waiting task is rescheduled directly). A server request runs in a
task of its own, so a slow sampling request never blocks the reader; at most
``max_server_requests`` at once, the excess (and every ``ping``) answered by the reader
itself, so a server that floods us and stops reading gets backpressure. Notifications go
through a bounded channel to one dispatcher task, which keeps their order (progress
arrives in order) and applies backpressure instead of buffering without limit.

Error handling: when the transport ends (server exited, stream closed, message too large),
every pending request fails at once with :class:`~agenthost.errors.TransportClosed`
naming the server, and every later request fails the same way. A malformed frame is
logged and skipped by the transport; a response to an unknown id is logged and ignored; a
server request for a method we do not handle gets -32601; a handler that raises gets an
error response and the session lives on.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from types import EllipsisType
from typing import Any, Final, TypeVar

import attrs
import orjson
import outcome
import trio

from agenthost import __version__, jsonrpc
from agenthost._util import collapse_single_group
from agenthost.converter import structure, unstructure
from agenthost.errors import (
    AgentHostError,
    AgentHostTimeout,
    JSONRPCError,
    OutputValidationError,
    ProtocolError,
    TransportClosed,
    TransportError,
    UnsupportedRevision,
)
from agenthost.jsonrpc import (
    ErrorObject,
    ErrorResponse,
    InvalidResponse,
    Notification,
    Request,
    RequestId,
    Response,
)
from agenthost.revisions import LATEST_REVISION, SUPPORTED_REVISIONS, at_least
from agenthost.transports.base import Transport
from agenthost.types import (
    CallToolResult,
    CompleteResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    GetPromptResult,
    InitializeResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListRootsResult,
    ListToolsResult,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Tool,
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

T = TypeVar("T")

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

_CANCEL_NOTIFY_TIMEOUT: Final = 1.0
#: How long a call waits for its own progress notifications to be delivered after its
#: response came (only a listener stuck on the dispatcher makes this wait at all).
_PROGRESS_DRAIN_TIMEOUT: Final = 5.0

#: The longest server logger name kept in a log record.
_LOGGER_NAME_MAX: Final = 200

#: Server requests one session answers at once. A server asks for little at a time
#: (a sampling call, a roots list); one that floods (issue 14: 300k pings, 124,905 tasks,
#: 1 GiB) gets an error for the excess, written by the reader itself, so a server that
#: also stops reading its input blocks our reader (backpressure) instead of our memory.
DEFAULT_MAX_SERVER_REQUESTS: Final = 32
#: The reader yields to other tasks at least once per this many messages: one batch of
#: 300k messages must not hold the event loop (and every other server) while it drains.
_YIELD_EVERY: Final = 64


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


class _Waiter:
    """One pending request: the task waiting for it, or the outcome if it came first."""

    __slots__ = ("deadline", "done", "outcome", "sent", "task")

    def __init__(self, deadline: float) -> None:
        self.task: trio.lowlevel.Task | None = None
        self.outcome: outcome.Outcome[Any] | None = None
        #: The transport accepted the request (the server may see it).
        self.sent = False
        #: When the request times out, on Trio's clock (inf: never).
        self.deadline = deadline
        #: The request is over, however it ended (its deadline no longer matters).
        self.done = False

    def abort(self, _: Any) -> trio.lowlevel.Abort:
        # Cancelled while parked: forget the task so a late response cannot wake it twice.
        self.task = None
        return trio.lowlevel.Abort.SUCCEEDED

    def time_out(self) -> None:
        """Wake the waiting task with :data:`_TIMED_OUT` (or leave it for the sender)."""
        task = self.task
        if task is not None:
            self.task = None
            trio.lowlevel.reschedule(task, outcome.Value(_TIMED_OUT))
        elif self.outcome is None:
            self.outcome = outcome.Value(_TIMED_OUT)


#: What a waiter receives when its deadline passed (see ClientSession._watch_deadlines).
_TIMED_OUT: Final = object()


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
        max_server_requests: int = DEFAULT_MAX_SERVER_REQUESTS,
    ) -> None:
        if protocol_version not in SUPPORTED_REVISIONS:
            raise UnsupportedRevision(
                f"cannot offer protocol version {protocol_version!r}; agenthost speaks "
                + ", ".join(SUPPORTED_REVISIONS)
            )
        self.name = name
        self.handlers = handlers or ClientHandlers()
        self.request_timeout = request_timeout
        self._transport = transport
        self._offer = protocol_version
        self._client_info = dict(
            client_info or {"name": "agenthost", "title": "agenthost", "version": __version__}
        )
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, _Waiter] = {}
        self._abandoned: set[RequestId | None] = set()
        self._incoming: dict[RequestId, trio.CancelScope] = {}
        #: Server requests being answered (handler running or reply being written).
        self._asks = 0
        self._max_asks = max_server_requests
        self._refused = 0
        #: One logger per server for its ``notifications/message`` (Python never frees a
        #: logger, so a logger per server-chosen name would be a leak).
        self._server_log = logging.getLogger(f"agenthost.server.{name}")
        self._progress: dict[str | int, ProgressCallback] = {}
        self._listeners: dict[str, list[NotificationListener]] = {}
        for method, listener in self.handlers.notifications.items():
            self._listeners.setdefault(method, []).append(listener)
        self._notify_send, self._notify_receive = trio.open_memory_channel[
            tuple[str, Mapping[str, Any]]
        ](notification_buffer)
        #: Notifications handed to the dispatcher, and delivered by it, so far: a call
        #: whose response overtook its own progress notifications waits for them.
        self._notes_queued = 0
        self._notes_done = 0
        self._drain_waiters: list[tuple[int, trio.Event]] = []
        self._closed: AgentHostError | None = None
        self._closed_event = trio.Event()
        self._nursery: trio.Nursery | None = None
        #: Requests with a deadline, one queue per timeout length: a queue's deadlines
        #: only grow, so its head is its earliest live one (see _watch_deadlines).
        self._deadlines: dict[float, deque[_Waiter]] = {}
        #: The watchdog's sleep, and when it wakes.
        self._watch_scope: trio.CancelScope | None = None
        self._watch_at = math.inf
        self._output_validators: dict[str, Any] = {}
        self._tools_by_name: dict[str, Tool] = {}
        #: Set by :meth:`initialize`.
        self.revision: str | None = None
        self.initialize_result: InitializeResult | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def close_reason(self) -> AgentHostError | None:
        """Why the session ended (None while it is open)."""
        return self._closed

    async def wait_closed(self) -> AgentHostError:
        """Wait until the session ends (the server exited, the stream broke, or we closed)."""
        await self._closed_event.wait()
        assert self._closed is not None
        return self._closed

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
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._dispatch_notifications)
            nursery.start_soon(self._watch_deadlines)
            task_status.started()
            try:
                await self._read_loop()
            finally:
                nursery.cancel_scope.cancel()

    async def _read_loop(self) -> None:
        transport = self._transport
        pending = self._pending
        count = 0
        try:
            while True:
                message = await transport.receive()
                count += 1
                if count % _YIELD_EVERY == 0:
                    await trio.lowlevel.checkpoint()
                kind = type(message)
                if kind is Response or kind is ErrorResponse:
                    assert isinstance(message, Response | ErrorResponse)
                    waiter = pending.pop(message.id, None) if message.id is not None else None
                    if waiter is None:
                        self._unmatched(message)
                        continue
                    if waiter.task is not None:
                        trio.lowlevel.reschedule(waiter.task, outcome.Value(message))
                        waiter.task = None
                    else:
                        waiter.outcome = outcome.Value(message)
                elif kind is InvalidResponse:
                    assert isinstance(message, InvalidResponse)
                    self._invalid_response(message)
                elif kind is Request:
                    assert isinstance(message, Request)
                    assert self._nursery is not None
                    if message.method == "ping" or self._asks >= self._max_asks:
                        await self._answer_inline(message)
                        continue
                    self._asks += 1
                    # Register the request's cancel scope now, in the reader: a
                    # notifications/cancelled read in the same batch must find it.
                    scope = trio.CancelScope()
                    self._incoming[message.id] = scope
                    self._nursery.start_soon(self._answer, message, scope)
                else:
                    assert isinstance(message, Notification)
                    await self._on_notification(message)
        except TransportError as exc:
            self._close(exc)
        except BaseException:
            self._close(TransportClosed("session closed", server=self.name))
            raise
        finally:
            self._close(TransportClosed("session closed", server=self.name))

    def _invalid_response(self, message: InvalidResponse) -> None:
        """Fail the request a malformed response answers, at once (it would wait forever)."""
        waiter = self._pending.pop(message.id, None)
        if waiter is None:
            log.warning(
                "%s: ignoring invalid response to unknown request id %s: %s",
                self.name,
                _short_id(message.id),
                message.problem,
            )
            return
        error = outcome.Error(
            ProtocolError(f"invalid response from the server: {message.problem}", server=self.name)
        )
        if waiter.task is not None:
            trio.lowlevel.reschedule(waiter.task, error)
            waiter.task = None
        else:
            waiter.outcome = error

    async def _answer_inline(self, request: Request) -> None:
        """Answer a ping, or refuse a request past the cap, from the reader itself.

        Awaiting the write here is the backpressure: while the server does not read our
        answers, we do not read its next message.
        """
        if request.method == "ping":
            reply: Response | ErrorResponse = Response(request.id, {})
        else:
            self._refused += 1
            if self._refused == 1:
                log.warning(
                    "%s: server has %d requests in progress; refusing more until they end",
                    self.name,
                    self._max_asks,
                )
            reply = ErrorResponse(
                request.id,
                ErrorObject(
                    jsonrpc.INTERNAL_ERROR,
                    f"too many concurrent requests from this server (limit {self._max_asks})",
                ),
            )
        with suppress(TransportError):
            await self._transport.send(reply)

    def _unmatched(self, message: Response | ErrorResponse) -> None:
        if message.id in self._abandoned:
            self._abandoned.discard(message.id)
            log.debug("%s: late response to abandoned request %r", self.name, message.id)
            return
        if isinstance(message, ErrorResponse):
            log.warning(
                "%s: error response for unknown request id %r: %s",
                self.name,
                message.id,
                message.error.message,
            )
        else:
            log.warning("%s: ignoring response to unknown request id %r", self.name, message.id)

    def _close(self, exc: AgentHostError) -> None:
        """Fail every pending request; later requests fail at once with the same reason."""
        if self._closed is None:
            self._closed = exc
            self._closed_event.set()
            log.debug("%s: session closed: %s", self.name, exc)
        reason = str(self._closed)
        waiters = list(self._pending.values())
        self._pending.clear()
        for waiter in waiters:
            error = outcome.Error(_closed_error(self._closed, reason, self.name))
            if waiter.task is not None:
                trio.lowlevel.reschedule(waiter.task, error)
                waiter.task = None
            else:
                waiter.outcome = error
        for scope in self._incoming.values():
            scope.cancel()
        for _, event in self._drain_waiters:
            event.set()
        self._drain_waiters.clear()
        self._notify_send.close()

    async def aclose(self) -> None:
        """Close the transport; pending requests fail. Idempotent."""
        self._close(TransportClosed("session closed by the client", server=self.name))
        with trio.CancelScope(shield=True):
            await self._transport.aclose()

    # ------------------------------------------------------------------ requests

    async def send_request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None | EllipsisType = ...,
        cancellable: bool = True,
    ) -> dict[str, Any]:
        """Send a request and return the raw ``result`` object.

        Raises:
            JSONRPCError: the server answered with an error.
            AgentHostTimeout: no answer within ``timeout`` (the server is told to cancel).
            TransportClosed: the server is gone (before or while waiting).

        Cancellation: the server receives ``notifications/cancelled`` for this request.
        """
        if self._closed is not None:
            raise _closed_error(self._closed, str(self._closed), self.name)
        limit = self.request_timeout if isinstance(timeout, EllipsisType) else timeout
        request_id = next(self._ids)
        # One deadline for writing the request and for its answer: a server that stopped
        # reading its input must not make a request outlive its timeout. It is kept by
        # the session's watchdog, not by a cancel scope per request: entering a scope is
        # the largest single cost of a call under load (bench/RESULTS.md).
        waiter = _Waiter(math.inf if limit is None else trio.current_time() + limit)
        if limit is not None:
            self._watch(waiter, limit)
        self._pending[request_id] = waiter
        request = Request(request_id, method, params)
        try:
            try:
                message = await self._exchange(request, waiter)
            except trio.TooSlowError:  # the transport could not take it before the deadline
                message = _TIMED_OUT
            if message is _TIMED_OUT:
                if self._pending.pop(request_id, None) is not None:
                    self._forget(request_id)
                    if cancellable and waiter.sent:
                        await self._notify_cancelled(request_id, "timed out")
                assert limit is not None
                raise AgentHostTimeout(
                    f"{method} timed out after {limit:g}s", server=self.name, timeout=limit
                )
        except trio.Cancelled:
            if self._pending.pop(request_id, None) is not None:
                self._forget(request_id)
                # Only a request the server may have seen is cancelled (the spec: the id
                # MUST be one previously issued).
                if cancellable and waiter.sent:
                    with trio.CancelScope(shield=True):
                        await self._notify_cancelled(request_id, "cancelled by the client")
            raise
        except BaseException as exc:
            if self._pending.pop(request_id, None) is not None and not isinstance(exc, Exception):
                # KeyboardInterrupt (Trio delivers Ctrl-C into the waiting task when the
                # caller did not turn it into a cancellation): the server must still hear.
                self._forget(request_id)
                if cancellable and waiter.sent:
                    with trio.CancelScope(shield=True):
                        await self._notify_cancelled(request_id, "interrupted")
            raise
        finally:
            waiter.done = True
            if limit is not None:
                self._unwatch(limit)
        if type(message) is Response:
            return message.result
        assert isinstance(message, ErrorResponse)
        error = message.error
        raise JSONRPCError(error.code, error.message, error.data, server=self.name)

    async def _exchange(self, request: Request, waiter: _Waiter) -> Any:
        """Write ``request``, then wait for its answer (or take it if it came first).

        Returns the response, or :data:`_TIMED_OUT` from the watchdog.
        """
        await self._transport.send(request, deadline=waiter.deadline)
        waiter.sent = True
        result = waiter.outcome
        if result is not None:
            return result.unwrap()
        waiter.task = trio.lowlevel.current_task()
        return await trio.lowlevel.wait_task_rescheduled(waiter.abort)

    def _watch(self, waiter: _Waiter, limit: float) -> None:
        queue = self._deadlines.get(limit)
        if queue is None:
            queue = self._deadlines[limit] = deque()
        queue.append(waiter)
        if waiter.deadline < self._watch_at:
            self._watch_at = waiter.deadline
            if self._watch_scope is not None:
                self._watch_scope.deadline = waiter.deadline

    def _unwatch(self, limit: float) -> None:
        """Drop finished requests from the head of their queue (amortised O(1))."""
        queue = self._deadlines.get(limit)
        if queue is not None:
            while queue and queue[0].done:
                queue.popleft()
            if not queue:
                del self._deadlines[limit]

    async def _watch_deadlines(self) -> None:
        """Time out every request whose deadline passed; sleep until the next one.

        The watchdog wakes at the earliest deadline it knew of when it went to sleep. A
        request that finished meanwhile just moves the next wake later, so a session
        under load wakes about once per timeout period, not once per request.
        """
        while True:
            with trio.CancelScope(deadline=self._watch_at) as scope:
                self._watch_scope = scope
                await trio.sleep_forever()
            self._watch_scope = None
            now = trio.current_time()
            earliest = math.inf
            for limit, queue in list(self._deadlines.items()):
                while queue:
                    head = queue[0]
                    if not head.done and head.deadline > now:
                        earliest = min(earliest, head.deadline)
                        break
                    queue.popleft()
                    if not head.done:
                        head.time_out()
                if not queue:
                    del self._deadlines[limit]
            self._watch_at = earliest

    def _forget(self, request_id: RequestId) -> None:
        """Remember an abandoned id so its late response is not reported as a mystery."""
        if len(self._abandoned) > 4096:
            self._abandoned.clear()
        self._abandoned.add(request_id)

    async def _notify_cancelled(self, request_id: RequestId, reason: str) -> None:
        if self._closed is not None:
            return
        with trio.move_on_after(_CANCEL_NOTIFY_TIMEOUT), suppress(TransportError):
            await self._transport.send(
                Notification("notifications/cancelled", {"requestId": request_id, "reason": reason})
            )

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None,
        result_type: type[T],
        *,
        timeout: float | None | EllipsisType = ...,
    ) -> T:
        """Send a request and structure its result as ``result_type``."""
        raw = await self.send_request(method, params, timeout=timeout)
        return structure(raw, result_type)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification."""
        if self._closed is not None:
            raise _closed_error(self._closed, str(self._closed), self.name)
        await self._transport.send(Notification(method, params))

    # ------------------------------------------------------------------ lifecycle requests

    def client_capabilities(self, revision: str) -> dict[str, Any]:
        """The capabilities we declare under ``revision``: only what has a handler."""
        caps: dict[str, Any] = {}
        handlers = self.handlers
        if handlers.roots is not None:
            caps["roots"] = {"listChanged": True}
        if handlers.sampling is not None:
            sampling: dict[str, Any] = {}
            if at_least(revision, "2025-11-25"):
                if handlers.sampling_tools:
                    sampling["tools"] = {}
                if handlers.sampling_context:
                    sampling["context"] = {}
            caps["sampling"] = sampling
        if handlers.elicitation is not None and at_least(revision, "2025-06-18"):
            if at_least(revision, "2025-11-25"):
                caps["elicitation"] = {mode: {} for mode in handlers.elicitation_modes}
            else:
                caps["elicitation"] = {}
        return caps

    async def initialize(self, *, timeout: float | None = 30.0) -> InitializeResult:
        """Negotiate the revision: offer ours, accept any supported one the server picks.

        Raises:
            UnsupportedRevision: the server chose a revision we do not speak (the message
                names both sides), or rejected ours naming the ones it supports.
        """
        params = {
            "protocolVersion": self._offer,
            "capabilities": self.client_capabilities(self._offer),
            "clientInfo": self._client_info_for(self._offer),
        }
        try:
            raw = await self.send_request("initialize", params, timeout=timeout, cancellable=False)
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
        result = structure(raw, InitializeResult)
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
        await self.notify("notifications/initialized")
        return result

    def _client_info_for(self, revision: str) -> dict[str, Any]:
        info = dict(self._client_info)
        if not at_least(revision, "2025-06-18"):
            info.pop("title", None)
        if not at_least(revision, "2025-11-25"):
            for key in ("icons", "websiteUrl", "description"):
                info.pop(key, None)
        return info

    async def ping(self, *, timeout: float | None | EllipsisType = ...) -> None:
        await self.send_request("ping", None, timeout=timeout)

    async def set_logging_level(self, level: str) -> None:
        """Ask the server to send ``notifications/message`` at ``level`` and above."""
        await self.send_request("logging/setLevel", {"level": level})

    async def notify_roots_list_changed(self) -> None:
        await self.notify("notifications/roots/list_changed")

    # ------------------------------------------------------------------ server features

    async def _all_pages(
        self,
        method: str,
        key: str,
        result_type: type[Any],
        timeout: float | None | EllipsisType,
    ) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            params = {"cursor": cursor} if cursor is not None else None
            page = await self.request(method, params, result_type, timeout=timeout)
            items.extend(getattr(page, key))
            cursor = page.next_cursor
            if not cursor:
                return items
            if cursor in seen:  # a server that loops its cursors must not loop us
                raise ProtocolError(
                    f"{method}: server repeated cursor {cursor!r}", server=self.name
                )
            seen.add(cursor)

    async def list_tools(self, *, timeout: float | None | EllipsisType = ...) -> list[Tool]:
        """All tools, across every page. Remembers output schemas for :meth:`call_tool`."""
        tools: list[Tool] = await self._all_pages("tools/list", "tools", ListToolsResult, timeout)
        self._tools_by_name = {tool.name: tool for tool in tools}
        self._output_validators.clear()
        return tools

    async def list_tools_page(self, cursor: str | None = None) -> ListToolsResult:
        return await self.request(
            "tools/list", {"cursor": cursor} if cursor else None, ListToolsResult
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
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        token: str | None = None
        if meta or progress is not None:
            params["_meta"] = dict(meta or {})
        if progress is not None:
            token = f"p{next(self._ids)}"
            params["_meta"]["progressToken"] = token
            self._progress[token] = progress
        try:
            raw = await self.send_request("tools/call", params, timeout=timeout)
            if token is not None:
                # The response wakes us directly, while the progress the server sent
                # before it may still be queued for the dispatcher: deliver those first.
                await self._notifications_delivered(self._notes_queued)
        finally:
            if token is not None:
                self._progress.pop(token, None)
        result = structure(raw, CallToolResult)
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
        return await self._all_pages("prompts/list", "prompts", ListPromptsResult, timeout)

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None | EllipsisType = ...,
    ) -> GetPromptResult:
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = {key: str(value) for key, value in arguments.items()}
        return await self.request("prompts/get", params, GetPromptResult, timeout=timeout)

    async def list_resources(self, *, timeout: float | None | EllipsisType = ...) -> list[Resource]:
        return await self._all_pages("resources/list", "resources", ListResourcesResult, timeout)

    async def list_resource_templates(
        self, *, timeout: float | None | EllipsisType = ...
    ) -> list[ResourceTemplate]:
        return await self._all_pages(
            "resources/templates/list",
            "resource_templates",
            ListResourceTemplatesResult,
            timeout,
        )

    async def read_resource(
        self, uri: str, *, timeout: float | None | EllipsisType = ...
    ) -> ReadResourceResult:
        return await self.request(
            "resources/read", {"uri": uri}, ReadResourceResult, timeout=timeout
        )

    async def subscribe_resource(self, uri: str) -> None:
        """Ask for ``notifications/resources/updated`` about ``uri``.

        Listen with ``add_listener("notifications/resources/updated", ...)``.
        """
        await self.send_request("resources/subscribe", {"uri": uri})

    async def unsubscribe_resource(self, uri: str) -> None:
        await self.send_request("resources/unsubscribe", {"uri": uri})

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
        params: dict[str, Any] = {
            "ref": dict(ref),
            "argument": {"name": argument, "value": value},
        }
        if context and self.revision and at_least(self.revision, "2025-06-18"):
            params["context"] = {"arguments": dict(context)}
        return await self.request("completion/complete", params, CompleteResult, timeout=timeout)

    # ------------------------------------------------------------------ notifications in

    def add_listener(self, method: str, listener: NotificationListener) -> Callable[[], None]:
        """Call ``listener`` for every notification ``method``; returns an unsubscriber."""
        listeners = self._listeners.setdefault(method, [])
        listeners.append(listener)

        def remove() -> None:
            with suppress(ValueError):
                listeners.remove(listener)

        return remove

    async def _on_notification(self, message: Notification) -> None:
        method = message.method
        params = message.params or {}
        if method == "notifications/cancelled":
            target = params.get("requestId")
            if type(target) is not int and type(target) is not str:
                log.warning("%s: ignoring a cancellation with a bad requestId", self.name)
                return
            scope = self._incoming.get(target)
            if scope is not None:
                log.debug("%s: server cancelled its request %r", self.name, params.get("requestId"))
                scope.cancel()
            return
        self._notes_queued += 1
        try:
            self._notify_send.send_nowait((method, params))
        except trio.WouldBlock:
            # Keep the order and the bound: the reader waits for the dispatcher. (Listeners
            # should therefore be quick, and spawn long work rather than await it.)
            with suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                await self._notify_send.send((method, params))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def _dispatch_notifications(self) -> None:
        async for method, params in self._notify_receive:
            try:
                await self._deliver(method, params)
            except Exception:
                # A listener's bug must not end the session; it is reported, not hidden.
                log.exception("%s: listener for %s failed", self.name, method)
            self._notes_done += 1
            if self._drain_waiters:
                done = self._notes_done
                still = []
                for target, event in self._drain_waiters:
                    if target <= done:
                        event.set()
                    else:
                        still.append((target, event))
                self._drain_waiters = still

    async def _notifications_delivered(self, target: int) -> None:
        """Wait until the first ``target`` notifications have been delivered.

        Bounded by :data:`_PROGRESS_DRAIN_TIMEOUT` (a listener that hangs must not hang
        the call) and over when the session closes.
        """
        if self._notes_done >= target or self._closed is not None:
            return
        event = trio.Event()
        self._drain_waiters.append((target, event))
        with trio.move_on_after(_PROGRESS_DRAIN_TIMEOUT):
            await event.wait()

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
                # The server's own logger name goes in the record and the text, never into
                # the logger hierarchy (issue 14: 200k names = 200k loggers, 153 MiB).
                name = str(logger)[:_LOGGER_NAME_MAX] if logger is not None else None
                self._server_log.log(
                    level,
                    "%s%s",
                    f"[{name}] " if name else "",
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

    async def _answer(self, request: Request, scope: trio.CancelScope) -> None:
        """Run the handler for one server request and send its response."""
        try:
            await self._answer_within(request, scope)
        finally:
            self._asks -= 1

    async def _answer_within(self, request: Request, scope: trio.CancelScope) -> None:
        reply: Response | ErrorResponse
        with scope:
            try:
                await trio.lowlevel.checkpoint_if_cancelled()  # cancelled before we began?
                result = await self._handle(request)
                reply = Response(request.id, result)
            except JSONRPCError as exc:
                reply = ErrorResponse(request.id, ErrorObject(exc.code, exc.message, exc.data))
            except ProtocolError as exc:
                reply = ErrorResponse(request.id, ErrorObject(exc.code, str(exc)))
            except Exception as exc:
                log.exception("%s: handler for %s failed", self.name, request.method)
                reply = ErrorResponse(
                    request.id,
                    ErrorObject(
                        jsonrpc.INTERNAL_ERROR, f"client error: {type(exc).__name__}: {exc}"
                    ),
                )
            finally:
                self._incoming.pop(request.id, None)
        if scope.cancel_called:
            # The server cancelled it (perhaps before the handler reached a checkpoint):
            # no response, as the spec says.
            return
        with suppress(TransportError):
            await self._transport.send(reply)

    async def _handle(self, request: Request) -> dict[str, Any]:
        method = request.method
        params = request.params or {}
        revision = self.revision or self._offer
        ctx = RequestContext(
            session=self,
            server=self.name,
            revision=revision,
            method=method,
            request_id=request.id,
            meta=params.get("_meta"),
        )
        handlers = self.handlers
        if method == "ping":
            return {}
        if method == "roots/list" and handlers.roots is not None:
            return unstructure(await handlers.roots(ctx, params), revision)  # type: ignore[no-any-return]
        if method == "sampling/createMessage" and handlers.sampling is not None:
            typed = structure(params, CreateMessageRequestParams)
            return unstructure(await handlers.sampling(ctx, typed), revision)  # type: ignore[no-any-return]
        if method == "elicitation/create" and handlers.elicitation is not None:
            elicit = structure(params, ElicitRequestParams)
            return unstructure(await handlers.elicitation(ctx, elicit), revision)  # type: ignore[no-any-return]
        raise JSONRPCError(jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}")


def _closed_error(cause: AgentHostError, reason: str, server: str) -> AgentHostError:
    """A fresh exception per waiter (one instance raised in many tasks tangles tracebacks)."""
    if isinstance(cause, TransportError):
        message = reason.removeprefix(f"{server}: ")
        return type(cause)(message, server=server)
    return TransportClosed(reason, server=server)


def _short_id(request_id: RequestId | None) -> str:
    """A request id for a log line: a server picks ids, so a huge one is cut."""
    text = repr(request_id)
    return text if len(text) <= 80 else text[:77] + "..."


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
