"""Acceptance of durable runs (issue 25): a Temporal dev server on 127.0.0.1, two
`agenthost worker` processes, 20 runs of a scripted agent against the ledger server,
one worker killed with SIGKILL while runs are inside the slow tool.

All 20 runs must finish without anyone stepping in; every ledger effect is there once
(the idempotency key in ``_meta`` makes the repeated call a no-op); a retried attempt is
visible in the audit; the audit has one line per (run_id, seq) and one decision per call;
a second approval of the same call is refused by the CLI.

The dev server keeps its state in memory here (no ``--db-filename``): what is tested is a
run outliving a *worker*; with the SQLite file the server's own writes were the slowest
part on a loaded 2-core machine ("context deadline exceeded" in its log).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agenthost.config import load_config
from agenthost.durable.client import RunRejected, answer, run_input, submit
from agenthost.durable.seal import ENV_KEY_FILE, DurableKey
from agenthost.durable.worker import connect
from agenthost_policies.config import parse_policy
from tests.durable.fleet import (
    audit_lines,
    dev_server_argv,
    durable_key,
    key_file,
    ports,
    process,
    wait_port,
    write_config,
)
from tests.helpers import alive

pytestmark = [pytest.mark.serial, pytest.mark.timeout(150)]

RUNS = 20
SLOW = 4.0
TURNS: list[dict[str, Any]] = [
    {"tool_calls": [{"id": "c0", "name": "ledger__record", "input": {"item": "first"}}]},
    {
        "tool_calls": [
            {"id": "c1", "name": "ledger__record", "input": {"item": "slow", "seconds": SLOW}}
        ]
    },
    {"tool_calls": [{"id": "c2", "name": "ledger__publish", "input": {"item": "report"}}]},
    {"tool_calls": [{"id": "c3", "name": "ledger__publish", "input": {"item": "summary"}}]},
    {"text": "recorded and published"},
]


def _wait_line(log: Path, text: str, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        assert proc.poll() is None, log.read_text(errors="replace")
        time.sleep(0.1)
    raise AssertionError(f"no {text!r} in {log}:\n{log.read_text(errors='replace')}")


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agenthost", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, ENV_KEY_FILE: str(key_file(config.parent))},
    )


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def test_twenty_runs_survive_a_killed_worker(tmp_path: Path) -> None:
    # one piece: a scenario whose steps share the processes it starts (a dev
    # server, two workers), which cost seconds each to start; split, each part would
    # start its own fleet.
    config = write_config(
        tmp_path,
        TURNS,
        rules=[
            {"kind": "tool", "name": "ledger__record", "decision": "allow"},
            {"kind": "tool", "name": "ledger__publish", "decision": "ask"},
        ],
    )
    port, http_port, metrics_port = ports(3)
    address = f"127.0.0.1:{port}"
    started = time.monotonic()
    deadline = started + 120
    dev = dev_server_argv(port, http_port, metrics_port)
    worker_cmd = [
        sys.executable, "-m", "agenthost", "--config", str(config), "worker",
        "--temporal", address, "--audit", str(tmp_path / "audit.jsonl"),
        "--results", str(tmp_path / "results"), "--drain", "5",
    ]  # fmt: skip
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        ENV_KEY_FILE: str(key_file(tmp_path)),
    }
    with (
        process(dev, tmp_path / "dev.log") as server,
        process(worker_cmd, tmp_path / "w1.log", env=env) as victim,
        process(worker_cmd, tmp_path / "w2.log", env=env) as survivor,
    ):
        wait_port(port, deadline, server, tmp_path / "dev.log")
        for proc, name in ((victim, "w1"), (survivor, "w2")):
            _wait_line(tmp_path / f"{name}.log", "worker ready", proc, deadline)
        ready = time.monotonic()

        # One run through the CLI (--detach prints its id), 19 through the library.
        detached = _cli(config, "run", "--temporal", address, "--detach", "record things")
        assert detached.returncode == 0, detached.stderr
        cli_run = detached.stdout.strip()
        assert cli_run.startswith("run-")
        run_ids = [cli_run, *asyncio.run(_submit(config, address, RUNS - 1))]
        # The library answers the 19 as they ask; the CLI answers the first run below.
        box: dict[str, list[dict[str, Any]]] = {}
        approver = threading.Thread(
            target=lambda: box.update(
                r=asyncio.run(
                    _approve_and_wait(address, run_ids[1:], deadline, durable_key(tmp_path))
                )
            )
        )
        approver.start()

        # Kill one worker while runs are inside the slow tool on its server.
        attempts = tmp_path / "attempts.log"
        while time.monotonic() < deadline:
            lines = attempts.read_text().splitlines() if attempts.exists() else []
            slow_on_victim = [
                line
                for line in lines
                if line.split()[0].endswith("/c1") and _parent(int(line.split()[1])) == victim.pid
            ]
            if slow_on_victim:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("no slow call reached the first worker")
        os.kill(victim.pid, signal.SIGKILL)
        killed = time.monotonic()

        # Approvals: the CLI for the first run (and a second answer it must refuse), the
        # library for the others, as each run comes to ask.
        first = _wait_pending(address, cli_run, deadline)
        assert first == ["c2"]
        listed = _cli(config, "runs", "list", "--temporal", address, "--json")
        assert listed.returncode == 0, listed.stderr
        (mine,) = [run for run in json.loads(listed.stdout) if run["run_id"] == cli_run]
        assert mine["status"] == "waiting_approval"
        assert [
            (w["call_id"], w["server"], w["tool"], w["arguments"]) for w in mine["waiting"]
        ] == [("c2", "ledger", "publish", {"item": "report"})]
        approved = _cli(config, "runs", "approve", "--temporal", address, cli_run, "c2")
        assert approved.returncode == 0, approved.stderr
        again = _cli(config, "runs", "approve", "--temporal", address, cli_run, "c2", "--json")
        assert again.returncode != 0
        assert "answered already" in again.stderr
        assert "Traceback" not in again.stderr
        key = durable_key(tmp_path)
        results = asyncio.run(_approve_and_wait(address, [cli_run], deadline, key))
        approver.join(deadline - time.monotonic())
        results += box["r"]
        done = time.monotonic()

        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(30) == 0, (tmp_path / "w2.log").read_text()
        assert "worker stopped" in (tmp_path / "w2.log").read_text()
        server.send_signal(signal.SIGTERM)

    # Every step lost with the worker is retried within its heartbeat timeout (5-10 s),
    # not at its deadline: a tool listing without one waited its minute (65 s after
    # the kill, seen before every activity got a heartbeat timeout).
    assert done - killed < 55, f"runs took {done - killed:.0f} s after the kill"
    assert all(r["stop"] == "end_turn" for r in results), results
    assert all(c["status"] == "ok" for r in results for c in r["tool_calls"]), results

    ledger = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    keys = collections.Counter(entry["key"] for entry in ledger)
    assert set(keys) == {f"{run}/{call}" for run in run_ids for call in ("c0", "c1", "c2", "c3")}
    assert set(keys.values()) == {1}, "an effect happened twice"
    tried = collections.Counter(line.split()[0] for line in attempts.read_text().splitlines())
    assert max(tried.values()) >= 2, "no call was attempted again after the kill"

    audit = audit_lines(tmp_path / "audit.jsonl")
    per_key = collections.Counter((line["run_id"], line["seq"]) for line in audit)
    assert set(per_key.values()) == {1}
    for run in run_ids:
        seqs = sorted(line["seq"] for line in audit if line["run_id"] == run)
        assert seqs == list(range(1, len(seqs) + 1))
    decisions = collections.Counter(
        (line["run_id"], line["call_id"]) for line in audit if line["type"] == "decision"
    )
    assert len(decisions) == RUNS * 4 and set(decisions.values()) == {1}
    retried = [line for line in audit if line["type"] == "outcome" and (line["attempt"] or 0) > 1]
    assert retried, "no retried attempt in the audit"
    assert {line["idempotency_key"] for line in retried} <= set(keys)
    who = {line["who"] for line in audit if line["type"] == "decision" and line["by"] == "user"}
    assert who == {_user(), "test"}

    print(
        f"\nfleet: {RUNS} runs on 2 workers (one SIGKILLed), startup {ready - started:.1f} s,"
        f" runs done {done - ready:.1f} s after ready ({done - killed:.1f} s after the kill);"
        f" {len(tried)} calls, {sum(tried.values()) - len(tried)} repeated attempts;"
        f" load {os.getloadavg()[0]:.1f}"
    )
    # Every process of the fleet is gone (the killed worker's server too).
    for line in attempts.read_text().splitlines():
        pid = int(line.split()[1])
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def _user() -> str:
    import getpass

    return getpass.getuser()


async def _submit(config_path: Path, address: str, n: int) -> list[str]:
    config = load_config(config_path)
    policy = parse_policy(config.policy, source="t", base_dir=config_path.parent)
    client = await connect(address, "default")
    params = run_input(
        "record things",
        provider="replay",
        model="scripted-replay",
        policy=policy,
        system_prompt=None,
        options={"heartbeat_timeout": 5},
    )
    return list(
        await asyncio.gather(
            *(
                submit(client, params, task_queue="agenthost", key=durable_key(config_path.parent))
                for _ in range(n)
            )
        )
    )


def _wait_pending(address: str, run_id: str, deadline: float) -> list[str]:
    async def wait() -> list[str]:
        client = await connect(address, "default")
        handle = client.get_workflow_handle(run_id)
        while time.monotonic() < deadline:
            try:
                pending = (await handle.query("progress", 0))["pending"]
            except Exception:  # a worker is being replaced: ask again
                pending = []
            if pending:
                return [p["call_id"] for p in pending]
            await asyncio.sleep(0.2)
        raise AssertionError(f"{run_id} never asked")

    return asyncio.run(wait())


async def _approve_and_wait(
    address: str, run_ids: list[str], deadline: float, key: DurableKey
) -> list[dict[str, Any]]:
    """Approve every call the runs ask about, until each has ended; their results."""
    client = await connect(address, "default")

    async def one(run_id: str) -> dict[str, Any]:
        handle = client.get_workflow_handle(run_id)
        result = asyncio.ensure_future(handle.result())
        while not result.done():
            assert time.monotonic() < deadline, f"{run_id} did not finish"
            try:
                pending = (await handle.query("progress", 0))["pending"]
            except Exception:  # the run ended meanwhile, or a worker is being replaced
                pending = []
            for waiting in pending:
                with contextlib.suppress(RunRejected):  # answered already (by the CLI)
                    await answer(client, run_id, waiting["call_id"], "allow", "test", key=key)
            await asyncio.wait({result}, timeout=0.2)
        return result.result()  # type: ignore[no-any-return]

    return list(await asyncio.gather(*(one(run_id) for run_id in run_ids)))
