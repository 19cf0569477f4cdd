"""Issue 22 section 1, on a terminal: the summary and one question, trust / not now / never."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pexpect

from tests.security.conftest import Repo

QUESTION = "[t]rust / [n]ot now / ne[v]er"


def _spawn(repo: Repo, *args: str) -> pexpect.spawn[str]:
    return pexpect.spawn(
        sys.executable,
        ["-m", "agenthost", *args],
        env={**repo.env, "TERM": "dumb"},
        cwd=str(repo.root),
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 200),
    )


def _finish(child: pexpect.spawn[str]) -> int:
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None
    return child.exitstatus


def test_the_question_on_a_terminal(tmp_path: Path) -> None:
    repo = Repo(tmp_path, ".mcp.json")
    try:
        # "not now": refused, nothing ran, nothing recorded.
        child = _spawn(repo, "tools")
        child.expect_exact("would:")
        child.expect_exact("minimal_server.py")
        child.expect_exact(QUESTION)
        assert not repo.ran()  # nothing runs while the question waits
        child.sendline("n")
        assert _finish(child) == 2
        assert not repo.ran()
        listed = repo.run("trust", "--list", "--json")
        assert json.loads(listed.stdout)["projects"] == []

        # "never": recorded; the next run is refused without asking, saying how to undo.
        child = _spawn(repo, "tools")
        child.expect_exact(QUESTION)
        child.sendline("v")
        assert _finish(child) == 2
        child = _spawn(repo, "servers")
        child.expect_exact("never to trust")
        child.expect_exact("agenthost trust --revoke")
        assert _finish(child) == 2
        assert QUESTION not in (child.before or "")
        assert not repo.ran()

        # Revoked, then "trust": it runs, and the next run does not ask.
        assert repo.run("trust", "--revoke").returncode == 0
        child = _spawn(repo, "tools")
        child.expect_exact(QUESTION)
        child.sendline("t")
        child.expect_exact("local__echo")
        _finish(child)
        assert repo.marker.exists()
        repo.reset()
        proc = repo.run("servers")  # stdin not a terminal: no question needed now
        assert "not trusted" not in proc.stderr
        assert repo.marker.exists()
    finally:
        repo.listener.close()
