"""``agenthost serve`` listed in the project file agenthost itself reads: a fork bomb.

The README's ".mcp.json" snippet for Claude Code put ``agenthost serve`` into the project
file agenthost reads, so each ``serve`` started another (11 processes after 14 s, an
orphaned level spawning on after the chain was killed). Here the real CLI runs in a
project whose trusted ``.mcp.json`` lists agenthost (as the snippet did, or behind a
wrapper script) next to a normal server; every server process carries a marker variable,
so the whole tree is counted, and killed at the end, through ``/proc`` (orphans too).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenthost.cli.lineage import MAX_DEPTH
from agenthost.config.selfstart import SERVE_CHAIN_ENV
from tests.helpers import AGENTHOST_COLD, initialize_request
from tests.hostile.conftest import HOSTILE_SERVER

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts through /proc"),
]

#: Server processes (the normal server, a refusing agenthost) alive at once with the fix.
BOUND = 4
#: How long a run may take: with the fix a few seconds; the loop never ends.
WINDOW = 20.0


def marked(mark: str) -> list[int]:
    """The live processes whose environment holds ``LOOP_MARK=mark``."""
    needle = f"LOOP_MARK={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def kill_marked(mark: str) -> None:
    """SIGKILL every marked process until none is left (a level may still be spawning)."""
    quiet = 0
    deadline = time.monotonic() + 20
    while quiet < 3 and time.monotonic() < deadline:
        pids = marked(mark)
        quiet = 0 if pids else quiet + 1
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


class LoopProject:
    """A trusted project whose ``.mcp.json`` lists ``servers``, in a home of its own."""

    def __init__(self, root: Path) -> None:
        self.root = root / "project"
        self.root.mkdir()
        home = root / "home"
        home.mkdir()
        self.mark = uuid.uuid4().hex
        self.env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        # The trust store under ~/.local/state: the servers' agenthosts read it too (they
        # inherit HOME, not a test's XDG_STATE_HOME), so the loop is the real one.
        self.env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
        self.env.pop("XDG_STATE_HOME", None)
        self.env.pop("AGENTHOST_SERVE_CHAIN", None)
        self.file = self.root / ".mcp.json"

    def server_env(self) -> dict[str, str]:
        """What every server gets: the marker, and this worktree's code for agenthost."""
        return {"LOOP_MARK": self.mark, "PYTHONPATH": self.env.get("PYTHONPATH", "")}

    def write(self, servers: dict[str, dict[str, Any]]) -> None:
        entries = {
            name: {**s, "env": {**self.server_env(), **s.get("env", {})}}
            for name, s in servers.items()
        }
        entries["fs"] = {
            "command": sys.executable,
            "args": [str(HOSTILE_SERVER)],
            "env": self.server_env(),
        }
        self.file.write_text(json.dumps({"mcpServers": entries}, indent=2))
        trust = subprocess.run(
            [*AGENTHOST_COLD, "trust", str(self.file)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=self.root,
            env=self.env,
            stdin=subprocess.DEVNULL,
        )
        assert trust.returncode == 0, trust.stderr

    def start(self, *args: str, stdin: int = subprocess.DEVNULL) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*AGENTHOST_COLD, *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.root,
            env=self.env,
        )

    def watch(self, proc: subprocess.Popen[str]) -> int:
        """Wait for ``proc`` (at most :data:`WINDOW`), counting marked processes; the most
        seen at once. Fails (after killing the tree) once the count passes :data:`BOUND`
        or the window ends."""
        most = 0
        deadline = time.monotonic() + WINDOW
        while proc.poll() is None and time.monotonic() < deadline:
            most = max(most, len(marked(self.mark)))
            assert most <= BOUND, f"{most} server processes at once: agenthost starts itself"
            time.sleep(0.05)
        assert proc.poll() is not None, f"still running after {WINDOW:g}s ({most} processes)"
        return most


@pytest.fixture
def loop_project(tmp_path: Path) -> Iterator[LoopProject]:
    project = LoopProject(tmp_path)
    try:
        yield project
    finally:
        kill_marked(project.mark)


def _check(project: LoopProject) -> tuple[dict[str, dict[str, Any]], str, int]:
    proc = project.start("check", "--json")
    try:
        most = project.watch(proc)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    rows = {row["name"]: row for row in json.loads(out)}
    return rows, err, most


def test_the_readme_snippet_is_refused_by_its_command_line(loop_project: LoopProject) -> None:
    """The README's snippet (``python -m agenthost serve`` here, so the servers run this
    code): refused with one line naming the file and the server; the normal server runs;
    no agenthost process ever starts."""
    loop_project.write(
        {"agenthost": {"command": sys.executable, "args": ["-m", "agenthost", "serve"]}}
    )
    rows, err, most = _check(loop_project)
    assert rows["fs"]["state"] == "ready"
    assert rows["agenthost"]["state"] == "failed"
    reason = rows["agenthost"]["last_error"]
    assert reason.startswith("refused:") and str(loop_project.file) in reason
    assert "'agenthost'" in reason and "\n" not in reason
    assert "Traceback" not in err
    assert most == 1  # the normal server (positive control of the count), nothing else
    assert marked(loop_project.mark) == []


