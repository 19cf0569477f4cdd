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

import functools
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio

import agenthost_providers.base as llm
from agenthost._util import collapse_single_group
from agenthost.agent.budget import (
    DEFAULT_CONTEXT_WINDOW,
    default_max_result_tokens,
    for_model,
)
from agenthost.agent.calls import SKILL_TOOL, Calls, Job
from agenthost.agent.core import AgentCore, AwaitTasks, CallTools, Finished
from agenthost.agent.tool_host import EntryT, ToolHost
from agenthost.agent.tool_search import ToolSearch, ToolSearchSetting, search_wanted
from agenthost.agent.transcript import AgentEvent, Transcript
from agenthost.errors import AgentHostError, ProviderError
from agenthost.skills import SkillEntry

__all__ = ["DEFAULT_SYSTEM_PROMPT", "DEFAULT_TASK_GRACE", "run_agent"]

log = logging.getLogger("agenthost.agent")

#: Seconds a task-run tool has to finish before the model is told it is still running.
DEFAULT_TASK_GRACE = 2.0

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent working through tools provided by MCP servers. Use the tools to do the"
    " task; when a tool fails or is denied, adapt instead of repeating the same call. When"
    " done, answer with a short summary of what you did."
)


def _tools(host: ToolHost[EntryT]) -> tuple[llm.Tool, ...]:
    """The tools offered to the model: every catalog tool the policy could allow.

    A tool the policy denies on every call (a deny rule, or "ask" in headless mode) is left
    out: offering it only wastes the model's turns and tokens on certain refusals.
    """
    offered = []
    for entry in host.tools():
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


def _delivery(jobs: list[Job]) -> tuple[llm.Content, ...]:
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
        blocks.extend(p for p in result.content if not isinstance(p, llm.ToolReferenceContent))
        if not result.content:
            structured = result.structured_content
            text = json.dumps(dict(structured)) if structured is not None else "(no content)"
            blocks.append(llm.TextContent(text=text))
    return tuple(blocks)


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


