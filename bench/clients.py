"""The clients under test, each behind the same tiny interface: open, then ``call(args)``.

Why an adapter layer: the measuring loops in :mod:`bench.workers` must be the same code
for every client, or the comparison measures the loops. Each adapter is an async context
manager that starts ``bench/minimal_server.py`` (plus ``server_args``), initializes,
lists the tools once (as a host does before it calls any), and yields an ``Echo``:
``await echo(arguments) -> text of the first content block``. Imports of agenthost or
mcp happen inside the adapter, so a worker pays only for the client it runs.

Clients: ``agenthost`` and ``floor`` run under Trio; ``sdk-trio`` and ``sdk-asyncio`` are
the official ``mcp`` client under anyio's Trio and asyncio backends. ``blocking`` is no
async client at all: plain blocking ``write``/``read`` on the pipes, one call at a time.
It is the fastest any client can go on this machine's pipes, and so the ceiling of any
sequential ratio (its ``echo`` blocks the event loop: sequential use only).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final

from bench.measure import SERVER

__all__ = ["BLOCKING", "CLIENTS", "TRIO_CLIENTS", "Echo", "open_client", "server_argv"]

#: ``await echo(arguments)`` -> the text of the tool result's first content block.
Echo = Callable[[dict[str, Any]], Awaitable[str]]

CLIENTS: Final = ("agenthost", "sdk-trio", "sdk-asyncio", "floor")
#: Sequential only (see the module docstring).
BLOCKING: Final = "blocking"
TRIO_CLIENTS: Final = frozenset({"agenthost", "floor", BLOCKING})


def server_argv(server_args: list[str] | None = None, script: str = SERVER) -> list[str]:
    return [sys.executable, script, *(server_args or [])]


@asynccontextmanager
async def _agenthost(argv: list[str]) -> AsyncIterator[Echo]:
    from agenthost.client import connect
    from agenthost.config import ServerConfig

    config = ServerConfig(name="minimal", transport="stdio", command=argv[0], args=argv[1:])
    async with connect(config) as session:
        await session.list_tools()

        async def echo(arguments: dict[str, Any]) -> str:
            result = await session.call_tool("echo", arguments)
            return result.content[0].text  # type: ignore[union-attr]

        yield echo


@asynccontextmanager
async def _sdk(argv: list[str]) -> AsyncIterator[Echo]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()

        async def echo(arguments: dict[str, Any]) -> str:
            result = await session.call_tool("echo", arguments)
            return result.content[0].text  # type: ignore[union-attr]

        yield echo


@asynccontextmanager
async def _floor(argv: list[str]) -> AsyncIterator[Echo]:
    from bench.floor import open_floor_client

    async with open_floor_client(argv) as client:
        await client.request("tools/list", {})

        async def echo(arguments: dict[str, Any]) -> str:
            result = await client.call_tool("echo", arguments)
            return result["content"][0]["text"]  # type: ignore[no-any-return]

        yield echo


@asynccontextmanager
async def _blocking(argv: list[str]) -> AsyncIterator[Echo]:
    import os
    import subprocess

    import orjson

    # Blocking on purpose: this client is the no-event-loop ceiling.
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # noqa: ASYNC220
    assert process.stdin is not None and process.stdout is not None
    out, inp = process.stdin.fileno(), process.stdout.fileno()
    ids = iter(range(1, 1 << 62))
    buffer = bytearray()

    def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
        os.write(out, orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE))
        while (end := buffer.find(b"\n")) < 0:
            chunk = os.read(inp, 65536)
            if not chunk:
                raise EOFError("server closed its stdout")
            buffer.extend(chunk)
        line = bytes(buffer[:end])
        del buffer[: end + 1]
        result: dict[str, Any] = orjson.loads(line)["result"]
        return result

    try:
        info = {"name": "blocking", "version": "0"}
        request(
            "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info}
        )
        os.write(out, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        request("tools/list", {})

        async def echo(arguments: dict[str, Any]) -> str:
            result = request("tools/call", {"name": "echo", "arguments": arguments})
            return result["content"][0]["text"]  # type: ignore[no-any-return]

        yield echo
    finally:
        process.stdin.close()
        process.wait(5)
        process.stdout.close()


def open_client(client: str, argv: list[str]) -> AbstractAsyncContextManager[Echo]:
    """The adapter for ``client`` (one of :data:`CLIENTS`) over the server ``argv``."""
    if client == "agenthost":
        return _agenthost(argv)
    if client in ("sdk-trio", "sdk-asyncio"):
        return _sdk(argv)
    if client == "floor":
        return _floor(argv)
    if client == BLOCKING:
        return _blocking(argv)
    raise ValueError(f"unknown client {client!r}; known: {', '.join(CLIENTS)}")
