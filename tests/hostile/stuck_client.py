"""A downstream MCP client over raw HTTP/1.1 that can stop reading, for the gateway's
relay tests (``agenthost serve --http`` in front of a flooding upstream).

Why raw sockets: an HTTP library reads what arrives; this client must be able to send a
request and then never read its answer (or read it a byte a second), with a small
receive buffer so the gateway's writes block soon, as they would on a slow link. Legacy
revision, one session (``Mcp-Session-Id``), every request on a connection of its own.
"""

from __future__ import annotations

import json
import re
import socket
from typing import Any

import trio

from tests.helpers import initialize_request

__all__ = ["StuckClient", "deaf_host_lines", "events"]

_EVENT = re.compile(rb"data: (.*?)\n\n", re.S)
_SID = re.compile(rb"(?im)^mcp-session-id: *(\S+)")


def deaf_host_lines(flood: dict[str, Any]) -> list[dict[str, Any]]:
    """What a stdio host sends before it stops reading: it initializes, asks for every log
    line, and makes a ``flood`` call (``flood``: its arguments) with a progress token."""
    return [
        initialize_request("deaf"),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "flood", "arguments": flood, "_meta": {"progressToken": 1}},
        },
    ]


def events(raw: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of the SSE events in ``raw`` (each event is one HTTP chunk,
    so chunk headers never fall inside one)."""
    return [json.loads(data) for data in _EVENT.findall(raw)]


class StuckClient:
    """One legacy session at ``127.0.0.1:port/mcp``. Start it with :meth:`start`."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sid: str | None = None
        self._ids = 100
        #: Connections left open unread, closed by :meth:`aclose`.
        self._held: list[trio.SocketStream] = []

    async def _connect(self, *, small: bool) -> trio.SocketStream:
        sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
        if small:  # a small window: the gateway's writes block after a few KB
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        await sock.connect(("127.0.0.1", self.port))
        return trio.SocketStream(sock)

    async def _send(self, method: str, body: Any, *, small: bool = False) -> trio.SocketStream:
        stream = await self._connect(small=small)
        payload = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"Content-Length: {len(payload)}\r\n"
        )
        if self.sid is not None:
            head += f"Mcp-Session-Id: {self.sid}\r\n"
        await stream.send_all(head.encode() + b"\r\n" + payload)
        return stream

    async def _read_until(self, stream: trio.SocketStream, rid: Any) -> bytes:
        """Read until the response to ``rid`` arrived (or the connection ended)."""
        raw = bytearray()
        async with stream:
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return bytes(raw)
                raw += chunk
                if rid is None and b"\r\n\r\n" in raw:
                    return bytes(raw)
                tail = bytes(raw[-200_000:])
                if any(e.get("id") == rid and "method" not in e for e in events(tail)):
                    return bytes(raw)

    async def request(self, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Send one request, read every message until its response; all of them."""
        self._ids += 1
        rid = self._ids
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        raw = await self._read_until(await self._send("POST", body), rid)
        if self.sid is None and (found := _SID.search(raw)):
            self.sid = found.group(1).decode()
        return events(raw)

    async def status(self) -> bytes:
        """The status line of a ping on this session (404 once the session ended)."""
        stream = await self._send("POST", {"jsonrpc": "2.0", "id": 7, "method": "ping"})
        async with stream:
            return (await stream.receive_some(200)).split(b"\r\n", 1)[0]

    async def start(self, *, log_level: str | None = "debug") -> None:
        """initialize, initialized, and (``log_level``) ``logging/setLevel``."""
        await self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "stuck", "version": "1"},
            },
        )
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self._read_until(await self._send("POST", note), None)
        if log_level is not None:
            await self.request("logging/setLevel", {"level": log_level})

    async def call_unread(
        self, tool: str, arguments: dict[str, Any], *, token: str = "a"
    ) -> trio.SocketStream:
        """POST a ``tools/call`` (with a progress token) and never read its answer."""
        self._ids += 1
        params = {"name": tool, "arguments": arguments, "_meta": {"progressToken": token}}
        body = {"jsonrpc": "2.0", "id": self._ids, "method": "tools/call", "params": params}
        stream = await self._send("POST", body, small=True)
        self._held.append(stream)
        return stream

    async def call_unread_stateless(
        self, tool: str, arguments: dict[str, Any], *, revision: str
    ) -> trio.SocketStream:
        """POST a 2026-07-28 ``tools/call`` (no session: everything in its ``_meta``,
        progress and log lines asked for) and never read its answer."""
        self._ids += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": revision,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/logLevel": "debug",
            "progressToken": "a",
        }
        params = {"name": tool, "arguments": arguments, "_meta": meta}
        body = {"jsonrpc": "2.0", "id": self._ids, "method": "tools/call", "params": params}
        stream = await self._send("POST", body, small=True)
        self._held.append(stream)
        return stream

    async def open_get_unread(self) -> trio.SocketStream:
        """Open the session's GET stream and never read it."""
        stream = await self._connect(small=True)
        head = (
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"Accept: text/event-stream\r\nMcp-Session-Id: {self.sid}\r\n\r\n"
        )
        await stream.send_all(head.encode())
        self._held.append(stream)
        return stream

    async def delete(self) -> bytes:
        """End the session (``DELETE /mcp``); the status line."""
        stream = await self._send("DELETE", None)
        async with stream:
            return (await stream.receive_some(200)).split(b"\r\n", 1)[0]

    async def aclose(self) -> None:
        for stream in self._held:
            await trio.aclose_forcefully(stream)
        self._held.clear()
