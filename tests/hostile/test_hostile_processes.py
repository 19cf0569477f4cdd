"""Issue 14 item 14 (processes): a ``setsid`` grandchild of a stdio server does not
outlive the host."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import trio

from agenthost.config.model import HostConfig
from agenthost.host.host import open_host
from tests.helpers import ALLOW_ALL, alive
from tests.hostile.conftest import hostile


async def test_setsid_grandchild_does_not_survive_the_host(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    config = HostConfig(policy=ALLOW_ALL, servers=[hostile("bad")])
    async with open_host(config) as host:
        await host.call_tool("bad__act", {"actions": [{"spawn_setsid": str(pidfile)}]})
        with trio.fail_after(10):
            while not pidfile.exists() or not pidfile.read_text():
                await trio.sleep(0.02)
        grandchild = int(pidfile.read_text())
        assert alive(grandchild)
        server = host.status()[0].pid
    try:
        assert server is not None and not alive(server)
        with trio.fail_after(5):
            while alive(grandchild):
                await trio.sleep(0.02)
    finally:
        if alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)
