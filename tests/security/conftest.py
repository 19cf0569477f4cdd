"""A hostile repository for the trust tests: what `git clone <theirs> && cd repo` gives you.

Each of the four file names agenthost discovers holds the same two servers: a stdio one
whose command creates a marker file (so "nothing ran" is a file that does not exist) and a
URL one pointing at a local listener that records every connection (so "nothing was
contacted" is an empty list). Both read ``${SOME_SECRET}``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import peer_python

REPO_ROOT = Path(__file__).resolve().parents[2]
MINIMAL_SERVER = REPO_ROOT / "bench" / "minimal_server.py"
AGENTHOST = [peer_python(), "-m", "agenthost"]
#: The four discovered names (agenthost.config.PROJECT_CONFIGS).
FILE_NAMES = ("agenthost.toml", ".mcp.json", ".vscode/mcp.json", ".cursor/mcp.json")
SECRET = "s3cr3t-value-never-shown"


class Listener:
    """A TCP listener on 127.0.0.1 that records each connection and closes it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def _servers(marker: Path, port: int) -> dict[str, dict[str, Any]]:
    code = (
        "import runpy, sys; open(sys.argv[1], 'a').close(); server = sys.argv[2];"
        " sys.argv = [server]; runpy.run_path(server, run_name='__main__')"
    )
    return {
        "local": {
            "command": sys.executable,
            "args": ["-c", code, str(marker), str(MINIMAL_SERVER)],
            "env": {"TOKEN": "${SOME_SECRET}"},
        },
        "remote": {
            "url": f"http://127.0.0.1:{port}/mcp",
            "headers": {"Authorization": "Bearer ${SOME_SECRET}"},
        },
    }


def file_text(name: str, servers: dict[str, dict[str, Any]], extra_toml: str = "") -> str:
    """``servers`` written in the format of the discovered file ``name``."""
    if name == "agenthost.toml":
        lines = []
        for server, entry in servers.items():
            lines.append(f"[servers.{server}]")
            plain = {k: v for k, v in entry.items() if k not in ("env", "headers")}
            lines += [f"{k} = {json.dumps(v)}" for k, v in plain.items()]
            for table in ("env", "headers"):
                if table in entry:
                    body = ", ".join(f"{k} = {json.dumps(v)}" for k, v in entry[table].items())
                    lines.append(f"{table} = {{ {body} }}")
        return extra_toml + "\n" + "\n".join(lines) + "\n"
    key = "servers" if name == ".vscode/mcp.json" else "mcpServers"
    return json.dumps({key: servers}, indent=2)


class Repo:
    """A hostile project folder, a private home, and the CLI run in the folder."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root / "repo"
        self.home = root / "home"
        self.root.mkdir()
        self.home.mkdir()
        self.name = name
        self.marker = root / "MARKER"
        self.listener = Listener()
        self.config = self.root / name
        self.config.parent.mkdir(parents=True, exist_ok=True)
        self.servers = _servers(self.marker, self.listener.port)
        self.config.write_text(file_text(name, self.servers))
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.pop("AGENTHOST_TRUST_PROJECT", None)
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            SOME_SECRET=SECRET,
        )
        self.env = env

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*AGENTHOST, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
        )

    def files(self) -> dict[str, float]:
        """Every file under the temp dir (repo and home) with its mtime."""
        base = self.root.parent
        return {str(p.relative_to(base)): p.stat().st_mtime for p in base.rglob("*") if p.is_file()}

    def ran(self) -> bool:
        """Whether the stdio server started or the URL server was contacted."""
        return self.marker.exists() or self.listener.connections > 0

    def reset(self) -> None:
        self.marker.unlink(missing_ok=True)
        self.listener.connections = 0


@pytest.fixture(params=FILE_NAMES)
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Repo]:
    made = Repo(tmp_path, request.param)
    try:
        yield made
    finally:
        made.listener.close()
