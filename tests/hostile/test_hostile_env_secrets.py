"""A stdio server quoting back the env values it was given (env_quoting_server.py),
through the real ``agenthost check --json -v``: what its stderr carries reaches the logs
and ``last_error``, so the env values that are secrets must be scrubbed there, and the
server's own name (not one of its env keys) must head its lines.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio

from agenthost.redaction import REDACTED

pytestmark = pytest.mark.timeout(60)

HERE = Path(__file__).parent
REPO = HERE.parents[1]


def _config(tmp_path: Path, env: dict[str, str]) -> Path:
    path = tmp_path / "agenthost.toml"
    args = [str(HERE / "env_quoting_server.py"), *env]
    path.write_text(
        f"""
[servers.quoter]
command = {json.dumps(sys.executable)}
args = {json.dumps(args)}
env = {{ {", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())} }}

[servers.quoter.restart]
enabled = false
"""
    )
    return path


async def _check(config: Path) -> tuple[dict[str, object], str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = await trio.run_process(
        [sys.executable, "-m", "agenthost", "--config", str(config), "check", "--json", "-v"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=env,
        cwd=REPO,
    )
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 5, err[-2000:]
    row: dict[str, object] = json.loads(out)[0]
    return row, out, err


async def test_a_servers_lines_carry_its_name_not_an_env_key(tmp_path: Path) -> None:
    """Regression: the loop registering env values reused ``name``, so the transport took
    the last env key as the server's name: a project file could make a server's stderr
    and errors read as another server's (env key ``github``)."""
    row, _, err = await _check(_config(tmp_path, {"github": "plain"}))
    assert str(row["last_error"]).startswith("server process exited"), row
    assert "agenthost.server.quoter: github is plain" in err
    assert "agenthost.server.github" not in err


#: Secrets whose text looks plain (lowercase letters and separators) under names that do
#: not say "secret": a connection URL's password, a wallet's recovery phrase.
PASSWORD = "correcthorse"
PHRASE = "abandon ability able about above absent absorb abstract"
PLAIN_LOOKING = {
    "DATABASE_URL": f"postgres://app:{PASSWORD}@db.internal/prod",
    "WALLET_MNEMONIC": PHRASE,
    "SEED_PHRASE": PHRASE.replace("abandon", "zoo"),
}


async def test_plain_looking_secrets_the_server_quotes_are_scrubbed(tmp_path: Path) -> None:
    """Regression (74223d5's add_named_secret rule): an env value made only of lowercase
    letters, ':', '/', '@' and spaces counted as "plainly not a secret" unless its name
    said otherwise, so a URL's password and a recovery phrase reached ``last_error`` and
    the log lines of the server's stderr."""
    row, out, err = await _check(_config(tmp_path, PLAIN_LOOKING))
    assert REDACTED in str(row["last_error"]), row
    for secret in (PASSWORD, PHRASE, PLAIN_LOOKING["SEED_PHRASE"]):
        assert secret not in out and secret not in err, (secret, out, err[-2000:])
    assert "postgres://app:" in out  # the rest of the URL stays readable
