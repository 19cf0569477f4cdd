"""Benchmark workers: one measurement of one client, in a process of its own.

Run as ``python -m bench.workers '<json spec>'``; the last line on stdout is a JSON
object of results. The parent (:mod:`bench.__main__`) starts a fresh worker per client
per round, so imports, CPU time and RSS are attributable. CPU time is
:func:`time.process_time` of the worker alone (the server is another process), taken
around the measured loop only.

Every timed call is checked: each carries a message no other call carries, and the text
that comes back must be that message (for large results: start with it and have the
right length), so a reply delivered to the wrong caller fails the run instead of counting
as a fast call. The same contract is kept by :file:`bench/ts_client.mjs`.

The server is the stdio ``bench/minimal_server.py``, or the Streamable HTTP server at
``spec["url"]`` when given (the parent runs :file:`bench/http_server.mjs`).

Tasks (``spec["task"]``):

* ``throughput``: ``warmup`` untimed calls, ``seq`` sequential calls (latency of each),
  then ``conc`` calls with ``inflight`` tasks calling at once (none when ``conc`` is 0).
* ``fanout``: start and initialize ``servers`` servers concurrently; time until all are
  ready, client RSS before and at the peak (``agenthost``, the SDK, or the floor).
* ``payload``: ``repeats`` calls with a ``result_bytes`` result (the ``blob`` tool) or an
  ``arg_bytes`` argument; time and client CPU per call, and the peak RSS above the level
  before the first call.
* ``close``: open a session, call once, time leaving the session's block (the server
  exits on stdin EOF).
* ``connect``: median time from ``connect()`` to a ready session over ``repeats``
  connects (agenthost only), by era negotiation (see :func:`_connect`).
* ``soak``: ``calls`` calls with ``inflight`` in flight (agenthost only); RSS and the
  session's pending state after every ``every`` calls.
* ``sampling``: see :mod:`bench.sampling`.

Every worker has a deadline (``spec["deadline"]`` seconds) so a wedged client fails the
round instead of hanging the benchmark.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from bench.clients import TRIO_CLIENTS, Call, open_client, server_argv
from bench.measure import (
    Wakeups,
    cpu_seconds,
    current_rss,
    peak_rss,
    percentile,
    reset_peak_rss,
)

__all__ = ["main", "run_spec"]

_counter = itertools.count(1)


async def checked_echo(call: Call) -> None:
    """One call with a message no other call carries; its echo must come back."""
    message = f"m{next(_counter)}"
    text = await call("echo", {"message": message})
    if text != message:
        raise AssertionError(f"echo of {message!r} returned {text[:40]!r}")


async def _spawn_all(client: str, count: int, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``count`` copies of ``fn`` concurrently in the client's own kind of task group."""
    if client in TRIO_CLIENTS:
        import trio

        async with trio.open_nursery() as nursery:
            for _ in range(count):
                nursery.start_soon(fn)
    else:
        import anyio

        async with anyio.create_task_group() as group:
            for _ in range(count):
                group.start_soon(fn)


async def _throughput(spec: dict[str, Any]) -> dict[str, Any]:
    client = spec["client"]
    seq, conc, inflight = spec["seq"], spec["conc"], spec["inflight"]
    argv = server_argv(spec.get("server_args"))
    async with open_client(client, argv, spec.get("url")) as call:
        for _ in range(spec["warmup"]):
            await checked_echo(call)

        latencies: list[float] = []
        clock = time.perf_counter
        cpu0, wall0 = cpu_seconds(), clock()
        for _ in range(seq):
            start = clock()
            await checked_echo(call)
            latencies.append(clock() - start)
        seq_wall, seq_cpu = clock() - wall0, cpu_seconds() - cpu0

        if not conc:  # a sequential-only run (pinned to one CPU, or the blocking client)
            return _seq_figures(seq, latencies, seq_wall, seq_cpu)

        remaining = conc

        async def caller() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await checked_echo(call)

        wakeups = Wakeups()
        cpu0, wall0 = cpu_seconds(), clock()
        await _spawn_all(client, inflight, caller)
        conc_wall, conc_cpu = clock() - wall0, cpu_seconds() - cpu0
        counts = wakeups.per_call(conc)
    return {
        **_seq_figures(seq, latencies, seq_wall, seq_cpu),
        "conc_calls_s": conc / conc_wall,
        "conc_cpu_us": conc_cpu / conc * 1e6,
        **{f"conc_{key}": value for key, value in counts.items()},
    }


def _seq_figures(seq: int, latencies: list[float], wall: float, cpu: float) -> dict[str, float]:
    return {
        "seq_calls_s": seq / wall,
        "seq_p50_us": percentile(latencies, 50) * 1e6,
        "seq_p99_us": percentile(latencies, 99) * 1e6,
        "seq_cpu_us": cpu / seq * 1e6,
    }


