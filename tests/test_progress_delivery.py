"""Every progress notification a server sends before its response reaches the call's
callback, in order, before ``call_tool`` returns (issue 12, item 3).

Servers commonly send their last progress right before the result (the official SDK
server and server-everything both do). The response wakes the caller directly while the
notifications wait for the session's dispatcher task, so a session that drops the
callback when the response arrives loses the tail: 9 of 20 calls lost the last one before
the fix. 50 calls against each real peer must all see every step.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

from agenthost.connection import open_session
from agenthost.transports.stdio import open_stdio_transport

Command = tuple[str, list[str]]

CALLS = 50


async def _check_calls(
    command: Command, tool: str, arguments: dict[str, object], steps: int
) -> None:
    async with (
        open_stdio_transport(command[0], command[1], name="peer") as stdio,
        open_session(stdio, name="peer") as session,
    ):
        incomplete: list[tuple[int, list[float]]] = []
        for call in range(CALLS):
            seen: list[float] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None, seen: list[float] = seen
            ) -> None:
                seen.append(progress)

            await session.call_tool(tool, arguments, progress=on_progress)
            if seen != [float(step) for step in range(1, steps + 1)]:
                incomplete.append((call, seen))
        assert not incomplete, f"{len(incomplete)} of {CALLS} calls lost progress: {incomplete[:5]}"


@pytest.mark.timeout(60)
async def test_sdk_server_progress_all_delivered(sdk_server_cmd: Callable[..., Command]) -> None:
    with trio.fail_after(50):
        await _check_calls(sdk_server_cmd(), "slow", {"seconds": 0, "steps": 5}, steps=5)


@pytest.mark.timeout(60)
async def test_everything_progress_all_delivered(everything_cmd: Callable[[], Command]) -> None:
    with trio.fail_after(50):
        await _check_calls(
            everything_cmd(),
            "trigger-long-running-operation",
            {"duration": 0.04, "steps": 4},
            steps=4,
        )
