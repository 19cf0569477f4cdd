"""The approvals file and tool definitions, without a server (the end-to-end tests with a
real server and the CLI are in tests/hostile/test_policy_hostile.py)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from agenthost.errors import ConfigError
from agenthost_policies import (
    Answer,
    Approval,
    ApprovalStore,
    CallbackPrompter,
    ConsentRequest,
    PolicyEngine,
    ToolCall,
    ToolDefinition,
    default_approvals_path,
    parse_policy,
)


def notes(**changes: object) -> ToolDefinition:
    base: dict[str, object] = {
        "name": "notes",
        "description": "List notes.",
        "input_schema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
        "server": "stdio python peer.py",
    }
    base.update(changes)
    return ToolDefinition(**base)  # type: ignore[arg-type]


def test_changes_name_each_part_that_differs() -> None:
    before = Approval.answer(kind="tool", server="s", name="notes", allow=True, definition=notes())
    assert notes().changes_since(before) == ()
    # Key order in a schema is not a change.
    same = notes(input_schema={"type": "object"}, annotations={"readOnlyHint": True})
    assert same.changes_since(before) == ()
    changed = notes(
        description="Delete.",
        input_schema={"type": "object", "properties": {"p": {"type": "string"}}},
        annotations={"readOnlyHint": False, "destructiveHint": True},
        server="stdio python other.py",
    )
    assert changed.changes_since(before) == (
        "description",
        "input schema",
        "annotations (readOnlyHint true -> false, destructiveHint unset -> true)",
        "server command or URL",
    )
    # An answer recorded without a definition binds to the name only.
    bare = Approval(kind="tool", server="s", name="notes", decision="allow")
    assert changed.changes_since(bare) == ()


def test_store_round_trip_revoke_and_file_modes(tmp_path: Path) -> None:
    path = tmp_path / "state" / "agenthost" / "approvals.json"
    store = ApprovalStore(path)
    assert store.load() == []
    a = Approval.answer(kind="tool", server="s", name="a", allow=True, definition=notes())
    b = Approval.answer(kind="tool", server="t", name="b", allow=False)
    store.put(a)
    store.put(b)
    store.put(a)  # replaces, never duplicates
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    other = ApprovalStore(path)  # another process
    assert [(e.server, e.name, e.decision) for e in other.load()] == [
        ("t", "b", "deny"),
        ("s", "a", "allow"),
    ]
    assert other.get("tool", "s", "a") == a
    assert [e.name for e in other.revoke(server="t")] == ["b"]
    assert store.get("tool", "t", "b") is None  # the first store sees the other's change
    assert other.revoke(server="nobody") == []
    assert [e.name for e in store.revoke()] == ["a"]
    assert json.loads(path.read_text())["approvals"] == []


def test_invalid_file_is_ignored_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "approvals.json"
    path.write_text("{not json", encoding="utf-8")
    store = ApprovalStore(path)
    assert store.get("tool", "s", "a") is None
    with pytest.raises(OSError, match="not valid"):
        store.put(Approval.answer(kind="tool", server="s", name="a", allow=True))
    assert path.read_text(encoding="utf-8") == "{not json"


def test_unknown_entries_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "approvals.json"
    future = {"kind": "tool", "server": "s", "name": "x", "decision": "ask-later"}
    path.write_text(json.dumps({"version": 2, "approvals": [future]}), encoding="utf-8")
    store = ApprovalStore(path)
    store.put(Approval.answer(kind="tool", server="s", name="a", allow=True))
    kept = json.loads(path.read_text(encoding="utf-8"))["approvals"]
    assert future in kept and len(kept) == 2


def test_config_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    default = tmp_path / "xdg" / "agenthost" / "approvals.json"
    assert default_approvals_path() == default
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    assert default_approvals_path() == Path.home() / ".local/state/agenthost/approvals.json"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert parse_policy({}, source="t").approvals == default  # interactive: on
    assert parse_policy({"mode": "headless"}, source="t").approvals is None
    assert parse_policy({"mode": "programmatic", "approvals": True}, source="t").approvals == (
        default
    )
    assert parse_policy({"approvals": False}, source="t").approvals is None
    mine = parse_policy({"approvals": "mine.json"}, source="t", base_dir=tmp_path)
    assert mine.approvals == tmp_path / "mine.json"
    with pytest.raises(ConfigError, match=r"policy\.approvals"):
        parse_policy({"approvals": 3}, source="t")


async def test_a_remembered_never_always_denies(tmp_path: Path) -> None:
    """The agent hides tools the policy can only deny; a "never" (of this session or in
    the file) is one of those reasons."""

    async def never(request: ConsentRequest) -> Answer:
        return Answer.NEVER

    def engine(store: ApprovalStore | None) -> PolicyEngine:
        config = parse_policy({"mode": "programmatic", "preset": "ask-always"}, source="t")
        prompter = CallbackPrompter(confirm=never)
        return PolicyEngine(
            rules=config.all_rules, mode="programmatic", prompter=prompter, approvals=store
        )

    call = ToolCall(server="s", tool="rm", definition=notes(name="rm"))
    for store in (None, ApprovalStore(tmp_path / "approvals.json")):
        first = engine(store)
        assert first.always_denies(call) is None
        assert not (await first.check(call)).allowed
        assert "never" in (first.always_denies(call) or "")
    later = engine(ApprovalStore(tmp_path / "approvals.json"))  # a new session
    assert not (await later.check(call)).allowed  # reads the file: denied, not asked
    assert "never" in (later.always_denies(call) or "")


_WRITER = """
import sys
from agenthost_policies import Approval, ApprovalStore
store = ApprovalStore(sys.argv[1])
sys.stdin.readline()  # start together: the writers overlap
for i in range(int(sys.argv[3])):
    store.put(Approval.answer(kind="tool", server=sys.argv[2], name=f"t{i}", allow=True))
