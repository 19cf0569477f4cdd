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

import collections
import importlib
import importlib.util
import os
import shutil
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import pytest

from tests.forkserver import peer_python

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

if importlib.util.find_spec("agenthost_providers") is None:
    # An editable install older than the collision-safe names (issue 27) puts only the
    # checkout on sys.path, and every test module would fail to import, one by one.
    pytest.exit(
        "agenthost_providers is not importable: the editable install predates .dev-names/;"
        " reinstall it with `make test` or `.venv/bin/pip install -e '.[dev]'`",
        returncode=4,
    )
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
    It starts from the suite's fork server (tests/forkserver.py: the same script, without
    importing the SDK again each time).
    """
    args = [str(SDK_SERVER), mode]
    if mode != "stdio":
        if port is None:
            raise ValueError(f"sdk_server_cmd({mode!r}) needs a port")
        args += ["--port", str(port)]
    return peer_python(), args


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


#: The test files that take longest, longest first (wall seconds summed over a file's tests
#: in a quiet ``make test`` run, 2 cores, 4 workers: 96 ... 10 s; the rest take less). With
#: ``--dist loadfile`` xdist hands out whole files in collection order, and by default sorts
#: them by their number of tests: a file of five long CLI tests went out last and kept one
#: worker busy after the others had finished. Longest first is the classic fix (LPT). A
#: stale list costs time, never correctness.
LONGEST_FILES = (
    "tests/test_tasks_ext.py",
    "tests/conformance/test_conformance.py",
    "tests/test_agent_tasks.py",
    "tests/test_tasks.py",
    "tests/test_serve_tasks.py",
    "tests/test_bench_smoke.py",
    "tests/test_cli.py",
    "tests/test_first_hour_continued.py",
    "tests/test_hot_path.py",
    "tests/test_jsonrpc.py",
    "tests/test_startup_deadline.py",
    "tests/security/test_user_only_keys.py",
    "tests/test_first_hour.py",
    "tests/security/test_untrusted_project.py",
    "tests/hostile/test_hostile_approvals.py",
    "tests/test_serve.py",
    "tests/auth/test_oauth_sdk.py",
    "tests/test_tasks_http.py",
    "tests/hostile/test_hostile_chat.py",
    "tests/hostile/test_transport_hostile.py",
    "tests/test_quickstart.py",
    "tests/test_era_fallback.py",
    "tests/durable/test_workflow.py",
    "tests/test_packaging.py",
    "tests/test_ask_tasks.py",
    "tests/security/test_hostile_auth_cli.py",
    "tests/test_serve_http.py",
    "tests/test_examples_servers.py",
    "tests/test_modern_era.py",
    "tests/test_interop_sdk.py",
)


def pytest_configure(config: pytest.Config) -> None:
    # xdist's own order (by number of tests) would undo LONGEST_FILES' (see there).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest files first (LONGEST_FILES), then by number of tests; skip ``slow`` tests
    unless ``--run-slow``: visibly, with the reason in the -ra summary."""
    rank = {path: i for i, path in enumerate(LONGEST_FILES)}
    files = [item.nodeid.partition("::")[0] for item in items]
    counts = collections.Counter(files)
    order = {
        id(item): (rank.get(f, len(rank)), -counts[f], f)
        for item, f in zip(items, files, strict=True)
    }
    items.sort(key=lambda item: order[id(item)])  # stable: a file's own order is kept
    if config.getoption("--run-slow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: pass --run-slow to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


#: Where agenthost (and the libraries it uses) read or write per-user files, relative to a
#: home directory. Each is pointed into a private home for every test and for the session.
_XDG_DIRS = {
    "XDG_CONFIG_HOME": ".config",  # agenthost.toml discovery; keyring's keyringrc.cfg
    "XDG_CACHE_HOME": ".cache",  # the protocol-era cache (agenthost.connection)
    "XDG_STATE_HOME": ".local/state",  # approvals (policies/approvals.py), chat history
    "XDG_DATA_HOME": ".local/share",  # OAuth token files (agenthost.auth.store), keyrings.alt
}


def _point_home_at(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``HOME`` and every XDG base directory under ``home``; no OS keyring.

    ``monkeypatch`` changes ``os.environ``, so CLI and server subprocesses inherit it (the
    stdio transport passes ``HOME`` and the XDG variables through its allowlist).
    """
    monkeypatch.setenv("HOME", str(home))
    for var, relative in _XDG_DIRS.items():
        monkeypatch.setenv(var, str(home / relative))
    # OAuth tokens go to files under XDG_DATA_HOME, never to the user's keyring; and should
    # anything still ask the keyring library, it gets the backend that refuses everything.
    monkeypatch.setenv("AGENTHOST_TOKEN_STORE", "file")
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")


def _files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir())


@pytest.fixture(scope="session", autouse=True)
def _session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home for the whole run, and the check that nothing was written to it.

    Every test gets its own home (:func:`_private_home`), so the only code that sees this
    one runs outside a test's own setup (session or module fixtures, teardown after the
    last test). Anything found here at the end is a file that would have landed in the
    user's real home directory (``~/.cache/agenthost/eras.json`` and the like): the run
    then ends with an error naming it.
    """
    home = tmp_path_factory.mktemp("session-home")
    with pytest.MonkeyPatch.context() as monkeypatch:
        _point_home_at(home, monkeypatch)
        yield home
    leaked = _files_under(home)
    assert not leaked, f"written to the home directory outside any test's own: {leaked}"


@pytest.fixture(autouse=True)
def _private_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Each test's own home directory: ``HOME`` and the XDG base directories under it.

    A test must neither read the developer's files (an ``agenthost.toml`` found through
    ``$XDG_CONFIG_HOME``, "always" answers, OAuth tokens, the era cache) nor leave its own
    behind, for itself or for the CLI and server processes it starts. The in-memory era
    cache (agenthost.connection) is dropped too, so nothing a test learnt about a server
    reaches another test.
    """
    home = tmp_path_factory.mktemp("home")
    _point_home_at(home, monkeypatch)
    monkeypatch.setattr(importlib.import_module("agenthost.connection"), "_default_cache", None)
    return home


@pytest.fixture(autouse=True)
def _own_secrets() -> Iterator[None]:
    """Each test leaves the process-wide secret registry (agenthost.redaction) as it
    found it: what one test's config or server registered must not scrub another test's
    text (a value "require" once turned a server's "requires" into "***s" in a later test
    of the same worker)."""
    with importlib.import_module("agenthost.redaction").isolated():
        yield
