"""Audit log: redaction, line format, append-only, reading back."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from agenthost_policies import AuditLog, read_audit, redact

REDACT_TABLE: list[tuple[Any, Any]] = [
    ({"password": "hunter2"}, {"password": "[redacted]"}),
    ({"db_pass": "x"}, {"db_pass": "[redacted]"}),
    (
        {"API_KEY": "x", "apiKey": "y", "api-key": "z"},
        {"API_KEY": "[redacted]", "apiKey": "[redacted]", "api-key": "[redacted]"},
    ),
    ({"Authorization": "Basic abc"}, {"Authorization": "[redacted]"}),
    ({"access_token": 123}, {"access_token": "[redacted]"}),
    ({"client_secret": None}, {"client_secret": "[redacted]"}),
    ({"headers": {"Cookie": "a=b"}}, {"headers": {"Cookie": "[redacted]"}}),
    # not secrets: these keys merely contain similar letters
    (
        {"max_tokens": 100, "author": "ann", "passage": "p", "path": "/home/u"},
        {"max_tokens": 100, "author": "ann", "passage": "p", "path": "/home/u"},
    ),
    # values that look like credentials, whatever the key
    ({"header": "Bearer abcdef123456789"}, {"header": "[redacted]"}),
    ({"note": "use sk-" + "ant-api03-abcdefghijklmnop please"}, {"note": "[redacted]"}),
    (["ghp_abcdefghijklmnopqrstuvwxyz0123"], ["[redacted]"]),
    ("AKIAABCDEFGHIJKLMNOP", "[redacted]"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig", "[redacted]"),
    ("aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gH", "[redacted]"),  # 32 mixed-case alphanumerics
    # ids that must stay readable: lower-case hex hashes and UUIDs, paths, prose
    ("0123456789abcdef0123456789abcdef01234567", "0123456789abcdef0123456789abcdef01234567"),
    ("550e8400-e29b-41d4-a716-446655440000", "550e8400-e29b-41d4-a716-446655440000"),
    (
        "/home/User1/Projects/SomeProject2/src/main.py",
        "/home/User1/Projects/SomeProject2/src/main.py",
    ),
    ("the bearer of bad news", "the bearer of bad news"),
    (b"\x00\x01", "<2 bytes>"),
    ((1, 2.5, True, None), [1, 2.5, True, None]),
]


@pytest.mark.parametrize(("value", "expected"), REDACT_TABLE)
def test_redact(value: Any, expected: Any) -> None:
    assert redact(value) == expected


def test_redact_bounds_size() -> None:
    long = "x" * 500
    assert redact(long) == "x" * 200 + "...(+300 chars)"
    assert redact(list(range(30))) == [*range(20), "...(+10 items)"]
    big = {f"k{i}": i for i in range(25)}
    summary = redact(big)
    assert len(summary) == 21 and summary["..."] == "+5 keys"
    deep = {"a": {"b": {"c": {"d": {"e": 1}}}}}
    assert redact(deep) == {"a": {"b": {"c": {"d": "...(dict)"}}}}


async def test_lines_append_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "audit.jsonl"
    fixed = datetime.datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)
    with AuditLog(path, now=lambda: fixed) as log:
        await log.write({"event": "decision", "id": "1", "args": {"a": 1}})
        log.write_now({"event": "outcome", "id": "1", "result": object()})
    # a second log on the same file appends; it never truncates
    with AuditLog(path, fsync=True) as log:
        await log.write({"event": "decision", "id": "2"})
    records = read_audit(path)
    assert [r["id"] for r in records] == ["1", "1", "2"]
    assert records[0]["ts"] == "2025-01-02T03:04:05.678+00:00"
    assert records[1]["result"].startswith("<object object")
    assert path.read_bytes().count(b"\n") == 3


def test_read_audit_rejects_garbage(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"event": "decision"}\n\nnot json\n')
    with pytest.raises(ValueError, match=r"a\.jsonl:3: not JSON"):
        read_audit(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="not a JSON object"):
        read_audit(path)


async def test_closed_log_refuses_writes(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a.jsonl")
    log.close()
    log.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        await log.write({"event": "x"})


class _Clock:
    """A monotonic clock the test moves by hand (the fold window's clock)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _decision(n: int, verdict: str = "allow", roots: tuple[str, ...] = ("file:///w",)) -> dict:
    return {
        "event": "decision",
        "id": f"d-{n}",
        "kind": "roots",
        "server": "fs",
        "name": "",
        "args": {"roots": list(roots)},
        "decision": verdict,
        "rule": "r",
    }


def _outcome(n: int, result: Any = ("file:///w",)) -> dict:
    return {
        "event": "outcome",
        "id": f"d-{n}",
        "kind": "roots",
        "server": "fs",
        "name": "",
        "duration": 0.001 * n,
        "result": list(result),
        "error": None,
    }


def _shape(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (r["event"], r.get("of"), r.get("id") or r.get("same_as"), r.get("count")) for r in records
    ]


def test_identical_lines_fold_into_a_count_written_on_change(tmp_path: Path) -> None:
    clock = _Clock()
    path = tmp_path / "a.jsonl"
    with AuditLog(path, clock=clock, fold_window=60) as log:
        for n in range(1, 1001):
            log.write_now(_decision(n))
            log.write_now(_outcome(n))
        # A deny is a new decision: the allow count is written first, then the deny.
        log.write_now(_decision(1001, "deny"))
        log.write_now(_decision(1002, "deny"))
        # Other roots: new again.
        log.write_now(_decision(1003, roots=("file:///w", "file:///x")))
        log.write_now(_outcome(1003, result=("file:///w", "file:///x")))
    records = read_audit(path)
    assert _shape(records) == [
        ("decision", None, "d-1", None),
        ("outcome", None, "d-1", None),
        ("suppressed", "decision", "d-1", 999),
        ("decision", None, "d-1001", None),
        ("suppressed", "decision", "d-1001", 1),
        ("decision", None, "d-1003", None),
        # The outcome's count is written when its subject changes (here: at close).
        ("suppressed", "outcome", "d-1", 999),
        ("outcome", None, "d-1003", None),
    ]
    suppressed = records[2]
    assert suppressed["reason"] == "999 more decision lines identical to d-1"
    assert suppressed["kind"] == "roots" and suppressed["server"] == "fs"
    assert suppressed["first"] <= suppressed["last"]


def test_the_window_ends_a_fold_and_a_periodic_flush_writes_the_count(tmp_path: Path) -> None:
    clock = _Clock()
    path = tmp_path / "a.jsonl"
    with AuditLog(path, clock=clock, fold_window=10) as log:
        for n in range(1, 6):
            log.write_now(_decision(n))
        log.flush(due_only=True)  # the window is not over: nothing yet
        assert _shape(read_audit(path)) == [("decision", None, "d-1", None)]
        clock.now = 10.0
        log.flush(due_only=True)  # what the host's flusher does
        assert _shape(read_audit(path))[1:] == [("suppressed", "decision", "d-1", 4)]
        # After the window, the same decision is written in full again, once.
        log.write_now(_decision(6))
        log.write_now(_decision(7))
    assert _shape(read_audit(path))[2:] == [
        ("decision", None, "d-6", None),
        ("suppressed", "decision", "d-6", 1),
    ]


def test_an_outcome_that_differs_names_the_line_its_folded_decision_matched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.jsonl"
    with AuditLog(path, clock=_Clock()) as log:
        log.write_now(_decision(1))
        log.write_now(_outcome(1))
        log.write_now(_decision(2))  # folded into d-1
        log.write_now({**_outcome(2), "result": None, "error": "boom"})
    records = read_audit(path)
    failed = next(r for r in records if r.get("error") == "boom")
    assert failed["id"] == "d-2" and failed["same_as"] == "d-1"
    assert [r["count"] for r in records if r["event"] == "suppressed"] == [1]


def test_fold_window_zero_writes_every_line(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    with AuditLog(path, fold_window=0) as log:
        for n in range(1, 4):
            log.write_now(_decision(n))
    assert [r["id"] for r in read_audit(path)] == ["d-1", "d-2", "d-3"]


def test_many_subjects_each_keep_their_first_line_and_every_count(tmp_path: Path) -> None:
    """A server naming a new tool per call: every first line is written, and past the
    number of subjects followed at once the oldest counts are written, never lost."""
    path = tmp_path / "a.jsonl"
    with AuditLog(path, clock=_Clock()) as log:
        for n in range(3000):
            for _ in range(2):
                log.write_now({**_decision(n, "deny"), "kind": "tool", "name": f"t{n}"})
    records = read_audit(path)
    assert sum(1 for r in records if r["event"] == "decision") == 3000
    assert sum(r["count"] for r in records if r["event"] == "suppressed") == 3000


def test_lines_of_actions_that_ran_are_never_folded(tmp_path: Path) -> None:
    """Issue 22: an allowed tool call, sampling request or elicitation is written every
    time, so no crash can lose it; denies and roots still fold."""
    path = tmp_path / "a.jsonl"
    clock = _Clock()
    log = AuditLog(path, clock=clock)
    for kind in ("tool", "sampling", "elicitation", "prompt", "resource", "skill"):
        for n in range(3):
            log.write_now({**_decision(n), "kind": kind, "name": "x"})
            log.write_now({**_outcome(n), "kind": kind, "name": "x"})
            log.write_now({**_decision(n), "event": "review", "kind": kind, "name": "x"})
        for n in range(3):
            log.write_now({**_decision(n, "deny"), "kind": kind, "name": "x"})
    for n in range(3):
        log.write_now(_decision(n))
    # Not closed: what a SIGKILL leaves is what was written so far.
    records = read_audit(path)
    for kind in ("tool", "sampling", "elicitation", "prompt", "resource", "skill"):
        mine = [r for r in records if r["kind"] == kind]
        assert [r["event"] for r in mine[:9]] == ["decision", "outcome", "review"] * 3
        # The denies fold: the first is written, the next two wait as a count.
        assert [r.get("decision") for r in mine[9:]] == ["deny"]
    assert [r["id"] for r in records if r["kind"] == "roots"] == ["d-0"]
    log.close()


def test_a_folded_count_is_due_within_count_every(tmp_path: Path) -> None:
    """A flood that goes on writes its count as it goes: a crash loses at most the last
    ``count_every`` seconds of repeats, and a flusher every ``count_every / 4`` keeps that."""
    path = tmp_path / "a.jsonl"
    clock = _Clock()
    with AuditLog(path, clock=clock, fold_window=60, count_every=1.0) as log:
        log.write_now(_decision(1))
        log.write_now(_decision(2))  # first repeat at 0.0
        clock.now = 0.5
        log.flush(due_only=True)
        assert _shape(read_audit(path)) == [("decision", None, "d-1", None)]
        clock.now = 0.75
        log.flush(due_only=True)  # due by the next tick at 1.0: written now
        assert _shape(read_audit(path))[1:] == [("suppressed", "decision", "d-1", 1)]
        # Without a flusher, the next repeat writes a count that waited count_every.
        log.write_now(_decision(3))  # pending since 0.75
        clock.now = 1.75
        log.write_now(_decision(4))
        assert _shape(read_audit(path))[2:] == [("suppressed", "decision", "d-1", 2)]
        # The run goes on: still folded into d-1, not written in full.
        log.write_now(_decision(5))
    assert _shape(read_audit(path))[3:] == [("suppressed", "decision", "d-1", 1)]


async def test_the_host_flusher_writes_a_count_within_a_second(
    tmp_path: Path, autojump_clock: Any
) -> None:
    import trio

    from agenthost_policies import PolicyEngine

    path = tmp_path / "a.jsonl"
    audit = AuditLog(path, clock=trio.current_time)
    engine = PolicyEngine(rules=[], mode="headless", audit=audit)
    with engine:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(engine.run_audit_flusher)
            for n in range(1, 4):
                audit.write_now(_decision(n))
            start = trio.current_time()
            while not any(r["event"] == "suppressed" for r in read_audit(path)):
                await trio.sleep(0.01)
            assert trio.current_time() - start <= 1.0
            nursery.cancel_scope.cancel()
