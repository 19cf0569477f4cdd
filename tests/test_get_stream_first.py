"""The GET stream is in place before the first request (Streamable HTTP, initialize era).

A server may send its own request on the standalone GET stream instead of the stream of
the request that caused it, and the official SDKs' servers drop such a message when no
GET stream is open. Found as a conformance failure (``elicitation-sep1034-client-
defaults`` at 0.2.0-alpha.12, 2 runs in 5 under CPU load, more often on the lean HTTP
path): the ``tools/call`` POST overtook the GET, the server's question was dropped, and
the call waited its whole timeout. ``tests/peers/late_listen_server.py`` holds the GET
back a second, so a client that does not wait loses every time.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from agenthost.asks import ClientHandlers, RequestContext
from agenthost.connection import open_session
from agenthost.protocol.types import ElicitRequestParams, ElicitResult, TextContent
from agenthost.transports._httpx import LEAN_ENV
from agenthost.transports.http import open_streamable_http_transport
from tests.conftest import free_port
from tests.peers.http_launch import serve

PEER = Path(__file__).parent / "peers" / "late_listen_server.py"


@pytest.mark.parametrize("lean", [False, True], ids=["httpx", "lean"])
async def test_a_question_on_the_get_stream_right_after_connecting_arrives(
    lean: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LEAN_ENV, "1" if lean else "0")
    asked: list[str] = []

    async def elicitation(ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": "Ada"})

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with (
        serve([sys.executable, str(PEER), "--port", str(port), "--get-delay", "1"], port),
        open_streamable_http_transport(url, name="late") as transport,
        open_session(
            transport, name="late", handlers=ClientHandlers(elicitation=elicitation)
        ) as session,
    ):
        with trio.fail_after(20):
            result = await session.call_tool("standalone_ask", {}, timeout=15)
    assert asked == ["What is your name?"]
    [block] = result.content
    assert isinstance(block, TextContent)
    assert block.text == "hello Ada (accept)"
