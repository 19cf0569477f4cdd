"""Downstream clients that cannot keep up, against the gateway's per-client outbox
(agenthost/serve/outbox.py), with the gateway and ``serve_http`` in this process so the
bounds can be made small: a stuck client's session ends once its writer stalled, a
never-read GET stream, many stuck clients, notifications near the message size limit,
the GET backlog's size. Each checks that another, reading client (B) is served
meanwhile (the positive control of "nobody else is held up"); the latency figures are
in test_hostile_serve_relay.py, these bounds are generous.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.config.model import HostConfig, ServerConfig
from agenthost.connection import open_session
from agenthost.protocol.revisions import MODERN_REVISIONS
from agenthost.serve import open_gateway
from agenthost.serve.http import serve_http
from agenthost.session import ClientSession
from agenthost.transports.http import open_streamable_http_transport
from tests.hostile.stuck_client import StuckClient, deaf_host_lines, events

pytestmark = pytest.mark.timeout(120)

SERVER = str(Path(__file__).resolve().parent / "hostile_server.py")
FLOOD_TOOL = {"name": "flood", "description": "Flood during the call.", "inputSchema": {}}
ALLOW: dict[str, Any] = {"mode": "headless", "preset": "unsafe-allow-everything"}
FLOOD: dict[str, Any] = {"progress": 300, "logs": 1500, "log_bytes": 4000}
#: The lines a stdio host writes before it stops reading.
DEAF_HOST = deaf_host_lines(FLOOD)


def _flooding_upstream() -> ServerConfig:
    """The hostile server over stdio, offering the ``flood`` tool."""
    return ServerConfig(
        name="up",
        transport="stdio",
        command=sys.executable,
        args=(SERVER, json.dumps({"tools": [FLOOD_TOOL]})),
    )


MODERN = MODERN_REVISIONS[0]


@asynccontextmanager
async def _gateway() -> AsyncIterator[int]:
    """The gateway over HTTP on a free loopback port, in front of hostile_server.py."""
    upstream = _flooding_upstream()
    async with (
        open_gateway(HostConfig(servers=[upstream], policy=ALLOW)) as gateway,
        trio.open_nursery() as nursery,
    ):
        port: int = await nursery.start(partial(serve_http, gateway, "127.0.0.1", 0, token=None))
        yield port
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def _client(port: int) -> AsyncIterator[ClientSession]:
    async with (
        open_streamable_http_transport(f"http://127.0.0.1:{port}/mcp", name="b") as transport,
        open_session(transport, name="b") as session,
    ):
        yield session


async def _b_is_served(b: ClientSession, calls: int = 5) -> None:
    with trio.fail_after(10):
        for n in range(calls):
            result = await b.call_tool("echo", {"message": f"b{n}"})
            assert result.content[0].text == f"b{n}"  # type: ignore[union-attr]


async def test_a_stuck_client_with_its_call_in_flight_has_its_session_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its own call's answer cannot be delivered (it reads nothing): once its writer made
    no progress for the stall limit, its session ends (its id is then unknown: 404), and
    nobody else's is touched."""
    monkeypatch.setattr("agenthost.serve.outbox.STALL_LIMIT", 1.0)
    async with _gateway() as port, _client(port) as b:
        a = StuckClient(port)
        await a.start()
        assert await a.status() == b"HTTP/1.1 200 "  # positive control: the session is there
        await a.call_unread("flood", FLOOD)
        with trio.fail_after(30):
            while await a.status() == b"HTTP/1.1 200 ":
                await _b_is_served(b, calls=1)
                await trio.sleep(0.2)
        assert await a.status() == b"HTTP/1.1 404 "
        await _b_is_served(b)
        await a.aclose()


@pytest.mark.parametrize("era", ["legacy", "stateless"])
async def test_an_ended_stuck_session_has_its_connection_ended_too(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, era: str
) -> None:
    """hypercorn's write to A's unread POST stream cannot be cancelled: after A's session
    ended, that connection (and its task) stayed for as long as A kept the socket, one
    per stuck session. Now it is shut down: our side of it leaves ESTABLISHED.
    Positive control: while A's session is up, the same look finds it ESTABLISHED.
    ``stateless``: a 2026-07-28 call, whose session is the POST's own."""
    monkeypatch.setattr("agenthost.serve.outbox.STALL_LIMIT", 1.0)
    async with _gateway() as port, _client(port) as b:
        a = StuckClient(port)
        if era == "legacy":
            await a.start()
            held = await a.call_unread("flood", FLOOD)
        else:
            held = await a.call_unread_stateless("flood", FLOOD, revision=MODERN)
        theirs = held.socket.getsockname()[1]
        await trio.sleep(0.5)
        assert _our_side(port, theirs) == _ESTABLISHED
        with trio.fail_after(30):
            while "ending its session" not in caplog.text:
                await trio.sleep(0.2)
        if era == "legacy":
            assert await a.status() == b"HTTP/1.1 404 "
        with trio.fail_after(15):
            while _our_side(port, theirs) == _ESTABLISHED:
                await trio.sleep(0.2)
        await _b_is_served(b)
        await a.aclose()


