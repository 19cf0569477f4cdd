"""A stdlib MCP server that asks its client for sampling, with timestamps, for the benchmark.

Why it exists: the sampling benchmark needs the moment a ``sampling/createMessage``
request left the server and the moment the answer came back, on a clock the client
shares (``time.perf_counter_ns`` is ``CLOCK_MONOTONIC`` on Linux, one clock for every
process). No SDK, so the server's own cost stays out of the figures.

It answers ``initialize``, ``ping``, ``tools/list`` (one tool, ``sample``) and
``tools/call`` of ``sample`` with ``{"n": N}``: it then sends N sampling requests one
after the other, each carrying ``_meta.benchSentNs``, waits for each answer, and returns
one text block holding the JSON list ``[[sent_ns, answered_ns, outcome], ...]``
(``outcome`` is true for a result, else the error's message).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

__all__ = ["main"]

SAMPLE_TOOL = {
    "name": "sample",
    "description": "Ask the client for N sampling completions, timed.",
    "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
}


def _write(obj: dict[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
    sys.stdout.buffer.flush()


def _sample(n: int, lines: Any) -> list[list[int | bool | str]]:
    timings: list[list[int | bool | str]] = []
    for i in range(n):
        request_id = f"s{i}"
        sent = time.perf_counter_ns()
        _write(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "sampling/createMessage",
                "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                    "maxTokens": 16,
                    "_meta": {"benchSentNs": sent},
                },
            }
        )
        for line in lines:
            msg = json.loads(line)
            if msg.get("id") == request_id and "method" not in msg:
                answered = time.perf_counter_ns()
                timings.append([sent, answered, msg.get("error", {}).get("message", True)])
                break
        else:
            return timings  # stdin closed mid-run
    return timings


def main() -> None:
    """Serve stdin/stdout until EOF."""
    lines = iter(sys.stdin.buffer)
    for line in lines:
        try:
            msg = json.loads(line)
            method, request_id = msg["method"], msg["id"]
        except (ValueError, KeyError, TypeError):
            continue
        params = msg.get("params") or {}
        result: dict[str, Any]
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "sampler", "version": "1.0.0"},
            }
        elif method == "tools/list":
            result = {"tools": [SAMPLE_TOOL]}
        elif method == "tools/call" and params.get("name") == "sample":
            n = int((params.get("arguments") or {}).get("n", 1))
            text = json.dumps(_sample(n, lines))
            result = {"content": [{"type": "text", "text": text}]}
        elif method == "ping":
            result = {}
        else:
            error = {"code": -32601, "message": "Method not found"}
            _write({"jsonrpc": "2.0", "id": request_id, "error": error})
            continue
        _write({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
