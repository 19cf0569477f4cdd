"""Issue 22: the ``setsid`` grandchildren of a stdio server that *crashed* do not survive.

A grandchild in a session of its own is out of reach of the process-group kill, and once
its parent has died nothing links it to the server any more: before, it was re-parented
to init and lived on (3 orphans after 3 crashes). The host is now a child subreaper
while it runs stdio servers, so such orphans become its children; it stops and reaps
those of the server that ended, on a crash as on shutdown, and leaves no zombie behind.
Driven end to end: a real server process, the supervisor's restarts, ``open_host``.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from agenthost.config.model import HostConfig, RestartPolicy
from agenthost.host.host import open_host
from agenthost.host.supervisor import ServerState
from agenthost.transports.stdio import open_stdio_transport
from tests.conftest import Command
from tests.helpers import ALLOW_ALL, alive
from tests.hostile.conftest import HOSTILE_SERVER, hostile

FAST_RESTART = RestartPolicy(initial_backoff=0.05, max_backoff=0.1, max_restarts=5, window=60)


def processes() -> dict[int, tuple[bytes, int, int]]:
    """pid -> (state, parent, process group) of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        table[int(entry)] = (fields[0], int(fields[1]), int(fields[2]))
    return table


def zombie_children() -> list[int]:
    """Our children that exited and were never reaped."""
    me = os.getpid()
    return [
        pid for pid, (state, parent, _) in processes().items() if state == b"Z" and parent == me
    ]


async def wait_gone(pid: int, seconds: float = 10.0) -> bool:
    with trio.move_on_after(seconds):
        while alive(pid):
            await trio.sleep(0.02)
        return True
    return False


async def test_setsid_grandchildren_of_crashed_servers_are_stopped_and_reaped(
    tmp_path: Path,
) -> None:
    config = HostConfig(policy=ALLOW_ALL, servers=[hostile("bad", restart=FAST_RESTART)])
    grandchildren: list[int] = []
    servers: list[int] = []
    try:
        async with open_host(config) as host:
            for crash in range(3):
                pidfile = tmp_path / f"grandchild{crash}.pid"
                with trio.fail_after(20):
                    # The next server process, once its session is up.
                    while (server := host.status()[0].pid) is None or server in servers:
                        await trio.sleep(0.02)
                    servers.append(server)
                    assert await host.supervisor("bad").wait_usable() is ServerState.READY
                    actions = [{"spawn_setsid": str(pidfile)}, {"exit": 3}]
                    await host.call_tool("bad__act", {"actions": actions})
                    while not pidfile.exists() or not pidfile.read_text():
                        await trio.sleep(0.02)
                grandchild = int(pidfile.read_text())
                grandchildren.append(grandchild)
                assert await wait_gone(server)
                # Stopped after the crash, while the host runs on: not only at its close.
                assert await wait_gone(grandchild), f"crash {crash + 1}: grandchild survives"
            with trio.fail_after(20):
                while host.status()[0].restarts < 3 or host.status()[0].state is not (
                    ServerState.READY
                ):
                    await trio.sleep(0.02)
        survivors = [pid for pid in grandchildren if alive(pid)]
        assert survivors == [], f"{len(survivors)} orphans after 3 crashes and shutdown"
        assert set(zombie_children()) & set(grandchildren) == set()
    finally:
        for pid in grandchildren:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


async def test_a_one_shot_cli_command_leaves_no_orphan_of_a_server_that_crashed(
    tmp_path: Path,
) -> None:
    # The server spawns the grandchild and crashes as soon as it is initialized (its
    # reading thread is busy with that, so the host's tools/list meets the crash).
    pidfile = tmp_path / "grandchild.pid"
    script = {"on_start": [{"spawn_setsid": str(pidfile)}, {"exit": 3}]}
    config = tmp_path / "agenthost.toml"
    config.write_text(
        "[servers.bad]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([str(HOSTILE_SERVER), json.dumps(script)])}\n"
        "[servers.bad.restart]\nenabled = false\n"
    )
    with trio.fail_after(60):
        proc = await trio.run_process(
            [sys.executable, "-m", "agenthost", "--config", str(config), "tools"],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=tmp_path,
        )
    assert pidfile.exists(), proc.stderr
    grandchild = int(pidfile.read_text())
    try:
        assert b"Traceback" not in proc.stderr
        assert await wait_gone(grandchild, 5.0), "the crashed server's grandchild survives"
    finally:
        if alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


async def test_a_wrapper_child_that_outlives_the_server_is_reaped_at_close(
    crashy_cmd: Callable[..., Command],
) -> None:
    # The server's process group holds a child that outlives the leader (a wrapper's
    # child): as a subreaper the host adopts it, so it must also reap it, or the zombie
    # stays and keeps the group "alive" (seen: the close took 2.04 s, one zombie left).
    command, args = crashy_cmd()
    wrapper = f"sleep 30 & exec {shlex.join([command, *args])}"
    async with open_stdio_transport("sh", ["-c", wrapper], name="wrapped") as transport:
        await trio.sleep(0.3)  # the sleep is started
        group = transport.pid
        members = {pid for pid, (_, _, pgid) in processes().items() if pgid == group}
        assert len(members) == 2
        started = trio.current_time()
    assert trio.current_time() - started < 1.0
    assert set(zombie_children()) & members == set()
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)


def _set_subreaper(on: bool) -> None:
    import ctypes

    assert ctypes.CDLL(None, use_errno=True).prctl(36, int(on), 0, 0, 0) == 0  # CHILD_SUBREAPER


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc: Linux")
async def test_an_orphan_that_went_elsewhere_is_found_by_its_tag(tmp_path: Path) -> None:
    """A crashed server's orphan that the host did not adopt (here: the host is no
    subreaper at the crash, so the orphan goes to init) still carries the server's tag:
    the crash's clean-up looks for it among every process, not only the host's children
    (was: it lived on; a CI run once saw the crash test's grandchild survive)."""
    config = HostConfig(policy=ALLOW_ALL, servers=[hostile("bad")])
    pidfile = tmp_path / "grandchild.pid"
    grandchild = 0
    try:
        async with open_host(config) as host:
            assert await host.supervisor("bad").wait_usable() is ServerState.READY
            server = host.status()[0].pid
            assert server is not None
            _set_subreaper(False)  # the transport's close clears it anyway: no one else uses it
            actions = [{"spawn_setsid": str(pidfile)}, {"exit": 3}]
            with trio.fail_after(20):
                await host.call_tool("bad__act", {"actions": actions})
                while not pidfile.exists() or not pidfile.read_text():
                    await trio.sleep(0.02)
            grandchild = int(pidfile.read_text())
            assert await wait_gone(server)
            assert await wait_gone(grandchild), "the orphan that went to init survives"
    finally:
        if grandchild and alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)
