"""Which configured servers are agenthost's own ``serve`` on the same config (refused), read
through the launchers a config uses; and the chain of config files a child inherits.

The end-to-end loop (the real CLI in a project listing itself) is
tests/hostile/test_hostile_selfstart.py; here are the command-line forms, cheaply.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from agenthost.config.model import ServerConfig
from agenthost.config.selfstart import (
    MAX_CHAIN,
    SERVE_CHAIN_ENV,
    chain_refusal,
    extend_chain,
    files_read,
    listed_in,
    self_start_refusal,
)
from agenthost.transports.stdio import INHERITED_ENV_VARS, child_environment

PY = sys.executable
LISTING = "/p/.mcp.json"


def _server(*argv: str, **kwargs: object) -> ServerConfig:
    return ServerConfig(
        name="gw",
        transport="stdio",
        command=argv[0],
        args=argv[1:],
        **kwargs,  # type: ignore[arg-type]
    )


REFUSED = [
    ["agenthost", "serve"],
    ["/usr/local/bin/agenthost", "-v", "serve"],
    ["AGENTHOST.EXE", "serve"],
    [PY, "-m", "agenthost", "serve"],
    ["python3.12", "-u", "-m", "agenthost", "--json", "serve"],
    ["python", "-magenthost", "serve"],
    ["python", "/src/agenthost/__main__.py", "serve"],
    ["npx", "-y", "agenthost", "serve"],
    ["npx", "--yes", "agenthost@latest", "serve"],
    ["uvx", "agenthost", "serve"],
    ["uvx", "--from", "agenthost==1.0", "agenthost", "serve"],
    ["uvx", "agenthost[all]", "serve"],
    ["pipx", "run", "agenthost", "serve"],
    ["uv", "run", "agenthost", "serve"],
    ["uv", "tool", "run", "agenthost", "serve"],
    ["uv", "run", "--with", "x", "python", "-m", "agenthost", "serve"],
    ["env", "A=1", "B=2", "agenthost", "serve"],
    ["nohup", "nice", "agenthost", "serve"],
    ["sh", "-c", "agenthost serve"],
    ["bash", "-lc", "cd /p && exec agenthost serve"],
    ["sh", "-c", "true; exec env X=1 python -m agenthost serve"],
    ["sh", "-c", "sh -c 'agenthost serve'"],
    # Forms found by attacking the first version of the rule (each was let through):
    ["python3", "-X", "dev", "-m", "agenthost", "serve"],
    ["python3", "-W", "ignore", "-m", "agenthost", "serve"],
    ["python3", "-Wdefault::DeprecationWarning:mod", "-m", "agenthost", "serve"],
    ["python3", "-Im", "agenthost", "serve"],
    ["python", "-m", "agenthost.__main__", "serve"],
    ["env", "-S", "agenthost serve"],
    ["/usr/bin/env", "-S", "python3 -m agenthost serve"],
    ["agenthost", "--config", LISTING, "serve"],
    ["agenthost", f"--config={LISTING}", "serve"],
    ["agenthost", "-c", "/p/sub/../.mcp.json", "serve"],
]

ALLOWED = [
    ["agenthost", "--config", "/elsewhere/gateway.toml", "serve"],
    ["agenthost", "check"],
    [PY, "server.py", "serve"],
    ["python", "-c", "import agenthost; print('serve')"],
    ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
    ["uvx", "mcp-server-fetch"],
    ["sh", "-c", "echo agenthost serve"],
    ["sh", "-c", "unterminated 'agenthost serve"],
    ["sh", "./wrapper.sh"],
    ["node", "agenthost.js", "serve"],
    ["python3", "-X", "dev", "server.py", "serve"],
    ["python3", "-Im", "agenthostile", "serve"],
    ["python3", "-c", "import sys", "-m", "agenthost", "serve"],
    ["env", "-S", "echo agenthost serve"],
]


@pytest.mark.parametrize("argv", REFUSED, ids=" ".join)
def test_agenthost_serve_on_the_same_config_is_refused(argv: list[str]) -> None:
    reason = self_start_refusal(_server(*argv), LISTING)
    assert reason is not None and reason.startswith("refused:")
    assert LISTING in reason and "'gw'" in reason and "\n" not in reason


@pytest.mark.parametrize("argv", ALLOWED, ids=" ".join)
def test_other_servers_and_other_configs_start(argv: list[str]) -> None:
    assert self_start_refusal(_server(*argv), LISTING) is None


def test_a_relative_config_is_read_from_the_servers_folder(tmp_path: Path) -> None:
    listing = tmp_path / ".mcp.json"
    listing.write_text("{}")
    same = _server("agenthost", "--config", ".mcp.json", "serve", cwd=str(tmp_path))
    other = _server("agenthost", "--config", "other.toml", "serve", cwd=str(tmp_path))
    assert self_start_refusal(same, str(listing)) is not None
    assert self_start_refusal(other, str(listing)) is None


def test_the_same_executable_under_another_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A symlink to this process's own ``agenthost`` entry point is agenthost too."""
    entry = tmp_path / "bin" / "agenthost"
    entry.parent.mkdir()
    entry.write_text("#!/bin/sh\n")
    alias = tmp_path / "ah"
    alias.symlink_to(entry)
    monkeypatch.setattr(sys, "argv", [str(entry), "serve"])
    assert self_start_refusal(_server(str(alias), "serve"), LISTING) is not None
    # Positive control: the same name, not a link to it, is just a server.
    (tmp_path / "other").write_text("#!/bin/sh\n")
    assert self_start_refusal(_server(str(tmp_path / "other"), "serve"), LISTING) is None


