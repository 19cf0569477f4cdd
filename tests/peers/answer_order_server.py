"""A stdio MCP server that controls what comes before, around and after a call's answer.

Why it exists: a caller alone reads its own answer from the pipe (agenthost.rpc
``_read_answer``), and hands everything else to the session's reader. The tests need a
peer that puts each kind of message exactly where that hand-over happens: progress and
server requests before the answer, answers to other requests first, an answer split over
two writes or larger than one read, a notification once the client is idle, a late
answer, a flood of answers to ids nobody used, an exit without an answer. Stdlib only.

Tools (``tools/call`` by name; ``message`` is echoed in every text result):

- ``echo``: answers at once.
- ``progress``: ``n`` ``notifications/progress`` (to the call's ``progressToken``), then
  the answer, in one write.
- ``ask``: a ``ping`` request to the client; the answer once the client replied.
- ``slow``: sleeps ``seconds``, then answers (a late answer for a timed-out call).
- ``big``: a text of ``bytes`` bytes.
- ``split``: the answer in two writes ``seconds`` apart, cut inside the line.
- ``notify_later``: answers, then sends ``notifications/tools/list_changed`` after
  ``seconds`` (when the client is idle).
- ``flood``: ``n`` answers to ids nobody used, then the answer.
- ``log_burst``: answers, then after ``seconds`` ``n`` ``notifications/message`` in one
  write.
- ``exit``: exits with code 7 without answering.

Every received line is appended to ``$AGENTHOST_PEER_LOG`` (when set), one JSON value per
line. Requests are answered in order; while ``slow`` sleeps nothing else is read.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

__all__ = ["main"]

TOOLS = [
    {"name": name, "inputSchema": {"type": "object"}}
    for name in (
        "echo",
        "progress",
        "ask",
        "slow",
        "big",
        "split",
        "notify_later",
        "flood",
        "log_burst",
        "exit",
    )
]


def main() -> None:
    out = sys.stdout.buffer
    log_path = os.environ.get("AGENTHOST_PEER_LOG")
    pending_notify: float | None = None

    def write(*messages: dict[str, Any]) -> None:
        out.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        out.flush()

    def answer(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def text(request_id: Any, value: str) -> dict[str, Any]:
        return answer(request_id, {"content": [{"type": "text", "text": value}]})

    lines = iter(sys.stdin.buffer.readline, b"")
    for line in lines:
        if log_path:
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(line.decode(errors="replace").strip() + "\n")
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method = msg.get("method")
        request_id = msg.get("id")
        if method is None or request_id is None:
            continue
        if method == "initialize":
            write(
                answer(
                    request_id,
                    {
                        "protocolVersion": msg["params"]["protocolVersion"],
                        "capabilities": {"tools": {"listChanged": True}},
                        "serverInfo": {"name": "answer-order", "version": "1"},
                    },
                )
            )
        elif method == "tools/list":
            write(answer(request_id, {"tools": TOOLS}))
        elif method == "ping":
            write(answer(request_id, {}))
        elif method == "tools/call":
            params = msg["params"]
            args = params.get("arguments") or {}
            name = params["name"]
            message = str(args.get("message", ""))
            if name == "echo":
                write(text(request_id, message))
            elif name == "progress":
                token = (params.get("_meta") or {}).get("progressToken")
                notes = [
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": i + 1, "total": args["n"]},
                    }
                    for i in range(int(args["n"]))
                ]
                write(*notes, text(request_id, message))
            elif name == "ask":
                write({"jsonrpc": "2.0", "id": "srv-ping", "method": "ping"})
                for reply in lines:  # until the client answered the ping
                    if json.loads(reply).get("id") == "srv-ping":
                        break
                write(text(request_id, message))
            elif name == "slow":
                time.sleep(float(args["seconds"]))
                write(text(request_id, message))
            elif name == "big":
                write(text(request_id, message + "x" * int(args["bytes"])))
            elif name == "split":
                data = json.dumps(text(request_id, message)).encode() + b"\n"
                half = len(data) // 2
                out.write(data[:half])
                out.flush()
                time.sleep(float(args["seconds"]))
                out.write(data[half:])
                out.flush()
            elif name == "notify_later":
                write(text(request_id, message))
                pending_notify = float(args["seconds"])
                time.sleep(pending_notify)
                write({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            elif name == "flood":
                n = int(args["n"])
                base = 10_000_000
                chunk = 1000
                for start in range(0, n, chunk):
                    write(*(answer(base + i, {}) for i in range(start, min(n, start + chunk))))
                write(text(request_id, message))
            elif name == "log_burst":
                logs = [
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {"level": "info", "data": i},
                    }
                    for i in range(int(args["n"]))
                ]
                write(text(request_id, message))
                time.sleep(float(args.get("seconds", 0)))
                write(*logs)
            elif name == "exit":
                sys.exit(7)
            else:
                write(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "error": {"code": -32602, "message": f"unknown tool {name}"},
                    }
                )
        else:
            write(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32601, "message": "method not found"},
                }
            )


if __name__ == "__main__":
    main()
