"""The hostile-server suite (issue 14): one test per defect, floods with asserted bounds.

Why: agenthost supervises servers the user may not control. Each test here starts a real
hostile process (``hostile_server.py``, scripted per test) next to a healthy one and
checks that the host, the user and the other server come to no harm.

Sizes: floods run at :data:`CI` size by default, with bounds asserted on live tasks, RSS
growth and the latency of a healthy server during the flood; ``pytest --soak`` (``make
soak``) runs them at :data:`SOAK` size (the sizes of the issue) and prints the figures.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from agenthost.config.model import ServerConfig, Timeouts

__all__ = [
    "ADDED_LATENCY_GOAL",
    "CI",
    "HOSTILE_SERVER",
    "SOAK",
    "FloodSize",
    "LatencyProbe",
    "LoopWatch",
    "assert_healthy",
    "healthy_figures",
    "hostile",
    "hostile_http",
    "live_tasks",
    "percentile",
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


#: Modules whose bounds are wall-clock latencies without a ``flood`` fixture (ReDoS and
#: budget tests watch the event loop's gaps).
_LATENCY_MODULES = frozenset({"test_policy_hostile.py"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the latency-bounded tests here ``serial``: `make test` runs them alone.

    Why: their healthy-server latency and event-loop bounds are wall-clock figures; next
    to other xdist workers' server processes on a 2-core machine they measure the
    neighbours, not the host. The Makefile's second pytest phase runs ``-m serial`` in one
    process, after the parallel phase, so they keep their meaning (and keep running in CI).
    """
    here = Path(__file__).resolve().parent
    for item in items:
        if here not in item.path.parents:
            continue
        if "flood" in getattr(item, "fixturenames", ()) or item.path.name in _LATENCY_MODULES:
            item.add_marker(pytest.mark.serial)


@pytest.fixture
def flood(request: pytest.FixtureRequest) -> Iterator[FloodSize]:
    """The flood sizes of this run (``--soak`` for the full ones); soak runs get more time.

    The objects alive before the test are frozen (``gc.freeze``) for its duration: a full
    collection walks every tracked object, and pytest's process holds every test module
    and fixture of the session, far more than a host does, so a flood's full collections
    would measure the suite's heap (50-65 ms here alone, more in the whole suite) rather
    than the host.
    """
    gc.collect()
    gc.freeze()
    try:
        if request.config.getoption("--soak"):
            request.node.add_marker(pytest.mark.timeout(600))
            yield SOAK
        else:
            yield CI
    finally:
        gc.unfreeze()


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


#: The issue's goal: another server's calls get < 100 ms added latency during a flood.
ADDED_LATENCY_GOAL = 0.1


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples``, nearest rank; inf when empty."""
    if not samples:
        return float("inf")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@attrs.define
class LatencyProbe:
    """Calls a healthy server's tool over and over and keeps each round trip's latency.

    Which statistic: the 90th percentile of the calls during a flood, minus the median of
    the quiet baseline. On this shared 2-core machine other processes can deschedule the
    host for 100 ms and more at any moment, so the worst call measures the machine, not
    the host; a stall of the host's own making that recurs (a parse per line, a batch
    handled all at once) delays far more than 10 % of the calls and shows in the 90th
    percentile. A single stall does not, so :class:`LoopWatch` measures those.
    """

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
        return percentile(self.samples, 0.5)

    def p90(self) -> float:
        return percentile(self.samples, 0.9)


@attrs.define
class LoopWatch:
    """Measures how long the host's own work keeps its event loop from a 5 ms timer.

    Each gap between two ticks is measured twice: in wall time, and in this process's CPU
    time (every thread). A stall the host makes (one long parse holding the GIL, a full
    garbage collection, a loop that never checkpoints) consumes the host's CPU for as
    long as it lasts; the same gap because other processes had the CPU costs the host
    nothing. So the stall of our own making is ``min(wall, cpu)`` of a gap, and its
    maximum can be held to the issue's 100 ms on a loaded machine too.
    """

    #: (wall seconds, CPU seconds) of each gap between ticks.
    gaps: list[tuple[float, float]] = attrs.field(factory=list)

    async def run(self) -> None:
        last, last_cpu = trio.current_time(), time.process_time()
        while True:
            await trio.sleep(0.005)
            now, cpu = trio.current_time(), time.process_time()
            self.gaps.append((now - last, cpu - last_cpu))
            last, last_cpu = now, cpu

    def worst_stall(self) -> float:
        """The longest gap the host's own work caused (seconds)."""
        return max((min(wall, cpu) for wall, cpu in self.gaps), default=0.0)

    def worst_gap(self) -> float:
        """The longest gap in wall time, whatever caused it (reported, not asserted)."""
        return max((wall for wall, _ in self.gaps), default=0.0)


def healthy_figures(base: float, probe: LatencyProbe, watch: LoopWatch) -> dict[str, Any]:
    """What a flood test reports about the healthy server and the host's loop."""
    return {
        "healthy_p90_added_ms": round((probe.p90() - base) * 1000, 1),
        "healthy_median_added_ms": round((probe.median() - base) * 1000, 1),
        "healthy_worst_ms": round(probe.worst() * 1000, 1),
        "healthy_calls": len(probe.samples),
        "loop_stall_own_ms": round(watch.worst_stall() * 1000, 1),
        "loop_gap_wall_ms": round(watch.worst_gap() * 1000, 1),
    }


def assert_healthy(base: float, probe: LatencyProbe, watch: LoopWatch) -> None:
    """The issue's goal, in statistics that hold on a loaded machine (see above)."""
    assert len(probe.samples) >= 10, probe.samples
    assert probe.p90() - base < ADDED_LATENCY_GOAL, healthy_figures(base, probe, watch)
    assert watch.worst_stall() < ADDED_LATENCY_GOAL, healthy_figures(base, probe, watch)


def report(flood: FloodSize, title: str, figures: dict[str, Any]) -> None:
    """Print the figures of a flood (shown with ``-s``; ``make soak`` passes it)."""
    shown = ", ".join(f"{k}={v}" for k, v in figures.items())
    print(f"\n[hostile{' soak' if flood.soak else ''}] {title}: {shown}")
