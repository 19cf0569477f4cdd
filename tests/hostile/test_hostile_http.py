"""The hostile server over Streamable HTTP: floods on a response stream stay bounded and
never slow another server (issue 14 items 2 and 3, HTTP side)."""

from __future__ import annotations

import gc
import json
import logging
from typing import Any

import pytest
import trio

from agenthost.config.model import HostConfig, Timeouts
from agenthost.host.host import open_host
from agenthost.protocol.types import TextContent
from tests.helpers import ALLOW_ALL
from tests.hostile.conftest import (
    FloodSize,
    LatencyProbe,
    LoopWatch,
    assert_healthy,
    healthy_figures,
    hostile,
    hostile_http,
    live_tasks,
    report,
    rss_bytes,
)

MiB = 1024 * 1024


def _text(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


async def test_notification_flood_on_an_sse_response(
    flood: FloodSize, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agenthost.server")
    count = flood.notifications
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    timeouts = Timeouts(request=300.0 if flood.soak else 30.0)
    async with hostile_http("bad", timeouts=timeouts) as bad:
        config = HostConfig(policy=ALLOW_ALL, servers=[bad, hostile("good")])
        async with open_host(config) as host:
            probe = LatencyProbe()
            with trio.move_on_after(0.5):
                await probe.run(lambda: host.call_tool("good__echo", {"message": "x"}))
            base = probe.median()
            gc.collect()
            tasks_before, rss_before = live_tasks(), rss_bytes()
            most = 0
            during, loop = LatencyProbe(), LoopWatch()

            async def flood_call() -> None:
                actions = [{"send": changed, "count": count}, {"log_names": count}]
                await host.call_tool("bad__act", {"actions": actions})

            start = trio.current_time()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    during.run, lambda: host.call_tool("good__echo", {"message": "x"})
                )
                nursery.start_soon(loop.run)
                with trio.fail_after(300 if flood.soak else 30):
                    async with trio.open_nursery() as inner:
                        inner.start_soon(flood_call)
                        while inner.child_tasks:
                            most = max(most, live_tasks() - tasks_before)
                            await trio.sleep(0.02)
                nursery.cancel_scope.cancel()
            elapsed = trio.current_time() - start
            rss_growth = rss_bytes() - rss_before
            report(
                flood,
                f"HTTP: {count} list_changed + {count} log names on one SSE response",
                {
                    "delivered_in_s": round(elapsed, 1),
                    "max_live_tasks_added": most,
                    "rss_growth_MiB": round(rss_growth / MiB, 1),
                    **healthy_figures(base, during, loop),
                },
            )
            assert most < 20
            assert_healthy(base, during, loop)
            assert _text(await host.call_tool("bad__echo", {"message": "alive"})) == "alive"


async def test_ping_flood_over_http_is_answered(flood: FloodSize) -> None:
    """Server requests on an SSE response are answered (each answer is a POST back)."""
    count = 500
    ping = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
    async with hostile_http("bad") as bad:
        config = HostConfig(policy=ALLOW_ALL, servers=[bad])
        async with open_host(config) as host:
            await host.call_tool("bad__act", {"actions": [{"send": ping, "count": count}]})
            with trio.fail_after(60):
                while True:
                    stats = json.loads(_text(await host.call_tool("bad__stats", {})))
                    if stats["responses"] + stats["errors"] == count:
                        break
                    await trio.sleep(0.05)
            assert stats["responses"] == count
