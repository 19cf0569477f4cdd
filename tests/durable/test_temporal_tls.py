"""Reaching Temporal with TLS, mTLS and an API key, through the real CLI and worker.

Reaching Temporal's port was enough to start runs and answer their questions: the CLI
had no way to connect with TLS or authenticate. The dev server serves no TLS, so a TLS
front (:mod:`tests.durable.tls_front`, a ``trustme`` CA) stands before it and records the
``authorization`` metadata that reaches it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from agenthost.durable.connection import resolve
from agenthost.durable.seal import ENV_KEY_FILE
from agenthost.durable.worker import connect
from tests.durable.fleet import (
    dev_server,
    record_turns,
    run_params,
    serve_runs,
    start,
    write_config,
)
from tests.durable.tls_front import TlsFront

pytestmark = pytest.mark.timeout(120)

KEY = "tmprl-key-0123456789abcdef"


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with dev_server(tmp_path_factory.mktemp("dev")) as address:
        yield address


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _pem(tmp: Path, name: str, data: bytes) -> str:
    (tmp / name).write_bytes(data)
    return str(tmp / name)


def _cli(
    tmp: Path, *args: str, env: dict[str, str] | None = None, config: str = ""
) -> subprocess.CompletedProcess[str]:
    path = write_config(tmp, [], rules=[], extra="")
    if config:
        path.write_text(path.read_text() + config)
    argv = [sys.executable, "-m", "agenthost", "--config", str(path), "runs", "show"]
    return subprocess.run(
        [*argv, "run-nosuchrun", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def test_the_cli_connects_with_tls_and_sends_the_api_key(
    temporal: str, ca: trustme.CA, tmp_path: Path
) -> None:
    (tmp_path / "key").write_text(KEY + "\n")
    with TlsFront(temporal, ca) as front:
        done = _cli(
            tmp_path,
            "--temporal", f"127.0.0.1:{front.port}",
            "--temporal-tls-ca", _pem(tmp_path, "ca.pem", ca.cert_pem.bytes()),
            "--temporal-api-key-file", str(tmp_path / "key"),
        )  # fmt: skip
    # The answer is the server's: the call went through TLS to it.
    assert done.returncode == 2, done.stderr
    assert "no run 'run-nosuchrun'" in done.stderr
    assert f"Bearer {KEY}" in front.authorizations
    assert KEY not in done.stderr + done.stdout


def test_a_certificate_of_another_ca_is_one_line_and_the_key_is_not_sent(
    temporal: str, ca: trustme.CA, tmp_path: Path
) -> None:
    other = trustme.CA()
    (tmp_path / "key").write_text(KEY)
    with TlsFront(temporal, ca) as front:
        done = _cli(
            tmp_path,
            "--temporal", f"127.0.0.1:{front.port}",
            "--temporal-tls-ca", _pem(tmp_path, "other.pem", other.cert_pem.bytes()),
            "--temporal-api-key-file", str(tmp_path / "key"),
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"agenthost: cannot reach Temporal at 127.0.0.1:{front.port}")
    assert len(done.stderr.splitlines()) == 1
    assert front.authorizations == []
    assert KEY not in done.stderr


def test_plain_grpc_to_a_tls_port_is_one_line(
    temporal: str, ca: trustme.CA, tmp_path: Path
) -> None:
    with TlsFront(temporal, ca) as front:
        done = _cli(tmp_path, "--temporal", f"127.0.0.1:{front.port}")
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_mtls_takes_the_client_certificate_and_refuses_without(
    temporal: str, ca: trustme.CA, tmp_path: Path
) -> None:
    client = ca.issue_cert("agenthost-worker")
    ca_pem = _pem(tmp_path, "ca.pem", ca.cert_pem.bytes())
    cert = _pem(tmp_path, "client.pem", client.cert_chain_pems[0].bytes())
    key = _pem(tmp_path, "client.key", client.private_key_pem.bytes())
    with TlsFront(temporal, ca, mtls=True) as front:
        address = f"127.0.0.1:{front.port}"
        without = _cli(tmp_path, "--temporal", address, "--temporal-tls-ca", ca_pem)
        with_cert = _cli(
            tmp_path,
            "--temporal", address, "--temporal-tls-ca", ca_pem,
            "--temporal-tls-cert", cert, "--temporal-tls-key", key,
        )  # fmt: skip
    assert without.returncode == 1
    assert without.stderr.startswith(f"agenthost: cannot reach Temporal at {address}")
    assert len(without.stderr.splitlines()) == 1
    assert with_cert.returncode == 2, with_cert.stderr
    assert "no run 'run-nosuchrun'" in with_cert.stderr


def test_the_config_table_and_the_environment_key(
    temporal: str, ca: trustme.CA, tmp_path: Path
) -> None:
    """``[temporal]`` paths are relative to the config file; the key from the variable."""
    _pem(tmp_path, "ca.pem", ca.cert_pem.bytes())
    with TlsFront(temporal, ca) as front:
        table = (
            f'\n[temporal]\naddress = "127.0.0.1:{front.port}"\ntls_ca = "ca.pem"\n'
            'tls_server_name = "localhost"\n'
        )
        done = _cli(tmp_path, config=table, env={"TEMPORAL_API_KEY": KEY})
    assert done.returncode == 2, done.stderr
    assert "no run 'run-nosuchrun'" in done.stderr
    assert front.authorizations and set(front.authorizations) == {f"Bearer {KEY}"}


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (["--temporal-tls-ca", "{tmp}/missing.pem"], "cannot read the CA file"),
        (["--temporal-tls-ca", "{tmp}/notpem"], "is not PEM"),
        (["--temporal-tls-cert", "{tmp}/ca.pem"], "takes both a client certificate and its key"),
        (["--temporal-api-key-file", "{tmp}/empty"], "is empty"),
        (["--temporal-api-key-file", "{tmp}"], "cannot read the API key file"),
        # Seen: the SDK dropped a key with a line break inside and connected without one.
        (["--temporal-api-key-file", "{tmp}/crlf"], "has a space, a line break"),
    ],
)
def test_a_bad_file_is_one_line_before_anything_connects(
    ca: trustme.CA, tmp_path: Path, setup: list[str], message: str
) -> None:
    (tmp_path / "notpem").write_text("hello")
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "crlf").write_text(KEY + "\r\nx-injected: 1\n")
    _pem(tmp_path, "ca.pem", ca.cert_pem.bytes())
    args = [part.format(tmp=tmp_path) for part in setup]
    with TlsFront("127.0.0.1:9", ca) as front:
        done = _cli(tmp_path, "--temporal", f"127.0.0.1:{front.port}", *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert front.handshakes == 0
    assert KEY not in done.stderr


def test_a_worker_serves_a_run_over_tls_with_the_api_key(
    temporal: str, ca: trustme.CA, tmp_path: Path
) -> None:
    """The worker's long-lived polls and a client's run, both through the front."""
    config_path = write_config(
        tmp_path,
        record_turns(["x"]),
        rules=[{"kind": "tool", "name": "ledger__record", "decision": "allow"}],
    )
    out: dict[str, Any] = {}
    with TlsFront(temporal, ca) as front:
        flags = {
            "address": f"127.0.0.1:{front.port}",
            "tls_ca": _pem(tmp_path, "ca.pem", ca.cert_pem.bytes()),
            "tls_server_name": "localhost",
        }
        settings = resolve(flags, env={"TEMPORAL_API_KEY": KEY})
        assert settings.tls

        async def main() -> None:
            client = await connect(settings)

            async def body() -> None:
                params = run_params(config_path, "record x")
                handle = await start(
                    client, config_path, params, run_id="run-tls", task_queue=tmp_path.name
                )
                out["result"] = await asyncio.wait_for(handle.result(), 60)

            await serve_runs(client, tmp_path, config_path, body, task_queue=tmp_path.name)

        asyncio.run(main())
    assert out["result"]["stop"] == "end_turn"
    assert [c["status"] for c in out["result"]["tool_calls"]] == ["ok"]
    assert set(front.authorizations) == {f"Bearer {KEY}"}
    assert KEY not in repr(settings)


@pytest.mark.parametrize(
    ("table", "mode", "message"),
    [
        # Positive control: the key is read, the command goes on to connect.
        ('key_file = "keys/durable.key"', 0o600, "cannot reach Temporal at 127.0.0.1:9"),
        ('key_file = "keys/durable.key"', 0o644, "{tmp}/keys/durable.key is readable by others"),
        ('key_file = "keys/missing.key"', 0o600, "cannot read the durable key {tmp}/keys/missing"),
        ("", 0o600, "durable runs need the deployment's key"),
        ('key_file = ""', 0o600, "temporal.key_file"),
    ],
)
def test_the_durable_key_file_of_the_config_table(
    tmp_path: Path, table: str, mode: int, message: str
) -> None:
    """``[temporal] key_file`` is relative to the config file (the CLI runs elsewhere),
    checked as ``--key-file`` is, and named in the message when no key is given."""
    config = write_config(tmp_path, [], rules=[])
    config.write_text(config.read_text() + f"\n[temporal]\n{table}\n")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "durable.key").write_text("k" * 64)
    (tmp_path / "keys" / "durable.key").chmod(mode)
    (tmp_path / "elsewhere").mkdir()
    argv = [sys.executable, "-m", "agenthost", "--config", str(config), "runs", "approve"]
    done = subprocess.run(
        [*argv, "run-0123456789ab", "c0", "--temporal", "127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path / "elsewhere",
        env={k: v for k, v in os.environ.items() if k != ENV_KEY_FILE},
    )
    assert done.returncode != 0
    assert message.format(tmp=tmp_path.resolve()) in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "k" * 64 not in done.stderr
