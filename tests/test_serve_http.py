"""``agenthost serve --http``: Streamable HTTP at /mcp, driven by the official SDK client.

``agenthost serve --http 127.0.0.1:0`` runs as a subprocess (the port it got is read from
its stderr); the SDK client (tests/peers/sdk_client.py) connects over HTTP in both eras;
raw HTTP requests check the DNS-rebinding and bearer-token rules; SIGTERM ends it all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from agenthost.serve.http import MAX_SESSIONS
from tests.forkserver import peer_python
from tests.helpers import (
    ACCEPT,
    AGENTHOST,
    REPO,
    alive,
    check_ts_progress,
    initialize_request,
    serving_http,
)

Command = tuple[str, list[str]]
SDK_CLIENT = REPO / "tests" / "peers" / "sdk_client.py"
INIT = initialize_request()


def _config(tmp_path: Path, server: Command, policy: str) -> Path:
    config = tmp_path / "agenthost.toml"
    config.write_text(
        f"[servers.sdk]\ncommand = {json.dumps(server[0])}\nargs = {json.dumps(server[1])}\n\n"
        + policy
    )
    return config


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(extra)
    return env


@contextmanager
def _serving(config: Path, bind: str = "127.0.0.1:0", **env: str) -> Iterator[tuple[str, Any]]:
    """The gateway for tests of what it serves: a token when the test gives one, else
    ``--no-auth`` (the clients here send no token; authentication is tested on its own)."""
    auth = () if "AGENTHOST_SERVE_TOKEN" in env else ("--no-auth",)
    with serving_http(config, *auth, bind=bind, env=_env(**env)) as served:
        yield served.url, served.proc


def _drive(url: str, scenario: str, mode: str, **env: str) -> dict[str, Any]:
    proc = subprocess.run(
        [peer_python(), str(SDK_CLIENT), scenario, mode, "--", url],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(**env),
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_both_eras_and_consent_over_http_then_sigterm(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command], node_bin: Callable[[], str]
) -> None:
    config = _config(
        tmp_path,
        sdk_server_cmd(),
        "[policy]\n"
        'rules = [\n  {kind = "tool", decision = "ask", server = "*", name = "echo"},\n'
        '  {kind = "tool", decision = "deny", server = "*", name = "fail"},\n'
        '  {kind = "tool", decision = "allow", server = "*", name = "*"},\n]\n',
    )
    with _serving(config) as (url, proc):
        # Legacy, in a session: the consent form reaches the client on the POST's stream.
        seen = _drive(url, "consent", "legacy", ANSWER="allow once")
        assert seen["protocol_version"] == "2025-11-25"
        assert seen["echo"]["content"] == [{"type": "text", "text": "hello"}]
        assert len([f for f in seen["forms"] if "decision" in str(f["schema"])]) == 2
        assert "denied by agenthost's policy" in seen["fail"]["content"][0]["text"]
        assert "Ada" in seen["elicit"]["content"][0]["text"]
        # 2026-07-28, stateless: no session; the form comes as an InputRequiredResult and
        # the answer in the retry (another POST).
        modern = _drive(url, "echo", "2026-07-28", ANSWER="allow once")
        assert modern["protocol_version"] == "2026-07-28"
        assert "echo" in modern["tools"]
        assert modern["echo"]["content"] == [{"type": "text", "text": "bridged"}]
        assert len(modern["forms"]) == 1
        # The TypeScript SDK client over HTTP: progress and cancellation; it declares no
        # elicitation, so the "ask" for echo is answered headless.
        ts = subprocess.run(
            [node_bin(), str(REPO / "tests" / "peers" / "ts_client.mjs"), url],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
            cwd=REPO,
        )
        assert ts.returncode == 0, ts.stderr[-3000:]
        ts_seen = json.loads(ts.stdout)
        check_ts_progress(ts_seen, [1, 2, 3])
        assert ts_seen["cancelled"] is True
        assert "headless" in ts_seen["echo"]["content"][0]["text"]
        upstream = [
            int(pid)
            for pid in subprocess.run(
                ["pgrep", "-f", "sdk_server.py", "-P", str(proc.pid)],
                capture_output=True,
                text=True,
            ).stdout.split()
        ]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert upstream and not any(alive(pid) for pid in upstream)


def test_host_origin_and_token_are_checked(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    config = _config(
        tmp_path, sdk_server_cmd(), '[policy]\nmode = "headless"\npreset = "headless-readonly"\n'
    )
    token = "s3cret-" + "k" * 32  # a token is 32 characters at least
    with _serving(config, AGENTHOST_SERVE_TOKEN=token) as (url, _):
        ok = {**ACCEPT, "authorization": f"Bearer {token}"}
        assert httpx.post(url, json=INIT, headers=ACCEPT).status_code == 401
        assert (
            httpx.post(url, json=INIT, headers={**ok, "authorization": "Bearer x"}).status_code
            == 401
        )
        rebound = httpx.post(url, json=INIT, headers={**ok, "host": "evil.example:80"})
        assert rebound.status_code == 421
        cross = httpx.post(url, json=INIT, headers={**ok, "origin": "http://evil.example"})
        assert cross.status_code == 403
        good = httpx.post(url, json=INIT, headers=ok)
        assert good.status_code == 200
        assert good.headers["mcp-session-id"]
        assert '"protocolVersion":"2025-06-18"' in good.text
        stale = httpx.post(url, json=INIT | {"id": 2}, headers={**ok, "mcp-session-id": "nope"})
        assert stale.status_code == 404
        # Sessions are bounded: clients that never DELETE make the oldest give way.
        first = good.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
        assert (
            httpx.post(url, json=ping, headers={**ok, "mcp-session-id": first}).status_code == 200
        )
        with httpx.Client(headers=ok) as client:
            for _ in range(MAX_SESSIONS):
                assert client.post(url, json=INIT).status_code == 200
            gone = client.post(url, json=ping, headers={"mcp-session-id": first})
            assert gone.status_code == 404
        assert httpx.get(url.removesuffix("/mcp") + "/other", headers=ok).status_code == 404


def test_a_non_loopback_bind_needs_a_token(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    config = _config(tmp_path, sdk_server_cmd(), "")
    proc = subprocess.run(
        [*AGENTHOST, "--config", str(config), "serve", "--http", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert "AGENTHOST_SERVE_TOKEN" in proc.stderr
    assert "Traceback" not in proc.stderr


pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_an_upstream_ask_goes_to_the_client_whose_call_it_serves(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command], mode: str
) -> None:
    """Two SDK clients at once: A's call makes the (legacy) upstream elicit, log and report
    progress after B spoke last; the form, the log line and the progress reach A only
    (a 2026-07-28 A gets the form as its request's InputRequiredResult)."""
    server = sdk_server_cmd()
    config = _config(
        tmp_path,
        server,
        '[policy]\npreset = "unsafe-allow-everything"\n',
    )
    config.write_text(config.read_text().replace("[policy]", 'protocol = "legacy"\n\n[policy]', 1))
    with _serving(config) as (url, _):
        proc = subprocess.run(
            [
                sys.executable,
                str(REPO / "tests" / "peers" / "two_clients.py"),
                url,
                str(tmp_path / "gate"),
                mode,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
            cwd=REPO,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    a, b = seen["A"], seen["B"]
    assert a["forms"] == ["Who opened the gate?"] and b["forms"] == []
    assert json.loads(a["result"]["content"][0]["text"])["content"]["name"] == "A"
    assert a["progress"] == [1.0]
    assert "notifications/progress" not in b["notifications"]
    assert any("the gate opened" in line for line in a["logs"])
    assert b["logs"] == [] and "notifications/message" not in b["notifications"]


def test_resource_updates_over_http_both_eras(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    """The readme's update reaches a 2026-07-28 client on the listen stream that named it
    (not the pixel's), and a legacy client that sent resources/subscribe, over HTTP."""
    config = _config(
        tmp_path,
        sdk_server_cmd(),
        '[policy]\nmode = "headless"\npreset = "unsafe-allow-everything"\n',
    )
    with _serving(config) as (url, _):
        modern = _drive(url, "watch", "2026-07-28")
        legacy = _drive(url, "watch", "legacy")
    assert modern["honoured_one"]["resourceSubscriptions"] == ["text://readme"]
    assert modern["stream_readme"] == ["ResourceUpdated text://readme"]
    assert modern["stream_pixel"] == []
    assert "notifications/resources/updated" in legacy["notifications"]
