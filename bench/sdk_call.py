"""One tool call with the official ``mcp`` SDK, process start to exit: the reference script.

Why it exists: the whole-process benchmark compares ``agenthost call server__tool ...``
with the same work done by the SDK in the way its documentation shows: start the server
over stdio, initialize, list the tools (a host must know a tool before calling it), call
one, print the text, exit. It runs under asyncio, the SDK's default.

Usage::

    python bench/sdk_call.py <server command> [args...]
"""

from __future__ import annotations

import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

__all__ = ["main"]


async def _call(argv: list[str]) -> str:
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            result = await session.call_tool("echo", {"message": "hi"})
            return str(getattr(result.content[0], "text", ""))


def main() -> None:
    print(anyio.run(_call, sys.argv[1:]))


if __name__ == "__main__":
    main()
