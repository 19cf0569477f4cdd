"""Issue 14 item 1: crafted tool names must never crash the host, and list_changed floods
coalesce (item 2)."""

from __future__ import annotations

import hashlib
import itertools
import logging
from typing import Any

import pytest
import trio

from agenthost.config.model import HostConfig
from agenthost.host.catalog import namespaced_names
from agenthost.host.host import open_host
from agenthost.host.supervisor import ServerState
from agenthost.protocol.types import TextContent
from tests.helpers import ALLOW_ALL
from tests.hostile.conftest import (
    FloodSize,
    LatencyProbe,
    LoopWatch,
    assert_healthy,
    healthy_figures,
    hostile,
    live_tasks,
    report,
)

_OBJECT: dict[str, Any] = {"type": "object"}


def _hash8(server: str, tool: str) -> str:
    return hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]


def crafted_names(server: str) -> list[str]:
    """The issue's three names: ``a b``, its hashed name unprefixed, and the next hash."""
    first = "a b"
    second = f"a_b_{_hash8(server, first)}"
    third = f"{second}_{_hash8(server, second)}"
    return [first, second, third]


def _tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": "crafted", "inputSchema": _OBJECT}


def _text(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def test_crafted_names_get_distinct_names() -> None:
    pairs = [("bad", n) for n in crafted_names("bad")]
    names = namespaced_names(pairs)
    assert len(set(names.values())) == 3
    assert set(names) == set(pairs)


def test_a_real_hash_collision_refuses_the_colliding_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two names that share the hashed prefix and the 8 hex digits (found by birthday
    search, ~2^16 tries): both are refused with a logged reason, the rest kept."""
    prefix = "x" * 60 + " "
    seen: dict[str, str] = {}
    for i in itertools.count():
        name = f"{prefix}{i}"
        digest = _hash8("bad", name)
        if digest in seen:
            clash = (seen[digest], name)
            break
        seen[digest] = name
    caplog.set_level(logging.WARNING, logger="agenthost.host.catalog")
    pairs = [("bad", clash[0]), ("bad", clash[1]), ("bad", "fine"), ("good", "echo")]
    names = namespaced_names(pairs)
    assert names == {("bad", "fine"): "bad__fine", ("good", "echo"): "good__echo"}
    assert "refusing" in caplog.text
    assert clash[0] in caplog.text


async def test_crafted_names_on_list_changed_leave_the_host_running() -> None:
    """Issue: the re-index raised in the host's nursery: the host died with every server."""
    config = HostConfig(policy=ALLOW_ALL, servers=[hostile("bad"), hostile("good")])
    async with open_host(config) as host:
        changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        tools = [_tool(n) for n in crafted_names("bad")]
        await host.call_tool("bad__act", {"actions": [{"set_tools": tools}, {"send": changed}]})
        with trio.fail_after(10):
            while not set(crafted_names("bad")) <= {
                t.original_name for t in await host.list_tools() if t.server == "bad"
            }:
                await trio.sleep(0.02)
        bad = {t.original_name: t.name for t in await host.list_tools() if t.server == "bad"}
        assert set(crafted_names("bad")) <= set(bad)
        assert len(set(bad.values())) == len(bad)
        assert _text(await host.call_tool("good__echo", {"message": "alive"})) == "alive"
        assert host.supervisor("bad").state is ServerState.READY


async def test_crafted_names_at_start_do_not_crash_loop() -> None:
    tools = [_tool(n) for n in crafted_names("bad")]
    config = HostConfig(policy=ALLOW_ALL, servers=[hostile("bad", {"tools": tools})])
    async with open_host(config) as host:
        assert host.supervisor("bad").state is ServerState.READY
        bad = {t.original_name: t.name for t in await host.list_tools() if t.server == "bad"}
        assert set(crafted_names("bad")) <= set(bad)
        assert len(set(bad.values())) == len(bad)


async def test_list_changed_flood_coalesces(flood: FloodSize) -> None:
    """Issue: 100k tools/list_changed = 100k refresh tasks, 369 MiB."""
    count = flood.notifications
    config = HostConfig(policy=ALLOW_ALL, servers=[hostile("bad"), hostile("good")])
    async with open_host(config) as host:

        async def echo() -> Any:
            return await host.call_tool("good__echo", {"message": "hi"})

        quiet = LatencyProbe()
        with trio.move_on_after(0.5):
            await quiet.run(echo)
        base = quiet.median()
        before = live_tasks()
        changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        await host.call_tool("bad__act", {"actions": [{"send": changed, "count": count}]})
        most = 0
        probe, loop = LatencyProbe(), LoopWatch()
        with trio.move_on_after(8.0 if flood.soak else 3.0):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(probe.run, echo)
                nursery.start_soon(loop.run)
                while True:
                    most = max(most, live_tasks() - before)
                    await trio.sleep(0.02)
        report(
            flood,
            f"{count} tools/list_changed",
            {"max_live_tasks_added": most, **healthy_figures(base, probe, loop)},
        )
        assert most < 20
        assert_healthy(base, probe, loop)
        assert _text(await host.call_tool("good__echo", {"message": "alive"})) == "alive"
