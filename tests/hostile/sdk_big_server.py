"""An official-SDK (``mcp`` 2.x) server whose one tool returns a large text result.

Why: a legitimate multi-MiB tool result over Streamable HTTP arrives as one SSE event
(the SDK server's default response mode); it is the honest workload that showed the SSE
parser's quadratic cost (issue 14, item 5). The argument is small, so the request stays
under the SDK's own request-body limit.

Usage::

    python tests/hostile/sdk_big_server.py --port N
"""

from __future__ import annotations

import argparse

from mcp.server.mcpserver import MCPServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server: MCPServer = MCPServer(name="big", log_level="WARNING")

    @server.tool(description="Return `size` bytes of text.", structured_output=False)
    def big(size: int) -> str:
        return "y" * size

    server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
