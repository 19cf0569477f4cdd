"""Issue 28, tasks: a hostile tasks server (hostile_tasks_server.py) against the host and
the CLI. Each test reproduces one finding of the review; times are real but short (the
limits under test are one second)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.config.model import HostConfig, ServerConfig, Timeouts
from agenthost.errors import AgentHostTimeout
from agenthost.host.host import open_host

SERVER = str(Path(__file__).resolve().parent / "hostile_tasks_server.py")
ALLOW: dict[str, Any] = {"mode": "headless", "rules": [{"kind": "tool", "decision": "allow"}]}
HOUR_MS = 3_600_000


def tasks_server(config: dict[str, Any], **timeouts: float) -> ServerConfig:
    modern = config.get("era") == "modern"
    return ServerConfig(
        name="ht",
        transport="stdio",
        command=sys.executable,
        args=(SERVER, json.dumps(config)),
        timeouts=Timeouts(**timeouts),
        protocol="2026-07-28" if modern else "legacy",
    )


def methods(record: Path) -> list[str]:
    return record.read_text().splitlines() if record.exists() else []


async def timed_out(
    config: ServerConfig, *, timeout: float | None = None, task: bool | None = None
) -> tuple[AgentHostTimeout, float]:
    """Call the hostile task tool; the timeout it fails with, and after how long."""
    async with open_host(HostConfig(servers=[config], policy=ALLOW)) as host:
        started = trio.current_time()
        kwargs: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        with pytest.raises(AgentHostTimeout) as info:
            await host.call_tool("ht__slow", {}, task=task, **kwargs)
        return info.value, trio.current_time() - started


@pytest.mark.parametrize(
    "behaviour",
    [
        pytest.param({"status": "working"}, id="stuck-working"),
        pytest.param({"status": "input_required", "result_hangs": True}, id="result-hangs"),
    ],
)
async def test_request_timeout_bounds_a_legacy_task(
    tmp_path: Path, behaviour: dict[str, Any]
) -> None:
    """H6: a task stuck `working`, or whose tasks/result never answers, was waited for
    as long as its (server-chosen) ttl; now `timeouts.request` bounds it and the task is
    cancelled."""
    record = tmp_path / "methods.txt"
    server = tasks_server({"ttl": HOUR_MS, "record": str(record), **behaviour}, request=1.0)
    error, took = await timed_out(server)
    assert took < 5, took
    assert "within 1s" in str(error)
    assert "tasks/cancel" in methods(record)


async def test_repeated_input_key_is_bounded_by_the_request_timeout(tmp_path: Path) -> None:
    """H6: a 2026-07-28 task in `input_required` asking the same key again was polled for
    its whole ttl; now `timeouts.request` bounds it, and tasks/cancel is sent."""
    record = tmp_path / "methods.txt"
    config = {"era": "modern", "status": "input_required", "ttl": HOUR_MS, "record": str(record)}
    error, took = await timed_out(tasks_server(config, request=1.0), task=True)
    assert took < 5, took
    assert "within 1s" in str(error)
    assert "tasks/cancel" in methods(record)


async def test_the_calls_own_timeout_wins(tmp_path: Path) -> None:
    """H6: the call's own timeout, not the server's ttl nor the configured one."""
    server = tasks_server({"ttl": HOUR_MS}, request=60.0, task=30.0)
    error, took = await timed_out(server, timeout=0.5)
    assert took < 4, took
    assert error.timeout == 0.5


async def test_timeouts_task_is_the_limit_of_a_task(tmp_path: Path) -> None:
    """H6: `timeouts.task` (new) bounds a task when the call names no limit."""
    server = tasks_server({"ttl": HOUR_MS}, request=60.0, task=1.0)
    error, took = await timed_out(server)
    assert took < 5, took
    assert error.timeout == 1.0


async def test_a_negative_ttl_does_not_cancel_the_task_at_once() -> None:
    """Low: ttl -1 made the limit negative: the task was cancelled before its first
    poll. Now the ttl bounds nothing of ours: the task completes."""
    server = tasks_server({"ttl": -1, "complete_after": 2})
    async with open_host(HostConfig(servers=[server], policy=ALLOW)) as host:
        result = await host.call_tool("ht__slow", {})
    assert result.content[0].text == "done"  # type: ignore[union-attr]


def test_timeouts_task_is_a_documented_setting(tmp_path: Path) -> None:
    """H6: `timeouts.task` loads host-wide and per server (inf allowed), its default is
    unset (then `request` applies), and a bad value names the key; docs/config.md shows
    it (its examples are loaded by tests/test_docs_examples.py)."""
    from agenthost.config import load_config
    from agenthost.errors import ConfigError

    path = tmp_path / "agenthost.toml"
    path.write_text(
        '[timeouts]\ntask = 1800\n\n[servers.a]\ncommand = "a"\n\n'
        '[servers.b]\ncommand = "b"\ntimeouts = { task = inf }\n'
    )
    servers = {s.name: s for s in load_config(path).servers}
    assert servers["a"].timeouts.task == 1800
    assert servers["b"].timeouts.task == float("inf")
    assert Timeouts().task is None
    path.write_text("[timeouts]\ntask = -1\n")
    with pytest.raises(ConfigError, match=r"timeouts\.task: must be a number of seconds > 0"):
        load_config(path)
    docs = (Path(__file__).resolve().parents[2] / "docs" / "config.md").read_text()
    assert "task = 1800" in docs and "`timeouts.task`" in docs


async def test_a_flood_of_status_notifications_keeps_the_poll_floor(tmp_path: Path) -> None:
    """M7: each `notifications/tasks/status` woke the poller at once, so a flood made a
    `tasks/get` per notification (142 a second); now polls stay MIN_POLL_INTERVAL apart."""
    from agenthost.tool_tasks import MIN_POLL_INTERVAL

    record = tmp_path / "methods.txt"
    config = {"poll": 1000, "flood": 2.0, "record": str(record)}
    error, took = await timed_out(tasks_server(config), timeout=1.5)
    gets = methods(record).count("tasks/get")
    assert "notifications/tasks/status" not in methods(record)  # we only receive them
    assert gets <= took / MIN_POLL_INTERVAL + 2, (gets, took)
    assert error.timeout == 1.5


async def test_a_megabyte_task_id_is_not_echoed_whole() -> None:
    """Low: a 1 MiB task id was echoed into a 1 MB error line; now cut."""
    server = tasks_server({"task_id_bytes": 1024 * 1024})
    error, _ = await timed_out(server, timeout=0.5)
    assert len(str(error)) < 300, len(str(error))
    assert "xxxx…" in str(error)


async def test_tasks_list_is_bounded_and_says_so() -> None:
    """H5: tasks/list had no cap (5M tasks took 3.8 GiB); now at most MAX_LISTED_TASKS,
    no page asked for past it, and the listing says it was cut."""
    from agenthost.tool_tasks import MAX_LISTED_TASKS, list_tasks

    server = tasks_server({"list": {"per_page": 3_000, "pages": 5}})
    async with open_host(HostConfig(servers=[server], policy=ALLOW)) as host:
        listed = await list_tasks(host.session("ht"))
    assert len(listed) == MAX_LISTED_TASKS
    assert listed.cut == f"more than {MAX_LISTED_TASKS} tasks"


def test_tasks_list_cut_at_100_pages_is_said(tmp_path: Path) -> None:
    """Low: `tasks list` of a server paging without end stopped at 100 pages without a
    word; now stderr says the list was cut (stdout stays the JSON list)."""
    import os
    import subprocess

    config = {"list": {"per_page": 1, "pages": 0}}
    path = tmp_path / "agenthost.toml"
    path.write_text(
        f"[servers.ht]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(SERVER)}, {json.dumps(json.dumps(config))}]\n"
        'protocol = "legacy"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    listed = subprocess.run(
        [sys.executable, "-m", "agenthost", "--config", str(path), "--json", "tasks", "list", "ht"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 100
    assert "more than 100 pages" in listed.stderr
