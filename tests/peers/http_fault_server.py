"""A small Streamable HTTP MCP server that misbehaves on demand, for agenthost's HTTP tests.

Why it exists: the official servers behave well, so they cannot show what the client does
when a response stream breaks mid-way, when a server closes a stream to be polled
(2025-11-25), when a request is never answered, or when a server quotes our token back in
an error. Starlette only (no SDK), so every byte on the wire is the test's choice.

Usage::

    python tests/peers/http_fault_server.py --port N [--token T] [--delay S]

Endpoint ``/mcp``. ``initialize`` answers JSON with an ``Mcp-Session-Id``; other requests
need that id (400 without, 404 unknown). Tools (``tools/call``), each answered on an SSE
stream whose events carry ids ``<stream>:<n>``:

- ``echo {message}``: priming event, then the result.
- ``break``: priming (with ``retry: 50``), a log notification, then the connection is
  dropped without ending the chunked body. The result is kept for ``GET`` +
  ``Last-Event-ID``, which replays the rest of that stream.
- ``close``: like ``break`` but the stream ends cleanly (the 2025-11-25 "poll me" close).
- ``break_noid``: like ``break`` with no event ids at all (cannot be resumed).
- ``hang``: priming, then nothing until the client goes away.

``GET`` without ``Last-Event-ID`` answers 405 (no server-initiated stream). ``DELETE``
forgets the session. With ``--token T`` every request needs ``Authorization: Bearer T``;
otherwise 401 with a body that quotes the Authorization header it got (a careless
server), so the client's redaction is tested. With ``--delay S`` every POST and GET
waits S seconds before it is answered (a slow server: the startup deadline tests). Each
HTTP request is appended to ``$AGENTHOST_PEER_LOG`` as a JSON line: verb, JSON-RPC
method, session id, protocol version header and Last-Event-ID.
"""

from __future__ import annotations

import argparse
import json
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["build_app", "main"]

TOOLS = [
    {"name": name, "inputSchema": {"type": "object"}}
    for name in ("echo", "break", "close", "break_noid", "hang")
]


class _Drop(Exception):
    """Raised inside a streaming body to make the server drop the connection mid-stream."""


def _log(entry: dict[str, Any]) -> None:
    path = os.environ.get("AGENTHOST_PEER_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def _event(data: Any, event_id: str | None, retry: int | None = None) -> bytes:
    out = ""
    if event_id is not None:
        out += f"id: {event_id}\n"
    if retry is not None:
        out += f"retry: {retry}\n"
    out += "data: " + ("" if data is None else json.dumps(data)) + "\n\n"
    return out.encode()


def build_app(token: str | None = None, delay: float = 0.0) -> Starlette:
    sessions: set[str] = set()
    #: stream id -> all its events (event id, payload); resumption replays from here.
    streams: dict[str, list[tuple[str, Any]]] = {}

    def record(request: Request, method: str | None) -> None:
        _log(
            {
                "verb": request.method,
                "method": method,
                "session": request.headers.get("mcp-session-id"),
                "protocol": request.headers.get("mcp-protocol-version"),
                "last_event_id": request.headers.get("last-event-id"),
                "accept": request.headers.get("accept"),
            }
        )

    def check_auth(request: Request) -> Response | None:
        if token is None:
            return None
        got = request.headers.get("authorization", "")
        if got != f"Bearer {token}":
            return JSONResponse({"error": f"bad credentials: {got!r}"}, status_code=401)
        return None

    def check_session(request: Request) -> Response | None:
        sid = request.headers.get("mcp-session-id")
        if sid is None:
            return JSONResponse({"error": "missing session"}, status_code=400)
        if sid not in sessions:
            return JSONResponse({"error": "unknown session"}, status_code=404)
        return None

    async def stream(
        events: list[tuple[str | None, Any, int | None]], end: str
    ) -> AsyncIterator[bytes]:
        for event_id, data, retry in events:
            yield _event(data, event_id, retry)
            await anyio.lowlevel.checkpoint()
        if end == "drop":
            await anyio.sleep(0.05)
            raise _Drop("dropping the connection on purpose")
        if end == "hang":
            await anyio.sleep_forever()

    async def post(request: Request) -> Response:
        body = await request.json()
        method = body.get("method")
        record(request, method)
        await anyio.sleep(delay)
        if (denied := check_auth(request)) is not None:
            return denied
        rid = body.get("id")
        if method == "initialize":
            sid = uuid.uuid4().hex
            sessions.add(sid)
            version = body["params"]["protocolVersion"]
            result = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fault-server", "version": "1.0"},
            }
            return JSONResponse(
                {"jsonrpc": "2.0", "id": rid, "result": result}, headers={"mcp-session-id": sid}
            )
        if (bad := check_session(request)) is not None:
            return bad
        if rid is None or "result" in body or "error" in body:
            return Response(status_code=202)
        if method == "ping":
            return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": {}})
        if method == "tools/list":
            return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        if method != "tools/call":
            error = {"code": -32601, "message": f"no method {method}"}
            return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": error})
        tool = body["params"]["name"]
        args = body["params"].get("arguments") or {}
        sid_stream = uuid.uuid4().hex[:8]
        text = args.get("message", tool)
        result = {
            "jsonrpc": "2.0",
            "id": rid,
            "result": {"content": [{"type": "text", "text": text}]},
        }
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": f"working on {tool}"},
        }
        with_ids = tool != "break_noid"
        all_events = [(None, 50), (note, None), (result, None)]
        ids = [f"{sid_stream}:{i}" if with_ids else None for i in range(len(all_events))]
        streams[sid_stream] = [(str(i), e[0]) for i, e in zip(ids, all_events, strict=True)]
        events = [(ids[i], all_events[i][0], all_events[i][1]) for i in range(len(all_events))]
        if tool == "echo":
            gen = stream([events[0], events[2]], "end")
        elif tool in ("break", "break_noid"):
            gen = stream(events[:2], "drop")
        elif tool == "close":
            gen = stream(events[:2], "end")
        else:  # hang
            gen = stream(events[:1], "hang")
        return StreamingResponse(gen, media_type="text/event-stream")

    async def get(request: Request) -> Response:
        record(request, None)
        await anyio.sleep(delay)
        if (denied := check_auth(request)) is not None:
            return denied
        if (bad := check_session(request)) is not None:
            return bad
        last = request.headers.get("last-event-id")
        if not last:
            return Response(status_code=405)
        stream_id, _, _ = last.partition(":")
        events = streams.get(stream_id)
        if events is None:
            return Response(status_code=404)
        index = [eid for eid, _ in events].index(last)
        rest: list[tuple[str | None, Any, int | None]] = [
            (eid, data, None) for eid, data in events[index + 1 :]
        ]
        return StreamingResponse(stream(rest, "end"), media_type="text/event-stream")

    async def delete(request: Request) -> Response:
        record(request, None)
        sid = request.headers.get("mcp-session-id")
        sessions.discard(sid or "")
        return Response(status_code=200)

    return Starlette(
        routes=[
            Route("/mcp", post, methods=["POST"]),
            Route("/mcp", get, methods=["GET"]),
            Route("/mcp", delete, methods=["DELETE"]),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", default=None)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    uvicorn.run(
        build_app(args.token, args.delay), host="127.0.0.1", port=args.port, log_level="warning"
    )


if __name__ == "__main__":
    main()
