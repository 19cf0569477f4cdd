"""``python -m bench``: run every benchmark, print one table, write ``bench/RESULTS.md``.

Scheduling: every measurement runs in a fresh subprocess (:mod:`bench.workers`, or the
real ``agenthost`` CLI and :mod:`bench.sdk_call` for the whole-process figures), and
the variants of one measurement are interleaved round by round (A B C D, B C D A, ...),
so a slow spell of the machine hits every variant alike. Figures are medians over rounds;
ratios are ratios of medians from the same run.

Before measuring, the project's own packages are byte-compiled (``compileall``): an
installed package ships its ``.pyc`` files, like the SDK in site-packages does, and a
checkout run with ``PYTHONDONTWRITEBYTECODE`` would otherwise recompile every module on
every start and distort the start-up figures.

Exit status: 0 when every measurement ran (whether or not it met its target), 1 when a
worker failed (its stderr is shown), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.clients import BLOCKING, CLIENTS
from bench.measure import BENCH_DIR, SERVER, median
from bench.report import TITLE, Row, render_markdown, render_text

__all__ = ["main"]

REPO = BENCH_DIR.parent
INFLIGHT = 64
MiB = 1024 * 1024


class WorkerFailed(Exception):
    """A benchmark subprocess failed; the message carries its stderr's tail."""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def run_child(argv: Sequence[str], *, timeout: float) -> tuple[float, int, str]:
    """Run ``argv`` to completion; return (wall seconds, peak RSS bytes, stdout).

    The peak RSS is ``wait4``'s: the child's, or a descendant's it waited for if larger.

    Raises:
        WorkerFailed: non-zero exit, or still running after ``timeout`` (then killed).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=REPO, env=_child_env()
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


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    spec = {"deadline": 240, **spec}
    argv = [sys.executable, "-m", "bench.workers", json.dumps(spec)]
    _, _, stdout = run_child(argv, timeout=spec["deadline"] + 30)
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return result


def interleave(
    variants: Sequence[str], rounds: int, measure: Callable[[str], dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """Run ``measure(variant)`` for every variant, ``rounds`` times, rotating the order."""
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for r in range(rounds):
        order = [*variants[r % len(variants) :], *variants[: r % len(variants)]]
        for variant in order:
            results[variant].append(measure(variant))
    return results


def med(samples: Sequence[dict[str, Any]], key: str) -> float:
    return median([s[key] for s in samples])


# ---------------------------------------------------------------------------- formatting


def _rate(value: float) -> str:
    return f"{value:,.0f}/s"


def _us(value: float) -> str:
    return f"{value:,.1f} us" if value < 100 else f"{value:,.0f} us"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds < 0.1 else f"{seconds * 1e3:,.0f} ms"


def _mib(nbytes: float) -> str:
    return f"{nbytes / MiB:,.1f} MiB"


def _x(value: float) -> str:
    return f"{value:.2f}x"


# ---------------------------------------------------------------------------- sections


def throughput(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    log(f"tool calls over stdio: {args.rounds} rounds x {', '.join(CLIENTS)}")
    spec = {"task": "throughput", "seq": args.seq, "conc": args.conc, "inflight": INFLIGHT}
    spec["warmup"] = args.warmup

    def one(client: str) -> dict[str, Any]:
        # The blocking client cannot overlap calls: sequential only.
        return run_worker({**spec, "client": client, **({"conc": 0} if client == BLOCKING else {})})

    res = interleave([*CLIENTS, BLOCKING], args.rounds, one)
    ah, trio_sdk, aio_sdk, floor = (res[c] for c in CLIENTS)
    seq, conc = med(ah, "seq_calls_s"), med(ah, "conc_calls_s")
    sdk_seq, sdk_conc = med(trio_sdk, "seq_calls_s"), med(trio_sdk, "conc_calls_s")
    aio_seq, aio_conc = med(aio_sdk, "seq_calls_s"), med(aio_sdk, "conc_calls_s")
    ceiling = med(res[BLOCKING], "seq_calls_s")
    # The same sequential loop with client and server sharing one CPU: no cross-CPU
    # wake-ups (the larger part of a round trip on a 2-vCPU VM), so it weighs what the
    # clients themselves cost.
    cpu = max(os.sched_getaffinity(0))
    pinned_clients = ["agenthost", "sdk-trio", "floor"]
    log(f"sequential calls on one CPU ({cpu}): {args.rounds} rounds x {', '.join(pinned_clients)}")
    pinned = interleave(
        pinned_clients,
        args.rounds,
        lambda c: run_worker({**spec, "client": c, "conc": 0, "cpu": cpu}),
    )
    one_seq, one_sdk = (
        med(pinned["agenthost"], "seq_calls_s"),
        med(pinned["sdk-trio"], "seq_calls_s"),
    )
    rows = [
        Row(
            name="calls/s sequential",
            ours=_rate(seq),
            reference=(
                f"SDK trio {_rate(sdk_seq)}; blocking I/O {_rate(ceiling)}"
                f" = {_x(ceiling / sdk_seq)}, the ceiling here"
            ),
            ratio=_x(seq / sdk_seq),
            target="SDK trio x >= 3.5",
            passed=seq / sdk_seq >= 3.5,
        ),
        Row(
            name="calls/s sequential, one CPU",
            ours=_rate(one_seq),
            reference=(
                f"SDK trio {_rate(one_sdk)}; floor {_rate(med(pinned['floor'], 'seq_calls_s'))}"
            ),
            ratio=_x(one_seq / one_sdk),
            target="SDK trio x >= 3.5",
            passed=one_seq / one_sdk >= 3.5,
        ),
        Row(
            name="calls/s 64 in flight",
            ours=_rate(conc),
            reference=f"SDK trio {_rate(sdk_conc)}",
            ratio=_x(conc / sdk_conc),
            target="SDK trio x >= 8",
            passed=conc / sdk_conc >= 8,
        ),
    ]
    for q in ("p50", "p99"):
        ours, ref = med(ah, f"seq_{q}_us"), med(trio_sdk, f"seq_{q}_us")
        rows.append(
            Row(
                name=f"latency {q} sequential",
                ours=_us(ours),
                reference=(
                    f"SDK trio {_us(ref)}; floor {_us(med(floor, f'seq_{q}_us'))};"
                    f" blocking {_us(med(res[BLOCKING], f'seq_{q}_us'))}"
                ),
                ratio=_x(ours / ref),
            )
        )
    rows += [
        Row(
            name="calls/s sequential, SDK asyncio",
            ours=_rate(seq),
            reference=f"SDK asyncio {_rate(aio_seq)}",
            ratio=_x(seq / aio_seq),
        ),
        Row(
            name="calls/s 64 in flight, SDK asyncio",
            ours=_rate(conc),
            reference=f"SDK asyncio {_rate(aio_conc)}",
            ratio=_x(conc / aio_conc),
        ),
    ]
    for mode, key in (("sequential", "seq_cpu_us"), ("64 in flight", "conc_cpu_us")):
        ours, ref = med(ah, key), med(floor, key)
        rows.append(
            Row(
                name=f"client CPU/call {mode}",
                ours=_us(ours),
                reference=f"floor {_us(ref)}; SDK trio {_us(med(trio_sdk, key))}",
                ratio=_x(ours / ref),
                target="floor x <= 2.5",
                passed=ours / ref <= 2.5,
            )
        )
    return rows


def _cli_argv(config: Path) -> list[str]:
    script = Path(sys.executable).with_name("agenthost")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "agenthost"]
    return [*command, "call", "minimal__echo", '{"message":"hi"}', "--config", str(config)]


def whole_process(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    log(f"one call, process start to exit: {args.process_rounds} rounds")
    with tempfile.TemporaryDirectory(prefix="agenthost-bench-") as tmp:
        config = Path(tmp, "agenthost.toml")
        config.write_text(
            "[servers.minimal]\n"
            f"command = {json.dumps(sys.executable)}\n"
            f"args = [{json.dumps(SERVER)}]\n"
            "trusted = true\n\n"
            '[policy]\nmode = "headless"\npreset = "headless-trusted"\n',
            encoding="utf-8",
        )
        commands = {
            "agenthost": _cli_argv(config),
            "sdk": [sys.executable, str(BENCH_DIR / "sdk_call.py"), sys.executable, SERVER],
        }

        def measure(variant: str) -> dict[str, Any]:
            wall, rss, out = run_child(commands[variant], timeout=60)
            if out.strip() != "hi":
                raise WorkerFailed(f"{variant}: printed {out.strip()[:200]!r}, expected 'hi'")
            return {"wall": wall, "rss": rss}

        for variant in commands:  # warm the page cache; not measured
            measure(variant)
        res = interleave(list(commands), args.process_rounds, measure)
    wall, sdk_wall = med(res["agenthost"], "wall"), med(res["sdk"], "wall")
    rss, sdk_rss = med(res["agenthost"], "rss"), med(res["sdk"], "rss")
    return [
        Row(
            name="one-call process wall time",
            ours=_ms(wall),
            reference=f"SDK script {_ms(sdk_wall)}",
            ratio=_x(wall / sdk_wall),
            target="SDK x <= 0.4",
            passed=wall / sdk_wall <= 0.4,
        ),
        Row(
            name="one-call process peak RSS",
            ours=_mib(rss),
            reference=f"SDK script {_mib(sdk_rss)}",
            ratio=_x(rss / sdk_rss),
            target="<= 45 MiB",
            passed=rss <= 45 * MiB,
        ),
    ]


def fan_out(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    sizes: list[int] = args.fanout
    log(f"fan-out: {', '.join(map(str, sizes))} servers, {args.fanout_rounds} rounds")
    res: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for n in sizes:
        res[n] = interleave(
            ["agenthost", "sdk-asyncio", "floor"],
            args.fanout_rounds,
            lambda c, n=n: run_worker({"task": "fanout", "client": c, "servers": n}),  # type: ignore[misc]
        )
    one = med(res[1]["agenthost"], "ready_s") if 1 in res else None
    floor_one = med(res[1]["floor"], "ready_s") if 1 in res else None
    rows = []
    for n in sizes:
        ours, ref = med(res[n]["agenthost"], "ready_s"), med(res[n]["sdk-asyncio"], "ready_s")
        floor = med(res[n]["floor"], "ready_s")
        last = n == max(sizes) and one is not None and n > 1
        reference = f"SDK asyncio {_ms(ref)}; floor {_ms(floor)}"
        if last and floor_one:
            # Each server's interpreter start is CPU work; n of them on a few cores take
            # n/cores times one, whoever starts them. The floor shows it.
            reference += f" = {floor / floor_one:.1f}x its 1 server"
        rows.append(
            Row(
                name=f"fan-out ready, {n} server{'s' if n > 1 else ''}",
                ours=_ms(ours),
                reference=reference,
                ratio=f"{ours / one:.2f}x 1 server" if last and one else _x(ours / ref),
                target="1 server x <= 1.5" if last else "",
                passed=(ours / one <= 1.5) if last and one else None,
            )
        )
    top = max(sizes)

    def per_session(samples: list[dict[str, Any]]) -> float:
        return median([(s["rss_peak"] - s["rss_base"]) / top for s in samples])

    ours, ref = per_session(res[top]["agenthost"]), per_session(res[top]["sdk-asyncio"])
    rows.append(
        Row(
            name=f"fan-out client RSS per session, {top}",
            ours=f"{ours / 1024:,.0f} KiB",
            reference=f"SDK asyncio {ref / 1024:,.0f} KiB",
            ratio=_x(ours / ref) if ref > 0 else "",
        )
    )
    return rows


def sampling(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    log(f"sampling path: {args.sampling} requests x {args.sampling_rounds} rounds")
    res = interleave(
        ["agenthost"],
        args.sampling_rounds,
        lambda c: run_worker({"task": "sampling", "client": c, "n": args.sampling}),
    )["agenthost"]
    rows = []
    for leg, label in (("in", "request in -> provider call"), ("out", "answer -> response out")):
        p50, p99 = med(res, f"{leg}_p50_us"), med(res, f"{leg}_p99_us")
        rows.append(
            Row(
                name=f"sampling overhead {leg} (p50/p99)",
                ours=f"{_us(p50)} / {_us(p99)}",
                reference=label,
                target="p50 <= 1 ms",
                passed=p50 <= 1000,
            )
        )
    return rows


def payloads(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    log(f"large payloads: {args.payload_rounds} rounds")
    rows = []
    cases = (
        ("10 MiB result", {"result_bytes": 10 * MiB}, 10 * MiB),
        ("1 MiB argument", {"arg_bytes": MiB}, MiB),
    )
    for label, extra, size in cases:
        spec = {"task": "payload", "repeats": args.payload_repeats, **extra}
        res = interleave(
            ["agenthost", "sdk-trio"],
            args.payload_rounds,
            lambda c, spec=spec: run_worker({**spec, "client": c}),  # type: ignore[misc]
        )
        ours, ref = med(res["agenthost"], "time_s"), med(res["sdk-trio"], "time_s")
        rows.append(
            Row(
                name=f"{label}: time",
                ours=_ms(ours),
                reference=f"SDK trio {_ms(ref)}",
                ratio=_x(ours / ref),
            )
        )

        def growth(samples: list[dict[str, Any]]) -> float:
            return median([s["rss_peak"] - s["rss_base"] for s in samples])

        ours_rss, ref_rss = growth(res["agenthost"]), growth(res["sdk-trio"])
        big = size >= 10 * MiB
        rows.append(
            Row(
                name=f"{label}: peak RSS",
                ours=f"+{_mib(ours_rss)} ({ours_rss / size:.1f}x payload)",
                reference=f"SDK trio +{_mib(ref_rss)} ({ref_rss / size:.1f}x)",
                ratio=_x(ours_rss / ref_rss) if ref_rss > 0 else "",
                target="payload x <= 4" if big else "",
                passed=ours_rss <= 4 * size if big else None,
            )
        )
    return rows


# ---------------------------------------------------------------------------- main


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("fan-out sizes must be positive integers")
    return sizes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts: a smoke test")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the call benchmark")
    parser.add_argument("--seq", type=int, default=3000, help="sequential calls per round")
    parser.add_argument("--conc", type=int, default=20000, help="calls per round, 64 in flight")
    parser.add_argument("--warmup", type=int, default=300, help="untimed calls first")
    parser.add_argument("--process-rounds", type=int, default=7)
    parser.add_argument("--fanout", type=_sizes, default=[1, 10, 50], help="e.g. 1,10,50")
    parser.add_argument("--fanout-rounds", type=int, default=3)
    parser.add_argument("--sampling", type=int, default=500, help="sampling requests per round")
    parser.add_argument("--sampling-rounds", type=int, default=3)
    parser.add_argument("--payload-rounds", type=int, default=3)
    parser.add_argument("--payload-repeats", type=int, default=5, help="calls per round")
    parser.add_argument(
        "--output", default=str(BENCH_DIR / "RESULTS.md"), help="markdown file ('' for none)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.seq, args.conc, args.warmup = 1, 50, 256, 10
        args.process_rounds = args.fanout_rounds = args.sampling_rounds = 1
        args.payload_rounds, args.payload_repeats, args.sampling = 1, 1, 20
        if args.fanout == [1, 10, 50]:
            args.fanout = [1, 3]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def log(text: str) -> None:
        print(f"[bench] {text}", file=sys.stderr, flush=True)

    for package in ("agenthost", "providers", "policies", "bench"):
        compileall.compile_dir(REPO / package, quiet=1)
    started = time.perf_counter()
    rows: list[Row] = []
    try:
        for section in (throughput, whole_process, fan_out, sampling, payloads):
            rows += section(args, log)
    except WorkerFailed as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - started
    cores = os.cpu_count() or 0
    note = (
        f"{time.strftime('%Y-%m-%d')}, {cores} cores, Python {sys.version.split()[0]},"
        f" {'quick' if args.quick else 'full'} run in {elapsed:.0f} s; medians of"
        f" {args.rounds} interleaved rounds (calls), {args.process_rounds} (process)."
    )
    print(f"\n{TITLE} ({note})\n")
    print(render_text(rows))
    misses = sum(row.passed is False for row in rows)
    print(f"\n{sum(row.passed is True for row in rows)} PASS, {misses} MISS")
    if args.output:
        Path(args.output).write_text(
            f"# {TITLE}\n\n{note}\n\n{render_markdown(rows)}\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
