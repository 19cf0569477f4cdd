"""The request machinery under every session: one JSON-RPC endpoint over one transport.

With :mod:`agenthost.rpc_waiter` (a pending request) it is the only place above the
transports that uses ``trio.lowlevel``. It knows JSON-RPC, not MCP: it
correlates requests with responses, keeps deadlines, turns Trio cancellation into
``notifications/cancelled`` (or an aborted exchange, when the message's
:class:`~agenthost.transports.base.SendOptions` say so), delivers notifications in order
with backpressure, and runs the peer's requests through one handler. The MCP session
(:mod:`agenthost.session`) sits on top and decides what the messages mean.

Concurrency model (STYLE.md 2): one reader task takes every message off the transport and
dispatches it by type (:meth:`RPC._dispatch`). Over a transport whose requests are
exchanges of their own (Streamable HTTP: ``inline_exchanges``), the calling task makes
the exchange and hands what the response carries to that same dispatch, so its answer
needs no reader at all (bench: "HTTP JSON/SSE calls/s, 1 in flight, SDK"). Over stdio, a
request alone in flight reads its answer from the pipe in the calling task while the
reader parks (``reads_inline``, :meth:`RPC._read_answer`; bench: "stdio calls/s
sequential"); whatever else it reads goes to the reader, in order. A response
wakes the task that sent the request (no channel hop: the waiting task is rescheduled
directly). A peer's request runs in a task of its own, so
a slow sampling request never blocks the reader; at most ``max_peer_requests`` at once,
the excess answered by the reader itself (a ping with its result, others with an error),
so a peer that floods us and stops reading gets backpressure. Notifications go through
a bounded channel to one dispatcher task, which keeps their order (progress arrives in
order) and applies backpressure instead of buffering without limit; a call can wait
until the notifications that preceded its response were delivered
(:meth:`RPC.notifications_delivered`).

Performance: deadlines are kept by one watchdog task, not a cancel scope per request:
entering a scope was the largest single cost of a call under load (bench/RESULTS.md,
"deadline watchdog"). The watchdog wakes about once per timeout period under load.

Ctrl-C: Trio raises KeyboardInterrupt in whatever unprotected code runs when it lands, and
at a checkpoint only in the main task. Every task of the endpoint and :meth:`RPC.call` are
therefore KI-protected: there it waits for the main task's next checkpoint, where a
waiting call tells the server (``notifications/cancelled``) and the caller gets a plain
KeyboardInterrupt. Unprotected, it killed the reader (the session ended in an exception
group and the server was never told) or cut a call between writing its request and
noting it sent (the server was never told either).

Error handling: when the transport ends (server exited, stream closed, message too large),
every pending request fails at once with :class:`~agenthost.errors.TransportClosed`
naming the server, and every later request fails the same way. A response to an unknown
id is logged and ignored; a handler that raises gets an error response and the endpoint
lives on.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, Final

import outcome
import trio

from agenthost.errors import (
    AgentHostError,
    AgentHostTimeout,
    JSONRPCError,
    ProtocolError,
    TransportClosed,
    TransportError,
)
from agenthost.protocol import jsonrpc
from agenthost.protocol.jsonrpc import (
    ErrorObject,
    ErrorResponse,
    InvalidResponse,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
)
from agenthost.redaction import redact, redact_json
from agenthost.rpc_waiter import TIMED_OUT, Clock, CurrentTime, Waiter
from agenthost.transports.base import NO_OPTIONS, SendOptions, Transport

__all__ = ["DEFAULT_MAX_PEER_REQUESTS", "RPC", "RequestHandler", "closed_error"]

log = logging.getLogger("agenthost.rpc")

_CANCEL_NOTIFY_TIMEOUT: Final = 1.0
#: How long a call waits for the notifications that preceded its response to be
#: delivered (only a listener stuck on the dispatcher makes this wait at all).
_DRAIN_TIMEOUT: Final = 5.0

#: Peer requests one endpoint answers at once. A server asks for little at a time (a
#: sampling call, a roots list); one that floods (issue 14: 300k pings, 124,905 tasks,
#: 1 GiB) gets an error for the excess, written by the reader itself, so a server that
#: also stops reading its input blocks our reader (backpressure) instead of our memory.
DEFAULT_MAX_PEER_REQUESTS: Final = 32
#: The reader yields to other tasks at least once per this many messages: one batch of
#: 300k messages must not hold the event loop (and every other server) while it drains.
_YIELD_EVERY: Final = 64

#: ``async (request) -> result`` for the peer's requests; raise JSONRPCError to fail.
RequestHandler = Callable[[Request], Awaitable[dict[str, Any]]]
#: ``async (method, params) -> None``, called in order from one dispatcher task.
NotificationSink = Callable[[str, Mapping[str, Any]], Awaitable[None]]


class RPC:
    """A JSON-RPC endpoint over one transport. Run it with ``await nursery.start(rpc.run)``.

    Args:
        transport: the channel of messages; closed by :meth:`aclose`.
        name: the peer's name, in every error and log line.
        handle_request: answers the peer's requests (``async (request) -> result``).
        deliver: receives the peer's notifications in order (``notifications/cancelled``
            is handled here and never delivered).
        notification_buffer: notifications queued before the reader waits.
        max_peer_requests: peer requests answered at once (see the module doc).
    """

    def __init__(
        self,
        transport: Transport,
        *,
        name: str,
        handle_request: RequestHandler,
        deliver: NotificationSink,
        notification_buffer: int = 1024,
        max_peer_requests: int = DEFAULT_MAX_PEER_REQUESTS,
    ) -> None:
        self.name = name
        self.transport = transport
        self._handle_request = handle_request
        self._deliver_notification = deliver
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, Waiter] = {}
        self._abandoned: set[RequestId | None] = set()
        self._incoming: dict[RequestId, trio.CancelScope] = {}
        #: Peer requests being answered (handler running or reply being written).
        self._asks = 0
        self._max_asks = max_peer_requests
        self._refused = 0
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
        self._deadlines: dict[float, deque[Waiter]] = {}
        #: The watchdog's sleep, and when it wakes.
        self._watch_scope: trio.CancelScope | None = None
        self._watch_at = math.inf
        #: Trio's clock, read once per request for its deadline (trio.current_time() is
        #: a few calls deeper); taken from the running Trio by run().
        self._clock: Clock = CurrentTime()

    # ------------------------------------------------------------------ lifecycle

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def close_reason(self) -> AgentHostError | None:
        return self._closed

    async def wait_closed(self) -> AgentHostError:
        await self._closed_event.wait()
        assert self._closed is not None
        return self._closed

    def spawn(self, fn: Callable[[], Awaitable[None]]) -> bool:
        """Run ``fn`` in the endpoint's nursery (it stops when the endpoint does);
        False when the endpoint is not running."""
        if self._nursery is None or self._closed is not None:
            return False
        self._nursery.start_soon(fn)
        return True

    def next_id(self) -> int:
        """A fresh number from the id sequence (also used for progress tokens)."""
        return next(self._ids)

    @trio.lowlevel.enable_ki_protection  # see the module doc, "Ctrl-C"
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the reader, the notification dispatcher and the watchdog until the end.

        Returns when the transport is closed; raises nothing for a peer that went away
        (pending requests get the error instead).
        """
        self._clock = trio.lowlevel.current_clock()
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
        transport = self.transport
        count = 0
        message: Message | None = None
        batch: Sequence[Message] | None = None
        try:
            while True:
                # Drop the last messages before waiting for the next: a large result must
                # not outlive its caller (peak RSS of the large-result benchmark: 4x the
                # payload with it held, 3x without).
                message = batch = None
                batch = await transport.receive_many()
                for message in batch:
                    count += 1
                    if count % _YIELD_EVERY == 0:
                        await trio.lowlevel.checkpoint()
                    kind = type(message)
                    if kind is Response or kind is ErrorResponse:  # the common case, first
                        assert isinstance(message, Response | ErrorResponse)
                        self._settle(message)
                    else:
                        await self._dispatch(message)
        except TransportError as exc:
            self.close(exc)
        except BaseException:
            self.close(TransportClosed("session closed", server=self.name))
            raise
        finally:
            self.close(TransportClosed("session closed", server=self.name))

    def _settle(self, message: Response | ErrorResponse) -> None:
        """Hand a response to the request waiting for it (its task, or its waiter)."""
        waiter = self._pending.pop(message.id, None) if message.id is not None else None
        if waiter is None:
            self._unmatched(message)
        elif waiter.task is not None:
            trio.lowlevel.reschedule(waiter.task, outcome.Value(message))
            waiter.task = None
        else:
            waiter.outcome = outcome.Value(message)
            if waiter.exchange is not None and waiter.owner is not trio.lowlevel.current_task():
                # Answered on another stream (another request's, the GET stream) while
                # the caller still reads its own POST, which the server may hold open
                # for ever: end that POST, so the caller takes the answer now.
                self.transport.abort(waiter.exchange)

    async def _dispatch(self, message: Message) -> None:
        """Act on one message from the peer: the reader's dispatch, and what a
        transport's :meth:`~agenthost.transports.base.Transport.exchange` hands back from
        the caller's task (so a response's server requests and notifications take the
        same path, in order, whichever task read them)."""
        kind = type(message)
        if kind is Response or kind is ErrorResponse:
            assert isinstance(message, Response | ErrorResponse)
            self._settle(message)
        elif kind is InvalidResponse:
            assert isinstance(message, InvalidResponse)
            self._invalid_response(message)
        elif kind is Request:
            assert isinstance(message, Request)
            if self._nursery is None or self._closed is not None:
                return  # the endpoint is gone: nobody would answer it
            if self._asks >= self._max_asks:
                await self._answer_inline(message)
                return
            self._asks += 1
            # Register the request's cancel scope now, in the reader: a
            # notifications/cancelled read in the same batch must find it.
            scope = trio.CancelScope()
            self._incoming[message.id] = scope
            self._nursery.start_soon(self._answer, message, scope, self._notes_queued)
        else:
            assert isinstance(message, Notification)
            await self._on_notification(message)

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
        # A transport's typed failure of this one request (an AuthorizationError), or
        # a malformed response.
        cause = message.error or ProtocolError(
            f"invalid response from the server: {message.problem}", server=self.name
        )
        error = outcome.Error(cause)
        if waiter.task is not None:
            trio.lowlevel.reschedule(waiter.task, error)
            waiter.task = None
        else:
            waiter.outcome = error

    async def _answer_inline(self, request: Request) -> None:
        """Answer a request past the cap from the reader itself: a ping (cheap) with its
        empty result, anything else with an error.

        Awaiting the write here is the backpressure: while the peer does not read our
        answers, we do not read its next message. (Only past the cap: over HTTP a write
        is a POST, which the reader should not wait for in the normal case.)
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
            await self.transport.send(reply)

    def _unmatched(self, message: Response | ErrorResponse) -> None:
        if message.id in self._abandoned:
            self._abandoned.discard(message.id)
            log.debug("%s: late response to abandoned request %s", self.name, _short_id(message.id))
            return
        if isinstance(message, ErrorResponse):
            log.warning(
                "%s: error response for unknown request id %s: %s",
                self.name,
                _short_id(message.id),
                _clip(message.error.message, 500),
            )
        else:
            log.warning(
                "%s: ignoring response to unknown request id %s", self.name, _short_id(message.id)
            )

    def close(self, exc: AgentHostError) -> None:
        """Fail every pending request; later requests fail at once with the same reason."""
        if self._closed is None:
            self._closed = exc
            self._closed_event.set()
            log.debug("%s: session closed: %s", self.name, exc)
        reason = str(self._closed)
        pending = list(self._pending.items())
        self._pending.clear()
        for request_id, waiter in pending:
            # Their answers may still come (an exchange still reading one): the client
            # ended these, so an answer is no mystery to warn about.
            self._abandon(request_id)
            error = outcome.Error(closed_error(self._closed, reason, self.name))
            if waiter.task is not None:
                trio.lowlevel.reschedule(waiter.task, error)
                waiter.task = None
            else:
                waiter.outcome = error
                if waiter.exchange is not None:
                    # The caller reads its own answer (an inline POST, a stdio caller
                    # alone): wake it now, not when the server next writes.
                    self.transport.abort(waiter.exchange)
        for scope in self._incoming.values():
            scope.cancel()
        for _, event in self._drain_waiters:
            event.set()
        self._drain_waiters.clear()
        self._notify_send.close()

    async def aclose(self) -> None:
        """Close the transport; pending requests fail. Idempotent."""
        self.close(TransportClosed("session closed by the client", server=self.name))
        with trio.CancelScope(shield=True):
            await self.transport.aclose()

    def check_open(self) -> None:
        """Raise the reason the endpoint closed, if it did."""
        if self._closed is not None:
            raise closed_error(self._closed, str(self._closed), self.name)

    # ------------------------------------------------------------------ requests out

    @trio.lowlevel.enable_ki_protection  # see the module doc, "Ctrl-C"
    async def call(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float | None,
        cancellable: bool = True,
        options: SendOptions = NO_OPTIONS,
        started: float | None = None,
    ) -> dict[str, Any]:
        """Send a request and return the raw ``result`` object.

        ``started``: the Trio clock as the caller read it just before (no checkpoint
        since), for a larger operation this call begins (the 2026-07-28 MRTR exchange
        counts its later rounds from it): the deadline counts from it, and the clock is
        read once per call, not twice (bench: "stdio calls/s ..., MCP 2026-07-28").

        Raises:
            JSONRPCError: the server answered with an error.
            AgentHostTimeout: no answer within ``timeout`` (the server is told to cancel).
            TransportClosed: the server is gone (before or while waiting).

        Cancellation: the server is told (``notifications/cancelled``, or the exchange is
        aborted when ``options.abort_on_cancel``); the endpoint stays usable.
        """
        # one piece: the per-request hot path (bench: "stdio calls/s", "HTTP ... calls/s");
        # a helper coroutine per step is a frame more to resume on every call.
        if self._closed is not None:
            self.check_open()
        request_id = next(self._ids)
        # One deadline for writing the request and for its answer: a server that stopped
        # reading its input must not make a request outlive its timeout. It is kept by
        # the watchdog, not by a cancel scope per request (see the module doc).
        if timeout is None:
            waiter = Waiter(math.inf)
        else:
            waiter = Waiter((self._clock.current_time() if started is None else started) + timeout)
        if timeout is not None:
            self._watch(waiter, timeout)
        self._pending[request_id] = waiter
        request = Request(request_id, method, params)
        transport = self.transport
        message: Any = None
        try:
            try:
                # Write the request, then wait for its answer, or take it if it came first
                # (inline, not a helper coroutine: one frame less to resume per call).
                if transport.inline_exchanges:
                    # The POST runs in this task and hands its answer to _dispatch here:
                    # no task, channel or reader between the socket and the caller (bench:
                    # "HTTP JSON/SSE calls/s, 1 in flight, SDK"). Sent as soon as it
                    # starts, as a POST task started for it was (a cancel then tells the
                    # server); a timeout aborts it (Waiter.time_out).
                    waiter.sent = True
                    waiter.exchange = request_id
                    waiter.owner = trio.lowlevel.current_task()
                    answer = await transport.exchange(request, self._dispatch, options=options)
                    waiter.exchange = None
                    # The reply was the answer alone: settled here, as _settle would (no
                    # delivery coroutine or outcome object: bench, "HTTP JSON calls/s").
                    if answer is not None and self._pending.pop(request_id, None) is waiter:
                        message = answer
                    elif answer is not None:  # settled already (the session closed)
                        self._unmatched(answer)
                else:
                    await transport.send(request, deadline=waiter.deadline, options=options)
                    waiter.sent = True
                    if (
                        transport.reads_inline
                        and len(self._pending) == 1
                        and transport.take_reading(request_id)
                    ):
                        message = await self._read_answer(request_id, waiter)
                if message is None:  # not settled above: settled meanwhile, or wait
                    early = waiter.outcome
                    if early is not None:
                        message = early.unwrap()
                    else:
                        waiter.task = trio.lowlevel.current_task()
                        message = await trio.lowlevel.wait_task_rescheduled(waiter.abort)
            except trio.TooSlowError:  # the transport could not take it before the deadline
                message = TIMED_OUT
            if message is TIMED_OUT:
                if self._pending.pop(request_id, None) is not None:
                    self._forget(request_id)
                    if cancellable and waiter.sent:
                        await self._cancel(request_id, "timed out", options)
                assert timeout is not None
                raise AgentHostTimeout(
                    f"{method} timed out after {timeout:g}s", server=self.name, timeout=timeout
                )
        except trio.Cancelled:
            if self._pending.pop(request_id, None) is not None:
                self._forget(request_id)
                # Only a request the server may have seen is cancelled (the spec: the id
                # MUST be one previously issued).
                if cancellable and waiter.sent:
                    with trio.CancelScope(shield=True):
                        await self._cancel(request_id, "cancelled by the client", options)
            raise
        except BaseException as exc:
            if self._pending.pop(request_id, None) is not None and not isinstance(exc, Exception):
                # KeyboardInterrupt (Trio delivers Ctrl-C into the waiting task when the
                # caller did not turn it into a cancellation): the server must still hear.
                self._forget(request_id)
                if cancellable and waiter.sent:
                    with trio.CancelScope(shield=True):
                        await self._cancel(request_id, "interrupted", options)
            raise
        finally:
            waiter.done = True
            if timeout is not None:
                self._unwatch(timeout)
        if type(message) is Response:
            return message.result
        assert isinstance(message, ErrorResponse)
        error = message.error
        # Server text: it may quote our secrets back (a header it rejected). Decisions
        # read raw_data (errors.JSONRPCError).
        raise JSONRPCError(
            error.code,
            redact(error.message),
            redact_json(error.data),
            server=self.name,
            raw_data=error.data,
        )

    async def _read_answer(
        self, request_id: RequestId, waiter: Waiter
    ) -> Response | ErrorResponse | None:
        """Read the answer to ``request_id`` in the caller's task (the transport let it
        take the reading: the only request in flight); None when the reader takes over.

        Why: the reader task between the pipe and the caller costs a scheduler pass per
        call, on the critical path of a call at a time (bench: "stdio calls/s
        sequential"). Answers to other requests read meanwhile are settled as the reader
        would; anything else stops this here and goes to the reader, in order.
        """
        transport = self.transport
        waiter.exchange = request_id  # a timeout wakes us through transport.abort()
        try:
            while True:
                if waiter.outcome is not None:
                    # Timed out or closed while not on the pipe (at the turn below, say):
                    # transport.abort() had no read to wake.
                    return None
                answers = await transport.receive_answers()
                if answers is None:
                    return None
                mine = None
                for answer in answers:
                    if answer.id == request_id and self._pending.get(request_id) is waiter:
                        del self._pending[request_id]
                        mine = answer
                    else:
                        self._settle(answer)
                if mine is not None:
                    return mine
                # Only others' answers or part of a line: a turn for the others before the
                # next read (a server flooding answers must not starve the loop).
                await trio.lowlevel.checkpoint()
        finally:
            waiter.exchange = None
            transport.release_reading()

    def _watch(self, waiter: Waiter, limit: float) -> None:
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

    @trio.lowlevel.enable_ki_protection
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
            now = self._clock.current_time()
            earliest = math.inf
            for limit, queue in list(self._deadlines.items()):
                while queue:
                    head = queue[0]
                    if not head.done and head.deadline > now:
                        earliest = min(earliest, head.deadline)
                        break
                    queue.popleft()
                    if not head.done:
                        head.time_out(self.transport.abort)
                if not queue:
                    del self._deadlines[limit]
            self._watch_at = earliest

    def _forget(self, request_id: RequestId) -> None:
        """Give up on a request (timed out, cancelled): the transport drops its exchange
        (an HTTP POST holds a pooled connection until answered), and its id is kept so a
        late response is not reported as a mystery."""
        self.transport.abort(request_id)
        self._abandon(request_id)

    def _abandon(self, request_id: RequestId) -> None:
        """Remember that the client gave ``request_id`` up (bounded)."""
        if len(self._abandoned) > 4096:
            self._abandoned.clear()
        self._abandoned.add(request_id)

    async def _cancel(self, request_id: RequestId, reason: str, options: SendOptions) -> None:
        if options.abort_on_cancel:
            self.transport.abort(request_id)
            return
        if self._closed is not None:
            return
        with trio.move_on_after(_CANCEL_NOTIFY_TIMEOUT), suppress(TransportError):
            await self.transport.send(
                Notification("notifications/cancelled", {"requestId": request_id, "reason": reason})
            )

    async def notify(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        options: SendOptions = NO_OPTIONS,
    ) -> None:
        """Send a notification."""
        self.check_open()
        await self.transport.send(Notification(method, params), options=options)

    # ------------------------------------------------------------------ notifications in

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
                log.debug("%s: server cancelled its request %s", self.name, _short_id(target))
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

    @trio.lowlevel.enable_ki_protection
    async def _dispatch_notifications(self) -> None:
        async for method, params in self._notify_receive:
            try:
                await self._deliver_notification(method, params)
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

    def watched(self) -> int:
        """How many requests the deadline watchdog holds: finished ones must leave at
        once, so at rest this is the number of requests in flight with a limit."""
        return sum(len(queue) for queue in self._deadlines.values())

    def notifications_queued(self) -> int:
        """How many notifications were handed to the dispatcher so far."""
        return self._notes_queued

    async def notifications_delivered(self, target: int) -> None:
        """Wait until the first ``target`` notifications have been delivered.

        Bounded by :data:`_DRAIN_TIMEOUT` (a listener that hangs must not hang the
        call) and over when the endpoint closes.
        """
        if self._notes_done >= target or self._closed is not None:
            return
        event = trio.Event()
        self._drain_waiters.append((target, event))
        with trio.move_on_after(_DRAIN_TIMEOUT):
            await event.wait()

    # ------------------------------------------------------------------ requests in

    @trio.lowlevel.enable_ki_protection
    async def _answer(self, request: Request, scope: trio.CancelScope, after: int) -> None:
        """Run the handler for one peer request and send its response.

        The handler runs once the notifications the peer sent before the request (the
        first ``after``) were delivered, as the wire ordered them: a server's progress
        sent just before it asks must reach its listener first (``agenthost serve``
        relays both, and the ask may end the downstream request that the progress is for).
        """
        try:
            await self._answer_within(request, scope, after)
        finally:
            self._asks -= 1

    async def _answer_within(self, request: Request, scope: trio.CancelScope, after: int) -> None:
        reply: Response | ErrorResponse
        with scope:
            try:
                await trio.lowlevel.checkpoint_if_cancelled()  # cancelled before we began?
                await self.notifications_delivered(after)
                result = await self._handle_request(request)
                reply = Response(request.id, result)
            except JSONRPCError as exc:
                reply = ErrorResponse(request.id, ErrorObject(exc.code, exc.message, exc.data))
            except ProtocolError as exc:
                reply = ErrorResponse(request.id, ErrorObject(exc.code, str(exc)))
            except Exception as exc:
                log.exception("%s: handler for %s failed", self.name, _clip(request.method))
                reply = ErrorResponse(
                    request.id,
                    ErrorObject(
                        jsonrpc.INTERNAL_ERROR, f"client error: {type(exc).__name__}: {exc}"
                    ),
                )
            finally:
                self._incoming.pop(request.id, None)
        if scope.cancel_called:
            # The peer cancelled it (perhaps before the handler reached a checkpoint):
            # no response, as the spec says.
            return
        with suppress(TransportError):
            await self.transport.send(reply)


def closed_error(cause: AgentHostError, reason: str, server: str) -> AgentHostError:
    """A fresh exception per waiter (one instance raised in many tasks tangles tracebacks)."""
    if isinstance(cause, TransportError):
        message = reason.removeprefix(f"{server}: ")
        return type(cause)(message, server=server)
    return TransportClosed(reason, server=server)


def _clip(text: str, limit: int = 80) -> str:
    """Server text for a log line, cut: a 1 MB method or message must not fill the log."""
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} chars)"


def _short_id(request_id: RequestId | None) -> str:
    """A request id for a log line: a server picks ids, so a huge one is cut."""
    text = repr(request_id)
    return text if len(text) <= 80 else text[:77] + "..."