"""


def test_concurrent_sessions_lose_no_approval(tmp_path: Path) -> None:
    """8 processes x 40 answers at once: every answer is in the file afterwards (before the
    lock around read-modify-replace: 240-272 of 320 were lost, each writer replacing the
    file with its own stale copy)."""
    import subprocess
    import sys

    path = tmp_path / "approvals.json"
    writers, puts = 8, 40
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), f"w{w}", str(puts)],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for w in range(writers)
    ]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(b"go\n")
        p.stdin.flush()
    for p in procs:
        _, err = p.communicate(timeout=50)
        assert p.returncode == 0, err.decode()
    kept = {(e.server, e.name) for e in ApprovalStore(path).load()}
    assert len(kept) == writers * puts, f"{writers * puts - len(kept)} answers lost"


def test_a_held_lock_bounds_the_wait(tmp_path: Path) -> None:
    """A process that holds the lock (hung, stopped) costs a writer ``lock_timeout``, never
    a hang: the write fails with a clear error and the file is left as it was."""
    import fcntl
    import os
    import time

    path = tmp_path / "approvals.json"
    store = ApprovalStore(path, lock_timeout=0.3)
    store.put(Approval.answer(kind="tool", server="s", name="a", allow=True))
    before = path.read_bytes()
    fd = os.open(f"{path}.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        start = time.monotonic()
        with pytest.raises(TimeoutError, match="being written by another process"):
            ApprovalStore(path, lock_timeout=0.3).put(
                Approval.answer(kind="tool", server="s", name="b", allow=True)
            )
        assert 0.3 <= time.monotonic() - start < 2
    finally:
        os.close(fd)
    assert path.read_bytes() == before
    store.put(Approval.answer(kind="tool", server="s", name="b", allow=True))  # released
    assert {e.name for e in ApprovalStore(path).load()} == {"a", "b"}
