"""A raw HTTP/1.1 MCP server for the hostile lean-path tests: every byte it sends is the
test's choice (tools get the socket), and it counts what it saw (connections, POSTs,
session headers, paths). Shared by ``test_hostile_lean_exchange`` and
``test_hostile_sse_answer``."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import trio

__all__ = ["Server", "Tool", "echo", "json_reply", "text_result"]

Tool = Callable[[trio.SocketStream, Any, dict[str, Any], "Server"], Awaitable[bool]]


def json_reply(payload: Any, extra: bytes = b"", status: bytes = b"200 OK") -> bytes:
    body = json.dumps(payload).encode()
    return (
        b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n" + extra
        + b"Content-Length: %d\r\n\r\n" % len(body) + body
    )  # fmt: skip


def text_result(rid: Any, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


class Server:
    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()
        self.tools: dict[str, Tool] = {}
        self.session_headers: list[str | None] = []
        self.paths: list[str] = []
        self.conns = 0
        #: Once set, every POST to /mcp is redirected (307) to /mcp2, which answers.
        self.redirecting = False
        self.slow_ids: list[Any] = []

    async def read(self, stream: trio.SocketStream, buf: bytearray) -> tuple[bytes, bytes] | None:
        while b"\r\n\r\n" not in buf:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return None
            buf += chunk
        head, _, rest = bytes(buf).partition(b"\r\n\r\n")
        found = re.search(rb"(?i)content-length: (\d+)", head)
        length = int(found.group(1)) if found else 0
        while len(rest) < length:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return None
            rest += chunk
        buf[:] = rest[length:]
        return head, rest[:length]

    async def handle(self, stream: trio.SocketStream) -> None:
        self.conns += 1
        buf = bytearray()
        with trio.move_on_after(60):
            async with stream:
                while True:
                    try:
                        got = await self.read(stream, buf)
                    except trio.BrokenResourceError:
                        return
                    if got is None:
                        return
                    head, body = got
                    line = head.split(b"\r\n", 1)[0].decode()
                    verb, path = line.split()[:2]
                    self.paths.append(f"{verb} {path}")
                    sid = re.search(rb"(?i)mcp-session-id: (\S+)", head)
                    self.session_headers.append(sid.group(1).decode() if sid else None)
                    try:
                        keep = await self.answer(stream, verb, path, body)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return
                    if not keep:
                        return

    async def answer(self, stream: trio.SocketStream, verb: str, path: str, body: bytes) -> bool:
        if verb == "GET":
            await stream.send_all(b"HTTP/1.1 405 No\r\nContent-Length: 0\r\n\r\n")
            return True
        if verb == "DELETE":
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            return True
        if self.redirecting and path == "/mcp":
            await stream.send_all(
                b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /mcp2\r\nContent-Length: 0\r\n\r\n"
            )
            return True
        msg = json.loads(body)
        method = msg.get("method")
        self.stats[f"post:{method}"] += 1
        rid = msg.get("id")
        if method == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "lean-attack", "version": "1"},
            }
            payload = {"jsonrpc": "2.0", "id": rid, "result": result}
            await stream.send_all(json_reply(payload, b"Mcp-Session-Id: s1\r\n"))
            return True
        if method == "tools/call":
            name = msg["params"]["name"]
            args = msg["params"].get("arguments") or {}
            return await self.tools[name](stream, rid, args, self)
        if rid is None:
            await stream.send_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
            return True
        await stream.send_all(json_reply({"jsonrpc": "2.0", "id": rid, "result": {}}))
        return True


async def echo(stream: trio.SocketStream, rid: Any, args: dict[str, Any], srv: Server) -> bool:
    await stream.send_all(json_reply(text_result(rid, str(args.get("message", "ok")))))
    return True
