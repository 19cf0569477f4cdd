"""``python -m bench``: run every benchmark, print one table, write ``bench/RESULTS.md``.

Scheduling: every measurement runs in a fresh subprocess (:mod:`bench.workers`, or the
real ``agenthost`` CLI and :mod:`bench.sdk_call` for the whole-process figures), and
the variants of one measurement are interleaved round by round (A B C D, B C D A, ...),
so a slow spell of the machine hits every variant alike. Figures are medians over rounds;
ratios are medians of per-round paired ratios, shown with their range (the spread), and
the table's header says which machine ran it and its load average before and after.

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
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.baseline import base_variant, checkout, is_base, plain
from bench.clients import BLOCKING, CLIENTS, MODERN, TS
from bench.durable import durable
from bench.gateway import gateway
from bench.measure import BENCH_DIR, SERVER, median
from bench.report import TITLE, Row, render_markdown, render_text
from bench.runner import (
    REPO,
    MiB,
    WorkerFailed,
    http_server,
    interleave,
    machine,
    med,
    paired,
    run_child,
    run_worker,
)

__all__ = ["main"]

INFLIGHT = 64


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


def _with_baseline(args: argparse.Namespace, clients: list[str], ours: Sequence[str]) -> list[str]:
    """``clients``, and with ``--baseline`` the baseline's run of each of ``ours``."""
    return [*clients, *(map(base_variant, ours) if args.baseline_tree else ())]


def _run(args: argparse.Namespace, spec: dict[str, Any], variant: str) -> dict[str, Any]:
    """One worker for ``variant``: a client of this tree, or ``client@base`` (baseline's)."""
    tree = args.baseline_tree if is_base(variant) else None
    return run_worker({**spec, "client": plain(variant)}, tree)


def _vs_base(
    args: argparse.Namespace, res: dict[str, list[dict[str, Any]]], client: str, key: str
) -> str:
    """The "vs baseline" cell: ``client``'s figure over the baseline's, per round."""
    return str(paired(res[client], res[base_variant(client)], key)) if args.baseline_tree else ""


