"""The clients under test, each behind the same tiny interface: open, then ``call(args)``.

Why an adapter layer: the measuring loops in :mod:`bench.workers` must be the same code
for every client, or the comparison measures the loops. Each adapter is an async context
manager that starts ``bench/minimal_server.py`` (or reaches the Streamable HTTP server
of :file:`bench/http_server.mjs` at ``url``), initializes, lists the tools once (as a
host does before it calls any), and yields a ``Call``:
``await call(tool, arguments) -> text of the first content block``. Imports of
agenthost or mcp happen inside the adapter, so a worker pays only for the client it runs.

Clients: ``agenthost`` and ``floor`` run under Trio; ``sdk-trio`` and ``sdk-asyncio`` are
the official ``mcp`` client under anyio's Trio and asyncio backends. ``blocking`` is no
async client at all: plain blocking ``write``/``read`` on the pipes, one call at a time.
It is the fastest any client can go on this machine's pipes, and so the ceiling of any
sequential ratio (its ``call`` blocks the event loop: sequential use only). The official
TypeScript client (``ts``) runs in Node under the same contract: see
:file:`bench/ts_client.mjs`.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final

from bench.measure import SERVER

__all__ = [
    "BLOCKING",
    "CLIENTS",
    "MAX_MESSAGE",
    "MODERN",
    "TRIO_CLIENTS",
    "TS",
    "Call",
    "open_client",
    "server_argv",
]

#: ``await call(tool, arguments)`` -> the text of the tool result's first content block.
Call = Callable[[str, dict[str, Any]], Awaitable[str]]

CLIENTS: Final = ("agenthost", "sdk-trio", "sdk-asyncio", "floor")
#: Sequential only (see the module docstring).
BLOCKING: Final = "blocking"
#: The official TypeScript SDK client, run by bench/ts_client.mjs under Node.
TS: Final = "ts"
#: agenthost over the 2026-07-28 path (server/discover, per-request _meta) against
#: ``minimal_server.py --modern``: the call figures side by side with the legacy path.
MODERN: Final = "agenthost-2026"
TRIO_CLIENTS: Final = frozenset({"agenthost", MODERN, "floor", BLOCKING})
#: The largest message any client accepts here: above the largest result benchmarked.
MAX_MESSAGE: Final = 64 * 1024 * 1024


def server_argv(server_args: list[str] | None = None, script: str = SERVER) -> list[str]:
    return [sys.executable, script, *(server_args or [])]


def _agenthost_api() -> tuple[Any, Any]:
    """``ServerConfig`` and ``connect``, where the imported agenthost keeps them: a
    ``--baseline`` tree from before the re-layering (issue 23) has them elsewhere."""
    import importlib

    try:
        config = importlib.import_module("agenthost.config.model")
        connection = importlib.import_module("agenthost.connection")
    except ImportError:
        config = importlib.import_module("agenthost.config")
        connection = importlib.import_module("agenthost.dial")
    return config.ServerConfig, connection.connect


@asynccontextmanager
async def _agenthost(
    argv: list[str], url: str | None, protocol: str = "auto"
) -> AsyncIterator[Call]:
    ServerConfig, connect = _agenthost_api()

    if url is not None:
        config = ServerConfig(
            name="minimal", transport="http", url=url, max_message_size=MAX_MESSAGE
        )
    else:
        config = ServerConfig(
            name="minimal",
            transport="stdio",
            command=argv[0],
            args=argv[1:],
            max_message_size=MAX_MESSAGE,
            protocol=protocol,
        )
    async with connect(config) as session:
        await session.list_tools()

        async def call(tool: str, arguments: dict[str, Any]) -> str:
            result = await session.call_tool(tool, arguments)
            text: str = result.content[0].text
            return text

        yield call


@asynccontextmanager
async def _sdk(argv: list[str], url: str | None) -> AsyncIterator[Call]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if url is not None:
        transport = streamable_http_client(url, max_sse_event_size=MAX_MESSAGE)
    else:
        transport = stdio_client(StdioServerParameters(command=argv[0], args=argv[1:]))
    async with transport as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()

        async def call(tool: str, arguments: dict[str, Any]) -> str:
            result = await session.call_tool(tool, arguments)
            return result.content[0].text  # type: ignore[union-attr]

        yield call


@asynccontextmanager
async def _floor(argv: list[str], url: str | None) -> AsyncIterator[Call]:
    from bench.floor import open_floor_client, open_http_floor_client

    if url is not None:
        async with open_http_floor_client(url) as http:
            await http.request("tools/list", {})

            async def call_http(tool: str, arguments: dict[str, Any]) -> str:
                result = await http.call_tool(tool, arguments)
                return result["content"][0]["text"]  # type: ignore[no-any-return]

            yield call_http
        return
    async with open_floor_client(argv) as client:
        await client.request("tools/list", {})

        async def call(tool: str, arguments: dict[str, Any]) -> str:
            result = await client.call_tool(tool, arguments)
            return result["content"][0]["text"]  # type: ignore[no-any-return]

        yield call


@asynccontextmanager
async def _blocking(argv: list[str], url: str | None) -> AsyncIterator[Call]:
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

    if url is not None:
        raise ValueError("the blocking client speaks stdio only")
    try:
        info = {"name": "blocking", "version": "0"}
        request(
            "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info}
        )
        os.write(out, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        request("tools/list", {})

        async def call(tool: str, arguments: dict[str, Any]) -> str:
            result = request("tools/call", {"name": tool, "arguments": arguments})
            return result["content"][0]["text"]  # type: ignore[no-any-return]

        yield call
    finally:
        process.stdin.close()
        process.wait(5)
        process.stdout.close()


def open_client(
    client: str, argv: list[str], url: str | None = None
) -> AbstractAsyncContextManager[Call]:
    """The adapter for ``client`` (one of :data:`CLIENTS`) over the stdio server ``argv``,
    or over Streamable HTTP to ``url`` when it is given."""
    if client == "agenthost":
        return _agenthost(argv, url)
    if client == MODERN:
        return _agenthost([*argv, "--modern"], url, "2026-07-28")
    if client in ("sdk-trio", "sdk-asyncio"):
        return _sdk(argv, url)
    if client == "floor":
        return _floor(argv, url)
    if client == BLOCKING:
        return _blocking(argv, url)
    raise ValueError(f"unknown client {client!r}; known: {', '.join(CLIENTS)}")
