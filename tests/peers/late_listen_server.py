"""An official-SDK server that answers the GET stream late and asks outside any request.

Why: a server may send a request of its own (here ``elicitation/create``) on the
standalone GET stream rather than on the stream of the request that caused it (the
conformance suite's test servers do: ``server.request(...)`` with no related request).
The official SDKs' servers *drop* such a message when no GET stream is open yet. A client
that sends ``tools/call`` before its GET stream is in place loses the question and waits
for ever; agenthost waits (bounded) for the GET stream's answer before its first request.
Here the GET is held back ``--get-delay`` seconds, so the race is lost every time by a
client that does not wait, instead of once in a while under CPU load.

Usage::

    python tests/peers/late_listen_server.py --port N [--get-delay S]
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer


def build_server() -> MCPServer:
    server = MCPServer("late-listen")

    @server.tool()
    async def standalone_ask(ctx: Context) -> str:
        """Ask the client for a name on the standalone stream, then greet it."""
        schema: Any = {"type": "object", "properties": {"name": {"type": "string"}}}
        answer = await ctx.session.elicit("What is your name?", schema)
        name = (answer.content or {}).get("name", "?") if answer.action == "accept" else "?"
        return f"hello {name} ({answer.action})"

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--get-delay", type=float, default=1.0)
    args = parser.parse_args()
    inner = build_server().streamable_http_app()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            await anyio.sleep(args.get_delay)
        await inner(scope, receive, send)

    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
