"""The AgentRun workflow on Temporal's time-skipping test server, with a real Host
(the ledger stdio server, a scripted provider) in a Trio thread behind the activities."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from temporalio.testing import WorkflowEnvironment

from agenthost.durable.client import RunRejected, answer, submit
from agenthost_providers.config import build_provider, parse_providers
from tests.durable.fleet import (
    TEST_SERVER,
    audit_lines,
    durable_key,
    key_file,
    record_turns,
    run_params,
    with_worker,
    write_config,
)
from tests.helpers import ANTHROPIC_ENV
from tests.providers.providers_helpers import anthropic_error

pytestmark = pytest.mark.timeout(120)


def test_ask_times_out_to_deny_and_a_second_answer_is_refused(tmp_path: Path) -> None:
    turns = record_turns(["a", "b"])
    config_path = write_config(
        tmp_path,
        turns,
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "ask"}],
        extra="ask_timeout = 3600",
    )

    async def body(env: WorkflowEnvironment, config: object) -> None:
        run_id = await submit(
            env.client,
            run_params(config_path, "record two"),
            task_queue="q",
            key=durable_key(tmp_path),
        )
        handle = env.client.get_workflow_handle(run_id)
        # c0 parks the run; approve it once, and a second answer is refused.
        while not (await handle.query("progress", 0))["pending"]:
            await asyncio.sleep(0.05)
        assert await answer(env.client, run_id, "c0", "allow", "alice", key=durable_key(tmp_path))
        with pytest.raises(RunRejected, match="answered already"):
            await answer(env.client, run_id, "c0", "deny", "mallory", key=durable_key(tmp_path))
        # c1 parks too; nobody answers: an hour of skipped time later, denied.
        while [p["call_id"] for p in (await handle.query("progress", 0))["pending"]] != ["c1"]:
            await asyncio.sleep(0.05)
        await env.sleep(3601)
        result = await handle.result()
        calls = {call["id"]: call for call in result["tool_calls"]}
        assert calls["c0"]["status"] == "ok"
        assert calls["c1"]["status"] == "denied"
        assert "ask_timeout" in calls["c1"]["reason"]
        assert result["stop"] == "end_turn"

    asyncio.run(with_worker(tmp_path, config_path, body))
    decisions = [
        line for line in audit_lines(tmp_path / "audit.jsonl") if line["type"] == "decision"
    ]
    assert [(d["call_id"], d["decision"], d["by"], d["who"]) for d in decisions] == [
        ("c0", "allow", "user", "alice"),
        ("c1", "deny", "timeout", None),
    ]
    ledger = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert len(ledger) == 1


def test_continue_as_new_keeps_the_conversation_and_the_audit_sequence(tmp_path: Path) -> None:
    items = [f"i{n}" for n in range(5)]
    config_path = write_config(
        tmp_path,
        record_turns(items),
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "allow"}],
    )

    async def body(env: WorkflowEnvironment, config: object) -> None:
        params = run_params(config_path, "record five", continue_after=2)
        run_id = await submit(env.client, params, task_queue="q", key=durable_key(tmp_path))
        handle = env.client.get_workflow_handle(run_id)
        result = await handle.result()
        assert result["stop"] == "end_turn"
        assert result["turns"] == 6
        assert [c["status"] for c in result["tool_calls"]] == ["ok"] * 5
        assert result["histories"] == 3  # turns 1-2, 3-4, 5-6
        assert result["run_id"] == run_id

    asyncio.run(with_worker(tmp_path, config_path, body))
    lines = audit_lines(tmp_path / "audit.jsonl")
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert len({line["run_id"] for line in lines}) == 1
    ledger = [
        line.split('"item": ')[1] for line in (tmp_path / "ledger.jsonl").read_text().splitlines()
    ]
    assert len(ledger) == 5


def test_the_cli_follows_a_run_with_the_output_of_a_local_run(tmp_path: Path) -> None:
    config_path = write_config(
        tmp_path,
        record_turns(["x"]),
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "allow"}],
    )
    out: dict[str, subprocess.CompletedProcess[str]] = {}

    async def body(env: WorkflowEnvironment, config: object) -> None:
        address = env.client.service_client.config.target_host
        argv = [sys.executable, "-m", "agenthost", "--config", str(config_path), "run"]
        argv += ["--temporal", address, "--task-queue", "q", "record x"]
        argv += ["--key-file", str(key_file(tmp_path))]
        out["run"] = await asyncio.to_thread(
            subprocess.run,
            argv,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    asyncio.run(with_worker(tmp_path, config_path, body))
    run = out["run"]
    assert run.returncode == 0, run.stderr
    assert '[tool] ledger__record {"item": "x", "seconds": 0.0}' in run.stderr
    assert "= recorded x" in run.stderr
    assert "all recorded" in run.stdout
    assert "-- stopped: end_turn; 2 model turns, 1 tool calls (0 denied)" in run.stderr


#: Runs the console script's entry point with an atexit hook that marks interpreter
#: finalization (the hook runs only if the process finalizes).
_MARK_FINALIZATION = (
    "import atexit, pathlib, sys; from agenthost.cli.app import run;"
    " atexit.register(pathlib.Path(sys.argv.pop(1)).touch); sys.argv[0] = 'agenthost';"
    " sys.exit(run())"
)


def test_a_runs_command_ends_without_finalizing_under_temporals_threads(tmp_path: Path) -> None:
    """Temporal's Rust threads call into Python: finalizing beside them aborted the CLI.

    `runs show run-nosuchrun` printed its error and then died with "Fatal Python error:
    PyGILState_Release ... finalizing" (exit -6) 4 times in 25 under CPU load; the console
    script now ends with ``os._exit`` once the Temporal SDK is loaded (nothing is lost:
    output is flushed and agenthost registers no atexit work). The marker shows which way
    the process ended, deterministically, where the abort itself needs load to show.
    """
    config_path = write_config(tmp_path, [], rules=[])
    marker = tmp_path / "finalized"

    async def body() -> subprocess.CompletedProcess[str]:
        env = await WorkflowEnvironment.start_time_skipping(
            test_server_existing_path=str(TEST_SERVER)
        )
        async with env:
            address = env.client.service_client.config.target_host
            argv = [sys.executable, "-c", _MARK_FINALIZATION, str(marker), "--config"]
            argv += [str(config_path), "runs", "show", "run-nosuchrun", "--temporal", address]
            return await asyncio.to_thread(
                subprocess.run, argv, capture_output=True, text=True, timeout=60
            )

    done = asyncio.run(body())
    assert done.returncode == 2, done.stderr
    assert "no run 'run-nosuchrun'" in done.stderr
    assert "Fatal Python error" not in done.stderr
    assert not marker.exists()


def test_runs_show_and_cancel_through_the_cli(tmp_path: Path) -> None:
    config_path = write_config(
        tmp_path,
        record_turns(["x"]),
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "ask"}],
    )
    out: dict[str, subprocess.CompletedProcess[str]] = {}

    def cli(address: str, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "agenthost", "--config", str(config_path), "runs", *args]
        argv += ["--temporal", address, "--json"]
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )

    async def body(env: WorkflowEnvironment, config: object) -> None:
        address = env.client.service_client.config.target_host
        run_id = await submit(
            env.client,
            run_params(config_path, "record x"),
            task_queue="q",
            key=durable_key(tmp_path),
        )
        handle = env.client.get_workflow_handle(run_id)
        while not (await handle.query("progress", 0))["pending"]:
            await asyncio.sleep(0.05)
        out["show"] = await asyncio.to_thread(cli, address, "show", run_id)
        out["cancel"] = await asyncio.to_thread(cli, address, "cancel", run_id)
        out["after"] = await asyncio.to_thread(cli, address, "show", run_id)
        out["missing"] = await asyncio.to_thread(cli, address, "show", "run-nosuchrun")

    asyncio.run(with_worker(tmp_path, config_path, body))
    shown = json.loads(out["show"].stdout)
    assert shown["status"] == "running"
    assert [w["call_id"] for w in shown["waiting"]] == ["c0"]
    assert shown["transcript"]["tool_calls"][0]["name"] == "ledger__record"
    assert out["cancel"].returncode == 0, out["cancel"].stderr
    assert json.loads(out["cancel"].stdout)["status"] == "cancelled"
    assert json.loads(out["after"].stdout)["status"] == "cancelled"
    assert out["missing"].returncode == 2
    assert "no run 'run-nosuchrun'" in out["missing"].stderr
    assert "Traceback" not in out["missing"].stderr


@pytest.mark.parametrize(("status", "kind", "calls"), [(401, "authentication_error", 1)])
def test_an_auth_error_of_the_model_api_is_not_retried(
    tmp_path: Path, status: int, kind: str, calls: int
) -> None:
    """Only the Anthropic HTTP API is mocked (shaped as the real one answers a bad key)."""
    config_path = write_config(
        tmp_path,
        record_turns(["x"]),
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "allow"}],
    )
    requests: list[httpx2.Request] = []

    def api(request: httpx2.Request) -> httpx2.Response:
        requests.append(request)
        return anthropic_error(status, kind, "invalid x-api-key")

    providers_config = parse_providers({"anthropic": {"kind": "anthropic"}}, source="<test>")
    provider = build_provider(
        providers_config.providers[0],
        ANTHROPIC_ENV,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api)),
    )
    out: dict[str, Any] = {}

    async def body(env: WorkflowEnvironment, config: object) -> None:
        params = run_params(config_path, "record x")
        params.update(provider="anthropic", model="claude-haiku-4-5")
        run_id = await submit(env.client, params, task_queue="q", key=durable_key(tmp_path))
        out["result"] = await env.client.get_workflow_handle(run_id).result()

    asyncio.run(with_worker(tmp_path, config_path, body, providers={"anthropic": provider}))
    assert out["result"]["stop"] == "provider_error"
    assert "invalid x-api-key" in out["result"]["error"]
    assert len(requests) == calls


def test_a_large_result_is_cut_in_history_and_kept_by_the_worker(tmp_path: Path) -> None:
    config_path = write_config(
        tmp_path,
        record_turns(["a-long-item-name"]),
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "allow"}],
    )
    out: dict[str, Any] = {}

    async def body(env: WorkflowEnvironment, config: object) -> None:
        params = run_params(config_path, "record", result_cap=8)
        run_id = await submit(env.client, params, task_queue="q", key=durable_key(tmp_path))
        out["result"] = await env.client.get_workflow_handle(run_id).result()
        out["run_id"] = run_id

    asyncio.run(with_worker(tmp_path, config_path, body))
    (call,) = out["result"]["tool_calls"]
    assert call["output"].startswith("recorded\n[cut at 8 of 25 characters; the full result: ")
    kept = list((tmp_path / "results" / out["run_id"]).glob("*.json"))
    assert len(kept) == 1
    assert "recorded a-long-item-name" in kept[0].read_text()
    assert str(kept[0]) in call["output"]
    outcome = [line for line in audit_lines(tmp_path / "audit.jsonl") if line["type"] == "outcome"]
    assert outcome[0]["ref"].endswith(str(kept[0]))


def test_a_servers_sampling_during_a_durable_call_is_audited_with_the_run(
    tmp_path: Path,
) -> None:
    """Issue 25, item 8: the worker's providers answer a server's sampling request made
    during a durable tool call, and its audit lines name the run and the call."""
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "c7", "name": "ledger__summarize", "input": {"item": "moons"}}]},
        {"text": "summarized"},
    ]
    sampler = {"model": "scripted-sampler", "turns": [{"text": "three small moons"}]}
    (tmp_path / "sampler.json").write_text(json.dumps(sampler))
    config_path = write_config(
        tmp_path,
        turns,
        rules=[
            {"kind": "tool", "name": "ledger__summarize", "decision": "allow"},
            {"kind": "sampling", "providers": ["sampler"], "review": "auto", "decision": "allow"},
        ],
        extra='\n[providers.sampler]\nkind = "scripted"\nscript = "sampler.json"\n',
    )
    out: dict[str, Any] = {}

    async def body(env: WorkflowEnvironment, config: object) -> None:
        run_id = await submit(
            env.client,
            run_params(config_path, "summarize"),
            task_queue="q",
            key=durable_key(tmp_path),
        )
        out["result"] = await env.client.get_workflow_handle(run_id).result()
        out["run_id"] = run_id

    asyncio.run(with_worker(tmp_path, config_path, body))
    (call,) = out["result"]["tool_calls"]
    assert call["output"] == "moons: three small moons"
    sampling = [
        line
        for line in audit_lines(tmp_path / "audit.jsonl")
        if line.get("kind") == "sampling" and line.get("event") == "decision"
    ]
    assert len(sampling) == 1, sampling
    assert sampling[0]["decision"] == "allow"
    assert sampling[0]["args"]["provider"] == "sampler"
    assert sampling[0]["via"]["during"] == [{"run_id": out["run_id"], "call_id": "c7"}]


def test_an_unreachable_temporal_is_one_line(tmp_path: Path) -> None:
    config_path = write_config(tmp_path, record_turns([]), rules=[])
    # Bound but never listening: connections are refused, and no other test's server
    # (xdist runs them side by side) can take the port meanwhile, as it could once closed.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        argv = [sys.executable, "-m", "agenthost", "--config", str(config_path), "runs", "list"]
        proc = subprocess.run(
            [*argv, "--temporal", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"agenthost: cannot reach Temporal at 127.0.0.1:{port}")
    assert len(proc.stderr.splitlines()) == 1
