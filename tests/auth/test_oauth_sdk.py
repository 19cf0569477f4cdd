"""OAuth end to end against a real authorization server: the official SDK's (``mcp`` 2.x).

The peer (tests/peers/sdk_auth_server.py) is an MCP server behind the SDK's bearer
middleware with the SDK's authorization server endpoints on the same origin; consent is a
page that must be fetched and then posted. The "browser" is :func:`browser`, an httpx
client that opens the authorization URL, posts the consent form and follows the redirect
to agenthost's loopback, as a person's browser would.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import subprocess
from pathlib import Path

import httpx
import pytest
import trio

import agenthost
from agenthost.auth import URL_OPENER, FileTokenStore
from agenthost.errors import AuthorizationError
from tests.auth.sdk_peer import (
    auth_server,
    browser,
    cli_login,
    config,
    peer_log,
    revoke_access_token,
    saved,
    tokens_of,
)
from tests.forkserver import peer_python

pytestmark = pytest.mark.timeout(90)

AGENTHOST = [peer_python(), "-m", "agenthost"]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path: Path) -> None:
    os.environ["XDG_DATA_HOME"] = str(tmp_path / "data")
    os.environ["AGENTHOST_TOKEN_STORE"] = "file"


async def test_interactive_login_calls_and_the_saved_login_is_reused(tmp_path: Path) -> None:
    async with auth_server(tmp_path) as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url)) as session:
            tools = {tool.name for tool in await session.list_tools()}
            assert "echo" in tools
            result = await session.call_tool("echo", {"message": "hello"})
            assert "hello" in json.dumps(result.structured_content or str(result.content))
        assert peer_log(tmp_path).count("consent") == 1
        assert "token authorization_code" in peer_log(tmp_path)

        # The login is saved (0600, under the XDG data dir) and reused without a person.
        path = Path(os.environ["XDG_DATA_HOME"]) / "agenthost" / "tokens" / "sdk.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        state = await saved()
        assert state is not None and state["current"].startswith("http://127.0.0.1:")
        URL_OPENER.set(None)
        async with agenthost.connect(config(url)) as session:
            await session.call_tool("echo", {"message": "again"})
        assert peer_log(tmp_path).count("consent") == 1


@pytest.mark.parametrize("transport", ["sse", "http"])
async def test_legacy_sse_and_the_probe_log_in_too(tmp_path: Path, transport: str) -> None:
    """The flow is on the HTTP client both HTTP transports share: legacy HTTP+SSE (its GET
    stream and its POSTs) and the probing ``http`` kind."""
    async with auth_server(tmp_path, transport="sse") as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url, transport)) as session:
            result = await session.call_tool("echo", {"message": "over sse"})
            assert not result.is_error
        assert peer_log(tmp_path).count("consent") == 1


async def test_refresh_before_expiry_honours_rotation(tmp_path: Path) -> None:
    # Tokens live 2 s and are refreshed at half their life: past it, a request refreshes.
    async with auth_server(tmp_path, lifetime=2) as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url)) as session:
            first = tokens_of(await saved())
            assert first is not None and first["refresh_token"]
            await trio.sleep(1.1)
            await session.call_tool("echo", {"message": "one"})
            second = tokens_of(await saved())
            assert second is not None
        assert "refresh-rotated" in peer_log(tmp_path)
        # Rotation: the server consumed the old refresh token; we saved the new one.
        assert second["refresh_token"] != first["refresh_token"]
        assert second["access_token"] != first["access_token"]


async def test_refresh_on_401_after_the_server_revoked_the_access_token(tmp_path: Path) -> None:
    async with auth_server(tmp_path) as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url)) as session:
            await session.list_tools()
            # The server forgets the access token (as when it expires or is revoked early).
            await revoke_access_token(url)
            URL_OPENER.set(None)  # no person: only a refresh can save this call
            result = await session.call_tool("echo", {"message": "after revoke"})
            assert not result.is_error
        log = peer_log(tmp_path)
        assert "token refresh_token" in log
        assert log.count("consent") == 1
        # Each 401 was seen once on the wire: the first initialize (no token yet) and the
        # call with the revoked token; the lean path hands the refusal to the auth flow
        # and the retry carries the new token (it was 4: each went again through httpx).
        assert log.count("wire POST /mcp 401") == 2, log


async def test_concurrent_401s_refresh_once(tmp_path: Path) -> None:
    """Ten calls meet the 401 together: one refresh, the other nine reuse its token."""
    async with auth_server(tmp_path) as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url)) as session:
            await session.list_tools()
            await revoke_access_token(url)
            URL_OPENER.set(None)
            results: list[bool | None] = []

            async def call(n: int) -> None:
                result = await session.call_tool("echo", {"message": f"c{n}"})
                results.append(result.is_error)

            async with trio.open_nursery() as nursery:
                for n in range(10):
                    nursery.start_soon(call, n)
        assert results == [False] * 10
        log = peer_log(tmp_path)
        assert log.count("token refresh_token") == 1
        # No call is refused twice: the login's 401, then at most one per call.
        assert log.count("wire POST /mcp 401") <= 11, log


async def test_headless_without_a_login_fails_naming_the_login_command(tmp_path: Path) -> None:
    async with auth_server(tmp_path) as url:
        URL_OPENER.set(None)
        with pytest.raises(AuthorizationError) as caught:
            async with agenthost.connect(config(url)):
                pass
        message = str(caught.value)
        assert message.startswith("sdk: authorization failed:")
        assert "`agenthost auth login sdk`" in message
        assert "\n" not in message
        assert await saved() is None
        assert "consent" not in peer_log(tmp_path)


async def test_no_secret_in_logs_errors_or_audit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A full login + calls + refresh run: access and refresh tokens, codes and the
    registered client secret appear in no DEBUG log record, error or audit line."""
    caplog.set_level(logging.DEBUG)
    audit = tmp_path / "audit.jsonl"
    errors: list[str] = []
    async with auth_server(tmp_path, lifetime=2) as url:
        URL_OPENER.set(browser)
        host_config = agenthost.HostConfig(
            servers=[config(url)],
            policy={
                "mode": "headless",
                "audit": str(audit),
                "rules": [{"kind": "tool", "name": "*", "decision": "allow"}],
            },
        )
        async with agenthost.open_host(host_config) as host:
            for n in range(3):  # each call refreshes first (2 s tokens, past half their life)
                await trio.sleep(1.1)
                await host.call_tool("sdk__echo", {"message": f"call {n}"})
            try:
                await host.call_tool("sdk__nope", {})
            except agenthost.AgentHostError as exc:
                errors.append(str(exc))
        # A failed login's error, too (the saved tokens are forgotten, the server refuses).
        URL_OPENER.set(None)
        state = await saved()
        assert state is not None
        await FileTokenStore().delete("sdk")
        try:
            async with agenthost.connect(config(url)):
                pass
        except AuthorizationError as exc:
            errors.append(str(exc))
    secrets = [s for s in (tmp_path / "peer.secrets").read_text().splitlines() if s]
    assert len(secrets) >= 8  # a client secret, a code, 4 access + 4 refresh tokens
    assert peer_log(tmp_path).count("refresh-rotated") >= 3
    texts = [
        *(record.getMessage() for record in caplog.records),
        *(str(record.args) for record in caplog.records),
        *errors,
        audit.read_text(),
    ]
    assert len(caplog.records) > 20 and audit.stat().st_size > 0
    for secret in secrets:
        for text in texts:
            assert secret not in text


