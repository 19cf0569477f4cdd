"""Issue 22 section 3: ``agenthost chat`` on a real pseudo-terminal with a slow server.

The hostile server answers ``completion/complete`` only after 15 s and records every
message it receives, so the test sees exactly which arguments ``prompts/get`` carried.
``/prompt`` with a missing argument used to wait for that completion (the REPL stuck),
then take what the user had typed meanwhile as the argument; Ctrl-C ended the chat.
The history file used to be created 0644.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.helpers import CHAT_READY as READY
from tests.helpers import CHAT_TIMEOUT as TIMEOUT
from tests.helpers import spawn_chat
from tests.hostile.conftest import HOSTILE_SERVER

#: prompt_toolkit turns bracketed paste on each time the prompt starts: ready for input.
#: The server's delay: far longer than the host may wait for a completion.
SLOW = 15.0


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[[], pexpect.spawn[str]]]:
    """Starts ``agenthost chat`` on a terminal, ready for input (closed at the end)."""
    record = tmp_path / "received.jsonl"
    server = {
        "prompt_arguments": [{"name": "who", "required": True}],
        "completion": {"values": ["alice"], "sleep": SLOW},
        "record": str(record),
    }
    config = tmp_path / "agenthost.toml"
    config.write_text(
        f"""
[servers.bad]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(HOSTILE_SERVER))}, {json.dumps(json.dumps(server))}]

[policy]
mode = "headless"

[[policy.rules]]
kind = "prompt"
server = "bad"
decision = "allow"
"""
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1")
    spawned: list[pexpect.spawn[str]] = []

    def spawn() -> pexpect.spawn[str]:
        child = spawn_chat(config, env=env, cwd=tmp_path)
        spawned.append(child)
        return child

    yield spawn
    for child in spawned:
        child.close(force=True)


@pytest.fixture
def chat(
    start: Callable[[], pexpect.spawn[str]], tmp_path: Path
) -> tuple[pexpect.spawn[str], Path]:
    return start(), tmp_path / "received.jsonl"


def _received(record: Path, method: str) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    messages = [json.loads(line) for line in record.read_text().splitlines()]
    return [m for m in messages if m.get("method") == method]


@pytest.mark.timeout(120)
def test_prompt_question_is_bounded_and_answered_only_by_what_follows_it(
    chat: tuple[pexpect.spawn[str], Path],
) -> None:
    child, record = chat
    start = time.monotonic()
    child.send("/prompt bad p\r")
    child.send("typed while waiting\r")  # before the question: not its answer
    # The question comes within the completion limit (3 s), not when the server answers;
    # what was typed before it is dropped, and the user is told.
    child.expect(r"\(ignored what was typed before the question\)", timeout=SLOW - 5)
    child.expect_exact(READY)
    child.expect("who:")
    assert time.monotonic() - start < SLOW - 5
    child.send("bob\r")
    child.expect("added prompt bad/p")
    child.expect_exact(READY)
    gets = _received(record, "prompts/get")
    assert [g["params"]["arguments"] for g in gets] == [{"who": "bob"}]


@pytest.mark.timeout(120)
def test_ctrl_c_cancels_the_completion_and_the_chat_goes_on(
    chat: tuple[pexpect.spawn[str], Path],
) -> None:
    child, record = chat
    child.send("/prompt bad p\r")
    deadline = time.monotonic() + TIMEOUT
    while not _received(record, "completion/complete"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child.send("\x03")
    child.expect(r"\(cancelled\)")
    child.expect_exact(READY)
    child.send("/servers\r")
    child.expect("ready")
    child.expect_exact(READY)
    assert child.isalive()
    assert _received(record, "prompts/get") == []


@pytest.mark.timeout(60)
def test_history_is_private_even_when_it_was_not(
    start: Callable[[], pexpect.spawn[str]],
) -> None:
    child = start()
    history = Path(os.environ["XDG_STATE_HOME"]) / "agenthost" / "chat_history"
    child.send("/servers\r")
    child.expect("ready")
    child.expect_exact(READY)
    child.sendeof()
    child.expect(pexpect.EOF)
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert stat.S_IMODE(history.parent.stat().st_mode) == 0o700
    assert "/servers" in history.read_text()
    # An existing file and directory made by an older version are fixed on the next start.
    os.chmod(history, 0o644)
    os.chmod(history.parent, 0o755)
    again = start()
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert stat.S_IMODE(history.parent.stat().st_mode) == 0o700
    again.sendeof()
    again.expect(pexpect.EOF)
