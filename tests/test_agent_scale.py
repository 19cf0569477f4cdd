"""Big results and long runs (issue 27, section 2), through the CLI as a subprocess.

The servers are real (tests/peers/many_tools_server.py, on the official SDK); the model is
Anthropic's Messages API served on a local port (tests.helpers.MessagesServer), so the
CLI, the SDK, the catalog's prices and the agent all run as a user runs them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agenthost_providers.catalog import load_catalog
from tests.forkserver import peer_python
from tests.helpers import MessagesServer, cli_with_anthropic_key

PEER = Path(__file__).parent / "peers" / "many_tools_server.py"
MODEL = "claude-sonnet-5-5"

#: Generous: each test runs the CLI once or twice, slow on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(150)


def write_config(
    tmp_path: Path, base_url: str, *, agent: str = "", themes: str = "db", media: bool = False
) -> Path:
    extra = ', "--media"' if media else ""
    servers = "".join(
        f"[servers.{t}]\ncommand = {json.dumps(peer_python())}\n"
        f"args = [{json.dumps(str(PEER))}, {json.dumps(t)}{extra}]\n\n"
        for t in themes.split()
    )
    path = tmp_path / "agenthost.toml"
    path.write_text(
        f"""{servers}
[providers.anthropic]
kind = "anthropic"
base_url = "{base_url}"
default_model = "{MODEL}"
max_retries = 0

[policy]
mode = "headless"
preset = "unsafe-allow-everything"