# --- the CLI: auth login / status / logout, and bad input (exit 5, nothing stored) -----------


def write_config(tmp_path: Path, url: str, oauth: str = "") -> Path:
    path = tmp_path / "agenthost.toml"
    section = f"[servers.sdk.oauth]\n{oauth}\n" if oauth else ""
    path.write_text(
        f'[servers.sdk]\nurl = "{url}"\n\n{section}[policy]\nmode = "headless"\n\n'
        '[[policy.rules]]\nkind = "tool"\nserver = "sdk"\nname = "echo"\ndecision = "allow"\n'
    )
    return path


def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), AGENTHOST_TOKEN_STORE="file")
    return env


def run_cli(tmp_path: Path, cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENTHOST, "--config", str(cfg), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(tmp_path),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )


async def test_cli_login_status_call_logout(tmp_path: Path) -> None:
    async with auth_server(tmp_path) as url:
        cfg = write_config(tmp_path, url)
        code, out, err = await cli_login(cfg, cli_env(tmp_path))
        assert code == 0, err
        assert out.startswith("sdk: logged in with http://127.0.0.1:"), out
        # Issue 27: the terminal says what it is waiting for, and how to stop waiting.
        assert re.search(r"waiting for the browser on 127\.0\.0\.1:\d+ \(Ctrl-C to cancel\)", err)
        status = await trio.to_thread.run_sync(run_cli, tmp_path, cfg, "auth", "status", "--json")
        assert status.returncode == 0, status.stderr
        (entry,) = json.loads(status.stdout)
        assert entry["logged_in"] and entry["refreshable"] and entry["scopes"] == ["mcp"]
        assert "token" not in json.dumps({k: v for k, v in entry.items() if k != "refreshable"})
        call = await trio.to_thread.run_sync(
            run_cli, tmp_path, cfg, "call", "sdk__echo", '{"message": "via cli"}', "--json"
        )
        assert call.returncode == 0, call.stderr
        assert "via cli" in call.stdout
        out_ = await trio.to_thread.run_sync(run_cli, tmp_path, cfg, "auth", "logout", "sdk")
        assert out_.returncode == 0 and out_.stdout.strip() == "sdk: logged out"
        call = await trio.to_thread.run_sync(
            run_cli, tmp_path, cfg, "call", "sdk__echo", '{"message": "x"}'
        )
        assert call.returncode == 5
        assert "`agenthost auth login sdk`" in call.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("fault", "needs_browser", "words"),
    [
        ("no-s256", False, "does not support PKCE with S256"),
        ("bad-issuer", False, "is not the expected"),
        # Another state is another login's answer: ignored, and said so at the timeout.
        ("bad-state", True, "not for this login, by their state, were ignored"),
        ("html-token", True, "text/html, not a JSON object"),
    ],
)
async def test_cli_bad_input_exit_5_one_line_nothing_stored(
    tmp_path: Path, fault: str, needs_browser: bool, words: str
) -> None:
    async with auth_server(tmp_path, fault=fault) as url:
        cfg = write_config(tmp_path, url, "login_timeout = 3" if fault == "bad-state" else "")
        code, _, err = await cli_login(cfg, cli_env(tmp_path), use_browser=needs_browser)
    assert code == 5, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("agenthost: sdk: authorization failed:"), err
    assert words in last
    assert "; " in last  # ... then what to do
    assert "Traceback" not in err
    assert not (tmp_path / "data" / "agenthost" / "tokens" / "sdk.json").exists()


