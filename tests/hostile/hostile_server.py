"""A scriptable hostile MCP server over stdio, for the hostile-server suite (issue 14).

Why it exists: the official servers behave; this one floods, lies and stops reading on
demand, so each defect of issue 14 can be reproduced against a real process rather than
a mock. Stdlib only (starts in tens of milliseconds); newline-delimited JSON-RPC 2.0.

Usage::

    python tests/hostile/hostile_server.py [--http PORT] ['{"tools": [...], "on_start": [...]}']
    python tests/hostile/hostile_server.py [--http PORT] @config.json

With ``--http PORT`` it serves Streamable HTTP on ``http://127.0.0.1:PORT/mcp`` instead
of stdio (JSON answers; ``act`` answers with an SSE stream carrying what the actions
write, then the result; ``stop_reading`` makes every later POST hang; no GET stream).

The optional JSON argument gives extra ``tools`` (listed after the built-in ones) and
``on_start`` actions, run once ``notifications/initialized`` arrives. A test drives the
rest through the ``act`` tool: ``act({"actions": [...]})`` answers at once, then runs the
actions in order on the reading thread (so ``stop_reading`` really stops reading).

Actions (one JSON object each):

- ``{"send": MSG, "count": N}``: write MSG N times, one line each. A MSG with a
  ``method`` and an ``"id"`` gets a fresh id per copy (``"h<k>"``).
- ``{"background": [ACTION, ...]}``: run those actions in a thread of their own, so this
  server goes on reading (a flood larger than the pipes would otherwise deadlock: the
  client's answers fill our stdin while we are still writing).
- ``{"batch": MSG, "count": N}``: one line holding a JSON array of N copies (fresh ids).
- ``{"log_names": N, "log_bytes": B}``: N ``notifications/message``, each with its own
  ``logger`` name (``n0``, ``n1``, ...: their order can be checked), data of B bytes
  (default 1).
- ``{"line": N}``: one line of N bytes that never parses (an oversized frame).
- ``{"set_tools": [TOOL, ...]}``: replace the extra tools (send list_changed yourself).
- ``{"spawn_setsid": PATH}``: start a grandchild in a session of its own (``setsid``),
  sleeping 120 s; write its pid to PATH.
- ``{"sleep": S}``.
- ``{"exit": CODE}``: the process ends at once with CODE (a crash: nothing cleaned up).
- ``{"stop_reading": true}``: never read stdin again (keep running until killed).
- ``{"raw": TEXT}`` (HTTP): TEXT written as-is into the SSE stream (e.g. a huge
  ``data:`` line without its end).

Built-in tools: ``act``; ``echo`` (returns ``message`` as text); ``fail`` (a JSON-RPC
error whose message is ``message``); ``stats`` (counts of the responses and error
responses the client sent to our requests, and the first error). The config's ``text``
(default ``"hostile"``) is the description, text and content of the one prompt (``p``)
and the one resource it serves (the config's ``resource``, default ``hostile://r``), to
which a client may subscribe (``resources/subscribe`` answers ``{}``; the updates are sent
with ``act``). The prompt takes the config's
``prompt_arguments`` (default none); with a ``completion`` object (``{"values": [...],
"sleep": S}``) the server offers completions and answers every ``completion/complete``
with those values after S seconds (on its reading thread: nothing else is answered
meanwhile). With ``record`` (a path), every message received is appended to that file,
one JSON line each. ``results`` maps a tool name to the whole result its calls answer
with (``structuredContent`` too), for a tool of ``tools`` that must return exact data.

A tool named ``flood`` among the config's ``tools`` floods *during* its call, then
answers: ``progress`` notifications for the call's own progress token, then ``logs`` log
lines of ``log_bytes`` bytes each, then the result (``"flooded"``). With ``background``
true it does so from a thread of its own (this server goes on answering meanwhile).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["main"]

_OBJECT: dict[str, Any] = {"type": "object"}
BUILTIN_TOOLS: list[dict[str, Any]] = [
    {"name": "act", "description": "Run hostile actions.", "inputSchema": _OBJECT},
    {"name": "echo", "description": "Echo the message.", "inputSchema": _OBJECT},
    {"name": "fail", "description": "Answer with an error.", "inputSchema": _OBJECT},
    {"name": "stats", "description": "What the client answered.", "inputSchema": _OBJECT},
]
CHUNK = 2000


class Server:
    def __init__(self, config: dict[str, Any]) -> None:
        self.extra_tools: list[dict[str, Any]] = list(config.get("tools", []))
        self.on_start: list[dict[str, Any]] = list(config.get("on_start", []))
        self.text = str(config.get("text", "hostile"))
        self.resource = str(config.get("resource", "hostile://r"))
        self.prompt_arguments: list[dict[str, Any]] = list(config.get("prompt_arguments", []))
        self.completion: dict[str, Any] | None = config.get("completion")
        self.record: str | None = config.get("record")
        self.results: dict[str, Any] = dict(config.get("results", {}))
        self.out = sys.stdout.buffer
        self.lock = threading.Lock()
        #: HTTP: where this thread's writes go (None: stdout).
        self.local = threading.local()
        self.stopped = threading.Event()
        self.ids = 0
        self.responses = 0
        self.errors = 0
        self.first_error: Any = None

    def write_lines(self, lines: list[bytes]) -> None:
        sink = getattr(self.local, "sink", None)
        if sink is not None:
            sink.extend(lines)
            return
        with self.lock:
            self.out.write(b"".join(lines))
            self.out.flush()

    def write(self, obj: Any) -> None:
        self.write_lines([json.dumps(obj).encode() + b"\n"])

    def fresh(self, msg: dict[str, Any]) -> dict[str, Any]:
        if "method" in msg and "id" in msg:
            with self.lock:
                self.ids += 1
                return {**msg, "id": f"h{self.ids}"}
        return msg

    def run_actions(self, actions: list[dict[str, Any]]) -> None:
        for action in actions:
            if "send" in action:
                count = int(action.get("count", 1))
                for start in range(0, count, CHUNK):
                    n = min(CHUNK, count - start)
                    self.write_lines(
                        [json.dumps(self.fresh(action["send"])).encode() + b"\n" for _ in range(n)]
                    )
            elif "background" in action:
                threading.Thread(
                    target=self.run_actions, args=(list(action["background"]),), daemon=True
                ).start()
            elif "batch" in action:
                batch = [self.fresh(action["batch"]) for _ in range(int(action["count"]))]
                self.write(batch)
            elif "log_names" in action:
                count = int(action["log_names"])
                data = "x" * int(action.get("log_bytes", 1))
                for start in range(0, count, CHUNK):
                    lines = [
                        json.dumps(
                            {
                                "jsonrpc": "2.0",
                                "method": "notifications/message",
                                "params": {"level": "info", "logger": f"n{k}", "data": data},
                            }
                        ).encode()
                        + b"\n"
                        for k in range(start, min(count, start + CHUNK))
                    ]
                    self.write_lines(lines)
            elif "line" in action:
                self.write_lines([b"{" + b"x" * (int(action["line"]) - 1) + b"\n"])
            elif "set_tools" in action:
                self.extra_tools = list(action["set_tools"])
            elif "spawn_setsid" in action:
                child = subprocess.Popen(
                    [sys.executable, "-c", "import time; time.sleep(120)"],
                    start_new_session=True,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                with open(action["spawn_setsid"], "w") as f:
                    f.write(str(child.pid))
            elif "raw" in action:
                sink = getattr(self.local, "sink", None)
                if sink is not None:
                    sink.append(RawText(action["raw"]))
            elif "sleep" in action:
                time.sleep(float(action["sleep"]))
            elif "exit" in action:
                sys.stdout.flush()
                os._exit(int(action["exit"]))  # a crash: no cleanup, children left behind
            elif action.get("stop_reading"):
                if getattr(self.local, "sink", None) is not None:
                    self.stopped.set()  # HTTP: later POSTs hang
                    continue
                while True:
                    time.sleep(3600)

    def handle(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        """Answer one message; returns actions to run after the answer is written."""
        method = msg.get("method")
        if self.record is not None:
            with open(self.record, "a") as f:
                f.write(json.dumps(msg) + "\n")
        if method is None:  # a response to one of our requests
            if "error" in msg:
                self.errors += 1
                if self.first_error is None:
                    self.first_error = msg["error"]
            else:
                self.responses += 1
            return []
        if method == "notifications/initialized":
            actions, self.on_start = self.on_start, []
            return actions
        if "id" not in msg:
            return []
        result: Any
        later: list[dict[str, Any]] = []
        params = msg.get("params") or {}
        if method == "initialize":
            capabilities: dict[str, Any] = {
                "tools": {"listChanged": True},
                "prompts": {},
                "resources": {"subscribe": True},
                "logging": {},
            }
            if self.completion is not None:
                capabilities["completions"] = {}
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": capabilities,
                "serverInfo": {"name": "hostile", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": BUILTIN_TOOLS + self.extra_tools}
        elif method == "prompts/list":
            prompt = {"name": "p", "description": self.text, "arguments": self.prompt_arguments}
            result = {"prompts": [prompt]}
        elif method == "prompts/get":
            message = {"role": "user", "content": {"type": "text", "text": self.text}}
            result = {"description": self.text, "messages": [message]}
        elif method == "resources/list":
            resource = {"uri": self.resource, "name": self.text, "mimeType": "text/plain"}
            result = {"resources": [resource]}
        elif method == "resources/templates/list":
            result = {"resourceTemplates": []}
        elif method == "resources/read":
            result = {"contents": [{"uri": self.resource, "text": self.text}]}
        elif method == "tools/call" and params.get("name") == "fail":
            reason = str((params.get("arguments") or {}).get("message", "failed"))
            error = {"code": -32000, "message": reason}
            self.write({"jsonrpc": "2.0", "id": msg["id"], "error": error})
            return []
        elif method == "tools/call" and params.get("name") == "flood":
            flood = self.flood(msg["id"], params)
            if (params.get("arguments") or {}).get("background"):
                threading.Thread(target=flood, daemon=True).start()
            else:
                flood()
            return []
        elif method == "tools/call":
            name = params.get("name")
            args = params.get("arguments") or {}
            text = "ok"
            if name == "act":
                later = list(args.get("actions", []))
            elif name == "echo":
                text = str(args.get("message", ""))
            elif name in self.results:
                self.write({"jsonrpc": "2.0", "id": msg["id"], "result": self.results[name]})
                return []
            elif name == "stats":
                text = json.dumps(
                    {
                        "responses": self.responses,
                        "errors": self.errors,
                        "first_error": self.first_error,
                    }
                )
            result = {"content": [{"type": "text", "text": text}]}
        elif method == "completion/complete" and self.completion is not None:
            time.sleep(float(self.completion.get("sleep", 0)))
            values = list(self.completion.get("values", []))
            result = {"completion": {"values": values, "total": len(values), "hasMore": False}}
        elif method in ("ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"):
            result = {}
        else:
            self.write(
                {
                    "jsonrpc": "2.0",
                    "id": msg["id"],
                    "error": {"code": -32601, "message": f"Method not found: {method}"},
                }
            )
            return []
        self.write({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        return later

    def flood(self, rid: Any, params: dict[str, Any]) -> Callable[[], None]:
        """The ``flood`` tool's writes (see the module doc), to run now or in a thread."""
        args = params.get("arguments") or {}
        token = (params.get("_meta") or {}).get("progressToken")
        lines = [
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": k + 1, "total": 0},
                }
            ).encode()
            + b"\n"
            for k in range(int(args.get("progress", 0)) if token is not None else 0)
        ]
        data = "x" * int(args.get("log_bytes", 100))
        log = {"level": "info", "logger": "flood", "data": data}
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": log}
        lines += [json.dumps(note).encode() + b"\n"] * int(args.get("logs", 0))
        result = {"content": [{"type": "text", "text": "flooded"}]}
        answer = json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode() + b"\n"

        def run() -> None:
            for start in range(0, len(lines), CHUNK):
                self.write_lines(lines[start : start + CHUNK])
            self.write_lines([answer])

        return run

    def serve(self) -> None:
        for raw in sys.stdin.buffer:
            if not raw.strip():
                continue
            message = json.loads(raw)
            for msg in message if isinstance(message, list) else [message]:
                self.run_actions(self.handle(msg))


