"""The README's quick start for people who already use another host, followed literally.

The commands are read from the README's block under "Already using Claude Code, Claude
Desktop, VS Code or Cursor?" and run with bash, as a user would type them, in a project
that holds a config file exactly as the other tools' documentation shows it
(``tests/data/quickstart/``, sources noted there). The servers start through ``npx -y``
as those files say; so that no download happens, the project lives under the checkout's
``node_modules`` tree, where ``npx`` finds the pinned packages, and npm runs offline.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "quickstart"
HEADING = "### Already using Claude Code, Claude Desktop, VS Code or Cursor?"


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(HEADING) :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    lines = [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A folder for projects (under node_modules, see the module doc) and the user's env."""
    if not (REPO / "node_modules" / "@modelcontextprotocol" / "server-everything").is_dir():
        pytest.fail("the Node peers are not installed; run `make test` (npm ci)")
    root = REPO / "node_modules" / ".cache" / f"agenthost-quickstart-{uuid.uuid4().hex[:8]}"
    root.mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        PATH=os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")]),
        npm_config_offline="true",
        npm_config_cache=str(tmp_path / "npm-cache"),
        npm_config_update_notifier="false",
    )
    try:
        yield root, env
    finally:
        shutil.rmtree(root, ignore_errors=True)


def follow(commands: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    outputs = []
    for command in commands:
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, (command, proc.stdout, proc.stderr)
        outputs.append(proc.stdout + proc.stderr)
    return outputs


# Eight agenthost processes, each starting npx-launched Node servers: about 50 s alone on
# the 2-core machine, more under a full parallel run.
@pytest.mark.timeout(300)
def test_readme_quick_start_with_other_hosts_files(sandbox: tuple[Path, dict[str, str]]) -> None:
    root, env = sandbox
    commands = readme_commands()
    desktop = [c for c in commands if "claude_desktop_config.json" in c]
    in_project = [c for c in commands if c not in desktop]
    assert desktop and in_project

    # Claude Desktop's file, where the app keeps it; the command names it.
    claude_dir = Path(env["HOME"]) / "Library" / "Application Support" / "Claude"
    claude_dir.mkdir(parents=True)
    shutil.copy(DATA / "claude_desktop_config.json", claude_dir)
    (out,) = follow(desktop, root, env)
    assert "everything__echo" in out

    # A Claude Code project.
    code_project = root / "code-project"
    code_project.mkdir()
    shutil.copy(DATA / "claude-code.mcp.json", code_project / ".mcp.json")
    trusted, check, tools, prompts = follow(in_project, code_project, env)
    assert "server-everything" in trusted  # `agenthost trust` showed what it would run
    assert str(code_project / ".mcp.json") in check
    assert code_project.resolve().as_uri() in check  # the project folder is the root
    assert "everything__echo" in tools
    assert "simple-prompt" in prompts

    # A VS Code project: the filesystem server serves the workspace folder.
    vscode_project = root / "vscode-project"
    (vscode_project / ".vscode").mkdir(parents=True)
    shutil.copy(DATA / "vscode.mcp.json", vscode_project / ".vscode" / "mcp.json")
    (vscode_project / "notes.txt").write_text("hello from the project\n")
    _, check, tools, _ = follow(in_project, vscode_project, env)
    assert str(vscode_project / ".vscode" / "mcp.json") in check
    assert "filesystem__read_text_file" in tools
    proc = subprocess.run(
        [
            "bash",
            "-c",
            "agenthost --policy /dev/stdin call filesystem__read_text_file '"
            + json.dumps({"path": str(vscode_project / "notes.txt")})
            + "' --json",
        ],
        input='mode = "headless"\n[[rules]]\nkind = ["tool", "roots"]\ndecision = "allow"\n',
        cwd=vscode_project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "hello from the project" in json.loads(proc.stdout)["content"][0]["text"]
