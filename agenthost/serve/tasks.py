"""Tasks through the gateway: a downstream client's tool call run as a task, in either form.

A downstream client may speak either task form, whatever its upstream speaks:

* **2025-11-25** (``basic/utilities/tasks``): the gateway declares ``tasks`` (``list``,
  ``cancel``, ``requests.tools.call``) at ``initialize``; a ``tools/call`` with
  ``params.task`` answers a ``CreateTaskResult``; ``tasks/get``, ``tasks/result`` (blocks
  until the task ends, then the call's own result or error), ``tasks/list`` and
  ``tasks/cancel`` follow.
* **2026-07-28** (the ``io.modelcontextprotocol/tasks`` extension): the gateway lists the
  extension in ``server/discover``; a ``tools/call`` whose request declares it may answer
  ``resultType: "task"``; ``tasks/get`` carries the ``result`` (or the ``error``) inline
  once terminal; ``tasks/update`` and ``tasks/cancel`` are acknowledged with nothing.

Design: the **host** drives the upstream task, in whichever form the upstream speaks
(:meth:`Host.call_tool` with ``task=True``: :mod:`agenthost.tool_tasks`), and the gateway
keeps a task of its own per downstream task, which it hands downstream. So the two forms
are translated through one place, and the consent is the host's: a task-run
``tools/call`` passes the policy exactly once and is audited once, inside that one
``host.call_tool``. The ``tools/call`` waits until the upstream has *created* its task
(:class:`CreateTaskResult`, via ``on_task``) and only then answers with the gateway's
task: everything before (the consent, a policy "ask" through the client, an MRTR round
with a 2026-07-28 client) happens while the client's request is still open. A call that
ends without an upstream task (the upstream or the tool does not do tasks: the server
decides, as both forms allow) answers with its plain result. A client that asks for no
task gets what it got before: the host runs a task-required tool to completion itself.

The listing follows: a 2025-11-25 client sees ``taskSupport: optional`` on every tool the
upstream can run as a task (its tool takes a 2025-11-25 task, or the upstream offers the
2026-07-28 extension, whose tools declare nothing), never ``required`` (the gateway runs a
plain call of such a tool to its end, so a client need not use tasks), and a task asked
for a tool without support is refused with -32601, as "Tool-Level Negotiation" says.

Isolation: a task id handed downstream is the gateway's own (``secrets.token_urlsafe``),
never the upstream's, and it is looked up only among the tasks of the asking client's
*owner*: its session (stdio, a legacy HTTP session), or for 2026-07-28 HTTP requests,
which have no session, the sessionless pool (:data:`STATELESS`). The pool is no client's:
its tasks are reached by id alone (the id is an unguessable capability: ``tasks/get``,
``tasks/cancel``, ``tasks/update`` with it work from any sessionless request) and
``tasks/list`` shows none of them (the 2026-07-28 extension has no ``tasks/list``; a
legacy request cannot reach the pool, as the HTTP app serves no legacy request without a
session). Another session's id is "unknown task" (-32602), exactly as a made-up one. A
legacy session's tasks are cancelled when it ends (nobody can reach them any more).

Bounds: at most :data:`MAX_TASKS_PER_OWNER` tasks per owner (:data:`MAX_STATELESS_TASKS`
for the sessionless pool, all sessionless clients together: nothing tells them apart to
bound each one), terminal ones included (the oldest terminal task makes room;
with none, the call is refused with -32603), counted from the call (calls sent together
cannot overshoot it); a terminal task is kept for its ttl (the client's, within
:data:`MAX_TTL_MS`) and then forgotten, sooner when the kept outcomes pass
:data:`MAX_RESULT_BYTES` (oldest first, whoever's). A failed task's error goes downstream
as ``data``, scrubbed of our secrets, never ``raw_data``.

Not done: an upstream task's own asks after it was created (an elicitation while the task
runs) reach a 2026-07-28 client only through its request, which has ended by then: they
are answered as in headless mode (policy, canned answers), not as ``input_required`` on
the gateway's task. A 2025-11-25 session client is asked directly, as for any call.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import attrs
import orjson
import trio

from agenthost.errors import JSONRPCError, TaskCancelled
from agenthost.protocol import jsonrpc
from agenthost.protocol import methods as m
from agenthost.protocol.converter import unstructure
from agenthost.protocol.types import CallToolResult
from agenthost.protocol.types.tasks import CreateTaskResult
from agenthost.serve.downstream import RequestInfo
from agenthost.tool_tasks import TERMINAL_STATUSES

__all__ = [
    "EXTENSION",
    "LEGACY",
    "MAX_RESULT_BYTES",
    "MAX_STATELESS_TASKS",
    "MAX_TASKS_PER_OWNER",
    "MAX_TTL_MS",
    "STATELESS",
    "GatewayTask",
    "GatewayTasks",
    "TaskRun",
]

log = logging.getLogger("agenthost.serve")

#: The two task forms a downstream client may use.
LEGACY: Final = "2025-11-25"
EXTENSION: Final = "io.modelcontextprotocol/tasks"
#: The pool of the tasks of 2026-07-28 HTTP requests (they have no session): reached by
#: task id alone, never listed.
STATELESS: Final = object()
#: Tasks one owner holds at once, terminal ones included (:data:`STATELESS`, shared by
#: every sessionless client: :data:`MAX_STATELESS_TASKS`).
MAX_TASKS_PER_OWNER: Final = 64
MAX_STATELESS_TASKS: Final = 256
#: The bytes of finished tasks' outcomes (results, errors) the gateway keeps for its clients,
#: all owners together: past it the oldest finished task is forgotten. Without it, 64
#: sessions of 64 tasks (and 256 sessionless) of 16 MiB results would be kept an hour.
MAX_RESULT_BYTES: Final = 256 * 1024 * 1024
#: How long a terminal task is kept for its client to read: the client's ttl within these.
DEFAULT_TTL_MS: Final = 300_000
MAX_TTL_MS: Final = 3_600_000
#: What the gateway tells its clients to poll at (the host polls upstream on its own).
POLL_INTERVAL_MS: Final = 200
#: ``_meta`` key that ties a ``tasks/result`` to its task (2025-11-25).
_RELATED_TASK: Final = "io.modelcontextprotocol/related-task"

#: ``async (n, total, message) -> None``: the host's progress callback.
Progress = Callable[[float, float | None, str | None], Awaitable[None]]
#: Runs the call: ``run(on_created, progress)`` is ``host.call_tool(..., task=True)``.
TaskRun = Callable[
    [Callable[[CreateTaskResult], Awaitable[None]], Progress], Awaitable[CallToolResult]
]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@attrs.define(eq=False)
class GatewayTask:
    """One task handed downstream; its work runs in the gateway's nursery."""

    task_id: str
    owner: object
    form: str
    tool: str
    ttl_ms: int
    created_at: str = attrs.field(factory=_now)
    last_updated_at: str = attrs.field(factory=_now)
    status: str = "working"
    status_message: str | None = None
    result: CallToolResult | None = None
    error: JSONRPCError | None = None
    #: When a terminal task is forgotten (trio clock).
    expires: float = float("inf")
    #: The bytes of its outcome, once terminal (counted in :data:`MAX_RESULT_BYTES`).
    size: int = 0
    #: Whether its client was told of it (the upstream created its task). Until then it
    #: holds its place in the owner's bound but is nobody's to see.
    announced: bool = False
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def update(self, status: str, message: str | None) -> None:
        if self.terminal or (status, message) == (self.status, self.status_message):
            return
        self.status, self.status_message = status, message
        self.last_updated_at = _now()

    def finish(
        self,
        status: str,
        *,
        result: CallToolResult | None = None,
        error: JSONRPCError | None = None,
        message: str | None = None,
    ) -> None:
        if self.terminal:
            return
        self.result, self.error = result, error
        self.update(status, message)
        self.expires = trio.current_time() + self.ttl_ms / 1000
        self.done.set()

    def wire(self, revision: str) -> dict[str, Any]:
        """The task's state as its form writes it (the extension: with its outcome)."""
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
        }
        if self.status_message is not None:
            out["statusMessage"] = self.status_message
        if self.form == LEGACY:
            out.update(ttl=self.ttl_ms, pollInterval=POLL_INTERVAL_MS)
            return out
        out.update(ttlMs=self.ttl_ms, pollIntervalMs=POLL_INTERVAL_MS)
        if self.status == "completed" and self.result is not None:
            out["result"] = unstructure(self.result, revision)
        elif self.status == "failed" and self.error is not None:
            out["error"] = _error(self.error)
        return out


