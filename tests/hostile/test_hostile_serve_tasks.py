"""Tasks through ``agenthost serve`` against a hostile upstream and a hostile downstream
client (hostile_tasks_server.py upstream, the gateway in process, a real agenthost
session downstream over a memory transport).

What must hold: a failed task's error reaches the downstream client with the host's
secrets scrubbed out of it, as a plain call's error does; a client cannot hold more tasks
than the bound by starting them all at once.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from agenthost.config.model import HostConfig, ServerConfig, Timeouts
from agenthost.connection import open_session
from agenthost.errors import JSONRPCError
from agenthost.protocol import methods as m
from agenthost.protocol.types import CallToolRequestParams
from agenthost.protocol.types.tasks import TaskMetadata, TaskRequestParams
from agenthost.serve import open_gateway
from agenthost.session import ClientSession
from agenthost.tool_tasks import TASKS_EXTENSION, list_tasks
from agenthost.transports.memory import memory_transport_pair

SERVER = str(Path(__file__).resolve().parent / "hostile_tasks_server.py")
#: What the host gives the upstream in its env, and the upstream quotes back.
SECRET = "Upstream-Key-7f3a9c2e51"
ALLOW: dict[str, Any] = {"mode": "headless", "preset": "unsafe-allow-everything"}


def _upstream(era: str, **config: Any) -> ServerConfig:
    return ServerConfig(
        name="ht",
        transport="stdio",
        command=sys.executable,
        args=(SERVER, json.dumps({"era": era, **config})),
        env={"UPSTREAM_KEY": SECRET},
        protocol="2026-07-28" if era == "modern" else "legacy",
    )


@asynccontextmanager
async def _client(upstream: ServerConfig, downstream_era: str) -> AsyncIterator[ClientSession]:
    """A downstream session of a gateway in front of ``upstream``."""
    async with open_gateway(HostConfig(servers=[upstream], policy=ALLOW)) as gateway:
        ours, theirs = memory_transport_pair(name="gateway")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gateway.serve, gateway.session(theirs))
            async with open_session(
                ours, name="gateway", protocol_version="2025-11-25", era=downstream_era
            ) as client:
                yield client
            nursery.cancel_scope.cancel()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("upstream_era", ["legacy", "modern"])
async def test_a_failed_tasks_error_is_scrubbed_for_a_2026_07_28_client(upstream_era: str) -> None:
    """The extension form carries the error inline in ``tasks/get``: it went out with the
    upstream's data as sent (``raw_data``), and, for an extension upstream, its message
    unscrubbed too."""
    upstream = _upstream(upstream_era, fail_quoting="UPSTREAM_KEY")
    with trio.fail_after(40):
        async with _client(upstream, "modern") as client:
            created = await client.exchange(
                m.TOOLS_CALL_SPEC,
                {"name": "slow", "arguments": {}},
                extensions={TASKS_EXTENSION: {}},
                final_kinds=frozenset({"complete", "task"}),
            )
            assert created["resultType"] == "task", created
            params = TaskRequestParams(task_id=created["taskId"])
            while True:
                seen = await client.request(m.TASKS_EXT_GET_SPEC, params)
                if seen["status"] != "working":
                    break
                await trio.sleep(0.05)
    assert seen["status"] == "failed" and seen["error"]["code"] == -32603, seen
    assert SECRET not in json.dumps(seen), seen


@pytest.mark.timeout(60)
async def test_a_failed_tasks_error_is_scrubbed_for_a_2025_11_25_client() -> None:
    """``tasks/result`` answers the task's error: from an extension upstream it was built
    from the upstream's ``tasks/get`` answer, past the scrubbing of received errors."""
    upstream = _upstream("modern", fail_quoting="UPSTREAM_KEY")
    with trio.fail_after(40):
        async with _client(upstream, "legacy") as client:
            params = CallToolRequestParams(name="slow", arguments={}, task=TaskMetadata())
            created = await client.request(m.TOOLS_CALL_TASK_SPEC, params)
            with pytest.raises(JSONRPCError) as info:
                await client.request(
                    m.TASKS_RESULT_SPEC, TaskRequestParams(task_id=created["task"]["taskId"])
                )
    assert info.value.code == -32603
    assert SECRET not in info.value.message and SECRET not in json.dumps(info.value.raw_data)


