"""Audit log: redaction, line format, append-only, reading back."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from policies import AuditLog, read_audit, redact

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