class GatewayTasks:
    """The downstream clients' tasks, by owner; their work runs in ``nursery``."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._owned: dict[object, dict[str, GatewayTask]] = {}
        #: The sum of the kept tasks' sizes.
        self._kept_bytes = 0

    # ------------------------------------------------------------------ creating

    async def call(
        self, info: RequestInfo, form: str, tool: str, ttl_ms: int | None, run: TaskRun
    ) -> dict[str, Any] | CallToolResult:
        """Run a tool call that the client wants as a task: the gateway's task once the
        upstream has created one, else the call's own result (see the module doc).

        Raises:
            JSONRPCError: the call failed before any task existed, or the owner holds
                :data:`MAX_TASKS_PER_OWNER` unfinished tasks.
        """
        owner = info.session.task_owner
        held = self._room(owner)
        ttl = DEFAULT_TTL_MS if ttl_ms is None else max(1000, min(MAX_TTL_MS, ttl_ms))
        task = GatewayTask(
            task_id=secrets.token_urlsafe(18), owner=owner, form=form, tool=tool, ttl_ms=ttl
        )
        settled = trio.Event()
        created: list[bool] = []
        # Counted from now: calls sent together would all pass _room before any upstream
        # had created its task, and the owner would hold as many tasks as it sent.
        held[task.task_id] = task

        async def on_created(upstream: CreateTaskResult) -> None:
            created.append(True)
            task.announced = True
            log.info("%s: task %s… runs %s upstream", info.session.name, task.task_id[:6], tool)
            settled.set()

        self._nursery.start_soon(self._run, task, run, on_created, _status_relay(task, info))
        try:
            await _first(settled, task.done)
        except BaseException:
            if not created:
                task.scope.cancel()  # the client gave up before there was a task
            raise
        finally:
            if not created and held.get(task.task_id) is task:
                self._drop(held, task.task_id)
        if created:
            return (
                {"task": task.wire(info.revision)}
                if form == LEGACY
                else {
                    "resultType": "task",
                    **task.wire(info.revision),
                }
            )
        if task.error is not None:
            raise task.error
        if task.result is None:
            raise JSONRPCError(jsonrpc.INTERNAL_ERROR, f"tool call {tool[:200]} was cancelled")
        return task.result

    def _room(self, owner: object) -> dict[str, GatewayTask]:
        """The owner's tasks, with room for one more (expired and, if need be, the
        oldest terminal tasks forgotten)."""
        held = self._owned.setdefault(owner, {})
        now = trio.current_time()
        for task_id in [k for k, t in held.items() if t.expires <= now]:
            self._drop(held, task_id)
        bound = _rules(owner).bound
        if len(held) >= bound:
            finished = sorted((t for t in held.values() if t.terminal), key=lambda t: t.expires)
            if not finished:
                raise JSONRPCError(
                    jsonrpc.INTERNAL_ERROR,
                    f"too many tasks under way (at most {bound}): wait for one",
                )
            self._drop(held, finished[0].task_id)
        return held

    def _drop(self, held: dict[str, GatewayTask], task_id: str) -> None:
        self._kept_bytes -= held.pop(task_id).size

    def _keep(self, task: GatewayTask) -> None:
        """Count ``task``'s outcome in :data:`MAX_RESULT_BYTES`; past it, forget the
        oldest finished tasks (any owner's) until the rest fit."""
        outcome: Any = (
            unstructure(task.result, LEGACY)
            if task.result is not None
            else _error(task.error)
            if task.error is not None
            else None
        )
        task.size = len(orjson.dumps(outcome)) if outcome is not None else 0
        held = self._owned.get(task.owner, {})
        if not task.announced or not task.size or held.get(task.task_id) is not task:
            return  # not kept (no task was created, or its owner left)
        self._kept_bytes += task.size
        if self._kept_bytes <= MAX_RESULT_BYTES:
            return
        finished = sorted(
            (
                (t.expires, owner, t.task_id)
                for owner, held in self._owned.items()
                for t in held.values()
                if t.terminal and t.size and t is not task
            ),
            key=lambda item: item[0],
        )
        for _, owner, task_id in finished:
            if self._kept_bytes <= MAX_RESULT_BYTES:
                break
            self._drop(self._owned[owner], task_id)

    async def _run(
        self,
        task: GatewayTask,
        run: TaskRun,
        on_created: Callable[[CreateTaskResult], Awaitable[None]],
        progress: Progress,
    ) -> None:
        with task.scope:
            try:
                result = await run(on_created, progress)
            except JSONRPCError as exc:
                task.finish("failed", error=exc)
            except TaskCancelled as exc:
                task.finish("cancelled", message=str(exc)[:2000])
            except Exception as exc:  # a bug of ours must not end the gateway
                log.exception("task %s… of %s", task.task_id[:6], task.tool)
                task.finish("failed", error=JSONRPCError(jsonrpc.INTERNAL_ERROR, str(exc)[:2000]))
            else:
                task.finish("completed", result=result)
        task.finish("cancelled", message="cancelled by the client")
        self._keep(task)

    # ------------------------------------------------------------------ the tasks/* methods

    def find(self, info: RequestInfo, params: Mapping[str, Any]) -> GatewayTask:
        """The task ``params`` names, among the asking client's owner's tasks only."""
        task_id = params.get("taskId")
        held = self._owned.get(info.session.task_owner, {})
        task = held.get(task_id) if isinstance(task_id, str) else None
        if task is None or not task.announced or task.expires <= trio.current_time():
            shown = str(task_id)[:80]
            raise JSONRPCError(jsonrpc.INVALID_PARAMS, f"unknown task: {shown}")
        return task

    def listed(self, info: RequestInfo) -> list[GatewayTask]:
        """The tasks ``tasks/list`` shows: a session's own; for sessionless requests none
        (their tasks are many clients', told apart by nothing but their ids)."""
        owner = info.session.task_owner
        if not _rules(owner).listed:
            return []
        now = trio.current_time()
        held = self._owned.get(owner, {})
        return [t for t in held.values() if t.announced and t.expires > now]

    async def result(self, info: RequestInfo, params: Mapping[str, Any]) -> dict[str, Any]:
        """``tasks/result`` (2025-11-25): waits for the end, then the call's own answer."""
        task = self.find(info, params)
        await task.done.wait()
        if task.error is not None:
            raise task.error
        if task.result is None:
            raise JSONRPCError(
                jsonrpc.INTERNAL_ERROR,
                f"task {task.task_id[:80]} was cancelled: {task.status_message or ''}".strip(),
            )
        out: dict[str, Any] = unstructure(task.result, info.revision)
        out["_meta"] = {**(out.get("_meta") or {}), _RELATED_TASK: {"taskId": task.task_id}}
        return out

    async def cancel(self, info: RequestInfo, params: Mapping[str, Any]) -> GatewayTask:
        """Cancel a task still under way: ``cancelled`` at once (the spec wants it so
        before the answer), while the host's call unwinds and cancels the upstream task.

        Raises:
            JSONRPCError: -32602 for a task already terminal (2025-11-25's rule).
        """
        task = self.find(info, params)
        if task.terminal:
            raise JSONRPCError(
                jsonrpc.INVALID_PARAMS, f"task {task.task_id[:80]} is already {task.status}"
            )
        task.scope.cancel()  # the host sends tasks/cancel upstream as its call unwinds
        task.finish("cancelled", message="cancelled by the client")
        return task

    def forget(self, owner: object) -> None:
        """Cancel and drop ``owner``'s tasks (its session ended: nobody can reach them)."""
        for task in self._owned.pop(owner, {}).values():
            self._kept_bytes -= task.size
            task.scope.cancel()


@attrs.frozen
class _OwnerRules:
    """What an owner's clients may do with its tasks."""

    #: Tasks it holds at once, terminal ones included.
    bound: int
    #: Whether ``tasks/list`` shows them.
    listed: bool


def _rules(owner: object) -> _OwnerRules:
    """A session's rules (its own tasks, listed), or the sessionless pool's (shared by
    every sessionless client: a larger bound, never listed, reached by id alone)."""
    if owner is STATELESS:
        return _OwnerRules(bound=MAX_STATELESS_TASKS, listed=False)
    return _OwnerRules(bound=MAX_TASKS_PER_OWNER, listed=True)


def _status_relay(task: GatewayTask, info: RequestInfo) -> Progress:
    """The host's progress callback: a status change of the upstream task (``"status:
    message"``) becomes the gateway task's, anything else its status message; relayed to
    the client's progress token when it gave one."""
    token = info.progress_token

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        text = message or ""
        status, _, rest = text.partition(": ")
        if status in ("working", "input_required"):
            task.update("working", rest or None)
        elif text:
            task.update("working", text[:2000])
        if token is not None:
            params: dict[str, Any] = {"progressToken": token, "progress": progress}
            if total is not None:
                params["total"] = total
            if message is not None and info.revision != "2024-11-05":
                params["message"] = message
            await info.session.notify(m.NOTIFICATION_PROGRESS, params)

    return relay


async def _first(*events: trio.Event) -> None:
    """Wait until any of ``events`` is set."""
    async with trio.open_nursery() as nursery:
        for event in events:

            async def wait(event: trio.Event = event) -> None:
                await event.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(wait)


def _error(exc: JSONRPCError) -> dict[str, Any]:
    """The task's error as the client sees it: ``data``, never ``raw_data`` (what the
    upstream sent, our secrets included: it quotes back the headers and env we gave it)."""
    out: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        out["data"] = exc.data
    return out
