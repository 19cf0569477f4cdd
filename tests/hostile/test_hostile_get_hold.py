"""A Streamable HTTP server that never answers the GET stream (hostile_http_server.py
``--hold-get``): a request waits for that answer once per session, at most a few seconds
(33dcd97), so the server cannot make every request wait, nor hang the session."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from agenthost.connection import open_session
from agenthost.transports.http import open_streamable_http_transport
from tests.peers.http_launch import PY, free_port, serve

pytestmark = pytest.mark.timeout(60)

HERE = Path(__file__).parent


async def test_a_held_get_stream_delays_the_first_requests_only_once() -> None:
    port = free_port()
    argv = [PY, str(HERE / "hostile_http_server.py"), "--port", str(port), "--hold-get"]
    async with serve(argv, port):
        started = time.monotonic()
        with trio.fail_after(20):
            async with (
                open_streamable_http_transport(
                    f"http://127.0.0.1:{port}/mcp", name="held"
                ) as transport,
                open_session(transport, name="held") as session,
            ):
                async with trio.open_nursery() as nursery:  # together: all wait at once
                    for n in range(4):
                        nursery.start_soon(session.call_tool, "echo", {"message": str(n)})
                first = time.monotonic() - started
                again = time.monotonic()
                for n in range(10):
                    await session.call_tool("echo", {"message": str(n)})
                rest = time.monotonic() - again
            closed = time.monotonic() - started
    print(f"first four calls {first:.2f} s, ten more {rest:.2f} s, closed at {closed:.2f} s")
    assert first < 8.0  # the one bounded wait (3 s), plus start-up on a loaded machine
    assert rest < 2.0  # no further waits
    assert closed - first - rest < 5.0  # the held GET does not hold the close