async def test_the_streams_of_a_session_end_with_it() -> None:
    """A GET stream read as it comes, then its session is deleted: the stream ends (the
    terminating chunk) rather than staying open with nothing that could come on it."""
    async with _gateway() as port:
        a = StuckClient(port)
        await a.start()
        stream = await a.open_get_unread()
        await trio.sleep(0.5)
        assert await a.delete() == b"HTTP/1.1 200 "
        raw = bytearray()
        with trio.fail_after(10):
            while not raw.endswith(b"0\r\n\r\n"):
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                raw += chunk
        await a.aclose()
    assert raw.startswith(b"HTTP/1.1 200 ")  # positive control: the stream was open
    assert raw.endswith(b"0\r\n\r\n"), raw[-200:]  # ended by us, not cut


_ESTABLISHED = "01"


def _our_side(port: int, client_port: int) -> str | None:
    """The TCP state (``/proc/net/tcp``'s hex code) of the connection we accepted on
    ``port`` from the client's ``client_port`` (None: no such connection)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            pytest.skip("no /proc/net/tcp here")
        for line in lines:
            local, remote, state = line.split()[1:4]
            if int(local.rsplit(":", 1)[1], 16) == port and (
                int(remote.rsplit(":", 1)[1], 16) == client_port
            ):
                return state
    return None


async def test_a_stuck_client_that_comes_back_reads_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the stall limit nothing ends: a client that pauses loses notifications
    beyond its bound, but its answer still comes, after what was queued before it."""
    monkeypatch.setattr("agenthost.serve.outbox.MAX_QUEUED", 50)
    async with _gateway() as port, _client(port) as b:
        a = StuckClient(port)
        await a.start()
        stream = await a.call_unread("flood", FLOOD)
        await trio.sleep(1.0)
        await _b_is_served(b)
        raw = bytearray()
        with trio.fail_after(30):
            while b'"flooded"' not in raw:
                chunk = await stream.receive_some(65536)
                assert chunk, "the stream ended without the answer"
                raw += chunk
        await a.aclose()
    messages = [json.loads(line) for line in _data_lines(bytes(raw))]
    assert "result" in messages[-1]
    assert 0 < len(messages) - 1 < FLOOD["progress"] + FLOOD["logs"]  # some were dropped
    progress = [m["params"]["progress"] for m in messages if "progress" in m.get("params", {})]
    assert progress == sorted(progress) and progress[0] == 1  # in order, the first kept


def _data_lines(raw: bytes) -> list[bytes]:
    return [line[6:] for line in raw.split(b"\n") if line.startswith(b"data: ")]


async def test_a_get_stream_never_read_holds_up_nobody() -> None:
    """Broadcast log lines (sent by the upstream after its answer: nobody's call) go to
    A's GET stream, which A never reads."""
    async with _gateway() as port, _client(port) as b:
        a = StuckClient(port)
        await a.start()
        await a.open_get_unread()
        line = {"jsonrpc": "2.0", "method": "notifications/message"}
        line["params"] = {"level": "info", "logger": "x", "data": "y" * 4000}  # type: ignore[assignment]
        # After a pause: sent with the call still in flight, they would be the caller's.
        await b.call_tool("act", {"actions": [{"sleep": 0.5}, {"send": line, "count": 2000}]})
        await trio.sleep(1.0)
        await _b_is_served(b)
        await a.aclose()


async def test_many_stuck_clients_hold_up_nobody() -> None:
    async with _gateway() as port, _client(port) as b:
        stuck = [StuckClient(port) for _ in range(20)]
        for a in stuck:
            await a.start()
        async with trio.open_nursery() as nursery:
            for a in stuck:
                nursery.start_soon(partial(a.call_unread, "flood", {**FLOOD, "background": True}))
        await trio.sleep(1.0)
        await _b_is_served(b)
        for a in stuck:
            await a.aclose()


async def test_notifications_near_the_size_limit_to_a_stuck_client() -> None:
    """Log lines of 6 MB each: the outbox takes one over its byte bound only when empty."""
    huge = {"progress": 0, "logs": 4, "log_bytes": 6_000_000, "background": True}
    async with _gateway() as port, _client(port) as b:
        a = StuckClient(port)
        await a.start()
        await a.call_unread("flood", huge)
        await trio.sleep(1.0)
        await _b_is_served(b)
        reader = StuckClient(port)  # positive control: a reading client gets them
        await reader.start()
        with trio.fail_after(60):
            seen = await reader.request(
                "tools/call", {"name": "flood", "arguments": {**huge, "logs": 2}}
            )
        await a.aclose()
    assert [len(m["params"]["data"]) for m in seen if "params" in m] == [6_000_000] * 2


