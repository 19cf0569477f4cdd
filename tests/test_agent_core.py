"""The sans-I/O agent core driven step by step, with no model, host or event loop."""

from __future__ import annotations

import agenthost_providers.base as llm
from agenthost.agent.core import AgentCore, AwaitTasks, CallTools, Finished
from agenthost.agent.transcript import AgentEvent, Transcript


def _core(**kw: object) -> tuple[AgentCore, list[AgentEvent]]:
    events: list[AgentEvent] = []
    core = AgentCore(
        record=Transcript(task="t", provider="p", model="m"),
        model="m",
        max_tokens=100,
        system_prompt=None,
        max_turns=3,
        emit=events.append,
        **kw,  # type: ignore[arg-type]
    )
    core.begin("do it")
    return core, events


def _reply(*content: llm.Content, tokens: int = 0) -> llm.Result:
    return llm.Result(
        content=content, model="m", stop_reason=None, usage=llm.Usage(output_tokens=tokens)
    )


def test_tool_turn_then_answer() -> None:
    core, events = _core()
    assert core.out_of_turns() is None
    ask = core.request([llm.Tool(name="s__t")])
    assert ask.request.messages[-1].content == (llm.TextContent(text="do it"),)
    use = llm.ToolUseContent(id="c1", name="s__t", input={"a": 1})
    step = core.model_replied(_reply(llm.TextContent(text="looking"), use))
    assert isinstance(step, CallTools)
    assert [record.id for _, record in step.calls] == ["c1"]
    assert [e.kind for e in events] == ["text", "tool_call"]
    result = llm.ToolResultContent(tool_use_id="c1", content=(llm.TextContent(text="ok"),))
    assert core.tools_answered([result]) is None
    assert core.request([]).request.messages[-1].content == (result,)
    assert core.model_replied(_reply(llm.TextContent(text="done"))) == Finished(stop="end_turn")
    assert core.record.final_text == "done"
    assert core.record.turns == 2


def test_out_of_turns_and_budget_and_failure() -> None:
    core, _ = _core(token_budget=5)
    use = llm.ToolUseContent(id="c1", name="x", input={})
    assert isinstance(
        core.model_replied(_reply(llm.TextContent(text="a"), use, tokens=9)), CallTools
    )
    assert core.tools_answered([]) == Finished(stop="token_budget")
    assert core.record.final_text == "a"

    core, _ = _core()
    core.turns = 3
    assert core.out_of_turns() == Finished(stop="max_turns")

    core, _ = _core()
    assert core.model_failed("boom") == Finished(stop="provider_error")
    assert core.record.error == "boom"


def test_pending_task_waits_then_delivery_joins_the_last_user_message() -> None:
    core, events = _core()
    step = core.model_replied(_reply(llm.TextContent(text="waiting")), pending=True)
    assert isinstance(step, AwaitTasks)
    assert events[-1].kind == "text"
    core.deliver([llm.TextContent(text="task done")])
    assert core.record.messages[-1] == llm.Message.user("task done")
    core.deliver([llm.TextContent(text="another")])
    assert core.record.messages[-1].content[-1] == llm.TextContent(text="another")
    assert len(core.record.messages) == 3
