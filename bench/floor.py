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
"""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import trio

__all__ = ["FloorClient", "open_floor_client"]


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