def test_serve_names_the_file_and_serves_the_other_servers(loop_project: LoopProject) -> None:
    """``agenthost serve`` itself, as the other host starts it: one line names the file,
    and a client sees the normal server's tools through it."""
    loop_project.write(
        {"agenthost": {"command": sys.executable, "args": ["-m", "agenthost", "serve"]}}
    )
    proc = loop_project.start("serve", stdin=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        lines = []
        deadline = time.monotonic() + WINDOW
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            if "serving MCP on stdio" in line or not line:
                break
        refused = [line for line in lines if line.startswith("agenthost: failed")]
        assert len(refused) == 1 and str(loop_project.file) in refused[0], lines
        init = initialize_request("t")
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        for message in (init, initialized, listing):
            proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
        tools = [t["name"] for t in answers[1]["result"]["tools"]]
        assert "echo" in tools or "fs__echo" in tools, tools
        assert len(marked(loop_project.mark)) == 1
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


WRAPPERS: dict[str, Callable[[str], list[str]]] = {
    # A wrapper script the command line cannot see through: the environment stops it.
    "script": lambda py: ["sh", "{wrapper}"],
    # A shell line: read through (sh -c), refused by its command line.
    "sh -c": lambda py: ["sh", "-c", f"cd . && exec {py} -m agenthost serve"],
    # A launcher setting a variable first: read through (env), refused by its command line.
    "env": lambda py: ["env", "A=1", py, "-m", "agenthost", "serve"],
}


@pytest.mark.parametrize("form", sorted(WRAPPERS))
def test_agenthost_behind_a_wrapper_is_stopped(loop_project: LoopProject, form: str) -> None:
    """``agenthost serve`` behind a launcher: the chain never grows (the count stays
    bounded, the run ends) and the normal server runs."""
    wrapper = loop_project.root / "serve.sh"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m agenthost serve\n")
    argv = [a.format(wrapper=wrapper) for a in WRAPPERS[form](sys.executable)]
    loop_project.write({"agenthost": {"command": argv[0], "args": argv[1:]}})
    rows, err, most = _check(loop_project)
    assert rows["fs"]["state"] == "ready"
    reason = rows["agenthost"]["last_error"] or ""
    assert str(loop_project.file) in reason, rows["agenthost"]
    assert "Traceback" not in err
    assert 1 <= most <= BOUND


def test_the_project_env_table_cannot_erase_the_chain(loop_project: LoopProject) -> None:
    """A project file whose wrapper hides agenthost from the command line and whose ``env``
    table sets the chain variable to nothing: the chain is the host's, not the project's
    to set, so the next agenthost still finds the file above it and refuses."""
    wrapper = loop_project.root / "serve.sh"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m agenthost serve\n")
    loop_project.write(
        {"agenthost": {"command": "sh", "args": [str(wrapper)], "env": {SERVE_CHAIN_ENV: ""}}}
    )
    rows, err, most = _check(loop_project)
    assert rows["fs"]["state"] == "ready"
    assert str(loop_project.file) in (rows["agenthost"]["last_error"] or ""), rows["agenthost"]
    assert "Traceback" not in err
    assert 1 <= most <= BOUND


def test_a_wrapper_that_drops_the_environment_is_bounded_by_the_process_tree(
    loop_project: LoopProject,
) -> None:
    """``env -i`` before a wrapper script: the chain variable is gone and the command line
    hides agenthost, so neither rule sees the loop; the agenthosts above it in the process
    tree still do, and the depth stays bounded (each level: one agenthost, one normal
    server)."""
    wrapper = loop_project.root / "serve.sh"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m agenthost serve\n")
    # What the wrapper keeps of the environment: the marker (so the tree is counted), a
    # home (so each level finds the trust store and loads the project), this code.
    kept = [
        f"{k}={v}"
        for k, v in {**loop_project.server_env(), **loop_project.env}.items()
        if k in ("LOOP_MARK", "PYTHONPATH", "HOME", "XDG_CONFIG_HOME")
    ]
    loop_project.write({"agenthost": {"command": "env", "args": ["-i", *kept, "sh", str(wrapper)]}})
    proc = loop_project.start("check", "--json")
    try:
        most = 0
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            most = max(most, len(marked(loop_project.mark)))
            assert most <= 2 * (MAX_DEPTH + 1), f"{most} server processes at once"
            time.sleep(0.05)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["fs"]["state"] == "ready"
    assert "Traceback" not in err
    assert most > 2  # positive control: the loop did go deeper than the first level
