"""Running workers and reducing their figures: subprocesses, interleaving, paired ratios.

Why paired ratios: a round runs every variant once, back to back, so a slow spell of the
machine hits the variants of that round alike. The ratio of two clients is taken within
each round and the table shows the median of those per-round ratios, with their range as
the spread; a ratio of two medians taken from different rounds would not cancel the
machine's drift and hides how noisy the run was.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from bench.baseline import Baseline
from bench.clients import TS, server_argv
from bench.measure import BENCH_DIR, median

__all__ = [
    "REPO",
    "MiB",
    "Paired",
    "WorkerFailed",
    "child_env",
    "http_server",
    "interleave",
    "machine",
    "med",
    "paired",
    "run_child",
    "run_worker",
]

REPO: Path = BENCH_DIR.parent
MiB = 1024 * 1024


class WorkerFailed(Exception):
    """A benchmark subprocess failed; the message carries its stderr's tail."""


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def run_child(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: Path = REPO,
    env: dict[str, str] | None = None,
) -> tuple[float, int, str]:
    """Run ``argv`` to completion; return (wall seconds, peak RSS bytes, stdout).

    The peak RSS is ``wait4``'s: the child's, or a descendant's it waited for if larger.

    Raises:
        WorkerFailed: non-zero exit, or still running after ``timeout`` (then killed).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd,
            env=child_env() if env is None else env,
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        if proc.returncode != 0:
            tail = err.read().decode("utf-8", "replace")[-3000:]
            raise WorkerFailed(f"{' '.join(argv[:4])} ... exited {proc.returncode}:\n{tail}")
    return wall, usage.ru_maxrss * 1024, stdout


def node() -> str:
    """The Node the project pins (``node`` in package.json), else the one on PATH."""
    pinned = REPO / "node_modules" / ".bin" / "node"
    if pinned.exists():
        return str(pinned)
    found = shutil.which("node")
    if found is None:
        raise WorkerFailed("node is not on PATH: the TypeScript client and HTTP server need it")
    return found


def run_worker(spec: dict[str, Any], baseline: Baseline | None = None) -> dict[str, Any]:
    """One measurement in a fresh process: :mod:`bench.workers`, or Node for ``ts``.

    With ``baseline``, the worker imports the baseline tree's agenthost (and this tree's
    ``bench``); a worker that imported another one fails the run.
    """
    spec = {"deadline": 240, **spec}
    if spec["client"] == TS:
        spec.setdefault("server", server_argv(spec.get("server_args")))
        argv = [node(), str(BENCH_DIR / "ts_client.mjs"), json.dumps(spec)]
    else:
        argv = [sys.executable, "-m", "bench.workers", json.dumps(spec)]
    if baseline is None:
        _, _, stdout = run_child(argv, timeout=spec["deadline"] + 30)
    else:
        env = baseline.env(child_env())
        _, _, stdout = run_child(argv, timeout=spec["deadline"] + 30, cwd=baseline.overlay, env=env)
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    if baseline is not None and (wrong := baseline.check(result)):
        raise WorkerFailed(wrong)
    return result


def interleave(
    variants: Sequence[str], rounds: int, measure: Callable[[str], dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """Run ``measure(variant)`` for every variant, ``rounds`` times, rotating the order.

    ``result[v][r]`` is variant ``v`` in round ``r``: the pairs :func:`paired` compares.
    """
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for r in range(rounds):
        order = [*variants[r % len(variants) :], *variants[: r % len(variants)]]
        for variant in order:
            results[variant].append(measure(variant))
    return results


def med(samples: Sequence[dict[str, Any]], key: str) -> float:
    return median([s[key] for s in samples])


@attrs.frozen
class Paired:
    """The median of per-round ratios, and their range (the run's spread)."""

    ratio: float
    low: float
    high: float

    def __str__(self) -> str:
        if len({self.low, self.high}) == 1:
            return f"{self.ratio:.2f}x"
        return f"{self.ratio:.2f}x ({self.low:.2f}-{self.high:.2f})"


def paired(
    ours: Sequence[dict[str, Any]],
    ref: Sequence[dict[str, Any]],
    key: str | Callable[[dict[str, Any]], float],
) -> Paired:
    """Per-round ratios ``ours[r] / ref[r]`` of ``key`` (a result key or a function)."""
    get: Callable[[dict[str, Any]], float] = (
        (lambda s: float(s[key])) if isinstance(key, str) else key
    )
    ratios = [get(a) / get(b) for a, b in zip(ours, ref, strict=True)]
    return Paired(median(ratios), min(ratios), max(ratios))


def machine() -> str:
    """What ran the benchmark: CPU model, cores, Python and Node versions."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        node_version = subprocess.run(
            [node(), "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()
    except (WorkerFailed, OSError, subprocess.SubprocessError):
        node_version = "none"
    return f"{model}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, Node {node_version}"


@contextmanager
def http_server() -> Iterator[str]:
    """Run :file:`bench/http_server.mjs` on a free port; yield its base URL.

    One server for every client of a section, as the issue asks; it stops when its stdin
    closes (and is killed if it does not).
    """
    proc = subprocess.Popen(
        [node(), str(BENCH_DIR / "http_server.mjs"), "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = proc.stdout.readline().decode("ascii", "replace").split()
        if len(line) != 2 or line[0] != "listening":
            raise WorkerFailed(f"bench/http_server.mjs did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line[1])}"
    finally:
        proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
