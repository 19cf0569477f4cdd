"""Tasks through ``agenthost serve --http``, in both task forms, with real clients.

The gateway fronts two upstreams: server-everything (``ev``: 2025-11-25 tasks, its
``simulate-research-query`` requires one) and tests/peers/tasks_server.py (``tk``: the
2026-07-28 tasks extension). The official TypeScript SDK client drives the 2025-11-25
form (tests/peers/ts_tasks_client.mjs), FastMCP's client the extension
(tests/peers/fastmcp_tasks_client.py), each against both upstreams, so every pair of
forms is translated. What the clients saw, the audit (one decision per task-run call) and
the upstream's own log (a cancelled task stops) are asserted here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.config.model import HostConfig
from agenthost.connection import open_session
from agenthost.errors import JSONRPCError
from agenthost.protocol import methods as m
from agenthost.protocol.types import CallToolRequestParams
from agenthost.protocol.types.tasks import TaskMetadata
from agenthost.serve import open_gateway
from agenthost.tool_tasks import cancel_task, list_tasks
from agenthost.transports.memory import memory_transport_pair
from agenthost_policies import read_audit
from tests.forkserver import peer_python
from tests.helpers import AGENTHOST, REPO, stdio

Command = tuple[str, list[str]]

PEERS = REPO / "tests" / "peers"


def _config(tmp_path: Path, everything: Command, decision: str = "allow") -> str:
    command, args = everything
    return f"""
[servers.ev]
command = {json.dumps(command)}
args = {json.dumps(args)}

[servers.tk]
command = {json.dumps(peer_python())}
args = [{json.dumps(str(PEERS / "tasks_server.py"))}, "stdio"]
env = {{ AGENTHOST_PEER_LOG = {json.dumps(str(tmp_path / "peer.jsonl"))} }}

