"""A raw Streamable HTTP MCP server for byte-level attacks on the lean HTTP path.

Every byte a tool sends is the test's choice (a raw Trio TCP server, not an SDK), so a
test can break framing, ids, timing or the connection itself; the client is the real
transport and session (:func:`session_to`). Shared by the hostile tests of the
scope-free exchange and of the answer-alone path.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio

from agenthost.config.model import ServerConfig, Timeouts
from agenthost.connection import open_remote_transport, open_session
from agenthost.protocol.types import TextContent
from agenthost.session import ClientSession
from agenthost.transports.http import StreamableHTTPTransport

__all__ = [
    "REVISION",
    "Behaviour",
    "McpServer",
    "Reader",
    "echo",
    "json_reply",
    "mcp_server",
    "raw_reply",
    "result_body",
    "serving",
    "session_to",
    "text_of",
    "until",
    "warnings_of",
]

REVISION = "2025-06-18"
#: A tool: ``(stream, request id, arguments)`` -> keep the connection open.
Behaviour = Callable[[trio.SocketStream, Any, dict[str, Any]], Awaitable[bool]]


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def raw_reply(body: bytes, extra: bytes = b"") -> bytes:
    """A 200 JSON response around ``body``; ``extra``: more header lines."""
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s"
        % (extra, len(body), body)
    )


def result_body(rid_json: str, text: str) -> bytes:
    """A text result for the id written as ``rid_json`` (any JSON, a wrong type too)."""
    content = json.dumps({"content": [{"type": "text", "text": text}]})
    return f'{{"jsonrpc":"2.0","id":{rid_json},"result":{content}}}'.encode()


def json_reply(rid: Any, text: str, extra: bytes = b"") -> bytes:
    return raw_reply(result_body(json.dumps(rid), text), extra)


class Reader:
    """HTTP/1.1 requests off one connection (head, body), pipelined bytes kept."""

    def __init__(self, stream: trio.SocketStream, server: McpServer | None = None) -> None:
        self.stream = stream
        self.buffer = b""
        self.server = server

    async def _more(self) -> bool:
        chunk = await self.stream.receive_some(65536)
        self.buffer += chunk
        return bool(chunk)

    async def request(self) -> tuple[bytes, bytes] | None:
        while b"\r\n\r\n" not in self.buffer:
            if not await self._more():
                return None
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        found = re.search(rb"(?i)content-length: (\d+)", head)
        length = int(found.group(1)) if found else 0
        self.buffer = rest
        if length > 1_000_000 and self.server is not None and self.server.big is not None:
            await self.server.big(self.stream)
            return None
        while len(self.buffer) < length:
            if not await self._more():
                return None
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return head, body


class McpServer:
    """A raw MCP server: initialize, 202 for notifications, ``tools/call`` by tool name."""

    def __init__(self, tools: Mapping[str, Behaviour]) -> None:
        self.tools = tools
        #: Called instead of reading a request body over 1 MB (the head is in).
        self.big: Callable[[trio.SocketStream], Awaitable[None]] | None = None
        self.stats: Counter[str] = Counter()
        self.cancelled: list[Any] = []
        self.call_ids: list[Any] = []
        self.heads: list[bytes] = []
        self.open = 0
        self.url = ""

    async def handle(self, stream: trio.SocketStream) -> None:
        self.open += 1
        self.stats["connections"] += 1
        reader = Reader(stream, self)
        try:
            async with stream:
                while (request := await reader.request()) is not None:
                    head, body = request
                    self.heads.append(head)
                    if not await self.answer(stream, head, body):
                        return
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self.stats["broken"] += 1
        finally:
            self.open -= 1

    async def answer(self, stream: trio.SocketStream, head: bytes, body: bytes) -> bool:
        if head.startswith(b"GET"):
            await stream.send_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return True
        if head.startswith(b"DELETE"):
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            return True
        message = json.loads(body)
        if head.startswith(b"POST /moved"):
            self.stats["moved"] += 1
            await stream.send_all(json_reply(message["id"], "moved"))
            return True
        method = message.get("method")
        rid = message.get("id")
        self.stats[f"post:{method}"] += 1
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw-attack", "version": "1"},
            }
            data = json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()
            await stream.send_all(raw_reply(data, b"Mcp-Session-Id: s1\r\n"))
            return True
        if rid is None:
            if method == "notifications/cancelled":
                self.cancelled.append(message["params"]["requestId"])
            await stream.send_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
            return True
        if method == "tools/call":
            self.call_ids.append(rid)
            params = message["params"]
            return await self.tools[params["name"]](stream, rid, params.get("arguments") or {})
        await stream.send_all(
            raw_reply(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}).encode())
        )
        return True


async def echo(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await stream.send_all(json_reply(rid, str(args.get("message"))))
    return True


@asynccontextmanager
async def serving(server: McpServer) -> AsyncIterator[McpServer]:
    """Serve ``server`` on a free port of 127.0.0.1 (its ``url`` set) for the block."""
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
        server.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"
        yield server
        nursery.cancel_scope.cancel()


def mcp_server(tools: Mapping[str, Behaviour]) -> AbstractAsyncContextManager[McpServer]:
    """A served :class:`McpServer` with ``echo`` and ``tools``."""
    return serving(McpServer({"echo": echo, **tools}))


@asynccontextmanager
async def session_to(
    server: McpServer,
    *,
    headers: Mapping[str, str] | None = None,
    max_message_size: int = 16 * 1024 * 1024,
) -> AsyncIterator[tuple[ClientSession, StreamableHTTPTransport]]:
    """A session over the real transport, one call made (so the next one goes out on an
    idle connection: the lean path's synchronous start)."""
    config = ServerConfig(
        name="atk",
        transport="streamable-http",
        url=server.url,
        headers=dict(headers or {}),
        max_message_size=max_message_size,
        timeouts=Timeouts(connect=3.0, shutdown=1.0),
    )
    async with open_remote_transport(config) as transport:
        assert isinstance(transport, StreamableHTTPTransport)
        async with open_session(
            transport, name="atk", protocol_version=REVISION, request_timeout=10.0
        ) as session:
            assert text_of(await session.call_tool("echo", {"message": "warm"})) == "warm"
            yield session, transport


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    with trio.fail_after(timeout):
        while not check():
            await trio.sleep(0.01)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
