"""Attack on the SSE reply's short path (``_sse_answer`` / ``LeanResponse.peek``): a raw
HTTP/1.1 server answers ``tools/call`` with ``200 text/event-stream`` bodies it picks byte
by byte, all in one write with the head. Each outcome is compared with the general path
(``AGENTHOST_LEAN_HTTP=0``), which must be what the short path delivers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from agenthost.asks import ClientHandlers
from agenthost.config.model import ServerConfig, Timeouts
from agenthost.connection import open_remote_transport, open_session
from agenthost.errors import AgentHostError
from agenthost.transports._httpx import LEAN_ENV
from agenthost.transports.http import StreamableHTTPTransport
from tests.hostile.raw_http_mcp import Server, Tool, echo


@asynccontextmanager
async def session_on(
    tools: dict[str, Tool],
    request_timeout: float = 20.0,
    handlers: ClientHandlers | None = None,
    max_message_size: int = 16 * 1024 * 1024,
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
            max_message_size=max_message_size,
            timeouts=Timeouts(request=request_timeout, connect=5.0, shutdown=2.0),
        )
        async with open_remote_transport(config) as transport:
            assert isinstance(transport, StreamableHTTPTransport)
            async with open_session(transport, name="atk", handlers=handlers) as session:
                yield session, srv, transport
        nursery.cancel_scope.cancel()


async def warm(session: Any) -> None:
    """Two calls: the second runs on an idle connection, i.e. the scope-free path."""
    for _ in range(2):
        assert _text(await session.call_tool("echo", {"message": "w"})) == "w"


def _text(result: Any) -> str:
    return "".join(getattr(b, "text", "") for b in result.content) + (
        "!err" if getattr(result, "is_error", False) else ""
    )


def _msg(rid: Any, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


def _ev(payload: Any, nl: bytes = b"\n") -> bytes:
    return b"event: message" + nl + b"data: " + json.dumps(payload).encode() + nl + nl


def _head(body: bytes, extra: bytes = b"", length: int | None = None) -> bytes:
    n = len(body) if length is None else length
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        + extra
        + b"Content-Length: %d\r\n\r\n" % n
    )


def bodies(rid: Any) -> dict[str, bytes]:
    ans = _msg(rid, "answer")
    return {
        "plain": _ev(ans),
        "priming": b"id: 7\nretry: 10\n\n" + _ev(ans),
        "crlf": _ev(ans, b"\r\n"),
        "cr": _ev(ans, b"\r"),
        "bom": b"\xef\xbb\xbf" + _ev(ans),
        "no_event_field": b"data: " + json.dumps(ans).encode() + b"\n\n",
        "wrong_id_then_right": _ev(_msg(rid + 1000, "stray")) + _ev(ans),
        "right_then_wrong_id": _ev(ans) + _ev(_msg(rid + 1000, "stray")),
        "string_id": _ev(_msg(str(rid), "string")) + _ev(ans),
        "float_id": _ev(_msg(float(rid), "float")),
        "true_id": _ev(_msg(True, "bool")) + _ev(ans),
        "null_id_then_answer": _ev(_msg(None, "null")) + _ev(ans),
        "batch": _ev([ans]),
        "error": _ev({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": "no"}}),
        "result_not_object": _ev({"jsonrpc": "2.0", "id": rid, "result": [1]}),
        "notification_then_answer": _ev(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "n"},
            }
        )
        + _ev(ans),
        "answer_then_notification": _ev(ans)
        + _ev(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": 1},
            }
        ),
        "other_event_type": b"event: ping\ndata: x\n\n" + _ev(ans),
        "answer_twice": _ev(ans) + _ev(ans),
        "mid_event_end": _ev(ans) + b'event: message\ndata: {"jsonrpc"',
        "multi_data_lines": b"event: message\ndata: "
        + json.dumps(ans).encode()[:10]
        + b"\ndata: "
        + json.dumps(ans).encode()[10:]
        + b"\n\n",
    }


CASES = sorted(bodies(1))


def sse_tool(case: str, mode: str = "one") -> Any:
    async def tool(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
        body = bodies(rid)[case]
        if mode == "one":
            await stream.send_all(_head(body) + body)
            return True
        if mode == "close":
            await stream.send_all(_head(body, b"Connection: close\r\n") + body)
            return False
        if mode == "junk":
            await stream.send_all(_head(body) + body + b"HTTP/1.1 200 OK\r\nJunk")
            return False
        if mode == "chunked":
            wire = b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n" + wire
            )
            return True
        if mode == "interim":
            await stream.send_all(b"HTTP/1.1 100 Continue\r\n\r\n" + _head(body) + body)
            return True
        raise AssertionError(mode)

    return tool


async def outcome(case: str, mode: str, lean: bool, mp: pytest.MonkeyPatch) -> tuple[str, int]:
    mp.setenv(LEAN_ENV, "1" if lean else "0")
    async with session_on({"sse": sse_tool(case, mode)}, request_timeout=3.0) as (session, srv, _):
        await warm(session)
        got: list[str] = []
        for _ in range(2):
            try:
                with trio.fail_after(5):
                    got.append(_text(await session.call_tool("sse", {})))
            except AgentHostError as exc:
                got.append(type(exc).__name__)
        # a following plain call still works
        got.append(_text(await session.call_tool("echo", {"message": "after"})))
        return "|".join(got), srv.conns


@pytest.mark.parametrize("case", CASES)
async def test_one_read_stream_delivers_what_the_general_path_does(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lean, _ = await outcome(case, "one", True, monkeypatch)
    slow, _ = await outcome(case, "one", False, monkeypatch)
    assert lean == slow


@pytest.mark.parametrize("mode", ["close", "junk", "chunked", "interim"])
@pytest.mark.parametrize("case", ["plain", "answer_then_notification"])
async def test_framing_variants_match_the_general_path(
    case: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lean, lean_conns = await outcome(case, mode, True, monkeypatch)
    slow, _ = await outcome(case, mode, False, monkeypatch)
    assert lean == slow
    if mode in ("close", "junk"):
        assert lean_conns >= 3  # the closed connection was not reused


async def test_200_stream_answers_reuse_one_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEAN_ENV, "1")
    async with session_on({"sse": sse_tool("priming")}) as (session, srv, _):
        await warm(session)
        before = srv.conns
        for i in range(200):
            assert _text(await session.call_tool("sse", {})) == "answer", i
        assert srv.conns == before


def _note(n: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": n},
    }


async def _seen_order(lean: bool, mp: pytest.MonkeyPatch) -> list[Any]:
    mp.setenv(LEAN_ENV, "1" if lean else "0")
    seen: list[Any] = []

    async def listen(ctx: Any, params: Any) -> None:
        seen.append(params["data"])

    async def tool(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
        body = _ev(_note(1)) + _ev(_msg(rid, "answer")) + _ev(_note(2))
        await stream.send_all(_head(body) + body)
        return True

    handlers = ClientHandlers(notifications={"notifications/message": listen})
    async with session_on({"sse": tool}, handlers=handlers) as (session, _srv, _):
        await warm(session)
        for _ in range(3):
            assert _text(await session.call_tool("sse", {})) == "answer"
        await session.call_tool("echo", {"message": "x"})
        await trio.testing.wait_all_tasks_blocked()
    return seen


async def test_notifications_around_the_answer_arrive_once_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lean = await _seen_order(True, monkeypatch)
    slow = await _seen_order(False, monkeypatch)
    # Every notification arrives once, in order, on both paths; the one after the
    # answer too (it was dropped, on both: the reader stopped at the answer and the
    # events already parsed from that read after it were lost).
    assert lean == slow == [1, 2, 1, 2, 1, 2]


def split_tool(cut: int) -> Tool:
    async def tool(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
        body = b"id: 1\n\n" + _ev(_msg(rid, "answer"))
        wire = _head(body) + body
        await stream.send_all(wire[:cut])
        await trio.sleep(0.002)
        await stream.send_all(wire[cut:])
        return True

    return tool


async def test_a_stream_cut_in_two_reads_at_many_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEAN_ENV, "1")
    tools = {f"c{cut}": split_tool(cut) for cut in range(1, 250)}
    async with session_on(tools) as (session, srv, _):
        await warm(session)
        before = srv.conns
        for name in tools:
            assert _text(await session.call_tool(name, {})) == "answer", name
        assert srv.conns == before


@pytest.mark.parametrize("delta", [-5, -1, 1, 40])
async def test_content_length_off_matches_the_general_path(
    delta: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def make() -> Tool:
        async def tool(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
            body = _ev(_msg(rid, "answer"))
            await stream.send_all(_head(body, length=len(body) + delta) + body)
            if delta > 0:
                await stream.send_all(b"\n" * delta)  # the rest comes later: still valid
                return True
            return False  # the bytes past a short Content-Length are junk: hang up

        return tool

    got = []
    for lean in (True, False):
        monkeypatch.setenv(LEAN_ENV, "1" if lean else "0")
        async with session_on({"sse": make()}, request_timeout=2.0) as (session, _srv, _):
            await warm(session)
            for name in ("sse", "echo"):
                try:
                    got.append(_text(await session.call_tool(name, {"message": "after"})))
                except AgentHostError as exc:
                    got.append(type(exc).__name__)
    assert got[:2] == got[2:], got


async def test_answer_then_a_busy_stream_and_a_cancelled_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chunked, answer in, no last chunk: the call gets its answer; a call cancelled while
    its stream says nothing ends at once; the session goes on."""

    async def busy(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
        body = _ev(_msg(rid, "answer"))
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n"
        )
        await trio.sleep_forever()

    async def silent(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
        body = b"id: 1\n\n"
        await stream.send_all(_head(body, length=10_000) + body)
        await trio.sleep_forever()

    for lean in (True, False):
        monkeypatch.setenv(LEAN_ENV, "1" if lean else "0")
        async with session_on({"busy": busy, "silent": silent}) as (session, _srv, _):
            await warm(session)
            with trio.fail_after(5):
                assert _text(await session.call_tool("busy", {})) == "answer"
            with trio.move_on_after(0.2) as scope:
                await session.call_tool("silent", {})
            assert scope.cancelled_caught
            with trio.fail_after(5):
                assert _text(await session.call_tool("echo", {"message": "on"})) == "on"


@pytest.mark.parametrize("pad", range(-60, 4, 3))
async def test_data_near_the_message_size_limit(pad: int, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 4000

    async def big(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
        base = len(json.dumps(_msg(rid, "")))
        body = _ev(_msg(rid, "x" * (limit - base + pad)))
        await stream.send_all(_head(body) + body)
        return True

    got: list[str] = []
    for lean in (True, False):
        monkeypatch.setenv(LEAN_ENV, "1" if lean else "0")
        async with session_on({"big": big}, request_timeout=2.0, max_message_size=limit) as (
            session,
            _srv,
            _,
        ):
            await warm(session)
            for name in ("big", "echo"):
                try:
                    got.append(str(len(_text(await session.call_tool(name, {"message": "a"})))))
                except AgentHostError as exc:
                    got.append(type(exc).__name__)
    assert got[:2] == got[2:], got


async def _cross(lean: bool, mp: pytest.MonkeyPatch) -> list[str]:
    """A stream that holds only the answer to another caller's pending request."""
    mp.setenv(LEAN_ENV, "1" if lean else "0")
    held: list[Any] = []
    parked = trio.Event()

    async def hold(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
        held.append(rid)
        parked.set()
        await trio.sleep_forever()

    async def cross(stream: trio.SocketStream, rid: Any, args: Any, srv: Server) -> bool:
        body = _ev(_msg(held[0], "for-hold"))
        await stream.send_all(_head(body) + body)
        return True

    got: list[str] = []

    async def call(name: str) -> None:
        try:
            got.append(f"{name}={_text(await session.call_tool(name, {}))}")
        except AgentHostError as exc:
            got.append(f"{name}={type(exc).__name__}")

    async with session_on({"hold": hold, "cross": cross}, request_timeout=1.0) as (
        session,
        _srv,
        _,
    ):
        await warm(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "hold")
            await parked.wait()
            await call("cross")
        got.append(_text(await session.call_tool("echo", {"message": "after"})))
    return sorted(got)


async def test_a_stream_carrying_another_callers_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    lean = await _cross(True, monkeypatch)
    slow = await _cross(False, monkeypatch)
    assert lean == slow, (lean, slow)
