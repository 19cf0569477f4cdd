"""A proxied ``tools/call`` through ``agenthost serve`` against the direct call (issue 24).

Same echo server (bench/minimal_server.py), same client (agenthost's own session): once
straight to the server, once through ``agenthost serve`` on stdio, once through ``serve
--http``; calls/s with 1 and 64 calls in flight, and the gateway process's CPU per call
(user + system time from ``/proc/PID/stat``, Linux). The gateway runs headless with a
rule allowing every tool, so each call also passes the policy (and writes no audit).

Usage: ``python -m bench.gateway [--calls N] [--json]``; in the main benchmark it is the
``gateway`` section (:func:`gateway`: ``python -m bench --only gateway``), which runs this
script in a fresh process per round and puts its figures in the table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from agenthost.config.model import ServerConfig
from agenthost.connection import connect
from bench.measure import median
from bench.report import Row
from bench.runner import paired, run_child

__all__ = ["ROUTES", "gateway"]

#: The ways a call goes, as named in the table (bench.report.row_names lists the rows);
#: "direct" is the reference.
ROUTES = ("serve (stdio)", "serve --http")
IN_FLIGHT = (1, 64)

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "bench" / "minimal_server.py"
CONFIG = f"""
[servers.echo]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(SERVER))}]

[policy]
mode = "headless"
rules = [{{ kind = "tool", decision = "allow", server = "*", name = "*" }}]
"""


def _cpu(pid: int) -> float:
    """Seconds of CPU (user + system) a process has used (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _rate(call: Callable[[], Awaitable[Any]], calls: int, in_flight: int) -> float:
    started = time.perf_counter()
    per_task = calls // in_flight

    async def worker() -> None:
        for _ in range(per_task):
            await call()

    async with trio.open_nursery() as nursery:
        for _ in range(in_flight):
            nursery.start_soon(worker)
    return per_task * in_flight / (time.perf_counter() - started)


async def _measure(
    config: ServerConfig, calls: int, pid: int | None
) -> list[tuple[int, float, float | None]]:
    rows = []
    async with connect(config) as session:
        await session.list_tools()

        async def call() -> None:
            await session.call_tool("echo", {"message": "hi"})

        await _rate(call, 200, 8)  # warm-up
        for in_flight in (1, 64):
            before = _cpu(pid) if pid else None
            rate = await _rate(call, calls, in_flight)
            cpu = (_cpu(pid) - before) / calls * 1e6 if pid and before is not None else None
            rows.append((in_flight, rate, cpu))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3200)
    parser.add_argument("--json", action="store_true", help="one JSON line (for python -m bench)")
    args = parser.parse_args()
    if not args.json:
        print(f"load average before: {os.getloadavg()}")
    direct = ServerConfig(
        name="echo", transport="stdio", command=sys.executable, args=(str(SERVER),)
    )
    results: dict[str, list[tuple[int, float, float | None]]] = {
        "direct": trio.run(_measure, direct, args.calls, None)
    }
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "agenthost.toml"
        config.write_text(CONFIG)
        agenthost = [sys.executable, "-m", "agenthost", "--config", str(config), "serve"]
        stdio = ServerConfig(
            name="gw", transport="stdio", command=agenthost[0], args=tuple(agenthost[1:])
        )
        results["serve (stdio)"] = trio.run(_measure_stdio, stdio, args.calls)
        # The gateway's clients authenticate, as a user's would: a token of our own.
        token = secrets.token_urlsafe(32)
        proc = subprocess.Popen(
            [*agenthost, "--http", "127.0.0.1:0"],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "AGENTHOST_SERVE_TOKEN": token},
        )
        try:
            assert proc.stderr is not None
            url = None
            while url is None:
                line = proc.stderr.readline()
                if not line:
                    raise SystemExit("agenthost serve --http exited before serving")
                found = re.search(r"serving MCP at (\S+)", line)
                url = found.group(1) if found else None
            http = ServerConfig(
                name="gw", transport="http", url=url, headers={"Authorization": f"Bearer {token}"}
            )
            results["serve --http"] = trio.run(_measure, http, args.calls, proc.pid)
        finally:
            proc.terminate()
            proc.wait()
    if args.json:
        print(json.dumps(results))
        return
    print(f"load average after: {os.getloadavg()}")
    for name, rows in results.items():
        for in_flight, rate, cpu in rows:
            cpu_text = f", gateway CPU {cpu:.0f} us/call" if cpu is not None else ""
            print(f"{name}: {in_flight} in flight: {rate:,.0f} calls/s{cpu_text}")


async def _measure_stdio(config: ServerConfig, calls: int) -> list[tuple[int, float, float | None]]:
    """Through ``serve`` on stdio: the gateway is the child the stdio transport starts."""
    rows: list[tuple[int, float, float | None]] = []
    async with connect(config) as session:
        await session.list_tools()
        pid = session.transport.pid  # type: ignore[attr-defined]

        async def call() -> None:
            await session.call_tool("echo", {"message": "hi"})

        await _rate(call, 200, 8)
        for in_flight in (1, 64):
            before = _cpu(pid)
            rate = await _rate(call, calls, in_flight)
            rows.append((in_flight, rate, (_cpu(pid) - before) / calls * 1e6))
    return rows


def gateway(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    """The section of ``python -m bench``: a proxied ``tools/call`` against the direct call,
    round by round (each round a fresh process measuring the three routes in turn)."""
    log(f"gateway: {args.gateway_rounds} rounds x {args.gateway_calls} calls per route")
    argv = [sys.executable, "-m", "bench.gateway", "--json", "--calls", str(args.gateway_calls)]
    runs: list[dict[str, Any]] = []
    for _ in range(args.gateway_rounds):
        _, _, stdout = run_child(argv, timeout=600)
        runs.append(json.loads(stdout.strip().splitlines()[-1]))

    def figures(route: str, n: int) -> list[dict[str, Any]]:
        return [{"rate": rate, "cpu": cpu} for run in runs for k, rate, cpu in run[route] if k == n]

    rows = []
    for route in ROUTES:
        for n in IN_FLIGHT:
            ours, direct = figures(route, n), figures("direct", n)
            rows.append(
                Row(
                    name=f"gateway calls/s, {n} in flight, {route}",
                    ours=f"{median([f['rate'] for f in ours]):,.0f}/s",
                    reference=f"direct {median([f['rate'] for f in direct]):,.0f}/s",
                    ratio=str(paired(ours, direct, "rate")),
                )
            )
    for route in ROUTES:
        cpu = [median([f["cpu"] for f in figures(route, n)]) for n in IN_FLIGHT]
        rows.append(
            Row(
                name=f"gateway CPU/call, {route}",
                ours=" / ".join(f"{us:,.0f} us" for us in cpu),
                reference="1 / 64 in flight; user + system time of the serve process",
            )
        )
    return rows


if __name__ == "__main__":
    main()
