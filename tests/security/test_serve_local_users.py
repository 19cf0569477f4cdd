"""Another local user against ``agenthost serve --http`` on loopback (the default bind).

Loopback is every local user's: without authentication another user used the owner's
filesystem server, read a 0600 file through it, and answered the owner's consent form
"always" (written into the owner's approvals file). Here the client
(other_user_client.py) runs as ``nobody`` (setpriv) against the real gateway, which
fronts the real filesystem server with an "ask" rule; the owner's client, with the token
the gateway keeps in the owner's state directory, is the positive control.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import filesystem_cmd
from tests.helpers import AGENTHOST_COLD, serving_http

pytestmark = pytest.mark.timeout(180)

CLIENT = Path(__file__).with_name("other_user_client.py")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
SECRET = "the owner's diary, mode 0600"
needs_another_user = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="runs a client as another uid: needs root and setpriv",
)


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and k != "AGENTHOST_SERVE_TOKEN"
    }
    env.update(extra)
    return env


def _project(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(config, the secret file, the approvals file): the filesystem server on a private
    folder, every tool asked about."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    secret = private / "diary.txt"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    approvals = tmp_path / "approvals.json"
    command, args = filesystem_cmd(private)
    config = tmp_path / "agenthost.toml"
    config.write_text(
        f"workspaces = [{json.dumps(str(private))}]\n\n"
        f"[servers.fs]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n\n"
        f"[policy]\napprovals = {json.dumps(str(approvals))}\n"
        f"audit = {json.dumps(str(tmp_path / 'audit.jsonl'))}\n"
        'rules = [{ kind = "tool", decision = "ask", server = "*", name = "*" }]\n'
    )
    return config, secret, approvals


def _client(url: str, secret: Path, answer: str, *, as_other: bool, **env: str) -> dict[str, Any]:
    prefix = NOBODY if as_other else []
    proc = subprocess.run(
        [*prefix, sys.executable, str(CLIENT), url, str(secret), answer],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(**env),
        cwd="/",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen: dict[str, Any] = json.loads(proc.stdout)
    return seen


def _token_file(hint: str) -> Path:
    found = re.search(r"<the token in (\S+)>", hint)
    assert found, hint
    return Path(found.group(1))


@needs_another_user
def test_another_user_gets_401_and_cannot_answer_or_call(tmp_path: Path) -> None:
    config, secret, approvals = _project(tmp_path)
    with serving_http(config, env=_env()) as served:
        theirs = _client(served.url, secret, "always", as_other=True)
        assert (theirs["initialize"], theirs["call"], theirs["answer"]) == (401, 401, 401)
        assert theirs["form"] is False and theirs["text"] is None
        assert not approvals.exists()  # nothing answered "always" for the owner

        token_file = _token_file(served.next_line())
        token = token_file.read_text().strip()
        # The path and a command that reads it are shown, never the token itself.
        assert token not in "".join(served.lines)
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        peek = subprocess.run([*NOBODY, "cat", str(token_file)], capture_output=True, timeout=30)
        assert peek.returncode != 0 and token.encode() not in peek.stdout

        # Positive control: the owner's client, with the token from the file, gets the
        # form, answers it, and reads the file.
        mine = _client(
            served.url, secret, "allow once", as_other=False, AGENTHOST_SERVE_TOKEN=token
        )
        assert mine["initialize"] == 200 and mine["form"] is True
        assert SECRET in mine["text"]


@needs_another_user
def test_with_no_auth_the_other_user_gets_in(tmp_path: Path) -> None:
    """``--no-auth`` is the user's explicit choice, with a warning: then loopback is open
    to every local user (what this test's client shows, so the 401 above is the token's)."""
    config, secret, _ = _project(tmp_path)
    with serving_http(config, "--no-auth", env=_env()) as served:
        assert "without authentication" in served.next_line()
        theirs = _client(served.url, secret, "allow once", as_other=True)
    assert theirs["initialize"] == 200 and theirs["form"] is True
    assert SECRET in theirs["text"]


#: Another user's listener on a loopback port: it prints the port, then records what a
#: client sends it (an impostor: a client set up for that address gives it its token).
IMPOSTOR = """
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(4)
print(s.getsockname()[1], flush=True)
s.settimeout(60)
conn, _ = s.accept()
conn.settimeout(10)
sys.stdout.write(conn.recv(65536).decode("latin-1"))
"""


@needs_another_user
def test_a_port_another_user_holds_is_named_not_a_traceback(tmp_path: Path) -> None:
    """Another user bound the port first: serve cannot listen there. It says so in one
    line naming that user and the risk (a client set up for the address sends them the
    token), never a traceback, and never the token."""
    config, _, _ = _project(tmp_path)
    impostor = subprocess.Popen(
        [*NOBODY, sys.executable, "-c", IMPOSTOR],
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    try:
        assert impostor.stdout is not None
        port = int(impostor.stdout.readline())
        env = _env(XDG_STATE_HOME=str(tmp_path / "state"))
        proc = subprocess.run(
            [*AGENTHOST_COLD, "--config", str(config), "serve", "--http", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        token = (tmp_path / "state" / "agenthost" / "serve-token").read_text().strip()
        assert proc.returncode != 0
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        problem = [line for line in proc.stderr.splitlines() if line.startswith("agenthost:")]
        assert len(problem) == 1, proc.stderr[-3000:]
        assert f"127.0.0.1:{port}" in problem[0] and "uid 65534" in problem[0], problem
        assert token not in proc.stderr + proc.stdout
        # Positive control: the impostor does get the token of a client that connects.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            client.sendall(f"POST /mcp HTTP/1.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
        seen, _ = impostor.communicate(timeout=30)
        assert f"Bearer {token}" in seen
    finally:
        if impostor.poll() is None:
            impostor.kill()
            impostor.wait()


@needs_another_user
def test_a_folder_link_another_user_planted_is_refused(tmp_path: Path) -> None:
    """``XDG_STATE_HOME`` in a shared sticky folder, where another user planted
    ``agenthost`` as a symlink to a folder of the owner's (theirs to re-point later): the
    token is not made through it. Positive control: the owner's own link is followed."""
    config, _, _ = _project(tmp_path)
    # Under /tmp itself: pytest's own folder is the owner's alone.
    shared = Path(tempfile.mkdtemp(prefix="agenthost-shared-"))
    shared.chmod(0o1777)
    try:
        _planted_link(config, shared, tmp_path / "mine")
    finally:
        shutil.rmtree(shared)


