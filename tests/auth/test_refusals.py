"""What a refusal the OAuth flow cannot fix ends, on every HTTP path (issue 28): one
request, or the session.

Against the SDK authorization-server peer (tests/peers/sdk_auth_server.py): a step-up
that cannot help fails only what needed it (a legacy HTTP+SSE POST; the Streamable HTTP
GET stream, without which requests go on), while a login that is dead for everything
ends the session with one line naming ``agenthost auth login SERVER``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

import agenthost
from agenthost.auth import URL_OPENER
from agenthost.errors import AuthorizationError, RequestUnauthorized
from tests.auth.sdk_peer import auth_server, browser, config, peer_log, revoke_access_token
from tests.peers.http_launch import free_port

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path: Path) -> None:
    os.environ["XDG_DATA_HOME"] = str(tmp_path / "data")
    os.environ["AGENTHOST_TOKEN_STORE"] = "file"


async def test_legacy_sse_a_step_up_that_cannot_help_fails_only_that_call(
    tmp_path: Path,
) -> None:
    async with auth_server(tmp_path, fault="insufficient-scope", transport="sse") as url:
        URL_OPENER.set(browser)
        # One loopback port: the step-up reuses the registered client, as the SDK's SSE
        # server requires (a session answers only the client that opened it: 404).
        settings = {"redirect_port": free_port()}
        async with agenthost.connect(config(url, "sse", **settings)) as session:
            with pytest.raises(RequestUnauthorized) as caught:
                await session.call_tool("admin", {})
            message = str(caught.value)
            assert "\n" not in message and "step-up to scope admin mcp failed" in message
            assert "`agenthost auth login sdk`" in message, message
            result = await session.call_tool("echo", {"message": "still here"})
            assert not result.is_error
        log = peer_log(tmp_path)
    # The step-up under the registered client is refused by the authorization server
    # (the client was registered for ``mcp`` only): that call fails, nothing else.
    assert log.count("consent") == 1, log
    assert log.count("insufficient_scope") == 1, log


async def test_a_get_stream_only_a_step_up_could_open_does_not_end_the_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The server refuses the stream of server-initiated messages for want of a scope the
    step-up cannot get: requests go on without the stream (it ended the transport)."""
    async with auth_server(tmp_path, fault="get-insufficient-scope") as url:
        URL_OPENER.set(browser)
        # The initialize era: 2026-07-28 has no GET stream.
        # One loopback port: the step-up reuses the registered client (the SDK's server
        # answers a session only for the client that opened it: 404 otherwise).
        server = attrs.evolve(config(url, redirect_port=free_port()), protocol="legacy")
        with caplog.at_level(logging.WARNING, logger="agenthost"):
            async with agenthost.connect(server) as session:
                for n in range(3):
                    result = await session.call_tool("echo", {"message": f"m{n}"})
                    assert not result.is_error
        log = peer_log(tmp_path)
    # The step-up is refused (the client was registered for ``mcp`` only): the stream
    # is given up, the session goes on.
    assert log.count("insufficient_scope GET") == 1, log
    assert log.count("consent") == 1
    assert "going on without the stream of server-initiated messages" in caplog.text
    assert "step-up to scope admin mcp failed" in caplog.text


async def test_legacy_sse_a_dead_login_ends_the_session_with_one_line(tmp_path: Path) -> None:
    """The access token is revoked, the refresh refused, and the person gone (the login
    times out): nothing more can work, so the session ends with the line naming the login command,
    and no later call goes to the server to be refused again."""
    person = [browser]

    async def opener(server: str, url: str) -> None:
        if person:
            await person[0](server, url)

    async with auth_server(tmp_path, fault="no-refresh", transport="sse") as url:
        URL_OPENER.set(opener)
        # The first login (the person is there) must fit in this too: 1 s failed under CI
        # load at the connect; the dead login then waits all of it.
        async with agenthost.connect(config(url, "sse", login_timeout=6.0)) as session:
            await session.list_tools()
            await revoke_access_token(url)
            person.clear()  # gone: the login the refused refresh leads to never ends
            with pytest.raises(AuthorizationError) as caught:
                await session.call_tool("echo", {"message": "x"})
            refused = [line for line in peer_log(tmp_path) if line.endswith(" 401")]
            with pytest.raises(AuthorizationError) as again:
                await session.call_tool("echo", {"message": "y"})
            await trio.testing.wait_all_tasks_blocked()
            assert [line for line in peer_log(tmp_path) if line.endswith(" 401")] == refused
    for error in (caught.value, again.value):
        message = str(error)
        assert "\n" not in message, message
        assert "no answer from the browser" in message, message
        assert "`agenthost auth login sdk`" in message, message
