"""The agent: an LLM loop over every server's tools, each call through consent.

One turn: the model answers; if it asks for tools, each call goes through the host (so
through the policy, then the owning session) and its result, or the reason it failed or
was denied, goes back to the model as a tool result: a model that is told "denied by
policy" or "file not found" can change course, which ending the run would not allow.

The loop stops at the model's end of turn, at ``max_turns``, when the token budget is
spent, or when cancelled (Ctrl-C in the CLI): in-flight tool calls are cancelled through
the session, which tells their servers (``notifications/cancelled``). The
:class:`Transcript` is filled in as the run goes, so an interrupted run still has one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

import providers.base as llm
from agenthost._util import collapse_single_group
from agenthost.errors import AgentHostError, ConsentDenied, JSONRPCError, NotFound, ProviderError
from agenthost.llmcontent import tool_result_to_llm
from agenthost.skills import SkillEntry

if TYPE_CHECKING:
    from agenthost.host import Host

__all__ = ["AgentEvent", "StopReason", "ToolCallRecord", "Transcript", "run_agent"]

log = logging.getLogger("agenthost.agent")

StopReason = Literal["end_turn", "max_turns", "token_budget", "interrupted", "provider_error"]

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
    #: "ok", "error" (the tool said isError or failed), or "denied" (consent).
    status: Literal["ok", "error", "denied", "cancelled"] = "ok"
    #: The text the model was given back.
    output: str = ""
    reason: str | None = None
    duration: float = 0.0


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
                }
                for c in self.tool_calls
            ],
        }


@attrs.frozen(kw_only=True)
class AgentEvent:
    """Progress of a run, for a UI: ``text`` (the model spoke), ``delta`` (a piece of the
    model's text as it arrives, when streaming), ``tool_call`` (about to call),
    ``progress`` (the server reported progress on it), ``tool_result`` (a call finished:
    see ``record``), ``stop``."""

    kind: Literal["text", "delta", "tool_call", "progress", "tool_result", "stop"]
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
) -> llm.ToolResultContent:
    """Run one tool call; every failure becomes a tool result the model can read."""

    async def progress(value: float, total: float | None, message: str | None) -> None:
        emit(AgentEvent(kind="progress", record=record, progress=(value, total, message)))

    async def run() -> llm.ToolResultContent:
        entry = host.resolve_tool(use.name)
        record.server = entry.server
        result = await host.call_tool(use.name, dict(use.input), progress=progress)
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


async def _run_calls(
    host: Host,
    calls: list[tuple[llm.ToolUseContent, ToolCallRecord]],
    *,
    builtin: bool,
    emit: Callable[[AgentEvent], None],
) -> list[llm.Content]:
    """Run one turn's tool calls at once; their results in the order the model asked.

    Why at once: a model that asks for three slow tools (three tasks, say) should wait for
    the slowest, not for the sum. Each ``tool_result`` event fires as its call finishes.
    Consent prompts stay one at a time (the prompters serialise their questions).

    **Cancellation:** cancelling the run cancels every call (each records "cancelled").
    """
    results: list[llm.Content | None] = [None] * len(calls)

    async def one(index: int, use: llm.ToolUseContent, call: ToolCallRecord) -> None:
        if use.name == SKILL_TOOL and builtin:
            results[index] = await _load_skill(host, use, call)
        else:
            results[index] = await _call(host, use, call, emit)
        emit(AgentEvent(kind="tool_result", record=call))

    if len(calls) == 1:
        await one(0, *calls[0])
    else:
        with collapse_single_group():
            async with trio.open_nursery() as nursery:
                for index, (use, call) in enumerate(calls):
                    nursery.start_soon(one, index, use, call)
    return [result for result in results if result is not None]


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

    try:
        while True:
            if turns >= max_turns:
                record.stop = "max_turns"
                break
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
                break
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
                record.stop = "end_turn"
                break
            calls = []
            for use in uses:
                call = ToolCallRecord(id=use.id, name=use.name, arguments=dict(use.input))
                record.tool_calls.append(call)
                emit(AgentEvent(kind="tool_call", record=call))
                calls.append((use, call))
            results = await _run_calls(host, calls, builtin=bool(builtin), emit=emit)
            record.messages.append(llm.Message(role="user", content=tuple(results)))
            used = record.input_tokens + record.output_tokens
            if token_budget is not None and used >= token_budget:
                record.final_text = result.text
                record.stop = "token_budget"
                break
    except trio.Cancelled:
        record.stop = "interrupted"
        raise
    emit(AgentEvent(kind="stop", text=str(record.stop)))
    return record
