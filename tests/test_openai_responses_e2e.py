"""OpenAI's Responses API (``api = "responses"``) end to end, only the LLM stood in for.

``agenthost run`` as a user runs it: the CLI as a subprocess, two real MCP servers
(tests/peers/many_tools_server.py, 60 tools), tool search on, and a local HTTP server that
answers ``POST /v1/responses`` in the Responses API's shapes (by what the request holds,
as a model would). And a real server's sampling request answered through the adapter.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.forkserver import peer_python
from tests.helpers import host_with_provider, sampling_policy, stdio, text_of
from tests.providers.providers_helpers import (
    output_text,
    responses_reply,
    run_with_fake_responses_api,
)

PEER = Path(__file__).parent / "peers" / "many_tools_server.py"

pytestmark = pytest.mark.timeout(120)


def test_run_with_the_responses_api_searches_and_calls_the_found_tool(tmp_path: Path) -> None:
    servers = "".join(
        f"[servers.{theme}]\ncommand = {json.dumps(peer_python())}\n"
        f"args = {json.dumps([str(PEER), theme])}\n"
        for theme in ("calendar", "mail")
    )
    config = (
        servers + "[agent]\ntool_search = true\n"
        '[policy]\nmode = "headless"\npreset = "unsafe-allow-everything"\n'
    )
    task = "add a standup to the calendar"
    proc, requests = run_with_fake_responses_api(tmp_path, config, ["run", task, "--json"])
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
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
        [peer_python(), "-m", "agenthost", "-c", str(config), "models"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "providers.openai.api" in lines[0], proc.stderr
    assert "chat-completions, responses" in lines[0]
