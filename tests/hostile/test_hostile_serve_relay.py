"""One downstream client that stops reading must not slow anyone else down
(``agenthost serve --http`` in front of one upstream that every client shares).

The upstream (``hostile_server.py``, its ``flood`` tool) sends 300 progress
notifications and 6 MB of log lines during a call of client A, who asked for log lines
and then stops reading (a raw socket with a small receive buffer:
``stuck_client.py``). Client B, an ordinary agenthost session, calls the same upstream
meanwhile. Before the fix the relays of A's notifications were awaited inside the
upstream's notification dispatch: every call of the upstream waited up to 5 s for that
dispatch, and once 1024 notifications were queued the upstream was not read at all.
Positive control: the same flood with A reading delivers A's progress, in order, before
its result.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.connection import open_session
from agenthost.session import ClientSession
from agenthost.transports.http import open_streamable_http_transport
from tests.helpers import AGENTHOST_COLD
from tests.hostile.stuck_client import StuckClient, deaf_host_lines
from tests.peers.http_launch import free_port, serve, stop

pytestmark = [pytest.mark.serial, pytest.mark.timeout(120)]

SERVER = Path(__file__).resolve().parent / "hostile_server.py"
FLOOD_TOOL = {"name": "flood", "description": "Flood during the call.", "inputSchema": {}}
#: The issue's figures: 300 progress notifications, 6 MB of log lines.
FLOOD: dict[str, Any] = {"progress": 300, "logs": 1500, "log_bytes": 4000}
#: A healthy call's bound while A is stuck (it took 5 s, or for ever, before the fix).
BOUND = 2.0


def _config(tmp_path: Path) -> Path:
    upstream = json.dumps({"tools": [FLOOD_TOOL]})
    config = tmp_path / "agenthost.toml"
    config.write_text(
        f"[servers.up]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([str(SERVER), upstream])}\n\n"
        '[policy]\nrules = [ { kind = "tool", decision = "allow", server = "*", name = "*" } ]\n'
    )
    return config


@asynccontextmanager
async def _gateway(tmp_path: Path) -> AsyncIterator[int]:
    """``agenthost serve --http`` on a free port; yields the port once it answers."""
    port = free_port()
    argv = [*AGENTHOST_COLD, "--config", str(_config(tmp_path)), "serve"]
    async with serve([*argv, "--http", f"127.0.0.1:{port}", "--no-auth"], port):
        yield port


@asynccontextmanager
async def _client(port: int) -> AsyncIterator[ClientSession]:
    async with (
        open_streamable_http_transport(f"http://127.0.0.1:{port}/mcp", name="b") as transport,
        open_session(transport, name="b") as session,
    ):
        yield session


async def _timed_calls(b: ClientSession, count: int = 5) -> list[float]:
    """B's echo calls, one after the other; each one's seconds (a hung one: 10)."""
    times = []
    for n in range(count):
        started = time.monotonic()
        with trio.move_on_after(10):
            result = await b.call_tool("echo", {"message": f"b{n}"})
            assert result.content[0].text == f"b{n}"  # type: ignore[union-attr]
        times.append(time.monotonic() - started)
    return times


@pytest.mark.parametrize("background", [False, True], ids=["inline", "threaded"])
async def test_a_client_that_stops_reading_does_not_slow_the_others(
    tmp_path: Path, background: bool
) -> None:
    async with _gateway(tmp_path) as port, _client(port) as b:
        a = StuckClient(port)
        await a.start(log_level="debug")
        await b.call_tool("echo", {"message": "warm"})
        await a.call_unread("flood", {**FLOOD, "background": background})
        await trio.sleep(1.0)  # the flood is under way
        times = await _timed_calls(b)
        await a.aclose()
    print(f"B's calls while A is stuck: {[round(t, 2) for t in times]} s")
    assert max(times) < BOUND, times


async def test_positive_control_a_reading_client_gets_its_progress_before_its_result(
    tmp_path: Path,
) -> None:
    async with _gateway(tmp_path) as port, _client(port) as b:
        a = StuckClient(port)
        await a.start(log_level="debug")
        with trio.fail_after(60):
            seen = await a.request(
                "tools/call",
                {"name": "flood", "arguments": FLOOD, "_meta": {"progressToken": "a"}},
            )
        times = await _timed_calls(b)
    progress = [
        e["params"]["progress"] for e in seen if e.get("method") == "notifications/progress"
    ]
    logs = [e for e in seen if e.get("method") == "notifications/message"]
    assert "result" in seen[-1] and seen[-1]["result"]["content"][0]["text"] == "flooded"
    assert progress == list(range(1, 301))
    assert len(logs) == FLOOD["logs"]  # a reader keeping up loses none of them
    assert max(times) < BOUND, times


#: How long ``agenthost serve --http`` may take to stop on a signal (hypercorn's grace
#: is 2 s; a shielded write to a socket nobody reads would make it for ever).
STOP_BOUND = 10.0


async def _seconds_to_stop(process: trio.Process, sig: signal.Signals) -> float:
    """Signal the gateway as a user would (Ctrl-C reaches the whole process group, a
    ``kill`` the process alone); the seconds until it exited (STOP_BOUND * 2: not)."""
    started = time.monotonic()
    if sig is signal.SIGINT:
        os.killpg(process.pid, sig)
    else:
        process.send_signal(sig)
    with trio.move_on_after(STOP_BOUND * 2):
        await process.wait()
        return time.monotonic() - started
    return STOP_BOUND * 2


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("stuck", ["none", "post", "get"])
async def test_the_gateway_stops_in_time_with_a_stuck_client(
    tmp_path: Path, sig: signal.Signals, stuck: str
) -> None:
    """A client whose POST stream (its call's) or GET stream (broadcast log lines) is
    blocked in the server's write cannot hold the gateway's shutdown; ``none`` is the
    positive control (no client at all: it stops promptly)."""
    port = free_port()
    argv = [*AGENTHOST_COLD, "--config", str(_config(tmp_path)), "serve"]
    async with serve([*argv, "--http", f"127.0.0.1:{port}"], port) as process:
        a = StuckClient(port)
        if stuck == "post":
            await a.start(log_level="debug")
            await a.call_unread("flood", FLOOD)
        elif stuck == "get":
            await a.start(log_level="debug")
            await a.open_get_unread()
            line = {"jsonrpc": "2.0", "method": "notifications/message"}
            line["params"] = {"level": "info", "logger": "x", "data": "y" * 4000}  # type: ignore[assignment]
            act = [{"background": [{"sleep": 0.5}, {"send": line, "count": 1500}]}]
            await a.request("tools/call", {"name": "act", "arguments": {"actions": act}})
        await trio.sleep(2.0)  # the writes to A are blocked by now
        seconds = await _seconds_to_stop(process, sig)
        await a.aclose()
    print(f"stopped on {sig.name} with a stuck {stuck} stream in {seconds:.2f} s")
    assert seconds < STOP_BOUND, seconds
    assert process.returncode == 0  # a clean stop, not a kill


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("reads", [True, False], ids=["reading", "deaf"])
async def test_the_stdio_gateway_stops_in_time_with_a_host_that_reads_nothing(
    tmp_path: Path, sig: signal.Signals, reads: bool
) -> None:
    """``agenthost serve`` over stdio: the host sends a flooding call and never reads our
    stdout (the writes block on the full pipe, shielded so a line is never cut); a
    signal still stops the gateway in time. ``reading``: the positive control, a host
    that reads what comes."""
    argv = [*AGENTHOST_COLD, "--config", str(_config(tmp_path)), "serve"]
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    assert process.stdin is not None and process.stdout is not None
    lines = deaf_host_lines(FLOOD)
    try:
        await process.stdin.send_all(b"".join(json.dumps(x).encode() + b"\n" for x in lines))
        async with trio.open_nursery() as nursery:
            if reads:
                nursery.start_soon(_drain, process.stdout)
            await trio.sleep(3.0)  # started, and (deaf) our writes are blocked by now
            seconds = await _seconds_to_stop(process, sig)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await stop(process)
    host = "reading" if reads else "deaf"
    print(f"stdio gateway stopped on {sig.name} ({host} host) in {seconds:.2f} s")
    assert seconds < STOP_BOUND, seconds


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    while await stream.receive_some(1 << 16):
        pass
