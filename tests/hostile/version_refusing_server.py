"""A stdio server that refuses our protocol version, naming as the versions it supports
the value of an env variable the host gave it, and a 200 kB "version".

Why it exists: the host reads ``data.supported`` of such a refusal to decide (retry at a
mutual revision) and quotes it in the error it raises; that text must be neither a
secret nor unbounded. Usage: ``python version_refusing_server.py legacy|modern NAME``
(``legacy``: ``initialize`` is refused; ``modern``: ``server/discover`` answers
2026-07-28 and every later request is refused with -32022).
"""

from __future__ import annotations

import json
import os
import sys

era, name = sys.argv[1], sys.argv[2]
supported = [os.environ.get(name, ""), "9" * 200_000]
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    reply: dict[str, object] = {"jsonrpc": "2.0", "id": message["id"]}
    if era == "modern" and message["method"] == "server/discover":
        meta = {"io.modelcontextprotocol/serverInfo": {"name": "refuser", "version": "1"}}
        reply["result"] = {
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "_meta": meta,
        }
    elif era == "modern":
        data = {"supported": supported, "requested": "2026-07-28"}
        reply["error"] = {"code": -32022, "message": "unsupported version", "data": data}
    else:
        data = {"supported": supported, "requested": "2025-11-25"}
        reply["error"] = {"code": -32602, "message": "unsupported version", "data": data}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
