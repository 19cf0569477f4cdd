"""A local stand-in for OpenAI's Responses API, for tests that run the CLI as a subprocess.

``python fake_responses_api.py LOG [BODY]``: prints its port, then answers every
``POST /v1/responses`` (each request appended to LOG, one JSON line). With BODY (a JSON
file holding a Responses API ``response`` object) every answer is that response; without,
it answers as a model using client tool search would, by what the request holds: a
``tool_search_call``, then a ``function_call`` of the first tool found, then "Done.".
A streamed request gets the response as one ``response.completed`` SSE event.
"""

import http.server
import json
import sys
from pathlib import Path
from typing import Any

LOG = Path(sys.argv[1])
BODY = json.loads(Path(sys.argv[2]).read_text()) if len(sys.argv) > 2 else None


def reply(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1790000000,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": "gpt-6.2-sol",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 40,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 45,
        },
    }


def scripted(body: dict[str, Any]) -> dict[str, Any]:
    kinds = [item.get("type") for item in body["input"]]
    output: list[dict[str, Any]]
    if "tool_search_output" not in kinds:
        call = {"query": "create a calendar event"}
        output = [
            {
                "type": "tool_search_call",
                "id": "tsc_1",
                "call_id": "call_s",
                "execution": "client",
                "status": "completed",
                "arguments": call,
            }
        ]
    elif "function_call_output" not in kinds:
        found = body["input"][kinds.index("tool_search_output")]["tools"][0]["name"]
        output = [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_f",
                "name": found,
                "arguments": '{"name": "standup"}',
                "status": "completed",
            }
        ]
    else:
        text = {"type": "output_text", "text": "Done.", "annotations": []}
        output = [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        ]
    return reply(output)


class Api(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with LOG.open("a") as log:
            log.write(json.dumps({"path": self.path, "body": body}) + "\n")
        answer = BODY if BODY is not None else scripted(body)
        if body.get("stream"):
            event = {"type": "response.completed", "sequence_number": 0, "response": answer}
            data = f"event: response.completed\ndata: {json.dumps(event)}\n\n".encode()
            kind = "text/event-stream"
        else:
            data, kind = json.dumps(answer).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Api)
print(server.server_address[1], flush=True)
server.serve_forever()
