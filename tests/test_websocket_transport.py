"""The WebSocket transport against a real WebSocket MCP server.

The server is ``peers/ws_bridge.py``: trio-websocket in front of a stdio MCP server (the
official SDK server, or ``crashy_server.py`` for faults), one child per connection,
started as a subprocess on a free 127.0.0.1 port and killed in a ``finally``.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import pytest
import trio

from agenthost.config.model import ServerConfig, Timeouts
from agenthost.connection import open_remote_transport, open_session
from agenthost.errors import (
    AgentHostTimeout,
    MessageTooLarge,
    TransportClosed,
    TransportError,
)
from agenthost.protocol.types import TextContent
from agenthost.transports.websocket import open_websocket_transport
from tests.peers.http_launch import PEERS, PY, free_port, serve

pytestmark = pytest.mark.timeout(60)

TOKEN = "ws-T0KEN-0123456789abcdef"


def bridge(port: int, *child: str, token: str | None = None) -> list[str]:
    argv = [PY, str(PEERS / "ws_bridge.py"), "--port", str(port)]
    if token:
        argv += ["--token", token]
    return [*argv, "--", *child]


def crashy(port: int, token: str | None = None) -> list[str]:
    return bridge(port, PY, str(PEERS / "crashy_server.py"), token=token)


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


async def test_calls_timeouts_and_server_death() -> None:
    port = free_port()
    async with (
        serve(crashy(port), port),
        open_websocket_transport(f"ws://127.0.0.1:{port}", name="crashy") as ws,
        open_session(ws, name="crashy") as session,
    ):
        assert {t.name for t in await session.list_tools()} == {"echo", "hang", "crash"}
        assert text_of(await session.call_tool("echo", {"message": "hi"})) == "hi"
        with pytest.raises(AgentHostTimeout):
            await session.call_tool("hang", {}, timeout=0.3)
        with trio.fail_after(10), pytest.raises(TransportClosed, match="1000"):
            await session.call_tool("crash", {})
        with pytest.raises(TransportClosed):
            await session.call_tool("echo", {"message": "again"})


async def test_oversized_message_ends_the_transport() -> None:
    port = free_port()
    async with (
        serve(crashy(port), port),
        open_websocket_transport(
            f"ws://127.0.0.1:{port}", name="crashy", max_message_size=2000
        ) as ws,
        open_session(ws, name="crashy") as session,
    ):
        with trio.fail_after(10), pytest.raises(MessageTooLarge):
            await session.call_tool("echo", {"message": "x" * 5000})


async def test_cancellation_with_a_call_in_flight_exits_promptly() -> None:
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    async with serve(crashy(port), port):
        with trio.fail_after(10):
            with trio.move_on_after(0.5) as scope:
                async with (
                    open_websocket_transport(url, name="c") as ws,
                    open_session(ws, name="c") as session,
                ):
                    await session.call_tool("hang", {}, timeout=None)
            assert scope.cancelled_caught


async def test_token_is_sent_and_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    wrong = "nope-" + TOKEN[::-1]
    async with serve(crashy(port, token=TOKEN), port):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with open_websocket_transport(url, name="c", headers=headers) as ws:
            assert TOKEN not in repr(ws)
            async with open_session(ws, name="c") as session:
                assert text_of(await session.call_tool("echo", {"message": "ok"})) == "ok"
        with pytest.raises(TransportError, match="HTTP 401") as info:
            async with open_websocket_transport(
                url, name="c", headers={"Authorization": f"Bearer {wrong}"}
            ):
                pass
    assert wrong not in str(info.value)
    assert TOKEN not in caplog.text
    assert wrong not in caplog.text


async def test_nothing_listening_and_handshake_timeout() -> None:
    port = free_port()
    with pytest.raises(TransportClosed, match="cannot reach"):
        async with open_websocket_transport(f"ws://127.0.0.1:{port}", name="gone"):
            pass
    # A TCP listener that never answers the handshake.
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    silent = listeners[0].socket.getsockname()[1]
    try:
        with trio.fail_after(5), pytest.raises(AgentHostTimeout):
            async with open_websocket_transport(
                f"ws://127.0.0.1:{silent}", name="silent", connect_timeout=0.3
            ):
                pass
    finally:
        for listener in listeners:
            await listener.aclose()


async def test_remote_config_builds_a_websocket_transport_with_timeouts() -> None:
    config = ServerConfig(
        name="ws",
        transport="websocket",
        url=f"ws://127.0.0.1:{free_port()}/mcp",
        timeouts=Timeouts(connect=0.5),
    )
    with trio.fail_after(5), pytest.raises(TransportClosed, match="ws: cannot reach"):
        async with open_remote_transport(config):
            pass


async def _refusing_server(
    stream: trio.SocketStream, *, chunk: bytes, pause: float, sent: list[int]
) -> None:
    """Refuses the upgrade with HTTP 403 (its status line in two writes) and a chunked
    body that never ends, sent as fast as it goes or trickled."""
    try:
        await stream.receive_some(65536)  # the upgrade request
        await stream.send_all(b"HTTP/1.1 4")
        await trio.sleep(0.05)
        await stream.send_all(b"03 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n")
        frame = b"%x\r\n%s\r\n" % (len(chunk), chunk)
        while True:
            await stream.send_all(frame)
            sent[0] += len(frame)
            await trio.sleep(pause)
    except trio.BrokenResourceError:
        pass
    finally:
        await stream.aclose()


@pytest.mark.parametrize(
    ("chunk", "pause"),
    [(b"x" * 65536, 0), (b"slow\n", 0.05)],
    ids=["endless-fast-body", "endless-trickled-body"],
)
async def test_a_refusal_with_an_endless_body_ends_at_its_status_line(
    chunk: bytes, pause: float
) -> None:
    """Before: the body was read (and concatenated) until the connect timeout, which
    then said "no WebSocket handshake", not the status."""
    sent = [0]
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    connect_timeout = 5.0
    async with trio.open_nursery() as nursery:
        handler = partial(_refusing_server, chunk=chunk, pause=pause, sent=sent)
        nursery.start_soon(trio.serve_listeners, handler, listeners)
        started = trio.current_time()
        with trio.fail_after(20), pytest.raises(TransportError) as info:
            async with open_websocket_transport(
                f"ws://127.0.0.1:{port}", name="refuser", connect_timeout=connect_timeout
            ):
                pass
        took = trio.current_time() - started
        nursery.cancel_scope.cancel()
    refused = f"refuser: ws://127.0.0.1:{port} refused the WebSocket handshake with HTTP 403"
    assert str(info.value) == refused
    assert took < connect_timeout / 2, (took, sent[0])
