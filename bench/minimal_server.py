"""The fastest stdio MCP server we can write, as the far end of agenthost's benchmarks.

Why it exists: a benchmark of agenthost's stdio path must measure agenthost, not the
server. This server does the least work an MCP server can do: no SDK, no validation,
pre-encoded constant replies, one ``write`` + ``flush`` per response, and a plain
blocking line loop that answers pipelined requests in order as fast as they arrive. It
imports only the standard library's ``json`` (no argparse, no orjson: each costs more
at start-up than the server does per call), so that spawning it, which the whole-process
and fan-out figures include, costs little more than the interpreter itself.

Usage::

    python bench/minimal_server.py [--payload-bytes N | --stale-echo]

It answers ``initialize`` (echoing a known requested revision, else ``2025-11-25``),
``ping``, ``tools/list`` (``echo`` and ``blob``) and ``tools/call``: ``echo`` returns the
``message`` argument as text; ``blob`` returns a text of exactly ``bytes`` ASCII bytes
that starts with ``message`` (so every large result is distinct and checkable), for the
large-payload benchmark; its padding is encoded once per size. With ``--payload-bytes
N`` every ``tools/call`` returns a constant text of exactly N ASCII bytes instead (for
tests that need a large result from any call). With ``--stale-echo``, ``echo`` answers
each call with the previous call's message: a reply meant for another caller, which the
benchmark must catch (its smoke test checks that it does). Notifications and responses
are ignored; other requests get ``-32601``. EOF on stdin ends it.
"""

from __future__ import annotations

import json
import sys

__all__ = ["main"]

REVISIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
LATEST = "2025-11-25"
ECHO_TOOL = {
    "name": "echo",
    "description": "Echo the message back.",
    "inputSchema": {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    },
}
BLOB_TOOL = {
    "name": "blob",
    "description": "A text of exactly `bytes` bytes starting with the message.",
    "inputSchema": {
        "type": "object",
        "properties": {"message": {"type": "string"}, "bytes": {"type": "integer"}},
        "required": ["message", "bytes"],
    },
}


def dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


loads = json.loads


def _result_tail(result: object) -> bytes:
    """Pre-encode ``,"result":<result>}\\n`` so a constant reply costs one id encode."""
    return b',"result":' + dumps(result) + b"}\n"


def main(argv: list[str] | None = None) -> None:
    """Serve stdin/stdout until EOF."""
    args = sys.argv[1:] if argv is None else argv
    # --modern: also answer server/discover (2026-07-28), as a dual-era server does; the
    # default stays a legacy server (what the era-probe figure measures against).
    modern = "--modern" in args
    args = [a for a in args if a != "--modern"]
    payload_tail: bytes | None = None
    stale = args == ["--stale-echo"]
    if args and not stale:
        if len(args) != 2 or args[0] != "--payload-bytes" or not args[1].isdigit():
            sys.exit("usage: minimal_server.py [--payload-bytes N | --stale-echo]")
        payload_tail = _result_tail({"content": [{"type": "text", "text": "x" * int(args[1])}]})
    previous: str | None = None

    discover_tail = _result_tail(
        {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "ttlMs": 0,
            "cacheScope": "public",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "minimal", "version": "1"}},
        }
    )
    head = b'{"jsonrpc":"2.0","id":'
    tools_tail = _result_tail({"tools": [ECHO_TOOL, BLOB_TOOL]})
    empty_tail = _result_tail({})
    blob_head = b',"result":{"content":[{"type":"text","text":'
    #: The padding after a message of one length for one size, and the rest of the line
    #: (one entry at a time: a 32 MiB result is encoded once, not once per call).
    padding: tuple[tuple[int, int], bytes] = ((-1, -1), b"")
    capabilities: dict[str, object] = {"tools": {}}
    info = {"name": "minimal", "version": "1.0.0"}

    out = sys.stdout.buffer
    write = out.write
    flush = out.flush
    for line in sys.stdin.buffer:
        try:
            msg = loads(line)
            method = msg["method"]
            request_id = msg["id"]
        except (ValueError, KeyError, TypeError):
            continue  # blank or junk line, a notification, or a response: nothing to answer
        if method == "tools/call" and payload_tail is not None:
            data = head + dumps(request_id) + payload_tail
        elif method == "tools/call":
            params = msg.get("params") or {}
            arguments = params.get("arguments") or {}
            text = arguments.get("message", "")
            if params.get("name") == "blob":
                key = (arguments["bytes"], len(text))
                if padding[0] != key:
                    padding = (key, b"x" * (key[0] - key[1]) + b'"}]}}\n')
                quoted = dumps(text)[:-1]  # the closing quote comes after the padding
                write(head + dumps(request_id) + blob_head + quoted)
                write(padding[1])
                flush()
                continue
            if stale:
                text, previous = (text if previous is None else previous), text
            result = {"content": [{"type": "text", "text": text}]}
            data = head + dumps(request_id) + _result_tail(result)
        elif method == "tools/list":
            data = head + dumps(request_id) + tools_tail
        elif method == "server/discover" and modern:
            data = head + dumps(request_id) + discover_tail
        elif method == "ping":
            data = head + dumps(request_id) + empty_tail
        elif method == "initialize":
            requested = (msg.get("params") or {}).get("protocolVersion")
            version = requested if requested in REVISIONS else LATEST
            init = {"protocolVersion": version, "capabilities": capabilities, "serverInfo": info}
            data = head + dumps(request_id) + _result_tail(init)
        else:
            error = {"code": -32601, "message": "Method not found"}
            data = head + dumps(request_id) + b',"error":' + dumps(error) + b"}\n"
        write(data)
        flush()


if __name__ == "__main__":
    main()
