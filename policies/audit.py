"""The audit trail: append-only JSONL, one line per decision and one per outcome.

Each line is one self-contained JSON object, written with a single ``write`` on a file
opened in append mode without a Python buffer, so the line is with the OS before
:meth:`AuditLog.write` returns, and concurrent writers (two hosts, one file) interleave
whole lines. ``fsync`` per line is optional because it costs a disk round trip per action.
What a crash (even SIGKILL) can lose: the line being written, and the count of repeats
folded (below) in the last second, never a line about an action that ran.

Line shapes (``event`` tells them apart)::

    {"ts": "...", "event": "decision", "id": "...", "kind": "tool", "server": "fs",
     "name": "write_file", "args": {...redacted summary...}, "decision": "allow",
     "rule": "policy.rules[0]", "reason": "...", "by": "rule"}
    {"ts": "...", "event": "outcome", "id": "...", "kind": "tool", "server": "fs",
     "name": "write_file", "duration": 0.012, "result": ..., "error": null}

Secrets never reach the file: argument and result summaries go through :func:`redact`,
which blanks values under secret-sounding keys and values that look like credentials,
and truncates long strings and collections (an audit line is a summary, not a copy).

Repeated identical lines are folded, so a server cannot flood the file (100k ``roots/list``
requests used to write 200k lines). Only lines about something that did not run may fold:
those of kind ``roots`` (answering with the roots runs nothing) and ``deny`` decisions. A
tool call, prompt, resource read, skill, sampling request or elicitation that was allowed
is written in full every time, decision before it runs, outcome before its result reaches
the caller. A foldable line is identical to the last one written for the same subject
(``event``, ``kind``, ``server``, ``name``) when every field but ``ts``, ``id`` and
``duration`` is equal. Within ``fold_window`` seconds of the written line, identical ones
are counted instead of written; the count is written as one ``suppressed`` line when the
subject's next line differs (an allow after a deny, other roots, another result), when
the window ends, within ``count_every`` seconds (default 1) of the first repeat it counts
(the host's flusher, :meth:`AuditLog.flush` with ``due_only``), on :meth:`AuditLog.flush`
and on close::

    {"ts": "...", "event": "suppressed", "of": "decision", "kind": "roots", "server": "fs",
     "name": "", "count": 99998, "same_as": "ab12cd34-1", "first": "...", "last": "...",
     "reason": "99998 more decision lines identical to ab12cd34-1"}

So every different line is still written, in order, and the file says how many it
folded into which line; a flood that lasts writes one count per subject about every
``count_every`` seconds. A line whose ``id`` was folded away (the outcome of a folded
decision, when the outcome differs) carries ``same_as``: the written line that stands for
the folded one.
"""

from __future__ import annotations

import datetime
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import attrs
import orjson
import trio

__all__ = [
    "DEFAULT_COUNT_EVERY",
    "DEFAULT_FOLD_WINDOW",
    "REDACTED",
    "AuditLog",
    "default_audit_path",
    "read_audit",
    "redact",
]

REDACTED = "[redacted]"


