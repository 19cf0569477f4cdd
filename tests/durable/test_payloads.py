"""Every payload of a durable run stays under Temporal's blob limit, on a real dev server.

The time-skipping test server does not enforce the 2 MB limit; the dev server does:
a tool result over it failed the activity ("[TMPRL1103] ... exceeded the error limit"),
Temporal retried it and the tool ran 5 times; a conversation over it failed every
workflow task and the run wedged for ever.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from agenthost.durable.client import RunRejected, answer
from agenthost.durable.limits import PAYLOAD_MAX
from agenthost.durable.worker import connect
from tests.durable.fleet import (
    audit_lines,
    dev_server,
    durable_key,
    record_turns,
    run_params,
    serve_runs,
    start,
    write_config,
)

pytestmark = pytest.mark.timeout(240)

MB3 = 3_000_000


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One dev server for the module (seconds to start); each test has its own queue."""
    with dev_server(tmp_path_factory.mktemp("dev")) as address:
        yield address


def _run(
    address: str,
    tmp: Path,
    turns: list[dict[str, Any]],
    allow: list[str],
    *,
    task: str = "work",
    wait: float = 120.0,
    max_turns: int = 20,
    extra: str = "",
    **options: object,
) -> dict[str, Any]:
    """One run of ``turns`` on its own task queue; its result (a run that does not end
    within ``wait`` seconds fails the test)."""
    rules = [{"kind": "tool", "name": name, "decision": "allow"} for name in allow]
    config_path = write_config(tmp, turns, rules=rules, extra=extra)
    out: dict[str, Any] = {}

    async def main() -> None:
        client = await connect(address, "default")

        async def body() -> None:
            params = run_params(config_path, task, **options)
            params["max_turns"] = max_turns
            handle = await start(
                client, config_path, params, run_id=f"run-{tmp.name[-40:]}", task_queue=tmp.name
            )
            out["result"] = await asyncio.wait_for(handle.result(), wait)
            out["largest"] = await _largest_payload(client, handle.id)

        await serve_runs(client, tmp, config_path, body, task_queue=tmp.name)

    asyncio.run(main())
    return {**out["result"], "largest_payload": out["largest"]}


def _payloads(message: Message) -> Iterator[Payload]:
    """Every Payload inside a history event (any field, any depth)."""
    if isinstance(message, Payload):
        yield message
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if isinstance(value, Message):
            yield from _payloads(value)
            continue
        items = value.values() if hasattr(value, "values") else value  # a map, a list
        for item in items:
            if isinstance(item, Message):
                yield from _payloads(item)


async def _largest_payload(client: Client, workflow_id: str) -> int:
    """The largest payload (bytes) in every history of the run, following its
    continue-as-new chain back from the last."""
    largest, run_id = 0, None
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        for event in history.events:
            largest = max([largest, *(len(p.data) for p in _payloads(event))])
        started = history.events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id
        if not run_id:
            return largest


def _attempts(tmp: Path) -> list[str]:
    path = tmp / "attempts.log"
    return path.read_text().splitlines() if path.exists() else []


def _bulky(kind: str, size: int, call_id: str = "c0") -> dict[str, Any]:
    return {"id": call_id, "name": "ledger__bulky", "input": {"kind": kind, "size": size}}


@pytest.mark.parametrize("kind", ["image", "audio", "structured", "mime"])
def test_a_huge_result_that_is_not_text_runs_the_tool_once_and_is_cut(
    temporal: str, tmp_path: Path, kind: str
) -> None:
    turns: list[dict[str, Any]] = [{"tool_calls": [_bulky(kind, MB3)]}, {"text": "done"}]
    result = _run(temporal, tmp_path, turns, ["ledger__bulky"])
    assert len(_attempts(tmp_path)) == 1
    assert result["stop"] == "end_turn"
    (call,) = result["tool_calls"]
    assert call["status"] == "ok", call
    assert call["output"].startswith(f"a {kind} of {MB3} bytes")
    assert "left out" in call["output"]
    (kept,) = (tmp_path / "results").glob("*/c0.json")
    assert kept.stat().st_size > MB3


def test_a_small_image_is_kept_whole(temporal: str, tmp_path: Path) -> None:
    """Positive control: the bound cuts what is over it, not every image."""
    turns: list[dict[str, Any]] = [{"tool_calls": [_bulky("image", 3000)]}, {"text": "done"}]
    result = _run(temporal, tmp_path, turns, ["ledger__bulky"])
    assert len(_attempts(tmp_path)) == 1
    (call,) = result["tool_calls"]
    assert call["output"] == "a image of 3000 bytes"
    assert not (tmp_path / "results").exists()


