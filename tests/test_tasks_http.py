"""Tasks (2025-11-25) over Streamable HTTP: the acceptance of issue 16 with server-everything
(``streamableHttp`` mode) as the peer. ``simulate-research-query`` requires task
augmentation; through a session, ``host.call_tool``, ``agenthost call`` and the agent it
returns its result, and cancelling it mid-way sends exactly one ``tasks/cancel``, asserted
on the wire. The stdio runs of the same checks are in ``test_tasks.py``."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.config.model import HostConfig, ServerConfig
from agenthost.connection import open_session
from agenthost.host.host import open_host
from agenthost.protocol.types import TextContent
from agenthost.protocol.types.tasks import Task
from agenthost.session import ClientSession
from agenthost.tool_tasks import call_tool_as_task, list_tasks, wants_task
from agenthost.transports.http import open_streamable_http_transport
from tests.conftest import everything_http_cmd, free_port
from tests.forkserver import peer_python
from tests.helpers import ALLOW_ALL, RecordingTransport, cancel_once_running
from tests.peers.http_launch import bind_localhost_preload, serve

TOOL = "simulate-research-query"


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


@asynccontextmanager
async def everything_http(tmp_path: Path) -> AsyncIterator[str]:
    """server-everything in ``streamableHttp`` mode on a free 127.0.0.1 port; its URL."""
    port = free_port()
    command, args, env = everything_http_cmd("streamableHttp", port)
    preload = bind_localhost_preload(tmp_path)
    async with serve([command, "--require", str(preload), *args], port, env=env):
        yield f"http://127.0.0.1:{port}/mcp"


@asynccontextmanager
async def recorded_session(url: str) -> AsyncIterator[tuple[ClientSession, RecordingTransport]]:
    async with open_streamable_http_transport(url, name="everything") as http:
        recording = RecordingTransport(http)
        async with open_session(recording, name="everything") as session:
            yield session, recording


@pytest.mark.timeout(120)
async def test_task_tool_over_http_runs_to_its_result(tmp_path: Path) -> None:
    async with everything_http(tmp_path) as url, recorded_session(url) as (session, wire):
        tools = {tool.name: tool for tool in await session.list_tools()}
        assert wants_task(tools[TOOL], session.server_capabilities)
        statuses: list[str] = []

        async def on_status(task: Task) -> None:
            statuses.append(task.status)

        with trio.fail_after(60):
            result = await call_tool_as_task(session, TOOL, {"topic": "tides"}, on_status=on_status)
    assert not result.is_error
    assert "Research Report: tides" in text_of(result)
    assert statuses[0] == "working"
    methods = wire.methods_sent()
    assert "tasks/get" in methods
    assert methods.count("tasks/result") == 1
    [call] = [m for m in wire.sent if m.get("method") == "tools/call"]
    assert "task" in call["params"]
    assert wire.assert_valid("2025-11-25") > 4


@pytest.mark.timeout(120)
async def test_cancelling_a_task_over_http_sends_tasks_cancel(tmp_path: Path) -> None:
    async with everything_http(tmp_path) as url, recorded_session(url) as (session, wire):
        await cancel_once_running(session, TOOL, 30)
        cancels = [m for m in wire.sent if m.get("method") == "tasks/cancel"]
        assert len(cancels) == 1, wire.methods_sent()
        [create] = [m for m in wire.sent if m.get("method") == "tools/call"]
        task_id = cancels[0]["params"]["taskId"]
        assert task_id
        states = {t.task_id: t.status for t in await list_tasks(session)}
        assert states.get(task_id, "cancelled") == "cancelled"
        assert create["params"]["task"] == {}
    wire.assert_valid("2025-11-25")


@pytest.mark.timeout(120)
async def test_host_call_tool_over_http_runs_the_task(tmp_path: Path) -> None:
    async with everything_http(tmp_path) as url:
        config = HostConfig(
            policy=ALLOW_ALL, servers=[ServerConfig(name="ev", transport="http", url=url)]
        )
        seen: list[str | None] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append(message)

        async with open_host(config) as host:
            with trio.fail_after(60):
                result = await host.call_tool(f"ev__{TOOL}", {"topic": "moons"}, progress=progress)
    assert "Research Report: moons" in text_of(result)
    assert seen and seen[0] is not None and seen[0].startswith("working")


def _agenthost(config: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [peer_python(), "-m", "agenthost", "--config", str(config), *argv],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )


@pytest.mark.timeout(180)
async def test_cli_call_and_agent_over_http(tmp_path: Path) -> None:
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
    async with everything_http(tmp_path) as url:
        config = tmp_path / "agenthost.toml"
        config.write_text(
            f"""
[servers.ev]
url = {json.dumps(url)}

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
        called = await trio.to_thread.run_sync(
            lambda: _agenthost(config, "call", f"ev__{TOOL}", '{"topic": "comets"}')
        )
        ran = await trio.to_thread.run_sync(
            lambda: _agenthost(config, "--json", "run", "research comets")
        )
    assert called.returncode == 0, called.stderr
    assert "Research Report: comets" in called.stdout
    assert ran.returncode == 0, ran.stderr
    [call] = json.loads(ran.stdout)["tool_calls"]
    assert call["status"] == "ok", call
    assert "Research Report: comets" in call["output"]
