"""A response whose id can be read settles its request, however malformed it is (issue 12,
item 4): a ``tools/call`` answered with ``"result": "x"`` used to be logged and dropped,
and a call without a timeout then waited forever."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

from agenthost.connection import open_session
from agenthost.errors import ProtocolError
from agenthost.transports.stdio import open_stdio_transport

Command = tuple[str, list[str]]


@pytest.mark.timeout(20)
async def test_malformed_response_fails_its_call_at_once(
    crashy_cmd: Callable[..., Command],
) -> None:
    command, args = crashy_cmd("--malformed")
    async with (
        open_stdio_transport(command, args, name="bad") as stdio,
        open_session(stdio, name="bad") as session,
    ):
        start = trio.current_time()
        with trio.fail_after(5), pytest.raises(ProtocolError) as info:
            await session.call_tool("malformed", {}, timeout=None)
        elapsed = trio.current_time() - start
        assert elapsed < 1.0
        message = str(info.value)
        assert message.startswith("bad: ")
        assert '"result" must be an object' in message
        # The session lives on: the next call is answered.
        result = await session.call_tool("echo", {"message": "still here"}, timeout=5)
        assert not result.is_error
