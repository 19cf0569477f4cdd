"""The agent keeps talking while long tools run (issue 16 item 2).

server-everything's ``simulate-research-query`` runs as a task for about 4 s. With a short
grace period the model gets an immediate "still running" result, goes on (other tools,
text), and receives the real report in a later turn as a user message; the run ends only
when no task is pending, or at ``max_turns`` / the token budget, which cancel the pending
tasks (``tasks/cancel``; the server then reports them ``cancelled``).

Models: the scripted replay, and the Anthropic and OpenAI adapters over their real SDKs
with only the HTTP API mocked (payloads shaped like the real APIs).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from agenthost.agent.transcript import AgentEvent
from agenthost.config.model import HostConfig, ServerConfig
from agenthost.host.host import open_host
from agenthost.tool_tasks import list_tasks
from agenthost_providers.base import Message, TextContent, ToolResultContent, ToolUseContent
from agenthost_providers.config import build_provider, parse_providers
from agenthost_providers.scripted import ScriptedProvider, ScriptedTurn
from tests.conftest import node_bin
from tests.forkserver import peer_python
from tests.helpers import ALLOW_ALL
from tests.providers.providers_helpers import anthropic_message, openai_completion

Command = tuple[str, list[str]]
RESEARCH = "ev__simulate-research-query"
GRACE = 0.5


def use(call_id: str, name: str, **args: Any) -> ToolUseContent:
    return ToolUseContent(id=call_id, name=name, input=args)


def host_config(everything: Command) -> HostConfig:
    return HostConfig(
        servers=[
            ServerConfig(
                name="ev", transport="stdio", command=everything[0], args=tuple(everything[1])
            )
        ],
        policy=ALLOW_ALL,
    )


def texts(message: Message) -> list[str]:
    return [block.text for block in message.content if isinstance(block, TextContent)]


@pytest.mark.timeout(90)
async def test_model_goes_on_while_a_task_runs(everything_cmd: Callable[[], Command]) -> None:
    replay = ScriptedProvider(
        [
            ScriptedTurn(
                text="Starting the research.",
                tool_calls=(
                    use("r1", RESEARCH, topic="tides"),
                    use("e1", "ev__echo", message="hi"),
                ),
            ),
            ScriptedTurn(tool_calls=(use("s1", "ev__get-sum", a=2, b=3),)),
            ScriptedTurn(text="I will wait for the report."),
            ScriptedTurn(text="The report is in: tides."),
        ],
        name="replay",
    )
    events: list[AgentEvent] = []
    async with open_host(host_config(everything_cmd()), providers={"replay": replay}) as host:
        started = trio.current_time()
        with trio.fail_after(60):
            transcript = await host.run_agent(
                "research tides",
                provider="replay",
                model="r",
                task_grace=GRACE,
                on_event=events.append,
            )
        elapsed = trio.current_time() - started
    assert transcript.stop == "end_turn"
    assert transcript.final_text == "The report is in: tides."
    assert transcript.turns == 4
    research, echo, total = transcript.tool_calls
    assert (research.status, research.deferred) == ("ok", True)
    assert research.task_id
    assert "Research Report: tides" in research.output
    assert (echo.status, echo.deferred, echo.task_id) == ("ok", False, None)
    assert total.output == "The sum of 2 and 3 is 5."
    # Turn 2 was asked while the research ran: it had the immediate result and the echo.
    second = replay.requests[1].messages[-1]
    [immediate, echoed] = second.content
    assert isinstance(immediate, ToolResultContent) and isinstance(echoed, ToolResultContent)
    assert immediate.tool_use_id == "r1" and not immediate.is_error
    assert "still running" in immediate.content[0].text  # type: ignore[union-attr]
    assert "later message" in immediate.content[1].text  # type: ignore[union-attr]
    assert echoed.tool_use_id == "e1"
    assert not any("Research Report" in t for m in replay.requests[2].messages for t in texts(m))
    # The report reached the model once, as user text after the model's last word.
    last = replay.requests[3].messages
    assert last[-2].role == "assistant" and texts(last[-2]) == ["I will wait for the report."]
    assert last[-1].role == "user"
    header, report = texts(last[-1])
    assert header.startswith(f"The earlier call {RESEARCH} (id r1, task {research.task_id})")
    assert "Research Report: tides" in report
    delivered = [t for m in last for t in texts(m) if "Research Report" in t]
    assert len(delivered) == 1
    kinds = [(e.kind, e.record.name if e.record else None) for e in events]
    assert kinds.index(("tool_running", RESEARCH)) < kinds.index(("tool_result", RESEARCH))
    assert elapsed < 20


@pytest.mark.timeout(90)
async def test_several_tasks_at_once_each_delivered_once(
    everything_cmd: Callable[[], Command],
) -> None:
    waits = [ScriptedTurn(text="Noted.") for _ in range(3)]
    replay = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=(
                    use("a", RESEARCH, topic="tides"),
                    use("b", RESEARCH, topic="comets"),
                )
            ),
            *waits,
        ],
        name="replay",
    )
    async with open_host(host_config(everything_cmd()), providers={"replay": replay}) as host:
        started = trio.current_time()
        with trio.fail_after(60):
            transcript = await host.run_agent(
                "research", provider="replay", model="r", task_grace=GRACE
            )
        elapsed = trio.current_time() - started
    assert transcript.stop == "end_turn"
    assert 3 <= transcript.turns <= 4
    assert [c.status for c in transcript.tool_calls] == ["ok", "ok"]
    assert all(c.deferred for c in transcript.tool_calls)
    final = replay.requests[-1].messages
    for topic in ("tides", "comets"):
        hits = [t for m in final for t in texts(m) if f"Research Report: {topic}" in t]
        assert len(hits) == 1, topic
    # Concurrent: one task's time (~4 s), not two.
    assert elapsed < 7.5, elapsed


@pytest.mark.timeout(90)
async def test_max_turns_cancels_pending_tasks(everything_cmd: Callable[[], Command]) -> None:
    replay = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=(use("r1", RESEARCH, topic="tides"),)),
            ScriptedTurn(text="Still waiting."),
        ],
        name="replay",
    )
    async with open_host(host_config(everything_cmd()), providers={"replay": replay}) as host:
        with trio.fail_after(30):
            transcript = await host.run_agent(
                "research", provider="replay", model="r", task_grace=GRACE, max_turns=2
            )
        assert transcript.stop == "max_turns"
        [call] = transcript.tool_calls
        assert call.status == "cancelled"
        assert call.task_id is not None
        # tasks/cancel reached the server: it holds the task as cancelled.
        states = {task.task_id: task.status for task in await list_tasks(host.session("ev"))}
        assert states[call.task_id] == "cancelled"


@pytest.mark.timeout(90)
async def test_no_grace_waits_within_the_turn(everything_cmd: Callable[[], Command]) -> None:
    replay = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=(use("r1", RESEARCH, topic="tides"),)),
            ScriptedTurn(text="Done."),
        ],
        name="replay",
    )
    async with open_host(host_config(everything_cmd()), providers={"replay": replay}) as host:
        with trio.fail_after(30):
            transcript = await host.run_agent(
                "research", provider="replay", model="r", task_grace=None
            )
    [call] = transcript.tool_calls
    assert (call.status, call.deferred) == ("ok", False)
    [result] = replay.requests[1].messages[-1].content
    assert isinstance(result, ToolResultContent)
    assert "Research Report: tides" in result.content[0].text  # type: ignore[union-attr]


class ScriptedAPI:
    """A MockTransport handler answering from a list of real-shaped responses, in order."""

    def __init__(self, *responses: httpx2.Response) -> None:
        self.responses = list(responses)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        return self.responses.pop(0)


@pytest.mark.timeout(90)
async def test_anthropic_api_gets_the_deferred_result(
    everything_cmd: Callable[[], Command],
) -> None:
    api = ScriptedAPI(
        anthropic_message(
            [
                {"type": "text", "text": "Let me research that."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A09q90qw90lq917835lq9",
                    "name": RESEARCH,
                    "input": {"topic": "tides"},
                },
            ],
            stop_reason="tool_use",
        ),
        anthropic_message([{"type": "text", "text": "The research is running."}]),
        anthropic_message([{"type": "text", "text": "Tides: see the report."}]),
    )
    settings = parse_providers({"anthropic": {}}, source="<test>").get("anthropic")
    provider = build_provider(
        settings,
        {"ANTHROPIC_API_KEY": "test-key"},
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api)),
    )
    try:
        async with open_host(
            host_config(everything_cmd()), providers={"anthropic": provider}
        ) as host:
            with trio.fail_after(60):
                transcript = await host.run_agent(
                    "research tides",
                    provider="anthropic",
                    model="claude-sonnet-5-5",
                    task_grace=GRACE,
                )
    finally:
        await provider.aclose()
    assert transcript.stop == "end_turn"
    assert transcript.final_text == "Tides: see the report."
    assert transcript.input_tokens == 36
    _, second, third = api.bodies
    for body in api.bodies:
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"]
    [answer] = second["messages"][-1]["content"]
    assert answer["type"] == "tool_result"
    assert answer["tool_use_id"] == "toolu_01A09q90qw90lq917835lq9"
    assert "still running" in answer["content"][0]["text"]
    last = third["messages"][-1]["content"]
    assert [block["type"] for block in last] == ["text", "text"]
    assert "has finished" in last[0]["text"]
    assert "Research Report: tides" in last[1]["text"]


@pytest.mark.timeout(90)
async def test_openai_api_gets_the_deferred_result(everything_cmd: Callable[[], Command]) -> None:
    call = {
        "id": "call_abc123",
        "type": "function",
        "function": {"name": RESEARCH, "arguments": json.dumps({"topic": "tides"})},
    }
    api = ScriptedAPI(
        openai_completion({"content": None, "tool_calls": [call]}, finish_reason="tool_calls"),
        # A model that asks for echo while the research runs: the result arrives with it.
        openai_completion(
            {
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_def456",
                        "type": "function",
                        "function": {
                            "name": "ev__echo",
                            "arguments": json.dumps({"message": "meanwhile"}),
                        },
                    }
                ],
            },
            finish_reason="tool_calls",
        ),
        openai_completion({"content": "Waiting for the report."}),
        openai_completion({"content": "Tides: see the report."}),
    )
    settings = parse_providers({"openai": {}}, source="<test>").get("openai")
    provider = build_provider(
        settings,
        {"OPENAI_API_KEY": "test-key"},
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api)),
    )
    try:
        async with open_host(host_config(everything_cmd()), providers={"openai": provider}) as host:
            with trio.fail_after(60):
                transcript = await host.run_agent(
                    "research tides",
                    provider="openai",
                    model="gpt-6.2-sol",
                    task_grace=GRACE,
                )
    finally:
        await provider.aclose()
    assert transcript.stop == "end_turn"
    assert transcript.final_text == "Tides: see the report."
    bodies = api.bodies
    second = bodies[1]["messages"]
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": "call_abc123",
        "content": second[-1]["content"],
    }
    assert "still running" in second[-1]["content"]
    # Every tool message follows the assistant message that asked for it.
    for body in bodies:
        messages = body["messages"]
        for index, message in enumerate(messages):
            if message["role"] == "tool":
                before = messages[index - 1]
                assert before["role"] == "tool" or before.get("tool_calls"), messages
    final = bodies[-1]["messages"]
    delivered = [
        part["text"]
        for message in final
        if message["role"] == "user" and isinstance(message["content"], list)
        for part in message["content"]
        if "Research Report: tides" in part.get("text", "")
    ]
    assert len(delivered) == 1


@pytest.mark.timeout(60)
async def test_server_immediate_response_is_what_the_model_reads() -> None:
    """A server that sends ``io.modelcontextprotocol/model-immediate-response`` with its
    ``CreateTaskResult``: the model's immediate tool result is that text (our note that
    the result follows comes after it)."""
    peer = Path(__file__).parent / "peers" / "tasks_peer.mjs"
    config = HostConfig(
        servers=[ServerConfig(name="im", transport="stdio", command=node_bin(), args=(str(peer),))],
        policy=ALLOW_ALL,
    )
    replay = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=(use("s1", "im__survey", topic="tides", seconds=1.5),)),
            ScriptedTurn(text="Waiting."),
            ScriptedTurn(text="Surveyed."),
        ],
        name="replay",
    )
    async with open_host(config, providers={"replay": replay}) as host:
        with trio.fail_after(30):
            transcript = await host.run_agent(
                "survey tides", provider="replay", model="r", task_grace=0.3
            )
    assert transcript.stop == "end_turn"
    [immediate] = replay.requests[1].messages[-1].content
    assert isinstance(immediate, ToolResultContent)
    first, note = immediate.content
    assert first == TextContent(text="Survey of tides started; it takes about 1.5 seconds.")
    assert isinstance(note, TextContent) and "later message" in note.text
    assert texts(replay.requests[2].messages[-1])[1] == "Survey of tides: 3 sources agree."


@pytest.mark.timeout(90)
async def test_token_budget_cancels_pending_tasks(everything_cmd: Callable[[], Command]) -> None:
    api = ScriptedAPI(
        anthropic_message(
            [{"type": "tool_use", "id": "toolu_1", "name": RESEARCH, "input": {"topic": "x"}}],
            stop_reason="tool_use",
        ),
        anthropic_message([{"type": "text", "text": "Waiting for it."}]),
    )
    settings = parse_providers({"anthropic": {}}, source="<test>").get("anthropic")
    provider = build_provider(
        settings,
        {"ANTHROPIC_API_KEY": "test-key"},
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api)),
    )
    try:
        async with open_host(
            host_config(everything_cmd()), providers={"anthropic": provider}
        ) as host:
            with trio.fail_after(30):
                transcript = await host.run_agent(
                    "research",
                    provider="anthropic",
                    model="claude-sonnet-5-5",
                    task_grace=GRACE,
                    token_budget=30,  # each answer costs 12 + 6
                )
            assert transcript.stop == "token_budget"
            [call] = transcript.tool_calls
            assert call.status == "cancelled" and call.task_id is not None
            states = {t.task_id: t.status for t in await list_tasks(host.session("ev"))}
            assert states[call.task_id] == "cancelled"
    finally:
        await provider.aclose()
    assert len(api.bodies) == 2


@pytest.mark.timeout(120)
def test_cli_run_shows_the_task_running_and_its_late_result(
    tmp_path: Path, everything_cmd: Callable[[], Command]
) -> None:
    import os
    import subprocess

    command, args = everything_cmd()
    (tmp_path / "script.toml").write_text(
        f"""
