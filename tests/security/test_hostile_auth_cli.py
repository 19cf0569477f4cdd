"""Issue 28, the ``agenthost auth`` commands against a hostile authorization server: every
failure is one escaped line naming the server, exit 5, never a traceback (the CLI runs as a
subprocess; tests/security/hostile_auth.py plays the servers in the test's loop)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.forkserver import peer_python
from tests.security.hostile_auth import Answer, HostileAuth, hostile_auth

pytestmark = pytest.mark.timeout(90)

AGENTHOST = [peer_python(), "-m", "agenthost"]
REPO = Path(__file__).resolve().parents[2]


def write_config(tmp_path: Path, url: str, name: str = "victim", oauth: str = "") -> Path:
    path = tmp_path / "agenthost.toml"
    path.write_text(
        f'[servers."{name}"]\nurl = "{url}"\n' + (f'\n[servers."{name}".oauth]\n{oauth}')
    )
    return path


async def agenthost_cli(tmp_path: Path, cfg: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), AGENTHOST_TOKEN_STORE="file")
    with trio.fail_after(60):
        done = await trio.run_process(
            [*AGENTHOST, "--config", str(cfg), *args],
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=env,
            cwd=REPO,
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def one_line_exit_5(code: int, err: str, name: str = "victim") -> str:
    assert code == 5, err
    assert "Traceback" not in err and "ExceptionGroup" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"agenthost: {name}: authorization failed:"), err
    return last


def metadata(auth: HostileAuth, **fields: Any) -> Answer:
    issuer = auth.issuer("legit")
    doc = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "registration_endpoint": f"{issuer}/register",
        "code_challenge_methods_supported": ["S256"],
    }
    doc.update(fields)
    return Answer.json(doc)


BAD_URLS = [
    "http://127.0.0.1:1/a\x1b[2Jb",  # a control character
    "http://[::1/token",  # an unclosed IPv6 bracket
    "http://127.0.0.1:99999/token",  # a bad port
    "http://127.0.0.1:x/token",
    "https://exa mple.com/token",
]


@pytest.mark.parametrize(
    "field", ["token_endpoint", "registration_endpoint", "authorization_endpoint"]
)
@pytest.mark.parametrize("bad", BAD_URLS, ids=["ctrl", "bracket", "port", "port2", "space"])
async def test_m2_a_bad_url_in_metadata_is_one_line_exit_5(
    tmp_path: Path, field: str, bad: str
) -> None:
    async with hostile_auth("legit") as auth:
        auth.route(
            "/.well-known/oauth-authorization-server/legit",
            lambda seen: metadata(auth, **{field: bad}),
        )
        cfg = write_config(tmp_path, auth.url, oauth="login_timeout = 2\n")
        code, _, err = await agenthost_cli(tmp_path, cfg, "auth", "login", "victim", "--no-browser")
    last = one_line_exit_5(code, err)
    assert "\x1b" not in err
    assert field in last and "authorization server metadata" not in last


@pytest.mark.parametrize(
    "bad",
    [*BAD_URLS, "http://169.254.1.1/as"],
    ids=["ctrl", "bracket", "port", "port2", "space", "http"],
)
async def test_m2_m8_a_bad_authorization_server_url_in_the_prm(tmp_path: Path, bad: str) -> None:
    async with hostile_auth("legit") as auth:
        auth.named = bad
        cfg = write_config(tmp_path, auth.url)
        code, _, err = await agenthost_cli(tmp_path, cfg, "auth", "login", "victim", "--no-browser")
    last = one_line_exit_5(code, err)
    assert "\x1b" not in err
    if bad.startswith("http://169"):
        assert "https" in last and not any(s.path.startswith("/as") for s in auth.seen)


async def test_m8_plain_http_metadata_endpoints_off_loopback_are_refused(tmp_path: Path) -> None:
    async with hostile_auth("legit") as auth:
        auth.named = auth.issuer("legit")
        auth.route(
            "/.well-known/oauth-authorization-server/legit",
            lambda seen: metadata(auth, token_endpoint="http://example.com/token"),
        )
        cfg = write_config(tmp_path, auth.url)
        code, _, err = await agenthost_cli(tmp_path, cfg, "auth", "login", "victim", "--no-browser")
    last = one_line_exit_5(code, err)
    assert "token_endpoint" in last and "https" in last


async def test_m3_a_browser_that_never_returns_is_one_line_exit_5(tmp_path: Path) -> None:
    async with hostile_auth("legit") as auth:
        auth.named = auth.issuer("legit")
        cfg = write_config(tmp_path, auth.url, oauth="login_timeout = 1\n")
        code, _, err = await agenthost_cli(tmp_path, cfg, "auth", "login", "victim", "--no-browser")
    last = one_line_exit_5(code, err)
    assert "no answer from the browser within 1 s" in last


async def test_m3_a_failed_registration_is_one_line_exit_5(tmp_path: Path) -> None:
    async with hostile_auth("legit") as auth:
        auth.named = auth.issuer("legit")
        auth.route("/legit/register", lambda seen: Answer.json({"error": "nope"}, status=400))
        cfg = write_config(tmp_path, auth.url)
        code, _, err = await agenthost_cli(tmp_path, cfg, "auth", "login", "victim", "--no-browser")
    last = one_line_exit_5(code, err)
    assert "registration" in last


async def test_m1_server_text_is_escaped_in_login_and_status(tmp_path: Path) -> None:
    """The printed login URL carries a scope the server chose; status shows the token's
    scope: no escape sequence or bidi control reaches the terminal raw."""
    evil = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\u202eevil"
    async with hostile_auth("legit") as auth:
        auth.named = auth.issuer("legit")
        prm = {"resource": auth.url, "authorization_servers": [auth.named]}
        auth.route(
            "/.well-known/oauth-protected-resource",
            lambda seen: Answer.json({**prm, "scopes_supported": [evil]}),
        )
        auth.route(
            "/.well-known/oauth-authorization-server/legit",
            lambda seen: metadata(
                auth, authorization_endpoint=auth.issuer("legit") + "/authorize\u202e\u2066"
            ),
        )
        cfg = write_config(tmp_path, auth.url, oauth="login_timeout = 1\n")
        code, _, err = await agenthost_cli(tmp_path, cfg, "auth", "login", "victim", "--no-browser")
        one_line_exit_5(code, err)
        assert "/legit/authorize" in err
        # A saved login whose scope and issuer were chosen by the server.
        state = {
            "version": 1,
            "url": auth.url,
            "resource": auth.url,
            "current": auth.issuer("legit") + "\u202e",
            "issuers": {
                auth.issuer("legit") + "\u202e": {
                    "token_endpoint": auth.issuer("legit") + "/token",
                    "client": None,
                    "tokens": {
                        "access_token": "a" * 20,
                        "refresh_token": None,
                        "expires_at": None,
                        "scope": evil,
                    },
                    "scopes": None,
                    "auth_methods": None,
                }
            },
        }
        store = tmp_path / "data" / "agenthost" / "tokens"
        store.mkdir(parents=True, exist_ok=True)
        (store / "victim.json").write_text(json.dumps(state))
        code, out, err2 = await agenthost_cli(tmp_path, cfg, "auth", "status")
        assert code == 0, err2
        assert "logged in" in out
        code, out_json, err3 = await agenthost_cli(tmp_path, cfg, "auth", "status", "--json")
    for text in (err, out, err2, out_json, err3):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, repr(text)


async def test_m9_a_server_name_with_a_space_and_the_file_store(tmp_path: Path) -> None:
    async with hostile_auth("legit") as auth:
        auth.named = auth.issuer("legit")
        cfg = write_config(tmp_path, auth.url, name="my server", oauth="login_timeout = 1\n")
        code, _, err = await agenthost_cli(tmp_path, cfg, "auth", "status", "my server")
        assert code == 0, err
        code, _, err = await agenthost_cli(
            tmp_path, cfg, "auth", "login", "my server", "--no-browser"
        )
    one_line_exit_5(code, err, "my server")