@pytest.mark.timeout(60)
async def test_tasks_started_all_at_once_stay_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every call checked the bound before any upstream had created its task, so a client
    that sent its calls together held as many tasks as it sent (never-ending ones here)."""
    monkeypatch.setattr("agenthost.serve.tasks.MAX_TASKS_PER_OWNER", 2)
    created: list[str] = []
    refused: list[str] = []
    with trio.fail_after(40):
        async with _client(_upstream("legacy", status="working"), "legacy") as client:

            async def start() -> None:
                params = CallToolRequestParams(name="slow", arguments={}, task=TaskMetadata())
                try:
                    answer = await client.request(m.TOOLS_CALL_TASK_SPEC, params)
                except JSONRPCError as exc:
                    refused.append(exc.message)
                else:
                    created.append(answer["task"]["taskId"])

            async with trio.open_nursery() as nursery:
                for _ in range(6):
                    nursery.start_soon(start)
            listed = await list_tasks(client)
    assert len(created) == 2 and len(refused) == 4, (created, refused)
    assert all("too many tasks" in text for text in refused)
    assert {t.task_id for t in listed} == set(created)


@pytest.mark.timeout(60)
async def test_an_upstream_task_that_never_ends_ends_the_gateways_at_the_task_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The host gives up on the upstream task at its task limit: the client reads the
    gateway's task ended with a tool error naming the limit (as a plain call's timeout
    is), and the gateway's log holds no traceback for it."""
    upstream = attrs.evolve(_upstream("modern", status="working"), timeouts=Timeouts(task=1.0))
    with trio.fail_after(40):
        async with _client(upstream, "modern") as client:
            created = await client.exchange(
                m.TOOLS_CALL_SPEC,
                {"name": "slow", "arguments": {}},
                extensions={TASKS_EXTENSION: {}},
                final_kinds=frozenset({"complete", "task"}),
            )
            params = TaskRequestParams(task_id=created["taskId"])
            while (seen := await client.request(m.TASKS_EXT_GET_SPEC, params))["status"] == (
                "working"
            ):
                await trio.sleep(0.1)
    assert seen["status"] == "completed" and seen["result"]["isError"], seen
    assert "did not finish within 1s" in seen["result"]["content"][0]["text"]
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


@pytest.mark.timeout(60)
async def test_another_sessions_task_id_is_an_unknown_task() -> None:
    """A client that learned (or guessed) another session's task id can neither read,
    wait for, list nor cancel that task; cancelling its own twice is refused the second
    time; neither reaches a traceback."""
    config = HostConfig(servers=[_upstream("legacy", status="working")], policy=ALLOW)
    with trio.fail_after(40):
        async with open_gateway(config) as gateway, trio.open_nursery() as nursery:
            pairs = [memory_transport_pair(name=f"gateway-{n}") for n in range(2)]
            for _, theirs in pairs:
                nursery.start_soon(gateway.serve, gateway.session(theirs))
            async with (
                open_session(pairs[0][0], name="a", protocol_version="2025-11-25") as alice,
                open_session(pairs[1][0], name="b", protocol_version="2025-11-25") as bob,
            ):
                params = CallToolRequestParams(name="slow", arguments={}, task=TaskMetadata())
                task_id = (await alice.request(m.TOOLS_CALL_TASK_SPEC, params))["task"]["taskId"]
                alices = TaskRequestParams(task_id=task_id)
                for ask in (
                    bob.request(m.TASKS_GET_SPEC, alices),
                    bob.request(m.TASKS_RESULT_SPEC, alices),
                    bob.request(m.TASKS_CANCEL_SPEC, alices),
                ):
                    with pytest.raises(JSONRPCError) as info:
                        await ask
                    assert info.value.code == -32602 and "unknown task" in info.value.message
                assert list(await list_tasks(bob)) == []
                assert (await alice.request(m.TASKS_GET_SPEC, alices)).status == "working"
                assert (await alice.request(m.TASKS_CANCEL_SPEC, alices)).status == "cancelled"
                with pytest.raises(JSONRPCError, match="already cancelled") as info:
                    await alice.request(m.TASKS_CANCEL_SPEC, alices)
                assert info.value.code == -32602
            nursery.cancel_scope.cancel()


@pytest.mark.timeout(60)
async def test_finished_tasks_results_are_kept_within_a_byte_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A finished task's result is kept for its client for up to an hour, up to 64 tasks
    per session and 256 sessionless, each up to a 16 MiB message: gigabytes, unbounded in
    practice. Past the gateway's byte budget the oldest finished results are forgotten
    (their clients read "unknown task", as after the ttl)."""
    monkeypatch.setattr("agenthost.serve.tasks.MAX_RESULT_BYTES", 1_000_000)
    upstream = _upstream("legacy", complete_after=0, result_bytes=300_000)
    ids: list[str] = []
    with trio.fail_after(40):
        async with _client(upstream, "legacy") as client:
            for _ in range(6):
                params = CallToolRequestParams(name="slow", arguments={}, task=TaskMetadata())
                created = await client.request(m.TOOLS_CALL_TASK_SPEC, params)
                ids.append(created["task"]["taskId"])
                result = await client.request(
                    m.TASKS_RESULT_SPEC, TaskRequestParams(task_id=ids[-1])
                )
                assert len(result.content[0].text) == 300_000  # type: ignore[union-attr]
            kept = {t.task_id for t in await list_tasks(client)}
            with pytest.raises(JSONRPCError, match="unknown task"):
                await client.request(m.TASKS_GET_SPEC, TaskRequestParams(task_id=ids[0]))
            newest = await client.request(m.TASKS_GET_SPEC, TaskRequestParams(task_id=ids[-1]))
    assert newest.status == "completed"
    assert kept == set(ids[-3:]), (len(kept), ids)
