"""The run's tool calls: each turn's calls at once, tasks past their grace in the background.

Every call goes through the :class:`~agenthost.agent.tool_host.ToolHost` (so through its
policy), and every way a call can end, denied, failed, not found, becomes a tool result
the model can read (:func:`_settle`); only an interruption propagates.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio

import agenthost_providers.base as llm
from agenthost.agent.tool_search import SEARCH_TOOL
from agenthost.agent.transcript import AgentEvent, ToolCallRecord
from agenthost.errors import AgentHostError, ConsentDenied, JSONRPCError, NotFound
from agenthost.mcp_to_llm import tool_result_to_llm
from agenthost.tool_tasks import MODEL_IMMEDIATE_RESPONSE

if TYPE_CHECKING:
    from agenthost.agent.tool_host import ToolHost
    from agenthost.protocol.types.tasks import CreateTaskResult

__all__ = ["SKILL_TOOL", "Calls", "Job"]

#: The longest server-provided immediate response passed to the model, in characters.
_IMMEDIATE_MAX = 4000

#: The built-in tool that loads a server's skill (SEP-2640). Catalog names always hold
#: the ``server__tool`` separator, so this name never shadows a server's tool.
SKILL_TOOL = "load_skill"


def _text(result: llm.ToolResultContent) -> str:
    parts = [p.text for p in result.content if isinstance(p, llm.TextContent)]
    others = [
        f"tool_reference {p.tool_name}" if isinstance(p, llm.ToolReferenceContent) else p.type
        for p in result.content
        if not isinstance(p, llm.TextContent)
    ]
    text = "\n".join(parts)
    if others:
        text += ("\n" if text else "") + "".join(f"[{kind}]" for kind in others)
    return text


async def _call(
    host: ToolHost[Any],
    use: llm.ToolUseContent,
    record: ToolCallRecord,
    emit: Callable[[AgentEvent], None],
    on_task: Callable[[CreateTaskResult], Awaitable[None]] | None = None,
) -> llm.ToolResultContent:
    """Run one tool call; every failure becomes a tool result the model can read."""

    async def progress(value: float, total: float | None, message: str | None) -> None:
        emit(AgentEvent(kind="progress", record=record, progress=(value, total, message)))

    async def run() -> llm.ToolResultContent:
        entry = host.resolve_tool(use.name)
        record.server = entry.server
        result = await host.call_tool(use.name, dict(use.input), progress=progress, on_task=on_task)
        record.status = "error" if result.is_error else "ok"
        return tool_result_to_llm(use.id, result)

    return await _settle(use, record, run, not_found=f"No such tool: {use.name}")


async def _settle(
    use: llm.ToolUseContent,
    record: ToolCallRecord,
    run: Callable[[], Awaitable[llm.ToolResultContent]],
    *,
    not_found: str,
) -> llm.ToolResultContent:
    """Run one tool use and record how it ended; every failure becomes a result.

    Anything the host raises (server errors, timeouts, a server gone, a result that does
    not parse, a skill that fails verification) is the model's to read, not the run's end;
    and every tool use must be paired with a result or the conversation is invalid. An
    interruption is recorded as "cancelled", never "ok", and propagates.
    """
    started = time.monotonic()
    try:
        content = await run()
    except ConsentDenied as exc:
        record.status, record.reason = "denied", str(exc)
        content = _error(use.id, f"Denied by policy: {exc}. Do not retry this call.")
    except NotFound as exc:
        record.status, record.reason = "error", str(exc)
        content = _error(use.id, not_found)
    except AgentHostError as exc:
        record.status = "error"
        record.reason = exc.text if isinstance(exc, JSONRPCError) else str(exc)
        content = _error(use.id, f"Tool call failed: {exc}")
    except BaseException:
        record.status, record.reason = "cancelled", "interrupted before the tool answered"
        record.duration = time.monotonic() - started
        raise
    record.output = _text(content)
    record.duration = time.monotonic() - started
    return content


async def _load_skill(
    host: ToolHost[Any], use: llm.ToolUseContent, record: ToolCallRecord
) -> llm.ToolResultContent:
    """The built-in skill tool: load through the policy (kind ``skill``), verified."""
    skill = str(use.input.get("skill", ""))
    server, _, name = skill.partition("/")
    record.server = server

    async def run() -> llm.ToolResultContent:
        loaded = await host.load_skill(server, name)
        record.status = "ok"
        return llm.ToolResultContent(
            tool_use_id=use.id, content=(llm.TextContent(text=loaded.body),)
        )

    return await _settle(use, record, run, not_found=f"No such skill: {skill}")


@attrs.define(eq=False)
class Job:
    """One tool use in flight: its result once in, and whether the model may move on."""

    use: llm.ToolUseContent
    record: ToolCallRecord
    result: llm.ToolResultContent | None = None
    #: Set when the result is in, or when the call runs as a task past the grace period.
    settled: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    #: The server's ``model-immediate-response`` text, if it gave one.
    immediate: str | None = None


class Calls:
    """The run's tool calls: each turn's run at once, the long ones (tasks) in the
    background past ``grace``, their results handed back as they finish.

    **Cancellation:** the calls run in the run's own nursery (:meth:`run_agent`): ending
    the run cancels those still running, and a task's server gets ``tasks/cancel``.
    """

    def __init__(
        self,
        host: ToolHost[Any],
        nursery: trio.Nursery,
        *,
        builtin: bool,
        grace: float | None,
        emit: Callable[[AgentEvent], None],
        search: Callable[[llm.ToolUseContent], llm.ToolResultContent | None] | None = None,
        for_model: Callable[[llm.ToolResultContent], llm.ToolResultContent] | None = None,
    ) -> None:
        self._host = host
        self._search = search
        self._for_model = for_model
        self._nursery = nursery
        self._builtin = builtin
        self._grace = grace
        self._emit = emit
        #: Deferred calls whose results the model has not had yet.
        self.pending: list[Job] = []
        self._changed = trio.Event()

    async def run_turn(
        self, calls: list[tuple[llm.ToolUseContent, ToolCallRecord]]
    ) -> list[llm.Content]:
        """Run one turn's tool calls at once; their results in the order the model asked.

        Why at once: a model that asks for three slow tools (three tasks, say) should wait
        for the slowest, not for the sum. A call that runs as a task and is still going
        after the grace period answers with an immediate "still running" result instead.
        Consent prompts stay one at a time (the prompters serialise their questions).
        """
        jobs = [Job(use=use, record=call) for use, call in calls]
        for job in jobs:
            self._nursery.start_soon(self._run, job)
        for job in jobs:
            await job.settled.wait()
        results: list[llm.Content] = []
        for job in jobs:
            if job.result is not None:
                results.append(job.result)
                continue
            job.record.status, job.record.deferred = "running", True
            content = _still_running(job)
            job.record.output = _text(content)
            self.pending.append(job)
            self._emit(AgentEvent(kind="tool_running", record=job.record))
            results.append(content)
        return results

    def finished(self) -> list[Job]:
        """The deferred calls that have finished since last asked (removed from pending)."""
        done = [job for job in self.pending if job.result is not None]
        self.pending = [job for job in self.pending if job.result is None]
        return done

    async def wait_any(self) -> None:
        """Wait until a deferred call has finished (each ends by its task's own timeout)."""
        while not any(job.result is not None for job in self.pending):
            self._changed = trio.Event()
            await self._changed.wait()

    async def _run(self, job: Job) -> None:
        use, record = job.use, job.record

        async def on_task(created: CreateTaskResult) -> None:
            record.task_id = created.task.task_id
            text = (created.meta or {}).get(MODEL_IMMEDIATE_RESPONSE)
            if isinstance(text, str) and text.strip():
                job.immediate = text[:_IMMEDIATE_MAX]
            if self._grace is not None:
                self._nursery.start_soon(self._settle_after_grace, job, self._grace)

        found = self._search(use) if use.name == SEARCH_TOOL and self._search else None
        if found is not None:
            job.result = found
            record.output = _text(found)
        elif use.name == SKILL_TOOL and self._builtin:
            job.result = await _load_skill(self._host, use, record)
        else:
            job.result = await _call(self._host, use, record, self._emit, on_task=on_task)
        if self._for_model is not None:
            # Cut to size, media the model cannot take described (agent/budget.py); the
            # transcript (record.output), --json and the audit keep the whole result.
            job.result = self._for_model(job.result)
        job.done.set()
        job.settled.set()
        self._changed.set()
        self._emit(AgentEvent(kind="tool_result", record=record))

    @staticmethod
    async def _settle_after_grace(job: Job, grace: float) -> None:
        with trio.move_on_after(grace):
            await job.done.wait()
        job.settled.set()


def _still_running(job: Job) -> llm.ToolResultContent:
    """The immediate result of a task still running: the server's words, or ours."""
    record = job.record
    first = job.immediate or f"{record.name} is still running (task {record.task_id})."
    note = (
        "Its result will be sent to you in a later message as soon as it is ready. Go on"
        " with the rest of the task meanwhile; do not call it again for the same request."
    )
    return llm.ToolResultContent(
        tool_use_id=job.use.id, content=(llm.TextContent(text=first), llm.TextContent(text=note))
    )


def _error(tool_use_id: str, text: str) -> llm.ToolResultContent:
    return llm.ToolResultContent(
        tool_use_id=tool_use_id, content=(llm.TextContent(text=text),), is_error=True
    )
