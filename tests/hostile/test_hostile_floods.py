"""Issue 14 item 2 and 3: floods from one server stay bounded and never slow another.

Each test runs a hostile server next to a healthy one in one host, floods, and asserts
the bounds (live tasks, RSS growth, the healthy server's latency) at CI size; ``--soak``
runs the issue's sizes and prints the figures.
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from agenthost.config.model import HostConfig
from agenthost.host.host import Host, open_host
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
    rss_bytes,
)

MiB = 1024 * 1024


def _text(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


@asynccontextmanager
async def _pair(bad: dict[str, Any] | None = None) -> AsyncIterator[Host]:
    config = HostConfig(policy=ALLOW_ALL, servers=[hostile("bad", bad), hostile("good")])
    async with open_host(config) as host:
        yield host


async def _baseline(host: Host) -> float:
    probe = LatencyProbe()
    with trio.move_on_after(0.5):
        await probe.run(lambda: host.call_tool("good__echo", {"message": "hi"}))
    return probe.median()


async def _during(
    host: Host, seconds: float, watch: list[int], loop: LoopWatch | None = None
) -> LatencyProbe:
    """Probe the healthy server for ``seconds``; sample live tasks into ``watch`` and the
    event loop's gaps into ``loop``."""
    probe = LatencyProbe()

    async def sample() -> None:
        while True:
            watch.append(live_tasks())
            await trio.sleep(0.05)

    with trio.move_on_after(seconds):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sample)
            if loop is not None:
                nursery.start_soon(loop.run)
            await probe.run(lambda: host.call_tool("good__echo", {"message": "hi"}))
    return probe


@pytest.mark.parametrize("method", ["ping", "roots/list"])
async def test_request_flood_from_a_server_that_stops_reading(
    flood: FloodSize, method: str
) -> None:
    """Issue: 300k pings to a host whose answers the server never reads: 124,905 tasks."""
    async with _pair() as host:
        base = await _baseline(host)
        gc.collect()
        tasks_before, rss_before = live_tasks(), rss_bytes()
        request = {"jsonrpc": "2.0", "id": 0, "method": method}
        await host.call_tool(
            "bad__act",
            {"actions": [{"send": request, "count": flood.requests}, {"stop_reading": True}]},
        )
        watch: list[int] = []
        loop = LoopWatch()
        probe = await _during(host, 8.0 if flood.soak else 3.0, watch, loop)
        tasks_growth = max(watch) - tasks_before
        rss_growth = rss_bytes() - rss_before
        report(
            flood,
            f"{flood.requests} {method} requests, server not reading",
            {
                "max_live_tasks_added": tasks_growth,
                "rss_growth_MiB": round(rss_growth / MiB, 1),
                **healthy_figures(base, probe, loop),
            },
        )
        assert tasks_growth < 100
        assert rss_growth < 64 * MiB
        assert_healthy(base, probe, loop)


async def test_every_request_of_a_flood_is_answered(flood: FloodSize) -> None:
    """A flood from a server that reads: each request is answered (run, or refused past
    the cap: tests/test_session.py shows the cap exactly); the session lives on."""
    request = {"jsonrpc": "2.0", "id": 0, "method": "roots/list"}
    count = 2_000
    async with _pair() as host:
        # The host answers roots/list at once, so some may be in progress, some refused:
        # each one is answered one way or the other, and the session stays up.
        await host.call_tool("bad__act", {"actions": [{"send": request, "count": count}]})
        with trio.fail_after(20):
            while True:
                stats = json.loads(_text(await host.call_tool("bad__stats", {})))
                if stats["responses"] + stats["errors"] == count:
                    break
                await trio.sleep(0.05)
        assert _text(await host.call_tool("bad__echo", {"message": "alive"})) == "alive"


async def test_one_line_batch_does_not_stall_the_event_loop(flood: FloodSize) -> None:
    """Issue: one 12 MB line holding 300k pings stalled every server for 16 s; after the
    first fix, parsing it whole still held the GIL 0.23-0.44 s (healthy worst 358 ms)."""
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
    if not flood.soak:
        # At CI size the members carry 12 small objects each, so the line (4.4 MB) costs
        # what the 300k bare pings cost to parse whole: 0.4 s in one orjson call.
        request["params"] = {"pad": [{"k": "v"}] * 12}
    async with _pair() as host:
        base = await _baseline(host)
        watch: list[int] = []
        loop = LoopWatch()
        await host.call_tool("bad__act", {"actions": [{"batch": request, "count": flood.batch}]})
        probe = await _during(host, 6.0 if flood.soak else 2.0, watch, loop)
        stats = json.loads(_text(await host.call_tool("bad__stats", {})))
        report(
            flood,
            f"one line batch of {flood.batch} pings",
            {"answered_during_probe": stats["responses"], **healthy_figures(base, probe, loop)},
        )
        assert_healthy(base, probe, loop)
        with trio.fail_after(120):
            while stats["responses"] < flood.batch:
                await trio.sleep(0.05)
                stats = json.loads(_text(await host.call_tool("bad__stats", {})))
        assert stats["responses"] == flood.batch


async def test_server_logger_names_do_not_create_loggers(
    flood: FloodSize, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue item 3: 200k distinct ``logger`` names made 200k Python loggers (153 MiB)."""
    caplog.set_level(logging.INFO, logger="agenthost.server")
    count = flood.notifications
    async with _pair() as host:
        loggers_before = len(logging.root.manager.loggerDict)
        await host.call_tool("bad__act", {"actions": [{"log_names": count}]})
        with trio.fail_after(60 if not flood.soak else 300):
            while sum(1 for r in caplog.records if r.name == "agenthost.server.bad") < count:
                await trio.sleep(0.05)
        added = len(logging.root.manager.loggerDict) - loggers_before
        report(flood, f"{count} log logger names", {"loggers_added": added})
        assert added < 5
        record = next(r for r in caplog.records if getattr(r, "mcp_logger", None) == "n7")
        assert record.name == "agenthost.server.bad"
        assert record.getMessage() == "[n7] x"


async def test_oversized_line_is_refused_and_the_other_server_stays_responsive(
    flood: FloodSize,
) -> None:
    """A line past max_message_size ends that session (it restarts); nobody else waits."""
    size = flood.line_bytes
    config = HostConfig(
        policy=ALLOW_ALL,
        servers=[hostile("bad", max_message_size=size), hostile("good")],
    )
    async with open_host(config) as host:
        base = await _baseline(host)
        gc.collect()
        rss_before = rss_bytes()
        pid = host.status()[0].pid
        start = trio.current_time()
        await host.call_tool("bad__act", {"actions": [{"line": size + 1}]})
        probe = LatencyProbe()

        async def until_restarted() -> None:
            with trio.fail_after(60):
                while host.status()[0].pid == pid:
                    await trio.sleep(0.01)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(probe.run, lambda: host.call_tool("good__echo", {"message": "x"}))
            await until_restarted()
            refused_after = trio.current_time() - start
            nursery.cancel_scope.cancel()
        rss_growth = rss_bytes() - rss_before
        report(
            flood,
            f"one {size + 1}-byte line",
            {
                "refused_after_s": round(refused_after, 2),
                "rss_growth_MiB": round(rss_growth / MiB, 1),
                "healthy_median_added_ms": round((probe.median() - base) * 1000, 1),
                "healthy_worst_ms": round(probe.worst() * 1000, 1),
            },
        )
        assert probe.median() - base < 0.1
        assert rss_growth < 3 * size + 32 * MiB
