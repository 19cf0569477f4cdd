"""Saved conversations (issue 27, section 2): ``run --session NAME``, ``chat --resume [NAME]``.

The CLI runs as a subprocess against a real server (tests/peers/many_tools_server.py) and
Anthropic's Messages API served on a local port (tests.helpers.MessagesServer).
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from agenthost.agent.history import history_from_json, history_to_json
from agenthost.agent.transcript import Transcript, TurnUsage
from agenthost_providers.base import (
    ImageContent,
    Message,
    TextContent,
    ToolReferenceContent,
    ToolResultContent,
    ToolUseContent,
)
from tests.forkserver import peer_python
from tests.helpers import MessagesServer, cli_with_anthropic_key

PEER = Path(__file__).parent / "peers" / "many_tools_server.py"

#: Generous: each test runs the CLI two or three times, slow on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(150)


def write_config(tmp_path: Path, base_url: str, *, server: bool = True) -> Path:
    path = tmp_path / "agenthost.toml"
    servers = (
        f"[servers.db]\ncommand = {json.dumps(peer_python())}\n"
        f'args = [{json.dumps(str(PEER))}, "db"]\n'
    )
    path.write_text(
        f"""{servers if server else ""}
[providers.anthropic]
kind = "anthropic"
base_url = "{base_url}"
max_retries = 0

[policy]
mode = "headless"
preset = "unsafe-allow-everything"
"""
    )
    return path


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def texts(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of every text block the model was sent."""
    out = []
    for message in body["messages"]:
        for block in message["content"]:
            if block["type"] == "text":
                out.append((message["role"], block["text"]))
    return out


def test_run_session_saves_privately_and_the_next_run_goes_on(tmp_path: Path) -> None:
    answers = [
        [{"type": "tool_use", "id": "t1", "name": "db__list_table", "input": {}}],
        text("There are two tables."),
        text("The first is users."),
    ]
    with MessagesServer(answers) as api:
        config = write_config(tmp_path, api.base_url)
        first = cli_with_anthropic_key(
            tmp_path, config, "run", "list the tables", "--session", "db-work", "--json"
        )
        second = cli_with_anthropic_key(
            tmp_path, config, "run", "which is first?", "--session", "db-work", "--json"
        )
        bodies = api.bodies
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    # The second run's request holds the first conversation, tool call and result included.
    assert texts(bodies[2]) == [
        ("user", "list the tables"),
        ("assistant", "There are two tables."),
        ("user", "which is first?"),
    ]
    kinds = [block["type"] for m in bodies[2]["messages"] for block in m["content"]]
    assert kinds.count("tool_use") == 1 and kinds.count("tool_result") == 1
    # Each run's --json is its own; the session adds them up.
    assert len(json.loads(second.stdout)["turns_usage"]) == 1
    path = tmp_path / "state" / "agenthost" / "sessions" / "db-work.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    saved = json.loads(path.read_text())
    assert len(saved["usage"]) == 3 and saved["version"] == 1


def test_chat_is_saved_and_resumed_by_name_or_as_the_latest(tmp_path: Path) -> None:
    answers = [text("Hello, Ada."), text("You are Ada."), text("Still Ada.")]
    with MessagesServer(answers) as api:
        config = write_config(tmp_path, api.base_url, server=False)  # the model is enough
        first = cli_with_anthropic_key(tmp_path, config, "chat", stdin="my name is Ada\n/quit\n")
        assert first.returncode == 0, first.stderr
        hint = next(line for line in first.stderr.splitlines() if "--resume" in line)
        name = hint.rsplit(" ", 1)[1].rstrip(")")
        assert name.startswith("chat-")
        latest = cli_with_anthropic_key(
            tmp_path, config, "chat", "--resume", stdin="who am I?\n/quit\n"
        )
        named = cli_with_anthropic_key(
            tmp_path, config, "chat", "--resume", name, stdin="and now?\n"
        )
        bodies = api.bodies
    assert latest.returncode == 0, latest.stderr
    assert named.returncode == 0, named.stderr
    assert f"(resumed {name}: 2 messages)" in latest.stderr
    assert texts(bodies[1]) == [
        ("user", "my name is Ada"),
        ("assistant", "Hello, Ada."),
        ("user", "who am I?"),
    ]
    assert texts(bodies[2])[-3:] == [
        ("user", "who am I?"),
        ("assistant", "You are Ada."),
        ("user", "and now?"),
    ]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("chat", "--resume", "nosuch"), "there is no saved conversation named nosuch"),
        (("chat", "--resume"), "there is no saved conversation to resume yet"),
        (("run", "x", "--session", "../escape"), "'../escape' is not a session name"),
        (("run", "x", "--session", "broken"), "session broken: "),
    ],
)
def test_session_errors_are_one_line(tmp_path: Path, args: tuple[str, ...], error: str) -> None:
    sessions = tmp_path / "state" / "agenthost" / "sessions"
    sessions.mkdir(parents=True)
    if "broken" in args:
        (sessions / "broken.json").write_text('{"version": 1, "messages": 7}')
    config = write_config(tmp_path, "http://127.0.0.1:9", server=False)
    proc = cli_with_anthropic_key(tmp_path, config, *args, stdin="")
    assert proc.returncode == 2, proc.stderr
    assert error in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_history_round_trips_every_content_kind() -> None:
    record = Transcript(task="t", provider="p", model="m")
    record.messages = [
        Message.user("hi", ImageContent(data="aGk=", mime_type="image/png")),
        Message.assistant("calling", ToolUseContent(id="u1", name="db__get_row", input={"a": 1})),
        Message(
            role="user",
            content=(
                ToolResultContent(
                    tool_use_id="u1",
                    content=(TextContent(text="ok"), ToolReferenceContent(tool_name="db__x")),
                    is_error=True,
                    structured_content={"k": [1, 2]},
                ),
            ),
        ),
    ]
    record.loaded_tools = ["db__x"]
    record.usage = [TurnUsage(model="m", input_tokens=5, output_tokens=2, cost_usd=0.25)]
    back = history_from_json(json.loads(json.dumps(history_to_json(record))))
    assert back.messages == record.messages
    assert back.loaded_tools == ["db__x"] and back.usage == record.usage
    assert (back.input_tokens, back.output_tokens) == (5, 2)
    with pytest.raises(ValueError, match=r"messages\[0\].content\[0\]: unknown content type"):
        history_from_json(
            {**history_to_json(record), "messages": [{"role": "user", "content": [{"type": "x"}]}]}
        )
