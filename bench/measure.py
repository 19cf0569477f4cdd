"""Measuring helpers shared by the parent and the workers: percentiles, RSS, CPU time.

Why their own module: the workers import it before the client under test, so it must be
cheap (stdlib only) and must not drag in agenthost or mcp, which would spoil the import
and RSS figures of the other side.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

__all__ = [
    "BENCH_DIR",
    "SERVER",
    "Wakeups",
    "cpu_seconds",
    "current_rss",
    "median",
    "peak_rss",
    "percentile",
    "reset_peak_rss",
]

BENCH_DIR: Final = Path(__file__).resolve().parent
#: The SDK-free server every benchmark talks to.
SERVER: Final = str(BENCH_DIR / "minimal_server.py")

_STATUS: Final = "/proc/self/status"


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty sample."""
    if not values:
        raise ValueError("percentile of an empty sample")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil without floats drifting
    return ordered[min(len(ordered), int(rank)) - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def cpu_seconds() -> float:
    """CPU time (user + system) of this process alone, not of its children (the server)."""
    return time.process_time()


class Wakeups:
    """Context switches of this process and CPU time and switches of its children (the
    server), so far: counts that load on the machine hardly moves.

    Why: on a busy machine calls/s and even CPU time swing by half from one round to the
    next, but how often the client and the server had to be woken per call is what the
    client's batching decides, and it changes only with the code. Linux only (zeros
    elsewhere).
    """

    def __init__(self) -> None:
        self.client_switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
        self.server_cpu, self.server_switches = _children()

    def per_call(self, calls: int) -> dict[str, float]:
        """The counts since ``self`` was taken, per call, as result keys."""
        now = Wakeups()
        return {
            "client_wakeups": (now.client_switches - self.client_switches) / calls,
            "server_wakeups": (now.server_switches - self.server_switches) / calls,
            "server_cpu_us": (now.server_cpu - self.server_cpu) / calls * 1e6,
        }


def _children() -> tuple[float, int]:
    """CPU seconds and voluntary context switches of this process's live children."""
    cpu, switches = 0.0, 0
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return cpu, switches
    pids: set[str] = set()
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children", encoding="ascii") as children:
                pids.update(children.read().split())
        except OSError:
            continue
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            cpu += (int(fields[11]) + int(fields[12])) / tick
            with open(f"/proc/{pid}/status", encoding="ascii") as status:
                for line in status:
                    if line.startswith("voluntary_ctxt_switches:"):
                        switches += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return cpu, switches


def _status_kib(field: str) -> int | None:
    try:
        with open(_STATUS, encoding="ascii") as status:
            for line in status:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def current_rss() -> int:
    """Resident set size of this process now, in bytes."""
    kib = _status_kib("VmRSS:")
    if kib is None:  # not Linux: the peak is the best we have
        return peak_rss()
    return kib * 1024


def peak_rss() -> int:
    """Peak resident set size of this process (since the last :func:`reset_peak_rss`)."""
    kib = _status_kib("VmHWM:")
    if kib is None:
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib * 1024


def reset_peak_rss() -> bool:
    """Reset the peak RSS counter (Linux ``clear_refs``), so a peak belongs to one step.

    Returns False where that is impossible; the peak then covers the whole process.
    """
    try:
        with open(f"/proc/{os.getpid()}/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:
        return False
    return True
