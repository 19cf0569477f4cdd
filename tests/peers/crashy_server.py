"""A deliberately misbehaving MCP server over stdio, for agenthost's fault tests.

Why it exists: the official servers behave well, so they cannot show what agenthost does
when a peer hangs, dies mid-call, writes garbage, or starts slowly. This one does all of
that on demand. It uses the stdlib only (no SDK import, starts in tens of milliseconds)
and speaks newline-delimited JSON-RPC 2.0 on stdin/stdout.

Usage::

    python tests/peers/crashy_server.py [--exit-after N] [--crash-on-start] [--garbage]
                                        [--start-delay S] [--malformed]
                                        [--exit-on-unknown] [--silent-on-unknown]

Extra flags may also come from ``$AGENTHOST_CRASHY_ARGS`` (shell-split, appended to argv),
for harnesses that can only set the environment.

Behaviour:

- ``initialize``: echoes the requested ``protocolVersion`` when it is one of the four
  ``initialize`` revisions, otherwise answers ``2025-11-25`` (what the spec asks a server
  to do with a version it does not support).
- ``tools/list``: ``echo`` (returns its ``message``), ``hang`` (never answered), ``crash``
  (the process exits at once with code 3, no response); under ``--malformed`` also
  ``malformed`` (answered with ``"result": "x"``, a result that is not an object).
- ``ping`` answers ``{}``; any other request gets ``-32601``; notifications and responses
  are never answered.
- ``--exit-after N``: after answering the N-th ``tools/call`` the process exits with code 4
  (a ``hang`` or ``crash`` call counts too).
- ``--crash-on-start``: writes a line to stderr and exits with code 1 before reading stdin.
- ``--garbage``: before every response, writes a line that is not JSON and a response to
  an id nobody used.
- ``--start-delay S``: sleeps S seconds before reading stdin.
- ``--exit-on-unknown``: a request for a method it does not know (``server/discover``...)
  ends the process with code 5, unanswered (servers that exit on an unexpected first
  message exist); ``--silent-on-unknown``: such a request is never answered.
- Every received line is appended to ``$AGENTHOST_PEER_LOG`` (when set) as one JSON value
  per line, so a test can assert what arrived (e.g. ``notifications/cancelled``); a line
  that is not JSON is logged as ``{"unparsable": "<text>"}``.
- A ``crashy_server: started`` line goes to stderr at start; EOF on stdin ends the process
  with code 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from typing import Any, BinaryIO, NoReturn

__all__ = ["main"]

STATEFUL_REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
FALLBACK_REVISION = "2025-11-25"
EXIT_CRASH_TOOL = 3
EXIT_AFTER_CALLS = 4
EXIT_UNKNOWN_METHOD = 5

TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "description": "Echo the message back.",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
    },
    {
        "name": "hang",
        "description": "Never answers.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "crash",
        "description": "The server process exits with code 3 without answering.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]

MALFORMED_TOOL: dict[str, Any] = {
    "name": "malformed",
    "description": "Answered with a response whose result is not an object.",
    "inputSchema": {"type": "object", "properties": {}},
}


class Server:
    """The request loop's state: options, the call counter and the output streams."""

    def __init__(self, args: argparse.Namespace, out: BinaryIO, log_path: str | None) -> None:
        self.args = args
        self.out = out
        self.log = open(log_path, "a", encoding="utf-8") if log_path else None  # noqa: SIM115
        self.calls = 0

    def record(self, entry: Any) -> None:
        """Append one received message to the peer log, flushed so a test sees it now."""
        if self.log is not None:
            self.log.write(json.dumps(entry) + "\n")
            self.log.flush()

    def write(self, message: dict[str, Any]) -> None:
        """Write one response (preceded by garbage under ``--garbage``), one flush."""
        data = json.dumps(message).encode() + b"\n"
        if self.args.garbage:
            stray = {"jsonrpc": "2.0", "id": "no-such-request", "result": {}}
            data = b"this is not json {\n" + json.dumps(stray).encode() + b"\n" + data
        self.out.write(data)
        self.out.flush()

    def exit(self, code: int) -> NoReturn:
        """Leave at once: ``os._exit`` so no cleanup can make the crash look graceful."""
        self.out.flush()
        os._exit(code)

    def handle(self, message: Any) -> None:
        """Dispatch one decoded message."""
        if not isinstance(message, dict) or "method" not in message:
            return  # a response or junk: a server that ignores it is within its rights
        method = message["method"]
        if "id" not in message:
            return  # notification
        request_id = message["id"]
        params = message.get("params") or {}
        if method == "initialize":
            requested = params.get("protocolVersion")
            version = requested if requested in STATEFUL_REVISIONS else FALLBACK_REVISION
            result: dict[str, Any] = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "crashy", "version": "1.0.0"},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": [*TOOLS, MALFORMED_TOOL] if self.args.malformed else TOOLS}
        elif method == "tools/call":
            self.calls += 1
            name = params.get("name")
            if name == "crash":
                self.exit(EXIT_CRASH_TOOL)
            if name == "hang":
                self.maybe_exit_after()
                return
            if name == "malformed" and self.args.malformed:
                self.write({"jsonrpc": "2.0", "id": request_id, "result": "x"})
                return
            if name == "echo":
                text = str((params.get("arguments") or {}).get("message", ""))
                result = {"content": [{"type": "text", "text": text}]}
            else:
                result = {
                    "content": [{"type": "text", "text": f"Unknown tool: {name}"}],
                    "isError": True,
                }
            self.write({"jsonrpc": "2.0", "id": request_id, "result": result})
            self.maybe_exit_after()
            return
        elif self.args.exit_on_unknown:
            self.exit(EXIT_UNKNOWN_METHOD)
        elif self.args.silent_on_unknown:
            return
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            self.write({"jsonrpc": "2.0", "id": request_id, "error": error})
            return
        self.write({"jsonrpc": "2.0", "id": request_id, "result": result})

    def maybe_exit_after(self) -> None:
        """Honour ``--exit-after N`` once the N-th ``tools/call`` has been handled."""
        if self.args.exit_after is not None and self.calls >= self.args.exit_after:
            self.exit(EXIT_AFTER_CALLS)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse argv plus ``$AGENTHOST_CRASHY_ARGS``."""
    parser = argparse.ArgumentParser(description="Misbehaving MCP stdio server for tests.")
    parser.add_argument("--exit-after", type=int, default=None, metavar="N")
    parser.add_argument("--crash-on-start", action="store_true")
    parser.add_argument("--garbage", action="store_true")
    parser.add_argument("--malformed", action="store_true")
    parser.add_argument("--start-delay", type=float, default=0.0, metavar="S")
    parser.add_argument("--exit-on-unknown", action="store_true")
    parser.add_argument("--silent-on-unknown", action="store_true")
    extra = shlex.split(os.environ.get("AGENTHOST_CRASHY_ARGS", ""))
    return parser.parse_args([*argv, *extra])


def main(argv: list[str] | None = None) -> None:
    """Run the loop until stdin closes (or a fault flag ends the process)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    sys.stderr.write(f"crashy_server: started pid={os.getpid()} args={vars(args)}\n")
    sys.stderr.flush()
    if args.crash_on_start:
        sys.stderr.write("crashy_server: crashing on start as asked\n")
        sys.stderr.flush()
        os._exit(1)
    if args.start_delay > 0:
        time.sleep(args.start_delay)
    server = Server(args, sys.stdout.buffer, os.environ.get("AGENTHOST_PEER_LOG"))
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            server.record({"unparsable": line.decode("utf-8", "replace").rstrip("\n")})
            continue
        server.record(message)
        server.handle(message)


if __name__ == "__main__":
    main()
