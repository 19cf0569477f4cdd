"""An official-SDK server (``mcp`` 2.x) whose tools ask the client the pre-2026 way.

Why it exists: many servers written for the ``initialize`` era call the SDK's
back-channel directly (``ctx.session.create_message``, ``ctx.elicit``,
``ctx.session.list_roots``) instead of its MRTR-aware ``Resolve`` markers. The SDK still
answers ``server/discover``, so a client in ``auto`` mode settles on 2026-07-28, where a
server has no back-channel: the tool then fails with the SDK's ``NoBackChannelError``
(-32600, "Cannot send 'sampling/createMessage': this transport context has no
back-channel for server-initiated requests."). agenthost's fallback to the initialize
era is tested against this server.

Every tool appends ``ran <tool>`` to ``$AGENTHOST_PEER_LOG`` *before* it asks, so a test
can count how often a tool body ran (a side effect the client must not repeat blindly).

With ``--modern-only`` it refuses ``initialize`` as ``modern_only.py`` does (-32022 naming
only 2026-07-28): a server the initialize era cannot help.

Usage::

    python tests/peers/backchannel_server.py [stdio|streamable-http] [--port N] [--modern-only]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import SamplingMessage, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

PEER_LOG_ENV = "AGENTHOST_PEER_LOG"


def peer_log(line: str) -> None:
    path = os.environ.get(PEER_LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


class Name(BaseModel):
    name: str = Field(description="Your name")


def build_server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(name="agenthost-backchannel-peer", version="1.0.0")
    read_only = ToolAnnotations(read_only_hint=True)

    @server.tool(description="Echo (needs nothing from the client).", structured_output=False)
    def echo(message: str) -> str:
        return message

    async def sample(ctx: Context, prompt: str) -> str:
        content = TextContent(type="text", text=prompt)
        result = await ctx.session.create_message(
            [SamplingMessage(role="user", content=content)], max_tokens=50
        )
        answer = result.content
        return answer.text if isinstance(answer, TextContent) else "non-text answer"

    @server.tool(description="Record a note, then ask the client's LLM about it.")
    async def note_and_ask(ctx: Context, prompt: str) -> str:
        peer_log("ran note_and_ask")  # a side effect before the ask
        return await sample(ctx, prompt)

    @server.tool(description="Ask the client's LLM (read-only).", annotations=read_only)
    async def ask(ctx: Context, prompt: str) -> str:
        peer_log("ran ask")
        return await sample(ctx, prompt)

    @server.tool(description="Ask the user's name (read-only).", annotations=read_only)
    async def whoami(ctx: Context) -> str:
        peer_log("ran whoami")
        outcome = await ctx.elicit("Who are you?", Name)
        if outcome.action == "accept":
            return json.dumps({"action": "accept", "name": outcome.data.name})
        return json.dumps({"action": outcome.action})

    @server.tool(
        description="List the client's roots (idempotent).",
        annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True),
    )
    async def my_roots(ctx: Context) -> str:
        peer_log("ran my_roots")
        listing = await ctx.session.list_roots()
        return json.dumps([str(root.uri) for root in listing.roots])

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "transport", nargs="?", default="stdio", choices=("stdio", "streamable-http")
    )
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--modern-only", action="store_true")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    server = build_server()
    if args.modern_only:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.peers
        from tests.peers.modern_only import RefuseInitialize

        server.middleware.append(RefuseInitialize())
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
