"""One tool call with the official ``mcp`` SDK, process start to exit: the reference script.

Why it exists: the whole-process benchmark compares ``agenthost call server__tool ...``
with the same work done by the SDK in the way its documentation shows: start the server
over stdio, initialize, list the tools (a host must know a tool before calling it), call
one, print the text, exit. It runs under asyncio, the SDK's default.

With ``--list`` it only lists the tools and prints their names, one a line: the SDK's
equivalent of ``agenthost tools``.

Usage::

    python bench/sdk_call.py [--list] <server command> [args...]
"""

from __future__ import annotations

import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

__all__ = ["main"]


async def _call(argv: list[str], list_only: bool) -> str:
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            if list_only:
                return "\n".join(tool.name for tool in tools.tools)
            result = await session.call_tool("echo", {"message": "hi"})
            return str(getattr(result.content[0], "text", ""))


def main() -> None:
    argv = sys.argv[1:]
    list_only = argv[:1] == ["--list"]
    print(anyio.run(_call, argv[1:] if list_only else argv, list_only))


if __name__ == "__main__":
    main()
