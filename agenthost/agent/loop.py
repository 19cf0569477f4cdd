"""The agent: an LLM loop over every server's tools, each call through consent.

One turn: the model answers; if it asks for tools, each call goes through the host (so
through the policy, then the owning session) and its result, or the reason it failed or
was denied, goes back to the model as a tool result: a model that is told "denied by
policy" or "file not found" can change course, which ending the run would not allow.

The loop stops at the model's end of turn, at ``max_turns``, when the token budget is
spent, or when cancelled (Ctrl-C in the CLI): in-flight tool calls are cancelled through
the session, which tells their servers (``notifications/cancelled``). The
:class:`Transcript` is filled in as the run goes, so an interrupted run still has one.

Long tools do not stop the conversation. A tool that runs as a task (MCP 2025-11-25) and
has not finished after ``task_grace`` seconds gets an immediate result for the model (the
server's ``model-immediate-response`` text if it gave one, else ours) saying that it is
running and that its result will follow; the model goes on (other tools, text), and the
real result is added to the conversation, as a user message, before the first model call
after it finished. The run ends only when the model is done *and* no task is pending;
at ``max_turns`` or the token budget, pending tasks are cancelled (``tasks/cancel``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

import providers.base as llm
from agenthost._util import collapse_single_group
from agenthost.errors import AgentHostError, ConsentDenied, JSONRPCError, NotFound, ProviderError
from agenthost.mcp_to_llm import tool_result_to_llm
from agenthost.skills import SkillEntry
from agenthost.tool_tasks import MODEL_IMMEDIATE_RESPONSE

if TYPE_CHECKING:
    from agenthost.host.host import Host
    from agenthost.protocol.types.tasks import CreateTaskResult

__all__ = ["AgentEvent", "StopReason", "ToolCallRecord", "Transcript", "run_agent"]

log = logging.getLogger("agenthost.agent")

StopReason = Literal["end_turn", "max_turns", "token_budget", "interrupted", "provider_error"]

#: Seconds a task-run tool has to finish before the model is told it is still running.
DEFAULT_TASK_GRACE = 2.0
#: The longest server-provided immediate response passed to the model, in characters.
_IMMEDIATE_MAX = 4000

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent working through tools provided by MCP servers. Use the tools to do the"
    " task; when a tool fails or is denied, adapt instead of repeating the same call. When"
    " done, answer with a short summary of what you did."
)


@attrs.define(kw_only=True)
class ToolCallRecord:
    """One tool call the model made, and what became of it."""

    id: str
    name: str
    arguments: Mapping[str, Any]
    server: str | None = None
    #: "ok", "error" (the tool said isError or failed), "denied" (consent), "cancelled",
    #: or "running" (a task whose result the model has not had yet).
    status: Literal["ok", "error", "denied", "cancelled", "running"] = "ok"
    #: The text the model was given back (for a deferred task: its real result, once in).
    output: str = ""
    reason: str | None = None
    duration: float = 0.0
    #: The server's task id, when the tool ran as a task.
    task_id: str | None = None
    #: The model first got an immediate "still running" result; the real one came later.
    deferred: bool = False


@attrs.define(kw_only=True)
class Transcript:
    """Everything a run did; ``to_json()`` is what ``agenthost run --json`` prints."""

    task: str
    provider: str
    model: str
    messages: list[llm.Message] = attrs.field(factory=list)
    tool_calls: list[ToolCallRecord] = attrs.field(factory=list)
    final_text: str = ""
    stop: StopReason | None = None
    error: str | None = None
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def denied(self) -> list[ToolCallRecord]:
        return [c for c in self.tool_calls if c.status == "denied"]

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "provider": self.provider,
            "model": self.model,
            "stop": self.stop,
            "error": self.error,
            "turns": self.turns,
            "final_text": self.final_text,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
            "tool_calls": [
                {
                    "id": c.id,
                    "name": c.name,
                    "server": c.server,
                    "arguments": dict(c.arguments),
                    "status": c.status,
                    "output": c.output,
                    "reason": c.reason,
                    "duration": round(c.duration, 4),
                    "task_id": c.task_id,
                    "deferred": c.deferred,
                }
                for c in self.tool_calls
            ],
        }


@attrs.frozen(kw_only=True)
class AgentEvent:
    """Progress of a run, for a UI: ``text`` (the model spoke), ``delta`` (a piece of the
    model's text as it arrives, when streaming), ``tool_call`` (about to call),
    ``progress`` (the server reported progress on it), ``tool_running`` (a task outlived
    the grace period: the model goes on, the result follows), ``tool_result`` (a call
    finished: see ``record``), ``stop``."""

    kind: Literal["text", "delta", "tool_call", "progress", "tool_running", "tool_result", "stop"]
    text: str = ""
    record: ToolCallRecord | None = None
    #: For ``progress``: (progress, total, message) as the server sent them.
    progress: tuple[float, float | None, str | None] | None = None


def _tools(host: Host) -> tuple[llm.Tool, ...]:
    """The tools offered to the model: every catalog tool the policy could allow.

    A tool the policy denies on every call (a deny rule, or "ask" in headless mode) is left
    out: offering it only wastes the model's turns and tokens on certain refusals.
    """
    offered = []
    for entry in host.catalog.tools():
        why = host.always_denied(entry)
        if why is not None:
            log.info("not offering %s to the model: %s", entry.name, why)
            continue
        offered.append(
            llm.Tool(
                name=entry.name,
                description=entry.tool.description or entry.tool.title or entry.tool.name,
                input_schema=entry.tool.input_schema or {"type": "object"},
            )
        )
    return tuple(offered)


def _text(result: llm.ToolResultContent) -> str:
    parts = [p.text for p in result.content if isinstance(p, llm.TextContent)]
    others = [p.type for p in result.content if not isinstance(p, llm.TextContent)]
    text = "\n".join(parts)
    if others:
        text += ("\n" if text else "") + "".join(f"[{kind}]" for kind in others)
    return text


async def _call(
    host: Host,
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


#: The built-in tool that loads a server's skill (SEP-2640). Catalog names always hold
#: the ``server__tool`` separator, so this name never shadows a server's tool.
SKILL_TOOL = "load_skill"


def _skill_tool(skills: list[tuple[str, SkillEntry]]) -> llm.Tool:
    """Names and descriptions only (never content): the model asks for what it needs."""
    lines = [f"- {server}/{entry.name}: {entry.description}" for server, entry in skills]
    return llm.Tool(
        name=SKILL_TOOL,
        description=(
            "Load a skill: a server's instructions for a kind of task. Load one only when"
            " the task needs it. Available skills (server/name: description):\n" + "\n".join(lines)
        ),
        input_schema={
            "type": "object",
            "properties": {
                "skill": {
                    "type": "string",
                    "enum": [f"{server}/{entry.name}" for server, entry in skills],
                    "description": "server/name of the skill to load",
                }
            },
            "required": ["skill"],
        },
    )


async def _load_skill(
    host: Host, use: llm.ToolUseContent, record: ToolCallRecord
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
class _Job:
    """One tool use in flight: its result once in, and whether the model may move on."""

    use: llm.ToolUseContent
    record: ToolCallRecord
    result: llm.ToolResultContent | None = None
    #: Set when the result is in, or when the call runs as a task past the grace period.
    settled: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    #: The server's ``model-immediate-response`` text, if it gave one.
    immediate: str | None = None


class _Calls:
    """The run's tool calls: each turn's run at once, the long ones (tasks) in the
    background past ``grace``, their results handed back as they finish.

    **Cancellation:** the calls run in the run's own nursery (:meth:`run_agent`): ending
    the run cancels those still running, and a task's server gets ``tasks/cancel``.
    """

    def __init__(
        self,
        host: Host,
        nursery: trio.Nursery,
        *,
        builtin: bool,
        grace: float | None,
        emit: Callable[[AgentEvent], None],
    ) -> None:
        self._host = host
        self._nursery = nursery
        self._builtin = builtin
        self._grace = grace
        self._emit = emit
        #: Deferred calls whose results the model has not had yet.
        self.pending: list[_Job] = []
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
        jobs = [_Job(use=use, record=call) for use, call in calls]
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

    def finished(self) -> list[_Job]:
        """The deferred calls that have finished since last asked (removed from pending)."""
        done = [job for job in self.pending if job.result is not None]
        self.pending = [job for job in self.pending if job.result is None]
        return done

    async def wait_any(self) -> None:
        """Wait until a deferred call has finished (each ends by its task's own timeout)."""
        while not any(job.result is not None for job in self.pending):
            self._changed = trio.Event()
            await self._changed.wait()

    async def _run(self, job: _Job) -> None:
        use, record = job.use, job.record

        async def on_task(created: CreateTaskResult) -> None:
            record.task_id = created.task.task_id
            text = (created.meta or {}).get(MODEL_IMMEDIATE_RESPONSE)
            if isinstance(text, str) and text.strip():
                job.immediate = text[:_IMMEDIATE_MAX]
            if self._grace is not None:
                self._nursery.start_soon(self._settle_after_grace, job, self._grace)

        if use.name == SKILL_TOOL and self._builtin:
            job.result = await _load_skill(self._host, use, record)
        else:
            job.result = await _call(self._host, use, record, self._emit, on_task=on_task)
        job.done.set()
        job.settled.set()
        self._changed.set()
        self._emit(AgentEvent(kind="tool_result", record=record))

    @staticmethod
    async def _settle_after_grace(job: _Job, grace: float) -> None:
        with trio.move_on_after(grace):
            await job.done.wait()
        job.settled.set()


def _still_running(job: _Job) -> llm.ToolResultContent:
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


def _delivery(jobs: list[_Job]) -> tuple[llm.Content, ...]:
    """Finished tasks' results as user-message content (their tool uses were answered
    already, so a second ``tool_result`` would be refused by the providers' APIs)."""
    blocks: list[llm.Content] = []
    for job in jobs:
        result, record = job.result, job.record
        assert result is not None
        ended = "failed" if result.is_error else "finished"
        blocks.append(
            llm.TextContent(
                text=f"The earlier call {record.name} (id {record.id}, task {record.task_id})"
                f" has {ended}. Its result:"
            )
        )
        blocks.extend(result.content)
        if not result.content:
            structured = result.structured_content
            text = json.dumps(dict(structured)) if structured is not None else "(no content)"
            blocks.append(llm.TextContent(text=text))
    return tuple(blocks)


def _deliver(messages: list[llm.Message], jobs: list[_Job]) -> None:
    """Add finished tasks' results to the conversation: after the tool results of the
    last user message if it is one (Anthropic wants them first; OpenAI sends them as
    ``tool`` messages and the rest as a user message), else as a new user message."""
    blocks = _delivery(jobs)
    if messages and messages[-1].role == "user":
        messages[-1] = llm.Message(role="user", content=(*messages[-1].content, *blocks))
    else:
        messages.append(llm.Message(role="user", content=blocks))


def _error(tool_use_id: str, text: str) -> llm.ToolResultContent:
    return llm.ToolResultContent(
        tool_use_id=tool_use_id, content=(llm.TextContent(text=text),), is_error=True
    )


async def _streamed(
    provider: llm.Provider, request: llm.Request, emit: Callable[[AgentEvent], None]
) -> llm.Result:
    """One model turn through ``provider.stream``: text pieces emitted as they arrive."""
    async with provider.stream(request) as events:
        async for event in events:
            if isinstance(event, llm.TextDelta) and event.text:
                emit(AgentEvent(kind="delta", text=event.text))
            elif isinstance(event, llm.Completed):
                return event.result
    raise ProviderError("the stream ended without a final result", provider=provider.name)


async def run_agent(
    host: Host,
    task: str,
    *,
    provider: str | None = None,
    model: str | None = None,
    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
    prompt_messages: Sequence[llm.Message] = (),
    max_turns: int = 20,
    max_tokens: int = 4096,
    token_budget: int | None = None,
    transcript: Transcript | None = None,
    on_event: Callable[[AgentEvent], None] | None = None,
    stream: bool = False,
    task_grace: float | None = DEFAULT_TASK_GRACE,
) -> Transcript:
    """Run the agent loop for ``task`` over every tool in the host's catalog.

    Args:
        host: the running host (its policy decides every tool call).
        task: what to do; the user's message (after any ``prompt_messages``).
        provider, model: which LLM; default: the configured default
            (``[providers] default``, else the first configured provider).
        prompt_messages: user-picked prompt messages that open the conversation.
        max_turns: model calls at most.
        max_tokens: per model call.
        token_budget: input+output tokens over the whole run; stops when spent.
        transcript: filled in place (so a caller that cancels keeps what happened).
        stream: take the model's answers as a stream and emit each piece of text as a
            ``delta`` event the moment it arrives (a person reads along instead of
            waiting for the whole turn); the ``text`` event is then not emitted, since
            its text was already shown.
        task_grace: seconds a tool running as a task may take before the model is told
            it is still running and goes on (its result follows in a later turn); None
            waits for every result within the turn, as for other tools.

    Returns:
        The transcript; ``stop`` says why it ended.

    Raises:
        ConfigError: no provider is configured.

    **Cancellation:** cancelling the caller's scope cancels the model call or the tool
    calls in flight (servers are told); ``transcript.stop`` is set to "interrupted".
    """
    from providers.config import default_choice

    if provider is None or model is None:
        choice = default_choice(host.providers_config, host.env)
        if choice is None:
            from agenthost.errors import ConfigError

            raise ConfigError(
                "no LLM provider is configured: set ANTHROPIC_API_KEY or OPENAI_API_KEY, or"
                " add a [providers.<name>] section",
                key="providers",
            )
        provider = provider or choice[0]
        model = model or choice[1]
    llm_provider = host.providers.get(provider)
    if llm_provider is None:
        from agenthost.errors import ConfigError

        raise ConfigError(
            f"provider {provider!r} is not configured (have: {', '.join(host.providers)})",
            key="providers",
        )
    record = transcript or Transcript(task=task, provider=provider, model=model)
    record.provider, record.model = provider, model
    record.messages.extend(prompt_messages)
    record.messages.append(llm.Message.user(task))
    record.final_text, record.stop, record.error = "", None, None
    turns = 0  # this run's model calls (a transcript may span several runs, as in chat)

    def emit(event: AgentEvent) -> None:
        if on_event is not None:
            on_event(event)

    try:
        skills = await host.list_skills()
    except AgentHostError as exc:  # skills are an extra: a listing failure ends nothing
        log.warning("skills unavailable: %s", exc)
        skills = []
    builtin = (_skill_tool(skills),) if skills else ()

    async def _loop(calls: _Calls) -> None:
        nonlocal turns
        while True:
            finished = calls.finished()
            if finished:
                _deliver(record.messages, finished)
            if turns >= max_turns:
                record.stop = "max_turns"
                return
            request = llm.Request(
                model=model,
                messages=tuple(record.messages),
                max_tokens=max_tokens,
                system_prompt=system_prompt,
                tools=_tools(host) + builtin,
            )
            try:
                if stream:
                    result = await _streamed(llm_provider, request, emit)
                else:
                    result = await llm_provider.complete(request)
            except ProviderError as exc:
                record.stop, record.error = "provider_error", str(exc)
                return
            turns += 1
            record.turns += 1
            record.input_tokens += result.usage.input_tokens
            record.output_tokens += result.usage.output_tokens
            record.messages.append(llm.Message(role="assistant", content=result.content))
            uses = result.tool_uses
            if result.text and uses and not stream:  # the final answer is the transcript's
                emit(AgentEvent(kind="text", text=result.text))
            if not uses:
                record.final_text = result.text
                if not calls.pending:
                    record.stop = "end_turn"
                    return
                # The model is done for now, tasks are not: wait for the next result.
                if turns >= max_turns:
                    record.stop = "max_turns"
                    return
                if spent():
                    record.stop = "token_budget"
                    return
                if result.text and not stream:  # not the final answer after all
                    emit(AgentEvent(kind="text", text=result.text))
                await calls.wait_any()
                continue
            batch = []
            for use in uses:
                call = ToolCallRecord(id=use.id, name=use.name, arguments=dict(use.input))
                record.tool_calls.append(call)
                emit(AgentEvent(kind="tool_call", record=call))
                batch.append((use, call))
            results = await calls.run_turn(batch)
            record.messages.append(llm.Message(role="user", content=tuple(results)))
            if spent():
                record.final_text = result.text
                record.stop = "token_budget"
                return

    def spent() -> bool:
        used = record.input_tokens + record.output_tokens
        return token_budget is not None and used >= token_budget

    try:
        with collapse_single_group():
            async with trio.open_nursery() as nursery:
                calls = _Calls(host, nursery, builtin=bool(builtin), grace=task_grace, emit=emit)
                try:
                    await _loop(calls)
                finally:
                    # Tasks still pending (turns or budget spent): cancelled, and their
                    # servers told (tasks/cancel).
                    nursery.cancel_scope.cancel()
    except BaseException as exc:
        # Cancelled, or a group of Cancelled (the calls' nursery ends with one per task).
        if isinstance(exc, trio.Cancelled) or (
            isinstance(exc, BaseExceptionGroup) and exc.split(trio.Cancelled)[1] is None
        ):
            record.stop = "interrupted"
        raise
    emit(AgentEvent(kind="stop", text=str(record.stop)))
    return record
