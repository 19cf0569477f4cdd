"""A hostile Streamable HTTP server aimed at the inline request path (rpc.call ->
transport.exchange): endless progress, server-request floods, tails after the answer,
wrong ids, junk batches. Starlette only: every byte on the wire is the test's choice.

Usage: python tests/hostile/inline_attack_server.py PORT
Counters at GET /stats (POSTs seen per method, cancellations heard, open streams).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

TOOLS = [
    *("progress_forever", "ask_flood", "tail", "wrong_id", "dup"),
    *("junk_batch", "batch_ok", "resume_forever", "slow", "echo", "steal"),
    *("json_hang", "json_with_log", "json_with_ping"),
]
STATS: Counter[str] = Counter()
SLOW_IDS: list[Any] = []


def _sse(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


def _result(rid: Any, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


def _stream(gen: AsyncIterator[bytes], name: str) -> StreamingResponse:
    async def wrapped() -> AsyncIterator[bytes]:
        STATS["open_streams"] += 1
        try:
            async for chunk in gen:
                yield chunk
        finally:
            STATS["open_streams"] -= 1
            STATS[f"closed:{name}"] += 1

    return StreamingResponse(wrapped(), media_type="text/event-stream")


async def tool(rid: Any, name: str, args: dict[str, Any]) -> Response:
    if name == "json_hang":  # a JSON reply that never comes: not even its status line
        STATS["json_hang"] += 1
        await anyio.sleep_forever()
    if name == "json_with_log":  # a notification before the answer, in one JSON batch
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "before the answer"},
        }
        return JSONResponse([note, _result(rid, "after the log")])
    if name == "json_with_ping":  # a server request before the answer, in one JSON batch
        ping = {"jsonrpc": "2.0", "id": "srv-ping", "method": "ping"}
        return JSONResponse([ping, _result(rid, "after the ping")])
    if name == "echo":
        return JSONResponse(_result(rid, str(args.get("message"))))
    if name == "progress_forever":
        token = args.get("token", rid)

        async def gen() -> AsyncIterator[bytes]:
            n = 0
            while True:
                n += 1
                params = {"progressToken": token, "progress": n}
                yield _sse({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
                await anyio.sleep(0.001)

        return _stream(gen(), name)
    if name == "ask_flood":
        count = int(args.get("count", 1000))
        method = args.get("method", "ping")

        async def gen() -> AsyncIterator[bytes]:
            for i in range(count):
                params: dict[str, Any] = {}
                if method == "sampling/createMessage":
                    params = {"messages": [], "maxTokens": 1}
                yield _sse({"jsonrpc": "2.0", "id": f"ask-{i}", "method": method, "params": params})
            yield _sse(_result(rid, "after flood"))

        return _stream(gen(), name)
    if name == "tail":
        chunk = int(args.get("chunk", 64 * 1024))

        async def gen() -> AsyncIterator[bytes]:
            yield _sse(_result(rid, "answer"))
            blob = {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "x" * chunk},
            }
            while True:
                yield _sse(blob)
                await anyio.lowlevel.checkpoint()

        return _stream(gen(), name)
    if name == "wrong_id":

        async def gen() -> AsyncIterator[bytes]:
            yield _sse(_result(999999, "not yours"))
            yield _sse(_result(rid, "mine"))

        return _stream(gen(), name)
    if name == "dup":

        async def gen() -> AsyncIterator[bytes]:
            yield _sse(_result(rid, "first"))
            yield _sse(_result(rid, "second"))

        return _stream(gen(), name)
    if name == "junk_batch":
        junk: list[Any] = [
            1,
            None,
            "x",
            {"jsonrpc": "2.0"},
            {"id": rid},
            [],
            _result(rid, "in batch"),
        ]
        return JSONResponse(junk)
    if name == "resume_forever":
        # one event with an id, then the stream ends: the client resumes with GET, and
        # every GET gets one new event id and ends again, never the answer.
        async def gen() -> AsyncIterator[bytes]:
            yield b"id: e0\nretry: 1\ndata: \n\n"

        return _stream(gen(), name)
    if name == "batch_ok":
        return JSONResponse([_result(rid, "in batch")])
    if name == "steal":  # answer the last "slow" request from this stream, then ours
        victim = SLOW_IDS[-1] if SLOW_IDS else None

        async def gen() -> AsyncIterator[bytes]:
            yield _sse(_result(victim, "stolen"))
            yield _sse(_result(rid, "thief"))

        return _stream(gen(), name)
    if name == "slow":
        SLOW_IDS.append(rid)

        async def gen() -> AsyncIterator[bytes]:
            yield b": hi\n\n"
            await anyio.sleep(3600)
            yield _sse(_result(rid, "late"))

        return _stream(gen(), name)
    return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no"}})


async def mcp(request: Request) -> Response:
    if request.method == "GET":
        last = request.headers.get("last-event-id")
        if last is None:
            return Response(status_code=405)
        STATS["resume_gets"] += 1
        n = int(last[1:]) + 1

        async def gen() -> AsyncIterator[bytes]:
            yield f"id: e{n}\nretry: 1\ndata: \n\n".encode()

        return _stream(gen(), "resume")
    if request.method == "DELETE":
        return Response(status_code=200)
    body = json.loads(await request.body() or b"{}")
    method = body.get("method") if isinstance(body, dict) else None
    STATS[f"post:{method}"] += 1
    if isinstance(body, dict) and method is None:
        STATS["client_responses"] += 1
        STATS["client_errors"] += "error" in body
    rid = body.get("id") if isinstance(body, dict) else None
    if method == "initialize":
        result = {
            "protocolVersion": body["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "inline-attack", "version": "1"},
        }
        resp = JSONResponse({"jsonrpc": "2.0", "id": rid, "result": result})
        resp.headers["mcp-session-id"] = "s1"
        return resp
    if method == "tools/list":
        tools = [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]
        return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
    if method == "tools/call":
        p = body["params"]
        args = dict(p.get("arguments") or {})
        args.setdefault("token", (p.get("_meta") or {}).get("progressToken", rid))
        return await tool(rid, p["name"], args)
    if rid is None:
        return Response(status_code=202)
    return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": {}})


async def stats(request: Request) -> Response:
    return JSONResponse(dict(STATS))


app = Starlette(
    routes=[Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]), Route("/stats", stats)]
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="error")