def test_four_results_of_16000_characters_a_turn_over_many_turns_complete(
    temporal: str, tmp_path: Path
) -> None:
    """The conversation grew by 64 KB a turn, each model request carried all of it and
    each continue-as-new the whole transcript and the followers' events: past 2 MB the
    run wedged. Earlier results are now elided (a stub tells the model), records and
    events trimmed, so every payload stays bounded and the run ends."""
    count = 36
    turns: list[dict[str, Any]] = [
        {"tool_calls": [_bulky("text", 16_000, f"t{t}c{i}") for i in range(4)]}
        for t in range(count)
    ]
    turns.append({"text": "done"})
    result = _run(
        temporal, tmp_path, turns, ["ledger__bulky"], max_turns=count + 1, continue_after=6
    )
    assert result["stop"] == "end_turn", result.get("error")
    assert result["turns"] == count + 1
    assert result["histories"] >= 6
    assert len(_attempts(tmp_path)) == 4 * count
    calls = result["tool_calls"]
    assert len(calls) == 4 * count
    # Elided results still verify (their stubs are sealed too): none is taken for one
    # that did not come from a worker.
    assert {c["status"] for c in calls} == {"ok"}
    assert calls[-1]["output"] == "t" * 16_000  # the newest in full
    assert result["largest_payload"] <= PAYLOAD_MAX


def test_a_megabyte_who_is_refused_at_once_and_a_real_answer_goes_through(
    temporal: str, tmp_path: Path
) -> None:
    config_path = write_config(
        tmp_path,
        record_turns(["x"]),
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "ask"}],
    )
    out: dict[str, Any] = {}

    async def main() -> None:
        client = await connect(temporal, "default")

        async def body() -> None:
            params = run_params(config_path, "record x")
            handle = await start(client, config_path, params, task_queue=tmp_path.name)
            run_id, key = handle.id, durable_key(tmp_path)
            while not (await handle.query("progress", 0))["pending"]:
                await asyncio.sleep(0.05)
            with pytest.raises(RunRejected, match="who answers must be 1 to 256 characters"):
                await answer(client, run_id, "c0", "allow", "w" * 2**20, key=key)
            assert await answer(client, run_id, "c0", "allow", "alice", key=key)
            out["result"] = await asyncio.wait_for(handle.result(), 60)

        await serve_runs(client, tmp_path, config_path, body, task_queue=tmp_path.name)

    asyncio.run(main())
    (call,) = out["result"]["tool_calls"]
    assert call["status"] == "ok"
    (decision,) = [
        line for line in audit_lines(tmp_path / "audit.jsonl") if line["type"] == "decision"
    ]
    assert (decision["decision"], decision["who"]) == ("allow", "alice")


def test_a_model_call_with_huge_arguments_stops_the_run_instead_of_wedging(
    temporal: str, tmp_path: Path
) -> None:
    """Eliding tool results cannot shrink the model's own tool use: past the bound the
    run stops, saying why, rather than send Temporal a request it refuses."""
    call = {"id": "c0", "name": "ledger__record", "input": {"item": "i" * 300_000}}
    turns: list[dict[str, Any]] = [{"tool_calls": [call]}, {"text": "done"}]
    result = _run(temporal, tmp_path, turns, ["ledger__record"], wait=60)
    assert result["stop"] == "token_budget"
    assert "even with earlier tool results elided" in result["error"]
    assert len(_attempts(tmp_path)) == 1
    assert result["largest_payload"] <= PAYLOAD_MAX


def test_a_server_with_a_megabyte_listing_is_clipped_and_its_plain_tool_runs(
    temporal: str, tmp_path: Path
) -> None:
    """The listing is an activity's result: a 3 MB description is clipped, a tool with a
    3 MB schema is not offered, the run goes on with the rest."""
    huge = Path(__file__).resolve().parent.parent / "peers" / "huge_listing_server.py"
    extra = f"\n[servers.huge]\ncommand = {json.dumps(sys.executable)}\n"
    extra += f"args = [{json.dumps(str(huge))}]\n"
    calls = [{"id": "c0", "name": "huge__plain", "input": {}}]
    turns: list[dict[str, Any]] = [{"tool_calls": calls}, {"text": "done"}]
    result = _run(temporal, tmp_path, turns, ["huge__plain"], wait=60, extra=extra)
    assert result["stop"] == "end_turn", result.get("error")
    assert [c["output"] for c in result["tool_calls"]] == ["plain ran"]
    assert result["largest_payload"] <= PAYLOAD_MAX
