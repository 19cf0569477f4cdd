"""Issue 22 section 4: first-hour defects about consent and roots, through the real CLI.

Each test runs ``agenthost`` as a subprocess, in a project folder of its own with a home
of its own, against real peers (the Node reference filesystem server, the official SDK
server), as a new user meets them:

* ``--config`` naming Claude Desktop's file must not make that file's folder the servers'
  root: the filesystem server would lose the directory it was configured with and could
  read the file that holds the other servers' secrets.
* A consent "ask" with no terminal on stdin has nobody to answer it: it is denied as such
  (said, and audited with its own ``by``), not reported as the user's answer.
* A policy rule may name a tool as listings show it (``fs__read_text_file``); a rule that
  can match nothing (a server that is not configured) is warned about at startup.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import peer_python

Command = tuple[str, list[str]]
AGENTHOST = [peer_python(), "-m", "agenthost"]
#: Several agenthost processes per test, each starting a real server: ~10 s alone on the
#: 2-core machine, several times that under a full parallel run.
pytestmark = pytest.mark.timeout(180)

ALLOW_FS = 'mode = "headless"\n[[rules]]\nkind = ["tool", "roots"]\ndecision = "allow"\n'


class Project:
    """A project folder to run ``agenthost`` in, with its own empty home directory."""

    def __init__(self, root: Path) -> None:
        self.root = root / "project"
        self.root.mkdir()
        self.home = root / "home"
        self.home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        self.env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
        )

    def run(
        self, *args: str, stdin: str | None = "", timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """``agenthost ARGS`` in the project folder; stdin is a pipe (not a terminal).

        The folder's ``agenthost.toml`` is named with ``--config`` (the user's own choice):
        these tests set user-only keys (policy mode, policy file), which a discovered
        project file may not (tests/security)."""
        own = self.root / "agenthost.toml"
        if "--config" not in args and own.exists():
            args = ("--config", str(own), *args)
        return subprocess.run(
            [*AGENTHOST, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            env=self.env,
        )


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def stdio_entry(cmd: Command) -> dict[str, Any]:
    return {"command": cmd[0], "args": cmd[1]}


# ----------------------------------------------------------------------------- roots


def test_claude_desktop_config_folder_is_never_the_root(
    project: Project, filesystem_cmd: Callable[..., Command]
) -> None:
    """The filesystem server keeps its own directory and cannot read the Claude config."""
    claude_dir = project.home / "Library" / "Application Support" / "Claude"
    claude_dir.mkdir(parents=True)
    desktop = claude_dir / "claude_desktop_config.json"
    desktop.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "fs": stdio_entry(filesystem_cmd(project.root)),
                    "github": {
                        "command": "true",
                        "env": {"GITHUB_TOKEN": "ghp_secret123"},
                        "disabled": True,
                    },
                }
            }
        )
    )
    (project.root / "notes.txt").write_text("hello from the project\n")
    policy = project.root.parent / "policy.toml"
    policy.write_text(ALLOW_FS)
    base = ("--config", str(desktop), "--policy", str(policy))

    listed = project.run(*base, "servers", "--json")
    roots = {s["name"]: s["roots"] for s in json.loads(listed.stdout)}
    assert roots["fs"] == [project.root.resolve().as_uri()], listed.stderr

    own = project.run(
        *base, "call", "fs__read_text_file", json.dumps({"path": str(project.root / "notes.txt")})
    )
    assert own.returncode == 0, own.stdout + own.stderr
    assert "hello from the project" in own.stdout

    secret = project.run(*base, "call", "fs__read_text_file", json.dumps({"path": str(desktop)}))
    assert secret.returncode == 1, secret.stdout + secret.stderr
    assert "ghp_secret123" not in secret.stdout + secret.stderr
    assert "denied" in (secret.stdout + secret.stderr).lower()


# ----------------------------------------------------------------------------- no terminal


def read_audit(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("typed", ["", "y\n"])
def test_an_ask_without_a_terminal_is_not_a_users_answer(
    project: Project, sdk_server_cmd: Callable[..., Command], typed: str
) -> None:
    """stdin a pipe: nothing is asked or printed, the deny says why, the audit says who.

    A "y" in the pipe does not approve: a pipe is not a person.
    """
    cmd, args = sdk_server_cmd()
    audit = project.root / "audit.jsonl"
    (project.root / "agenthost.toml").write_text(
        f"[servers.sdk]\ncommand = {json.dumps(cmd)}\nargs = {json.dumps(args)}\n"
        f'[policy]\nmode = "interactive"\naudit = {json.dumps(str(audit))}\n'
    )
    proc = project.run("call", "sdk__echo", '{"message": "hi"}', stdin=typed)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "no terminal to ask: denied" in proc.stderr
    assert "--policy" in proc.stderr
    assert "answered" not in proc.stderr
    assert "consent needed" not in proc.stderr and "Allow?" not in proc.stderr
    assert "hi" not in proc.stdout
    (line,) = [r for r in read_audit(audit) if r["event"] == "decision" and r["kind"] == "tool"]
    assert (line["decision"], line["by"]) == ("deny", "no-terminal")
    assert line["reason"].startswith("no terminal to ask: denied")


# ----------------------------------------------------------------------------- rule names


def test_a_rule_may_name_a_tool_as_listings_show_it(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    """``sdk__echo`` in a rule is sdk's echo: allowed; a listed name of another server is not."""
    cmd, args = sdk_server_cmd()
    (project.root / "agenthost.toml").write_text(
        f"[servers.sdk]\ncommand = {json.dumps(cmd)}\nargs = {json.dumps(args)}\n"
        '[policy]\nmode = "headless"\npreset = "none"\n'
        '[[policy.rules]]\nkind = "tool"\nname = "sdk__echo"\ndecision = "allow"\n'
        '[[policy.rules]]\nkind = "tool"\nname = "sdk__add*"\ndecision = "deny"\n'
        'reason = "listed glob"\n'
    )
    allowed = project.run("call", "sdk__echo", '{"message": "through the listed name"}')
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "through the listed name" in allowed.stdout
    assert "can match nothing" not in allowed.stderr
    denied = project.run("call", "sdk__add", '{"a": 1, "b": 2}')
    assert denied.returncode == 3, denied.stdout + denied.stderr
    assert "listed glob" in denied.stderr