@attrs.define(eq=False)
class _Run:
    """One run: the Trio driver of :class:`~agenthost.agent.core.AgentCore`, which holds
    the loop's rules; this class does the I/O they ask for."""

    host: ToolHost[Any]
    provider: llm.Provider
    core: AgentCore
    on_event: Callable[[AgentEvent], None] | None
    stream: bool
    builtin: tuple[llm.Tool, ...]
    #: The model's catalog entry (prices, context window); None when unknown.
    model_info: llm.ModelInfo | None = None
    tool_search: ToolSearchSetting = "auto"
    #: Whether the last request offered ``search_tools`` (so a call of it is answered).
    searching: bool = False

    def emit(self, event: AgentEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    async def loop(self, calls: Calls) -> None:
        """Ask the core for the next step and take it, until it says the run is over."""
        core = self.core
        while True:
            finished = calls.finished()
            if finished:
                core.deliver(_delivery(finished))
            if core.out_of_turns() is not None:
                return
            ask = core.request(self._offered() + self.builtin)
            try:
                if self.stream:
                    result = await _streamed(self.provider, ask.request, self.emit)
                else:
                    result = await self.provider.complete(ask.request)
            except ProviderError as exc:
                core.model_failed(str(exc))
                return
            step = core.model_replied(result, pending=bool(calls.pending))
            if isinstance(step, Finished):
                return
            if isinstance(step, AwaitTasks):
                await calls.wait_any()
                continue
            assert isinstance(step, CallTools)
            results = await calls.run_turn(list(step.calls))
            if core.tools_answered(results) is not None:
                return

    def _offered(self) -> tuple[llm.Tool, ...]:
        """The server tools of the next request: all of them, or (tool search on) the
        loaded ones and ``search_tools`` (see :mod:`agenthost.agent.tool_search`)."""
        tools = _tools(self.host)
        window = self.model_info.context_window if self.model_info else DEFAULT_CONTEXT_WINDOW
        self.searching = search_wanted(self.tool_search, tools, window)
        if not self.searching:
            return tools
        native = getattr(self.provider, "native_tool_search", False) is True
        return ToolSearch(loaded=self.core.record.loaded_tools, native=native).offer(tools)

    def search(self, use: llm.ToolUseContent) -> llm.ToolResultContent | None:
        """Answer a ``search_tools`` call; None when search was not offered (then the
        name is looked up like any other tool's, and not found)."""
        if not self.searching:
            return None
        native = getattr(self.provider, "native_tool_search", False) is True
        titles = {e.name: e.tool.title for e in self.host.tools() if e.tool.title}
        search = ToolSearch(loaded=self.core.record.loaded_tools, native=native)
        return search.run(use, _tools(self.host), titles)


async def run_agent(
    host: ToolHost[EntryT],
    task: str,
    *,
    provider: llm.Provider,
    model: str,
    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
    prompt_messages: Sequence[llm.Message] = (),
    max_turns: int = 20,
    max_tokens: int = 4096,
    token_budget: int | None = None,
    transcript: Transcript | None = None,
    on_event: Callable[[AgentEvent], None] | None = None,
    stream: bool = False,
    task_grace: float | None = DEFAULT_TASK_GRACE,
    model_info: llm.ModelInfo | None = None,
    tool_search: ToolSearchSetting = "auto",
    max_result_tokens: int | None = None,
) -> Transcript:
    """Run the agent loop for ``task`` over every tool ``host`` offers.

    Most callers want :meth:`agenthost.host.Host.run_agent`, which picks the provider from
    the host's configuration; this function takes the provider itself, so the agent needs
    no configuration and no host, only a :class:`~agenthost.agent.tool_host.ToolHost`.

    Args:
        host: the tools (its policy decides every tool call).
        task: what to do; the user's message (after any ``prompt_messages``).
        provider, model: which LLM (the transcript records ``provider.name``).
        prompt_messages: user-picked prompt messages that open the conversation.
        max_turns: model calls at most.
        max_tokens: per model call.
        token_budget: input+output tokens over the whole run; stops when spent.
        transcript: filled in place (so a caller that cancels keeps what happened).
        stream: take the model's answers as a stream and emit each piece of text as a
            ``delta`` event the moment it arrives (a person reads along instead of
            waiting for the whole turn); the ``text`` event is then not emitted, since
            its text was already shown.
        model_info: the model's catalog entry: its prices give each turn's cost, its
            context window sizes tool search's "auto" and the default result limit.
        tool_search: True, False or "auto" (:mod:`agenthost.agent.tool_search`).
        max_result_tokens: a tool result longer than this is cut for the model, with a
            note (the transcript keeps it whole); None sizes it to the model.
        task_grace: seconds a tool running as a task may take before the model is told
            it is still running and goes on (its result follows in a later turn); None
            waits for every result within the turn, as for other tools.

    Returns:
        The transcript; ``stop`` says why it ended.

    **Cancellation:** cancelling the caller's scope cancels the model call or the tool
    calls in flight (servers are told); ``transcript.stop`` is set to "interrupted".
    """
    record = transcript or Transcript(task=task, provider=provider.name, model=model)
    record.provider, record.model = provider.name, model
    core = AgentCore(
        record=record,
        model=model,
        max_tokens=max_tokens,
        system_prompt=system_prompt,
        max_turns=max_turns,
        token_budget=token_budget,
        stream=stream,
        emit=on_event,
        model_info=model_info,
    )
    core.begin(task, prompt_messages)
    try:
        skills = await host.list_skills()
    except AgentHostError as exc:  # skills are an extra: a listing failure ends nothing
        log.warning("skills unavailable: %s", exc)
        skills = []
    run = _Run(
        host=host,
        provider=provider,
        core=core,
        on_event=on_event,
        stream=stream,
        builtin=(_skill_tool(skills),) if skills else (),
        model_info=model_info,
        tool_search=tool_search,
    )
    if max_result_tokens is None:
        window = model_info.context_window if model_info else DEFAULT_CONTEXT_WINDOW
        max_result_tokens = default_max_result_tokens(window)
    await _run_calls(run, task_grace, max_result_tokens)
    run.emit(AgentEvent(kind="stop", text=str(record.stop)))
    return record


async def _run_calls(run: _Run, task_grace: float | None, max_result_tokens: int) -> None:
    """The loop inside the nursery its tool calls run in; an interruption is recorded."""
    try:
        with collapse_single_group():
            async with trio.open_nursery() as nursery:
                calls = Calls(
                    run.host,
                    nursery,
                    builtin=bool(run.builtin),
                    grace=task_grace,
                    emit=run.emit,
                    search=run.search,
                    for_model=functools.partial(
                        for_model, max_tokens=max_result_tokens, info=run.model_info
                    ),
                )
                try:
                    await run.loop(calls)
                finally:
                    # Tasks still pending (turns or budget spent): cancelled, and their
                    # servers told (tasks/cancel).
                    nursery.cancel_scope.cancel()
    except BaseException as exc:
        # Cancelled, or a group of Cancelled (the calls' nursery ends with one per task).
        if isinstance(exc, trio.Cancelled) or (
            isinstance(exc, BaseExceptionGroup) and exc.split(trio.Cancelled)[1] is None
        ):
            run.core.record.stop = "interrupted"
        raise
