"""A durable run's names and sizes, against the worker's files and Temporal's limits.

Path traversal through a run id: the worker keeps cut results in ``RESULTS/RUN_ID/``
beside its state files (``approvals.json``, ``trusted-projects.json``), so a run id of
``..`` and a call id of ``approvals`` wrote a tool's output over the approvals file.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from agenthost.durable.client import submit
from agenthost.durable.limits import LimitError
from tests.durable.fleet import TEST_KEY, run_params, start, with_worker, write_config

pytestmark = pytest.mark.timeout(120)

#: Ids a person or a peer with Temporal access might give a run.
BAD_RUN_IDS = ["..", ".", "../x", "a/../../b", "/etc/agenthost", "x" * 300, "-rf", "a\\..\\b"]

STATE_FILES = {"approvals.json": '{"mine": true}', "trusted-projects.json": '["/home/me"]'}


def _turns(call_id: str) -> list[dict[str, Any]]:
    call = {"id": call_id, "name": "ledger__record", "input": {"item": "a-long-item-name"}}
    return [{"tool_calls": [call]}, {"text": "recorded"}]


def _state(tmp: Path) -> None:
    for name, text in STATE_FILES.items():
        (tmp / name).write_text(text)


def _ledger(tmp: Path) -> list[str]:
    path = tmp / "ledger.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def test_a_run_started_with_a_path_for_its_id_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """Started straight on Temporal (not through ``submit``): the workflow refuses the id
    before any tool runs. Positive control: a valid id's cut result lands in its folder,
    under the very call id that would have named the approvals file."""
    _state(tmp_path)
    config_path = write_config(
        tmp_path,
        _turns("approvals"),
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "allow"}],
    )
    failures: dict[str, str] = {}

    async def body(env: WorkflowEnvironment, config: object) -> None:
        params = run_params(config_path, "record", result_cap=8)
        for run_id in BAD_RUN_IDS:
            handle = await env.client.start_workflow("AgentRun", params, id=run_id, task_queue="q")
            with pytest.raises(WorkflowFailureError) as caught:
                await handle.result()
            failures[run_id] = str(caught.value.cause)
        good = await start(env.client, config_path, params, run_id="run-good")
        assert (await good.result())["stop"] == "end_turn"

    asyncio.run(with_worker(tmp_path, config_path, body))
    for run_id in BAD_RUN_IDS:
        assert "invalid run id" in failures[run_id], failures[run_id]
    for name, text in STATE_FILES.items():
        assert (tmp_path / name).read_text() == text
    assert len(_ledger(tmp_path)) == 1  # the good run's call only
    kept = tmp_path / "results" / "run-good" / "approvals.json"
    assert "recorded a-long-item-name" in kept.read_text()
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["run-good"]


@pytest.mark.parametrize("run_id", [*BAD_RUN_IDS, "a\0b", "run-x\n", "run-\u0661"])
def test_submit_refuses_an_invalid_run_id_at_once(tmp_path: Path, run_id: str) -> None:
    config_path = write_config(tmp_path, _turns("c0"), rules=[])
    params = run_params(config_path, "record")
    with pytest.raises(LimitError, match="invalid run id"):
        refused = submit(None, params, task_queue="q", run_id=run_id, key=TEST_KEY)  # type: ignore[arg-type]
        asyncio.run(refused)


@pytest.mark.parametrize("run_id", ["..", "../x", "/etc/agenthost"])
def test_the_cli_refuses_an_invalid_run_id_in_one_line(tmp_path: Path, run_id: str) -> None:
    """No server at all: the id is refused before anything connects."""
    config_path = write_config(tmp_path, [], rules=[])
    argv = [sys.executable, "-m", "agenthost", "--config", str(config_path), "runs", "show"]
    proc = subprocess.run(
        [*argv, "--temporal", "127.0.0.1:9", "--", run_id],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, proc.stderr
    assert "invalid run id" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_a_call_id_that_is_a_path_is_kept_under_its_run(tmp_path: Path) -> None:
    """The model names its calls: an id of ``../../approvals`` is a file of this run."""
    _state(tmp_path)
    config_path = write_config(
        tmp_path,
        _turns("../../approvals"),
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "allow"}],
    )

    async def body(env: WorkflowEnvironment, config: object) -> None:
        params = run_params(config_path, "record", result_cap=8)
        run_id = (await start(env.client, config_path, params, run_id="run-calls")).id
        result = await env.client.get_workflow_handle(run_id).result()
        assert result["stop"] == "end_turn"

    asyncio.run(with_worker(tmp_path, config_path, body))
    for name, text in STATE_FILES.items():
        assert (tmp_path / name).read_text() == text
    (kept,) = (tmp_path / "results" / "run-calls").iterdir()
    assert "recorded a-long-item-name" in kept.read_text()


def test_ids_that_differ_only_in_case_keep_results_apart_on_any_filesystem(
    tmp_path: Path,
) -> None:
    """A worker on a case-insensitive filesystem (macOS, by default) had one folder for
    ``run-Case`` and ``run-case``, one file for calls ``C0`` and ``c0``: one run's kept
    result written over another's. Positive control: all four are kept, one file each."""
    calls = [
        {"id": call_id, "name": "ledger__record", "input": {"item": "a-long-item-name"}}
        for call_id in ("C0", "c0")
    ]
    config_path = write_config(
        tmp_path,
        [{"tool_calls": calls}, {"text": "recorded"}],
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "allow"}],
    )

    async def body(env: WorkflowEnvironment, config: object) -> None:
        for run_id in ("run-Case", "run-case"):
            params = run_params(config_path, "record", result_cap=8)
            handle = await start(env.client, config_path, params, run_id=run_id)
            assert (await handle.result())["stop"] == "end_turn"

    asyncio.run(with_worker(tmp_path, config_path, body))
    results = tmp_path / "results"
    kept = [str(path.relative_to(results)) for path in results.rglob("*.json")]
    assert len(kept) == 4, kept
    assert len({name.casefold() for name in kept}) == 4, kept


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["runs", "approve", "run-0123456789ab", "c0", "--by", "w" * 300], "who answers"),
        (["runs", "deny", "run-0123456789ab", "c0", "--by", ""], "who answers"),
        (["run", "x" * 40_000], "at most 32768 are taken"),
    ],
)
def test_the_cli_refuses_a_long_who_or_task_before_connecting(
    tmp_path: Path, args: list[str], message: str
) -> None:
    config_path = write_config(tmp_path, [], rules=[])
    argv = [sys.executable, "-m", "agenthost", "--config", str(config_path), *args]
    proc = subprocess.run(
        [*argv, "--temporal", "127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_a_symlink_in_the_results_folder_does_not_lead_out(tmp_path: Path) -> None:
    """A run's folder that is a symlink to the state folder: the result is cut and not
    kept, the approvals file untouched."""
    _state(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "run-sym").symlink_to(tmp_path)
    config_path = write_config(
        tmp_path,
        _turns("approvals"),
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "allow"}],
    )
    out: dict[str, Any] = {}

    async def body(env: WorkflowEnvironment, config: object) -> None:
        params = run_params(config_path, "record", result_cap=8)
        run_id = (await start(env.client, config_path, params, run_id="run-sym")).id
        out["result"] = await env.client.get_workflow_handle(run_id).result()

    asyncio.run(with_worker(tmp_path, config_path, body))
    for name, text in STATE_FILES.items():
        assert (tmp_path / name).read_text() == text
    (call,) = out["result"]["tool_calls"]
    assert call["output"] == ("recorded\n[cut at 8 of 25 characters; the full result was not kept]")