[policy]
audit = {json.dumps(str(tmp_path / "audit.jsonl"))}
rules = [ {{ kind = "tool", decision = "{decision}", server = "*", name = "*" }} ]
"""


@contextmanager
def _serving(
    tmp_path: Path, everything: Command, decision: str = "allow", log: list[str] | None = None
) -> Iterator[str]:
    """``agenthost serve --http`` on a free port; yields its URL, stops it at the end
    (and then puts the rest of its stderr in ``log``)."""
    config = tmp_path / "agenthost.toml"
    config.write_text(_config(tmp_path, everything, decision))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    # --no-auth: these clients send no token (authentication: tests/security).
    proc = subprocess.Popen(
        [*AGENTHOST, "--config", str(config), "serve", "-v", "--http", "127.0.0.1:0", "--no-auth"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        url = None
        ready: set[str] = set()
        deadline = time.monotonic() + 60
        while (url is None or len(ready) < 2) and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "serve exited"
            found = re.search(r"serving MCP at (http://\S+/mcp)", line)
            url = found.group(1) if found else url
            ready |= {name for name in ("ev", "tk") if line.startswith(f"{name}: ready")}
        assert url is not None and ready == {"ev", "tk"}
        yield url
    finally:
        proc.terminate()
        try:
            _, rest = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, rest = proc.communicate()
        if log is not None:
            log.append(rest)


def _run(argv: list[str]) -> dict[str, Any]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return seen


def _decisions(tmp_path: Path) -> list[tuple[str, str]]:
    return [
        (r["server"], r["name"])
        for r in read_audit(tmp_path / "audit.jsonl")
        if r["event"] == "decision" and r.get("kind", "tool") == "tool" and r["name"]
    ]


def _peer_log(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "peer.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _long_steps(tmp_path: Path) -> int:
    """Steps the upstream ran of the task the clients cancel (topic "long")."""
    return sum(e["event"] == "research-step" and e["topic"] == "long" for e in _peer_log(tmp_path))


def _result_text(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


@pytest.mark.timeout(180)
def test_a_2025_11_25_client_runs_tasks_through_the_gateway(
    tmp_path: Path, everything_cmd: Callable[[], Command]
) -> None:
    with _serving(tmp_path, everything_cmd()) as url:
        seen = _run(["node", str(PEERS / "ts_tasks_client.mjs"), url])
        steps = _long_steps(tmp_path)
        time.sleep(1.0)  # five more steps, had the cancelled task kept running upstream
        assert _long_steps(tmp_path) == steps
    assert seen["capabilities"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    # "optional" wherever the upstream runs tasks (the gateway runs a plain call's task
    # itself, so never "required"); an extension upstream's tools too (it decides).
    assert seen["tools"]["ev__simulate-research-query"] == "optional"
    assert seen["tools"]["ev__echo"] == "forbidden"
    assert seen["tools"]["tk__research"] == "optional"

    for key, expected in (("research", "Report on tides: 2 sources read."), ("everything", "")):
        messages = seen[key]
        assert messages[0]["type"] == "taskCreated" and messages[0]["status"] == "working"
        assert {m["taskId"] for m in messages if "taskId" in m} == {messages[0]["taskId"]}
        assert messages[-2] == {**messages[0], "type": "taskStatus", "status": "completed"}
        assert messages[-1]["type"] == "result"
        text = _result_text(messages[-1]["result"])
        assert expected in text and ("Research Report: tides" in text or key == "research")
    assert seen["listed"] == ["completed", "completed"]

    # A task of session a: session b cannot see it, cancel it or read it.
    assert seen["long"] == "working" and seen["idIsOurs"]
    for what in ("otherGet", "otherCancel", "otherResult"):
        assert seen[what]["code"] == -32602 and "unknown task" in seen[what]["message"]
    assert seen["otherList"] == 0
    assert seen["stillRunning"] == "working"
    assert seen["cancelled"] == seen["afterCancel"] == "cancelled"
    assert seen["cancelAgain"]["code"] == -32602
    assert "already cancelled" in seen["cancelAgain"]["message"]
    assert seen["cancelledResult"]["code"] == -32603
    # A task asked of a tool listed without task support: -32601 (Tool-Level Negotiation).
    assert seen["forbidden"]["code"] == -32601
    # No task asked for: the gateway ran the upstream's task to its end itself.
    assert _result_text(seen["plain"]) == "Report on plain: 1 sources read."

    # One policy decision per call, task or not.
    assert sorted(_decisions(tmp_path)) == sorted(
        [("tk", "research")] * 3 + [("ev", "simulate-research-query")]
    )
    # The cancelled task stopped upstream (tasks/cancel reached it: no step after the
    # client was done, above): it never finished.
    log = _peer_log(tmp_path)
    assert [e["topic"] for e in log if e["event"] == "research"] == ["tides", "long", "plain"]
    assert [e["topic"] for e in log if e["event"] == "research-done"] == ["tides", "plain"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_a_2026_07_28_client_runs_tasks_through_the_gateway(
    tmp_path: Path, everything_cmd: Callable[[], Command], transport: str
) -> None:
    """Over HTTP its requests have no session (the task id is the key); over stdio the
    tasks are the one session's."""
    client = [peer_python(), str(PEERS / "fastmcp_tasks_client.py")]
    if transport == "stdio":
        config = tmp_path / "agenthost.toml"
        config.write_text(_config(tmp_path, everything_cmd()))
        seen = _run([*client, "tour", "--", *AGENTHOST, "--config", str(config), "serve"])
    else:
        with _serving(tmp_path, everything_cmd()) as url:
            seen = _run([*client, url])
            steps = _long_steps(tmp_path)
            time.sleep(1.0)
            assert _long_steps(tmp_path) == steps
    assert seen["protocol"] == "2026-07-28"
    assert seen["extensions"] == ["io.modelcontextprotocol/tasks"]
    for key in ("research", "everything"):
        assert seen[key]["created"] == "working"
        assert seen[key]["final"] == "completed"
        assert len(seen[key]["id"]) >= 20
    assert seen["research"]["text"] == "Report on waves: 2 sources read."
    assert "Research Report: waves" in seen["everything"]["text"]
    assert seen["research"]["id"] != seen["everything"]["id"]
    assert seen["long"] == "working"
    assert seen["cancelled"] == "cancelled"
    assert seen["plain"] == "Report on plain: 1 sources read."
    assert sorted(_decisions(tmp_path)) == sorted(
        [("tk", "research")] * 3 + [("ev", "simulate-research-query")]
    )
    log = _peer_log(tmp_path)
    assert [e["topic"] for e in log if e["event"] == "research-done"] == ["waves", "plain"]


