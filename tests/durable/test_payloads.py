"""Every payload of a durable run stays under Temporal's blob limit, on a real dev server.

The time-skipping test server does not enforce the 2 MB limit; the dev server does:
a tool result over it failed the activity ("[TMPRL1103] ... exceeded the error limit"),
Temporal retried it and the tool ran 5 times; a conversation over it failed every
workflow task and the run wedged for ever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenthost.durable.worker import connect
from tests.durable.fleet import dev_server, run_params, serve_runs, write_config

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
    **options: object,
) -> dict[str, Any]:
    """One run of ``turns`` on its own task queue; its result."""
    rules = [{"kind": "tool", "name": name, "decision": "allow"} for name in allow]
    config_path = write_config(tmp, turns, rules=rules)
    out: dict[str, Any] = {}

    async def main() -> None:
        client = await connect(address, "default")

        async def body() -> None:
            params = run_params(config_path, task, **options)
            handle = await client.start_workflow(
                "AgentRun", params, id=f"run-{tmp.name[-40:]}", task_queue=tmp.name
            )
            out["result"] = await asyncio.wait_for(handle.result(), wait)

        await serve_runs(client, tmp, config_path, body, task_queue=tmp.name)

    asyncio.run(main())
    return dict(out["result"])


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
