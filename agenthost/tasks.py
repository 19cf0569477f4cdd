"""Tasks (MCP 2025-11-25): a tool call run as a durable task, polled to its result.

A tool that takes minutes answers a task-augmented ``tools/call`` at once with a
``CreateTaskResult`` (the task's id and state, not its result). The requestor then polls
``tasks/get`` (honouring the server's ``pollInterval``), and fetches the outcome with
``tasks/result`` once the task is terminal, which returns exactly what the plain call
would have: a ``CallToolResult`` or a JSON-RPC error. Why a host must speak this: a tool
whose ``execution.taskSupport`` is ``required`` refuses a plain call (server-everything's
``simulate-research-query`` does), so without tasks such a tool is listed but can only fail.

Rules kept here, from the spec (``basic/utilities/tasks``):

* a task is used only when the server declares ``tasks.requests.tools.call`` and the tool
  says ``required`` or ``optional``; ``forbidden`` or absent means a plain call;
* ``notifications/tasks/status`` is optional: it only wakes the poller early, polling
  continues regardless;
* on ``input_required`` the requestor calls ``tasks/result`` at once: the server's own
  requests for the task (an elicitation, say) travel while that call is open, and go
  through the session's ordinary handlers (so consent and audit are the usual ones);
* cancelling the caller (Ctrl-C, a deadline) sends ``tasks/cancel`` for the task, shielded
  and bounded, then re-raises.

Error handling: a task that ends ``failed`` or ``cancelled`` yields whatever
``tasks/result`` says (usually a JSON-RPC error, raised as :class:`JSONRPCError`). The
whole exchange is bounded by ``timeout`` (default: the task's ``ttl``, else one hour).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final

import trio

from agenthost.converter import structure
from agenthost.errors import AgentHostError, AgentHostTimeout, ProtocolError
from agenthost.types import CallToolResult, Tool
from agenthost.types.tasks import CreateTaskResult, GetTaskResult, ListTasksResult, Task

if TYPE_CHECKING:
    from agenthost.session import ClientSession, ProgressCallback, RequestContext

__all__ = [
    "MODEL_IMMEDIATE_RESPONSE",
    "TERMINAL_STATUSES",
    "TaskCreatedCallback",
    "TaskStatusCallback",
    "call_tool_as_task",
    "cancel_task",
    "get_task",
    "list_tasks",
    "server_accepts_tool_tasks",
    "task_result",
    "wants_task",
]

#: A task in one of these states never changes again.
TERMINAL_STATUSES: Final = frozenset({"completed", "failed", "cancelled"})

#: ``async (task) -> None``: told each time the task's status or message changes.
TaskStatusCallback = Callable[[Task], Awaitable[None]]
#: ``async (created) -> None``: told once, when the server has accepted the task.
TaskCreatedCallback = Callable[[CreateTaskResult], Awaitable[None]]
#: The ``CreateTaskResult`` ``_meta`` key of a text meant for the model while the task
#: runs (2025-11-25 tasks, "Creating Tasks"; provisional in the spec).
MODEL_IMMEDIATE_RESPONSE: Final = "io.modelcontextprotocol/model-immediate-response"

#: Polling bounds, seconds: the server's ``pollInterval`` is honoured within them (a
#: server must not make us spin, nor park us for an hour between two looks).
DEFAULT_POLL_INTERVAL: Final = 1.0
MIN_POLL_INTERVAL: Final = 0.05
MAX_POLL_INTERVAL: Final = 30.0
#: How long a task may run when neither the caller nor the task's ttl says.
DEFAULT_TASK_TIMEOUT: Final = 3600.0
#: ``tasks/cancel`` after the caller was cancelled: best effort, never a hang.
_CANCEL_TIMEOUT: Final = 2.0

_STATUS_NOTIFICATION: Final = "notifications/tasks/status"


def server_accepts_tool_tasks(capabilities: Any) -> bool:
    """Whether the server declared ``tasks.requests.tools.call`` in its capabilities."""
    tasks = getattr(capabilities, "tasks", None)
    if not isinstance(tasks, Mapping):
        return False
    requests = tasks.get("requests")
    tools = requests.get("tools") if isinstance(requests, Mapping) else None
    return isinstance(tools, Mapping) and "call" in tools


def wants_task(tool: Tool, capabilities: Any, *, optional: bool = False) -> bool:
    """Whether to call ``tool`` as a task: required by the tool (or optional, when the
    caller prefers tasks), and accepted by the server."""
    support = tool.execution.task_support if tool.execution is not None else None
    if support == "required" or (optional and support == "optional"):
        return server_accepts_tool_tasks(capabilities)
    return False


def _poll_interval(task: Task) -> float:
    if task.poll_interval is None:
        return DEFAULT_POLL_INTERVAL
    return min(MAX_POLL_INTERVAL, max(MIN_POLL_INTERVAL, task.poll_interval / 1000))


async def get_task(session: ClientSession, task_id: str) -> GetTaskResult:
    """``tasks/get``: the task's current state."""
    raw = await session.send_request("tasks/get", {"taskId": task_id})
    return structure(raw, GetTaskResult)


