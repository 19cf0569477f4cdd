"""README "Many machines": every command it shows is one the CLI accepts as written,
and the dev-server command is the one the acceptance test starts (tests/durable/test_fleet.py)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from agenthost.cli.app import build_parser
from tests.durable.fleet import DEV_SERVER

README = Path(__file__).resolve().parents[2] / "README.md"


def _commands() -> list[list[str]]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Many machines", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    lines = [line.split(" #")[0].strip() for line in block.group(1).splitlines()]
    return [shlex.split(line) for line in lines if line and not line.startswith("#")]


def test_every_agenthost_command_parses() -> None:
    parser, runners = build_parser()
    commands = [c for c in _commands() if c[0] == "agenthost"]
    seen = set()
    for command in commands:
        args = parser.parse_args(command[1:])
        assert args.command in runners
        assert args.temporal == "127.0.0.1:7233"
        seen.add(args.command if args.command != "runs" else f"runs {args.runs_action}")
    assert seen == {
        "worker",
        "run",
        "runs list",
        "runs show",
        "runs approve",
        "runs deny",
        "runs cancel",
    }


def test_the_dev_server_command_is_the_cli_in_the_wheel() -> None:
    (server,) = [c for c in _commands() if c[0] == "temporal"]
    assert server[:3] == ["temporal", "server", "start-dev"]
    usage = subprocess.run(
        [str(DEV_SERVER), *server[1:3], "--help"], capture_output=True, text=True, timeout=30
    ).stdout
    for option in (o for o in server[3:] if o.startswith("--")):
        assert option in usage, option
