"""The official-SDK peer (``sdk_server.py``), made to speak MCP 2026-07-28 only.

Why it exists: servers that speak only the modern era are real (the issue's acceptance
names them); the SDK's ``MCPServer`` speaks both eras and has no switch to refuse the old
one, so this script adds the two refusals the spec describes (``basic/versioning.mdx``):

* stdio: an SDK middleware answers ``initialize`` with -32022 "Unsupported protocol
  version" naming only 2026-07-28 (a legacy client's only diagnostic);
* Streamable HTTP: an ASGI front answers HTTP 400 with the same modern JSON-RPC error body
  to any POST whose ``MCP-Protocol-Version`` is not 2026-07-28, and 405 to GET/DELETE
  (no sessions, no GET stream in 2026-07-28).

Every refused ``initialize`` (stdio) or request (HTTP) appends ``refused <method or
version>`` to ``$AGENTHOST_PEER_LOG``.

Usage::

    python tests/peers/modern_only.py [stdio|streamable-http] [--port N]
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.peers

from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from tests.peers.sdk_server import build_server, peer_log

MODERN = "2026-07-28"
UNSUPPORTED_PROTOCOL_VERSION = -32022


def _unsupported(requested: Any) -> dict[str, Any]:
    return {"supported": [MODERN], "requested": requested}


class RefuseInitialize:
    """SDK middleware: ``initialize`` is a legacy-era request; refuse it as the spec says."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "initialize":
            requested = (ctx.params or {}).get("protocolVersion")
            peer_log(f"refused initialize {requested}")
            raise MCPError(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                _unsupported(requested),
            )
        return await call_next(ctx)


def modern_front(app: Any) -> Any:
    """ASGI front: only 2026-07-28 POSTs reach the SDK app."""

    async def front(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if scope["method"] in ("GET", "DELETE"):
            await _reply(send, 405, b"")
            return
        version = headers.get("mcp-protocol-version")
        if scope["method"] == "POST" and version != MODERN:
            body = b""
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
            try:
                rid = json.loads(body).get("id")
            except (ValueError, AttributeError):
                rid = None
            peer_log(f"refused version {version}")
            error = {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {
                    "code": UNSUPPORTED_PROTOCOL_VERSION,
                    "message": "Unsupported protocol version",
                    "data": _unsupported(version),
                },
            }
            await _reply(send, 400, json.dumps(error).encode(), "application/json")
            return
        await app(scope, receive, send)

    return front


async def _reply(send: Any, status: int, body: bytes, kind: str = "text/plain") -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", kind.encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "transport", nargs="?", default="stdio", choices=("stdio", "streamable-http")
    )
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    server = build_server()
    server.middleware.append(RefuseInitialize())
    if args.transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = modern_front(server.streamable_http_app())
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
