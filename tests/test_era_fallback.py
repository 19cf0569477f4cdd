"""``auto`` and servers whose tools ask the pre-2026 way (issue 13, the risk of ``auto``).

The peer (``tests/peers/backchannel_server.py``) is the official SDK's ``MCPServer`` with
tools that call ``ctx.session.create_message`` / ``ctx.elicit`` / ``ctx.session.list_roots``
directly. It answers ``server/discover``, so ``auto`` settles on 2026-07-28, where the SDK
refuses those requests (``NoBackChannelError``, -32600). agenthost recognises that error:
on its own a session raises :class:`BackChannelRequired` naming the fix; a host in
``auto`` mode reconnects the server in the initialize era (cache, one WARNING) and repeats
the call when the tool declares that doing so adds no effect.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.config.model import ServerConfig
from agenthost.connection import EraCache, connect, default_era_cache
from agenthost.errors import BackChannelRequired
from agenthost.host.host import Host
from agenthost.protocol.revisions import Era
from tests.conftest import PEER_LOG_ENV, PEERS_DIR, free_port
from tests.forkserver import peer_python
from tests.helpers import FakeAnthropic, Recorder, host_with, sampling_policy, text_of
from tests.peers.http_launch import serve

PEER = PEERS_DIR / "backchannel_server.py"


def config(peer_log: Path, *args: str, **kwargs: Any) -> ServerConfig:
    return ServerConfig(
        name="bc",
        transport="stdio",
        command=peer_python(),
        args=(str(PEER), *args),
        env={PEER_LOG_ENV: str(peer_log)},
        **kwargs,
    )


def ran(peer_log: Path) -> list[str]:
    return [line.removeprefix("ran ") for line in peer_log.read_text().splitlines()]


@asynccontextmanager
async def host_for(server: ServerConfig, tmp_path: Path) -> AsyncIterator[Host]:
    async with host_with([server], sampling_policy(tmp_path), fake=FakeAnthropic()) as host:
        yield host


async def test_a_session_names_the_fix(peer_log: Path) -> None:
    """Without a host (agenthost.connect), the SDK's error becomes BackChannelRequired:
    the server's code and words kept, the fix named."""
    async with connect(
        config(peer_log), handlers=Recorder().handlers(), era_cache=EraCache(None)
    ) as session:
        assert session.era is Era.MODERN
        with pytest.raises(BackChannelRequired) as info:
            await session.call_tool("ask", {"prompt": "hi"})
        error = info.value
        assert (error.code, error.ask, error.request, error.name) == (
            -32600,
            "sampling/createMessage",
            "tools/call",
            "ask",
        )
        assert 'protocol = "legacy"' in error.message
        assert "no back-channel" in error.message  # the server's own words
        assert text_of(await session.call_tool("echo", {"message": "ok"})) == "ok"
    # pinned to legacy, the same tools work
    async with connect(
        config(peer_log, protocol="legacy"),
        handlers=Recorder().handlers(),
        era_cache=EraCache(None),
    ) as session:
        assert text_of(await session.call_tool("ask", {"prompt": "hi"})) == "sampled: hi"


async def test_host_reconnects_in_the_initialize_era_and_repeats_a_read_only_call(
    peer_log: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = config(peer_log)
    with caplog.at_level(logging.WARNING, logger="agenthost.host.supervisor"):
        async with host_for(server, tmp_path) as host:
            first = host.session("bc")
            assert first.era is Era.MODERN
            result = await host.call_tool("bc__ask", {"prompt": "Capital of France?"})
            assert not result.is_error
            session = host.session("bc")
            assert session is not first and first.closed
            assert (session.era, session.revision) == (Era.LEGACY, "2025-11-25")
            assert session.learned == (
                "cached (tools/call 'ask' sent sampling/createMessage as a server request)"
            )
            # the tool ran once in each era; an idempotent one now runs once
            roots = await host.call_tool("bc__my_roots", {})
            assert json.loads(text_of(roots)) == [r.uri for r in host.roots_for("bc")]
            assert ran(peer_log) == ["ask", "ask", "my_roots"]
            status = host.status()[0]
            assert status.restarts == 0 and status.last_error is None
            assert (status.era, status.learned) == ("legacy", session.learned)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].getMessage().startswith("bc: the server speaks MCP 2026-07-28")
    assert 'protocol = "legacy"' in warnings[0].getMessage()
    # the era cache keeps it, with the reason: the next start does not try 2026-07-28
    assert default_era_cache().get(server) == (Era.LEGACY, "2025-11-25")
    assert default_era_cache().reason(server) == (
        "tools/call 'ask' sent sampling/createMessage as a server request"
    )
    peer_log.write_text("")
    async with host_for(server, tmp_path / "again") as host:
        assert host.session("bc").era is Era.LEGACY
        assert text_of(await host.call_tool("bc__ask", {"prompt": "x"}))
    assert ran(peer_log) == ["ask"]


