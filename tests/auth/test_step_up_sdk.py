"""A step-up that cannot help fails that one call with AuthorizationError (issue 28).

The official SDK's authorization server (tests/peers/sdk_auth_server.py, fault
``insufficient-scope``) grants the scope the step-up asks for, and the server still
answers 403 ``insufficient_scope`` to the ``admin`` tool: after one re-authorization the
call fails with the server, the scope and the login command, and the session (or the
host) goes on serving the other tools.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

import agenthost
from agenthost.auth import URL_OPENER
from agenthost.errors import AuthorizationError
from tests.auth.test_oauth_sdk import auth_server, browser, cli_login, config, peer_log, run_cli

pytestmark = pytest.mark.timeout(90)

FAULT = "insufficient-scope"


def assert_step_up_error(error: AuthorizationError) -> None:
    message = str(error)
    assert "\n" not in message
    assert message.startswith("sdk: ") and "admin mcp" in message, message
    assert "`agenthost auth login sdk`" in message, message


async def test_a_step_up_that_keeps_failing_fails_only_that_call(tmp_path: Path) -> None:
    async with auth_server(tmp_path, fault=FAULT) as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url)) as session:
            with pytest.raises(AuthorizationError) as caught:
                await session.call_tool("admin", {})
            assert_step_up_error(caught.value)
            # The same session still serves what the token allows.
            result = await session.call_tool("echo", {"message": "still here"})
            assert "still here" in json.dumps(result.structured_content or str(result.content))
            # The scope set was asked for once: the next call fails without a browser.
            with pytest.raises(AuthorizationError):
                await session.call_tool("admin", {})
        log = peer_log(tmp_path)
        assert log.count("consent") == 2  # the login, and the one step-up
        # Refused before and after the step-up, and again on the retry (each time the
        # lean path's try and the auth flow's: 5 in all; the flow never asked again).
        assert log.count("insufficient_scope") == 5

        URL_OPENER.set(None)
        host_config = agenthost.HostConfig(
            servers=[config(url)],
            policy={
                "mode": "headless",
                "rules": [{"kind": "tool", "name": "*", "decision": "allow"}],
            },
        )
        async with agenthost.open_host(host_config) as host:
            with pytest.raises(AuthorizationError) as caught:
                await host.call_tool("sdk__admin", {})
            assert_step_up_error(caught.value)
            await host.call_tool("sdk__echo", {"message": "host"})


async def test_cli_a_step_up_that_cannot_help_is_one_line_and_exit_5(tmp_path: Path) -> None:
    async with auth_server(tmp_path, fault=FAULT) as url:
        cfg = tmp_path / "agenthost.toml"
        cfg.write_text(
            f'[servers.sdk]\nurl = "{url}"\n\n[policy]\nmode = "headless"\n\n'
            '[[policy.rules]]\nkind = "tool"\nserver = "sdk"\nname = "*"\ndecision = "allow"\n'
        )
        code, _, err = await cli_login(tmp_path, cfg)
        assert code == 0, err
        call = await trio.to_thread.run_sync(run_cli, tmp_path, cfg, "call", "sdk__admin", "{}")
        assert call.returncode == 5, call.stderr
        lines = call.stderr.strip().splitlines()
        assert len(lines) == 1, call.stderr
        assert "Traceback" not in call.stderr
        assert "admin mcp" in lines[0] and "`agenthost auth login sdk`" in lines[0], lines
