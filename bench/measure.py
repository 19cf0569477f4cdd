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
