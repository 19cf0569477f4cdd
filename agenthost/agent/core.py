"""The agent loop as a sans-I/O state machine: model replies in, the next step out.

Two drivers run it: the Trio loop (:mod:`agenthost.agent.loop`), which calls the model
and the tools itself, and the durable run (:mod:`agenthost.durable.workflow`), which runs
each model call and each tool call as a Temporal activity. Neither holds a copy of the
rules below; both ask :class:`AgentCore` what to do next.

The rules, one turn at a time:

1. Out of turns (``max_turns`` model calls made): stop, ``max_turns``.
2. Otherwise the next model request holds the whole conversation and the tools offered.
3. The provider failed: stop, ``provider_error`` (the error recorded).
4. The reply asks for tools: each use is recorded and announced, and the driver runs them
   (:class:`CallTools`); their results go back as one user message; the token budget
   spent then stops the run (``token_budget``).
5. The reply asks for no tool: the run ends (``end_turn``) unless a deferred task is still
   pending, in which case the driver waits for it (:class:`AwaitTasks`), out of turns or
   budget permitting.

Nothing here awaits, sleeps, reads a clock or does I/O: so a Temporal workflow, which must
be deterministic, can run it as it is, and a test can drive it step by step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

import agenthost_providers.base as llm
from agenthost.agent.budget import cost_usd
from agenthost.agent.transcript import (
    AgentEvent,
    StopReason,
    ToolCallRecord,
    Transcript,
    TurnUsage,
)

__all__ = ["AgentCore", "AskModel", "AwaitTasks", "CallTools", "Finished", "Step"]


@attrs.frozen(kw_only=True)
class AskModel:
    """Call the model with ``request``; answer with :meth:`AgentCore.model_replied` or
    :meth:`AgentCore.model_failed`."""

    request: llm.Request


@attrs.frozen(kw_only=True)
class CallTools:
    """Run these tool uses (each already in the transcript); answer with
    :meth:`AgentCore.tools_answered`, results in this order."""

    calls: tuple[tuple[llm.ToolUseContent, ToolCallRecord], ...]


@attrs.frozen(kw_only=True)
class AwaitTasks:
    """The model is done for now but a deferred task is not: wait for one to finish, then
    deliver it (:meth:`AgentCore.deliver`) and ask for the next request."""


@attrs.frozen(kw_only=True)
class Finished:
    """The run is over; ``transcript.stop`` says why."""

    stop: StopReason


Step = AskModel | CallTools | AwaitTasks | Finished


@attrs.define(eq=False, kw_only=True)
class AgentCore:
    """One run's conversation state and rules (see the module docstring).

    ``emit`` receives the run's events (``text``, ``tool_call``); it must not block: the
    Trio driver hands them to a UI, the workflow keeps them for whoever follows the run.
    """

    record: Transcript
    model: str
    max_tokens: int
    system_prompt: str | None
    max_turns: int
    token_budget: int | None = None
    #: The driver streams the model's text (as ``delta`` events), so the ``text`` event of
    #: a turn is not emitted again.
    stream: bool = False
    emit: Callable[[AgentEvent], None] | None = None
    #: The model's catalog entry: its prices give each turn's cost (None: unknown).
    model_info: llm.ModelInfo | None = None
    #: This run's model calls (a transcript may span several runs, as in chat).
    turns: int = 0
    _last: llm.Result | None = None

    def begin(self, task: str, prompt_messages: Sequence[llm.Message] = ()) -> None:
        """Open the conversation with the picked prompt messages and the task."""
        record = self.record
        record.messages.extend(prompt_messages)
        record.messages.append(llm.Message.user(task))
        record.final_text, record.stop, record.error = "", None, None

    def _say(self, event: AgentEvent) -> None:
        if self.emit is not None:
            self.emit(event)

    def spent(self) -> bool:
        """Whether the run's token budget is used up."""
        used = self.record.input_tokens + self.record.output_tokens
        return self.token_budget is not None and used >= self.token_budget

    def out_of_turns(self) -> Finished | None:
        """Rule 1, asked before the driver lists the tools for the next request."""
        if self.turns >= self.max_turns:
            return self._finish("max_turns")
        return None

    def request(self, tools: Sequence[llm.Tool]) -> AskModel:
        """Rule 2: the next model request, offering ``tools``."""
        return AskModel(
            request=llm.Request(
                model=self.model,
                messages=tuple(self.record.messages),
                max_tokens=self.max_tokens,
                system_prompt=self.system_prompt,
                tools=tuple(tools),
            )
        )

    def model_failed(self, error: str) -> Finished:
        """Rule 3."""
        self.record.error = error
        return self._finish("provider_error")

    def model_replied(self, result: llm.Result, *, pending: bool = False) -> Step:
        """Rules 4 and 5; ``pending``: a deferred task has not been delivered yet."""
        record = self.record
        self._last = result
        self.turns += 1
        record.turns += 1
        usage = result.usage
        record.input_tokens += usage.input_tokens
        record.output_tokens += usage.output_tokens
        cost = cost_usd(usage.input_tokens, usage.output_tokens, self.model_info)
        record.usage.append(TurnUsage(model=self.model, cost_usd=cost, **attrs.asdict(usage)))
        record.messages.append(llm.Message(role="assistant", content=result.content))
        uses = result.tool_uses
        if not uses:
            record.final_text = result.text
            if not pending:
                return self._finish("end_turn")
            if self.turns >= self.max_turns:
                return self._finish("max_turns")
            if self.spent():
                return self._finish("token_budget")
            if result.text and not self.stream:  # not the final answer after all
                self._say(AgentEvent(kind="text", text=result.text))
            return AwaitTasks()
        if result.text and not self.stream:  # the final answer is the transcript's
            self._say(AgentEvent(kind="text", text=result.text))
        calls = []
        for use in uses:
            call = ToolCallRecord(id=use.id, name=use.name, arguments=dict(use.input))
            record.tool_calls.append(call)
            self._say(AgentEvent(kind="tool_call", record=call))
            calls.append((use, call))
        return CallTools(calls=tuple(calls))

    def tools_answered(self, results: Sequence[llm.Content]) -> Finished | None:
        """The results of the last :class:`CallTools`, in its order; a Finished when the
        token budget is spent."""
        self.record.messages.append(llm.Message(role="user", content=tuple(results)))
        if self.spent():
            self.record.final_text = self._last.text if self._last is not None else ""
            return self._finish("token_budget")
        return None

    def deliver(self, blocks: Sequence[llm.Content]) -> None:
        """Add finished tasks' results to the conversation: after the tool results of the
        last user message if it is one (Anthropic wants them first; OpenAI sends them as
        ``tool`` messages and the rest as a user message), else as a new user message."""
        messages = self.record.messages
        if messages and messages[-1].role == "user":
            messages[-1] = llm.Message(role="user", content=(*messages[-1].content, *blocks))
        else:
            messages.append(llm.Message(role="user", content=tuple(blocks)))

    def _finish(self, stop: StopReason) -> Finished:
        self.record.stop = stop
        return Finished(stop=stop)