async def _fanout(spec: dict[str, Any]) -> dict[str, Any]:
    client, count = spec["client"], spec["servers"]
    argv = server_argv()
    if client == "agenthost":
        from agenthost.config.model import HostConfig, ServerConfig
        from agenthost.host.host import open_host
        from agenthost.host.supervisor import ServerState

        config = HostConfig(
            servers=[
                ServerConfig(name=f"s{i}", transport="stdio", command=argv[0], args=argv[1:])
                for i in range(count)
            ]
        )
        base = current_rss()
        reset_peak_rss()
        start = time.perf_counter()
        async with open_host(config) as host:
            ready_s = time.perf_counter() - start
            states = [status.state for status in host.status()]
            if states.count(ServerState.READY) != count:
                raise AssertionError(f"only {states.count(ServerState.READY)}/{count} ready")
            tools = await host.list_tools()
            if len(tools) != 2 * count:  # echo and blob
                raise AssertionError(f"catalog has {len(tools)} tools, expected {2 * count}")
            peak = peak_rss()
        return {"ready_s": ready_s, "rss_base": base, "rss_peak": peak}

    if client == "floor":
        return await _fanout_floor(count, argv)
    if client not in ("sdk-trio", "sdk-asyncio"):
        raise ValueError(f"fanout has no {client!r} variant")
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=argv[0], args=argv[1:])

    @asynccontextmanager
    async def sdk_session() -> AsyncIterator[None]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            yield

    return await _all_ready(count, sdk_session)


async def _fanout_floor(count: int, argv: list[str]) -> dict[str, Any]:
    """The floor client starting ``count`` servers at once: what spawning and one
    handshake each cost on this machine, with no host around them."""
    from bench.floor import open_floor_client

    @asynccontextmanager
    async def floor_session() -> AsyncIterator[None]:
        async with open_floor_client(argv) as client:
            await client.request("tools/list", {})
            yield

    return await _all_ready(count, floor_session)


async def _all_ready(
    count: int, open_one: Callable[[], AbstractAsyncContextManager[None]]
) -> dict[str, Any]:
    """Open ``count`` sessions concurrently (anyio: runs under Trio and asyncio); time
    until every one is ready, and the client's RSS before and at that moment."""
    import anyio

    ready = 0
    all_ready = anyio.Event()
    done = anyio.Event()

    async def one() -> None:
        nonlocal ready
        async with open_one():
            ready += 1
            if ready == count:
                all_ready.set()
            await done.wait()

    base = current_rss()
    reset_peak_rss()
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(one)
        await all_ready.wait()
        ready_s = time.perf_counter() - start
        peak = peak_rss()
        done.set()
    return {"ready_s": ready_s, "rss_base": base, "rss_peak": peak}


async def _payload(spec: dict[str, Any]) -> dict[str, Any]:
    client = spec["client"]
    result_bytes: int = spec.get("result_bytes", 0)
    arg_bytes: int = spec.get("arg_bytes", 0)
    size = result_bytes or arg_bytes
    async with open_client(client, server_argv(), spec.get("url")) as call:

        async def one(i: int, size: int) -> None:
            message = f"m{i}:"
            if result_bytes:
                text = await call("blob", {"message": message, "bytes": size})
            else:
                text = await call("echo", {"message": message.ljust(size, "x")})
            if len(text) != size or not text.startswith(message):
                raise AssertionError(f"{client}: call {i}: {len(text)} bytes {text[:20]!r}")

        await one(0, 1024)  # warm the path with a small call first
        times: list[float] = []
        base = current_rss()
        reset_peak_rss()
        cpu0 = cpu_seconds()
        budget_end = time.perf_counter() + spec.get("budget", math.inf)
        for i in range(1, spec["repeats"] + 1):
            start = time.perf_counter()
            await one(i, size)
            times.append(time.perf_counter() - start)
            if time.perf_counter() > budget_end:
                break  # a slow client (a quadratic parser) gets fewer calls, not a timeout
        cpu = (cpu_seconds() - cpu0) / len(times)
        peak = peak_rss()
    return {
        "time_s": sorted(times)[len(times) // 2],
        "cpu_s": cpu,
        "rss_base": base,
        "rss_peak": peak,
    }


async def _close(spec: dict[str, Any]) -> dict[str, Any]:
    """Time leaving an open session's block: what a one-shot command pays at its end."""
    client = spec["client"]
    manager = open_client(client, server_argv())
    call = await manager.__aenter__()
    try:
        await checked_echo(call)
    except BaseException:
        await manager.__aexit__(*sys.exc_info())
        raise
    start = time.perf_counter()
    await manager.__aexit__(None, None, None)
    return {"close_s": time.perf_counter() - start}


async def _connect(spec: dict[str, Any]) -> dict[str, Any]:
    """Median time until agenthost's session to the stdio server is ready (one checked call
    each), over ``spec["repeats"]`` connects in this process.

    ``spec["era"]``: ``legacy`` (``protocol = "legacy"``), ``probe`` (``auto`` with a fresh
    in-memory era cache each time: every connect probes, as a first contact does) or
    ``cached`` (``auto`` with an era-cache file, in a temporary directory, that the first,
    unmeasured connect fills).
    """
    import tempfile
    from pathlib import Path

    from agenthost.config.model import ServerConfig
    from agenthost.connection import EraCache, connect

    argv = server_argv()
    era = spec["era"]
    config = ServerConfig(
        name="minimal",
        transport="stdio",
        command=argv[0],
        args=argv[1:],
        protocol="legacy" if era == "legacy" else "auto",
    )
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="agenthost-bench-") as tmp:
        cache_file = Path(tmp, "eras.json")
        for i in range(spec.get("repeats", 10) + 1):
            cache = EraCache(cache_file if era == "cached" else None)
            start = time.perf_counter()
            async with connect(config, era_cache=cache) as session:
                if i:  # the first connect fills the cache file: not measured
                    times.append(time.perf_counter() - start)

                async def call(tool: str, arguments: dict[str, Any]) -> str:
                    result = await session.call_tool(tool, arguments)
                    return result.content[0].text  # type: ignore[union-attr]

                await checked_echo(call)
    return {"ready_s": percentile(times, 50)}