async def task_result(
    session: ClientSession, task_id: str, *, timeout: float | None = None
) -> CallToolResult:
    """``tasks/result`` of a tool-call task: blocks until the task is terminal.

    Raises:
        JSONRPCError: the task failed (or was cancelled) with an error.
    """
    raw = await session.send_request("tasks/result", {"taskId": task_id}, timeout=timeout)
    return structure(raw, CallToolResult)


async def cancel_task(session: ClientSession, task_id: str) -> GetTaskResult:
    """``tasks/cancel``: ask the server to stop the task; returns its (cancelled) state."""
    raw = await session.send_request("tasks/cancel", {"taskId": task_id})
    return structure(raw, GetTaskResult)


async def list_tasks(session: ClientSession, *, max_pages: int = 100) -> list[Task]:
    """``tasks/list``, every page (at most ``max_pages``: a server that pages forever must
    not keep us)."""
    tasks: list[Task] = []
    cursor: str | None = None
    for _ in range(max_pages):
        page = structure(
            await session.send_request("tasks/list", {"cursor": cursor} if cursor else None),
            ListTasksResult,
        )
        tasks.extend(page.tasks)
        cursor = page.next_cursor
        if not cursor:
            break
    return tasks


async def call_tool_as_task(
    session: ClientSession,
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    ttl_ms: int | None = None,
    timeout: float | None = None,
    on_status: TaskStatusCallback | None = None,
    progress: ProgressCallback | None = None,
    on_created: TaskCreatedCallback | None = None,
) -> CallToolResult:
    """Call a tool as a task and wait for its result.

    Args:
        ttl_ms: the task lifetime to ask for (the server may choose another).
        timeout: seconds for the whole exchange; default the task's ttl, else one hour.
        on_status: told every status change (``working`` -> ``input_required`` -> ...).
        progress: also told every status change, as ``(n, None, "status: message")``,
            so a progress bar shows what the task is doing.
        on_created: told the server's ``CreateTaskResult`` (the task exists: an agent
            may answer its model now, with the ``_meta`` immediate response if any).

    Raises:
        AgentHostTimeout: the task did not finish within ``timeout`` (it is cancelled).
        JSONRPCError: the server refused the call, or the task failed with an error.
        ProtocolError: the server's answers do not describe a task.

    Cancellation: the server receives ``tasks/cancel`` for the task (and the usual
    ``notifications/cancelled`` for a request in flight).
    """
    params: dict[str, Any] = {
        "name": name,
        "arguments": dict(arguments or {}),
        "task": {} if ttl_ms is None else {"ttl": ttl_ms},
    }
    raw = await session.send_request("tools/call", params)
    if "task" not in raw:
        # The server ran it as a plain call after all (allowed for "optional" tools).
        return structure(raw, CallToolResult)
    try:
        created = structure(raw, CreateTaskResult)
    except AgentHostError as exc:
        raise ProtocolError(f"tools/call {name}: not a task: {exc}", server=session.name) from None
    task: Task = created.task
    if on_created is not None:
        try:
            await on_created(created)
        except BaseException:
            await _cancel_quietly(session, task.task_id)
            raise
    limit = timeout
    if limit is None:
        limit = task.ttl / 1000 if task.ttl else DEFAULT_TASK_TIMEOUT
    deadline = trio.current_time() + limit
    updates = 0

    async def tell(current: Task) -> None:
        nonlocal updates
        updates += 1
        if on_status is not None:
            await on_status(current)
        if progress is not None:
            text = current.status + (
                f": {current.status_message}" if current.status_message else ""
            )
            await progress(float(updates), None, text)

    wake = trio.Event()

    async def on_notification(ctx: RequestContext, params: Mapping[str, Any]) -> None:
        if params.get("taskId") == task.task_id:
            wake.set()

    remove = session.add_listener(_STATUS_NOTIFICATION, on_notification)
    try:
        with trio.fail_at(deadline):
            await tell(task)
            while task.status not in TERMINAL_STATUSES and task.status != "input_required":
                with trio.move_on_after(_poll_interval(task)):
                    await wake.wait()
                wake = trio.Event()
                latest = await get_task(session, task.task_id)
                if (latest.status, latest.status_message) != (task.status, task.status_message):
                    await tell(latest)
                task = latest
            # Terminal, or input_required: tasks/result carries the server's asks and
            # blocks until the task is done.
            remaining = max(0.001, deadline - trio.current_time())
            return await task_result(session, task.task_id, timeout=remaining)
    except trio.TooSlowError:
        await _cancel_quietly(session, task.task_id)
        raise AgentHostTimeout(
            f"task {task.task_id} of {name} did not finish within {limit:g}s (cancelled)",
            server=session.name,
            timeout=limit,
        ) from None
    except BaseException:
        # Cancelled or interrupted, or a request failed: a task still running would run
        # on for nobody (a failed task's own error needs no cancel: it is over).
        if task.status not in TERMINAL_STATUSES:
            await _cancel_quietly(session, task.task_id)
        raise
    finally:
        remove()


async def _cancel_quietly(session: ClientSession, task_id: str) -> None:
    """Best-effort ``tasks/cancel`` on the way out: shielded, bounded, errors ignored."""
    if session.closed:
        return
    with (
        trio.CancelScope(shield=True),
        trio.move_on_after(_CANCEL_TIMEOUT),
        suppress(AgentHostError),
    ):
        await session.send_request("tasks/cancel", {"taskId": task_id}, timeout=_CANCEL_TIMEOUT)
