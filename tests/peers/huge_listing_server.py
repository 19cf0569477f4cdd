"""A stdio MCP server (official SDK) whose tool listing is megabytes.

``wordy`` has a 3 MB description; ``schemaful`` an input schema of 3 MB (one property
with a 3 MB description); ``plain`` is an ordinary tool. A durable run's tool listing is
an activity result: whole, it was over Temporal's 2 MB limit.

Usage: ``python tests/peers/huge_listing_server.py`` (stdio).
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

SIZE = 3_000_000


def build_server() -> MCPServer:
    server = MCPServer("huge")

    @server.tool(description="w" * SIZE)
    def wordy() -> str:
        return "wordy"

    @server.tool()
    def schemaful(value: Annotated[str, Field(description="s" * SIZE)] = "") -> str:
        """A tool with a huge input schema."""
        return "schemaful"

    @server.tool()
    def plain() -> str:
        """An ordinary tool."""
        return "plain ran"

    return server


if __name__ == "__main__":
    build_server().run("stdio")
