"""The agent loop with the scripted replay provider over real servers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from agenthost.agent.transcript import Transcript
from agenthost.config.model import HostConfig, ServerConfig
from agenthost.host.host import open_host
from agenthost_providers.base import TextContent, ToolResultContent, ToolUseContent
from agenthost_providers.scripted import ScriptedProvider, ScriptedTurn

Command = tuple[str, list[str]]

POLICY = {
    "mode": "headless",
    "rules": [
        {"kind": "tool", "server": "c", "name": "echo", "decision": "allow"},
        {"kind": "tool", "server": "c", "name": "crash", "decision": "deny", "reason": "no"},
    ],
}


def use(call_id: str, name: str, **args: Any) -> ToolUseContent:
    return ToolUseContent(id=call_id, name=name, input=args)


def config(cmd: Command) -> HostConfig:
    return HostConfig(
        servers=[ServerConfig(name="c", transport="stdio", command=cmd[0], args=tuple(cmd[1]))],
        policy=POLICY,
    )


async def test_multi_step_task_with_denial(crashy_cmd: Callable[..., Command]) -> None:
    replay = ScriptedProvider(
        [
            ScriptedTurn(text="Echo first.", tool_calls=(use("t1", "c__echo", message="hi"),)),
            ScriptedTurn(tool_calls=(use("t2", "c__crash"), use("t3", "c__nosuch"))),
            ScriptedTurn(text="Done: echoed hi; crash was denied."),
        ],
        name="replay",
    )
    async with open_host(config(crashy_cmd()), providers={"replay": replay}) as host:
        transcript = await host.run_agent("echo then crash", provider="replay", model="r")
    assert transcript.stop == "end_turn"
    assert transcript.final_text == "Done: echoed hi; crash was denied."
    assert [(c.name, c.status) for c in transcript.tool_calls] == [
        ("c__echo", "ok"),
        ("c__crash", "denied"),
        ("c__nosuch", "error"),
    ]
    assert transcript.tool_calls[0].output == "hi"
    assert "no" in (transcript.tool_calls[1].reason or "")
    # The model was offered only what the policy may allow: crash has a deny rule, hang
    # would be "ask" with nobody to answer (headless). A call it makes anyway is still
    # refused by the policy, and the results (denial included) come back as content.
    second = replay.requests[1]
    assert {t.name for t in second.tools} == {"c__echo"}
    results = [
        block
        for message in replay.requests[2].messages
        for block in message.content
        if isinstance(block, ToolResultContent)
    ]
    assert [r.is_error for r in results] == [False, True, True]
    denial = results[1].content[0]
    assert isinstance(denial, TextContent)
    assert denial.text.startswith("Denied by policy")


async def test_max_turns(crashy_cmd: Callable[..., Command]) -> None:
    loop = [ScriptedTurn(tool_calls=(use(f"t{i}", "c__echo", message=str(i)),)) for i in range(5)]
    replay = ScriptedProvider(loop, name="replay")
    async with open_host(config(crashy_cmd()), providers={"replay": replay}) as host:
        transcript = await host.run_agent("loop", provider="replay", model="r", max_turns=3)
    assert transcript.stop == "max_turns"
    assert transcript.turns == 3


async def test_cancel_interrupts_in_flight_call(crashy_cmd: Callable[..., Command]) -> None:
    policy = {"mode": "headless", "preset": "unsafe-allow-everything"}
    cfg = HostConfig(servers=config(crashy_cmd()).servers, policy=policy)
    replay = ScriptedProvider([ScriptedTurn(tool_calls=(use("t1", "c__hang"),))], name="replay")
    transcript = Transcript(task="hang", provider="replay", model="r")
    async with open_host(cfg, providers={"replay": replay}) as host:
        with trio.move_on_after(0.3) as scope:
            await host.run_agent("hang", provider="replay", model="r", transcript=transcript)
        assert scope.cancelled_caught
        # the session survived the cancelled call
        assert (await host.call_tool("c__echo", {"message": "ok"})).content
    assert transcript.stop == "interrupted"
    assert [c.name for c in transcript.tool_calls] == ["c__hang"]


async def test_user_picked_prompt_opens_the_conversation_and_progress_is_reported(
    sdk_server_cmd: Callable[..., Command], everything_cmd: Callable[[], Command]
) -> None:
    from agenthost.agent.transcript import AgentEvent
    from agenthost.mcp_to_llm import prompt_messages_to_llm

    policy = {"mode": "headless", "preset": "unsafe-allow-everything"}
    sdk, ev = sdk_server_cmd(), everything_cmd()
    cfg = HostConfig(
        servers=[
            ServerConfig(name="sdk", transport="stdio", command=sdk[0], args=tuple(sdk[1])),
            ServerConfig(name="ev", transport="stdio", command=ev[0], args=tuple(ev[1])),
        ],
        policy=policy,
    )
    replay = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=(use("s1", "sdk__slow", seconds=0.05, steps=2),)),
            ScriptedTurn(text="ok"),
        ],
        name="replay",
    )
    events: list[AgentEvent] = []
    async with open_host(cfg, providers={"replay": replay}) as host:
        greet = await host.get_prompt("sdk", "greet", {"name": "Ada", "style": "formal"})
        embedded = await host.get_prompt(
            "ev", "resource-prompt", {"resourceType": "Text", "resourceId": "1"}
        )
        opening = prompt_messages_to_llm([*greet.messages, *embedded.messages])
        transcript = await host.run_agent(
            "continue",
            provider="replay",
            model="r",
            prompt_messages=opening,
            on_event=events.append,
        )
    assert transcript.stop == "end_turn"
    first = replay.requests[0].messages
    texts = [b.text for m in first for b in m.content if isinstance(b, TextContent)]
    assert any("Ada" in t for t in texts)  # the prompt's text
    assert any(t.startswith("[resource demo://resource/dynamic/text/1]") for t in texts)
    assert texts[-1] == "continue"
    progress = [e.progress for e in events if e.kind == "progress"]
    assert [p[0] for p in progress if p] == [1, 2]


async def test_runs_sharing_a_transcript_each_get_their_own_turns(
    crashy_cmd: Callable[..., Command],
) -> None:
    """A chat keeps one transcript; max_turns limits each run, not the whole chat."""
    replay = ScriptedProvider(
        [ScriptedTurn(text="first"), ScriptedTurn(text="second")], name="replay"
    )
    transcript = Transcript(task="chat", provider="replay", model="r")
    async with open_host(config(crashy_cmd()), providers={"replay": replay}) as host:
        for expected in ("first", "second"):
            await host.run_agent(
                "hi", provider="replay", model="r", max_turns=1, transcript=transcript
            )
            assert transcript.stop == "end_turn"
            assert transcript.final_text == expected
    assert transcript.turns == 2


async def test_one_turns_tool_calls_run_at_once(sdk_server_cmd: Callable[..., Command]) -> None:
    # Two slow tools in one turn: the turn waits for the slower, not for the sum, and the
    # results reach the model in the order it asked for them.
    replay = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=(
                    use("a", "sdk__slow", seconds=1.0, steps=2),
                    use("b", "sdk__slow", seconds=1.2, steps=2),
                )
            ),
            ScriptedTurn(text="Both done."),
        ],
        name="replay",
    )
    cmd = sdk_server_cmd()
    config = HostConfig(
        servers=[ServerConfig(name="sdk", transport="stdio", command=cmd[0], args=tuple(cmd[1]))],
        policy={"mode": "headless", "rules": [{"kind": "tool", "decision": "allow"}]},
    )
    async with open_host(config, providers={"replay": replay}) as host:
        started = trio.current_time()
        transcript = await host.run_agent("two slow things", provider="replay", model="r")
        elapsed = trio.current_time() - started
    assert [(c.id, c.status) for c in transcript.tool_calls] == [("a", "ok"), ("b", "ok")]
    durations = [c.duration for c in transcript.tool_calls]
    assert all(d >= 1.0 for d in durations), durations
    assert elapsed < sum(durations) - 0.5, (elapsed, durations)
    results = [
        block.tool_use_id
        for message in replay.requests[1].messages
        for block in message.content
        if isinstance(block, ToolResultContent)
    ]
    assert results == ["a", "b"]
