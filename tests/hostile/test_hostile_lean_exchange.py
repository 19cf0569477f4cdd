"""Attack on the scope-free lean exchange (issue 26): a request on an idle plain-TCP
connection runs with no cancel scope; a timeout, an abort or a closing transport ends it
by closing its socket. A raw HTTP/1.1 MCP server in this test's Trio run picks every byte
(slowloris bodies and heads, stale keep-alive, resets, new session ids, redirects, huge
heads) and counts what it saw."""

from __future__ import annotations

import json
import random
import socket
import struct
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio

from agenthost.config.model import ServerConfig, Timeouts
from agenthost.connection import open_remote_transport, open_session
from agenthost.errors import AgentHostError, AgentHostTimeout
from agenthost.protocol.types import TextContent
from agenthost.transports._httpx import LEAN_ENV
from agenthost.transports.http import StreamableHTTPTransport
from tests.conftest import free_port
from tests.hostile.raw_http_mcp import Server, Tool, echo, json_reply, text_result
from tests.peers.http_launch import serve


def _text(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


@asynccontextmanager
async def session_on(
    tools: dict[str, Tool], request_timeout: float = 20.0
) -> AsyncIterator[tuple[Any, Server, StreamableHTTPTransport]]:
    srv = Server()
    srv.tools = {"echo": echo, **tools}
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, srv.handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        config = ServerConfig(
            name="atk",
            transport="streamable-http",
            url=f"http://127.0.0.1:{port}/mcp",
            protocol="legacy",
            timeouts=Timeouts(request=request_timeout, connect=5.0, shutdown=2.0),
        )
        async with open_remote_transport(config) as transport:
            assert isinstance(transport, StreamableHTTPTransport)
            async with open_session(transport, name="atk") as session:
                yield session, srv, transport
        nursery.cancel_scope.cancel()


@pytest.fixture(autouse=True)
def _lean_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTHOST_LEAN_HTTP", raising=False)


async def warm(session: Any) -> None:
    """Two calls: the second runs on an idle connection, i.e. the scope-free path."""
    for _ in range(2):
        assert _text(await session.call_tool("echo", {"message": "w"})) == "w"


# -- slowloris ------------------------------------------------------------------------


async def trickle_body(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    body = json.dumps(text_result(rid, "x" * 2000)).encode()
    await stream.send_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        % len(body)
    )
    for byte in body[:-1]:
        await stream.send_all(bytes([byte]))
        await trio.sleep(0.05)
    await trio.sleep_forever()


async def trickle_head(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    await stream.send_all(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    while True:
        await stream.send_all(b"a")
        await trio.sleep(0.05)


@pytest.mark.parametrize("tool", ["trickle_body", "trickle_head"])
async def test_slowloris_reply_times_out_and_next_call_works(tool: str) -> None:
    tools: dict[str, Tool] = {"trickle_body": trickle_body, "trickle_head": trickle_head}
    async with session_on(tools) as (session, srv, _transport):
        await warm(session)
        start = trio.current_time()
        with trio.fail_after(10), pytest.raises(AgentHostTimeout):
            await session.call_tool(tool, {}, timeout=1.0)
        elapsed = trio.current_time() - start
        assert elapsed < 2.5, elapsed
        with trio.fail_after(5):
            assert _text(await session.call_tool("echo", {"message": "after"})) == "after"
        await trio.sleep(0.2)
        assert srv.stats["post:notifications/cancelled"] == 1


# -- fast-path replies other than a plain 200 JSON ------------------------------------


async def unauthorized(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    await stream.send_all(
        b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nContent-Length: 0\r\n\r\n"
    )
    return True


async def expired(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    await stream.send_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    return True


async def redirect(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    if srv.redirecting:  # reached through the redirect, at /mcp2
        return await echo(stream, rid, args, srv)
    srv.redirecting = True
    await stream.send_all(
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /mcp2\r\nContent-Length: 0\r\n\r\n"
    )
    return True


async def new_session(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    await stream.send_all(json_reply(text_result(rid, "new-session"), b"Mcp-Session-Id: s2\r\n"))
    return True


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "httpx"])
async def test_fast_path_401_without_auth_is_a_clean_error(
    lean: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LEAN_ENV, "1" if lean else "0")
    async with session_on({"unauthorized": unauthorized}) as (session, srv, _transport):
        await warm(session)
        with trio.fail_after(5), pytest.raises(AgentHostError) as info:
            await session.call_tool("unauthorized", {}, timeout=3.0)
        assert "\n" not in str(info.value) and "Traceback" not in str(info.value)
        assert srv.stats["post:tools/call"] == 3  # sent once
        try:
            print("after 401:", _text(await session.call_tool("echo", {"message": "z"})))
        except AgentHostError as exc:
            print("after 401:", type(exc).__name__, exc)


async def test_fast_path_404_is_session_expired() -> None:
    async with session_on({"expired": expired}) as (session, _srv, _transport):
        await warm(session)
        with trio.fail_after(5), pytest.raises(AgentHostError) as info:
            await session.call_tool("expired", {}, timeout=3.0)
        print(type(info.value).__name__, info.value)
        assert "session" in str(info.value).lower()


async def test_fast_path_redirect_hands_off_to_httpx_once() -> None:
    async with session_on({"redirect": redirect}) as (session, srv, _transport):
        await warm(session)
        with trio.fail_after(5):
            result = await session.call_tool("redirect", {}, timeout=3.0)
        print(srv.paths)
        assert _text(result) == "ok"
        assert "POST /mcp2" in srv.paths
        # later calls follow the same rule (httpx takes them), and still work
        assert _text(await session.call_tool("echo", {"message": "z"})) == "z"


async def test_fast_path_new_session_id_follows_the_slow_path_rule() -> None:
    """A 200 JSON reply with a new Mcp-Session-Id on the scope-free path: the transport
    keeps the first id only (``_take_session_id`` runs while it has none), as the slow
    path does."""
    async with session_on({"new_session": new_session}) as (session, srv, _transport):
        await warm(session)
        with trio.fail_after(5):
            assert _text(await session.call_tool("new_session", {}, timeout=3.0)) == "new-session"
            await session.call_tool("echo", {"message": "z"})
        print(srv.session_headers)
        lean_last = srv.session_headers[-1]
    assert lean_last == "s1"


# -- byte-level ----------------------------------------------------------------------


async def reset_mid_head(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Ty")
    await trio.sleep(0.01)
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return False  # closed with linger 0: RST


async def huge_head(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    filler = b"".join(b"X-F%d: %s\r\n" % (i, b"a" * 1000) for i in range(400))
    body = json.dumps(text_result(rid, "huge")).encode()
    await stream.send_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + filler
        + b"Content-Length: %d\r\n\r\n" % len(body) + body
    )  # fmt: skip
    return True


@pytest.mark.parametrize("tool", ["reset_mid_head", "huge_head"])
async def test_broken_heads_are_clean_errors(tool: str) -> None:
    tools: dict[str, Tool] = {"reset_mid_head": reset_mid_head, "huge_head": huge_head}
    async with session_on(tools) as (session, _srv, _transport):
        await warm(session)
        with trio.fail_after(5), pytest.raises(AgentHostError) as info:
            await session.call_tool(tool, {}, timeout=3.0)
        print(tool, "->", type(info.value).__name__, info.value)
        assert "Traceback" not in str(info.value) and "\n" not in str(info.value)
        with trio.fail_after(5):
            assert _text(await session.call_tool("echo", {"message": "z"})) == "z"


async def echo_then_close(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    """Answer (keep-alive implied by HTTP/1.1), then close shortly after: a server whose
    keep-alive timeout is tiny. No ``Connection: close``."""
    await stream.send_all(json_reply(text_result(rid, str(args.get("message")))))
    delay = float(args.get("delay", 0))
    if delay:
        await trio.sleep(delay)
    return False


# -- concurrency, outside cancellation, closing --------------------------------------


async def slow(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    await trio.sleep(float(args.get("delay", 3600)))
    await stream.send_all(json_reply(text_result(rid, "late")))
    return True


async def test_64_concurrent_callers_with_timeouts_and_cancels_leak_no_slot() -> None:
    async with session_on({"slow": slow}) as (session, _srv, transport):
        await warm(session)
        rng = random.Random(7)
        outcomes: Counter[str] = Counter()

        async def caller(i: int) -> None:
            kind = i % 4
            try:
                if kind == 0:  # a timeout
                    await session.call_tool("slow", {}, timeout=0.3)
                elif kind == 1:  # cancelled from outside
                    with trio.move_on_after(rng.uniform(0.0, 0.3)):
                        await session.call_tool("slow", {"delay": 0.2})
                        outcomes["answered"] += 1
                        return
                    outcomes["cancelled"] += 1
                    return
                else:
                    assert _text(await session.call_tool("echo", {"message": str(i)})) == str(i)
                    outcomes["ok"] += 1
                    return
            except AgentHostTimeout:
                outcomes["timeout"] += 1

        for _ in range(3):
            with trio.fail_after(15):
                async with trio.open_nursery() as nursery:
                    for i in range(64):
                        nursery.start_soon(caller, i)
        print(outcomes, "opened", transport.connections_opened)
        # all slots came back: 100 concurrent echos (the pool's size) all get through
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for i in range(100):
                    nursery.start_soon(caller, 2 + 4 * i)
        assert outcomes["timeout"] == 48


async def test_outside_cancel_at_random_points_many_times() -> None:
    async with session_on({"slow": slow}) as (session, srv, transport):
        await warm(session)
        rng = random.Random(11)
        caught = 0
        for _ in range(200):
            with trio.move_on_after(rng.uniform(0, 0.004)) as scope:
                await session.call_tool("slow", {"delay": rng.uniform(0, 0.004)})
            caught += scope.cancelled_caught
            if rng.random() < 0.5:
                assert _text(await session.call_tool("echo", {"message": "e"})) == "e"
        with trio.fail_after(5):
            assert _text(await session.call_tool("echo", {"message": "end"})) == "end"
        await trio.sleep(0.3)
        print(
            f"{caught} cancelled, cancels heard {srv.stats['post:notifications/cancelled']},"
            f" opened {transport.connections_opened}, server conns {srv.conns}"
        )
        assert srv.stats["post:notifications/cancelled"] <= caught


async def test_closing_the_session_while_50_exchanges_wait() -> None:
    errors: Counter[str] = Counter()
    srv_ref: list[Server] = []
    with trio.fail_after(15):
        async with trio.open_nursery() as outer, session_on({"slow": slow}) as (session, srv, _t):
            srv_ref.append(srv)
            await warm(session)

            async def caller() -> None:
                try:
                    await session.call_tool("slow", {})
                except AgentHostError as exc:
                    errors[type(exc).__name__] += "Traceback" not in str(exc)

            for _ in range(50):
                outer.start_soon(caller)
            await trio.sleep(0.5)  # all 50 wait for their answers
            closing = trio.current_time()
        print(f"closed with 50 waiting in {trio.current_time() - closing:.3f}s")
    print(errors)
    assert sum(errors.values()) == 50


@asynccontextmanager
async def process_session(lean: bool) -> AsyncIterator[tuple[Any, StreamableHTTPTransport]]:
    """The raw server in a process of its own: the client's next request races the
    server's close over a real socket, not within one Trio run."""
    port = free_port()
    argv = [sys.executable, "-m", "tests.hostile.test_hostile_lean_exchange", str(port)]
    async with serve(argv, port):
        config = ServerConfig(
            name="atk",
            transport="streamable-http",
            url=f"http://127.0.0.1:{port}/mcp",
            protocol="legacy",
            timeouts=Timeouts(request=20.0, connect=5.0, shutdown=2.0),
        )
        async with open_remote_transport(config) as transport:
            assert isinstance(transport, StreamableHTTPTransport)
            assert (transport.connections_opened is not None) is lean
            async with open_session(transport, name="atk") as session:
                yield session, transport


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "httpx"])
@pytest.mark.parametrize("delay", [0.0, 0.001])
async def test_server_process_closing_idle_keep_alive_fails_calls_cleanly(
    lean: bool, delay: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that closes its keep-alive connections just after answering, without
    ``Connection: close`` (RFC 9112 9.6 asks for it), races the next request on that
    connection: some calls fail (at delay 0, lean 10-14 of 150, httpx 2; at 1 ms both
    about half). They are not retried, as httpx does not: a POST the server may have
    read must not run twice. What must hold: each failure is one clean line, and the
    session goes on."""
    monkeypatch.setenv(LEAN_ENV, "1" if lean else "0")
    async with process_session(lean) as (session, _transport):
        failures: list[str] = []
        for i in range(150):
            try:
                with trio.fail_after(5):
                    args = {"message": f"m{i}", "delay": delay}
                    got = _text(await session.call_tool("echo_then_close", args, timeout=3.0))
                assert got == f"m{i}"
            except AgentHostError as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
        print(f"lean={lean} delay={delay}: {len(failures)} of 150 failed; {failures[:1]}")
        for failure in failures:
            assert "\n" not in failure and "Traceback" not in failure, failure
        await trio.sleep(0.1)  # the last close is in: no race left for the next call
        with trio.fail_after(5):  # the session survived every broken connection
            got = _text(await session.call_tool("echo", {"message": "end"}))
        assert got == "end"


async def record_slow(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    srv.slow_ids.append(rid)
    await trio.sleep_forever()


async def steal(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    """An SSE reply that answers the pending ``record_slow`` request first, then ours."""
    victim = srv.slow_ids[-1]
    events = b"".join(
        b"event: message\ndata: " + json.dumps(m).encode() + b"\n\n"
        for m in (text_result(victim, "stolen"), text_result(rid, "thief"))
    )
    await stream.send_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n"
        % len(events)
        + events
    )
    return True


async def test_answer_on_another_stream_ends_a_scope_free_wait() -> None:
    tools: dict[str, Tool] = {"record_slow": record_slow, "steal": steal}
    async with session_on(tools) as (session, srv, transport):
        seen: set[Any] = set()
        for _ in range(20):
            await warm(session)  # idle connections: record_slow goes scope-free
            if srv.slow_ids:
                seen.add(srv.slow_ids[-1])
            got: list[str] = []
            async with trio.open_nursery() as nursery:

                async def victim(got: list[str] = got) -> None:
                    got.append(_text(await session.call_tool("record_slow", {}, timeout=10)))

                nursery.start_soon(victim)
                with trio.fail_after(5):
                    while not srv.slow_ids or srv.slow_ids[-1] in seen:
                        await trio.sleep(0.005)
                    assert _text(await session.call_tool("steal", {})) == "thief"
            assert got == ["stolen"]
        assert _text(await session.call_tool("echo", {"message": "z"})) == "z"
        print("stolen 20 times; opened", transport.connections_opened)


async def test_timeout_racing_the_answer() -> None:
    async with session_on({"slow": slow}) as (session, _srv, transport):
        await warm(session)
        rng = random.Random(5)
        outcomes: Counter[str] = Counter()
        for _ in range(60):
            try:
                with trio.fail_after(5):
                    await session.call_tool(
                        "slow", {"delay": 0.05 + rng.uniform(-0.003, 0.003)}, timeout=0.05
                    )
                outcomes["answered"] += 1
            except AgentHostTimeout:
                outcomes["timeout"] += 1
            with trio.fail_after(5):
                assert _text(await session.call_tool("echo", {"message": "e"})) == "e"
        print(outcomes, "opened", transport.connections_opened)
        assert outcomes["timeout"] and outcomes["answered"]


async def early_hints(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    """103 Early Hints (RFC 8297) before the answer: a client skips 1xx responses."""
    await stream.send_all(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
    await trio.sleep(0.05)  # the hints go while the server computes its answer
    await stream.send_all(json_reply(text_result(rid, "after hints")))
    return True


@pytest.mark.parametrize(
    "lean",
    [True, False],
    ids=["lean", "httpx"],
)
async def test_informational_1xx_before_the_answer_is_skipped(
    lean: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LEAN_ENV, "1" if lean else "0")
    async with session_on({"early_hints": early_hints}) as (session, _srv, _transport):
        await warm(session)
        with trio.fail_after(5):
            try:
                got = _text(await session.call_tool("early_hints", {}, timeout=3.0))
            except AgentHostError as exc:
                got = f"{type(exc).__name__}: {exc}"
        print(f"lean={lean} 103 then 200 ->", got)
        assert got == "after hints"


async def endless_chunked(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    await stream.send_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    piece = b"x" * 65536
    chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
    while True:
        await stream.send_all(chunk)


async def eof_body_never_ends(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
    body = json.dumps(text_result(rid, "no length")).encode()
    await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + body)
    await trio.sleep_forever()


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "httpx"])
async def test_endless_chunked_json_is_bounded(lean: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEAN_ENV, "1" if lean else "0")
    async with session_on({"endless_chunked": endless_chunked}) as (session, _srv, _transport):
        await warm(session)
        start = trio.current_time()
        with trio.fail_after(10), pytest.raises(AgentHostError) as info:
            await session.call_tool("endless_chunked", {}, timeout=5.0)
        print(
            f"lean={lean} endless chunked -> {type(info.value).__name__}: {info.value}"
            f" in {trio.current_time() - start:.2f}s"
        )
        assert "larger than the maximum" in str(info.value)
        assert _text(await session.call_tool("echo", {"message": "z"})) == "z"


async def test_too_large_error_names_the_server_once() -> None:
    async with session_on({"endless_chunked": endless_chunked}) as (session, _srv, _transport):
        await warm(session)
        with trio.fail_after(10), pytest.raises(AgentHostError) as info:
            await session.call_tool("endless_chunked", {}, timeout=5.0)
        assert not str(info.value).startswith("atk: atk:")
        assert _text(await session.call_tool("echo", {"message": "z"})) == "z"


async def test_eof_delimited_json_that_never_ends_times_out() -> None:
    async with session_on({"eof_body_never_ends": eof_body_never_ends}) as (session, _srv, _t):
        await warm(session)
        with trio.fail_after(10), pytest.raises(AgentHostTimeout):
            await session.call_tool("eof_body_never_ends", {}, timeout=1.0)
        assert _text(await session.call_tool("echo", {"message": "z"})) == "z"


async def test_a_failing_transport_ends_20_waiting_scope_free_exchanges() -> None:
    """One call's 404 (session expired) fails the transport: the 20 calls waiting on
    their own connections end at once with it, not at their timeouts."""
    errors: Counter[str] = Counter()
    async with session_on({"slow": slow, "expired": expired}) as (session, _srv, transport):
        await warm(session)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:

                async def caller() -> None:
                    try:
                        await session.call_tool("slow", {}, timeout=30)
                    except AgentHostError as exc:
                        errors[type(exc).__name__] += 1

                for _ in range(20):
                    nursery.start_soon(caller)
                await trio.sleep(0.3)
                start = trio.current_time()
                try:
                    await session.call_tool("expired", {}, timeout=5)
                except AgentHostError as exc:
                    errors["expired:" + type(exc).__name__] += 1
        took = trio.current_time() - start
    print(errors, f"all ended {took:.3f}s after the 404; opened {transport.connections_opened}")
    assert sum(errors.values()) == 21
    assert took < 2


TOOLS: dict[str, Tool] = {"echo_then_close": echo_then_close, "slow": slow}


async def _serve_forever(port: int) -> None:
    srv = Server()
    srv.tools = {"echo": echo, **TOOLS}
    await trio.serve_tcp(srv.handle, port, host="127.0.0.1")


if __name__ == "__main__":  # the same server as a process of its own (real network timing)
    trio.run(_serve_forever, int(sys.argv[1]))
