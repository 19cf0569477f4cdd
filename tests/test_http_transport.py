"""Streamable HTTP, legacy HTTP+SSE and the probe, against real servers on 127.0.0.1.

Peers: the official Python SDK server (``sdk_server.py``) in its ``streamable-http`` and
``sse`` modes, ``@modelcontextprotocol/server-everything`` in ``streamableHttp`` and
``sse`` modes, and ``peers/http_fault_server.py`` for what well-behaved servers never do
(broken streams, streams closed to be polled, requests never answered, tokens quoted
back in errors). Each server is a subprocess on a free port, killed in a ``finally``.

The interop suites (``test_interop_sdk.py``, ``test_interop_everything.py``) run over
HTTP too: their ``transport`` parameter (tests/helpers.py ``open_sdk_peer``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.asks import ClientHandlers
from agenthost.config.model import ServerConfig, Timeouts
from agenthost.connection import open_remote_transport, open_session
from agenthost.errors import (
    AgentHostTimeout,
    JSONRPCError,
    SessionExpired,
    TransportClosed,
    TransportError,
)
from agenthost.protocol.jsonrpc import ErrorResponse, Notification, Request, Response
from agenthost.protocol.types import TextContent
from agenthost.session import ClientSession
from agenthost.transports.base import Transport
from agenthost.transports.http import HTTP_ERROR_CODE, open_streamable_http_transport
from agenthost.transports.probing import open_http_transport
from tests.forkserver import peer_python
from tests.peers.http_launch import (
    PEERS,
    PY,
    free_port,
    serve,
    stop,
)

pytestmark = pytest.mark.timeout(90)

TOKEN = "s3cr3t-T0KEN-abcdef123456"


def sdk_argv(mode: str, port: int) -> list[str]:
    return [peer_python(), str(PEERS / "sdk_server.py"), mode, "--port", str(port)]


def fault_argv(port: int, token: str | None = None) -> list[str]:
    argv = [PY, str(PEERS / "http_fault_server.py"), "--port", str(port)]
    return [*argv, "--token", token] if token else argv


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def remote(kind: str, url: str, **kwargs: Any) -> AbstractAsyncContextManager[Transport]:
    config = ServerConfig(
        name="remote",
        transport=kind,  # type: ignore[arg-type]
        url=url,
        timeouts=Timeouts(connect=5.0, shutdown=2.0),
        **kwargs,
    )
    return open_remote_transport(config)


@asynccontextmanager
async def connected(kind: str, url: str, **session_kwargs: Any) -> AsyncIterator[ClientSession]:
    """A session over a remote transport from config (what a host would build)."""
    async with remote(kind, url) as transport:
        name = session_kwargs.pop("name", "remote")
        async with open_session(transport, name=name, **session_kwargs) as session:
            yield session


def peer_entries(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- interop: the stdio suites, over HTTP -------------------------------------------------


# -- the wire: headers, session id, DELETE --------------------------------------------


@pytest.mark.parametrize(
    ("revision", "header"),
    [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", None)],
)
async def test_session_id_protocol_header_and_delete(
    revision: str, header: str | None, peer_log: Path
) -> None:
    port = free_port()
    env = {"AGENTHOST_PEER_LOG": str(peer_log)}
    url = f"http://127.0.0.1:{port}/mcp"
    async with (
        serve(fault_argv(port), port, env=env),
        connected("streamable-http", url, protocol_version=revision) as session,
    ):
        assert text_of(await session.call_tool("echo", {"message": "hi"})) == "hi"
    entries = peer_entries(peer_log)
    init, *rest = entries
    assert init["method"] == "initialize"
    assert init["session"] is None and init["protocol"] is None
    assert "application/json" in init["accept"] and "text/event-stream" in init["accept"]
    session_ids = {e["session"] for e in rest}
    assert len(session_ids) == 1 and None not in session_ids
    assert {e["protocol"] for e in rest} == {header}
    assert [e["method"] for e in rest if e["verb"] == "POST"] == [
        "notifications/initialized",
        "tools/call",
    ]
    assert rest[-1]["verb"] == "DELETE"


async def test_http_error_for_a_request_becomes_an_error_response() -> None:
    port = free_port()
    async with (
        serve(fault_argv(port), port),
        open_streamable_http_transport(
            f"http://127.0.0.1:{port}/mcp", name="fault", open_get_stream=False
        ) as transport,
    ):
        # No session yet: the server answers 400, which must not leave the id hanging.
        await transport.send(Request(7, "tools/list"))
        with trio.fail_after(5):
            message = await transport.receive()
    assert isinstance(message, ErrorResponse)
    assert message.id == 7
    assert message.error.code == HTTP_ERROR_CODE
    assert "HTTP 400" in message.error.message
    assert "missing session" in message.error.message
    assert message.error.data == {"httpStatus": 400}


async def test_nothing_listening_ends_the_transport_promptly() -> None:
    port = free_port()
    with trio.fail_after(10):
        async with remote("streamable-http", f"http://127.0.0.1:{port}/mcp") as transport:
            with pytest.raises(TransportClosed, match="cannot reach"):
                async with open_session(transport, name="gone"):
                    pass
        async with remote("http", f"http://127.0.0.1:{port}/mcp") as transport:
            with pytest.raises(TransportClosed, match="cannot reach"):
                async with open_session(transport, name="gone"):
                    pass


# -- faults -------------------------------------------------------------------------------


async def test_server_restart_expires_the_session_and_a_new_one_works(peer_log: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    argv = sdk_argv("streamable-http", port)
    async with serve(argv, port) as first, connected("streamable-http", url) as session:
        assert text_of(await session.call_tool("echo", {"message": "1"})) == "1"
        await stop(first)
        async with serve(argv, port):
            with pytest.raises(SessionExpired, match="404"):
                await session.call_tool("echo", {"message": "2"})
            # What a supervisor does: a new session over a new transport.
            async with connected("streamable-http", url) as again:
                assert text_of(await again.call_tool("echo", {"message": "3"})) == "3"


@pytest.mark.parametrize("tool", ["break", "close"])
async def test_broken_or_closed_response_stream_is_resumed(tool: str, peer_log: Path) -> None:
    port = free_port()
    seen: list[str] = []

    async def on_log(ctx: Any, params: Any) -> None:
        seen.append(params["data"])

    handlers = ClientHandlers(notifications={"notifications/message": on_log})
    url = f"http://127.0.0.1:{port}/mcp"
    async with (
        serve(fault_argv(port), port, env={"AGENTHOST_PEER_LOG": str(peer_log)}),
        connected("streamable-http", url, handlers=handlers) as session,
    ):
        with trio.fail_after(10):
            result = await session.call_tool(tool, {"message": "resumed!"})
        assert text_of(result) == "resumed!"
        assert seen == [f"working on {tool}"]
        # The session is still fine afterwards.
        assert text_of(await session.call_tool("echo", {"message": "ok"})) == "ok"
    resumes = [e for e in peer_entries(peer_log) if e["verb"] == "GET" and e["last_event_id"]]
    assert len(resumes) == 1
    assert resumes[0]["last_event_id"].endswith(":1")


async def test_broken_stream_without_event_ids_fails_the_request_only() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with serve(fault_argv(port), port), connected("streamable-http", url) as session:
        with trio.fail_after(10), pytest.raises(JSONRPCError) as info:
            await session.call_tool("break_noid", {})
        assert info.value.code == HTTP_ERROR_CODE
        assert "no event id" in info.value.message
        assert text_of(await session.call_tool("echo", {"message": "ok"})) == "ok"


async def test_server_that_never_answers_hits_the_timeout_and_nothing_hangs() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with serve(fault_argv(port), port):
        with trio.fail_after(15):
            async with connected("streamable-http", url) as session:
                with pytest.raises(AgentHostTimeout):
                    await session.call_tool("hang", {}, timeout=0.5)
                assert text_of(await session.call_tool("echo", {"message": "ok"})) == "ok"
                # A hanging call cancelled from outside: the block still exits at once.
                with trio.move_on_after(0.3) as scope:
                    await session.call_tool("hang", {}, timeout=None)
                assert scope.cancelled_caught
            # And cancelling the whole block with a call in flight tears everything down.
            with trio.move_on_after(0.5) as outer:
                async with connected("streamable-http", url) as session:
                    await session.call_tool("hang", {}, timeout=None)
            assert outer.cancelled_caught


# -- secrets ------------------------------------------------------------------------------


async def test_bearer_token_never_appears_in_logs_errors_or_reprs(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)  # root: httpx, httpcore and ours, everything
    for name in ("httpx", "httpcore", "agenthost"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    port = free_port()
    wrong = "WRONG-" + TOKEN[::-1]
    url = f"http://127.0.0.1:{port}/mcp"
    texts: list[str] = []
    async with serve(fault_argv(port, TOKEN), port):
        for kind in ("streamable-http", "http"):
            async with remote(kind, url, headers={"Authorization": f"Bearer {TOKEN}"}) as t:
                texts.append(repr(t))
                async with open_session(t, name="remote") as session:
                    assert text_of(await session.call_tool("echo", {"message": "x"})) == "x"
                    texts.append(repr(session))
        # The server quotes the bad header back in its 401 body; we must not repeat it.
        for kind in ("streamable-http", "http"):
            async with remote(kind, url, headers={"Authorization": f"Bearer {wrong}"}) as t:
                with pytest.raises((JSONRPCError, TransportClosed)) as info:
                    async with open_session(t, name="remote"):
                        pass
                texts.append(str(info.value))
                texts.append(repr(info.value))
    assert any("401" in text for text in texts)
    everything = caplog.text + "\n".join(texts)
    assert "***" in "\n".join(texts)
    for secret in (TOKEN, wrong, wrong[len("WRONG-") :]):
        assert secret not in everything
    assert any(r.name.startswith("httpcore") for r in caplog.records)  # it did log


# -- probe -----------------------------------------------------------------------------


async def test_probe_fallback_needs_an_sse_endpoint() -> None:
    port = free_port()
    # POST /messages/ without a session id is a 4xx, and GET there is not SSE either.
    url = f"http://127.0.0.1:{port}/messages/"
    async with (
        serve(sdk_argv("sse", port), port),
        open_http_transport(url, name="probe", connect_timeout=5) as transport,
    ):
        with trio.fail_after(10), pytest.raises(TransportError) as info:
            async with open_session(transport, name="probe"):
                pass
    assert "legacy HTTP+SSE transport failed too" in str(info.value)


async def test_transport_level_streamable_round_trip_with_get_stream() -> None:
    port = free_port()
    async with serve(sdk_argv("streamable-http", port), port):
        async with open_streamable_http_transport(
            f"http://127.0.0.1:{port}/mcp", name="sdk"
        ) as transport:
            params = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            }
            await transport.send(Request(1, "initialize", params))
            with trio.fail_after(10):
                init = await transport.receive()
            assert isinstance(init, Response)
            assert transport.session_id
            transport.set_protocol_version("2025-11-25")
            await transport.send(Notification("notifications/initialized"))
            # A tool that triggers a list_changed notification: it may come on the POST
            # stream or on the GET stream; either way it arrives.
            await transport.send(Request(2, "tools/call", {"name": "toggle_extra_tool"}))
            got: list[Any] = []
            with trio.fail_after(10):
                while not (
                    any(isinstance(m, Response) and m.id == 2 for m in got)
                    and any(
                        isinstance(m, Notification)
                        and m.method == "notifications/tools/list_changed"
                        for m in got
                    )
                ):
                    got.append(await transport.receive())
        with pytest.raises(TransportClosed):
            await transport.send(Request(3, "ping"))