def default_audit_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/agenthost/audit.jsonl`` (a relative ``XDG_STATE_HOME`` is ignored,
    as the XDG spec says), else ``~/.local/state/agenthost/audit.jsonl``.

    Why a default at all: an auditing host that audits nothing until configured surprises
    its users (issue 27); ``[policy] audit = false`` turns it off.
    """
    environ = os.environ if env is None else env
    state = environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "agenthost" / "audit.jsonl"


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

#: Fields that tell identical lines apart without making them different decisions.
_VOLATILE = frozenset({"ts", "id", "duration"})
#: Default seconds within which identical lines are folded into a count.
DEFAULT_FOLD_WINDOW = 60.0
#: Default most seconds a folded count waits before it is written (what a crash can lose).
DEFAULT_COUNT_EVERY = 1.0
#: Kinds whose allowed lines may fold too: answering them runs nothing on anyone's behalf.
_FOLDABLE_KINDS = frozenset({"roots"})
#: Subjects followed at once, and ids of folded lines remembered for ``same_as``: a
#: server choosing a new tool name per call must not grow the log's memory either.
_MAX_SUBJECTS = 1024
_MAX_FOLDED_IDS = 4096

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


@attrs.define
class _Run:
    """The last line written for one subject, and the identical ones folded since."""

    key: bytes
    #: Monotonic time the line was written: the window runs from here.
    since: float
    #: The written line's ``id`` (what folded ones are ``same_as``), if it had one.
    shown: Any
    count: int = 0
    first: str = ""
    last: str = ""
    #: Monotonic time of the first repeat not yet written in a count.
    pending_since: float = 0.0


class AuditLog:
    """An append-only JSONL audit file.

    Args:
        path: the file; created (with its directory) if missing, never truncated.
        fsync: also ``os.fsync`` after each line, in a worker thread.
        now: wall clock for the ``ts`` field (injectable for tests).
        fold_window: seconds within which a line identical to the last one of its subject
            is counted instead of written (see the module docstring); ``0`` writes every
            line.
        clock: monotonic seconds for the fold window (injectable for tests).
        count_every: most seconds a folded count waits unwritten, given a caller of
            ``flush(due_only=True)`` every ``count_every / 4`` seconds (the host's
            flusher); what a crash can lose of a flood.

    **Resource handling:** the file stays open until :meth:`close`; use the instance as a
    context manager. A closed log refuses further writes. Closing writes the pending
    counts first.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync: bool = False,
        now: Any = None,
        fold_window: float = DEFAULT_FOLD_WINDOW,
        clock: Callable[[], float] = time.monotonic,
        count_every: float = DEFAULT_COUNT_EVERY,
    ) -> None:
        if not count_every > 0:
            raise ValueError("count_every must be a positive number of seconds")
        self.path = Path(path)
        self.fsync = fsync
        self.fold_window = fold_window
        self.count_every = count_every
        self._now = now or (lambda: datetime.datetime.now(datetime.UTC))
        self._clock = clock
        #: Per subject, in the order their windows end.
        self._runs: OrderedDict[tuple[Any, ...], _Run] = OrderedDict()
        self._folded: OrderedDict[Any, Any] = OrderedDict()
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # A new log is the user's only (it holds tool arguments and results); an existing
        # one keeps the mode its owner gave it.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._file: IO[bytes] | None = os.fdopen(fd, "ab", buffering=0)

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._file is None

    def close(self) -> None:
        """Write the pending counts and close the file; idempotent."""
        if self._file is not None:
            self.flush()
            self._file.close()
            self._file = None

    def flush(self, *, due_only: bool = False) -> None:
        """Write a ``suppressed`` line for every subject with folded lines.

        Args:
            due_only: only the counts that are due: those of subjects whose fold window
                has ended, and those that have waited ``3/4 count_every`` seconds or
                more (what a caller every ``count_every / 4`` seconds wants: every count
                written within ``count_every``, a flood's as it goes on, about one line
                a second, and one that stopped without waiting for the next line or the
                close).
        """
        if self._file is None:
            return
        if due_only:
            now = self._clock()
            self._expire(now)
            for run in list(self._runs.values()):
                if run.count and now - run.pending_since >= self.count_every * 0.75:
                    self._write_suppressed(run)
            return
        for run in list(self._runs.values()):
            if run.count:
                self._write_suppressed(run)

    def write_now(self, record: Mapping[str, Any]) -> None:
        """Append one line synchronously (no fsync): for paths that cannot await.

        A foldable line identical to the last one of its subject within the fold window
        is counted, not written (see the module docstring); any other line is with the
        OS when this returns.
        """
        if self._file is None:
            raise RuntimeError(f"audit log {self.path} is closed")
        ts = self._now().isoformat(timespec="milliseconds")
        if self.fold_window <= 0:
            self._append({"ts": ts, **record})
            return
        now = self._clock()
        self._expire(now)
        subject = (
            record.get("event"),
            record.get("kind"),
            record.get("server"),
            record.get("name"),
        )
        if not _foldable(record):
            # An action that ran: written in full, after the subject's pending count (so
            # the file stays in order); the next repeat starts a new run.
            run = self._runs.pop(subject, None)
            if run is not None and run.count:
                self._write_suppressed(run)
            self._append({"ts": ts, **record})
            return
        key = orjson.dumps(
            {k: v for k, v in record.items() if k not in _VOLATILE},
            default=repr,
            option=orjson.OPT_SORT_KEYS,
        )
        record_id = record.get("id")
        same_as = self._folded.pop(record_id, None) if record_id is not None else None
        run = self._runs.get(subject)
        if run is not None and run.key == key:
            if not run.count:
                run.pending_since = now
            run.count += 1
            run.first = run.first or ts
            run.last = ts
            if record_id is not None and run.shown is not None:
                self._folded[record_id] = run.shown
                if len(self._folded) > _MAX_FOLDED_IDS:
                    self._folded.popitem(last=False)
            if now - run.pending_since >= self.count_every:
                self._write_suppressed(run)  # no flusher keeping up: write it now
            return
        if run is not None:
            if run.count:
                self._write_suppressed(run)
            del self._runs[subject]
        line = {"ts": ts, **record}
        if same_as is not None:
            line["same_as"] = same_as
        self._append(line)
        self._runs[subject] = _Run(key=key, since=now, shown=record_id)
        if len(self._runs) > _MAX_SUBJECTS:
            _, oldest = self._runs.popitem(last=False)
            if oldest.count:
                self._write_suppressed(oldest)

    async def write(self, record: Mapping[str, Any]) -> None:
        """Append one line; with ``fsync`` also wait until it is on disk.

        **Cancellation:** the line is written before the first checkpoint; a cancelled
        fsync still completes in its thread (abandoning it would gain nothing).
        """
        self.write_now(record)
        if self.fsync and self._file is not None:
            await trio.to_thread.run_sync(os.fsync, self._file.fileno())

    def _append(self, line: Mapping[str, Any]) -> None:
        assert self._file is not None
        # One write of the whole line on an O_APPEND, unbuffered file: with the OS as
        # written. A raw write may take part of it (a signal, a full disk): finish it.
        data = memoryview(orjson.dumps(line, default=repr) + b"\n")
        while data:
            written = self._file.write(data)
            if not written:
                raise OSError(f"audit log {self.path}: nothing written")
            data = data[written:]

    def _expire(self, now: float) -> None:
        """End the runs whose window is over, writing their counts."""
        while self._runs:
            subject, run = next(iter(self._runs.items()))
            if now - run.since < self.fold_window:
                return
            del self._runs[subject]
            if run.count:
                self._write_suppressed(run)

    def _write_suppressed(self, run: _Run) -> None:
        record = orjson.loads(run.key)
        event = record.get("event")
        shown = f" to {run.shown}" if run.shown is not None else ""
        self._append(
            {
                "ts": self._now().isoformat(timespec="milliseconds"),
                "event": "suppressed",
                "of": event,
                "kind": record.get("kind"),
                "server": record.get("server"),
                "name": record.get("name"),
                "count": run.count,
                "same_as": run.shown,
                "first": run.first,
                "last": run.last,
                "reason": f"{run.count} more {event} lines identical{shown}",
            }
        )
        run.count = 0
        run.first = run.last = ""


def _foldable(record: Mapping[str, Any]) -> bool:
    """Whether a line may be folded into a count: it records nothing that ran."""
    if record.get("kind") in _FOLDABLE_KINDS:
        return True
    return record.get("event") == "decision" and record.get("decision") == "deny"


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
