"""Server asks run as tasks (MCP 2025-11-25): the client is the task *receiver*.

A server that found ``tasks.requests.sampling.createMessage`` (or
``.elicitation.create``) in our capabilities may send that ask with a ``task`` param.
We answer at once with a ``CreateTaskResult`` and do the work in the background, so the
server is not held on one open request while a person reads a consent prompt or a model
writes; the server then polls ``tasks/get``, fetches the outcome with ``tasks/result``
(exactly what the plain ask would have answered: a result or a JSON-RPC error), may list
(``tasks/list``) and cancel (``tasks/cancel``) them, and is told of each status change
by ``notifications/tasks/status`` (optional for it to read).

The work itself is the plain ask, through the one dispatch of :mod:`agenthost.asks`: the
same handlers, so consent, the sampling service, its budgets and the audit log are the
ones a plain ask meets (the handler's context carries ``task_id``, and the audit line
records it under ``via``).

Bounds, because a server is untrusted (the spec's "Resource Management" list):

* at most :attr:`AskTaskLimits.max_live` tasks in progress per session; one more is
  refused with a JSON-RPC error (-32603) and nothing runs;
* a task lives for its ttl (the server's request, capped at ``max_ttl``; ``default_ttl``
  when it asks for none): work still running then is cancelled, a result is dropped then;
  at most ``max_retained`` finished tasks are kept (the oldest go first);
* every task runs in the session's own nursery, so closing the session cancels them all.

Task ids are 128 random bits (``secrets``): a session is one requestor, and nothing but
its own connection reaches its tasks.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any, Final

import attrs
import trio

from agenthost.errors import AgentHostError, JSONRPCError, ProtocolError
from agenthost.protocol import jsonrpc

__all__ = [
    "RELATED_TASK",
    "TASKABLE_ASKS",
    "TASK_METHODS",
    "AskTaskLimits",
    "AskTaskStore",
]

log = logging.getLogger("agenthost.ask_tasks")

#: The requests a server sends about the tasks it created on our side.
TASK_METHODS: Final = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})
#: The asks a server may augment with a task (2025-11-25), and their capability path.
TASKABLE_ASKS: Final = {
    "sampling/createMessage": ("sampling", "createMessage"),
    "elicitation/create": ("elicitation", "create"),
}
#: ``_meta`` key tying a message to its task.
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
#: A status notification that cannot be written within this long is given up.
_NOTIFY_TIMEOUT: Final = 5.0


@attrs.frozen(kw_only=True)
class AskTaskLimits:
    """How many of a server's asks may run as tasks at once, and for how long.

    Passed as :attr:`ClientHandlers.ask_tasks <agenthost.asks.ClientHandlers>`; its
    presence is what declares the ``tasks`` capability.
    """

    #: Tasks in progress (working or input_required) per session; more are refused.
    max_live: int = 16
    #: Finished tasks kept for ``tasks/result`` per session (the oldest dropped first).
    max_retained: int = 64
    #: The longest ttl granted, seconds (a server's larger request is lowered to it).
    max_ttl: float = 3600.0
    #: The ttl when the server asks for none, seconds.
    default_ttl: float = 600.0
    #: The ``pollInterval`` suggested to the server, milliseconds.
    poll_interval_ms: int = 1000
    #: Tasks per ``tasks/list`` page.
    page_size: int = 50


@attrs.define(kw_only=True, eq=False)
class _Entry:
    task_id: str
    method: str
    created_at: str
    updated_at: str
    ttl_ms: int
    #: When the task expires, on Trio's clock.
    expires: float
    status: str = "working"
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: JSONRPCError | None = None
    done: trio.Event = attrs.field(factory=trio.Event)
    work: trio.CancelScope | None = None
    keep: trio.CancelScope | None = None
    #: The last status the server was told of (by the create result or a notification).
    told: str = "working"

    def wire(self, poll_interval: int) -> dict[str, Any]:
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttl": self.ttl_ms,
        }
        if self.status_message is not None:
            task["statusMessage"] = self.status_message
        if self.status not in _TERMINAL:
            task["pollInterval"] = poll_interval
        return task


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _invalid(message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc.INVALID_PARAMS, message)


class AskTaskStore:
    """One session's tasks run for its server. The session routes to it; see the module doc.

    Args:
        limits: the bounds.
        server: the server's name, for log lines.
        spawn: starts a task in the session's nursery (False once the session is closing).
        notify: sends a notification to the server.
    """

    def __init__(
        self,
        limits: AskTaskLimits,
        *,
        server: str,
        spawn: Callable[[Callable[[], Awaitable[None]]], bool],
        notify: Callable[[str, dict[str, Any]], Awaitable[None]],
    ) -> None:
        self.limits = limits
        self._server = server
        self._spawn = spawn
        self._notify = notify
        #: Insertion order is creation order (listing and "oldest first" rely on it).
        self._tasks: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def live(self) -> int:
        """Tasks in progress."""
        return sum(1 for entry in self._tasks.values() if entry.status not in _TERMINAL)

    def create(
        self, method: str, requested_ttl: Any, work: Callable[[str], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """Accept the ask ``method`` as a task running ``work(task_id)``; the
        ``CreateTaskResult`` to answer with.

        Raises:
            JSONRPCError: too many tasks in progress, or the session is closing.
        """
        limits = self.limits
        if self.live >= limits.max_live:
            log.warning(
                "%s: refused a task-augmented %s: %d tasks in progress (the limit)",
                self._server,
                method,
                limits.max_live,
            )
            raise JSONRPCError(
                jsonrpc.INTERNAL_ERROR,
                f"too many tasks in progress for this server (limit {limits.max_live})",
            )
        ttl = limits.default_ttl
        if type(requested_ttl) is int and requested_ttl > 0:
            ttl = min(requested_ttl / 1000, limits.max_ttl)
        stamp = _now()
        entry = _Entry(
            task_id=secrets.token_urlsafe(16),
            method=method,
            created_at=stamp,
            updated_at=stamp,
            ttl_ms=int(ttl * 1000),
            expires=trio.current_time() + ttl,
        )

        async def run() -> None:
            await self._run(entry, work)

        if not self._spawn(run):
            raise JSONRPCError(jsonrpc.INTERNAL_ERROR, "the client is closing this session")
        self._tasks[entry.task_id] = entry
        log.info("%s: %s runs as task %s (ttl %gs)", self._server, method, entry.task_id, ttl)
        return {"task": entry.wire(limits.poll_interval_ms)}

    async def handle(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer ``tasks/get|result|list|cancel`` from the server.

        Raises:
            JSONRPCError: -32602 for an unknown or expired task id, a bad cursor, or a
                cancel of a finished task; for ``tasks/result``, the ask's own error.

        Cancellation: ``tasks/result`` waits for the task to finish (it ends by its ttl at
        the latest); the server cancelling that request ends the wait, not the task.
        """
        if method == "tasks/list":
            return self._list(params.get("cursor"))
        entry = self._find(params.get("taskId"))
        if method == "tasks/get":
            return entry.wire(self.limits.poll_interval_ms)
        if method == "tasks/cancel":
            if entry.status in _TERMINAL:
                raise _invalid(f"Cannot cancel task: already in terminal status {entry.status!r}")
            self._finish(
                entry,
                "cancelled",
                message="The task was cancelled by request.",
                error=JSONRPCError(jsonrpc.INTERNAL_ERROR, "the task was cancelled"),
            )
            if entry.work is not None:
                entry.work.cancel()
            return entry.wire(self.limits.poll_interval_ms)
        # tasks/result
        await entry.done.wait()
        if entry.error is not None:
            error = entry.error
            raise JSONRPCError(error.code, error.message, error.data)
        result = dict(entry.result or {})
        meta = result.get("_meta")
        result["_meta"] = {
            **(meta if isinstance(meta, dict) else {}),
            RELATED_TASK: {"taskId": entry.task_id},
        }
        return result

    def _find(self, task_id: Any) -> _Entry:
        entry = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if entry is None or entry.expires <= trio.current_time():
            raise _invalid("Failed to retrieve task: Task not found")
        return entry

    def _list(self, cursor: Any) -> dict[str, Any]:
        entries = [e for e in self._tasks.values() if e.expires > trio.current_time()]
        start = 0
        if cursor is not None:
            if not isinstance(cursor, str) or not cursor.isdecimal() or len(cursor) > 9:
                raise _invalid("Invalid cursor")
            start = int(cursor)
            if start > len(entries):
                raise _invalid("Invalid cursor")
        end = start + self.limits.page_size
        page: dict[str, Any] = {
            "tasks": [e.wire(self.limits.poll_interval_ms) for e in entries[start:end]]
        }
        if end < len(entries):
            page["nextCursor"] = str(end)
        return page

    def _finish(
        self,
        entry: _Entry,
        status: str,
        *,
        result: dict[str, Any] | None = None,
        error: JSONRPCError | None = None,
        message: str | None = None,
    ) -> None:
        """Move to a terminal status, once: a cancelled task stays cancelled."""
        if entry.status in _TERMINAL:
            return
        entry.status, entry.status_message = status, message
        entry.result, entry.error = result, error
        entry.updated_at = _now()
        entry.done.set()
        finished = [e for e in self._tasks.values() if e.status in _TERMINAL]
        for old in finished[: max(0, len(finished) - self.limits.max_retained)]:
            self._drop(old)

    def _drop(self, entry: _Entry) -> None:
        if self._tasks.get(entry.task_id) is entry:
            del self._tasks[entry.task_id]
        if entry.keep is not None:
            entry.keep.cancel()

    async def _run(self, entry: _Entry, work: Callable[[str], Awaitable[dict[str, Any]]]) -> None:
        """Do the work within the ttl, tell the server how it ended, keep the outcome
        until the ttl, then forget it."""
        try:
            with trio.CancelScope(deadline=entry.expires) as scope:
                entry.work = scope
                try:
                    result = await work(entry.task_id)
                except JSONRPCError as exc:
                    self._finish(entry, "failed", error=exc, message=exc.message[:1000])
                except ProtocolError as exc:
                    self._finish(
                        entry, "failed", error=JSONRPCError(exc.code, str(exc)), message=str(exc)
                    )
                except AgentHostError as exc:
                    error = JSONRPCError(jsonrpc.INTERNAL_ERROR, f"client error: {exc}")
                    self._finish(entry, "failed", error=error, message=error.message)
                except Exception as exc:
                    log.exception("%s: task %s failed", self._server, entry.task_id)
                    error = JSONRPCError(
                        jsonrpc.INTERNAL_ERROR, f"client error: {type(exc).__name__}: {exc}"
                    )
                    self._finish(entry, "failed", error=error, message=error.message)
                else:
                    self._finish(entry, "completed", result=result)
            if entry.status not in _TERMINAL:
                # The ttl ran out with the work unfinished.
                self._finish(
                    entry,
                    "cancelled",
                    message="The task's ttl expired before it finished.",
                    error=JSONRPCError(jsonrpc.INTERNAL_ERROR, "the task's ttl expired"),
                )
            await self._tell(entry)
            with trio.CancelScope(deadline=entry.expires) as keep:
                entry.keep = keep
                if self._tasks.get(entry.task_id) is entry:
                    await trio.sleep_forever()
        finally:
            self._drop(entry)

    async def _tell(self, entry: _Entry) -> None:
        """``notifications/tasks/status`` for a status the server has not seen yet
        (best effort: the server must poll anyway)."""
        if entry.told == entry.status:
            return
        entry.told = entry.status
        with trio.move_on_after(_NOTIFY_TIMEOUT), suppress(AgentHostError):
            await self._notify(
                "notifications/tasks/status", entry.wire(self.limits.poll_interval_ms)
            )
