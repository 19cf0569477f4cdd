"""Issue 14 item 2: a server's flood of asks cannot flood the audit log.

100k ``roots/list`` requests used to write 200k audit lines (41 MiB). The audit log now
folds a line identical to the last one of its subject into a count, so the flood costs a
few lines a second (issue 22: each count is written within a second, so a crash loses no
more), and the file still says exactly how many decisions it folded; a decision that
differs (a deny after allows) is always written.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import trio

from agenthost.config.model import HostConfig, Workspace
from agenthost.host.host import open_host
from agenthost.protocol.types import TextContent
from agenthost_policies import Answer, CallbackPrompter, ConsentRequest, read_audit
from tests.hostile.conftest import FloodSize, hostile, report

ROOTS = {"jsonrpc": "2.0", "id": 0, "method": "roots/list"}


def _text(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def _totals(records: list[dict[str, Any]], event: str, decision: str | None = None) -> int:
    """Lines of ``event`` (of this ``decision``) written plus those folded into counts."""
    shown = {
        r["id"]: r
        for r in records
        if r["event"] == event and (decision is None or r.get("decision") == decision)
    }
    folded: int = sum(
        r["count"]
        for r in records
        if r["event"] == "suppressed" and r["of"] == event and r["same_as"] in shown
    )
    return len(shown) + folded


async def test_roots_flood_writes_a_bounded_audit(tmp_path: Path, flood: FloodSize) -> None:
    count = max(flood.requests, 100_000)
    audit = tmp_path / "audit.jsonl"
    (tmp_path / "ws").mkdir()
    config = HostConfig(
        policy={"mode": "headless", "preset": "unsafe-allow-everything", "audit": str(audit)},
        servers=[hostile("bad")],
        workspaces=[Workspace.from_path(tmp_path / "ws", name="ws")],
    )
    async with open_host(config) as host:
        start = trio.current_time()
        flood_roots = {"send": ROOTS, "count": count}
        await host.call_tool("bad__act", {"actions": [{"background": [flood_roots]}]})
        with trio.fail_after(120):
            while True:
                stats = json.loads(_text(await host.call_tool("bad__stats", {})))
                if stats["responses"] + stats["errors"] == count:
                    break
                await trio.sleep(0.05)
        took = trio.current_time() - start
    records = [r for r in read_audit(audit) if r["kind"] == "roots"]
    report(
        flood,
        f"{count} roots/list, server reading",
        {
            "answered_with_roots": stats["responses"],
            "refused_past_the_cap": stats["errors"],
            "audit_lines": len(records),
            "audit_bytes": audit.stat().st_size,
            "seconds": round(took, 1),
        },
    )
    # Every answered request was one allowed decision and one outcome: all are accounted
    # for, written or folded into a count, in a few lines.
    assert stats["responses"] > 1_000
    assert _totals(records, "decision", "allow") == stats["responses"]
    assert _totals(records, "outcome") == stats["responses"]
    # Two lines, then per subject (decision, outcome) one count every 0.75-1 s.
    assert len(records) <= 6 + 3 * math.ceil(took), [r["event"] for r in records]
    suppressed = [r for r in records if r["event"] == "suppressed"]
    assert {r["of"] for r in suppressed} == {"decision", "outcome"}
    assert all(r["reason"].endswith(f"identical to {r['same_as']}") for r in suppressed)


async def test_allow_then_deny_are_both_recorded(tmp_path: Path) -> None:
    """Identical decisions fold, but a deny after allows is a new decision: written."""
    audit = tmp_path / "audit.jsonl"
    (tmp_path / "ws").mkdir()
    asked: list[Answer] = []

    async def confirm(request: ConsentRequest) -> Answer:
        asked.append(Answer.ALLOW if len(asked) < 50 else Answer.DENY)
        return asked[-1]

    policy = {
        "mode": "programmatic",
        "preset": "none",
        "audit": str(audit),
        "rules": [
            {"kind": "tool", "decision": "allow", "server": "*", "name": "*"},
            {"kind": "roots", "decision": "ask", "server": "*"},
        ],
    }
    config = HostConfig(
        policy=policy,
        servers=[hostile("bad")],
        workspaces=[Workspace.from_path(tmp_path / "ws", name="ws")],
    )
    # Groups of 20 (under the 32 asks a session handles at once), so every one is asked.
    actions: list[dict[str, Any]] = []
    for _ in range(10):
        actions += [{"send": ROOTS, "count": 20}, {"sleep": 0.1}]
    async with open_host(config, prompter=CallbackPrompter(confirm=confirm)) as host:
        asked.clear()  # the roots listed at start
        await host.call_tool("bad__act", {"actions": actions})
        with trio.fail_after(30):
            while True:
                stats = json.loads(_text(await host.call_tool("bad__stats", {})))
                if stats["responses"] + stats["errors"] == 200:
                    break
                await trio.sleep(0.05)
    allowed = asked.count(Answer.ALLOW)
    denied = asked.count(Answer.DENY)
    assert allowed == 50 and denied > 0
    records = [r for r in read_audit(audit) if r["kind"] == "roots"]
    decisions = [r["decision"] for r in records if r["event"] == "decision"]
    # The allow is written, the deny after it is written; the repeats are counted.
    assert decisions[-2:] == ["allow", "deny"]
    assert _totals(records, "decision", "deny") == denied
    assert len(records) <= 20, [r["event"] for r in records]
    # `agenthost audit` shows the folded runs too.
    (tmp_path / "agenthost.toml").write_text('[policy]\nmode = "headless"\naudit = "audit.jsonl"\n')
    shown = await trio.run_process(
        [sys.executable, "-m", "agenthost", "--config", str(tmp_path / "agenthost.toml"), "audit"],
        capture_stdout=True,
        capture_stderr=True,
        env={**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    lines = shown.stdout.decode().splitlines()
    deny_id = next(r["id"] for r in records if r.get("decision") == "deny")
    counts = [
        int(line.split(" -> ", 1)[1].split()[0])
        for line in lines
        if " folded   roots bad" in line and line.endswith(f"decision lines identical to {deny_id}")
    ]
    assert sum(counts) == denied - 1, lines
