"""Attack on the scope-free lean HTTP exchange (LeanPool.start -> _answered): a request
sent on an idle keep-alive connection runs with no cancel scope, and only closing its
socket (LeanResponse.cancel) ends it. A hostile MCP server here is a raw Trio TCP server
(every byte is the test's choice); the client is the real transport and session.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import random
import socket
import struct
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from agenthost.errors import AgentHostError, AgentHostTimeout, JSONRPCError, SessionExpired
from agenthost.session import ClientSession
from tests.hostile.raw_mcp import (
    McpServer,
    json_reply,
    mcp_server,
    session_to,
    text_of,
    until,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.WARNING)
    yield
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage() for r in bad]


# -- slowloris ------------------------------------------------------------------------------


async def trickle_body(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await stream.send_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"
    )
    while True:
        await trio.sleep(0.02)
        await stream.send_all(b" ")


async def trickle_head(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await stream.send_all(b"HTTP/1.1 200 OK\r\n")
    while True:
        await trio.sleep(0.02)
        await stream.send_all(b"X-Slow: 1\r\n")


@pytest.mark.parametrize("tool", ["trickle_body", "trickle_head"])
async def test_slowloris_reply_times_out_and_the_next_call_works(tool: str) -> None:
    tools = {"trickle_body": trickle_body, "trickle_head": trickle_head}
    async with mcp_server(tools) as server, session_to(server) as (session, _):
        start = trio.current_time()
        with trio.fail_after(5), pytest.raises(AgentHostTimeout):
            await session.call_tool(tool, {}, timeout=0.4)
        assert trio.current_time() - start < 2.0
        with trio.fail_after(3):
            assert text_of(await session.call_tool("echo", {"message": "ok"})) == "ok"
        await until(lambda: len(server.cancelled) == 1)
        assert server.cancelled == [server.call_ids[1]]
        # The trickling connection was closed by the client: the server's write broke.
        await until(lambda: server.stats["broken"] == 1)


# -- status codes on the fast path ----------------------------------------------------------


async def expired(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await stream.send_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
    return True


async def test_404_on_the_fast_path_expires_the_session() -> None:
    async with mcp_server({"expired": expired}) as server, session_to(server) as (session, _):
        with trio.fail_after(5), pytest.raises(SessionExpired, match="404"):
            await session.call_tool("expired", {})
        with trio.fail_after(5), pytest.raises(SessionExpired):
            await session.call_tool("echo", {"message": "after"})


async def moved_same_origin(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await stream.send_all(
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /moved\r\nContent-Length: 0\r\n\r\n"
    )
    return True


async def moved_elsewhere(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await stream.send_all(
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.2:9/x\r\n"
        b"Content-Length: 0\r\n\r\n"
    )
    return True


async def test_redirect_on_the_fast_path_hands_off_to_httpx_within_the_origin() -> None:
    tools = {"moved": moved_same_origin}
    async with mcp_server(tools) as server, session_to(server) as (session, _):
        with trio.fail_after(5):
            assert text_of(await session.call_tool("moved", {})) == "moved"
        assert server.stats["moved"] == 1
        with trio.fail_after(5):
            assert text_of(await session.call_tool("echo", {"message": "ok"})) == "ok"


async def test_cross_origin_redirect_on_the_fast_path_is_not_followed() -> None:
    tools = {"elsewhere": moved_elsewhere}
    async with mcp_server(tools) as server, session_to(server) as (session, _):
        with trio.fail_after(5), pytest.raises(JSONRPCError, match=r"(?i)redirect"):
            await session.call_tool("elsewhere", {})
        with trio.fail_after(5):
            assert text_of(await session.call_tool("echo", {"message": "ok"})) == "ok"


async def new_session_id(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await stream.send_all(json_reply(rid, "rotated", b"Mcp-Session-Id: s2\r\n"))
    return True


async def test_a_new_session_id_in_a_reply_does_not_replace_ours() -> None:
    async with mcp_server({"rotate": new_session_id}) as server, session_to(server) as (s, _):
        assert text_of(await s.call_tool("rotate", {})) == "rotated"
        assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"
        last = server.heads[-1].lower()
        assert b"mcp-session-id: s1" in last


# -- connection-level tricks ----------------------------------------------------------------


async def answer_then_close(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await stream.send_all(json_reply(rid, str(args.get("message"))))
    delay = float(args.get("delay", 0))
    if delay:
        await trio.sleep(delay)
    return False  # closes the keep-alive connection, with no "Connection: close"


async def test_a_request_dropped_on_a_closing_connection_fails_alone() -> None:
    """The server closes 1 ms after each answer, so the next request on that connection
    is dropped unread (RST): that call fails with an error, never a traceback or a
    wedge; the session goes on."""
    async with mcp_server({"close": answer_then_close}) as server, session_to(server) as (s, _):
        failed = 0
        messages: set[str] = set()
        for i in range(60):
            try:
                result = await s.call_tool("close", {"message": f"m{i}", "delay": 0.001})
                assert text_of(result) == f"m{i}"
            except JSONRPCError as exc:
                failed += 1
                messages.add(str(exc).split(":")[1].strip())
        assert failed < 60
        assert messages <= {"HTTP request failed"}, messages
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"


def reset(stream: trio.SocketStream) -> None:
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


async def rst_mid_head(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: appli")
    await trio.sleep(0.05)
    reset(stream)
    return False


async def rst_mid_body(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await stream.send_all(json_reply(rid, "x" * 1000)[:-500])
    await trio.sleep(0.05)
    reset(stream)
    return False


async def rst_at_once(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    reset(stream)
    return False


@pytest.mark.parametrize("tool", ["rst_mid_head", "rst_mid_body", "rst_at_once"])
async def test_a_reset_connection_fails_one_call_only(tool: str) -> None:
    tools = {"rst_mid_head": rst_mid_head, "rst_mid_body": rst_mid_body, "rst_at_once": rst_at_once}
    async with mcp_server(tools) as server, session_to(server) as (session, _):
        with trio.fail_after(5), pytest.raises(JSONRPCError, match="HTTP request failed"):
            await session.call_tool(tool, {})
        with trio.fail_after(5):
            assert text_of(await session.call_tool("echo", {"message": "ok"})) == "ok"
        assert server.cancelled == []


async def huge_head(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    size = int(args["size"])
    line = b"X-Pad: " + b"a" * 1000 + b"\r\n"
    reply = json_reply(rid, "big", line * (size // len(line)))
    for start in range(0, len(reply), 7000):  # many small writes
        await stream.send_all(reply[start : start + 7000])
    return True


async def test_huge_header_blocks() -> None:
    async with mcp_server({"huge": huge_head}) as server, session_to(server) as (session, _):
        with trio.fail_after(5):
            assert text_of(await session.call_tool("huge", {"size": 200_000})) == "big"
        with trio.fail_after(5), pytest.raises(JSONRPCError, match="headers larger"):
            await session.call_tool("huge", {"size": 300_000})
        with trio.fail_after(5):
            assert text_of(await session.call_tool("echo", {"message": "ok"})) == "ok"


# -- concurrency, cancellation, closing -----------------------------------------------------


async def jittery(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await trio.sleep(float(args.get("delay", 0)))
    await stream.send_all(json_reply(rid, str(args.get("message"))))
    return True


async def test_64_callers_with_timeouts_and_cancels_leak_no_pool_slot() -> None:
    rng = random.Random(7)
    async with mcp_server({"jittery": jittery}) as server, session_to(server) as (s, transport):
        outcomes: Counter[str] = Counter()

        async def caller(i: int) -> None:
            delay = rng.choice([0.0, 0.0, 0.001, 0.05, 0.3])
            with trio.move_on_after(rng.choice([0.0005, 0.01, 0.1, 5.0])) as scope:
                try:
                    result = await s.call_tool(
                        "jittery", {"message": f"m{i}", "delay": delay}, timeout=0.2
                    )
                    assert text_of(result) == f"m{i}"
                    outcomes["ok"] += 1
                except AgentHostTimeout:
                    outcomes["timeout"] += 1
            if scope.cancelled_caught:
                outcomes["cancelled"] += 1

        for _ in range(5):  # 320 calls, over 100 pool slots' worth of abandoned ones
            async with trio.open_nursery() as nursery:
                for i in range(64):
                    nursery.start_soon(caller, i)
        print(dict(outcomes), "opened", transport.connections_opened)
        assert outcomes["timeout"] + outcomes["cancelled"] > 100
        # Every slot is free again: 100 concurrent calls held 0.2 s each all get answered.
        results: list[str] = []

        async def held(i: int) -> None:
            result = await s.call_tool("jittery", {"message": f"h{i}", "delay": 0.2}, timeout=5)
            results.append(text_of(result))

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                for i in range(100):
                    nursery.start_soon(held, i)
        assert sorted(results) == sorted(f"h{i}" for i in range(100))
        # Abandoned exchanges closed their connections (the server saw them end).
        await until(lambda: server.open <= 101)


async def test_random_outside_cancellation_many_times() -> None:
    rng = random.Random(11)
    async with mcp_server({"jittery": jittery}) as server, session_to(server) as (s, transport):
        cancelled = answered = 0
        for i in range(300):
            delay = rng.choice([0.0, 0.0005, 0.002])
            with trio.move_on_after(rng.uniform(0, 0.004)) as scope:
                result = await s.call_tool("jittery", {"message": f"m{i}", "delay": delay})
                assert text_of(result) == f"m{i}"
                answered += 1
            cancelled += scope.cancelled_caught
        print("cancelled", cancelled, "answered", answered, "opened", transport.connections_opened)
        assert cancelled > 20 and answered > 20
        await until(lambda: len(server.cancelled) == cancelled)
        assert len(set(server.cancelled)) == cancelled  # one notifications/cancelled each
        assert set(server.cancelled) <= set(server.call_ids)
        with trio.fail_after(3):
            for i in range(20):
                assert text_of(await s.call_tool("echo", {"message": f"e{i}"})) == f"e{i}"
        await until(lambda: server.open <= 3)  # no wedged or leaked connection


async def hang(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    """Never answer; notice the client closing the connection."""
    while await stream.receive_some(65536):
        pass
    return False


async def test_closing_the_session_while_50_exchanges_wait() -> None:
    async with mcp_server({"hang": hang}) as server:
        errors: list[BaseException] = []
        started = trio.Event()

        async def caller(s: ClientSession) -> None:
            try:
                await s.call_tool("hang", {}, timeout=30)
            except AgentHostError as exc:
                errors.append(exc)

        with trio.fail_after(10):
            async with trio.open_nursery() as outer, session_to(server) as (s, _):
                for _ in range(50):
                    outer.start_soon(caller, s)
                await until(lambda: len(server.call_ids) == 51)  # and the warm-up call
                started.set()
                # The session is closed: every caller ends, none hangs.
        assert started.is_set()
        assert len(errors) == 50, errors[:3]
        await until(lambda: server.open == 0)


async def test_server_dying_while_50_exchanges_wait() -> None:
    errors: list[BaseException] = []
    async with trio.open_nursery() as nursery:
        server_scope = trio.CancelScope()
        ready = trio.Event()
        box: list[McpServer] = []

        async def run_server() -> None:
            with server_scope:
                async with mcp_server({"hang": hang}) as server:
                    box.append(server)
                    ready.set()
                    await trio.sleep_forever()

        nursery.start_soon(run_server)
        await ready.wait()
        server = box[0]
        async with session_to(server) as (s, _):

            async def caller() -> None:
                try:
                    await s.call_tool("hang", {}, timeout=30)
                except AgentHostError as exc:
                    errors.append(exc)

            with trio.fail_after(10):
                async with trio.open_nursery() as callers:
                    for _ in range(50):
                        callers.start_soon(caller)
                    await until(lambda: len(server.call_ids) == 51)  # and the warm-up call
                    server_scope.cancel()  # every connection closes under the callers
    assert len(errors) == 50, errors[:3]


# -- an answer on another stream; a request too big for the socket -----------------------


async def json_stall(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    """A JSON head, then nothing: the body never comes (the answer comes elsewhere)."""
    await stream.send_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
    while await stream.receive_some(65536):
        pass
    return False


async def test_an_answer_on_another_stream_ends_the_scope_free_exchange() -> None:
    victims: list[Any] = []

    async def stall(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
        victims.append(rid)
        return await json_stall(stream, rid, args)

    async def steal(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
        stolen = json.loads(json_reply(victims[-1], "stolen").partition(b"\r\n\r\n")[2])
        mine = json.loads(json_reply(rid, "thief").partition(b"\r\n\r\n")[2])
        data = json.dumps([stolen, mine]).encode()
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(data), data)
        )
        return True

    tools = {"stall": stall, "steal": steal}
    async with mcp_server(tools) as server, session_to(server) as (s, _):
        results: list[str] = []

        async def victim() -> None:
            results.append(text_of(await s.call_tool("stall", {}, timeout=10)))

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(victim)
                await until(lambda: bool(victims))
                results.append(text_of(await s.call_tool("steal", {})))
        assert sorted(results) == ["stolen", "thief"]
        await until(lambda: server.stats["broken"] + server.open <= 3)
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"


BIG = "x" * 8_000_000


@pytest.mark.parametrize("how", ["never_read", "answer_413_and_close", "rst"])
async def test_a_request_too_big_for_the_socket_against_a_server_that_will_not_read_it(
    how: str,
) -> None:
    async def never_read(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async def answer_413(stream: trio.SocketStream) -> None:
        await stream.send_all(b"HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\n\r\nbig")

    async def rst(stream: trio.SocketStream) -> None:
        reset(stream)

    async with mcp_server({}) as server, session_to(server) as (s, _):
        server.big = {"never_read": never_read, "answer_413_and_close": answer_413, "rst": rst}[how]
        start = trio.current_time()
        with trio.fail_after(5), pytest.raises((AgentHostTimeout, JSONRPCError)) as caught:
            await s.call_tool("echo", {"message": BIG}, timeout=1.0)
        print(how, type(caught.value).__name__, caught.value, trio.current_time() - start)
        assert trio.current_time() - start < 2.5
        if how == "never_read":
            assert isinstance(caught.value, AgentHostTimeout)
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"


async def test_outside_cancels_while_a_big_request_is_half_written() -> None:
    """Cancel from outside at random points while the rest of a big request is being
    written (the wait_writable path of finish_head): each ends cleanly."""
    rng = random.Random(3)

    async with mcp_server({}) as server, session_to(server) as (s, _):
        cancelled = 0
        for _ in range(15):
            with trio.move_on_after(rng.uniform(0, 0.05)) as scope:
                await s.call_tool("echo", {"message": BIG[:3_000_000]})
            cancelled += scope.cancelled_caught
        assert cancelled
        await until(lambda: len(server.cancelled) == cancelled)
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"


# -- 1xx interim responses (RFC 9110 15.2: a client must parse them before the final one) --


async def interim(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    head = (
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
        if args["kind"] == "103"
        else b"HTTP/1.1 100 Continue\r\n\r\n"
    )
    reply = json_reply(rid, "final")
    if args["split"]:
        await stream.send_all(head)
        await trio.sleep(0.05)
        await stream.send_all(reply)
    else:
        await stream.send_all(head + reply)
    return True


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("kind", ["100", "103"])
async def test_an_interim_1xx_response_before_the_answer(kind: str, split: bool) -> None:
    async with mcp_server({"interim": interim}) as server, session_to(server) as (s, _):
        with trio.fail_after(5):
            result = await s.call_tool("interim", {"kind": kind, "split": split})
        assert text_of(result) == "final"
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"


async def test_a_1xx_response_does_not_desynchronise_the_connection() -> None:
    async with mcp_server({"interim": interim}) as server, session_to(server) as (s, _):
        with contextlib.suppress(AgentHostError):
            await s.call_tool("interim", {"kind": "103", "split": True})
        failures = []
        for i in range(5):
            try:
                assert text_of(await s.call_tool("echo", {"message": f"e{i}"})) == f"e{i}"
            except AgentHostError as exc:
                failures.append(str(exc))
        assert not failures, failures


# -- bytes after a complete answer, in the same write -----------------------------------------


async def trailing(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    extra = {
        "crlf": b"\r\n",
        "junk": b"XYZ garbage\r\n",
        "second_response": json_reply(rid, "smuggled"),
    }[args["what"]]
    await stream.send_all(json_reply(rid, "answer") + extra)
    # then keep reading: the server stays as a keep-alive server would
    return True


@pytest.mark.parametrize(
    "what",
    [
        "crlf",
        "junk",
        "second_response",
    ],
)
async def test_bytes_after_a_complete_answer(what: str) -> None:
    async with mcp_server({"trailing": trailing}) as server, session_to(server) as (s, _):
        with trio.fail_after(5):
            assert text_of(await s.call_tool("trailing", {"what": what})) == "answer"
        failures = []
        for i in range(3):
            try:
                assert text_of(await s.call_tool("echo", {"message": f"e{i}"})) == f"e{i}"
            except AgentHostError as exc:
                failures.append(str(exc))
        assert not failures, failures


# -- outside cancels across every way a fast-path answer continues -------------------------


def _sse_event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


async def mixed(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await trio.sleep(float(args.get("delay", 0)))
    answer = json.loads(json_reply(rid, "done").partition(b"\r\n\r\n")[2])
    note = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": "before"},
    }
    kind = args["kind"]
    if kind == "json":
        await stream.send_all(json_reply(rid, "done"))
        return True
    if kind == "json_batch":  # a notification first: delivered in a scope
        data = json.dumps([note, answer]).encode()
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    else:  # SSE: handed on to _post_request (begun=...)
        data = _sse_event(note) + _sse_event(answer)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    if kind == "sse_trickle":  # chunked, one event at a time
        await stream.send_all(head + b"Transfer-Encoding: chunked\r\n\r\n")
        for part in (_sse_event(note), _sse_event(answer)):
            await trio.sleep(0.001)
            await stream.send_all(b"%x\r\n%s\r\n" % (len(part), part))
        await stream.send_all(b"0\r\n\r\n")
        return True
    await stream.send_all(head + b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    return True


@pytest.mark.parametrize("seed", [5, 6, 7, 8])
async def test_outside_cancels_across_json_batch_and_sse_answers(seed: int) -> None:
    rng = random.Random(seed)
    async with mcp_server({"mixed": mixed}) as server, session_to(server) as (s, transport):
        cancelled = answered = 0
        kinds = ["json", "json_batch", "sse", "sse_trickle"]
        for _ in range(240):
            kind = rng.choice(kinds)
            delay = rng.choice([0.0, 0.0005, 0.002])
            with trio.move_on_after(rng.uniform(0, 0.005)) as scope:
                result = await s.call_tool("mixed", {"kind": kind, "delay": delay})
                assert text_of(result) == "done"
                answered += 1
            cancelled += scope.cancelled_caught
        print("cancelled", cancelled, "answered", answered, "opened", transport.connections_opened)
        assert cancelled > 20 and answered > 20
        await until(lambda: len(server.cancelled) == cancelled)
        assert len(set(server.cancelled)) == cancelled
        with trio.fail_after(3):
            for i in range(20):
                assert text_of(await s.call_tool("echo", {"message": f"e{i}"})) == f"e{i}"
        await until(lambda: server.open <= 3)


# -- a compressed answer (a server or CDN that compresses whatever was asked) ---------------


async def gzipped(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    body = json_reply(rid, "zipped").partition(b"\r\n\r\n")[2]
    data = gzip.compress(body)
    await stream.send_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
    )
    return True


async def test_a_gzip_answer_the_request_did_not_ask_for_fails_cleanly() -> None:
    """The lean path asks for no content coding (``Accept-Encoding: identity``; httpx asks
    for gzip and decodes it). A server that gzips anyway fails that call with one line
    naming the coding; the session goes on."""
    async with mcp_server({"gzipped": gzipped}) as server, session_to(server) as (s, _):
        with trio.fail_after(5), pytest.raises(AgentHostError, match="'gzip'-encoded reply"):
            await s.call_tool("gzipped", {})
        encodings = {
            line.split(b":", 1)[1].strip()
            for line in server.heads[-1].lower().split(b"\r\n")
            if line.startswith(b"accept-encoding:")
        }
        assert encodings == {b"identity"}
        with trio.fail_after(5):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"


# -- answers a lenient server may send -----------------------------------------------------


async def variant(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    body = json_reply(rid, "v").partition(b"\r\n\r\n")[2]
    how = args["how"]
    if how == "http10_until_eof":
        await stream.send_all(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body)
        return False
    if how == "chunked":
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n%x;ext=1\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n"
            % (len(body), body)
        )
        return True
    content_type = {
        "charset": b"application/json; charset=utf-8",
        "upper": b"Application/JSON",
        "spaced": b"application/json ; charset=UTF-8",
    }[how]
    await stream.send_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
        % (content_type, len(body), body)
    )
    return True


@pytest.mark.parametrize("how", ["http10_until_eof", "chunked", "charset", "upper", "spaced"])
async def test_lenient_answers(how: str) -> None:
    async with mcp_server({"variant": variant}) as server, session_to(server) as (s, _):
        for _ in range(3):
            with trio.fail_after(5):
                assert text_of(await s.call_tool("variant", {"how": how})) == "v"
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"