def test_rules_that_can_match_nothing_are_warned_about_at_startup(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    """One line per such rule, naming it and its file; none for rules that can match."""
    cmd, args = sdk_server_cmd()
    server = f"command = {json.dumps(cmd)}\nargs = {json.dumps(args)}\n"
    (project.root / "agenthost.toml").write_text(
        f'[servers.sdk]\n{server}[servers.other]\n{server}[policy]\nfile = "policy.toml"\n'
    )
    policy = project.root / "policy.toml"
    policy.write_text(
        'mode = "headless"\n'
        '[[rules]]\nkind = "tool"\nserver = "gihub"\ndecision = "deny"\n'
        '[[rules]]\nid = "issues"\nkind = "tool"\nname = "github__create_issue"\n'
        'decision = "allow"\n'
        '[[rules]]\nkind = "tool"\nserver = "sdk"\nname = "other__echo"\ndecision = "allow"\n'
        '[[rules]]\nkind = ["tool", "prompt"]\nserver = "other"\ndecision = "allow"\n'
        '[[rules]]\nkind = "tool"\nname = ["sdk__echo", "*__add"]\ndecision = "allow"\n'
    )
    proc = project.run("tools")
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stderr.splitlines() if "can match nothing" in line]
    assert warned == [
        f"WARNING agenthost.host: {policy}: policy rule policy.rules[0] can match nothing:"
        " server 'gihub' is not configured (configured: sdk, other)",
        f"WARNING agenthost.host: {policy}: policy rule issues can match nothing:"
        " tool 'github__create_issue' names a server that is not configured"
        " (configured: sdk, other)",
        f"WARNING agenthost.host: {policy}: policy rule policy.rules[2] can match nothing:"
        " tool 'other__echo' is not on a server the rule's server 'sdk' matches",
    ], proc.stderr
    # A command that starts one server: the others are still configured, so the rule for
    # `other` (rules[3]) is not warned about; the same three are.
    one = project.run("prompt", "sdk", "simple")
    assert one.returncode == 0, one.stderr
    assert [line for line in one.stderr.splitlines() if "can match nothing" in line] == warned
