"""Tasks (2025-11-25) against server-everything's ``simulate-research-query``, a tool whose
``execution.taskSupport`` is ``required``: a plain call can only fail, a task-augmented one
is polled (``tasks/get``) to its result (``tasks/result``); cancelling the caller sends
``tasks/cancel``, asserted on the wire (issue 16)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.asks import ClientHandlers, RequestContext
from agenthost.config.model import HostConfig, ServerConfig
from agenthost.connection import open_session
from agenthost.host.host import open_host
from agenthost.protocol.types import ElicitRequestParams, ElicitResult, TextContent
from agenthost.protocol.types.tasks import Task
from agenthost.tool_tasks import (
    call_tool_as_task,
    list_tasks,
    server_accepts_tool_tasks,
    wants_task,
)
from agenthost.transports.stdio import open_stdio_transport
from tests.forkserver import peer_python
from tests.helpers import ALLOW_ALL, RecordingTransport, cancel_once_running

Command = tuple[str, list[str]]
TOOL = "simulate-research-query"


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


@pytest.mark.timeout(120)
async def test_required_task_tool_runs_to_its_result(everything_cmd: Callable[[], Command]) -> None:
    command, args = everything_cmd()
    async with (
        open_stdio_transport(command, args, name="everything") as stdio,
        open_session(recording := RecordingTransport(stdio), name="everything") as session,
    ):
        tools = {tool.name: tool for tool in await session.list_tools()}
        assert server_accepts_tool_tasks(session.server_capabilities)
        assert wants_task(tools[TOOL], session.server_capabilities)
        assert not wants_task(tools["echo"], session.server_capabilities)
        statuses: list[str] = []

        async def on_status(task: Task) -> None:
            statuses.append(task.status)

        with trio.fail_after(30):
            result = await call_tool_as_task(session, TOOL, {"topic": "tides"}, on_status=on_status)
        assert not result.is_error
        assert "Research Report: tides" in text_of(result)
        assert statuses[0] == "working"
        assert statuses[-1] == "completed" or statuses[-1] == "working"
        transport = recording
        methods = [m.get("method") for m in transport.sent]
        assert "tasks/get" in methods
        assert methods.count("tasks/result") == 1
        [call] = [m for m in transport.sent if m.get("method") == "tools/call"]
        assert "task" in call["params"]
        transport.assert_valid()


@pytest.mark.timeout(60)
async def test_cancelling_a_task_sends_tasks_cancel(everything_cmd: Callable[[], Command]) -> None:
    command, args = everything_cmd()
    async with (
        open_stdio_transport(command, args, name="everything") as stdio,
        open_session(recording := RecordingTransport(stdio), name="everything") as session,
    ):
        await cancel_once_running(session, TOOL, 10)
        transport = recording
        created = [m for m in transport.sent if m.get("method") == "tasks/cancel"]
        assert len(created) == 1, [m.get("method") for m in transport.sent]
        task_id = created[0]["params"]["taskId"]
        remaining = {t.task_id: t.status for t in await list_tasks(session)}
        assert remaining.get(task_id, "cancelled") == "cancelled"


@pytest.mark.timeout(60)
async def test_input_required_task_asks_through_the_handlers(
    everything_cmd: Callable[[], Command],
) -> None:
    asked: list[ElicitRequestParams] = []

    async def elicit(ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"interpretation": "snake"})

    command, args = everything_cmd()
    async with (
        open_stdio_transport(command, args, name="everything") as stdio,
        open_session(stdio, name="everything", handlers=ClientHandlers(elicitation=elicit)) as s,
    ):
        with trio.fail_after(30):
            result = await call_tool_as_task(s, TOOL, {"topic": "python", "ambiguous": True})
        assert len(asked) == 1
        assert "snake" in text_of(result)


@pytest.mark.timeout(60)
async def test_host_call_tool_runs_required_tools_as_tasks(
    everything_cmd: Callable[[], Command],
) -> None:
    command, args = everything_cmd()
    config = HostConfig(
        policy=ALLOW_ALL,
        servers=[ServerConfig(name="ev", transport="stdio", command=command, args=tuple(args))],
    )
    seen: list[str | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with open_host(config) as host:
        with trio.fail_after(30):
            result = await host.call_tool(f"ev__{TOOL}", {"topic": "moons"}, progress=progress)
    assert "Research Report: moons" in text_of(result)
    assert seen and seen[0] is not None and seen[0].startswith("working")


def _cli_config(tmp_path: Path, everything: Command) -> Path:
    (tmp_path / "script.toml").write_text(
        f"""
[[turns]]
text = "Researching."
[[turns.tool_calls]]
id = "t1"
name = "ev__{TOOL}"
input = {{ topic = "comets" }}

[[turns]]
text = "Waiting for the report."

[[turns]]
text = "Done researching."
"""
    )
    path = tmp_path / "agenthost.toml"
    path.write_text(
        f"""
[servers.ev]
command = {json.dumps(everything[0])}
args = {json.dumps(everything[1])}

[providers.replay]
kind = "scripted"
script = "script.toml"

[policy]
mode = "headless"

[[policy.rules]]
kind = "tool"
server = "ev"
decision = "allow"
"""
    )
    return path


def _agenthost(config: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [peer_python(), "-m", "agenthost", "--config", str(config), *argv],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )


@pytest.mark.timeout(120)
def test_cli_call_and_agent_run_task_tools(
    tmp_path: Path, everything_cmd: Callable[[], Command]
) -> None:
    config = _cli_config(tmp_path, everything_cmd())
    called = _agenthost(config, "call", f"ev__{TOOL}", '{"topic": "comets"}')
    assert called.returncode == 0, called.stderr
    assert "Research Report: comets" in called.stdout
    ran = _agenthost(config, "--json", "run", "research comets")
    assert ran.returncode == 0, ran.stderr
    transcript = json.loads(ran.stdout)
    [call] = transcript["tool_calls"]
    assert call["status"] == "ok", call
    assert "Research Report: comets" in call["output"]
    listed = _agenthost(config, "--json", "tasks", "list", "ev")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    missing = _agenthost(config, "tasks", "get", "ev")
    assert missing.returncode == 2
    assert "needs a task id" in missing.stderr
