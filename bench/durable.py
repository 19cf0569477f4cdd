"""Durable runs on Temporal (``python -m bench --only durable``; not in the default set).

A dev server on 127.0.0.1 and two ``agenthost worker`` processes; a scripted agent that
makes ``CALLS`` tool calls (the ledger server, fast) and answers. Figures:

* runs/minute: ``--durable-runs`` runs (default 200) submitted at once, from the first
  submission to the last result;
* overhead per tool call: one run alone, submit to result, against the same run in
  process (``Host.run_agent``), the difference divided by the tool calls (the median of
  ``--durable-rounds`` each).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import trio

from bench.measure import median
from bench.report import Row
from bench.runner import REPO, WorkerFailed

__all__ = ["durable"]

CALLS = 3
LEDGER = REPO / "tests" / "peers" / "ledger_server.py"
BIN = Path(sys.executable).parent


def _config(tmp: Path) -> Path:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"id": f"c{i}", "name": "ledger__record", "input": {"item": str(i)}}]}
        for i in range(CALLS)
    ]
    turns.append({"text": "done"})
    (tmp / "script.json").write_text(json.dumps({"turns": turns}))
    config = tmp / "agenthost.toml"
    config.write_text(
        f"""
[servers.ledger]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(LEDGER))}]
env = {{ AGENTHOST_LEDGER = {json.dumps(str(tmp / "ledger.jsonl"))}, \
AGENTHOST_LEDGER_ATTEMPTS = {json.dumps(str(tmp / "attempts.log"))} }}

[providers.replay]
kind = "scripted"
script = "script.json"

[policy]
mode = "headless"
preset = "none"
audit = "audit.jsonl"

[[policy.rules]]
kind = "tool"
name = "ledger__record"
decision = "allow"
"""
    )
    return config


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _spawn(cmd: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def _wait(log: Path, text: str, proc: subprocess.Popen[bytes], limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise WorkerFailed(f"{proc.args!r} exited: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.1)
    raise WorkerFailed(f"no {text!r} from {proc.args!r} within {limit:g} s")


async def _durable(
    address: str, config_path: Path, key_path: Path, runs: int
) -> tuple[float, list[float]]:
    from agenthost.config import load_config
    from agenthost.durable.client import run_input, submit
    from agenthost.durable.seal import load_key
    from agenthost.durable.worker import connect
    from agenthost_policies.config import parse_policy

    config = load_config(config_path)
    policy = parse_policy(config.policy, source="bench", base_dir=config_path.parent)
    client = await connect(address, "default")
    key = load_key(key_path)
    params = run_input(
        "bench", provider="replay", model="scripted-replay", policy=policy, system_prompt=None
    )

    async def one() -> float:
        started = time.perf_counter()
        run_id = await submit(client, params, task_queue="agenthost", key=key)
        result = await client.get_workflow_handle(run_id).result()
        if result["stop"] != "end_turn":
            raise WorkerFailed(f"run {run_id} stopped: {result['stop']}")
        return time.perf_counter() - started

    singles = [await one() for _ in range(3)]
    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(runs)))
    return time.perf_counter() - started, singles


def _local(config_path: Path, rounds: int) -> list[float]:
    from agenthost.config import load_config
    from agenthost.host import open_host

    async def once() -> float:
        async with open_host(load_config(config_path)) as host:
            started = trio.current_time()
            transcript = await host.run_agent("bench", provider="replay", model="scripted-replay")
            if transcript.stop != "end_turn":
                raise WorkerFailed(f"local run stopped: {transcript.stop}")
            return trio.current_time() - started

    return [trio.run(once) for _ in range(rounds)]


def durable(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    runs, rounds = args.durable_runs, args.durable_rounds
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        tmp = Path(scratch)
        config = _config(tmp)
        port = _port()
        address = f"127.0.0.1:{port}"
        log(f"durable: dev server on {address}, 2 workers, {runs} runs")
        server_cmd = [
            str(BIN / "temporal"), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
            "--port", str(port), "--http-port", str(_port()), "--metrics-port", str(_port()),
            "--log-level", "error",
        ]  # fmt: skip
        server = stack.enter_context(_spawn(server_cmd, tmp / "server.log"))
        # The deployment's key, which workers and the submitter share (0600).
        key_path = tmp / "durable.key"
        key_path.write_text(secrets.token_hex(32))
        key_path.chmod(0o600)
        worker_cmd = [
            sys.executable, "-m", "agenthost", "--config", str(config), "worker",
            "--temporal", address, "--drain", "5", "--key-file", str(key_path),
        ]  # fmt: skip
        for name in ("w1", "w2"):
            worker = stack.enter_context(_spawn(worker_cmd, tmp / f"{name}.log"))
            _wait(tmp / f"{name}.log", "worker ready", worker, 120)
        del server
        elapsed, singles = asyncio.run(_durable(address, config, key_path, runs))
        local = _local(config, rounds)
    per_minute = runs / elapsed * 60
    overhead = (median(singles) - median(local)) / CALLS
    return [
        Row(
            name=f"durable runs/min, {runs} runs on 2 workers",
            ours=f"{per_minute:,.0f}/min",
            reference=f"{CALLS} tool calls each",
        ),
        Row(
            name="durable overhead per tool call vs local run",
            ours=f"{overhead * 1000:,.0f} ms",
            reference=f"run alone {median(singles):.2f} s, local {median(local) * 1000:.0f} ms",
        ),
    ]
