"""Requests over Streamable HTTP run in the caller's task (issue 26, "1 in flight").

The POST of a request is made by the task that calls, and its answer handed to that task
directly: no task per request, no channel and no reader in between. These tests fail if
that silently stops (a task spawned per call, or more scheduler steps per call), against
real peers: the official SDK's server and the bench's Node server. And the inline
exchange delivers exactly what the task-per-request path delivers, in the same order,
for generated response bodies (the :mod:`tests.test_hot_path` way).
"""

from __future__ import annotations

import pytest
import trio

from agenthost.connection import open_remote_transport, open_session
from agenthost.transports.http import StreamableHTTPTransport
from tests.test_lean_http import config, peer, text_of

pytestmark = pytest.mark.timeout(90)


class _Count(trio.abc.Instrument):
    """Tasks spawned and task steps (each a scheduler pass that ran a task), but for the
    task that reads an SSE stream on after its response was delivered: the SDK's server
    ends its streams in a write of their own, which the caller does not wait for."""

    def __init__(self) -> None:
        self.spawned = 0
        self.steps = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if not task.name.endswith("._drain"):
            self.spawned += 1

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if not task.name.endswith("._drain"):
            self.steps += 1


@pytest.mark.parametrize(("kind", "path"), [("sdk", None), ("node", "/json"), ("node", "/sse")])
async def test_a_call_spawns_no_task_and_wakes_its_caller_directly(
    kind: str, path: str | None
) -> None:
    calls = 50
    async with peer(kind) as (port, default_path):
        url = f"http://127.0.0.1:{port}{path or default_path}"
        async with open_remote_transport(config(url)) as transport:
            assert isinstance(transport, StreamableHTTPTransport)
            async with open_session(transport, name="sdk") as session:
                for i in range(5):  # the GET stream, the first connections
                    await session.call_tool("echo", {"message": f"w{i}"})
                count = _Count()
                trio.lowlevel.add_instrument(count)
                try:
                    for i in range(calls):
                        result = await session.call_tool("echo", {"message": f"m{i}"})
                        assert text_of(result) == f"m{i}"
                finally:
                    trio.lowlevel.remove_instrument(count)
    print(f"{kind} {path}: spawned/call {count.spawned / calls}, steps/call {count.steps / calls}")
    # Before (a task per POST, its answer through a channel and the reader): 1 task and
    # 6 (Node) to 7.2 (SDK) steps per call; the floor client's 2 steps is the least.
    assert count.spawned == 0
    assert count.steps / calls < 3.5
