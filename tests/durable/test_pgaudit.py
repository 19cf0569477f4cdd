"""The fleet's audit in a real PostgreSQL server (pgserver's binaries, started on a
unix socket in a temporary folder): written once per (run_id, seq) by the table's key,
whoever appends and however often."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agenthost import redaction
from agenthost.config import load_config
from agenthost.durable.client import run_input, submit
from agenthost.durable.pgaudit import PostgresAuditSink
from agenthost.durable.seal import digest, verified
from agenthost.durable.worker import host_thread, run_worker
from agenthost.errors import AgentHostError
from agenthost_policies.config import parse_policy
from tests.durable.fleet import (
    TEST_KEY,
    TEST_SERVER,
    durable_key,
    key_file,
    record_turns,
    write_config,
)
from tests.helpers import ANTHROPIC_ENV

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    """One server for the module (it takes ~3 s to start); stopped at the end."""
    pgserver = pytest.importorskip("pgserver")
    # A short folder: the server's unix socket lives in it (sun_path is ~107 bytes).
    folder = tempfile.mkdtemp(prefix="ahpg")
    try:
        server = pgserver.get_server(folder, cleanup_mode="stop")
    except Exception as exc:  # the wheel's binaries may not run on every machine
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"the PostgreSQL server from pgserver did not start here: {exc}")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def _drop(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS agenthost_audit")


def _line(run_id: str, seq: int) -> dict[str, Any]:
    return {"run_id": run_id, "seq": seq, "type": "decision", "tool": "t"}


def test_two_concurrent_writers_with_the_same_keys_write_each_line_once(dsn: str) -> None:
    _drop(dsn)
    sinks = [
        PostgresAuditSink(dsn, key=TEST_KEY),
        PostgresAuditSink(dsn, key=TEST_KEY),
    ]  # a connection each
    start = threading.Barrier(2)
    written = [0, 0]

    def writer(index: int) -> None:
        start.wait()
        for seq in range(1, 41):
            # Both append every line, in batches that overlap: duplicates race.
            written[index] += sinks[index].append([_line("run-a", seq), _line("run-a", seq)])

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(written) == 40
    lines = sinks[0].lines("run-a")
    assert [line["seq"] for line in lines] == list(range(1, 41))
    # A retry of an activity that already wrote writes nothing.
    assert sinks[1].append([_line("run-a", 7), _line("run-b", 1)]) == 1
    assert len(sinks[0].lines()) == 41
    for sink in sinks:
        sink.close()


def test_a_durable_run_writes_its_audit_to_postgresql(tmp_path: Path, dsn: str) -> None:
    _drop(dsn)
    items = ["x", "y", "z"]
    config_path = write_config(
        tmp_path,
        record_turns(items),
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "allow"}],
    )
    config = load_config(config_path)
    policy = parse_policy(config.policy, source="t", base_dir=config_path.parent)
    params = run_input(
        "record three",
        provider="replay",
        model="scripted-replay",
        policy=policy,
        system_prompt=None,
        options={},
    )

    async def main() -> str:
        env = await WorkflowEnvironment.start_time_skipping(
            test_server_existing_path=str(TEST_SERVER)
        )
        async with env:
            with host_thread(config, env=ANTHROPIC_ENV) as bridge:
                stop = asyncio.Event()
                worker = asyncio.create_task(
                    run_worker(
                        env.client,
                        bridge,
                        task_queue="q",
                        audit=dsn,
                        results=tmp_path / "results",
                        stop=stop,
                        key=durable_key(tmp_path),
                        drain=5,
                    )
                )
                try:
                    run_id = await submit(
                        env.client, params, task_queue="q", key=durable_key(tmp_path)
                    )
                    result = await env.client.get_workflow_handle(run_id).result()
                    assert result["stop"] == "end_turn"
                    return run_id
                finally:
                    stop.set()
                    await worker

    run_id = asyncio.run(main())
    sink = PostgresAuditSink(dsn, key=TEST_KEY)
    lines = sink.lines(run_id)
    sink.close()
    assert len(lines) >= 3
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert {line["run_id"] for line in lines} == {run_id}
    calls = [line for line in lines if line["type"] == "decision"]
    assert len(calls) == 3
    jsonl = tmp_path / "audit.jsonl"  # the config's file: the run's lines are not there
    assert not jsonl.exists() or run_id not in jsonl.read_text()


def test_the_database_password_is_a_secret(tmp_path: Path) -> None:
    password = "pw-never-shown-4471"
    config_path = write_config(
        tmp_path,
        [{"text": "hi"}],
        rules=[],
        extra=f'audit_database = "postgresql://fleet:{password}@127.0.0.1:1/audit"',
    )
    config = load_config(config_path)
    policy = parse_policy(config.policy, source="t", base_dir=config_path.parent)
    assert policy.audit_database is not None
    assert password not in redaction.redact(f"connecting to {policy.audit_database}")
    # Nothing listens on port 1: the one-line error names the database, redacted.
    sink = PostgresAuditSink(policy.audit_database, key=TEST_KEY)
    with pytest.raises(AgentHostError) as caught:
        sink.append([_line("r", 1)])
    assert password not in str(caught.value)
    assert "the audit database postgresql://fleet:***@127.0.0.1:1/audit failed" in str(caught.value)


def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )


def test_the_worker_cli_audits_to_postgresql_and_never_shows_the_password(
    tmp_path: Path, dsn: str
) -> None:
    """`agenthost worker` with `[policy] audit_database`, a run through `run --temporal`."""
    _drop(dsn)
    password = "pw-of-the-fleet-9931"
    with_password = dsn.replace("postgres:@", f"postgres:{password}@", 1)
    assert password in with_password  # the local server trusts its socket: ignored
    config_path = write_config(
        tmp_path,
        record_turns(["x"]),
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "allow"}],
        extra=f"audit_database = {json.dumps(with_password)}",
    )
    base = [sys.executable, "-m", "agenthost", "--config", str(config_path)]
    log = tmp_path / "worker.log"

    async def main() -> subprocess.CompletedProcess[str]:
        env = await WorkflowEnvironment.start_time_skipping(
            test_server_existing_path=str(TEST_SERVER)
        )
        async with env:
            address = env.client.service_client.config.target_host
            worker = await asyncio.to_thread(
                _start,
                [*base, "worker", "--temporal", address, "--task-queue", "q"],
                log,
                {
                    **os.environ,
                    "XDG_STATE_HOME": str(tmp_path / "state"),
                    "AGENTHOST_DURABLE_KEY_FILE": str(key_file(tmp_path)),
                },
            )
            try:
                deadline = time.monotonic() + 60
                while "worker ready" not in log.read_text(errors="replace"):
                    assert worker.poll() is None, log.read_text(errors="replace")
                    assert time.monotonic() < deadline, log.read_text(errors="replace")
                    await asyncio.sleep(0.1)
                return await asyncio.to_thread(
                    subprocess.run,
                    [
                        *base,
                        "run",
                        "--temporal",
                        address,
                        "--task-queue",
                        "q",
                        "record x",
                        "--key-file",
                        str(key_file(tmp_path)),
                    ],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    stdin=subprocess.DEVNULL,
                )
            finally:
                worker.send_signal(signal.SIGTERM)
                try:
                    worker.wait(30)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait(10)

    run = asyncio.run(main())
    assert run.returncode == 0, run.stderr
    shown = log.read_text(errors="replace")
    assert "audit postgresql://postgres:***@/postgres" in shown
    assert password not in shown + run.stdout + run.stderr
    sink = PostgresAuditSink(dsn, key=TEST_KEY)
    lines = sink.lines()
    sink.close()
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    decisions = [line for line in lines if line["type"] == "decision"]
    assert [(line["server"], line["name"], line["decision"]) for line in decisions] == [
        ("ledger", "record", "allow")
    ]


def test_a_forged_row_written_ahead_is_replaced_by_the_real_line(dsn: str) -> None:
    """A row for (run_id, seq) inserted ahead of the run, not sealed by the key, does not
    hold the key: the real line replaces it, flagged with the forged row's digest. A
    real row does hold it (a retry writes nothing): the positive control."""
    import psycopg

    _drop(dsn)
    sink = PostgresAuditSink(dsn, key=TEST_KEY)
    assert sink.append([_line("run-f", 9)]) == 1  # creates the table
    forged = {"run_id": "run-f", "seq": 1, "type": "decision", "tool": "forged"}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO agenthost_audit (run_id, seq, line) VALUES (%s, %s, %s)",
            ("run-f", 1, json.dumps(forged)),
        )
    assert sink.append([_line("run-f", 1)]) == 1
    assert sink.append([_line("run-f", 1), _line("run-f", 9)]) == 0
    lines = sink.lines("run-f")
    sink.close()
    assert verified(TEST_KEY, lines) == lines
    assert [(line["seq"], line["tool"]) for line in lines] == [(1, "t"), (9, "t")]
    assert lines[0]["replaced_unverified"] == digest(forged)
    assert "replaced_unverified" not in lines[1]
