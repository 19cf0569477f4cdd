"""Start network MCP servers as subprocesses on 127.0.0.1 free ports, for the tests.

Why subprocesses: uvicorn/express servers do not run under Trio in the test process, and
a real process is what a "server restarts" test needs. Readiness is the port accepting
connections; teardown is SIGTERM then SIGKILL of the whole process group, shielded, in a
``finally``, so a failing test leaves nothing listening.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import trio

__all__ = [
    "EVERYTHING",
    "PEERS",
    "PY",
    "bind_localhost_preload",
    "free_port",
    "serve",
    "wait_for_port",
]

PEERS = Path(__file__).parent
PY = sys.executable
EVERYTHING = (
    PEERS.parent.parent / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
)

#: server-everything's express app listens on every interface; this preload makes any
#: ``listen(port)`` without a host bind 127.0.0.1 only, as the tests must.
_PRELOAD = """
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || typeof args[0] === "string") {
    if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def bind_localhost_preload(directory: Path) -> Path:
    path = directory / "bind_localhost.cjs"
    path.write_text(_PRELOAD)
    return path


async def wait_for_port(port: int, process: trio.Process, timeout: float = 30.0) -> None:
    with trio.fail_after(timeout):
        while True:
            if process.returncode is not None:
                raise RuntimeError(f"server exited with {process.returncode} before listening")
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.05)
                continue
            await stream.aclose()
            return


@asynccontextmanager
async def serve(
    argv: Sequence[str],
    port: int,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> AsyncIterator[trio.Process]:
    """Run ``argv`` until the block ends; yields once ``port`` accepts connections."""
    process = await trio.lowlevel.open_process(
        list(argv),
        env={**os.environ, **(env or {})},
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        await wait_for_port(port, process)
        yield process
    finally:
        with trio.CancelScope(shield=True):
            await stop(process)


async def stop(process: trio.Process) -> None:
    """SIGTERM the process group, wait up to 5 s, then SIGKILL. Shielded by the caller."""
    if process.returncode is None:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with trio.move_on_after(5):
            await process.wait()
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()
