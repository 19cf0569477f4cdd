"""A legacy stdio MCP server whose asks a gateway cannot always tie to one call.

Why it exists: an upstream behind ``agenthost serve`` is shared by every downstream
client; its own requests (sampling, elicitation) name no call. This one asks in the
three shapes that matter: during a call while another client's call is in flight on it
(``ask`` waits for a gate file first, ``hold`` keeps a call in flight until its gate
opens), and after its call answered, with nothing in flight (``later``, and the
``roots/list`` it sends on ``notifications/roots/list_changed``, as a filesystem server
does); ``log`` logs the caller's data during its call, as asks carry it. Every answer it
gets is appended to ``$ASK_LOG`` (one JSON line) and, for ``ask``, is the tool's result,
so a forged answer would become the caller's result. Stdlib only; newline-delimited
JSON-RPC; each call runs in a thread of its own.

Usage::

    ASK_LOG=answers.jsonl python tests/hostile/ask_routing_server.py
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

_write = threading.Lock()
_ids = itertools.count(1)
_waiting: dict[int, tuple[threading.Event, list[Any]]] = {}

TOOLS = [
    {
        "name": name,
        "description": text,
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": True},
    }
    for name, text in (
        ("ask", "Wait for the gate file, then ask the client (kind: elicit or sample)."),
        ("hold", "Stay in flight until the gate file exists."),
        ("later", "Answer at once, then ask the client after `delay` seconds."),
        ("log", "Log `secret` (notifications/message), then answer."),
    )
]


def send(message: dict[str, Any]) -> None:
    with _write:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def record(entry: dict[str, Any]) -> None:
    with _write, Path(os.environ["ASK_LOG"]).open("a") as log:
        log.write(json.dumps(entry) + "\n")


def ask_client(kind: str, secret: str) -> Any:
    """Send our own request; wait for the client's answer (or its error)."""
    rid = next(_ids) + 1_000_000
    event, box = _waiting[rid] = (threading.Event(), [])
    params: dict[str, Any] | None
    if kind == "roots":
        method, params = "roots/list", None
    elif kind == "sample":
        method = "sampling/createMessage"
        params = {
            "messages": [{"role": "user", "content": {"type": "text", "text": secret}}],
            "maxTokens": 16,
        }
    else:
        method = "elicitation/create"
        params = {
            "message": secret,
            "requestedSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
            },
        }
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        request["params"] = params
    send(request)
    event.wait(60)
    return box[0] if box else {"error": "no answer"}


def wait_gate(gate: str) -> None:
    deadline = time.monotonic() + 60
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def call(rid: Any, name: str, args: dict[str, Any]) -> None:
    kind, secret = str(args.get("kind", "elicit")), str(args.get("secret", ""))
    if name == "ask":
        Path(str(args["gate"]) + ".started").write_text("started")
        wait_gate(str(args["gate"]))
        answer = ask_client(kind, secret)
        record({"tool": "ask", "secret": secret, "answer": answer})
        text = json.dumps(answer)
    elif name == "hold":
        Path(str(args["gate"]) + ".started").write_text("started")
        wait_gate(str(args["gate"]))
        text = "held"
    elif name == "log":
        line = {"level": "warning", "logger": "ask-routing", "data": secret}
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": line})
        text = "logged"
    elif name == "later":

        def after() -> None:
            time.sleep(float(args.get("delay", 0.5)))
            record({"tool": "later", "secret": secret, "answer": ask_client(kind, secret)})

        threading.Thread(target=after, daemon=True).start()
        text = "asked later"
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no tool"}})
        return
    result = {"content": [{"type": "text", "text": text}]}
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if method is None:  # an answer to one of our asks
            waiting = _waiting.pop(rid, None)
            if waiting is not None:
                waiting[1].append(message.get("result", message.get("error")))
                waiting[0].set()
        elif method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "ask-routing", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            params = message["params"]
            args = (params.get("name"), params.get("arguments") or {})
            threading.Thread(target=call, args=(rid, *args), daemon=True).start()
        elif method == "notifications/roots/list_changed":
            # As a filesystem server does: list the roots again, outside any call.
            def relist() -> None:
                record({"tool": "roots", "secret": "", "answer": ask_client("roots", "")})

            threading.Thread(target=relist, daemon=True).start()
        elif rid is not None:
            send({"jsonrpc": "2.0", "id": rid, "result": {}})


if __name__ == "__main__":
    main()