class RawText(bytes):
    """Bytes an action wants in the SSE stream as they are (not as an event)."""

    def __new__(cls, text: str) -> RawText:
        return super().__new__(cls, text.encode())


def serve_http(server: Server, port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, status: int, body: bytes = b"", kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Mcp-Session-Id", "hostile-session")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._reply(405)

        def do_DELETE(self) -> None:
            self._reply(200)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if server.stopped.is_set():
                time.sleep(3600)
            message = json.loads(body)
            messages = message if isinstance(message, list) else [message]
            answer: list[bytes] = []
            streamed: list[bytes] = []
            for msg in messages:
                server.local.sink = answer
                later = server.handle(msg)
                server.local.sink = streamed
                server.run_actions(later)
                server.local.sink = None
            if not answer:
                self._reply(202)
            elif not streamed:
                self._reply(200, answer[0].strip())
            else:
                events = [
                    bytes(line) if isinstance(line, RawText) else b"data: " + line.strip() + b"\n\n"
                    for line in [*streamed, *answer]
                ]
                self._reply(200, b"".join(events), "text/event-stream")

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    print(f"hostile_server: listening on {port}", file=sys.stderr, flush=True)
    httpd.serve_forever()


def main() -> None:
    argv = sys.argv[1:]
    port: int | None = None
    if argv[:1] == ["--http"]:
        port = int(argv[1])
        argv = argv[2:]
    if argv and argv[0].startswith("@"):  # a config too large for a command line
        with open(argv[0][1:]) as f:
            config = json.load(f)
    else:
        config = json.loads(argv[0]) if argv else {}
    print(f"hostile_server: started pid {os.getpid()}", file=sys.stderr, flush=True)
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        if port is not None:
            serve_http(Server(config), port)
        else:
            Server(config).serve()


if __name__ == "__main__":
    main()
