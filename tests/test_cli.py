"""End-to-end CLI tests: the real `agenthost` command in a subprocess, asserting on --json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import peer_python
from tests.helpers import run_cli as run

Command = tuple[str, list[str]]
AGENTHOST = [peer_python(), "-m", "agenthost"]
REPO = Path(__file__).resolve().parents[1]


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


@pytest.fixture
def config(
    tmp_path: Path,
    sdk_server_cmd: Callable[..., Command],
    crashy_cmd: Callable[..., Command],
    everything_cmd: Callable[[], Command],
) -> Path:
    sdk, crashy, everything = sdk_server_cmd(), crashy_cmd(), everything_cmd()
    script = tmp_path / "script.toml"
    script.write_text(
        """
[[turns]]
text = "Echoing first."
[[turns.tool_calls]]
id = "t1"
name = "crashy__echo"
input = { message = "from the agent" }

[[turns]]
[[turns.tool_calls]]
id = "t2"
name = "crashy__crash"
input = {}

[[turns]]
text = "Echoed; the crash call was denied by policy."
"""
    )
    path = tmp_path / "agenthost.toml"
    path.write_text(
        f"""
[servers.sdk]
command = {json.dumps(sdk[0])}
args = {toml_list(sdk[1])}

[servers.crashy]
command = {json.dumps(crashy[0])}
args = {toml_list(crashy[1])}

[servers.everything]
command = {json.dumps(everything[0])}
args = {toml_list(everything[1])}

[providers.replay]
kind = "scripted"
script = "script.toml"

[policy]
mode = "headless"
audit = "audit.jsonl"

[[policy.rules]]
kind = "tool"
server = "crashy"
name = "crash"
decision = "deny"
reason = "crashing is not allowed"

[[policy.rules]]
kind = "tool"
server = "*"
name = "*"
decision = "allow"
reason = "tests may call tools"