async def test_a_tool_that_may_have_acted_is_not_repeated(peer_log: Path, tmp_path: Path) -> None:
    """note_and_ask records a note, then asks: repeating it would record the note twice.
    The server is switched all the same, and the error says to call again."""
    (tmp_path / "policy").mkdir()
    async with host_for(config(peer_log), tmp_path / "policy") as host:
        with pytest.raises(BackChannelRequired) as info:
            await host.call_tool("bc__note_and_ask", {"prompt": "x"})
        assert "was not repeated" in info.value.message
        assert "call it again" in info.value.message
        assert ran(peer_log) == ["note_and_ask"]
        assert host.session("bc").era is Era.LEGACY
        result = await host.call_tool("bc__note_and_ask", {"prompt": "x"})
        assert not result.is_error
        assert ran(peer_log) == ["note_and_ask", "note_and_ask"]


async def test_no_fallback_when_pinned_or_when_the_server_refuses_initialize(
    peer_log: Path, tmp_path: Path
) -> None:
    (tmp_path / "pinned").mkdir()
    async with host_for(config(peer_log, protocol="2026-07-28"), tmp_path / "pinned") as host:
        with pytest.raises(BackChannelRequired) as info:
            await host.call_tool("bc__ask", {"prompt": "x"})
        assert 'set protocol = "legacy"' in info.value.message
        assert host.session("bc").era is Era.MODERN
    # modern-only: the switch is tried once, initialize is refused, the probe finds
    # 2026-07-28 again, and the error says the server itself must change
    (tmp_path / "modern").mkdir()
    async with host_for(config(peer_log, "--modern-only"), tmp_path / "modern") as host:
        for _ in range(2):
            with pytest.raises(BackChannelRequired) as info:
                await host.call_tool("bc__ask", {"prompt": "x"})
            assert "speaks only 2026-07-28" in info.value.message
            assert "report this to its author" in info.value.message
            assert host.session("bc").era is Era.MODERN
    log = peer_log.read_text().splitlines()
    assert sum(line.startswith("refused initialize") for line in log) == 1


async def test_fallback_over_streamable_http(peer_log: Path, tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, str(PEER), "streamable-http", "--port", str(port)]
    async with serve(argv, port, env={PEER_LOG_ENV: str(peer_log)}):
        server = ServerConfig(name="bc", transport="http", url=f"http://127.0.0.1:{port}/mcp")
        async with host_for(server, tmp_path) as host:
            assert host.session("bc").era is Era.MODERN
            result = await host.call_tool("bc__ask", {"prompt": "over http"})
            assert not result.is_error
            session = host.session("bc")
            assert session.era is Era.LEGACY
            assert session.learned is not None and session.learned.startswith("cached (")
    assert ran(peer_log) == ["ask", "ask"]


async def test_concurrent_calls_share_one_switch(
    peer_log: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Three read-only calls on 2026-07-28 at once: the first failure switches the
    server, a call still running on the old session is cut off with it (it failed with
    TransportClosed before the host repeated such calls too), and each call completes
    on the initialize-era session; one switch, one WARNING."""
    results: list[str] = []
    with caplog.at_level(logging.WARNING, logger="agenthost.host.supervisor"):
        async with host_for(config(peer_log), tmp_path) as host:

            async def one(i: int) -> None:
                result = await host.call_tool("bc__ask", {"prompt": f"q{i}"})
                results.append(text_of(result))

            async with trio.open_nursery() as nursery:
                for i in range(3):
                    nursery.start_soon(one, i)
            assert host.session("bc").era is Era.LEGACY
    assert sorted(results) == sorted(results[:1] * 3) and results[0]
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    assert 3 < ran(peer_log).count("ask") <= 6  # some ran on 2026-07-28, all on legacy