async def test_cli_expired_refresh_token_exit_5_and_forgotten(tmp_path: Path) -> None:
    # 2 s tokens: the next command (a new process, over 1 s later) must refresh, and this
    # server refuses every refresh.
    async with auth_server(tmp_path, lifetime=2, fault="no-refresh") as url:
        cfg = write_config(tmp_path, url)
        code, _, err = await cli_login(cfg, cli_env(tmp_path))
        assert code == 0, err
        assert tokens_of(await saved()) is not None
        await trio.sleep(1.1)
        call = await trio.to_thread.run_sync(
            run_cli, tmp_path, cfg, "call", "sdk__echo", '{"message": "x"}'
        )
    assert call.returncode == 5, call.stderr
    last = call.stderr.strip().splitlines()[-1]
    assert "sdk" in last and "`agenthost auth login sdk`" in last
    assert "expired and could not be refreshed" in last
    assert tokens_of(await saved()) is None


# --- the library API: a program logging in (issue 28) ---------------------------------------


async def test_a_program_logs_in_through_connect_and_open_host(tmp_path: Path) -> None:
    """connect() and open_host() take the token store and the URL opener; nothing of the
    login lands in the default store, and the same store logs the host in without a
    person."""
    from agenthost.auth import MemoryTokenStore

    store = MemoryTokenStore()
    async with auth_server(tmp_path) as url:
        URL_OPENER.set(None)  # headless by default: only the argument opens the browser
        async with agenthost.connect(config(url), token_store=store, url_opener=browser) as s:
            result = await s.call_tool("echo", {"message": "from a program"})
            assert not result.is_error
        assert await store.load("sdk") and await saved() is None
        host_config = agenthost.HostConfig(
            servers=[config(url)],
            policy={
                "mode": "headless",
                "rules": [{"kind": "tool", "name": "*", "decision": "allow"}],
            },
        )
        async with agenthost.open_host(host_config, token_store=store) as host:
            await host.call_tool("sdk__echo", {"message": "host"})
        assert peer_log(tmp_path).count("consent") == 1
        # Without the store (and headless), the same server needs a login.
        with pytest.raises(agenthost.AuthorizationError):
            async with agenthost.connect(config(url)):
                pass