@pytest.mark.timeout(120)
def test_a_task_run_call_is_consented_once_through_the_client(
    tmp_path: Path, everything_cmd: Callable[[], Command]
) -> None:
    """The rule says "ask": the gateway asks through the client's open tools/call (an MRTR
    round), before any task exists; the answer lets the upstream create the task."""
    stderr: list[str] = []
    with _serving(tmp_path, everything_cmd(), decision="ask", log=stderr) as url:
        seen = _run([peer_python(), str(PEERS / "fastmcp_tasks_client.py"), url, "ask"])
    assert len(seen["forms"]) == 1 and "research" in seen["forms"][0]
    assert seen["text"] == "Report on asked: 1 sources read."
    # The client got the gateway's task (the SDK followed it to the result above).
    assert re.search(r"task \S+… runs tk__research upstream", stderr[0])
    decisions = [
        r
        for r in read_audit(tmp_path / "audit.jsonl")
        if r["event"] == "decision" and r["name"] == "research"
    ]
    assert len(decisions) == 1
    assert decisions[0]["decision"] == "allow" and decisions[0]["by"] != "headless"


def _research(topic: str, ttl: int | None = None) -> CallToolRequestParams:
    arguments = {"topic": topic, "steps": 100, "delay": 0.1}
    return CallToolRequestParams(name="research", arguments=arguments, task=TaskMetadata(ttl=ttl))


async def _steps(log: Path, topic: str) -> int:
    """The upstream's steps of ``topic``, once they stop growing for 0.5 s (10 steps)."""
    while True:
        before = _count(log, topic)
        await trio.sleep(0.5)
        if _count(log, topic) == before:
            return before


def _count(log: Path, topic: str) -> int:
    return sum(e["event"] == "research-step" and e["topic"] == topic for e in _peer(log))


def _peer(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.timeout(90)
async def test_a_sessions_tasks_are_bounded_and_end_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the bound a new task is refused until one ends (then the oldest ended one makes
    room); a client that leaves takes its running tasks with it, upstream too."""
    monkeypatch.setattr("agenthost.serve.tasks.MAX_TASKS_PER_OWNER", 2)
    log = tmp_path / "peer.jsonl"
    server = stdio(
        "tk",
        (peer_python(), [str(PEERS / "tasks_server.py"), "stdio"]),
        env={"AGENTHOST_PEER_LOG": str(log)},
    )
    config = HostConfig(
        servers=[server], policy={"mode": "headless", "preset": "unsafe-allow-everything"}
    )
    with trio.fail_after(60):
        async with open_gateway(config) as gateway:
            ours, theirs = memory_transport_pair(name="gateway")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(gateway.serve, gateway.session(theirs))
                async with open_session(
                    ours, name="gateway", protocol_version="2025-11-25"
                ) as client:
                    ids = []
                    for topic in ("one", "two"):
                        created = await client.request(m.TOOLS_CALL_TASK_SPEC, _research(topic))
                        ids.append(created["task"]["taskId"])
                    with pytest.raises(JSONRPCError, match="too many tasks"):
                        await client.request(m.TOOLS_CALL_TASK_SPEC, _research("three"))
                    cancelled = await cancel_task(client, ids[0])
                    assert cancelled.status == "cancelled"
                    created = await client.request(m.TOOLS_CALL_TASK_SPEC, _research("three"))
                    listed = {t.task_id: t.status for t in await list_tasks(client)}
                    assert listed == {ids[1]: "working", created["task"]["taskId"]: "working"}
                    assert await _steps(log, "one") < 100
                nursery.cancel_scope.cancel()  # the client leaves: its session ends
            # The client left: its two running tasks are cancelled, upstream too.
            two, three = await _steps(log, "two"), await _steps(log, "three")
            assert two < 100 and three < 100
            assert not [e for e in _peer(log) if e["event"] == "research-done"]
