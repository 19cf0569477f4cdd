"""Shared test configuration: how to start the real MCP peers, and the ``--run-slow`` switch.

Why: agenthost is tested against real servers (the official Python SDK server, the Node
reference servers, and our own fault-injecting ``crashy_server``), never against mocks of
MCP. Every test that needs a peer asks these helpers for its command line, so the paths
and flags live in one place. A missing peer is a broken checkout, not a reason to skip:
the helpers fail loudly and say how to fix it.

Each helper is a plain function (importable as ``from conftest import ...`` where that
is convenient) and is also served by a fixture of the same name that returns the
function itself, so a test writes ``def test_x(everything_cmd): cmd, args = everything_cmd()``.

Facts about the peers (start times, quirks, what they send) are in tests/peers/NOTES.md.
"""

from __future__ import annotations

import importlib
import os
import shutil
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pytest

__all__ = [
    "CRASHY_SERVER",
    "EVERYTHING_DIR",
    "FILESYSTEM_DIR",
    "MINIMAL_SERVER",
    "PEER_LOG_ENV",
    "REPO_ROOT",
    "SDK_SERVER",
    "Command",
    "crashy_cmd",
    "everything_cmd",
    "everything_http_cmd",
    "filesystem_cmd",
    "free_port",
    "minimal_cmd",
    "node_bin",
    "sdk_server_cmd",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
PEERS_DIR = REPO_ROOT / "tests" / "peers"
SDK_SERVER = PEERS_DIR / "sdk_server.py"
CRASHY_SERVER = PEERS_DIR / "crashy_server.py"
MINIMAL_SERVER = REPO_ROOT / "bench" / "minimal_server.py"
NODE_MODULES = REPO_ROOT / "node_modules"
EVERYTHING_DIR = NODE_MODULES / "@modelcontextprotocol" / "server-everything"
FILESYSTEM_DIR = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem"
PEER_LOG_ENV = "AGENTHOST_PEER_LOG"
"""Env var the Python peers append server-side observations to (see NOTES.md)."""

Command = tuple[str, list[str]]
"""``(command, args)``: what a stdio ``ServerConfig`` takes."""

_INSTALL_HINT = "run `make test` (it installs the pinned Node peers with `npm ci`)"


def node_bin() -> str:
    """Path of the ``node`` binary: ``node_modules/.bin/node`` (npm's node) if present, else PATH.

    Raises:
        pytest.fail.Exception: No node anywhere.
    """
    local = NODE_MODULES / ".bin" / "node"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    found = shutil.which("node")
    if found is None:
        pytest.fail(f"`node` is not installed and not in node_modules/.bin; {_INSTALL_HINT}")
    return found


def _node_entry(package_dir: Path) -> str:
    entry = package_dir / "dist" / "index.js"
    if not entry.is_file():
        pytest.fail(f"{entry} is missing; {_INSTALL_HINT}")
    return str(entry)


def everything_cmd() -> Command:
    """``@modelcontextprotocol/server-everything`` over stdio (starts in ~0.2 s)."""
    return node_bin(), [_node_entry(EVERYTHING_DIR), "stdio"]


def everything_http_cmd(
    mode: Literal["streamableHttp", "sse"], port: int
) -> tuple[str, list[str], dict[str, str]]:
    """server-everything over HTTP: ``(command, args, extra_env)``; the port comes from ``PORT``.

    Streamable HTTP serves ``/mcp``; SSE serves ``GET /sse`` and ``POST /message``. Node
    listens on all interfaces (it takes no host setting); tests connect to 127.0.0.1.
    """
    return node_bin(), [_node_entry(EVERYTHING_DIR), mode], {"PORT": str(port)}


def filesystem_cmd(*dirs: str | os.PathLike[str]) -> Command:
    """``@modelcontextprotocol/server-filesystem`` over stdio, allowed ``dirs`` (may be none).

    With no dirs it waits for the client's roots; client roots replace any dirs given.
    """
    return node_bin(), [_node_entry(FILESYSTEM_DIR), *(os.fspath(d) for d in dirs)]


def sdk_server_cmd(
    mode: Literal["stdio", "streamable-http", "sse"] = "stdio", port: int | None = None
) -> Command:
    """The official-SDK peer (tests/peers/sdk_server.py); HTTP modes need ``port``.

    Streamable HTTP serves ``http://127.0.0.1:<port>/mcp``; SSE ``/sse`` + ``/messages/``.
    """
    args = [str(SDK_SERVER), mode]
    if mode != "stdio":
        if port is None:
            raise ValueError(f"sdk_server_cmd({mode!r}) needs a port")
        args += ["--port", str(port)]
    return sys.executable, args


def crashy_cmd(*flags: str) -> Command:
    """The fault-injecting stdio peer, e.g. ``crashy_cmd("--exit-after", "2", "--garbage")``."""
    return sys.executable, [str(CRASHY_SERVER), *flags]


def minimal_cmd(payload_bytes: int | None = None) -> Command:
    """The benchmark's minimal stdio server (bench/minimal_server.py)."""
    extra = [] if payload_bytes is None else ["--payload-bytes", str(payload_bytes)]
    return sys.executable, [str(MINIMAL_SERVER), *extra]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it).

    There is a window between closing the probe socket and the server binding; callers
    that start a server should retry on "address in use" rather than assume.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(name="node_bin")
