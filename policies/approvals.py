"""Remembered answers ("always" / "never"), bound to what the tool is, kept across sessions.

Why bound to the definition: a server can redefine a tool at any time (``list_changed``).
An "always" given to a read-only ``notes`` tool must not carry over to a ``notes`` that now
deletes files (a "rug pull"). So a remembered answer records a digest of each part of the
tool's definition - name, title, description, input and output schemas, annotations, and
how the server is launched - and an "always" answers again only while every digest is the
same. When one differs the user is asked again and told which parts changed. A "never"
stands whatever the definition: refusing is always safe.

Why bound to where the server runs: the same command line is another program in another
place. ``python server.py`` in another directory, or with ``PYTHONPATH`` or
``NODE_OPTIONS`` set by a project's ``env``, runs other code. So a stdio server's
definition also holds its resolved working directory and a digest of its environment
(``env`` and ``env_file`` values, which the config merges, and the host values of
variables named in ``inherit_env`` beyond the proxy ones), and every server's config scope
(``user`` or the project file it came from). Answers given in different places are kept
side by side (the entry's ``binding``); a place with none of its own is judged by the
latest answer for the tool: its "never" stands, its "always" is asked again, naming what
differs. An entry written before these parts were recorded proves nothing about them: it
is kept in the file as it is, and its "always" is asked again.

Why a file: people expect "always" to mean always, not "until this process ends". The
:class:`ApprovalStore` keeps tool answers in ``$XDG_STATE_HOME/agenthost/approvals.json``
(``~/.local/state/agenthost/approvals.json`` by default; directory 0700, file 0600),
written atomically (a temporary file renamed over the old one) and re-read when another
process changed it, so ``agenthost approvals revoke`` takes effect in a running session at
its next question. Only digests are stored, never a tool's text, arguments or a secret.

Why a lock: two sessions answering at the same time each read the file, add their answer
and rename their copy over it; without a lock the second rename drops the first answer
(8 writers x 40 answers lost 240-272 of 320). Every read-modify-replace holds an
exclusive ``flock`` on ``approvals.json.lock`` beside the file, re-reading the file under
it. The wait is bounded (:data:`LOCK_TIMEOUT`): a session that cannot get the lock keeps
the answer for itself rather than hang. Reads take no lock: a rename is atomic.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import orjson

__all__ = [
    "Approval",
    "ApprovalStore",
    "ToolDefinition",
    "default_approvals_path",
]

log = logging.getLogger(__name__)

#: The parts of a definition, in the order changes are reported.
PARTS = (
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "server",
    "cwd",
    "env",
    "scope",
)
#: The parts that say where the server runs: answers for different places coexist.
PLACE_PARTS = ("server", "cwd", "env", "scope")
_PART_NAMES = {
    "name": "name",
    "title": "title",
    "description": "description",
    "inputSchema": "input schema",
    "outputSchema": "output schema",
    "annotations": "annotations",
    "server": "server command or URL",
    "cwd": "working directory",
    "env": "environment (env, env_file, inherit_env)",
    "scope": "config scope",
}
_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
#: Bounds on the file, which a person can edit and another program can write.
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_ENTRIES = 10_000
_VERSION = 1
#: Seconds a write waits for another process's write to finish before giving up.
LOCK_TIMEOUT = 5.0
_LOCK_POLL = 0.005


def _digest(value: Any) -> str:
    data = orjson.dumps(value, default=repr, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(data).hexdigest()[:32]


class ToolDefinition:
    """What a server says a tool is: the parts a remembered answer is bound to.

    Holds references to the listed values; the digests are computed on first use, so a
    call that a rule decides (the usual case) pays nothing for them.
    """

    __slots__ = ("_digests", "_values")

    def __init__(
        self,
        *,
        name: str,
        title: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        server: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, Any] | None = None,
        scope: str | None = None,
    ) -> None:
        """Args (beyond the tool's listed parts):
        server: how the server is reached (transport and command line, or URL).
        cwd: a stdio server's resolved working directory.
        env: what a stdio server gets in its environment beyond the host's fixed
            allowlist; only its digest is kept, never a value.
        scope: the config scope the server came from (``ServerConfig.scope``).
        """
        self._values: dict[str, Any] = {
            "name": name,
            "title": title,
            "description": description,
            "inputSchema": input_schema,
            "outputSchema": output_schema,
            "annotations": annotations,
            "server": server,
            "cwd": cwd,
            "env": env,
            "scope": scope,
        }
        self._digests: dict[str, str] | None = None

    @property
    def digests(self) -> Mapping[str, str]:
        """Part name -> digest of its canonical JSON."""
        if self._digests is None:
            self._digests = {part: _digest(self._values[part]) for part in PARTS}
        return self._digests

    @property
    def binding(self) -> str:
        """A digest of where the server runs (:data:`PLACE_PARTS`): answers given for
        different places are kept side by side under it."""
        return _digest([self.digests[part] for part in PLACE_PARTS])

    @property
    def scope(self) -> str | None:
        value = self._values["scope"]
        return value if isinstance(value, str) else None

    @property
    def cwd(self) -> str | None:
        value = self._values["cwd"]
        return value if isinstance(value, str) else None

    @property
    def description(self) -> str | None:
        value = self._values["description"]
        return value if isinstance(value, str) else None

    @property
    def annotations(self) -> Mapping[str, Any] | None:
        value = self._values["annotations"]
        return value if isinstance(value, Mapping) else None

    def changes_since(self, before: Approval) -> tuple[str, ...]:
        """What differs from the definition ``before`` was given for, in words.

        Empty when nothing changed, or when ``before`` recorded no definition. A part
        ``before`` did not record (an answer given by an older version) is a change: the
        answer cannot be proved to be about this server.
        """
        if before.definition is None:
            return ()
        changes = []
        for part in PARTS:
            if before.definition.get(part) == self.digests[part]:
                continue
            if part not in before.definition:
                changes.append(f"{_PART_NAMES[part]} not recorded with the answer")
            elif part == "annotations":
                changes.append(_annotation_change(before.annotations, self.annotations))
            else:
                changes.append(_PART_NAMES[part])
        return tuple(changes)


def _hint(annotations: Mapping[str, Any] | None, key: str) -> str:
    if annotations is None or key not in annotations:
        return "unset"
    return orjson.dumps(annotations[key]).decode()[:40]


def _annotation_change(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    moves = [
        f"{key} {_hint(before, key)} -> {_hint(after, key)}"
        for key in _HINTS
        if _hint(before, key) != _hint(after, key)
    ]
    return "annotations" + (f" ({', '.join(moves)})" if moves else "")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


@attrs.frozen(kw_only=True)
class Approval:
    """One remembered answer: allow ("always") or deny ("never")."""

    kind: str
    server: str
    name: str
    decision: Literal["allow", "deny"]
    #: Part -> digest of the tool's definition when answered (tools only).
    definition: Mapping[str, str] | None = None
    #: The tool's hints when answered, to say how they changed.
    annotations: Mapping[str, Any] | None = None
    #: When it was answered (ISO 8601, UTC).
    at: str = attrs.field(factory=_now)
    #: Digest of where the server ran (:attr:`ToolDefinition.binding`); ``None`` for
    #: answers without a definition or written before it was recorded.
    binding: str | None = None
    #: The server's config scope and working directory when answered, to list them
    #: (not secrets; the environment is kept as a digest only, in ``definition``).
    scope: str | None = None
    cwd: str | None = None

    @classmethod
    def answer(
        cls,
        *,
        kind: str,
        server: str,
        name: str,
        allow: bool,
        definition: ToolDefinition | None = None,
    ) -> Approval:
        return cls(
            kind=kind,
            server=server,
            name=name,
            decision="allow" if allow else "deny",
            definition=dict(definition.digests) if definition is not None else None,
            annotations=_plain_hints(definition.annotations) if definition is not None else None,
            binding=definition.binding if definition is not None else None,
            scope=definition.scope if definition is not None else None,
            cwd=definition.cwd if definition is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "kind": self.kind,
            "server": self.server,
            "name": self.name,
            "decision": self.decision,
            "definition": dict(self.definition) if self.definition is not None else None,
            "annotations": dict(self.annotations) if self.annotations is not None else None,
            "at": self.at,
        }
        # Absent rather than null when unknown: an entry read from an older file is
        # written back with the keys it had.
        for key in ("binding", "scope", "cwd"):
            if getattr(self, key) is not None:
                raw[key] = getattr(self, key)
        return raw

    @classmethod
    def from_json(cls, raw: Any) -> Approval | None:
        """The entry, or ``None`` when it is not one this version understands."""
        if not isinstance(raw, Mapping):
            return None
        kind, server, name, decision = (raw.get(k) for k in ("kind", "server", "name", "decision"))
        if not all(isinstance(v, str) for v in (kind, server, name)):
            return None
        if decision not in ("allow", "deny"):
            return None
        definition = raw.get("definition")
        if definition is not None and not (
            isinstance(definition, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in definition.items())
        ):
            return None
        annotations = raw.get("annotations")
        at = raw.get("at")
        binding, scope, cwd = (raw.get(k) for k in ("binding", "scope", "cwd"))
        if not all(v is None or isinstance(v, str) for v in (binding, scope, cwd)):
            return None
        return cls(
            kind=str(kind),
            server=str(server),
            name=str(name),
            decision=decision,
            definition=dict(definition) if definition is not None else None,
            annotations=_plain_hints(annotations if isinstance(annotations, Mapping) else None),
            at=at if isinstance(at, str) else "",
            binding=binding,
            scope=scope,
            cwd=cwd,
        )


def _plain_hints(annotations: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if annotations is None:
        return None
    return {k: annotations[k] for k in _HINTS if isinstance(annotations.get(k), bool)}


def default_approvals_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/agenthost/approvals.json`` (XDG Base Directory spec: a relative
    ``XDG_STATE_HOME`` is ignored), else ``~/.local/state/agenthost/approvals.json``."""
    environ = os.environ if env is None else env
    state = environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "agenthost" / "approvals.json"


def _slot(entry: Approval) -> tuple[str, str, str, str | None]:
    return (entry.kind, entry.server, entry.name, entry.binding)


def _pick(
    entries: list[Approval], key: tuple[str, str, str], binding: str | None
) -> Approval | None:
    """The entry answered for ``binding``, else the latest for ``key`` (entries are in
    the order answered)."""
    found = [e for e in entries if (e.kind, e.server, e.name) == key]
    exact = [e for e in found if e.binding == binding]
    chosen = exact or found
    return chosen[-1] if chosen else None


class ApprovalStore:
    """The approvals file: tool answers that outlive a session.

    Every method does blocking file I/O (small, local); call it from a worker thread in
    async code. Methods are serialised by a lock, so concurrent threads are safe.

    Problems reading the file (unreadable, not JSON, too large) are logged and the file is
    treated as empty for reading but never overwritten, so a person's edit gone wrong is
    not lost; entries this version does not understand are kept as they are.

    Args:
        path: the JSON file; its directory is created (0700) on the first write.
        lock_timeout: seconds a write waits for another process holding the lock.
    """

    def __init__(self, path: str | os.PathLike[str], *, lock_timeout: float = LOCK_TIMEOUT) -> None:
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self._stamp: tuple[int, int, int] | None = None
        self._entries: list[Approval] = []
        self._others: list[Any] = []
        self._broken = False
        self._lock = threading.RLock()

    def load(self) -> list[Approval]:
        """Every remembered answer, re-read if the file changed since the last look."""
        with self._lock:
            return self._load()

    def _load(self) -> list[Approval]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._entries, self._others, self._broken = None, [], [], False
            return []
        except OSError as exc:
            log.warning("approvals file %s cannot be read: %s", self.path, exc.strerror)
            self._broken = True
            return []
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return list(self._entries)
        self._stamp = stamp
        self._entries, self._others, self._broken = [], [], False
        if stat.st_size > MAX_FILE_BYTES:
            log.warning("approvals file %s is over %d bytes; ignored", self.path, MAX_FILE_BYTES)
            self._broken = True
            return []
        try:
            data = orjson.loads(self.path.read_bytes())
            raw_entries = data["approvals"]
            if not isinstance(raw_entries, list):
                raise TypeError("approvals is not a list")
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
            log.warning(
                "approvals file %s is not valid (%s); ignored, not overwritten", self.path, exc
            )
            self._broken = True
            return []
        for raw in raw_entries[:MAX_ENTRIES]:
            entry = Approval.from_json(raw)
            if entry is None:
                self._others.append(raw)
            else:
                self._entries.append(entry)
        return list(self._entries)

    def get(
        self, kind: str, server: str, name: str, *, binding: str | None = None
    ) -> Approval | None:
        """The remembered answer for this kind, server and name, given where it runs.

        The answer given for ``binding`` if there is one, else the latest answer for the
        tool given elsewhere (its "never" stands; its "always" must be checked against
        the definition: :meth:`ToolDefinition.changes_since`).
        """
        with self._lock:
            entries = self._load()
        return _pick(entries, (kind, server, name), binding)

    def cached(
        self, kind: str, server: str, name: str, *, binding: str | None = None
    ) -> Approval | None:
        """:meth:`get` from what the file held when last read, without any I/O."""
        with self._lock:
            entries = list(self._entries)
        return _pick(entries, (kind, server, name), binding)

    def put(self, approval: Approval) -> None:
        """Remember ``approval``, replacing any answer for the same kind, server, name and
        binding (answers for the same tool elsewhere are kept).

        Raises:
            OSError: the file cannot be written (or is broken and is left alone), or
                another process held its lock for ``lock_timeout`` (``TimeoutError``).
        """
        key = _slot(approval)
        with self._lock, self._file_lock():
            entries = [e for e in self._load() if _slot(e) != key]
            entries.append(approval)
            self._write(entries[-MAX_ENTRIES:])

    def revoke(self, server: str | None = None, name: str | None = None) -> list[Approval]:
        """Forget the answers for ``server`` (and ``name``), or all when both are ``None``.

        Returns:
            What was forgotten.
        """
        with self._lock, self._file_lock():
            entries = self._load()
            gone = [
                e
                for e in entries
                if (server is None or e.server == server) and (name is None or e.name == name)
            ]
            if gone:
                self._write([e for e in entries if e not in gone])
        return gone

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        """Hold the exclusive lock of the approvals file; what is read under it is current.

        Raises:
            TimeoutError: (an ``OSError``) another process held it for ``lock_timeout``.
            OSError: the lock file cannot be created.
        """
        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            deadline = time.monotonic() + self.lock_timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(
                            f"approvals file {self.path} is being written by another process"
                            f" (no lock after {self.lock_timeout:g}s)"
                        ) from None
                    time.sleep(_LOCK_POLL)
            self._stamp = None  # another process may have written within our stamp
            yield
        finally:
            os.close(fd)  # releases the lock

    def _write(self, entries: list[Approval]) -> None:
        if self._broken:
            raise OSError(f"approvals file {self.path} is not valid; fix or remove it")
        import tempfile  # deferred: only a write pays for importing it

        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        body = {"version": _VERSION, "approvals": [e.to_json() for e in entries] + self._others}
        fd, tmp = tempfile.mkstemp(prefix=".approvals-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:  # mkstemp creates it 0600
                f.write(orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._entries = list(entries)
        stat = self.path.stat()
        self._stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
