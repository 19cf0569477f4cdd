"""OpenAI's Responses API (``api = "responses"``) end to end, only the LLM stood in for.

``agenthost run`` as a user runs it: the CLI as a subprocess, two real MCP servers
(tests/peers/many_tools_server.py, 60 tools), tool search on, and a local HTTP server that
answers ``POST /v1/responses`` in the Responses API's shapes (by what the request holds,
as a model would). And a real server's sampling request answered through the adapter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.forkserver import peer_python
from tests.helpers import host_with_provider, sampling_policy, stdio, text_of
from tests.providers.providers_helpers import output_text, responses_reply

PEER = Path(__file__).parent / "peers" / "many_tools_server.py"

pytestmark = pytest.mark.timeout(120)

FAKE_RESPONSES_API = r"""
import http.server, json, sys

LOG = open(sys.argv[1], "a")

def reply(output):
    return {"id": "resp_1", "object": "response", "created_at": 1790000000,
            "status": "completed", "error": None, "incomplete_details": None,
            "model": "gpt-6.2-sol", "output": output, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 45}}

class Api(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        LOG.write(json.dumps({"path": self.path, "body": body}) + "\n")
        LOG.flush()
        kinds = [item.get("type") for item in body["input"]]
        if "tool_search_output" not in kinds:
            output = [{"type": "tool_search_call", "id": "tsc_1", "call_id": "call_s",
                       "execution": "client", "status": "completed",
                       "arguments": {"query": "create a calendar event"}}]
        elif "function_call_output" not in kinds:
            found = body["input"][kinds.index("tool_search_output")]["tools"][0]["name"]
            output = [{"type": "function_call", "id": "fc_1", "call_id": "call_f",
                       "name": found, "arguments": "{\"name\": \"standup\"}",
                       "status": "completed"}]
        else:
            output = [{"type": "message", "id": "msg_1", "role": "assistant",
                       "status": "completed",
                       "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}]
        data = json.dumps(reply(output)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", 0), Api)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def test_run_with_the_responses_api_searches_and_calls_the_found_tool(tmp_path: Path) -> None:
    api, log = tmp_path / "api.py", tmp_path / "requests.jsonl"
    api.write_text(FAKE_RESPONSES_API)
    servers = "".join(
        f"[servers.{theme}]\ncommand = {json.dumps(peer_python())}\n"
        f"args = {json.dumps([str(PEER), theme])}\n"
        for theme in ("calendar", "mail")
    )
    with subprocess.Popen(
        [sys.executable, str(api), str(log)], stdout=subprocess.PIPE, text=True
    ) as llm:
        try:
            assert llm.stdout is not None
            port = int(llm.stdout.readline())
            config = tmp_path / "agenthost.toml"
            config.write_text(
                servers + "[agent]\ntool_search = true\n"
                '[policy]\nmode = "headless"\npreset = "unsafe-allow-everything"\n'
                "[providers.openai]\n"
                'kind = "openai"\napi = "responses"\n'
                f'base_url = "http://127.0.0.1:{port}/v1"\n'
                'default_model = "gpt-6.2-sol"\nmax_retries = 0\n'
            )
            env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
            env.pop("OPENAI_BASE_URL", None)
            env["OPENAI_API_KEY"] = "test-key"
            task = "add a standup to the calendar"
            proc = subprocess.run(
                [sys.executable, "-m", "agenthost", "-c", str(config), "run", task, "--json"],
                capture_output=True,
                text=True,
                timeout=90,
                cwd=tmp_path,
                env=env,
            )
        finally:
            llm.terminate()
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["path"] for r in requests] == ["/v1/responses"] * 3
    first = requests[0]["body"]
    assert first["tools"][-1] == {
        "type": "tool_search",
        "execution": "client",
        "description": first["tools"][-1]["description"],
        "parameters": first["tools"][-1]["parameters"],
    }
    assert len(first["tools"]) == 61
    assert all(t["defer_loading"] is True for t in first["tools"][:-1])
    result = json.loads(proc.stdout)
    assert result["final_text"] == "Done.", result
    search, call = result["tool_calls"]
    assert search["name"] == "search_tools"
    assert call["name"] == "calendar__create_event"
    assert call["output"] == 'calendar__create_event called with {"name": "standup"}'


async def test_a_servers_sampling_request_answered_through_the_responses_api(
    tmp_path: Path, sdk_server_cmd: Callable[..., tuple[str, list[str]]]
) -> None:
    bodies: list[dict[str, Any]] = []

    def api(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/responses"
        bodies.append(json.loads(request.content))
        return responses_reply([output_text("Paris is the capital of France.")])

    table = {"openai": {"kind": "openai", "api": "responses"}}
    policy = sampling_policy(tmp_path, max_tokens=64)
    servers = [stdio("sdk", sdk_server_cmd())]
    async with host_with_provider(servers, policy, api, table, {"OPENAI_API_KEY": "k"}) as host:
        result = await host.call_tool("sdk__sample", {"prompt": "Capital of France?"})
    assert text_of(result) == "Paris is the capital of France."
    (body,) = bodies
    assert body["max_output_tokens"] == 64  # the server asked for 100; the policy caps it
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Capital of France?"}],
        }
    ]


def test_a_bad_api_value_is_one_line_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "agenthost.toml"
    config.write_text('[providers.openai]\nkind = "openai"\napi = "assistants"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "agenthost", "-c", str(config), "models"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "providers.openai.api" in lines[0], proc.stderr
    assert "chat-completions, responses" in lines[0]