def _node_bin_fixture() -> Callable[[], str]:
    return node_bin


@pytest.fixture(name="everything_cmd")
def _everything_cmd_fixture() -> Callable[[], Command]:
    return everything_cmd


@pytest.fixture(name="everything_http_cmd")
def _everything_http_cmd_fixture() -> Callable[..., tuple[str, list[str], dict[str, str]]]:
    return everything_http_cmd


@pytest.fixture(name="filesystem_cmd")
def _filesystem_cmd_fixture() -> Callable[..., Command]:
    return filesystem_cmd


@pytest.fixture(name="sdk_server_cmd")
def _sdk_server_cmd_fixture() -> Callable[..., Command]:
    return sdk_server_cmd


@pytest.fixture(name="crashy_cmd")
def _crashy_cmd_fixture() -> Callable[..., Command]:
    return crashy_cmd


@pytest.fixture(name="minimal_cmd")
def _minimal_cmd_fixture() -> Callable[..., Command]:
    return minimal_cmd


@pytest.fixture(name="free_port")
def _free_port_fixture() -> Callable[[], int]:
    return free_port


@pytest.fixture
def peer_log(tmp_path: Path) -> Path:
    """A fresh file for ``$AGENTHOST_PEER_LOG``; pass ``{PEER_LOG_ENV: str(peer_log)}`` as env."""
    path = tmp_path / "peer.log"
    path.touch()
    return path


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own ``$XDG_STATE_HOME``: an interactive policy keeps "always" answers
    there (policies/approvals.py), and a test must neither read the developer's answers
    nor leave its own behind. CLI subprocesses inherit it through ``os.environ``."""
    state = tmp_path / "xdg-state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak",
        action="store_true",
        default=False,
        help="run the hostile-server floods at full size and print the figures (make soak)",
    )
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="also run tests marked `slow` (soak and benchmark runs)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``slow`` tests unless ``--run-slow``: visibly, with the reason in the -ra summary."""
    if config.getoption("--run-slow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: pass --run-slow to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture(autouse=True)
def _era_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own protocol-era cache (agenthost.dial), in memory and on
    disk: nothing a test learns about a server leaks into another test or into the
    user's ``~/.cache`` (CLI subprocesses inherit ``XDG_CACHE_HOME``)."""
    connect_module = importlib.import_module("agenthost.dial")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    monkeypatch.setattr(connect_module, "_default_cache", None)


@pytest.fixture(autouse=True)
def _no_real_token_store(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every remote server uses OAuth's token store: never the user's keyring or files."""
    os.environ["AGENTHOST_TOKEN_STORE"] = "file"
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.getbasetemp() / "xdg-data")
