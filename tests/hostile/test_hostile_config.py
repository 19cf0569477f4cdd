"""Issue 14 item 14 (config): 2,000 nested ``${X:-...}`` is a ConfigError, not a crash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agenthost.config import load_config
from agenthost.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def _nested(depth: int) -> str:
    return "${UNSET_X:-" * depth + "leaf" + "}" * depth


def _write(tmp_path: Path, depth: int) -> Path:
    path = tmp_path / "agenthost.toml"
    path.write_text(f'[servers.deep]\ncommand = "true"\nenv = {{ DEEP = "{_nested(depth)}" }}\n')
    return path


def test_deeply_nested_defaults_are_a_config_error(tmp_path: Path) -> None:
    path = _write(tmp_path, 2000)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "nested" in str(info.value)
    assert "DEEP" in str(info.value)


def test_moderate_nesting_still_expands(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, 10))
    assert config.servers[0].env["DEEP"] == "leaf"


def test_cli_exits_2_naming_the_key(tmp_path: Path) -> None:
    path = _write(tmp_path, 2000)
    env = {k: v for k, v in os.environ.items() if k != "UNSET_X"}
    proc = subprocess.run(
        [sys.executable, "-m", "agenthost", "--config", str(path), "check"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )
    assert proc.returncode == 2, proc.stderr
    assert "DEEP" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "RecursionError" not in proc.stderr
