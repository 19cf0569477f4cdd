"""HTTPS end to end (issue 26 item 1): the lean path and httpx trust what httpx trusts.

The server is the official SDK's (``sdk_server.py streamable-http --certfile ...``) on
TLS, with a certificate for ``localhost`` from a throwaway CA (``trustme``), made once
per session; one server serves the module. agenthost runs as the user runs it, a CLI
subprocess, with ``SSL_CERT_FILE`` naming that CA or not:

* with it, ``tools`` and ``call`` work on the lean path (the default) and through httpx
  (``AGENTHOST_LEAN_HTTP=0``); which one ran is read from ``-vvv``'s request lines (the
  lean path logs ``agenthost.transports.lean: HTTP Request``, httpx ``httpx: HTTP
  Request``); ``SSL_CERT_DIR`` works too;
* without it (certifi only), or for ``https://127.0.0.1`` (the certificate names only
  ``localhost``), the command fails with the server and the certificate problem named
  in its error line, no traceback, on both paths (the same ``AGENTHOST_LEAN_HTTP``
  switch the first test saw choose the path). Over HTTP the transport's own ``WARNING``
  of the same failure comes before that line (:func:`one_error_line`);
* ``wss://`` (ws_bridge.py on TLS) trusts the same CAs and fails at once, one line;
* OAuth: the SDK's authorization server on TLS too, login and a call (in-process).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

import agenthost
from agenthost.auth import URL_OPENER
from agenthost.transports._httpx import ssl_context
from tests.auth.sdk_peer import auth_server, browser, cli_login, config, peer_log
from tests.forkserver import peer_python
from tests.peers.http_launch import PEERS, PY, free_port

pytestmark = pytest.mark.timeout(60)

AGENTHOST = [peer_python(), "-m", "agenthost"]
REPO = Path(__file__).resolve().parents[1]
#: What decides the trust and the path in the CLI: cleared, then set by each test.
_TRUST_AND_ROUTE = frozenset(
    ["SSL_CERT_FILE", "SSL_CERT_DIR", "AGENTHOST_LEAN_HTTP"]
    + [f"{scheme}_proxy" for scheme in ("http", "https", "all", "no")]
    + [f"{scheme}_PROXY" for scheme in ("HTTP", "HTTPS", "ALL", "NO")]
)


@dataclass(frozen=True)
class TLSFiles:
    """A throwaway CA and a server certificate for ``localhost`` it signed (PEM files)."""

    ca: Path
    cert: Path
    key: Path


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    directory = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    issued = ca.issue_cert("localhost")
    files = TLSFiles(directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    ca.cert_pem.write_to_path(str(files.ca))
    issued.private_key_pem.write_to_path(str(files.key))
    issued.cert_chain_pems[0].write_to_path(str(files.cert))
    for extra in issued.cert_chain_pems[1:]:
        extra.write_to_path(str(files.cert), append=True)
    return files


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the server did not listen on {port} within {timeout} s")


@contextmanager
def serving(argv: list[str], port: int) -> Iterator[None]:
    """Run a server (its own process group) until the block ends."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for_port(port, process, 30)
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def https_port(tls_files: TLSFiles) -> Iterator[int]:
    """The SDK server on TLS for the whole module."""
    port = free_port()
    argv = [peer_python(), str(PEERS / "sdk_server.py"), "streamable-http", "--port", str(port)]
    argv += ["--certfile", str(tls_files.cert), "--keyfile", str(tls_files.key)]
    with serving(argv, port):
        yield port


@pytest.fixture(scope="module")
def wss_port(tls_files: TLSFiles) -> Iterator[int]:
    """``wss://``: the WebSocket bridge on TLS in front of the SDK server (stdio)."""
    port = free_port()
    argv = [PY, str(PEERS / "ws_bridge.py"), "--port", str(port)]
    argv += ["--certfile", str(tls_files.cert), "--keyfile", str(tls_files.key)]
    argv += ["--", peer_python(), str(PEERS / "sdk_server.py")]
    with serving(argv, port):
        yield port


def write_config(directory: Path, name: str, url: str) -> Path:
    """One server, every tool call allowed (no terminal to ask)."""
    path = directory / "agenthost.toml"
    path.write_text(
        f"""
[servers.{name}]
url = "{url}"

[policy]
mode = "headless"

[[policy.rules]]
kind = "tool"
server = "*"
name = "*"
decision = "allow"
reason = "tests may call tools"
"""
    )
    return path


