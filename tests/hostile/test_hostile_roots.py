"""Issue 14 item 13: a workspace swapped for a symlink to /etc is not offered as a root."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from agenthost.config.model import HostConfig, RestartPolicy, ServerConfig, Workspace
from agenthost.host.host import open_host
from agenthost.host.supervisor import ServerState
from agenthost.protocol.types import TextContent
from tests.helpers import ALLOW_ALL

Command = tuple[str, list[str]]


def _text(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


async def test_swapped_workspace_is_withheld_and_audited(
    tmp_path: Path, filesystem_cmd: Callable[..., Command]
) -> None:
    ws = tmp_path / "ws"
    other = tmp_path / "other"
    for d in (ws, other):
        d.mkdir()
        (d / "note.txt").write_text(f"in {d.name}")
    audit = tmp_path / "audit.jsonl"
    cmd = filesystem_cmd()
    config = HostConfig(
        policy={**ALLOW_ALL, "audit": str(audit)},
        servers=[
            ServerConfig(
                name="fs",
                transport="stdio",
                command=cmd[0],
                args=tuple(cmd[1]),
                restart=RestartPolicy(initial_backoff=0.01, max_backoff=0.05, max_restarts=3),
            )
        ],
        workspaces=[Workspace.from_path(ws, name="ws"), Workspace.from_path(other, name="other")],
    )

    async def read(host: Any, path: str) -> tuple[bool, str]:
        result = await host.call_tool("fs__read_text_file", {"path": path})
        return bool(result.is_error), _text(result)

    async with open_host(config) as host:
        with trio.fail_after(10):
            while (await read(host, str(ws / "note.txt")))[0]:
                await trio.sleep(0.02)
        # The workspace is removed while in use and replaced by a symlink to /etc; the
        # server restarts and lists its roots again.
        shutil.rmtree(ws)
        ws.symlink_to("/etc")
        assert [r.name for r in host.roots_for("fs")] == ["other"]
        pid = host.status()[0].pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with trio.fail_after(10):
            while host.status()[0].pid == pid or host.status()[0].state is not ServerState.READY:
                await trio.sleep(0.02)
            while (await read(host, str(other / "note.txt")))[0]:
                await trio.sleep(0.02)
        denied, message = await read(host, str(ws / "hostname"))
        assert denied, message
        denied, message = await read(host, "/etc/hostname")
        assert denied, message
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    withheld = [
        r["result"]["withheld"]
        for r in records
        if r.get("event") == "outcome"
        and r.get("kind") == "roots"
        and isinstance(r.get("result"), dict)
    ]
    assert withheld
    assert withheld[-1][0]["workspace"] == "ws"
    assert "/etc" in withheld[-1][0]["problem"]