@needs_another_user
def test_a_token_folder_another_user_owns_says_what_the_owner_can_do(tmp_path: Path) -> None:
    """The state folder ``agenthost`` in a shared sticky folder was made by another user:
    refused, and the line says what the user can do (another XDG_STATE_HOME, or its owner
    removes it), not ``chmod 700``, which only its owner may run. Positive control: once
    the folder is gone, serve makes its own."""
    config, _, _ = _project(tmp_path)
    shared = Path(tempfile.mkdtemp(prefix="agenthost-shared-"))
    shared.chmod(0o1777)
    try:
        made = subprocess.run([*NOBODY, "mkdir", "-m", "755", str(shared / "agenthost")])
        assert made.returncode == 0
        env = _env(XDG_STATE_HOME=str(shared))
        argv = [*AGENTHOST_COLD, "--config", str(config), "serve", "--http", "127.0.0.1:0"]
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, env=env, stdin=subprocess.DEVNULL
        )
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        line = proc.stderr.strip()
        assert len(line.splitlines()) == 1, line
        assert "another user" in line and "XDG_STATE_HOME" in line and "chmod" not in line
        (shared / "agenthost").rmdir()
        with serving_http(config, env=env) as served:
            assert _token_file(served.next_line()) == shared / "agenthost" / "serve-token"
    finally:
        shutil.rmtree(shared)


def _planted_link(config: Path, shared: Path, target: Path) -> None:
    target.mkdir(mode=0o755)
    planted = subprocess.run(
        [*NOBODY, "ln", "-s", str(target), str(shared / "agenthost")], timeout=30
    )
    assert planted.returncode == 0
    env = _env(XDG_STATE_HOME=str(shared))
    argv = [*AGENTHOST_COLD, "--config", str(config), "serve", "--http", "127.0.0.1:0"]
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=30, env=env, stdin=subprocess.DEVNULL
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "serving MCP" not in proc.stderr
    assert not (target / "serve-token").exists()
    (shared / "agenthost").unlink()
    (shared / "agenthost").symlink_to(target)
    with serving_http(config, env=env) as served:
        assert _token_file(served.next_line()) == shared / "agenthost" / "serve-token"
    assert (target / "serve-token").exists()
