"""Issue 22 section 1: a project config is not loaded at all until the user trusts it.

Every test drives the CLI as a subprocess in a temporary home, in a hostile repository
(see conftest.py), for each of the four file names agenthost discovers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.security.conftest import SECRET, Repo, file_text

#: Every command that loads the config, with the arguments it needs.
COMMANDS: list[list[str]] = [
    ["tools"],
    ["servers"],
    ["check"],
    ["prompts"],
    ["resources"],
    ["chat"],
    ["run", "hi"],
    ["call", "local__echo", '{"message": "x"}'],
    ["serve"],
    ["skills"],
    ["read", "file:///etc/passwd"],
    ["prompt", "local", "p"],
    ["tasks", "list", "local"],
    ["audit"],
    ["approvals"],
    ["models"],
    ["auth", "status"],
]


def _refused(repo: Repo, proc: object) -> None:
    import subprocess

    assert isinstance(proc, subprocess.CompletedProcess)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "not trusted" in proc.stderr, proc.stderr
    assert str(repo.config) in proc.stderr or repo.name in proc.stderr
    assert "agenthost trust" in proc.stderr and "--trust-project" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert not repo.ran(), "a server of the untrusted file was started or contacted"


@pytest.mark.timeout(240)
def test_every_command_refuses_an_untrusted_project_file(repo: Repo) -> None:
    before = repo.files()
    for command in COMMANDS:
        proc = repo.run(*command)
        _refused(repo, proc)
    assert repo.files() == before, "an untrusted run wrote a file"
    # ${SOME_SECRET} is not expanded: unset, the refusal is the same (not "is not set").
    repo.env = {k: v for k, v in repo.env.items() if k != "SOME_SECRET"}
    proc = repo.run("tools")
    _refused(repo, proc)
    assert "is not set" not in proc.stderr


def test_check_shows_what_the_file_would_do_and_starts_nothing(repo: Repo) -> None:
    proc = repo.run("check")
    _refused(repo, proc)
    out = proc.stdout
    assert "untrusted" in out
    assert "bench/minimal_server.py" in out  # the command line
    assert f"127.0.0.1:{repo.listener.port}/mcp" in out  # the URL
    assert "SOME_SECRET" in out  # the variable it would expand
    assert "TOKEN" in out and "Authorization" in out  # env and header keys, never values


def test_trust_then_it_runs_then_a_one_byte_change_is_refused(repo: Repo) -> None:
    trusted = repo.run("trust")
    assert trusted.returncode == 0, trusted.stderr
    assert "bench/minimal_server.py" in trusted.stdout  # the summary it consented to
    assert not repo.ran()  # trusting starts nothing
    ran = repo.run("tools", "--json")
    assert repo.marker.exists(), ran.stderr  # the stdio server ran
    assert repo.listener.connections > 0  # the URL server was contacted
    assert "local__echo" in ran.stdout
    repo.reset()

    repo.config.write_bytes(repo.config.read_bytes() + b"\n")  # one byte
    proc = repo.run("tools")
    _refused(repo, proc)
    assert "changed" in proc.stderr

    # Trusting again shows what changed and records the new bytes.
    again = repo.run("trust")
    assert again.returncode == 0, again.stderr
    assert "changed" in again.stdout
    repo.config.write_text(file_text(repo.name, {**repo.servers, "extra": {"command": "true"}}))
    proc = repo.run("tools")
    _refused(repo, proc)
    assert "server extra added" in proc.stderr


def test_trust_project_option_and_variable_trust_one_run_only(repo: Repo) -> None:
    for how in (["--trust-project", "tools"], ["tools", "--trust-project"]):
        proc = repo.run(*how)
        assert repo.marker.exists(), proc.stderr
        repo.reset()
        _refused(repo, repo.run("tools"))
    proc = repo.run("tools", env={"AGENTHOST_TRUST_PROJECT": "1"})
    assert repo.marker.exists(), proc.stderr
    repo.reset()
    _refused(repo, repo.run("tools"))
    listed = repo.run("trust", "--list", "--json")
    assert json.loads(listed.stdout)["projects"] == []  # nothing was recorded


def test_revoke_makes_it_untrusted_again(repo: Repo) -> None:
    assert repo.run("trust").returncode == 0
    listed = json.loads(repo.run("trust", "--list", "--json").stdout)["projects"]
    assert [p["path"] for p in listed] == [str(repo.config.resolve())]
    assert listed[0]["decision"] == "trust"
    revoked = repo.run("trust", "--revoke")
    assert revoked.returncode == 0, revoked.stderr
    _refused(repo, repo.run("servers"))


def test_a_change_to_an_imported_file_is_refused(tmp_path: Path) -> None:
    repo = Repo(tmp_path, "agenthost.toml")
    try:
        imported = repo.root / "more.json"
        imported.write_text(json.dumps({"mcpServers": {"more": {"command": "true"}}}))
        repo.config.write_text('import = ["more.json"]\n' + repo.config.read_text())
        trusted = repo.run("trust")
        assert trusted.returncode == 0, trusted.stderr
        assert "more" in trusted.stdout and "from" in trusted.stdout
        imported.write_bytes(imported.read_bytes() + b" ")
        proc = repo.run("servers")
        _refused(repo, proc)
        assert f"{imported.resolve()} changed" in proc.stderr
    finally:
        repo.listener.close()


def test_the_trust_store_is_private(tmp_path: Path) -> None:
    repo = Repo(tmp_path, ".mcp.json")
    try:
        assert repo.run("trust").returncode == 0
        store = repo.home / ".local" / "state" / "agenthost" / "trusted-projects.json"
        assert store.stat().st_mode & 0o777 == 0o600
        assert store.parent.stat().st_mode & 0o777 == 0o700
    finally:
        repo.listener.close()


def test_the_summary_escapes_what_the_file_says(tmp_path: Path) -> None:
    """The summary is the file's text on the user's terminal: no escape sequence gets out."""
    repo = Repo(tmp_path, ".mcp.json")
    try:
        hostile = {
            "mcpServers": {
                "x\x1b[2Jy": {"command": "sh\x1b]52;c;aGk=\x07", "args": []},
                "r": {"url": "https://me:hunter2@h.example/mcp?token=abc123"},
            }
        }
        repo.config.write_text(json.dumps(hostile))
        proc = repo.run("check")
        assert proc.returncode == 2, proc.stderr
        assert "\x1b" not in proc.stdout + proc.stderr
        assert "hunter2" not in proc.stdout and "abc123" not in proc.stdout  # literal secrets
        assert "h.example/mcp" in proc.stdout
        assert "x\\x1b[2Jy" in proc.stdout
        assert "sh\\x1b]52;c;aGk=\\x07" in proc.stdout
    finally:
        repo.listener.close()


def test_a_damaged_trust_store_is_a_one_line_error(tmp_path: Path) -> None:
    repo = Repo(tmp_path, ".mcp.json")
    try:
        store = repo.home / ".local" / "state" / "agenthost" / "trusted-projects.json"
        store.parent.mkdir(parents=True)
        store.write_text("{not json")
        for args in (["tools"], ["trust"], ["trust", "--list"]):
            proc = repo.run(*args)
            assert proc.returncode == 2, proc.stderr
            assert "trust store is not valid" in proc.stderr
            assert "Traceback" not in proc.stderr
        assert store.read_text() == "{not json"  # never overwritten
        assert not repo.ran()
    finally:
        repo.listener.close()


def test_project_servers_carry_their_scope(tmp_path: Path) -> None:
    """Approvals are bound to ``ServerConfig.scope``: a project's servers say which file."""
    from agenthost.config import load_scoped
    from agenthost.config.trust import inspect_project
    from agenthost.errors import UntrustedConfig

    repo = Repo(tmp_path, ".vscode/mcp.json")
    try:
        user = tmp_path / "user.toml"
        user.write_text('[servers.mine]\ncommand = "true"\n')
        env = {"SOME_SECRET": "x"}
        with pytest.raises(UntrustedConfig):
            load_scoped(user=user, project=repo.config, trusted_digest=None, env=env)
        with pytest.raises(UntrustedConfig):
            load_scoped(user=user, project=repo.config, trusted_digest="0" * 64, env=env)
        digest = inspect_project(repo.config).digest
        config = load_scoped(user=user, project=repo.config, trusted_digest=digest, env=env)
        scopes = {s.name: s.scope for s in config.servers}
        assert scopes == {
            "mine": "user",
            "local": f"project:{repo.config.resolve()}",
            "remote": f"project:{repo.config.resolve()}",
        }
    finally:
        repo.listener.close()
