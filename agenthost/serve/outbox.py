"""One downstream client's outbox: the notifications the gateway sends it, queued without
ever making the sender wait.

Why: the senders are shared. An upstream's progress and log lines are relayed from that
upstream's notification dispatch, ``list_changed`` from the one catalog watcher, resource
updates from the shared subscriptions. A client that stops reading its stream makes a
write to it wait (a full socket, a full stdout pipe); awaited there, that one client
stopped the dispatch of the upstream every client shares, and with it every client's
calls. Here a notification is queued (:meth:`Outbox.put`, never waits) and one writer
task per client, started at its first notification, writes them in order.

Bounds, per client: :data:`MAX_QUEUED` notifications and :data:`MAX_QUEUED_BYTES` of
them (one larger than that is still queued when the outbox is empty, so a notification
within the message size limit always has its chance). When full, the newest notification
is dropped and counted (a client that cannot keep up loses its own notifications, logged
once per client, the total when it leaves). A client whose writer made no progress for
:data:`STALL_LIMIT` seconds while more was waiting is stuck: its session is ended.

Order: what the client waits for (a response, our request to it) is not queued here, but
goes out only after the notifications queued before it (:meth:`Outbox.flushed`), so the
progress of a call still precedes its result.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

import trio

from agenthost.errors import AgentHostError
from agenthost.protocol import jsonrpc

__all__ = ["MAX_QUEUED", "MAX_QUEUED_BYTES", "STALL_LIMIT", "Outbox"]

log = logging.getLogger("agenthost.serve")

#: Notifications one client has waiting at once.
MAX_QUEUED: Final = 4096
#: Their encoded size, all together.
MAX_QUEUED_BYTES: Final = 8 * 1024 * 1024
#: Seconds the writer may spend on one notification, with more waiting, before the
#: client counts as stuck and its session ends.
STALL_LIMIT: Final = 30.0

#: ``async (method, params) -> None``: writes one notification to the client.
Write = Callable[[str, dict[str, Any] | None], Awaitable[None]]


class Outbox:
    """The bounded queue of one client's notifications, and its writer.

    Args:
        name: the client's name, for log lines.
        write: sends one notification (raises ``AgentHostError`` once the client is gone).
        spawn: starts the writer where the session's tasks run (False: not running).
        stuck: ends the session of a client found stuck (called once).
    """

    def __init__(
        self,
        name: str,
        write: Write,
        *,
        spawn: Callable[[Callable[[], Awaitable[None]]], bool],
        stuck: Callable[[], None],
    ) -> None:
        self._name = name
        self._write = write
        self._spawn = spawn
        self._stuck = stuck
        self._queue: deque[tuple[str, dict[str, Any] | None, int]] = deque()
        self._bytes = 0
        #: Notifications put so far, and written (or given up) so far: a response waits
        #: until the second reaches what the first was when it was ready.
        self._put = 0
        self._done = 0
        self._wake = trio.Event()
        self._progress = trio.Event()
        self._running = False
        self._closed = False
        #: When the writer began the write it is in (None: idle).
        self._busy_since: float | None = None
        self.dropped = 0

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending(self) -> bool:
        return self._done < self._put

    def put(self, method: str, params: dict[str, Any] | None) -> None:
        """Queue one notification; never waits (dropped when the outbox is full)."""
        if self._closed:
            return
        size = len(jsonrpc.encode(jsonrpc.Notification(method, params)))
        full = len(self._queue) >= MAX_QUEUED or (
            self._queue and self._bytes + size > MAX_QUEUED_BYTES
        )
        if full or not (self._running or self._start()):
            self._drop(method)
            return
        self._queue.append((method, params, size))
        self._bytes += size
        self._put += 1
        self._wake.set()

    def _start(self) -> bool:
        self._running = self._spawn(self._run)
        return self._running

    def _drop(self, method: str) -> None:
        self.dropped += 1
        if self.dropped == 1:
            log.warning(
                "%s: not reading fast enough; dropping its notifications (%s first) while"
                " %d (%d bytes) wait",
                self._name,
                method[:64],
                len(self._queue),
                self._bytes,
            )
        if self._is_stuck():
            self._end("stopped reading")

    def _is_stuck(self) -> bool:
        since = self._busy_since
        return since is not None and trio.current_time() - since > STALL_LIMIT

    def _end(self, why: str) -> None:
        if self._closed:
            return
        log.warning("%s: %s for %gs; ending its session", self._name, why, STALL_LIMIT)
        self.close()
        self._stuck()

    async def flushed(self) -> None:
        """Wait until every notification queued so far was written (or given up on).

        Bounded: a client whose writer is stuck past :data:`STALL_LIMIT` has its session
        ended, which releases the wait.
        """
        target = self._put
        while self._done < target and not self._closed:
            with trio.move_on_after(STALL_LIMIT):
                await self._progress.wait()
            if self._is_stuck():
                self._end("stopped reading")

    def close(self) -> None:
        """Give up on what is queued (the client left); later notifications are dropped."""
        self._closed = True
        self._done = self._put
        self._queue.clear()
        self._bytes = 0
        self._wake.set()
        self._progress.set()
        if self.dropped:
            log.info("%s: %d notifications dropped in all", self._name, self.dropped)

    async def _run(self) -> None:
        try:
            while not self.closed:
                if not self._queue:
                    self._wake = trio.Event()
                    await self._wake.wait()
                    continue
                method, params, size = self._queue.popleft()
                self._busy_since = trio.current_time()
                try:
                    await self._write(method, params)
                except AgentHostError as exc:
                    log.debug("%s: %s not sent: %s", self._name, method[:64], exc)
                    self.close()
                    return
                finally:
                    self._busy_since = None
                # (close() may have given everything up meanwhile, counting it done)
                self._bytes = max(0, self._bytes - size)
                self._done = min(self._put, self._done + 1)
                progress, self._progress = self._progress, trio.Event()
                progress.set()
        finally:
            self._running = False
            self._busy_since = None