[[policy.rules]]
kind = ["prompt", "resource", "roots"]
server = "*"
decision = "allow"
reason = "tests may read"
"""
    )
    return path


def test_servers_and_check(config: Path) -> None:
    code, data, _ = run(config, "servers")
    assert code == 0
    assert {s["name"]: s["state"] for s in data} == {
        "sdk": "ready",
        "crashy": "ready",
        "everything": "ready",
    }
    # protocol = "auto": the official SDK server speaks 2026-07-28 (found by the
    # server/discover probe); the others only the initialize era.
    revisions = {s["name"]: (s["era"], s["revision"]) for s in data}
    assert revisions == {
        "sdk": ("modern", "2026-07-28"),
        "crashy": ("legacy", "2025-11-25"),
        "everything": ("legacy", "2025-11-25"),
    }
    learned = {s["name"]: s["learned"] for s in data}
    assert learned["sdk"] == "probe: server/discover answered"
    assert learned["crashy"] == "probe: server/discover refused (-32601); initialize"
    # the next run finds the era in the cache: no probe
    code, data, _ = run(config, "servers")
    assert {s["name"]: s["learned"] for s in data} == dict.fromkeys(learned, "cached")
    code, data, _ = run(config, "check")
    assert code == 0


def test_check_reports_failure(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[servers.gone]\ncommand = "definitely-not-a-command-xyz"\n')
    code, data, _ = run(path, "check")
    assert code == 5
    assert data[0]["state"] == "failed"
    assert "command not found" in data[0]["last_error"]


def test_tools_prompts_resources(config: Path) -> None:
    code, tools, _ = run(config, "tools")
    assert code == 0
    names = {t["name"] for t in tools}
    assert {"sdk__echo", "crashy__hang", "everything__get-sum"} <= names
    code, prompts, _ = run(config, "prompts")
    assert code == 0
    greet = next(p for p in prompts if p["server"] == "sdk" and p["name"] == "greet")
    assert [a["name"] for a in greet["arguments"]] == ["name", "style"]
    assert any(p["server"] == "everything" and p["name"] == "args-prompt" for p in prompts)
    code, resources, _ = run(config, "resources")
    assert code == 0
    assert any(r["uri"] == "text://readme" for r in resources["resources"])
    assert any(t["uri_template"] == "greeting://{name}" for t in resources["templates"])


def test_call_read_prompt(config: Path) -> None:
    code, result, _ = run(config, "call", "sdk__add", '{"a": 20, "b": 22}')
    assert code == 0
    assert result["structuredContent"] == {"sum": 42}
    code, result, _ = run(config, "call", "sdk__fail", '{"message": "bad"}')
    assert code == 1
    assert result["isError"] is True
    code, result, _ = run(config, "call", "crashy__crash", "{}")
    assert code == 3
    assert "crashing is not allowed" in result["error"]
    code, result, _ = run(config, "call", "sdk__add", "not json")
    assert code == 2
    code, result, _ = run(config, "read", "greeting://carol")
    assert code == 0
    assert "carol" in result["contents"][0]["text"]
    code, result, _ = run(config, "prompt", "sdk", "greet", "name=Ada", "style=formal")
    assert code == 0
    assert "Ada" in result["messages"][0]["content"]["text"]


def test_models(config: Path) -> None:
    code, data, _ = run(config, "models")
    assert code == 0
    assert [m["provider"] for m in data["models"]] == ["replay"]
    code, data, _ = run(config, "models", "--explain", '{"hints": [{"name": "sonnet"}]}')
    assert code == 0
    assert data["provider"] == "replay"
    assert data["reason"]


def test_run_agent_transcript_and_audit(config: Path) -> None:
    code, transcript, stderr = run(config, "run", "echo something, then crash")
    assert code == 0, stderr
    assert transcript["stop"] == "end_turn"
    assert transcript["final_text"] == "Echoed; the crash call was denied by policy."
    calls = [(c["name"], c["status"]) for c in transcript["tool_calls"]]
    assert calls == [("crashy__echo", "ok"), ("crashy__crash", "denied")]
    assert transcript["tool_calls"][0]["output"] == "from the agent"
    code, audit, _ = run(config, "audit")
    assert code == 0
    decisions = [(r["name"], r["decision"]) for r in audit if r["event"] == "decision"]
    assert ("echo", "allow") in decisions
    assert ("crash", "deny") in decisions


def test_run_strict_denials_exit_code(config: Path) -> None:
    code, transcript, _ = run(config, "run", "again", "--strict-denials")
    assert code == 3
    assert transcript["tool_calls"][1]["status"] == "denied"


def test_config_error_names_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "agenthost.toml"
    path.write_text('[servers.x]\ncomand = "oops"\n')
    code, data, _stderr = run(path, "tools")
    assert code == 2
    assert str(path) in data["error"]
    assert "servers.x.comand" in data["error"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_cleanly_on_a_signal(config: Path, sig: signal.Signals) -> None:
    """``agenthost serve`` with its client still connected: Ctrl-C or SIGTERM ends it (exit
    0) and its upstream with it; nothing but protocol reaches stdout."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.Popen(
        [*AGENTHOST, "--config", str(config), "serve"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 30
        seen = ""
        while "serving MCP on stdio" not in seen and time.monotonic() < deadline:
            seen += proc.stderr.readline()
        assert "sdk: ready" in seen
        proc.send_signal(sig)
        assert proc.wait(timeout=15) == 0
        assert proc.stdout is not None
        assert proc.stdout.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_help_is_fast() -> None:
    started = time.monotonic()
    proc = subprocess.run([*AGENTHOST, "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0
    assert "Exit codes" in proc.stdout
    # Not a timing assertion on the product: a guard that --help imports no SDK.
    modules = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, agenthost.cli as c\n"
            "try:\n    c.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in"
            " ('anthropic', 'openai', 'httpx', 'httpx2', 'trio_websocket', 'mcp')))",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert modules.stdout.strip().splitlines()[-1] == "[]"
    assert time.monotonic() - started < 30


def test_chat_slash_commands_and_a_turn(config: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    lines = "\n".join(
        [
            "/servers",
            "/tools",
            "/prompts",
            "/roots",
            "/prompt sdk greet",  # missing argument: asked for, with completions
            "alice",
            "echo something, then crash",
            "/quit",
        ]
    )
    proc = subprocess.run(
        [*AGENTHOST, "--config", str(config), "chat"],
        input=lines + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    out, err = proc.stdout, proc.stderr
    assert "sdk" in out
    assert "ready" in out
    assert "crashy__echo" in out
    assert "greet" in out
    assert "added prompt sdk/greet" in err
    assert "suggestions: alice, alfred, bob, carol" in err
    assert "  [tool] crashy__echo" in err
    assert "x denied: crashing is not allowed" in err
    assert "Echoed; the crash call was denied by policy." in out


def test_example_config_through_the_cli(tmp_path: Path) -> None:
    """The bundled example servers, driven by the CLI as a user would (JSON out)."""
    import shutil

    examples = tmp_path / "examples"
    shutil.copytree(REPO / "examples", examples, ignore=shutil.ignore_patterns("audit.jsonl"))
    config = examples / "agenthost.toml"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["AGENTHOST_PYTHON"] = peer_python()

    def cli(*args: str) -> tuple[int, Any]:
        proc = subprocess.run(
            [*AGENTHOST, "--config", str(config), *args, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        return proc.returncode, json.loads(proc.stdout)

    code, tools = cli("tools")
    assert code == 0
    hints = {t["name"]: t["annotations"] for t in tools}
    assert hints["notes__delete_note"]["destructiveHint"] is True
    assert hints["notes__list_notes"]["readOnlyHint"] is True
    code, listed = cli("call", "notes__list_notes", "{}")
    assert code == 0
    assert "meeting" in listed["content"][0]["text"]
    code, denied = cli("call", "notes__delete_note", '{"name": "scratch"}')
    assert code == 3
    assert "destructive" in denied["error"]
    assert (examples / "workspace" / "scratch.md").exists()
    code, transcript = cli("run", "Tidy up my notes")
    assert code == 0
    assert [c["status"] for c in transcript["tool_calls"]] == ["ok", "ok", "denied", "ok"]
    roots = transcript["tool_calls"][3]["output"]
    assert (examples / "workspace").resolve().as_uri() in roots