def test_a_config_built_in_code_lets_only_an_explicit_config_through() -> None:
    assert self_start_refusal(_server("agenthost", "serve"), None) is not None
    assert self_start_refusal(_server("agenthost", "-c", "/x.toml", "serve"), None) is None


def test_remote_servers_are_never_refused() -> None:
    remote = ServerConfig(name="gw", transport="http", url="http://127.0.0.1:1/mcp")
    assert self_start_refusal(remote, LISTING) is None


def test_the_listing_file_is_the_project_file_else_the_config() -> None:
    project = _server("x", scope="project:/p/.mcp.json")
    assert listed_in(project, "/u/agenthost.toml") == "/p/.mcp.json"
    assert listed_in(_server("x"), "/u/agenthost.toml") == "/u/agenthost.toml"


def test_the_chain_refuses_a_file_read_above(tmp_path: Path) -> None:
    mine = tmp_path / ".mcp.json"
    mine.write_text("{}")
    environ: dict[str, str] = {}
    assert chain_refusal([str(mine)], environ) is None  # positive control: a fresh start
    extend_chain([str(mine)], environ)
    assert environ[SERVE_CHAIN_ENV] == os.path.realpath(mine)
    refusal = chain_refusal([str(tmp_path / "x" / ".." / ".mcp.json")], environ)
    assert refusal is not None and str(tmp_path) in refusal and "\n" not in refusal
    assert chain_refusal([str(tmp_path / "other.toml")], environ) is None


def test_the_chain_is_bounded_whatever_the_files(tmp_path: Path) -> None:
    environ: dict[str, str] = {}
    for level in range(MAX_CHAIN):
        assert chain_refusal([f"/level{level}.toml"], environ) is None
        extend_chain([f"/level{level}.toml"], environ)
    refusal = chain_refusal(["/fresh.toml"], environ)
    assert refusal is not None and str(MAX_CHAIN) in refusal


def test_every_stdio_server_inherits_the_chain() -> None:
    assert SERVE_CHAIN_ENV in INHERITED_ENV_VARS
    env = child_environment(host_env={SERVE_CHAIN_ENV: "/p/.mcp.json", "SECRET": "x"})
    assert env == {SERVE_CHAIN_ENV: "/p/.mcp.json"}


def test_a_config_naming_another_file_this_host_reads_is_refused() -> None:
    """A project's ``.cursor/mcp.json`` running ``agenthost --config ~/.config/.../
    agenthost.toml serve``, in a host that reads that user file too: the same loop."""
    user = "/home/me/.config/agenthost/agenthost.toml"
    server = _server("agenthost", "--config", user, "serve", scope="project:/p/.cursor/mcp.json")
    reads = files_read([server], user)
    assert reads == {user, "/p/.cursor/mcp.json"}
    assert self_start_refusal(server, "/p/.cursor/mcp.json", reads) is not None
    # Positive control: the same server in a host reading only the project file.
    assert self_start_refusal(server, "/p/.cursor/mcp.json", {"/p/.cursor/mcp.json"}) is None
