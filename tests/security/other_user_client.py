"""A local client of ``agenthost serve --http``, run as another OS user by the tests: it
tries what another user of the machine did to a gateway without authentication.

Usage: ``python other_user_client.py URL PATH ANSWER``. It initializes a session, calls
``read_text_file`` on PATH (another user's 0600 file, readable by the owner's filesystem
server), answers the consent form with ANSWER ("always": written into the owner's
approvals), and prints what it got as one JSON object: the status of each step, whether
a form came, and the tool's text. Refused at ``initialize``, it still tries the call and a
blind answer without a session. ``AGENTHOST_SERVE_TOKEN``, when set, is sent as the bearer
token (the owner's positive control). Stdlib and httpx only (it runs as ``nobody``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import httpx

VERSION = "2025-06-18"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": VERSION,
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "other-user", "version": "1"},
    },
}


def _events(lines: Any) -> Any:
    for line in lines:
        if line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


def main(url: str, path: str, answer: str) -> dict[str, Any]:
    headers = {"accept": "application/json, text/event-stream"}
    token = os.environ.get("AGENTHOST_SERVE_TOKEN")
    if token:
        headers["authorization"] = f"Bearer {token}"
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "read_text_file", "arguments": {"path": path}},
    }
    seen: dict[str, Any] = {"form": False, "text": None}
    with httpx.Client(headers=headers, timeout=30) as client:
        first = client.post(url, json=INIT)
        seen["initialize"] = first.status_code
        if first.status_code != 200:
            seen["call"] = client.post(url, json=call).status_code
            blind = {"jsonrpc": "2.0", "id": 0, "result": {"action": "accept"}}
            seen["answer"] = client.post(url, json=blind).status_code
            return seen
        session = {
            "mcp-session-id": first.headers["mcp-session-id"],
            "mcp-protocol-version": VERSION,
        }
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        client.post(url, json=note, headers=session)
        with client.stream("POST", url, json=call, headers=session) as stream:
            seen["call"] = stream.status_code
            for message in _events(stream.iter_lines()):
                if message.get("method") == "elicitation/create":
                    seen["form"] = True
                    content = {"action": "accept", "content": {"decision": answer}}
                    reply = {"jsonrpc": "2.0", "id": message["id"], "result": content}
                    seen["answer"] = client.post(url, json=reply, headers=session).status_code
                elif message.get("id") == 2:
                    result = message.get("result") or {}
                    seen["text"] = " ".join(
                        c.get("text", "") for c in result.get("content", []) if isinstance(c, dict)
                    )
                    break
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3])))