async def test_a_saved_login_is_seen_by_callers_racing_its_load(tmp_path: Path) -> None:
    """Two callers of a fresh ``OAuth`` at start: ``status()`` (which loads the saved
    state without the flow's lock) and a request's ``bearer()``. The one that finds the
    state "loaded" must find it in: before, ``_load`` said loaded before its read of the
    store, so ``bearer()`` saw no token (the request went out bare and, after the 401,
    into a new login) while a valid one was saved."""
    from agenthost.auth import OAuth

    store = FileTokenStore(tmp_path / "tokens")
    async with auth_server(tmp_path) as url:
        async with agenthost.connect(config(url), token_store=store, url_opener=browser) as s:
            assert not (await s.call_tool("echo", {"message": "log in"})).is_error
        saved_token = tokens_of(json.loads(await store.load("sdk") or "null"))
        assert saved_token is not None
        async with httpx.AsyncClient() as http:
            oauth = OAuth(server="sdk", url=url, http=http, store=store, opener=None)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(oauth.status)  # starts first, its read in a thread
                token = await oauth.bearer()
            assert token == saved_token["access_token"]
            assert (await oauth.status()).logged_in
    assert peer_log(tmp_path).count("consent") == 1


# --- issue 28: a step-up that cannot help fails that one call ---------------------------
#
# The SDK's authorization server (fault ``insufficient-scope``) grants the scope the
# step-up asks for, and the server still answers 403 ``insufficient_scope`` to ``admin``:
# after one re-authorization the call fails with the server, the scope and the login
# command, and the session (or the host) goes on serving the other tools.

STEP_UP_FAULT = "insufficient-scope"


def assert_step_up_error(error: AuthorizationError) -> None:
    message = str(error)
    assert "\n" not in message
    assert message.startswith("sdk: ") and "admin mcp" in message, message
    assert "`agenthost auth login sdk`" in message, message


async def test_a_step_up_that_keeps_failing_fails_only_that_call(tmp_path: Path) -> None:
    async with auth_server(tmp_path, fault=STEP_UP_FAULT) as url:
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
        # Refused before and after the step-up, and once for the second call: the flow
        # never asked again, and the lean path hands each refusal to it rather than
        # sending the request again through httpx (it was 5: issue 28).
        assert log.count("insufficient_scope") == 3
        assert log.count("wire POST /mcp 403") == 3

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
    async with auth_server(tmp_path, fault=STEP_UP_FAULT) as url:
        cfg = tmp_path / "agenthost.toml"
        cfg.write_text(
            f'[servers.sdk]\nurl = "{url}"\n\n[policy]\nmode = "headless"\n\n'
            '[[policy.rules]]\nkind = "tool"\nserver = "sdk"\nname = "*"\ndecision = "allow"\n'
        )
        code, _, err = await cli_login(cfg, cli_env(tmp_path))
        assert code == 0, err
        call = await trio.to_thread.run_sync(run_cli, tmp_path, cfg, "call", "sdk__admin", "{}")
        assert call.returncode == 5, call.stderr
        lines = call.stderr.strip().splitlines()
        assert len(lines) == 1, call.stderr
        assert "Traceback" not in call.stderr
        assert "admin mcp" in lines[0] and "`agenthost auth login sdk`" in lines[0], lines
