"""Saved conversations: ``chat --resume [NAME]`` and ``run --session NAME``.

Each is one JSON file, ``$XDG_STATE_HOME/agenthost/sessions/NAME.json`` (the XDG spec's
place for state that should survive a restart), written whole and then renamed over the
old one, so a crash mid-write never leaves half a conversation. The files are private
(0600 in a 0700 directory): a conversation holds whatever the user and the tools said.
Names are plain (letters, digits, ``.``, ``_``, ``-``), so a name can never reach outside
the directory. The format is :mod:`agenthost.agent.history`'s.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from agenthost.cli.exit import EXIT_USAGE, CLIError

if TYPE_CHECKING:
    from agenthost.agent.transcript import Transcript

__all__ = ["latest_session", "load_session", "new_session_name", "save_session", "sessions_dir"]

_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}\Z")


def sessions_dir(env: dict[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/agenthost/sessions`` (``~/.local/state`` when unset)."""
    source = os.environ if env is None else env
    base = source.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "agenthost" / "sessions"


def _path(name: str) -> Path:
    if not _NAME.match(name):
        raise CLIError(
            f"{name!r} is not a session name: use letters, digits, '.', '_' and '-'", EXIT_USAGE
        )
    return sessions_dir() / f"{name}.json"


def new_session_name() -> str:
    """A fresh name for a chat nobody named: ``chat-YYYYMMDD-HHMMSS`` (``-2``... when two
    chats start within the same second)."""
    base = time.strftime("chat-%Y%m%d-%H%M%S")
    name, n = base, 1
    while (sessions_dir() / f"{name}.json").exists():
        n += 1
        name = f"{base}-{n}"
    return name


def latest_session() -> str | None:
    """The most recently saved session's name, or None when there is none."""
    try:
        files = [p for p in sessions_dir().glob("*.json") if _NAME.match(p.stem)]
    except OSError:
        return None
    if not files:
        return None
    return max(files, key=lambda p: p.stat().st_mtime).stem


def load_session(name: str) -> Transcript | None:
    """The saved conversation ``name``; None when there is no such session.

    Raises:
        CLIError: the file cannot be read or is not a saved conversation (one line).
    """
    from agenthost.agent.history import history_from_json

    path = _path(name)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CLIError(f"session {name}: cannot read {path}: {exc.strerror}", EXIT_USAGE) from None
    try:
        return history_from_json(json.loads(text))
    except ValueError as exc:
        raise CLIError(f"session {name}: {path} is damaged: {exc}", EXIT_USAGE) from None


def save_session(name: str, transcript: Transcript) -> Path:
    """Write the conversation (atomically, privately); returns the file's path."""
    from agenthost.agent.history import history_to_json

    path = _path(name)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    data = json.dumps(history_to_json(transcript), ensure_ascii=False).encode()
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        os.fchmod(out.fileno(), 0o600)  # whatever the umask or a stale file said
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    return path