def pending_state(session: object) -> int:
    """Entries in the session's per-request tables: they must not grow over a soak.

    Private attributes, read defensively (the request machinery may move to an ``rpc``
    object): every dict/set/deque found under the known names, on the session or on its
    ``_rpc``, counted; the deadline queues are a dict of deques.
    """
    total = found = 0
    for owner in (session, getattr(session, "_rpc", None)):
        for name in ("_pending", "_abandoned", "_incoming", "_progress", "_deadlines"):
            table = getattr(owner, name, None)
            if table is None:
                continue
            found += 1
            if name == "_deadlines":
                total += sum(len(queue) for queue in table.values())
            else:
                total += len(table)
    if found < 3:  # renamed: fail loudly rather than report an empty state that isn't
        raise AssertionError(f"found {found} of the session's request tables; update me")
    return total


async def _soak(spec: dict[str, Any]) -> dict[str, Any]:
    """Many calls in one agenthost session: RSS and pending state along the way."""
    from agenthost.config.model import ServerConfig
    from agenthost.connection import connect

    argv = server_argv()
    config = ServerConfig(name="minimal", transport="stdio", command=argv[0], args=argv[1:])
    calls, every, inflight = spec["calls"], spec["every"], spec["inflight"]
    samples: list[dict[str, float]] = []
    async with connect(config) as session:

        async def call(tool: str, arguments: dict[str, Any]) -> str:
            result = await session.call_tool(tool, arguments)
            return result.content[0].text  # type: ignore[union-attr]

        done = 0
        start = time.perf_counter()
        while done < calls:
            batch = min(every, calls - done)
            remaining = batch

            async def caller() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    await checked_echo(call)

            await _spawn_all("agenthost", inflight, caller)
            done += batch
            samples.append(
                {
                    "calls": done,
                    "rss": current_rss(),
                    "pending": pending_state(session),
                    "wall_s": time.perf_counter() - start,
                }
            )
    return {"samples": samples}


_TASKS: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
    "throughput": _throughput,
    "fanout": _fanout,
    "payload": _payload,
    "close": _close,
    "connect": _connect,
    "soak": _soak,
}


async def _with_deadline(spec: dict[str, Any], backend: str) -> dict[str, Any]:
    if spec["task"] == "sampling":
        from bench.sampling import measure_sampling

        task: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] = measure_sampling
    else:
        task = _TASKS[spec["task"]]
    if backend == "trio":
        import trio

        with trio.fail_after(spec["deadline"]):
            return await task(spec)
    import anyio

    with anyio.fail_after(spec["deadline"]):
        return await task(spec)


def run_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one measurement in this process and return its figures.

    ``spec["cpu"]``, when given, pins this worker to that CPU before anything starts;
    the server it spawns inherits the pinning, so client and server share one CPU.
    """
    client = spec["client"]
    if spec.get("cpu") is not None:
        import os

        os.sched_setaffinity(0, {spec["cpu"]})
    if client in TRIO_CLIENTS:
        import trio

        return trio.run(_with_deadline, spec, "trio")
    import anyio

    backend = "asyncio" if client == "sdk-asyncio" else "trio"
    return anyio.run(_with_deadline, spec, backend, backend=backend)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(args[0])
    result = run_spec(spec)
    if (agenthost := sys.modules.get("agenthost")) is not None:
        # Which tree's agenthost ran: a --baseline run checks it (bench/baseline.py).
        result["agenthost_file"] = agenthost.__file__
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