def run_agenthost(
    config: Path, *args: str, ca: Path | None, lean: bool, ca_dir: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI with ``ca`` as ``SSL_CERT_FILE`` and ``ca_dir`` as ``SSL_CERT_DIR`` (each
    unset when None), on the lean path or not."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in _TRUST_AND_ROUTE and not key.endswith("_API_KEY")
    }
    if ca is not None:
        env["SSL_CERT_FILE"] = str(ca)
    if ca_dir is not None:
        env["SSL_CERT_DIR"] = str(ca_dir)
    if not lean:
        env["AGENTHOST_LEAN_HTTP"] = "0"
    return subprocess.run(
        [*AGENTHOST, "--config", str(config), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=45,
        env=env,
        cwd=REPO,
        check=False,
    )


PATHS = [pytest.param(True, id="lean"), pytest.param(False, id="httpx")]

_LEAN_POST = re.compile(r"agenthost\.transports\.lean: HTTP Request: POST https://localhost:")
_HTTPX_POST = re.compile(r"httpx: HTTP Request: POST https://localhost:")


@pytest.mark.parametrize("lean", PATHS)
def test_https_with_the_private_ca_in_ssl_cert_file(
    tmp_path: Path, https_port: int, tls_files: TLSFiles, lean: bool
) -> None:
    config = write_config(tmp_path, "good", f"https://localhost:{https_port}/mcp")
    listed = run_agenthost(config, "--json", "tools", ca=tls_files.ca, lean=lean)
    assert listed.returncode == 0, listed.stderr
    assert "good__echo" in {tool["name"] for tool in json.loads(listed.stdout)}

    called = run_agenthost(
        config,
        "-vvv",
        "--json",
        "call",
        "good__echo",
        '{"message": "over TLS"}',
        ca=tls_files.ca,
        lean=lean,
    )
    assert called.returncode == 0, called.stderr
    assert "over TLS" in called.stdout
    # The path the test asked for is the one that carried the MCP POSTs.
    lean_posts = len(_LEAN_POST.findall(called.stderr))
    httpx_posts = len(_HTTPX_POST.findall(called.stderr))
    if lean:
        assert lean_posts >= 2 and httpx_posts == 0, called.stderr
    else:
        assert httpx_posts >= 2 and lean_posts == 0, called.stderr


def test_https_with_the_private_ca_in_ssl_cert_dir(
    tmp_path: Path, https_port: int, tls_files: TLSFiles
) -> None:
    """``SSL_CERT_DIR``, the OpenSSL hashed directory (``<subject hash>.0``), is honoured
    too; on the lean path (httpx reads it the same way: one context for both)."""
    directory = tmp_path / "certs"
    directory.mkdir()
    subject_hash = subprocess.run(
        ["openssl", "x509", "-hash", "-noout", "-in", str(tls_files.ca)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (directory / f"{subject_hash}.0").write_bytes(tls_files.ca.read_bytes())
    config = write_config(tmp_path, "good", f"https://localhost:{https_port}/mcp")
    listed = run_agenthost(config, "--json", "tools", ca=None, ca_dir=directory, lean=True)
    assert listed.returncode == 0, listed.stderr
    assert "good__echo" in {tool["name"] for tool in json.loads(listed.stdout)}


def one_error_line(done: subprocess.CompletedProcess[str], server: str) -> str:
    """The command's error: stderr is one line, naming the server; no traceback."""
    assert done.returncode != 0, done.stderr
    assert "Traceback" not in done.stderr and "ExceptionGroup" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    last = lines[0]
    assert last.startswith(f"agenthost: {server}: "), done.stderr
    return last


@pytest.mark.parametrize("lean", PATHS)
def test_an_unknown_ca_is_one_line_naming_the_certificate_problem(
    tmp_path: Path, https_port: int, lean: bool
) -> None:
    config = write_config(tmp_path, "good", f"https://localhost:{https_port}/mcp")
    done = run_agenthost(config, "call", "good__echo", '{"message": "x"}', ca=None, lean=lean)
    line = one_error_line(done, "good")
    assert f"cannot reach https://localhost:{https_port}/mcp: " in line, line
    assert "TLS certificate verify failed: unable to get local issuer certificate" in line, line
    assert "SSL_CERT_FILE" in line, line  # how to trust a private CA


@pytest.mark.parametrize("lean", PATHS)
def test_a_certificate_for_another_host_name_is_refused(
    tmp_path: Path, https_port: int, tls_files: TLSFiles, lean: bool
) -> None:
    # The same server by its IP address: the certificate names only ``localhost``.
    config = write_config(tmp_path, "wrong", f"https://127.0.0.1:{https_port}/mcp")
    done = run_agenthost(
        config, "call", "wrong__echo", '{"message": "x"}', ca=tls_files.ca, lean=lean
    )
    line = one_error_line(done, "wrong")
    assert f"cannot reach https://127.0.0.1:{https_port}/mcp: " in line, line
    assert (
        "TLS certificate verify failed: IP address mismatch, certificate is not valid for"
        " '127.0.0.1'" in line
    ), line


# -- wss:// (the WebSocket transport): the same trust, the same one line ------------------


def test_wss_with_the_private_ca(tmp_path: Path, wss_port: int, tls_files: TLSFiles) -> None:
    config = write_config(tmp_path, "ws", f"wss://localhost:{wss_port}/")
    called = run_agenthost(
        config, "--json", "call", "ws__echo", '{"message": "over wss"}', ca=tls_files.ca, lean=True
    )
    assert called.returncode == 0, called.stderr
    assert "over wss" in called.stdout


def test_wss_with_an_unknown_ca_fails_at_once_naming_the_certificate_problem(
    tmp_path: Path, wss_port: int
) -> None:
    """Not after the connect timeout as "no WebSocket handshake": trio-websocket's reader
    task ends quietly when the TLS handshake fails, and the open waited for nothing."""
    config = write_config(tmp_path, "ws", f"wss://localhost:{wss_port}/")
    started = time.monotonic()
    done = run_agenthost(config, "call", "ws__echo", '{"message": "x"}', ca=None, lean=True)
    elapsed = time.monotonic() - started
    line = one_error_line(done, "ws")
    assert f"cannot reach wss://localhost:{wss_port}/: " in line, line
    assert "TLS certificate verify failed: unable to get local issuer certificate" in line, line
    assert elapsed < 8, elapsed  # the connect timeout is 10 s


# -- OAuth over HTTPS (issue 26 item 1, with issue 28's flow) -----------------------------


async def test_oauth_login_and_call_over_https(
    tmp_path: Path,
    tls_files: TLSFiles,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The SDK's authorization server and MCP endpoint on TLS (same origin), the private
    CA in ``SSL_CERT_FILE``: discovery, registration and the token request (httpx, the
    shared context) and the MCP POSTs (the lean path, bearer attached) all trust it.

    In-process, as the other OAuth tests: the browser stand-in is its own process and
    inherits ``SSL_CERT_FILE``. agenthost builds its SSL context once per process, so the
    test drops the cached one before (to read ``SSL_CERT_FILE``) and after (so no other
    test inherits the CA).
    """
    for name in _TRUST_AND_ROUTE:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files.ca))
    caplog.set_level(logging.DEBUG, logger="agenthost.transports.lean")
    ssl_context.cache_clear()
    try:
        async with auth_server(tmp_path, tls=(tls_files.cert, tls_files.key)) as url:
            assert url.startswith("https://localhost:")
            URL_OPENER.set(browser)
            async with agenthost.connect(config(url)) as session:
                result = await session.call_tool("echo", {"message": "over TLS"})
                assert not result.is_error
                assert "over TLS" in str(result.content)
    finally:
        ssl_context.cache_clear()
    log = peer_log(tmp_path)
    assert log.count("consent") == 1, log
    assert "token authorization_code" in log, log
    assert "wire POST /mcp 200" in log, log
    lean_posts = [
        record.getMessage()
        for record in caplog.records
        if record.name == "agenthost.transports.lean"
        and record.getMessage().startswith(f"HTTP Request: POST {url} ")
    ]
    # The MCP POSTs took the lean path on TLS: the first refused (no token yet), then
    # the initialize and the call with the token.
    assert len([line for line in lean_posts if '"HTTP/1.1 200' in line]) >= 2, caplog.text


async def login(tmp_path: Path, url: str, ca: Path | None) -> tuple[int, str, str]:
    """``agenthost auth login`` (tests/auth/sdk_peer.py's driver) with ``ca`` as its only
    extra trust (``SSL_CERT_FILE``) and a token store of its own in ``tmp_path``."""
    tmp_path.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in _TRUST_AND_ROUTE and not key.endswith("_API_KEY")
    }
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), AGENTHOST_TOKEN_STORE="file")
    if ca is not None:
        env["SSL_CERT_FILE"] = str(ca)
    return await cli_login(write_config(tmp_path, "sdk", url), env)


async def test_cli_auth_login_trusts_what_the_transports_trust(
    tmp_path: Path, tls_files: TLSFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agenthost auth login`` builds its authorization-server client on the shared SSL
    context, as every transport does: the private CA in ``SSL_CERT_FILE`` is trusted for
    discovery, registration and the token request; without it, one line names the
    certificate problem."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files.ca))  # for the browser stand-in
    async with auth_server(tmp_path, tls=(tls_files.cert, tls_files.key)) as url:
        code, out, err = await login(tmp_path / "trusted", url, tls_files.ca)
        assert code == 0, err
        assert out.startswith(f"sdk: logged in with {url.removesuffix('/mcp')}"), out
        code, out, err = await login(tmp_path / "untrusted", url, None)
    assert code == 5, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("agenthost: sdk: "), err
    assert "TLS certificate verify failed: unable to get local issuer certificate" in err, err
    log = peer_log(tmp_path)
    assert log.count("consent") == 1, log
    assert "token authorization_code" in log, log
