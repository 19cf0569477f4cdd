"""Issue 22 section 3: a crash loses no audit line of an action that ran.

The real ``agenthost chat`` runs in a subprocess (stdin a pipe) against the hostile
server, makes identical tool calls or lets the server flood ``roots/list``, and is then
killed with SIGKILL: no close, no flush. Folding used to hold every repeat of a call in
memory until the fold window ended (60 s), so 50 identical calls left 1 in the file.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from agenthost_policies import read_audit
from tests.hostile.conftest import HOSTILE_SERVER

ROOTS = {"jsonrpc": "2.0", "id": 0, "method": "roots/list"}


class Chat:
    """``agenthost chat`` fed through a pipe; its stdout read line by line."""

    def __init__(self, tmp_path: Path) -> None:
        self.audit = tmp_path / "audit.jsonl"
        (tmp_path / "ws").mkdir()
        config = tmp_path / "agenthost.toml"
        config.write_text(
            f"""
[servers.bad]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(HOSTILE_SERVER))}]

[[workspaces]]
path = "ws"

[policy]
mode = "headless"
audit = "audit.jsonl"

[[policy.rules]]
kind = ["tool", "roots"]
server = "bad"
decision = "allow"
reason = "crash test"
"""
        )
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agenthost", "--config", str(config), "chat"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
            env=env,
            text=True,
        )

    @property
    def stdin(self) -> IO[str]:
        assert self.proc.stdin is not None
        return self.proc.stdin

    def send(self, line: str) -> None:
        self.stdin.write(line + "\n")
        self.stdin.flush()

    def read_line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"chat ended (exit {self.proc.poll()})"
        return line.rstrip("\n")

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        self.send(f"/call {tool} {shlex.quote(json.dumps(arguments))}")
        return self.read_line()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Chat]:
    session = Chat(tmp_path)
    try:
        yield session
    finally:
        if session.proc.poll() is None:
            session.kill()


def _accounted(records: list[dict[str, Any]], kind: str, event: str) -> int:
    """Lines of ``event`` for ``kind`` written, plus those folded into written counts."""
    shown = {r["id"] for r in records if r["kind"] == kind and r["event"] == event}
    folded: int = sum(
        r["count"]
        for r in records
        if r["event"] == "suppressed" and r["of"] == event and r["same_as"] in shown
    )
    return len(shown) + folded


@pytest.mark.timeout(60)
def test_sigkill_after_50_identical_tool_calls_loses_none(chat: Chat) -> None:
    for n in range(50):
        assert chat.call("bad__echo", {"message": "same"}) == "same", n
    chat.kill()
    records = [r for r in read_audit(chat.audit) if r["kind"] == "tool"]
    # Each call that ran has its own decision and outcome line: none held back to fold.
    assert _accounted(records, "tool", "decision") == 50
    assert _accounted(records, "tool", "outcome") == 50
    assert sum(1 for r in records if r["event"] == "decision") == 50
    assert sum(1 for r in records if r["event"] == "outcome") == 50


@pytest.mark.timeout(60)
def test_sigkill_after_a_roots_flood_loses_no_count_older_than_a_second(chat: Chat) -> None:
    """Repetitive asks still fold, and the count reaches the file within a second."""
    import time

    count = 5000
    flood = {"actions": [{"background": [{"send": ROOTS, "count": count}]}]}
    assert chat.call("bad__act", flood) == "ok"
    deadline = time.monotonic() + 30
    while True:
        stats = json.loads(chat.call("bad__stats", {}))
        if stats["responses"] + stats["errors"] == count or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    time.sleep(1.5)  # every count is due by now
    chat.kill()
    records = [r for r in read_audit(chat.audit) if r["kind"] == "roots"]
    answered = stats["responses"]
    assert answered > 100
    assert _accounted(records, "roots", "decision") == answered
    assert _accounted(records, "roots", "outcome") == answered
    assert len(records) < 100, len(records)  # still folded: not 2 lines per request
