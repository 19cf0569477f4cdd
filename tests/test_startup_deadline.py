"""``timeouts.startup`` is one deadline for the whole connect attempt (issue 22).

The era probe and every fallback after it (a fresh HTTP transport, legacy HTTP+SSE, a
restarted stdio server, ``initialize`` on the same pipe) share it: a server that never
answers, or one slow enough that the probe and the fallback together overrun it, costs the
user the limit they set, not a multiple of it (issue 22 measured 10-11 s for
``startup = 5``). The error names that limit. Real peers: a TCP listener that accepts and
never answers, ``http_fault_server.py --delay``, and stdio processes that never answer or
exit on the probe.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
import trio

from agenthost.config.model import ServerConfig, Timeouts, TransportKind
from agenthost.connection import EraCache, connect
from agenthost.errors import AgentHostTimeout
from agenthost.protocol.revisions import Era
from tests.conftest import Command, free_port
from tests.peers.http_launch import PEERS, PY, serve

#: What the whole attempt may take beyond the limit: shutting the attempt down, and a
#: loaded machine (2 cores shared by several test runs; 3.6 s seen for a 2 s limit at a
#: load of 10). Before the fix every case below took twice the limit or more.
MARGIN = 2.0
#: The limit the never-answering peers are given.
LIMIT = 3.0


@asynccontextmanager
async def silent_listener() -> AsyncIterator[int]:
    """A TCP peer that accepts connections and reads forever, never writing a byte."""

    async def swallow(stream: trio.SocketStream) -> None:
        with trio.move_on_after(60):
            while await stream.receive_some(65536):
                pass

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, swallow, 0)
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


async def timed_failure(config: ServerConfig) -> tuple[float, AgentHostTimeout]:
    start = trio.current_time()
    with trio.fail_after(30), pytest.raises(AgentHostTimeout) as caught:
        async with connect(config, era_cache=EraCache(None)):
            pass
    return trio.current_time() - start, caught.value


def assert_names_the_limit(error: AgentHostTimeout, limit: float) -> None:
    text = str(error)
    assert f"within {limit:g}s" in text and "timeouts.startup" in text, text
    assert error.timeout == limit


@pytest.mark.parametrize("kind", ["http", "streamable-http", "sse", "websocket"])
async def test_a_remote_server_that_never_answers_costs_the_startup_limit(
    kind: TransportKind,
) -> None:
    # Before: http 4.9 s and streamable-http 4.2 s for startup = 2 (probe, then a fresh
    # initialize with a whole new limit; 6.8 s / 6.2 s for 3); sse and websocket 10 s
    # (the connect timeout).
    async with silent_listener() as port:
        scheme = "ws" if kind == "websocket" else "http"
        config = ServerConfig(
            name="mute",
            transport=kind,
            url=f"{scheme}://127.0.0.1:{port}/mcp",
            timeouts=Timeouts(startup=LIMIT),
        )
        elapsed, error = await timed_failure(config)
    assert elapsed < LIMIT + MARGIN, elapsed
    assert_names_the_limit(error, LIMIT)


def fault_argv(port: int, delay: float) -> list[str]:
    return [PY, str(PEERS / "http_fault_server.py"), "--port", str(port), "--delay", str(delay)]


async def test_a_slow_http_server_gets_one_limit_for_the_probe_and_the_fallback() -> None:
    # Each answer takes 2 s: the probe (answered 400: legacy) and the initialize after it
    # need 4 s, more than startup = 3. Before: connected after 4 s.
    port = free_port()
    async with serve(fault_argv(port, 2.0), port):
        url = f"http://127.0.0.1:{port}/mcp"
        config = ServerConfig(name="slow", transport="http", url=url, timeouts=Timeouts(startup=3))
        elapsed, error = await timed_failure(config)
        assert elapsed < 3 + MARGIN, elapsed
        assert_names_the_limit(error, 3)
        assert "initialize" in str(error)  # the stage it was in when time ran out
        # With room for both, the same server connects (in the initialize era).
        roomy = ServerConfig(name="slow", transport="http", url=url, timeouts=Timeouts(startup=9))
        with trio.fail_after(15):
            async with connect(roomy, era_cache=EraCache(None)) as session:
                assert session.era is Era.LEGACY


async def test_a_stdio_server_that_never_answers_costs_the_startup_limit() -> None:
    # Before: 6 s for startup = 3 (a 3 s probe, then initialize with another 3 s).
    mute = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    config = ServerConfig(
        name="mute",
        transport="stdio",
        command=mute[0],
        args=mute[1:],
        timeouts=Timeouts(startup=LIMIT),
    )
    elapsed, error = await timed_failure(config)
    assert elapsed < LIMIT + MARGIN, elapsed
    assert_names_the_limit(error, LIMIT)


async def test_the_restart_after_a_probe_shares_the_deadline(
    crashy_cmd: Callable[..., Command],
) -> None:
    # The server takes 1.2 s to read its input and exits on server/discover: the restart
    # spoken to with initialize would answer at 2.4 s, past startup = 2. Before: connected.
    command, args = crashy_cmd("--start-delay", "1.2", "--exit-on-unknown")
    config = ServerConfig(
        name="picky", transport="stdio", command=command, args=args, timeouts=Timeouts(startup=2.0)
    )
    elapsed, error = await timed_failure(config)
    assert elapsed < 2.0 + MARGIN, elapsed
    assert_names_the_limit(error, 2.0)


async def test_a_cached_era_that_timed_out_is_probed_again_next_time() -> None:
    # No time is left to re-probe within the one deadline; the next attempt must, or a
    # server that changed era would time out on the cached one for ever.
    mute = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    config = ServerConfig(
        name="mute",
        transport="stdio",
        command=mute[0],
        args=mute[1:],
        timeouts=Timeouts(startup=1.0),
    )
    cache = EraCache(None)
    cache.put(config, "2026-07-28")
    with trio.fail_after(10), pytest.raises(AgentHostTimeout) as caught:
        async with connect(config, era_cache=cache):
            pass
    assert "cached" in str(caught.value)
    assert cache.get(config) is None
