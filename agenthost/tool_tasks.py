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
whole exchange is bounded by the caller: ``timeout``, by default the session's request
timeout (the host passes its ``timeouts.task``, else ``timeouts.request``). The task's
``ttl`` is the server's word, and a server could keep a task ``working`` for the hour it
names: it bounds nothing of ours. At the limit the task is cancelled (``tasks/cancel``)
and the call fails with :class:`AgentHostTimeout`.

Bounds: polls are at least :data:`MIN_POLL_INTERVAL` apart, however many status
notifications arrive; ``tasks/list`` keeps at most :data:`MAX_LISTED_TASKS` tasks from
at most ``max_pages`` pages, and says when it cut; a task id is echoed into an error
message cut to :data:`MAX_SHOWN_ID` characters.

The 2026-07-28 form (the ``io.modelcontextprotocol/tasks`` extension, SEP-2663) differs
on the wire, not in what a caller sees (:func:`call_tool_via_extension`):

* negotiated by capability: the server lists the extension in ``server/discover``'s
  ``capabilities.extensions``; the client declares it *per request*, in the request's
  ``_meta`` client capabilities, and the server alone decides whether the call becomes
  a task (a ``CreateTaskResult`` flagged ``resultType: "task"``). Tools carry no
  ``taskSupport``: a tool that needs a task refuses an undeclared call with -32021 naming
  the extension, and the host retries it declared (the refused call never ran);
* no ``tasks/result`` and no ``tasks/list``: ``tasks/get`` (``pollIntervalMs``
  honoured within the same bounds) carries the result, or the JSON-RPC ``error`` of a
  ``failed`` task, inline;
* ``input_required`` lists the task's asks in ``inputRequests``; each key is answered once
  through the session's handlers (the same consent and audit as an MRTR ask) and sent
  with ``tasks/update``; a key seen again on a later poll is not asked twice;