{agent}
"""
    )
    return path


def tool_use(call_id: str, name: str, **args: Any) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": call_id, "name": name, "input": args}]


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def prices() -> tuple[float, float]:
    info = next(m for m in load_catalog().models if m.id == MODEL)
    return info.input_cost, info.output_cost


def test_run_json_has_cost_per_turn_and_for_the_run(tmp_path: Path) -> None:
    answers = [tool_use("t1", "db__list_table"), text("Two tables.")]
    with MessagesServer(answers, usage={"input_tokens": 1200, "output_tokens": 300}) as api:
        proc = cli_with_anthropic_key(
            tmp_path, write_config(tmp_path, api.base_url), "run", "tables?", "--json"
        )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    price_in, price_out = prices()
    turn = (1200 * price_in + 300 * price_out) / 1_000_000
    assert [u["cost_usd"] for u in data["turns_usage"]] == [round(turn, 6)] * 2
    assert data["turns_usage"][0] == {
        "model": MODEL,
        "input_tokens": 1200,
        "output_tokens": 300,
        "cost_usd": round(turn, 6),
    }
    assert data["cost_usd"] == round(2 * turn, 6)
    # The human summary line says it too.
    with MessagesServer([text("Hi.")], usage={"input_tokens": 1000, "output_tokens": 0}) as api:
        proc = cli_with_anthropic_key(tmp_path, write_config(tmp_path, api.base_url), "run", "hi")
    assert proc.returncode == 0, proc.stderr
    assert f"1,000 tokens (1,000 in, 0 out), ~${1000 * price_in / 1e6:.4f}" in proc.stderr


def test_a_big_result_is_cut_for_the_model_and_kept_whole_in_the_transcript(
    tmp_path: Path,
) -> None:
    big = "row " * 5000  # 20,000 characters: about 5,000 tokens
    answers = [tool_use("t1", "db__create_query", description=big), text("Done.")]
    with MessagesServer(answers) as api:
        config = write_config(tmp_path, api.base_url, agent="[agent]\nmax_result_tokens = 500")
        proc = cli_with_anthropic_key(tmp_path, config, "run", "query", "--json")
        bodies = api.bodies
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    full = data["tool_calls"][0]["output"]
    assert big in full and len(full) > 20_000  # the transcript keeps it all
    result = bodies[1]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    sent = "".join(block["text"] for block in result["content"])
    assert len(sent) < 2000 + 400  # 500 tokens of the result, and the note
    assert sent.startswith(full[:1000])
    note = result["content"][-1]["text"]
    assert note.startswith(f"[result cut: {len(full) - 2000:,} of {len(full):,} characters")
    assert "max_result_tokens = 500" in note and "call the tool again asking for less" in note


def test_media_the_model_cannot_take_is_described_not_sent(tmp_path: Path) -> None:
    """Claude takes no audio: a tool that returns some used to end the run (exit 4, the
    adapter refusing the request); the model is now told what there was."""
    answers = [tool_use("t1", "db__get_recording"), text("A snapshot and a sound.")]
    with MessagesServer(answers) as api:
        config = write_config(tmp_path, api.base_url, media=True)
        proc = cli_with_anthropic_key(tmp_path, config, "run", "what is recorded?", "--json")
        bodies = api.bodies
    assert proc.returncode == 0, proc.stderr
    result = bodies[1]["messages"][-1]["content"][0]
    kinds = [block["type"] for block in result["content"]]
    assert kinds == ["text", "image", "text"]  # the image goes as an image
    note = result["content"][2]["text"]
    assert note.startswith("[audio (audio/wav, about 4") and note.endswith(
        f"not shown: the model {MODEL} takes no audio input]"
    )
    # The transcript keeps what the tool returned.
    assert json.loads(proc.stdout)["tool_calls"][0]["output"] == "recording 7\n[image][audio]"


def test_tools_shows_each_servers_definition_tokens(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9", themes="db weather")
    proc = cli_with_anthropic_key(tmp_path, config, "tools", "--json")
    assert proc.returncode == 0, proc.stderr
    tools = json.loads(proc.stdout)
    per_server: dict[str, int] = {}
    for tool in tools:
        assert tool["definition_tokens"] > 50
        per_server[tool["server"]] = per_server.get(tool["server"], 0) + tool["definition_tokens"]
    proc = cli_with_anthropic_key(tmp_path, config, "tools")
    assert proc.returncode == 0, proc.stderr
    assert "tool definitions per model request (estimated tokens):" in proc.stdout
    assert f"  db: {per_server['db']:,} (30 tools)" in proc.stdout
    assert f"  weather: {per_server['weather']:,} (30 tools)" in proc.stdout
    assert f"  total: {sum(per_server.values()):,}" in proc.stdout


def test_chat_shows_each_turns_tokens_and_cost(tmp_path: Path) -> None:
    answers = [text("Hello."), tool_use("t1", "db__list_table"), text("Listed.")]
    with MessagesServer(answers, usage={"input_tokens": 2000, "output_tokens": 100}) as api:
        config = write_config(tmp_path, api.base_url)
        proc = cli_with_anthropic_key(
            tmp_path, config, "chat", stdin="hi\nlist the tables\n/quit\n"
        )
    assert proc.returncode == 0, proc.stderr
    price_in, price_out = prices()
    turn = (2000 * price_in + 100 * price_out) / 1e6
    assert f"(2,100 tokens (2,000 in, 100 out), ~${turn:.4f}; conversation:" in proc.stderr
    # The second message took two model calls; the conversation adds up all three.
    assert (
        f"(4,200 tokens (4,000 in, 200 out), ~${2 * turn:.4f};"
        f" conversation: 6,300 tokens (6,000 in, 300 out), ~${3 * turn:.4f})"
    ) in proc.stderr


@pytest.mark.parametrize(
    ("agent", "error"),
    [
        ('tool_search = "sometimes"', 'agent.tool_search: must be true, false or "auto"'),
        ("max_result_tokens = 0", "agent.max_result_tokens: must be an integer >= 1"),
        ("max_results = 5", "max_results"),
    ],
)
def test_bad_agent_settings_are_one_line_config_errors(
    tmp_path: Path, agent: str, error: str
) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9", agent=f"[agent]\n{agent}")
    proc = cli_with_anthropic_key(tmp_path, config, "tools")
    assert proc.returncode != 0
    assert error in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
