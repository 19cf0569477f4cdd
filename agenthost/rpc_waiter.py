"""One pending request of :class:`agenthost.rpc.RPC`: who waits for it, and how it ends.

Split from :mod:`agenthost.rpc` (its size): the waiter is the one object a request
allocates (bench: "client CPU/call"), so it is a slotted class with no Trio scope in it;
the endpoint's watchdog times it out (:meth:`Waiter.time_out`), a response settles it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Protocol

import outcome
import trio

from agenthost.protocol.jsonrpc import RequestId

__all__ = ["TIMED_OUT", "Clock", "CurrentTime", "Waiter"]


class Waiter:
    """One pending request: the task waiting for it, or the outcome if it came first."""

    __slots__ = ("deadline", "done", "exchange", "outcome", "owner", "sent", "task")

    def __init__(self, deadline: float) -> None:
        self.task: trio.lowlevel.Task | None = None
        self.outcome: outcome.Outcome[Any] | None = None
        #: The transport accepted the request (the server may see it).
        self.sent = False
        #: When the request times out, on Trio's clock (inf: never).
        self.deadline = deadline
        #: The request is over, however it ended (its deadline no longer matters).
        self.done = False
        #: The request's id while the caller's own task exchanges it (an inline HTTP
        #: POST) or reads its answer (stdio, alone): no task is parked, so a timeout
        #: aborts the exchange, or wakes the read, instead.
        self.exchange: RequestId | None = None
        #: The caller's task, while ``exchange`` is set.
        self.owner: trio.lowlevel.Task | None = None

    def abort(self, _: Any) -> trio.lowlevel.Abort:
        # Cancelled while parked: forget the task so a late response cannot wake it twice.
        self.task = None
        return trio.lowlevel.Abort.SUCCEEDED

    def time_out(self, abort: Callable[[RequestId], None]) -> None:
        """Wake the waiting task with :data:`TIMED_OUT` (or leave it for the sender,
        ``abort``-ing the exchange it is in the middle of)."""
        task = self.task
        if task is not None:
            self.task = None
            trio.lowlevel.reschedule(task, outcome.Value(TIMED_OUT))
        elif self.outcome is None:
            self.outcome = outcome.Value(TIMED_OUT)
            if self.exchange is not None:
                abort(self.exchange)


#: What a waiter receives when its deadline passed (see RPC._watch_deadlines).
TIMED_OUT: Final = object()


class Clock(Protocol):
    def current_time(self) -> float: ...


class CurrentTime:
    """``trio.current_time()`` as a clock, until :meth:`RPC.run` has the real one."""

    def current_time(self) -> float:
        return trio.current_time()
