"""Every TOML and JSON example in the docs loads: config, policy and providers alike.

A documented example that does not load is a bug the reader finds first. Each fenced
``toml`` / ``json`` / ``jsonc`` block of the README and docs is written to a scratch
project (with the files and directories the examples name) and loaded the way the CLI
loads a config; its ``[policy]`` and ``[providers]`` go through their own parsers.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agenthost.config import load_config
from agenthost_policies import parse_policy
from agenthost_providers.config import parse_providers
from agenthost_providers.scripted import ScriptedProvider

REPO = Path(__file__).resolve().parents[1]
DOCS = [
    REPO / "README.md",
    REPO / "examples" / "README.md",
    REPO / "policies" / "POLICY.md",
    *sorted((REPO / "docs").glob("*.md")),
]
_FENCE = re.compile(r"^```(toml|json|jsonc)\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: A variable without a default (those with ``:-default`` are tested with the default).
_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")


def _blocks() -> list[tuple[str, str, str]]:
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{doc.relative_to(REPO)}:{line}", match.group(1), match.group(2)))
    return found


BLOCKS = _blocks()


def _write_private_key(path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def test_the_docs_have_examples() -> None:
    # A guard on the collector itself: if the fence pattern broke, nothing would be tested.
    assert len(BLOCKS) >= 10
    assert {kind for _, kind, _ in BLOCKS} == {"toml", "jsonc"}


@pytest.mark.parametrize(("where", "kind", "text"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_example_loads(
    where: str, kind: str, text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    project = home / "code" / "project"
    for folder in (project, home / "src" / "myproject", home / "code" / "docs"):
        folder.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    (project / "secrets.env").write_text("TOKEN=x\n")
    (project / ".env").write_text("TOKEN=x\n")
    (project / ".mcp.json").write_text('{"mcpServers": {"github": {"command": "gh-mcp"}}}')
    (project / ".vscode").mkdir()
    (project / ".vscode" / "mcp.json").write_text('{"servers": {"fetch": {"command": "uvx"}}}')
    (project / "script.toml").write_text('[[turns]]\ntext = "hi"\n')
    _write_private_key(project / "keys" / "ci-bot.pem")  # an OAuth client's signing key
    # Every variable an example uses is set (unset ones are errors by design), plus the
    # answers to VS Code inputs.
    env = {name: f"value-of-{name}" for name in _VARIABLE.findall(text)}
    env["AGENTHOST_INPUT_GITHUB_TOKEN"] = "token"
    if kind == "toml" and re.search(r"^\[\[turns\]\]", text, re.MULTILINE):
        # A scripted replay's script (docs/config.md), loaded by the replay provider.
        script = project / "demo-script.toml"
        script.write_text(text, encoding="utf-8")
        replay = ScriptedProvider.from_file(script)
        assert replay.remaining == text.count("[[turns]]")
        return
    if text.startswith("# ~/.codex/config.toml"):
        _check_codex(text)
        return
    if kind == "toml":
        config_file = project / "agenthost.toml"
    else:
        config_file = (
            project / ".vscode" / "mcp.json" if '"servers"' in text else project / "x.json"
        )
    config_file.write_text(text, encoding="utf-8")
    monkeypatch.chdir(project)
    config = load_config(config_file, env=env, default_workspace=True)
    parse_policy(config.policy, source=where, base_dir=project)
    parse_providers(dict(config.providers), source=where, base_dir=str(project))

    for server in config.servers:
        if server.command == "agenthost":
            _check_agenthost_args(list(server.args))


def _check_agenthost_args(args: list[str]) -> None:
    """A snippet that runs agenthost (another host's config) names a real command line."""
    from agenthost.cli.app import build_parser

    parser, _ = build_parser()
    parsed = parser.parse_args(args)
    assert parsed.command == "serve", args


def _check_codex(text: str) -> None:
    """Codex's own config format (``[mcp_servers.NAME]``): not agenthost's, so it is read
    as Codex reads it and only the command line it runs is checked."""
    import tomllib

    servers = tomllib.loads(text)["mcp_servers"]
    assert servers, text
    for server in servers.values():
        assert server["command"] == "agenthost"
        _check_agenthost_args(list(server.get("args", [])))
