"""The audit trail: append-only JSONL, one line per decision and one per outcome.

Each line is one self-contained JSON object, written with a single ``write`` on a file
opened in append mode and flushed at once, so a crash loses at most the line being written
and concurrent writers (two hosts, one file) interleave whole lines. ``fsync`` per line is
optional because it costs a disk round trip per action.

Line shapes (``event`` tells them apart)::

    {"ts": "...", "event": "decision", "id": "...", "kind": "tool", "server": "fs",
     "name": "write_file", "args": {...redacted summary...}, "decision": "allow",
     "rule": "policy.rules[0]", "reason": "...", "by": "rule"}
    {"ts": "...", "event": "outcome", "id": "...", "kind": "tool", "server": "fs",
     "name": "write_file", "duration": 0.012, "result": ..., "error": null}

Secrets never reach the file: argument and result summaries go through :func:`redact`,
which blanks values under secret-sounding keys and values that look like credentials,
and truncates long strings and collections (an audit line is a summary, not a copy).
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import orjson
import trio

__all__ = ["REDACTED", "AuditLog", "read_audit", "redact"]

REDACTED = "[redacted]"

_SECRET_KEY = re.compile(
    r"(passw(or)?d|passphrase|(^|[-_.])pass($|[-_.])|secret|token(?!s)|api[-_]?key|apikey|"
    r"authorization|(^|[-_.])auth($|[-_.])|cookie|credential|private[-_]?key|"
    r"session[-_]?id|signature)",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"(?i:bearer)\s+[A-Za-z0-9._~+/=-]{8,}"  # Authorization header values
    r"|sk-[A-Za-z0-9_-]{16,}"  # OpenAI / Anthropic style keys
    r"|(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}"  # GitHub tokens
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|AKIA[0-9A-Z]{16}"  # AWS access key ids
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # JWTs
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
)
# A long unbroken run of mixed-case letters and digits: most API keys. Lower-case hex
# (git hashes, UUIDs) does not qualify, so ids stay readable.
_KEYLIKE = re.compile(r"[A-Za-z0-9_\-+=]{32,}")

_MAX_STRING = 200
_MAX_ITEMS = 20
_MAX_DEPTH = 4


def _looks_secret(text: str) -> bool:
    if _SECRET_VALUE.search(text):
        return True
    for match in _KEYLIKE.finditer(text):
        token = match.group()
        if (
            any(c.isupper() for c in token)
            and any(c.islower() for c in token)
            and any(c.isdigit() for c in token)
        ):
            return True
    return False


def redact(value: Any, *, _depth: int = 0) -> Any:
    """A JSON-safe, secret-free, bounded summary of ``value``.

    Values under keys like ``token``, ``password``, ``api_key``, ``authorization`` become
    ``"[redacted]"``; so does any string that looks like a credential (bearer tokens,
    ``sk-...`` keys, JWTs, long mixed-case alphanumeric runs). Strings longer than 200
    characters, collections beyond 20 items and nesting beyond 4 levels are cut, saying
    how much was left out.
    """
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        if _looks_secret(value):
            return REDACTED
        if len(value) > _MAX_STRING:
            return f"{value[:_MAX_STRING]}...(+{len(value) - _MAX_STRING} chars)"
        return value
    if _depth >= _MAX_DEPTH:
        return f"...({type(value).__name__})"
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for index, (key, item) in enumerate(value.items()):
            if index == _MAX_ITEMS:
                out["..."] = f"+{len(value) - _MAX_ITEMS} keys"
                break
            name = str(key)
            out[name] = REDACTED if _SECRET_KEY.search(name) else redact(item, _depth=_depth + 1)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value)
        summary = [redact(item, _depth=_depth + 1) for item in items[:_MAX_ITEMS]]
        if len(items) > _MAX_ITEMS:
            summary.append(f"...(+{len(items) - _MAX_ITEMS} items)")
        return summary
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    return redact(repr(value), _depth=_depth)


class AuditLog:
    """An append-only JSONL audit file.

    Args:
        path: the file; created (with its directory) if missing, never truncated.
        fsync: also ``os.fsync`` after each line, in a worker thread.
        now: wall clock for the ``ts`` field (injectable for tests).

    **Resource handling:** the file stays open until :meth:`close`; use the instance as a
    context manager. A closed log refuses further writes.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync: bool = False,
        now: Any = None,
    ) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._now = now or (lambda: datetime.datetime.now(datetime.UTC))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] | None = open(self.path, "ab", buffering=0)  # noqa: SIM115

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file; idempotent."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def write_now(self, record: Mapping[str, Any]) -> None:
        """Append one line synchronously (no fsync): for paths that cannot await."""
        if self._file is None:
            raise RuntimeError(f"audit log {self.path} is closed")
        line = orjson.dumps(
            {"ts": self._now().isoformat(timespec="milliseconds"), **record},
            default=repr,
        )
        # One write of the whole line on an O_APPEND, unbuffered file: flushed as written.
        self._file.write(line + b"\n")

    async def write(self, record: Mapping[str, Any]) -> None:
        """Append one line; with ``fsync`` also wait until it is on disk.

        **Cancellation:** the line is written before the first checkpoint; a cancelled
        fsync still completes in its thread (abandoning it would gain nothing).
        """
        self.write_now(record)
        if self.fsync and self._file is not None:
            await trio.to_thread.run_sync(os.fsync, self._file.fileno())


def read_audit(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read an audit file back, one dict per line (for tests, reports and ``check``).

    Raises:
        ValueError: naming the line number, if a line is not a JSON object.
    """
    records: list[dict[str, Any]] = []
    with open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON: {exc}") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{number}: not a JSON object")
            records.append(record)
    return records