def throughput(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    # The 2026-07-28 path next to the initialize era it is compared with: in all rounds
    # but one of each rotation the pair runs back to back, so a slow spell of the machine
    # (per-round ratios of 0.71-1.48 with the two minutes apart) hits both alike.
    clients = _with_baseline(
        args, ["agenthost", MODERN, *CLIENTS[1:], TS, BLOCKING], ["agenthost", MODERN]
    )
    log(f"tool calls over stdio: {args.rounds} rounds x {', '.join(clients)}")
    spec = {"task": "throughput", "seq": args.seq, "conc": args.conc, "inflight": INFLIGHT}
    spec["warmup"] = args.warmup

    def one(client: str) -> dict[str, Any]:
        # The blocking client cannot overlap calls: sequential only.
        return _run(args, {**spec, **({"conc": 0} if client == BLOCKING else {})}, client)

    res = interleave(clients, args.rounds, one)

    def vs_base(key: str, client: str = "agenthost") -> str:
        return _vs_base(args, res, client, key)

    ah, trio_sdk, aio_sdk, floor, ts = (res[c] for c in (*CLIENTS, TS))
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
    rows = []
    for mode, key in (("sequential", "seq_calls_s"), ("64 in flight", "conc_calls_s")):
        vs_ts = paired(ah, ts, key)
        rows.append(
            Row(
                name=f"stdio calls/s {mode}",
                ours=_rate(med(ah, key)),
                reference=f"TypeScript SDK {_rate(med(ts, key))}; floor {_rate(med(floor, key))}"
                + (
                    f"; blocking I/O {_rate(med(res[BLOCKING], key))}"
                    if key.startswith("seq")
                    else ""
                ),
                ratio=str(vs_ts),
                target="TS x >= 1.2",
                passed=vs_ts.ratio >= 1.2,
                baseline=vs_base(key),
            )
        )
    for mode, key in (("sequential", "seq_calls_s"), ("64 in flight", "conc_calls_s")):
        # The same calls over MCP 2026-07-28, side by side with the initialize era.
        vs_legacy = paired(res[MODERN], ah, key)
        rows.append(
            Row(
                name=f"stdio calls/s {mode}, MCP 2026-07-28",
                ours=_rate(med(res[MODERN], key)),
                reference=f"initialize era {_rate(med(ah, key))}",
                ratio=str(vs_legacy),
                target="initialize era x >= 0.95",  # issue 26
                passed=vs_legacy.ratio >= 0.95,
                baseline=vs_base(key, MODERN),
            )
        )
    for mode, key, goal in (
        ("sequential", "seq_calls_s", 3.5),
        ("64 in flight", "conc_calls_s", 8),
    ):
        vs_sdk = paired(ah, trio_sdk, key)
        rows.append(
            Row(
                name=f"stdio calls/s {mode}, SDK",
                ours=_rate(med(ah, key)),
                reference=(
                    f"SDK trio {_rate(med(trio_sdk, key))}; asyncio {_rate(med(aio_sdk, key))}"
                ),
                ratio=str(vs_sdk),
                target=f"SDK trio x >= {goal}",
                passed=vs_sdk.ratio >= goal,
                baseline=vs_base(key),
            )
        )
    one_cpu = paired(pinned["agenthost"], pinned["sdk-trio"], "seq_calls_s")
    rows.append(
        Row(
            name="stdio calls/s sequential, one CPU",
            ours=_rate(med(pinned["agenthost"], "seq_calls_s")),
            reference=(
                f"SDK trio {_rate(med(pinned['sdk-trio'], 'seq_calls_s'))};"
                f" floor {_rate(med(pinned['floor'], 'seq_calls_s'))}"
            ),
            ratio=str(one_cpu),
            target="SDK trio x >= 3.5",
            passed=one_cpu.ratio >= 3.5,
        )
    )
    for q in ("p50", "p99"):
        key = f"seq_{q}_us"
        rows.append(
            Row(
                name=f"stdio latency {q} sequential",
                ours=_us(med(ah, key)),
                reference=(
                    f"TS {_us(med(ts, key))}; SDK trio {_us(med(trio_sdk, key))};"
                    f" floor {_us(med(floor, key))}; blocking {_us(med(res[BLOCKING], key))}"
                ),
                ratio=str(paired(ah, ts, key)),
                baseline=vs_base(key),
            )
        )
    for mode, key in (("sequential", "seq_cpu_us"), ("64 in flight", "conc_cpu_us")):
        vs_floor = paired(ah, floor, key)
        goal = key.startswith("conc")
        rows.append(
            Row(
                name=f"stdio client CPU/call {mode}",
                ours=_us(med(ah, key)),
                reference=(
                    f"floor {_us(med(floor, key))}; TS {_us(med(ts, key))};"
                    f" SDK trio {_us(med(trio_sdk, key))}"
                ),
                ratio=str(vs_floor),
                target="floor x <= 1.3" if goal else "",
                passed=vs_floor.ratio <= 1.3 if goal else None,
                baseline=vs_base(key),
            )
        )

    def wakeups(samples: list[dict[str, Any]]) -> str:
        return (
            f"{med(samples, 'conc_client_wakeups'):.3f} / {med(samples, 'conc_server_wakeups'):.3f}"
            f" ({_us(med(samples, 'conc_server_cpu_us'))})"
        )

    rows.append(
        Row(
            name="stdio wake-ups/call client/server (server CPU), 64 in flight",
            ours=wakeups(ah),
            reference=f"floor {wakeups(floor)}; TS {wakeups(ts)}",
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
        sdk_script = [sys.executable, str(BENCH_DIR / "sdk_call.py")]
        commands = {
            "agenthost": _cli_argv(config),
            "sdk": [*sdk_script, sys.executable, SERVER],
            # `agenthost tools` against the SDK listing the same server's tools.
            "agenthost tools": [*_cli_argv(config)[:-5], "tools", "--config", str(config)],
            "sdk tools": [*sdk_script, "--list", sys.executable, SERVER],
        }
        expected = {
            "agenthost": "hi",
            "sdk": "hi",
            "agenthost tools": "minimal__echo",
            "sdk tools": "echo",
        }

        def measure(variant: str) -> dict[str, Any]:
            wall, rss, out = run_child(commands[variant], timeout=60)
            if expected[variant] not in out:
                raise WorkerFailed(
                    f"{variant}: printed {out.strip()[:200]!r}, expected {expected[variant]!r}"
                )
            return {"wall": wall, "rss": rss}

        for variant in commands:  # warm the page cache; not measured
            measure(variant)
        res = interleave(list(commands), args.process_rounds, measure)
    wall, sdk_wall = med(res["agenthost"], "wall"), med(res["sdk"], "wall")
    rss, sdk_rss = med(res["agenthost"], "rss"), med(res["sdk"], "rss")
    vs_sdk = paired(res["agenthost"], res["sdk"], "wall")
    tools_wall, sdk_tools_wall = med(res["agenthost tools"], "wall"), med(res["sdk tools"], "wall")
    tools_rss, sdk_tools_rss = med(res["agenthost tools"], "rss"), med(res["sdk tools"], "rss")
    tools_vs_sdk = paired(res["agenthost tools"], res["sdk tools"], "wall")
    return [
        Row(
            name="one-call process wall time",
            ours=_ms(wall),
            reference=f"SDK script {_ms(sdk_wall)}",
            ratio=str(vs_sdk),
            target="SDK x <= 0.4",
            passed=vs_sdk.ratio <= 0.4,
        ),
        Row(
            name="one-call process peak RSS",
            ours=_mib(rss),
            reference=f"SDK script {_mib(sdk_rss)}",
            ratio=str(paired(res["agenthost"], res["sdk"], "rss")),
            target="<= 45 MiB",
            passed=rss <= 45 * MiB,
        ),
        Row(
            name="tools process wall time",
            ours=_ms(tools_wall),
            reference=f"SDK script {_ms(sdk_tools_wall)}",
            ratio=str(tools_vs_sdk),
            target="SDK x <= 0.4",
            passed=tools_vs_sdk.ratio <= 0.4,
        ),
        Row(
            name="tools process peak RSS",
            ours=_mib(tools_rss),
            reference=f"SDK script {_mib(sdk_tools_rss)}",
            ratio=str(paired(res["agenthost tools"], res["sdk tools"], "rss")),
            target="<= 45 MiB",
            passed=tools_rss <= 45 * MiB,
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


def http(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    """Streamable HTTP, JSON and SSE responses: one server shared by every client."""
    clients = _with_baseline(
        args, ["agenthost", "sdk-trio", "sdk-asyncio", TS, "floor"], ["agenthost"]
    )
    rows = []
    with http_server() as base:
        for mode in ("json", "sse"):
            log(f"tool calls over HTTP ({mode}): {args.http_rounds} rounds x {', '.join(clients)}")
            spec = {
                "task": "throughput",
                "url": f"{base}/{mode}",
                "seq": args.http_seq,
                "conc": args.http_conc,
                "inflight": INFLIGHT,
                "warmup": args.warmup,
            }
            res = interleave(
                clients,
                args.http_rounds,
                lambda c, spec=spec: _run(args, spec, c),  # type: ignore[misc]
            )
            ah, ts = res["agenthost"], res[TS]
            for inflight, key, cpu in (
                ("1", "seq_calls_s", "seq_cpu_us"),
                ("64", "conc_calls_s", "conc_cpu_us"),
            ):
                # The better of the SDK's two backends, round by round.
                sdk = [
                    {key: max(t[key], a[key])}
                    for t, a in zip(res["sdk-trio"], res["sdk-asyncio"], strict=True)
                ]
                name = f"HTTP {mode.upper()} calls/s, {inflight} in flight"
                vs_sdk, vs_ts = paired(ah, sdk, key), paired(ah, ts, key)
                reference = (
                    f"SDK trio {_rate(med(res['sdk-trio'], key))},"
                    f" asyncio {_rate(med(res['sdk-asyncio'], key))}"
                )
                rows += [
                    Row(
                        name=f"{name}, SDK",
                        ours=_rate(med(ah, key)),
                        reference=reference,
                        ratio=str(vs_sdk),
                        target="best SDK x >= 5",
                        passed=vs_sdk.ratio >= 5,
                        baseline=_vs_base(args, res, "agenthost", key),
                    ),
                    Row(
                        name=f"{name}, TS",
                        ours=_rate(med(ah, key)),
                        reference=f"TypeScript SDK {_rate(med(ts, key))}",
                        ratio=str(vs_ts),
                        target="TS x >= 2",  # issue 26
                        passed=vs_ts.ratio >= 2.0,
                        baseline=_vs_base(args, res, "agenthost", key),
                    ),
                    # The ceiling of the goals above against this server (issue 26): the
                    # floor client (bench/floor.py) over the same server, same rounds.
                    Row(
                        name=f"{name}, floor",
                        ours=_rate(med(ah, key)),
                        reference=(
                            f"floor {_rate(med(res['floor'], key))}"
                            f" = {paired(res['floor'], sdk, key)} the best SDK"
                        ),
                        ratio=str(paired(ah, res["floor"], key)),
                    ),
                    # "client CPU per request reported beside it" (issue 26): user +
                    # system time of the client process alone (the server is shared).
                    Row(
                        name=f"{name}, client CPU/call",
                        ours=_us(med(ah, cpu)),
                        reference=(
                            f"TS {_us(med(ts, cpu))}; floor {_us(med(res['floor'], cpu))};"
                            f" SDK trio {_us(med(res['sdk-trio'], cpu))},"
                            f" asyncio {_us(med(res['sdk-asyncio'], cpu))}"
                        ),
                        ratio=f"{paired(ah, ts, cpu)} TS",
                        baseline=_vs_base(args, res, "agenthost", cpu),
                    ),
                ]
    return rows


def _mb(size: int) -> str:
    return f"{size / MiB:g}"


def large(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    """Large tool results over stdio and SSE: time, client CPU and peak RSS per size."""
    sizes = [round(mb * MiB) for mb in args.large]
    clients = ["agenthost", "sdk-asyncio", TS]
    rows = []
    with http_server() as base:
        for transport, url in (("stdio", None), ("SSE", f"{base}/sse")):
            log(
                f"large results over {transport}: {', '.join(map(_mb, sizes))} MiB,"
                f" {args.large_rounds} rounds x {', '.join(clients)}"
            )
            res: dict[int, dict[str, list[dict[str, Any]]]] = {}
            for size in sizes:
                spec: dict[str, Any] = {
                    "task": "payload",
                    "result_bytes": size,
                    "repeats": args.large_repeats,
                    "budget": args.large_budget,
                }
                if url is not None:
                    spec["url"] = url
                res[size] = interleave(
                    clients,
                    args.large_rounds,
                    lambda c, spec=spec: run_worker({**spec, "client": c}),  # type: ignore[misc]
                )
            rows += _large_rows(transport, sizes, res)
    return rows


def _growth(sample: dict[str, Any]) -> float:
    return float(sample["rss_peak"] - sample["rss_base"])


def _large_rows(
    transport: str, sizes: list[int], res: dict[int, dict[str, list[dict[str, Any]]]]
) -> list[Row]:
    label = f"{transport} result {'/'.join(map(_mb, sizes))} MiB"
    small, mid, big = sizes[0], sizes[len(sizes) // 2], sizes[-1]

    def per_size(client: str, key: str | Callable[[dict[str, Any]], float], fmt: Any) -> str:
        get = (lambda s: s[key]) if isinstance(key, str) else key
        return " / ".join(fmt(median([get(s) for s in res[size][client]])) for size in sizes)

    def slope(client: str, key: str | Callable[[dict[str, Any]], float]) -> float:
        """Cost per byte at the largest size over cost per byte at the middle one."""
        get = (lambda s: s[key]) if isinstance(key, str) else key
        at = {size: median([get(s) for s in res[size][client]]) for size in (mid, big)}
        return (at[big] / big) / (at[mid] / mid) if at[mid] > 0 else float("inf")

    time_slope = slope("agenthost", "time_s")
    rss_slope = slope("agenthost", _growth)
    worst = median([_growth(s) for s in res[big]["agenthost"]]) / big
    cpu = paired(res[mid]["agenthost"], res[mid]["sdk-asyncio"], "cpu_s")
    return [
        Row(
            name=f"{label}: time",
            ours=per_size("agenthost", "time_s", _ms),
            reference=(
                f"SDK {per_size('sdk-asyncio', 'time_s', _ms)};"
                f" TS {per_size(TS, 'time_s', _ms)}; per byte {_mb(big)} vs {_mb(mid)} MiB"
            ),
            ratio=_x(time_slope),
            target="linear: x <= 1.5",
            passed=time_slope <= 1.5,
        ),
        Row(
            name=f"{label}: peak RSS",
            ours=per_size("agenthost", _growth, lambda b: f"+{_mib(b)}"),
            reference=(
                f"SDK {per_size('sdk-asyncio', _growth, _mib)};"
                f" TS {per_size(TS, _growth, _mib)}; linear {_x(rss_slope)}"
            ),
            ratio=f"{worst:.2f}x payload",
            target=f"payload x <= 3 at {_mb(big)} MiB, linear",
            passed=worst <= 3 and rss_slope <= 1.5,
        ),
        Row(
            name=f"{transport} result {_mb(mid)} MiB: client CPU",
            ours=_ms(med(res[mid]["agenthost"], "cpu_s")),
            reference=(
                f"SDK {_ms(med(res[mid]['sdk-asyncio'], 'cpu_s'))};"
                f" TS {_ms(med(res[mid][TS], 'cpu_s'))}; {_mb(small)} MiB:"
                f" {_ms(med(res[small]['agenthost'], 'cpu_s'))}"
            ),
            ratio=str(cpu),
            target="SDK x <= 1",
            passed=cpu.ratio <= 1,
        ),
    ]


def argument(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    log(f"1 MiB argument: {args.large_rounds} rounds")
    spec = {"task": "payload", "arg_bytes": MiB, "repeats": args.large_repeats, "budget": 60}
    res = interleave(
        ["agenthost", "sdk-trio"],
        args.large_rounds,
        lambda c: run_worker({**spec, "client": c}),
    )
    ours, ref = res["agenthost"], res["sdk-trio"]
    return [
        Row(
            name="1 MiB argument: time",
            ours=_ms(med(ours, "time_s")),
            reference=f"SDK trio {_ms(med(ref, 'time_s'))}",
            ratio=str(paired(ours, ref, "time_s")),
        ),
        Row(
            name="1 MiB argument: peak RSS",
            ours=f"+{_mib(median([_growth(s) for s in ours]))}",
            reference=f"SDK trio +{_mib(median([_growth(s) for s in ref]))}",
            ratio=str(paired(ours, ref, lambda s: max(_growth(s), 1.0))),
        ),
    ]


def close(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    """Leaving a session's block, the server exiting on stdin EOF (issue 12: < 50 ms)."""
    clients = ["agenthost", "sdk-asyncio", "floor", TS]
    log(f"closing a stdio session: {args.close_rounds} rounds x {', '.join(clients)}")
    res = interleave(
        clients, args.close_rounds, lambda c: run_worker({"task": "close", "client": c})
    )
    ours = med(res["agenthost"], "close_s")
    return [
        Row(
            name="stdio session close",
            ours=_ms(ours),
            reference=(
                f"SDK asyncio {_ms(med(res['sdk-asyncio'], 'close_s'))};"
                f" TS {_ms(med(res[TS], 'close_s'))}; floor {_ms(med(res['floor'], 'close_s'))}"
            ),
            ratio=str(paired(res["agenthost"], res["floor"], "close_s")) + " floor",
            target="<= 50 ms",
            passed=ours <= 0.05,
        )
    ]


def era_probe(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    """What ``protocol = "auto"`` (probe for 2026-07-28 first) costs on a legacy server:
    at first contact (it probes) and once the era is cached."""
    name = 'era probe on a legacy server: connect, "auto" vs "legacy"'
    variants = ["probe", "cached", "legacy"]
    log(f"era probe: {args.close_rounds} rounds x {', '.join(variants)}")
    res = interleave(
        variants,
        args.close_rounds,
        lambda era: run_worker({"task": "connect", "client": "agenthost", "era": era}),
    )

    def cost(variant: str) -> str:
        diffs = sorted(
            a["ready_s"] - b["ready_s"] for a, b in zip(res[variant], res["legacy"], strict=True)
        )
        return f"{median(diffs) * 1e3:+.1f} ms ({diffs[0] * 1e3:+.1f}..{diffs[-1] * 1e3:+.1f})"

    return [
        Row(
            name=name,
            ours=f"{_ms(med(res['probe'], 'ready_s'))} first, {_ms(med(res['cached'], 'ready_s'))}"
            " cached",
            reference=(
                f"legacy {_ms(med(res['legacy'], 'ready_s'))}; the probe costs {cost('probe')},"
                f" the cached era {cost('cached')}"
            ),
            ratio=str(paired(res["probe"], res["legacy"], "ready_s")),
        )
    ]


def soak(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    """One session, many calls: RSS after warm-up must stay flat, pending state empty."""
    every = max(1, args.soak // 10)
    log(f"soak: {args.soak:,} calls, {INFLIGHT} in flight, sampled every {every:,}")
    result = run_worker(
        {
            "task": "soak",
            "client": "agenthost",
            "calls": args.soak,
            "every": every,
            "inflight": INFLIGHT,
            "deadline": 3600,
        }
    )
    samples = result["samples"]
    warm = samples[0]  # after the first tenth: caches and free lists are filled by then
    growth = max(s["rss"] for s in samples) - warm["rss"]
    pending = max(s["pending"] for s in samples)
    rate = samples[-1]["calls"] / samples[-1]["wall_s"]
    return [
        Row(
            name=f"soak {args.soak:,} calls: RSS after warm-up",
            ours=f"+{_mib(growth)}, pending {pending}",
            reference=f"RSS {_mib(warm['rss'])} at {warm['calls']:,} calls; {_rate(rate)}",
            target="<= +1 MiB, pending 0",
            passed=growth <= MiB and pending == 0,
        )
    ]


# ---------------------------------------------------------------------------- main


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("fan-out sizes must be positive integers")
    return sizes


def _mib_sizes(text: str) -> list[float]:
    try:
        sizes = sorted({float(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if len(sizes) < 2 or sizes[0] <= 0:
        raise argparse.ArgumentTypeError("give at least two positive sizes in MiB")
    return sizes


#: Every section, in table order, by the name ``--only`` takes.
SECTIONS: dict[str, Callable[[argparse.Namespace, Callable[[str], None]], list[Row]]] = {
    "stdio": throughput,
    "http": http,
    "large": large,
    "argument": argument,
    "close": close,
    "era": era_probe,
    "process": whole_process,
    "fanout": fan_out,
    "sampling": sampling,
    "gateway": gateway,
    "soak": soak,
    "durable": durable,
}
#: Sections that run only when named (``--only durable``): they need more than a client
#: and a server (a Temporal dev server and worker processes) and take minutes.
ON_REQUEST = frozenset({"durable"})


def _sections(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in SECTIONS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown section {', '.join(unknown) or text!r}; known: {', '.join(SECTIONS)}"
        )
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts: a smoke test")
    parser.add_argument(
        "--only",
        type=_sections,
        default=[name for name in SECTIONS if name not in ON_REQUEST],
        help="e.g. stdio,http; durable (Temporal) runs only when named",
    )
    parser.add_argument("--durable-runs", type=int, default=200, help="runs submitted at once")
    parser.add_argument("--durable-rounds", type=int, default=3, help="local runs timed")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the stdio calls")
    parser.add_argument("--seq", type=int, default=3000, help="sequential calls per round")
    parser.add_argument("--conc", type=int, default=20000, help="calls per round, 64 in flight")
    parser.add_argument("--warmup", type=int, default=3000, help="untimed calls first (V8)")
    # 5 rounds of 3000: with 3 of 1000 (a quarter second each) one round's noise moved the
    # median ratio of the 1-in-flight rows by a fifth (issue 26: 3.26-5.04x in one run).
    parser.add_argument("--http-rounds", type=int, default=5)
    parser.add_argument("--http-seq", type=int, default=3000, help="sequential HTTP calls")
    parser.add_argument("--http-conc", type=int, default=5000, help="HTTP calls, 64 in flight")
    parser.add_argument("--large", type=_mib_sizes, default=[1, 8, 32], help="MiB, e.g. 1,8,32")
    parser.add_argument("--large-rounds", type=int, default=3)
    parser.add_argument("--large-repeats", type=int, default=3, help="calls per round and size")
    parser.add_argument(
        "--large-budget", type=float, default=60, help="seconds of calls per worker, at most"
    )
    parser.add_argument("--close-rounds", type=int, default=7)
    parser.add_argument("--process-rounds", type=int, default=7)
    parser.add_argument("--fanout", type=_sizes, default=[1, 10, 50], help="e.g. 1,10,50")
    parser.add_argument("--fanout-rounds", type=int, default=3)
    parser.add_argument("--sampling", type=int, default=500, help="sampling requests per round")
    parser.add_argument("--sampling-rounds", type=int, default=3)
    parser.add_argument("--gateway-rounds", type=int, default=3)
    parser.add_argument("--gateway-calls", type=int, default=3200, help="calls per route")
    parser.add_argument("--soak", type=int, default=1_000_000, help="calls in the soak run")
    parser.add_argument(
        "--output", default=str(BENCH_DIR / "RESULTS.md"), help="markdown file ('' for none)"
    )
    parser.add_argument(
        "--readme", action="store_true", help="also replace the table in docs/performance.md"
    )
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="a git revision or a directory: its agenthost runs beside this one in the stdio"
        " and http sections, round by round, and a 'vs baseline' column shows new/baseline",
    )
    args = parser.parse_args(argv)
    args.baseline_tree = None  # the checked-out Baseline, set by main()
    if args.quick:
        args.rounds, args.seq, args.conc, args.warmup = 1, 50, 256, 10
        args.http_rounds, args.http_seq, args.http_conc = 1, 20, 128
        args.large_rounds, args.large_repeats = 1, 1
        if args.large == [1, 8, 32]:
            args.large = [0.0625, 0.25]
        args.close_rounds = args.process_rounds = args.fanout_rounds = args.sampling_rounds = 1
        args.sampling = 20
        args.gateway_rounds, args.gateway_calls = 1, 128
        if args.soak == 1_000_000:
            args.soak = 2000
        if args.fanout == [1, 10, 50]:
            args.fanout = [1, 3]
        if args.durable_runs == 200:
            args.durable_runs = 4
    return args


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (5 min {five:.2f})"


README_START = "<!-- bench:table -->"
README_END = "<!-- /bench:table -->"


def _update_readme(text: str) -> None:
    readme = REPO / "docs" / "performance.md"  # the README keeps a summary that links here
    content = readme.read_text(encoding="utf-8")
    head, sep, rest = content.partition(README_START)
    _, sep2, tail = rest.partition(README_END)
    if not sep or not sep2:
        raise WorkerFailed(f"{readme} has no {README_START} ... {README_END} block")
    readme.write_text(f"{head}{README_START}\n{text}\n{README_END}{tail}", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def log(text: str) -> None:
        print(f"[bench] {text}", file=sys.stderr, flush=True)

    for package in ("agenthost", "providers", "policies", "bench"):
        compileall.compile_dir(REPO / package, quiet=1)
    load_before = _load()
    started = time.perf_counter()
    rows: list[Row] = []
    try:
        where = machine()
        with ExitStack() as stack:
            if args.baseline:
                args.baseline_tree = stack.enter_context(checkout(args.baseline))
                log(f"baseline: {args.baseline_tree.label} at {args.baseline_tree.root}")
            for name in args.only:
                rows += SECTIONS[name](args, log)
    except ValueError as exc:  # a --baseline that names nothing
        print(f"benchmark: {exc}", file=sys.stderr)
        return 2
    except WorkerFailed as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - started
    note = (
        f"{time.strftime('%Y-%m-%d %H:%M %Z')} on {where}; load average {load_before}"
        f" before, {_load()} after; {'quick' if args.quick else 'full'} run in"
        f" {elapsed:.0f} s; {args.rounds} interleaved rounds (stdio calls),"
        f" {args.http_rounds} (HTTP), {args.large_rounds} (large results),"
        f" {args.process_rounds} (process). Ratios are medians of per-round ratios, with"
        " their range in brackets."
        + (
            f" 'vs baseline': this tree over {args.baseline_tree.label}, run in the same rounds."
            if args.baseline_tree
            else ""
        )
    )
    print(f"\n{TITLE}\n{note}\n")
    print(render_text(rows))
    misses = sum(row.passed is False for row in rows)
    print(f"\n{sum(row.passed is True for row in rows)} PASS, {misses} MISS")
    table = f"{note}\n\n{render_markdown(rows)}"
    if args.output:
        Path(args.output).write_text(f"# {TITLE}\n\n{table}\n", encoding="utf-8")
    if args.readme:
        try:
            _update_readme(table)
        except WorkerFailed as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
