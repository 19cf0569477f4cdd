"""The hostile-server suite (issue 14): one test per defect, floods with asserted bounds.

Why: agenthost supervises servers the user may not control. Each test here starts a real
hostile process (``hostile_server.py``, scripted per test) next to a healthy one and
checks that the host, the user and the other server come to no harm.

Sizes: floods run at :data:`CI` size by default, with bounds asserted on live tasks, RSS
growth and the latency of a healthy server during the flood; ``pytest --soak`` (``make
soak``) runs them at :data:`SOAK` size (the sizes of the issue) and prints the figures.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from agenthost.config import ServerConfig, Timeouts

__all__ = [
    "CI",
    "HOSTILE_SERVER",
    "SOAK",
    "FloodSize",
    "LatencyProbe",
    "hostile",
    "hostile_http",
    "live_tasks",
    "rss_bytes",
]

HOSTILE_SERVER = Path(__file__).resolve().parent / "hostile_server.py"


@attrs.frozen(kw_only=True)
class FloodSize:
    """How big each flood is."""

    requests: int
    notifications: int
    #: Size of the one-line batch of pings, in messages.
    batch: int
    #: The oversized line, in bytes.
    line_bytes: int
    soak: bool


CI: FloodSize = FloodSize(
    requests=20_000, notifications=20_000, batch=20_000, line_bytes=2 * 1024 * 1024, soak=False
)
SOAK: FloodSize = FloodSize(
    requests=300_000,
    notifications=100_000,
    batch=300_000,
    line_bytes=16 * 1024 * 1024,
    soak=True,
)


@pytest.fixture
def flood(request: pytest.FixtureRequest) -> FloodSize:
    """The flood sizes of this run (``--soak`` for the full ones); soak runs get more time."""
    if request.config.getoption("--soak"):
        request.node.add_marker(pytest.mark.timeout(600))
        return SOAK
    return CI


def hostile(name: str, config: dict[str, Any] | None = None, **kwargs: Any) -> ServerConfig:
    """A stdio ServerConfig for ``hostile_server.py`` scripted with ``config``."""
    args = [str(HOSTILE_SERVER)]
    if config:
        args.append(json.dumps(config))
    kwargs.setdefault("timeouts", Timeouts(request=20.0))
    return ServerConfig(
        name=name, transport="stdio", command=sys.executable, args=tuple(args), **kwargs
    )


@asynccontextmanager
async def hostile_http(
    name: str, config: dict[str, Any] | None = None, **kwargs: Any
) -> AsyncIterator[ServerConfig]:
    """Run ``hostile_server.py --http`` for the block; yields its ServerConfig."""
    from tests.conftest import free_port

    port = free_port()
    args = [sys.executable, str(HOSTILE_SERVER), "--http", str(port)]
    if config:
        args.append(json.dumps(config))
    process = await trio.lowlevel.open_process(
        args, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        with trio.fail_after(10):
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                        break
                except OSError:
                    await trio.sleep(0.02)
        kwargs.setdefault("timeouts", Timeouts(request=20.0))
        yield ServerConfig(
            name=name, transport="streamable-http", url=f"http://127.0.0.1:{port}/mcp", **kwargs
        )
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


def live_tasks() -> int:
    """Every task alive in this Trio run (walks the task tree from the root)."""
    count = 0
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        if task is None:
            continue
        count += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return count


def rss_bytes() -> int:
    """This process's resident set size now (Linux ``/proc``)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


@attrs.define
class LatencyProbe:
    """Calls a healthy server's tool over and over and keeps each round trip's latency."""

    samples: list[float] = attrs.field(factory=list)

    async def run(self, call: Any, *, interval: float = 0.01) -> None:
        while True:
            start = trio.current_time()
            await call()
            self.samples.append(trio.current_time() - start)
            await trio.sleep(interval)

    def worst(self) -> float:
        return max(self.samples) if self.samples else float("inf")

    def median(self) -> float:
        ordered = sorted(self.samples)
        return ordered[len(ordered) // 2] if ordered else float("inf")


def report(flood: FloodSize, title: str, figures: dict[str, Any]) -> None:
    """Print the figures of a flood (shown with ``-s``; ``make soak`` passes it)."""
    shown = ", ".join(f"{k}={v}" for k, v in figures.items())
    print(f"\n[hostile{' soak' if flood.soak else ''}] {title}: {shown}")