[[turns]]
[[turns.tool_calls]]
id = "t1"
name = "{RESEARCH}"
input = {{ topic = "comets" }}

[[turns]]
text = "Waiting for the report."

[[turns]]
text = "Comets: done."
"""
    )
    config = tmp_path / "agenthost.toml"
    config.write_text(
        f"""
[servers.ev]
command = {json.dumps(command)}
args = {json.dumps(args)}

[providers.replay]
kind = "scripted"
script = "script.toml"

[policy]
mode = "headless"
preset = "unsafe-allow-everything"
"""
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")

    def agenthost(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [peer_python(), "-m", "agenthost", "--config", str(config), *argv],
            capture_output=True,
            text=True,
            timeout=90,
            env=env,
            cwd=tmp_path,
        )

    ran = agenthost("run", "research comets", "--task-grace", "0.5")
    assert ran.returncode == 0, ran.stderr
    # The model's words stream to stdout; tool lines go to stderr, in order.
    assert ran.stdout.startswith("Waiting for the report.\nComets: done.\n"), ran.stdout
    assert "still running (task " in ran.stderr
    assert ran.stderr.index("still running") < ran.stderr.index("Research Report: comets")
    bad = agenthost("run", "x", "--task-grace", "-1")
    assert bad.returncode == 2
    assert "--task-grace" in bad.stderr
