"""The floor: a minimal hand-written Trio MCP client, the cheapest client we could write.

Why it exists: "agenthost should sit near the floor" needs a floor measured on the same
machine in the same run. This client does what any correct client must (spawn, newline
framing, ``initialize``, id correlation, concurrent callers) and nothing else: no types,
no validation, no timeouts, no cancellation notices, no logging. It is a yardstick, not a
library; never use it as a client.

It batches its writes as a serious hand-written client would: a caller appends its line
to one buffer and wakes a writer task, which sends everything queued by then with one
``send_all``; with 64 calls in flight, one system call carries many requests. (A lock and
one write per request, as the first floor did, made every async client look cheap.)

:class:`HTTPFloorClient` is the same yardstick for Streamable HTTP (issue 26: is 5x the
Python SDK at one call in flight reachable against ``bench/http_server.mjs`` at all?): raw
Trio TCP streams kept alive (one per call in flight, reused), the request head built
once per session state, one ``send_all`` of head and body, and the response read with as
few reads as its ``Content-Length`` allows (one, for an echo); the JSON body or the SSE
event's data parsed once. No redirects, auth, timeouts or error handling.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final
from urllib.parse import urlsplit

import orjson
import trio

__all__ = ["FloorClient", "HTTPFloorClient", "open_floor_client", "open_http_floor_client"]


class FloorClient:
    """Requests over one server's stdio; responses matched by id through a dict of events."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[trio.Event, list[Any]]] = {}
        #: Lines queued for the writer task, and the event that wakes it.
        self._outgoing = bytearray()
        self._wake = trio.Event()

    async def write_loop(self) -> None:
        """Send whatever callers queued since the last write, in one ``send_all``."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            data = bytes(self._outgoing)
            self._outgoing.clear()
            await self._stdin.send_all(data)

    def _queue(self, data: bytes) -> None:
        self._outgoing += data
        self._wake.set()

    async def read_loop(self) -> None:
        """Split stdout into lines and wake the caller waiting for each response."""
        buf = b""
        waiting = self._waiting
        while True:
            chunk = await self._stdout.receive_some(262144)
            if not chunk:
                for event, box in waiting.values():
                    box.append(None)
                    event.set()
                return
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                message = orjson.loads(line)
                entry = waiting.pop(message.get("id"), None)
                if entry is not None:
                    entry[1].append(message)
                    entry[0].set()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return its ``result`` (raise on an error response)."""
        request_id = next(self._ids)
        event = trio.Event()
        box: list[Any] = []
        self._waiting[request_id] = (event, box)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self._queue(orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE))
        await event.wait()
        message = box[0]
        if message is None:
            raise EOFError("server closed its stdout")
        if "error" in message:
            raise RuntimeError(message["error"])
        result: dict[str, Any] = message["result"]
        return result

    def notify(self, method: str) -> None:
        self._queue(orjson.dumps({"jsonrpc": "2.0", "method": method}) + b"\n")

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": arguments})


@asynccontextmanager
async def open_floor_client(argv: list[str]) -> AsyncIterator[FloorClient]:
    """Spawn ``argv``, initialize, yield the client; close stdin and reap on the way out."""
    process = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    client = FloorClient(process)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.read_loop)
            nursery.start_soon(client.write_loop)
            await client.request(
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "floor", "version": "0"},
                },
            )
            client.notify("notifications/initialized")
            try:
                yield client
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await client._stdin.aclose()
            with trio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


_LENGTH: Final = re.compile(rb"\r\ncontent-length: *([0-9]+)", re.IGNORECASE)
_SESSION: Final = re.compile(rb"\r\nmcp-session-id: *([!-~]+)", re.IGNORECASE)


class HTTPFloorClient:
    """Streamable HTTP requests over pooled keep-alive connections (see the module doc)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        self._host, self._port = parts.hostname, parts.port
        self._ids = itertools.count(1)
        self._idle: list[trio.SocketStream] = []
        self._head = (
            f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        ).encode()
        self._streams: list[trio.SocketStream] = []

    async def post(self, body: bytes) -> tuple[bytes, bytes]:
        """One POST on an idle connection (or a new one): the response head and body."""
        stream = self._idle.pop() if self._idle else await self._connect()
        await stream.send_all(b"%sContent-Length: %d\r\n\r\n%s" % (self._head, len(body), body))
        data = await stream.receive_some(65536)
        while (end := data.find(b"\r\n\r\n")) < 0:
            data += await stream.receive_some(65536)
        head = data[:end]
        length = _LENGTH.search(head)
        size = int(length.group(1)) if length is not None else 0
        payload = data[end + 4 :]
        while len(payload) < size:
            payload += await stream.receive_some(max(65536, size - len(payload)))
        self._idle.append(stream)
        return head, payload

    async def _connect(self) -> trio.SocketStream:
        stream = await trio.open_tcp_stream(self._host, self._port)
        self._streams.append(stream)
        return stream

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return its ``result`` (raise on an error response)."""
        request_id = next(self._ids)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        body = orjson.dumps(message)
        head, payload = await self.post(body)
        if method == "initialize":
            session = _SESSION.search(head)
            extra = b"MCP-Protocol-Version: 2025-11-25\r\n"
            if session is not None:
                extra += b"Mcp-Session-Id: " + session.group(1) + b"\r\n"
            self._head += extra
        if payload.startswith(b"event:") or payload.startswith(b"data:"):
            start = payload.index(b"data: ") + 6
            payload = payload[start : payload.index(b"\n", start)]
        answer = orjson.loads(payload)
        if answer.get("id") != request_id:
            raise RuntimeError(f"answer to {answer.get('id')!r}, not {request_id}")
        if "error" in answer:
            raise RuntimeError(answer["error"])
        result: dict[str, Any] = answer["result"]
        return result

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": arguments})


@asynccontextmanager
async def open_http_floor_client(url: str) -> AsyncIterator[HTTPFloorClient]:
    """Initialize over Streamable HTTP at ``url``; close every connection on the way out."""
    client = HTTPFloorClient(url)
    try:
        await client.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "floor", "version": "0"},
            },
        )
        await client.post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield client
    finally:
        with trio.CancelScope(shield=True):
            for stream in client._streams:
                await stream.aclose()
