"""The SDK authorization-server peer (tests/peers/sdk_auth_server.py) as the OAuth tests
use it: run it, act as the person's browser, read what it logged and what we saved."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import trio

from agenthost.auth import FileTokenStore, OAuthSettings
from agenthost.config.model import ServerConfig
from tests.forkserver import peer_python
from tests.peers.http_launch import PEERS, PY, free_port, serve

__all__ = [
    "SERVER",
    "auth_server",
    "browser",
    "cli_login",
    "config",
    "peer_log",
    "revoke_access_token",
    "saved",
    "tokens_of",
]

SERVER = str(PEERS / "sdk_auth_server.py")


@asynccontextmanager
async def auth_server(
    tmp_path: Path,
    *,
    lifetime: int = 3600,
    fault: str | None = None,
    transport: str = "streamable-http",
    dpop: str | None = None,
    tls: tuple[Path, Path] | None = None,
) -> AsyncIterator[str]:
    """Run the SDK peer (``dpop``: its ``--dpop`` mode; ``tls``: a certificate chain for
    ``localhost`` and its key, to serve HTTPS); yields its MCP URL. Observations land in
    ``tmp_path/peer.log``."""
    port = free_port()
    argv = [peer_python(), SERVER, "--port", str(port), "--token-lifetime", str(lifetime)]
    argv += ["--transport", transport]
    if fault:
        argv += ["--fault", fault]
    if dpop:
        argv += ["--dpop", dpop]
    if tls:
        argv += ["--certfile", str(tls[0]), "--keyfile", str(tls[1])]
    env = {
        "AGENTHOST_PEER_LOG": str(tmp_path / "peer.log"),
        "AGENTHOST_PEER_SECRETS": str(tmp_path / "peer.secrets"),
    }
    async with serve(argv, port, env=env):
        origin = f"https://localhost:{port}" if tls else f"http://127.0.0.1:{port}"
        yield f"{origin}/{'sse' if transport == 'sse' else 'mcp'}"


def peer_log(tmp_path: Path) -> list[str]:
    path = tmp_path / "peer.log"
    return path.read_text().splitlines() if path.exists() else []


async def browser(_server: str, url: str) -> None:
    """A person's browser (tests/peers/browser.py, its own process): open the URL, press
    "Allow", follow the redirect home."""
    await trio.run_process([PY, str(PEERS / "browser.py"), url], capture_stderr=True)


def config(url: str, transport: str = "streamable-http", **oauth: Any) -> ServerConfig:
    return ServerConfig(
        name="sdk",
        transport=transport,  # type: ignore[arg-type]
        url=url,
        oauth=OAuthSettings(**oauth) if oauth else None,
    )


async def saved(name: str = "sdk") -> dict[str, Any] | None:
    raw = await FileTokenStore().load(name)
    return json.loads(raw) if raw else None


def tokens_of(state: dict[str, Any] | None) -> dict[str, Any] | None:
    if state is None:
        return None
    return state["issuers"][state["current"]]["tokens"]  # type: ignore[no-any-return]


async def revoke_access_token(url: str) -> None:
    """The server forgets our access token (as when it is revoked early)."""
    state = await saved()
    assert state is not None
    entry = state["issuers"][state["current"]]
    client = entry["client"]
    async with httpx.AsyncClient() as http:
        revoked = await http.post(
            url.rsplit("/", 1)[0] + "/revoke",
            data={
                "token": entry["tokens"]["access_token"],
                "client_id": client["client_id"],
                "client_secret": client["client_secret"],
            },
            auth=(client["client_id"], client["client_secret"]),
        )
    assert revoked.status_code == 200, revoked.text


#: The authorization URL ``auth login --no-browser`` prints (the peer on HTTP or HTTPS).
_AUTHORIZE_URL = re.compile(rb"(https?://(?:127\.0\.0\.1|localhost):\d+/authorize\S+)")


async def cli_login(
    cfg: Path, env: Mapping[str, str], *, use_browser: bool = True
) -> tuple[int, str, str]:
    """``agenthost --config CFG auth login sdk --no-browser`` in ``env``, with the browser
    stand-in (``use_browser``) following the URL the command prints; returns (exit code,
    stdout, stderr)."""
    argv = [peer_python(), "-m", "agenthost", "--config", str(cfg), "auth", "login", "sdk"]
    process = await trio.lowlevel.open_process(
        [*argv, "--no-browser"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=Path(__file__).resolve().parents[2],
    )
    out, err = bytearray(), bytearray()

    async def pump(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
        async for chunk in stream:
            into += chunk

    async def drive() -> None:
        while process.returncode is None:
            match = _AUTHORIZE_URL.search(err)
            if match:
                await browser("sdk", match.group(1).decode())
                return
            await trio.sleep(0.05)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            assert process.stdout is not None and process.stderr is not None
            nursery.start_soon(pump, process.stdout, out)
            nursery.start_soon(pump, process.stderr, err)
            if use_browser:
                nursery.start_soon(drive)
            code = await process.wait()
    return code, out.decode(), err.decode()
