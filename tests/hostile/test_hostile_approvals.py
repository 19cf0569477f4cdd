"""Issue 22 section 3: a remembered "always" is bound to where the server runs.

The same command line is another program in another directory, with another ``PYTHONPATH``
or ``env_file``, or from another config scope (a project file). Each test answers "always"
in one place with a real server (tests/hostile/policy_peer.py, official SDK), then opens a
new host (a new session, the same approvals file) elsewhere: it must be asked again, told
what differs, and the first place must keep its answer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.config import config_from_mapping
from agenthost.config.model import ServerConfig
from agenthost_policies import Answer, ApprovalStore, CallbackPrompter, ConsentRequest, ToolCall
from tests.hostile.policy_helpers import PEER, agenthost_cli, host_with, peer, text_of


class Asker:
    """A user who answers every question with ``answer`` and remembers what was asked."""

    def __init__(self, answer: Answer = Answer.ALWAYS) -> None:
        self.answer = answer
        self.asked: list[ConsentRequest] = []

    async def confirm(self, request: ConsentRequest) -> Answer:
        self.asked.append(request)
        return self.answer


async def call_notes(
    approvals: Path, server: ServerConfig, answer: Answer = Answer.ALWAYS
) -> Asker:
    """One session: open a host on ``server`` and call its ``notes`` tool once."""
    user = Asker(answer)
    policy = {"mode": "programmatic", "preset": "ask-always", "approvals": str(approvals)}
    async with host_with([server], policy, prompter=CallbackPrompter(confirm=user.confirm)) as host:
        with trio.fail_after(30):
            result = await host.call_tool("p__notes", {})
    assert text_of(result) == "note 1: buy milk"
    return user


def changes(user: Asker) -> tuple[str, ...]:
    [request] = user.asked
    return request.changes


@pytest.mark.parametrize(
    ("elsewhere", "what"),
    [
        ({"cwd": "other"}, "working directory"),
        ({"env": {"PYTHONPATH": "attacker"}}, "environment (env, env_file, inherit_env)"),
        ({"scope": "project:/home/user/cloned/.mcp.json"}, "config scope"),
    ],
)
async def test_always_does_not_carry_over_to_another_place(
    tmp_path: Path, elsewhere: dict[str, Any], what: str
) -> None:
    """Before: the second place ran the tool without asking (one question in all)."""
    approvals = tmp_path / "approvals.json"
    for sub in ("home", "other", "attacker"):
        (tmp_path / sub).mkdir()
    here: dict[str, Any] = {"cwd": str(tmp_path / "home")}
    there: dict[str, Any] = {**here, **elsewhere}
    if "cwd" in elsewhere:
        there["cwd"] = str(tmp_path / "other")
    if "env" in elsewhere:
        there["env"] = {"PYTHONPATH": str(tmp_path / "attacker")}
    assert len((await call_notes(approvals, peer(**here))).asked) == 1
    assert changes(await call_notes(approvals, peer(**there))) == (what,)
    # Both answers are kept, side by side: neither place is asked again.
    assert (await call_notes(approvals, peer(**here))).asked == []
    assert (await call_notes(approvals, peer(**there))).asked == []
    assert str(tmp_path / "attacker") not in approvals.read_text(encoding="utf-8")


async def test_no_cwd_means_the_host_s_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server without ``cwd`` runs in the host's directory: ``python server.py`` started
    from another project is another program."""
    approvals = tmp_path / "approvals.json"
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    monkeypatch.chdir(tmp_path / "a")
    await call_notes(approvals, peer())
    assert (await call_notes(approvals, peer())).asked == []
    monkeypatch.chdir(tmp_path / "b")
    assert changes(await call_notes(approvals, peer())) == ("working directory",)


async def test_env_file_content_is_part_of_the_environment(tmp_path: Path) -> None:
    """``env_file`` values reach the server as ``env`` does: a changed file is another
    environment. Only a digest is kept."""
    approvals = tmp_path / "approvals.json"
    env_file = tmp_path / "server.env"

    def server() -> ServerConfig:
        data = {
            "servers": {
                "p": {
                    "command": sys.executable,
                    "args": [str(PEER)],
                    "env_file": str(env_file),
                    "protocol": "legacy",
                }
            }
        }
        [config] = config_from_mapping(data, source=str(tmp_path / "agenthost.toml")).servers
        return config

    env_file.write_text("SECRET_TOKEN=hunter2-one\n", encoding="utf-8")
    await call_notes(approvals, server())
    assert (await call_notes(approvals, server())).asked == []
    env_file.write_text("SECRET_TOKEN=hunter2-two\n", encoding="utf-8")
    assert changes(await call_notes(approvals, server())) == (
        "environment (env, env_file, inherit_env)",
    )
    assert "hunter2" not in approvals.read_text(encoding="utf-8")


async def test_an_entry_from_before_the_binding_is_asked_again_and_kept(tmp_path: Path) -> None:
    """An "always" written by the previous version recorded only the command line: it
    cannot prove the directory, environment or scope, so it grants nothing; a "never" of
    that age still stands. Neither is lost or rewritten."""
    approvals = tmp_path / "approvals.json"
    (tmp_path / "home").mkdir()
    server = peer(cwd=str(tmp_path / "home"))
    await call_notes(approvals, server)
    [entry] = json.loads(approvals.read_bytes())["approvals"]
    # What the previous version wrote: the same digests, without the new parts and keys.
    old = {k: v for k, v in entry.items() if k not in ("binding", "scope", "cwd")}
    old["definition"] = {
        k: v for k, v in entry["definition"].items() if k not in ("cwd", "env", "scope")
    }
    old_never = {**old, "name": "rug_pull", "decision": "deny"}
    approvals.write_text(
        json.dumps({"version": 1, "approvals": [old, old_never]}, indent=2), encoding="utf-8"
    )
    user = await call_notes(approvals, server)
    assert changes(user) == (
        "working directory not recorded with the answer",
        "environment (env, env_file, inherit_env) not recorded with the answer",
        "config scope not recorded with the answer",
    )
    kept = json.loads(approvals.read_bytes())["approvals"]
    assert old in kept and old_never in kept and len(kept) == 3  # the new answer beside
    assert (await call_notes(approvals, server)).asked == []
    action = user.asked[0].action
    assert isinstance(action, ToolCall) and action.definition is not None
    never = ApprovalStore(approvals).get("tool", "p", "rug_pull", binding=action.definition.binding)
    assert never is not None and never.decision == "deny"


async def test_approvals_list_says_where_each_answer_holds(tmp_path: Path) -> None:
    """``agenthost approvals`` (the CLI, as a subprocess) shows one row per place."""
    approvals = tmp_path / "approvals.json"
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    await call_notes(approvals, peer(cwd=str(tmp_path / "a")))
    await call_notes(approvals, peer(cwd=str(tmp_path / "b"), scope="project:/x/.mcp.json"))
    config = tmp_path / "agenthost.toml"
    config.write_text(f"[policy]\napprovals = {json.dumps(str(approvals))}\n", encoding="utf-8")
    listed = agenthost_cli(config, "approvals")
    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stdout.splitlines() if "notes" in line]
    assert len(rows) == 2, listed.stdout
    real = tmp_path.resolve()
    assert f"user in {real / 'a'}" in rows[0]
    assert f"project:/x/.mcp.json in {real / 'b'}" in rows[1]
