"""A server that quotes our secrets back (issue 14, item 7): they never leave the process.

The real ``agenthost`` command runs in a subprocess against ``hostile_http_server.py``,
which answers with JSON-RPC errors quoting the ``Authorization`` and ``X-Api-Key`` headers
and the URL's query (``?api_key=${KEY}``) it received. Everything the command prints
(stdout with ``--json``, stderr with ``-vvv``: our logs and httpx's) must hold none of the
three values. Then the mechanism itself: a value registered at run time (as an OAuth
token will be) is scrubbed from log records of any logger, tracebacks included.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pytest
import trio

from agenthost.connection import open_session
from agenthost.errors import JSONRPCError
from agenthost.redaction import (
    REDACTED,
    add_named_secret,
    add_runtime_secret,
    add_secret,
    add_secrets_of_url,
    isolated,
    redact,
    redact_json,
)
from agenthost.transports.http import open_streamable_http_transport
from tests.peers.http_launch import PY, free_port, serve

pytestmark = pytest.mark.timeout(120)

HERE = Path(__file__).parent
REPO = HERE.parents[1]
TOKEN = "tok-9e8d7c6b5a4f3e2d1c0b"
API_KEY = "xk-7f3a9c2e1b4d5f60aa"
QUERY_KEY = "qk-0a1b2c3d4e5f6a7b8c"
SECRETS = (TOKEN, API_KEY, QUERY_KEY)
ENV = {"HOSTILE_TOKEN": TOKEN, "HOSTILE_KEY": API_KEY, "HOSTILE_QUERY_KEY": QUERY_KEY}


def write_config(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "agenthost.toml"
    path.write_text(
        f"""
[servers.hostile]
url = "http://127.0.0.1:{port}/mcp?api_key=${{HOSTILE_QUERY_KEY}}"
transport = "streamable-http"
headers = {{ Authorization = "Bearer ${{HOSTILE_TOKEN}}", X-Api-Key = "${{HOSTILE_KEY}}" }}

[servers.hostile.restart]
enabled = false

[policy]
mode = "headless"
preset = "unsafe-allow-everything"
"""
    )
    return path


async def agenthost(config: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(ENV)
    proc = await trio.run_process(
        [sys.executable, "-m", "agenthost", "--config", str(config), *args],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=env,
        cwd=REPO,
    )
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def assert_clean(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"secret {secret[:6]}... leaked: {text[:2000]}"


async def test_call_json_and_verbose_logs_never_show_echoed_secrets(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path, port)
    async with serve([PY, str(HERE / "hostile_http_server.py"), "--port", str(port)], port):
        code, out, err = await agenthost(config, "call", "hostile__quote", "{}", "--json", "-vvv")
        assert code == 1, err[-2000:]
        error = json.loads(out)["error"]
        assert "rejected credentials" in error and REDACTED in error
        assert "HTTP Request: POST" in err  # httpx did log the URL, query and all
        assert_clean(out, err)
        # Without -v: the warning lines a user sees by default.
        code, out, err = await agenthost(config, "call", "hostile__quote", "{}")
        assert code == 1
        assert_clean(out, err)


async def test_check_and_servers_json_last_error_is_redacted(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path, port)
    argv = [PY, str(HERE / "hostile_http_server.py"), "--port", str(port), "--reject-init"]
    async with serve(argv, port):
        for command in ("check", "servers"):
            code, out, err = await agenthost(config, command, "--json", "-v")
            rows = json.loads(out)
            assert rows[0]["state"] == "failed", rows
            assert "who are you?" in rows[0]["last_error"]
            assert REDACTED in rows[0]["last_error"]
            assert_clean(out, err)
            assert code == 5  # a configured server did not start (issue 17: servers too)


async def test_the_exception_itself_carries_no_secret(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp?api_key={QUERY_KEY}"
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Api-Key": API_KEY}
    async with (
        serve([PY, str(HERE / "hostile_http_server.py"), "--port", str(port)], port),
        open_streamable_http_transport(url, name="hostile", headers=headers) as transport,
        open_session(transport, name="hostile") as session,
    ):
        with pytest.raises(JSONRPCError) as info:
            await session.call_tool("quote", {})
        logging.getLogger("test").warning("the call failed: %s", info.value)
    error = info.value
    assert_clean(str(error), repr(error), json.dumps(error.data), error.message, caplog.text)
    assert error.data["x-api-key"] == REDACTED
    assert error.data["query"] == f"api_key={REDACTED}"


def test_a_value_registered_at_run_time_is_scrubbed_from_any_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = "oauth-access-token-5f4e3d2c1b0a"
    logger = logging.getLogger("some.library")
    caplog.set_level(logging.DEBUG)
    add_secret(runtime)
    logger.debug("got token %s", runtime)
    try:
        raise RuntimeError(f"refresh failed for {runtime}")
    except RuntimeError:
        logger.exception("oops")
    assert runtime not in caplog.text
    assert caplog.text.count(REDACTED) >= 2  # the message, and the exception's line
    # Short values are not secrets (hiding "true" would garble every line).
    add_secret("true")
    assert redact("true") == "true"
    # A bearer value registers its token too, so a server quoting the token alone is caught.
    add_secret("Bearer abcdefgh12345678")
    assert redact("token abcdefgh12345678 refused") == f"token {REDACTED} refused"
    assert redact_json({"k": ["abcdefgh12345678", 1, None]}) == {"k": [REDACTED, 1, None]}


def test_plain_settings_are_not_secrets_and_named_ones_are() -> None:
    """Regression (CI of stop 30): every env, header and URL query value was registered,
    so ``?sslmode=require`` or ``MODE=require`` scrubbed "require" out of every text."""
    add_secrets_of_url("postgresql://u:pw-1x9z@db.example/app?sslmode=require&api_key=plainword")
    add_named_secret("MODE", "require")
    add_named_secret("Accept", "application/json")
    add_named_secret("DATA_DIR", "/srv/data/files")
    add_named_secret("PORT", "8080")
    add_named_secret("DB_PASSWORD", "swordfish")
    add_named_secret("SMTP_PW", "hunter")
    add_named_secret("OTHER", "Zx81-kept-secret")
    text = "requires application/json in /srv/data/files on 8080"
    assert redact(text) == text
    assert redact("pw-1x9z plainword swordfish Zx81-kept-secret hunter") == " ".join([REDACTED] * 5)


def test_a_short_value_a_server_chose_is_not_registered() -> None:
    """A server picks its session id: a common word registered as a secret would hide
    that word in every consent prompt and in other servers' text."""
    add_runtime_secret("delete")
    add_runtime_secret("delete_repository")
    assert redact("delete files") == "delete files"
    assert redact("delete_repository now") == f"{REDACTED} now"
    # An OAuth token is a credential: registered from the usual 6 characters.
    add_runtime_secret("tok-9x2", credential=True)
    assert redact("Bearer tok-9x2") == f"Bearer {REDACTED}"


def test_isolated_forgets_what_was_registered_inside() -> None:
    add_secret("kept-outside-1234")
    with isolated():
        add_secret("inside-only-5678")
        add_runtime_secret("runtime-inside-0123456789")
        assert redact("inside-only-5678 runtime-inside-0123456789") == f"{REDACTED} {REDACTED}"
    assert redact("inside-only-5678 runtime-inside-0123456789 kept-outside-1234") == (
        f"inside-only-5678 runtime-inside-0123456789 {REDACTED}"
    )