async def test_a_stdio_host_that_stops_reading_our_stdout_has_its_session_ended(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``agenthost serve`` over stdio (pipes here): the host sends a flooding call and
    never reads our stdout; the writes block on the full pipe (shielded: a line is never
    cut), and once stalled past the limit the session ends rather than hanging."""
    from agenthost.serve import serve_stdio

    monkeypatch.setattr("agenthost.serve.outbox.STALL_LIMIT", 1.0)
    upstream = _flooding_upstream()
    our_stdin, host_writes = os.pipe()
    host_reads, our_stdout = os.pipe()  # the host never reads its end
    os.write(host_writes, b"".join(json.dumps(line).encode() + b"\n" for line in DEAF_HOST))
    try:
        async with open_gateway(HostConfig(servers=[upstream], policy=ALLOW)) as gateway:
            with trio.fail_after(30):
                await serve_stdio(gateway, stdin=our_stdin, stdout=our_stdout)
            served = await gateway.host.call_tool("up__echo", {"message": "still"})
        os.set_blocking(host_reads, False)
        written = os.read(host_reads, 1 << 20)
    finally:
        for fd in (our_stdin, host_writes, host_reads, our_stdout):
            os.close(fd)
    assert "ending its session" in caplog.text
    assert served.content[0].text == "still"  # type: ignore[union-attr]
    # Positive control: our writes did reach the pipe (the answer to initialize first)
    # until it was full, so the stall was the host's not reading, not a failed write.
    assert json.loads(written.split(b"\n", 1)[0])["id"] == 1
    assert len(written) >= 4096


async def test_a_stdio_host_that_closes_our_stdout_has_its_session_ended() -> None:
    """The host closes its end of our stdout at once but keeps our stdin open: nothing
    can reach it any more (every write fails), so the session ends, rather than
    serving its calls (tools run, side effects and all) for nobody until stdin ends."""
    from agenthost.serve import serve_stdio

    upstream = _flooding_upstream()
    our_stdin, host_writes = os.pipe()
    host_reads, our_stdout = os.pipe()
    os.close(host_reads)
    os.write(host_writes, b"".join(json.dumps(line).encode() + b"\n" for line in DEAF_HOST))
    try:
        async with open_gateway(HostConfig(servers=[upstream], policy=ALLOW)) as gateway:
            with trio.fail_after(10):
                await serve_stdio(gateway, stdin=our_stdin, stdout=our_stdout)
            served = await gateway.host.call_tool("up__echo", {"message": "still"})
    finally:
        for fd in (our_stdin, host_writes, our_stdout):
            os.close(fd)
    assert served.content[0].text == "still"  # type: ignore[union-attr]


#: The GET backlog's byte bound, as serve/http.py documents it (8 MiB).
BACKLOG_BYTES = 8 * 1024 * 1024


async def test_the_get_backlog_keeps_the_newest_within_its_byte_bound() -> None:
    """A legacy session with no stream open (A) while the upstream broadcasts 60 log
    lines of 300 kB (18 MB, well under the backlog's count bound): what waits for A's
    GET stream is the newest that fit in 8 MiB, in order. Positive control: B, whose
    GET stream is open and read, gets all 60; and once B has the last line, so has A's
    backlog (both were queued by the same dispatch, A's writer only moves memory)."""
    size, count = 300_000, 60
    end = {"jsonrpc": "2.0", "method": "notifications/message"}
    end["params"] = {"level": "info", "logger": "end", "data": "."}  # type: ignore[assignment]
    flood = [{"sleep": 0.5}, {"log_names": count, "log_bytes": size}, {"send": end}]
    async with _gateway() as port:
        a, b = StuckClient(port), StuckClient(port)
        await a.start()
        await b.start()
        b_get = await b.open_get_unread()
        # A's call is answered at once; the lines come after it: nobody's call, broadcast.
        await a.request(
            "tools/call", {"name": "act", "arguments": {"actions": [{"background": flood}]}}
        )
        with trio.fail_after(60):
            b_seen = await _read_get_until_end(b_get)
            await trio.sleep(0.5)
            a_seen = await _read_get_until_end(await a.open_get_unread())
        await a.aclose()
        await b.aclose()
    assert [m["params"]["logger"] for m in b_seen] == [f"n{k}" for k in range(count)] + ["end"]
    loggers = [m["params"]["logger"] for m in a_seen]
    kept = len(loggers) - 1
    assert loggers == [f"n{k}" for k in range(count - kept, count)] + ["end"]  # the newest
    held = sum(len(json.dumps(m, separators=(",", ":"))) for m in a_seen)
    assert BACKLOG_BYTES - 2 * size < held <= BACKLOG_BYTES


async def _read_get_until_end(stream: trio.SocketStream) -> list[dict[str, Any]]:
    """The log lines of a GET stream, up to the one from logger ``end``."""
    raw = bytearray()
    while True:
        chunk = await stream.receive_some(1 << 20)
        assert chunk, "the GET stream ended early"
        raw += chunk
        if b'"logger":"end"' in raw[-4096:] or b'"logger": "end"' in raw[-4096:]:
            return [e for e in events(bytes(raw)) if e.get("method") == "notifications/message"]