* ``tasks/cancel`` is an empty acknowledgement; over HTTP every ``tasks/*`` request
  carries ``Mcp-Name: <taskId>`` (the session does it).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final

import trio

from agenthost._util import DEFAULT, Timeout
from agenthost.errors import (
    AgentHostError,
    AgentHostTimeout,
    JSONRPCError,
    ProtocolError,
    TaskCancelled,
)
from agenthost.protocol import methods as m
from agenthost.protocol.converter import structure
from agenthost.protocol.revisions import Era
from agenthost.protocol.types import (
    CallToolRequestParams,
    CallToolResult,
    PaginatedRequestParams,
    ServerCapabilities,
    Tool,
)
from agenthost.protocol.types.tasks import (
    CreateTaskResult,
    GetTaskResult,
    Task,
    TaskMetadata,
    TaskRequestParams,
    UpdateTaskRequestParams,
)
from agenthost.redaction import redact, redact_json

if TYPE_CHECKING:
    from agenthost.asks import RequestContext
    from agenthost.session import ClientSession, ProgressCallback

__all__ = [
    "MAX_INPUT_ROUNDS",
    "MAX_LISTED_TASKS",
    "MAX_SHOWN_ID",
    "MIN_POLL_INTERVAL",
    "MODEL_IMMEDIATE_RESPONSE",
    "TASKS_EXTENSION",
    "TERMINAL_STATUSES",
    "TaskCreatedCallback",
    "TaskDetached",
    "TaskList",
    "TaskStatusCallback",
    "call_tool_as_task",
    "call_tool_via_extension",
    "cancel_task",
    "get_task",
    "list_tasks",
    "needs_tasks_extension",
    "offers_tasks_extension",
    "server_accepts_tool_tasks",
    "task_result",
    "wants_task",
]


class TaskDetached(AgentHostError):
    """Raised by an ``on_created`` callback to stop following a task it leaves running.

    Why: ``agenthost call --detach`` starts a task and exits; ``tasks get|result`` follow
    it from a later command. Any other exception from the callback cancels the task. An
    :class:`AgentHostError` so that the ``server_data`` boundaries pass it on unchanged.
    """

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} keeps running on the server")
        self.task_id = task_id


#: The 2026-07-28 tasks extension's identifier (SEP-2663).
TASKS_EXTENSION: Final = m.TASKS_EXTENSION
#: What a request declares to opt into it (no settings are defined).
_DECLARE: Final[Mapping[str, Any]] = {TASKS_EXTENSION: {}}
_TASK_OR_COMPLETE: Final = frozenset({"complete", "task"})
#: ``tasks/update`` rounds one task may ask for: a server that keeps asking is refused.
MAX_INPUT_ROUNDS: Final = 32
#: -32021, Missing Required Client Capability (2026-07-28).
_MISSING_CAPABILITY: Final = -32021


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
#: ``tasks/list``: tasks kept from one listing (the rest is said, not kept).
MAX_LISTED_TASKS: Final = 10_000
#: Characters of a server's task id shown in a message (ids are server text).
MAX_SHOWN_ID: Final = 80
#: ``tasks/cancel`` after the caller was cancelled: best effort, never a hang.
_CANCEL_TIMEOUT: Final = 2.0

_STATUS_NOTIFICATION: Final = "notifications/tasks/status"


def server_accepts_tool_tasks(capabilities: ServerCapabilities | None) -> bool:
    """Whether the server declared ``tasks.requests.tools.call`` in its capabilities."""
    tasks = capabilities.tasks if capabilities is not None else None
    if not isinstance(tasks, Mapping):
        return False
    requests = tasks.get("requests")
    tools = requests.get("tools") if isinstance(requests, Mapping) else None
    return isinstance(tools, Mapping) and "call" in tools


def wants_task(
    tool: Tool, capabilities: ServerCapabilities | None, *, optional: bool = False
) -> bool:
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


def offers_tasks_extension(session: ClientSession) -> bool:
    """Whether ``session`` speaks 2026-07-28 with a server that lists the tasks extension
    in its capabilities (then tasks use the extension's form, never 2025-11-25's)."""
    if session.era is not Era.MODERN:
        return False
    return TASKS_EXTENSION in m.declared_extensions(session.server_capabilities)


def needs_tasks_extension(exc: JSONRPCError) -> bool:
    """Whether ``exc`` is a server's -32021 naming the tasks extension as the capability
    a plain call lacked: the tool runs only as a task (and did not run at all)."""
    if exc.code != _MISSING_CAPABILITY or not isinstance(exc.raw_data, Mapping):
        return False
    required = exc.raw_data.get("requiredCapabilities")
    extensions = required.get("extensions") if isinstance(required, Mapping) else None
    return isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions


def _extension_task(raw: Mapping[str, Any], cls: type[Task] = Task) -> Task:
    """A 2026-07-28 task (``ttlMs``, ``pollIntervalMs``) as our :class:`Task`."""
    renamed = {"ttlMs": "ttl", "pollIntervalMs": "pollInterval"}
    fields = ("taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", *renamed)
    mapped = {renamed.get(key, key): raw[key] for key in fields if raw.get(key) is not None}
    if "_meta" in raw and cls is not Task:
        mapped["_meta"] = raw["_meta"]
    return structure(mapped, cls)


async def get_task(session: ClientSession, task_id: str) -> GetTaskResult:
    """``tasks/get``: the task's current state (either form)."""
    if offers_tasks_extension(session):
        raw = await session.request(m.TASKS_EXT_GET_SPEC, TaskRequestParams(task_id=task_id))
        task = _extension_task(raw, GetTaskResult)
        assert isinstance(task, GetTaskResult)
        return task
    return await session.request(m.TASKS_GET_SPEC, TaskRequestParams(task_id=task_id))


async def task_result(
    session: ClientSession, task_id: str, *, timeout: Timeout = DEFAULT
) -> CallToolResult:
    """The result of a tool-call task, once it is terminal: ``tasks/result`` (2025-11-25,
    which blocks), or ``tasks/get`` polled to a terminal state (the extension).

    ``timeout``: seconds; ``None`` waits as long as the task runs; :data:`DEFAULT` is the
    session's request timeout (never the task's ttl: that is the server's word).

    Raises:
        JSONRPCError: the task failed (or was cancelled) with an error.
        TaskCancelled: (extension) the task ended ``cancelled``.
    """
    if offers_tasks_extension(session):
        latest = await session.request(
            m.TASKS_EXT_GET_SPEC,
            TaskRequestParams(task_id=task_id),
            timeout=timeout,
        )
        # Its asks (if any) are answered here too, through this session's handlers. Only
        # the waiting stops when the caller does: the task is not ours to cancel here.
        return await _follow(session, latest, m.TOOLS_CALL, None, timeout, own=False)
    return await session.request(
        m.TASKS_RESULT_SPEC, TaskRequestParams(task_id=task_id), timeout=timeout
    )


async def cancel_task(session: ClientSession, task_id: str) -> GetTaskResult:
    """``tasks/cancel``: ask the server to stop the task; returns its state (the
    extension acknowledges with nothing: its state is then read with ``tasks/get``)."""
    if offers_tasks_extension(session):
        await session.request(m.TASKS_EXT_CANCEL_SPEC, TaskRequestParams(task_id=task_id))
        return await get_task(session, task_id)
    return await session.request(m.TASKS_CANCEL_SPEC, TaskRequestParams(task_id=task_id))


class TaskList(list[Task]):
    """What ``tasks/list`` gave: the tasks, and whether the listing was cut short."""

    #: Why the rest was left out (``"more than 100 pages"``); None: the whole listing.
    cut: str | None = None


async def list_tasks(session: ClientSession, *, max_pages: int = 100) -> TaskList:
    """``tasks/list``, every page: at most ``max_pages`` pages and
    :data:`MAX_LISTED_TASKS` tasks (a server that pages forever, or lists millions, must
    not keep us or fill our memory); past either the rest is left out and ``cut`` says so.

    Raises:
        ProtocolError: the server uses the 2026-07-28 extension, which has no list (a
            client keeps the ids of its tasks).
    """
    if offers_tasks_extension(session):
        raise ProtocolError(
            "the 2026-07-28 tasks extension has no tasks/list: name the task id"
            " (tasks get|result|cancel SERVER ID)",
            server=session.name,
        )
    tasks = TaskList()
    cursor: str | None = None
    for page_no in range(max_pages + 1):
        if page_no == max_pages:
            tasks.cut = f"more than {max_pages} pages"
            break
        page = await session.request(
            m.TASKS_LIST_SPEC, PaginatedRequestParams(cursor=cursor) if cursor else None
        )
        room = MAX_LISTED_TASKS - len(tasks)
        tasks.extend(page.tasks[:room])
        cursor = page.next_cursor
        if len(page.tasks) > room or (cursor and len(tasks) >= MAX_LISTED_TASKS):
            tasks.cut = f"more than {MAX_LISTED_TASKS} tasks"
            break
        if not cursor:
            break
    return tasks


async def call_tool_as_task(
    session: ClientSession,
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    ttl_ms: int | None = None,
    timeout: Timeout = DEFAULT,
    on_status: TaskStatusCallback | None = None,
    progress: ProgressCallback | None = None,
    on_created: TaskCreatedCallback | None = None,
) -> CallToolResult:
    """Call a tool as a task and wait for its result.

    Args:
        ttl_ms: the task lifetime to ask for (the server may choose another).
        timeout: seconds for the whole exchange; ``None``: no limit; :data:`DEFAULT`: the
            session's request timeout (the task's ttl never lengthens it).
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
    params = CallToolRequestParams(
        name=name, arguments=dict(arguments or {}), task=TaskMetadata(ttl=ttl_ms)
    )
    limit = _task_limit(session, timeout)
    deadline = trio.current_time() + limit
    raw = await session.request(m.TOOLS_CALL_TASK_SPEC, params, timeout=_finite(limit))
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
        except TaskDetached:
            raise  # the caller follows the task later: it keeps running
        except BaseException:
            await _cancel_quietly(session, task.task_id)
            raise
    tell = _Teller(on_status, progress)

    wake = trio.Event()

    async def on_notification(ctx: RequestContext, params: Mapping[str, Any]) -> None:
        if params.get("taskId") == task.task_id:
            wake.set()

    remove = session.add_listener(_STATUS_NOTIFICATION, on_notification)
    try:
        with trio.fail_at(deadline):
            await tell(task)
            looked = trio.current_time()
            while task.status not in TERMINAL_STATUSES and task.status != "input_required":
                with trio.move_on_at(looked + _poll_interval(task)):
                    await wake.wait()
                wake = trio.Event()
                # A notification wakes us early, never before the floor: a server that
                # floods them must not make us poll faster than MIN_POLL_INTERVAL.
                await trio.sleep_until(looked + MIN_POLL_INTERVAL)
                latest = await get_task(session, task.task_id)
                looked = trio.current_time()
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
            f"task {_shown(task.task_id)} of {name} did not finish within {limit:g}s (cancelled)",
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


def _task_limit(session: ClientSession, timeout: Timeout) -> float:
    """How long to follow a task: the caller's seconds; ``None``, no limit (infinity, for
    ``trio.fail_at``); :data:`DEFAULT`, the session's request timeout. Never the task's
    ttl: a server naming an hour (or a negative ttl) must not set the caller's limit."""
    if timeout is DEFAULT:
        timeout = session.request_timeout
    return math.inf if timeout is None else timeout


def _finite(limit: float) -> float | None:
    """``limit`` as one request's timeout (``None``: no limit)."""
    return limit if math.isfinite(limit) else None


def _shown(task_id: str) -> str:
    """A server's task id as echoed in a message: cut, so a megabyte id is not a
    megabyte error line (the full id stays in the exception's data where one is kept)."""
    return task_id if len(task_id) <= MAX_SHOWN_ID else task_id[:MAX_SHOWN_ID] + "…"


class _Teller:
    """Tells the caller each status change of one task: ``on_status`` as is, and the
    progress callback as ``(n, None, "status: message")`` with a growing ``n`` (progress
    values must increase)."""

    def __init__(
        self, on_status: TaskStatusCallback | None, progress: ProgressCallback | None
    ) -> None:
        self._on_status = on_status
        self._progress = progress
        self._updates = 0

    async def __call__(self, current: Task) -> None:
        self._updates += 1
        if self._on_status is not None:
            await self._on_status(current)
        if self._progress is not None:
            text = current.status + (
                f": {current.status_message}" if current.status_message else ""
            )
            await self._progress(float(self._updates), None, text)


async def _cancel_quietly(session: ClientSession, task_id: str, extension: bool = False) -> None:
    """Best-effort ``tasks/cancel`` on the way out: shielded, bounded, errors ignored."""
    if session.closed:
        return
    with (
        trio.CancelScope(shield=True),
        trio.move_on_after(_CANCEL_TIMEOUT),
        suppress(AgentHostError),
    ):
        params = TaskRequestParams(task_id=task_id)
        if extension:
            await session.request(m.TASKS_EXT_CANCEL_SPEC, params, timeout=_CANCEL_TIMEOUT)
        else:
            await session.request(m.TASKS_CANCEL_SPEC, params, timeout=_CANCEL_TIMEOUT)


async def call_tool_via_extension(
    session: ClientSession,
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    timeout: Timeout = DEFAULT,
    on_status: TaskStatusCallback | None = None,
    progress: ProgressCallback | None = None,
    on_created: TaskCreatedCallback | None = None,
) -> CallToolResult:
    """Call a tool declaring the 2026-07-28 tasks extension; follow a task to its result.

    The server decides: a plain ``CallToolResult`` is returned as it is; a
    ``CreateTaskResult`` is polled with ``tasks/get`` to a terminal state, answering its
    ``inputRequests`` through the session's handlers (``tasks/update``).

    Args:
        timeout: seconds for the whole exchange; ``None``: no limit; :data:`DEFAULT`: the
            session's request timeout (the task's ``ttlMs`` never lengthens it).
        on_status, progress: told every status change, as for :func:`call_tool_as_task`
            (the extension's ``statusMessage`` carries the tool's progress text).
        on_created: told once the server has created the task, as for
            :func:`call_tool_as_task` (the task in the 2025-11-25 shape, its ``_meta``).

    Raises:
        AgentHostTimeout: not finished within ``timeout`` (the task is cancelled).
        JSONRPCError: the server refused the call, or the task ``failed`` (its error).
        TaskCancelled: the task ended ``cancelled`` without us asking.
        ProtocolError: the server's answers do not describe a task, or it asked for
            input more than :data:`MAX_INPUT_ROUNDS` times.

    Cancellation: the server receives ``tasks/cancel`` for a task still running (shielded,
    bounded at 2 s), or ``notifications/cancelled`` for the ``tools/call`` in flight.
    """
    params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
    started = trio.current_time()
    limit = _task_limit(session, timeout)
    raw = await session.exchange(
        m.TOOLS_CALL_SPEC,
        params,
        timeout=_finite(limit),
        extensions=_DECLARE,
        final_kinds=_TASK_OR_COMPLETE,
    )
    if raw.get("resultType") != "task":
        return structure(raw, CallToolResult)
    if on_created is not None:
        try:
            created = CreateTaskResult(task=_extension_task(raw), meta=raw.get("_meta"))
        except AgentHostError as exc:
            raise ProtocolError(
                f"tools/call {name}: not a task: {exc}", server=session.name
            ) from None
        try:
            await on_created(created)
        except TaskDetached:
            raise  # the caller follows the task later: it keeps running
        except BaseException:
            await _cancel_quietly(session, created.task.task_id, extension=True)
            raise
    # One limit for the whole exchange: the creating call spent part of it.
    left = max(0.001, limit - (trio.current_time() - started))
    return await _follow(
        session, raw, m.TOOLS_CALL, name, _finite(left), on_status, progress, stated=limit
    )


async def _follow(
    session: ClientSession,
    raw: Mapping[str, Any],
    origin: str,
    name: str | None,
    timeout: Timeout,
    on_status: TaskStatusCallback | None = None,
    progress: ProgressCallback | None = None,
    *,
    stated: Timeout = DEFAULT,
    own: bool = True,
) -> CallToolResult:
    """Poll an extension task (``raw``: its latest state) to its result.

    ``timeout``: what is left of the caller's limit (``stated``, for the message).
    ``own``: the task was created for this call, so it is cancelled when the call ends
    early (False: someone else's, only waited for)."""
    try:
        task = _extension_task(raw)
    except AgentHostError as exc:
        raise ProtocolError(f"{origin} {name}: not a task: {exc}", server=session.name) from None
    limit = _task_limit(session, timeout)
    deadline = trio.current_time() + limit
    tell = _Teller(on_status, progress)
    answered: set[str] = set()
    rounds = 0
    latest: Mapping[str, Any] = raw

    try:
        with trio.fail_at(deadline):
            await tell(task)
            while True:
                result = _outcome(session, task, latest)
                if result is not None:
                    return result
                if task.status == "input_required":
                    rounds = await _answer_input(
                        session, task, latest, answered, rounds, origin=origin, name=name
                    )
                await trio.sleep(_poll_interval(task))
                latest, current = await _poll(session, task)
                if (current.status, current.status_message) != (task.status, task.status_message):
                    await tell(current)
                task = current
    except trio.TooSlowError:
        if own:
            await _cancel_quietly(session, task.task_id, extension=True)
        said = stated if stated is not None and stated is not DEFAULT else limit
        raise AgentHostTimeout(
            f"task {_shown(task.task_id)} of {name or 'a tool'} did not finish within {said:g}s"
            + (" (cancelled)" if own else ""),
            server=session.name,
            timeout=said,
        ) from None
    except BaseException:
        if own and task.status not in TERMINAL_STATUSES:
            await _cancel_quietly(session, task.task_id, extension=True)
        raise


def _outcome(
    session: ClientSession, task: Task, latest: Mapping[str, Any]
) -> CallToolResult | None:
    """The call's result once ``task`` is terminal (``latest``: its last state); None while
    it runs.

    Raises:
        JSONRPCError: the task failed (its error). TaskCancelled: it was cancelled.
        ProtocolError: it completed without a result, or failed without an error.
    """
    if task.status == "completed":
        result = latest.get("result")
        if not isinstance(result, Mapping):
            raise ProtocolError(
                f"task {_shown(task.task_id)} completed without a result", server=session.name
            )
        return structure(result, CallToolResult)
    if task.status == "failed":
        error = latest.get("error")
        if not isinstance(error, Mapping) or type(error.get("code")) is not int:
            raise ProtocolError(
                f"task {_shown(task.task_id)} failed:"
                f" {redact((task.status_message or 'no error')[:2000])}",
                server=session.name,
            )
        # Server text, as an error received through rpc.py: scrubbed; decisions read raw_data.
        raise JSONRPCError(
            error["code"],
            redact(str(error.get("message", ""))[:2000]),
            redact_json(error.get("data")),
            server=session.name,
            raw_data=error.get("data"),
        )
    if task.status == "cancelled":
        raise TaskCancelled(
            f"task {_shown(task.task_id)} was cancelled"
            + (f": {redact(task.status_message[:2000])}" if task.status_message else ""),
            server=session.name,
        )
    return None


async def _answer_input(
    session: ClientSession,
    task: Task,
    latest: Mapping[str, Any],
    answered: set[str],
    rounds: int,
    *,
    origin: str,
    name: str | None,
) -> int:
    """Answer the ``inputRequests`` of ``latest`` not answered yet (``answered`` grows)
    with ``tasks/update``; returns the rounds asked so far.

    Raises:
        ProtocolError: more than :data:`MAX_INPUT_ROUNDS` rounds (a server that never stops
            asking would hold the call forever).
    """
    asks = latest.get("inputRequests")
    fresh = (
        {k: v for k, v in asks.items() if k not in answered} if isinstance(asks, Mapping) else {}
    )
    if not fresh:
        return rounds
    rounds += 1
    if rounds > MAX_INPUT_ROUNDS:
        raise ProtocolError(
            f"task {_shown(task.task_id)} asked for input more than {MAX_INPUT_ROUNDS} times",
            server=session.name,
        )
    responses = await session.answer_input_requests(
        fresh, origin=origin, origin_name=name, round_no=rounds
    )
    answered.update(fresh)
    await session.request(
        m.TASKS_EXT_UPDATE_SPEC,
        UpdateTaskRequestParams(task_id=task.task_id, input_responses=responses),
    )
    return rounds


async def _poll(session: ClientSession, task: Task) -> tuple[Mapping[str, Any], Task]:
    """One ``tasks/get`` of ``task``: the raw answer and the task it describes.

    Raises:
        ProtocolError: the answer is not a task, or describes another task.
    """
    latest: dict[str, Any] = await session.request(
        m.TASKS_EXT_GET_SPEC, TaskRequestParams(task_id=task.task_id)
    )
    try:
        current = _extension_task(latest)
    except AgentHostError as exc:
        raise ProtocolError(
            f"tasks/get {_shown(task.task_id)}: {exc}", server=session.name
        ) from None
    if current.task_id != task.task_id:
        raise ProtocolError(
            f"tasks/get {_shown(task.task_id)} answered for another task", server=session.name
        )
    return latest, current
