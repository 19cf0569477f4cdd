"""What a durable run takes from outside, checked and bounded before it is used.

Temporal fails a workflow task whose payload is over its blob limit (2 MB) and retries
it for ever: the run wedges. So every string a person or a peer gives a run (the run id,
the task, who answered) has a length bound, refused with one line, and every payload
this package builds stays under :data:`PAYLOAD_MAX`, a quarter of Temporal's limit.

Run ids name folders on the worker (its cut results), so they are names, never paths:
:func:`check_run_id` takes only ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}`` (what
:func:`~agenthost.durable.client.new_run_id` makes fits), and :func:`confined` builds a
path under a folder and refuses one that resolves outside it (a symlink in between).
Pure functions: the workflow uses them too, so they must be deterministic.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from agenthost.errors import AgentHostError

__all__ = [
    "PAYLOAD_MAX",
    "RUN_ID_MAX",
    "TASK_MAX",
    "WHO_MAX",
    "LimitError",
    "check_run_id",
    "check_task",
    "check_who",
    "clip",
    "confined",
    "file_name",
    "size",
]

#: The largest payload (JSON bytes) a run sends through Temporal: an activity's input
#: or result, the continue-as-new input, a query's answer.
PAYLOAD_MAX = 512 * 1024
RUN_ID_MAX = 128
#: Characters of a run's task (it is in the workflow input, the memo and every request).
TASK_MAX = 32 * 1024
#: Characters of the name of whoever answers a parked call.
WHO_MAX = 256

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class LimitError(AgentHostError):
    """A value from outside the run is too large or is not a valid name."""


def check_run_id(run_id: object) -> str:
    """``run_id`` if it is a valid run id, else :class:`LimitError` (one line)."""
    if isinstance(run_id, str) and _NAME.fullmatch(run_id):
        return run_id
    shown = repr(run_id)[:40] + ("..." if len(repr(run_id)) > 40 else "")
    raise LimitError(
        f"invalid run id {shown}: use 1 to {RUN_ID_MAX} letters, digits, '.', '_' or '-',"
        " starting with a letter or digit"
    )


def check_task(task: str) -> str:
    if len(task) > TASK_MAX:
        raise LimitError(f"the task is {len(task)} characters; at most {TASK_MAX} are taken")
    return task


def check_who(who: str) -> str:
    if not isinstance(who, str) or not who.strip() or len(who) > WHO_MAX:
        count = len(who) if isinstance(who, str) else 0
        raise LimitError(f"who answers must be 1 to {WHO_MAX} characters, not {count}")
    return who


def size(value: Any) -> int:
    """The bytes of ``value`` as JSON, as Temporal's default converter sends it."""
    return len(json.dumps(value, separators=(",", ":")))


def clip(text: str | None, limit: int) -> str | None:
    """``text`` cut to ``limit`` characters, saying so."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} more characters]"


def file_name(name: str) -> str:
    """A file name for ``name`` (a run id, a model's call id: anything): itself when it
    is a plain lower-case name, else a digest of it, so two ids never share a file, not
    even on a filesystem that ignores case (``C0`` and ``c0`` on macOS)."""
    if _NAME.fullmatch(name) and name not in (".", "..") and name == name.lower():
        return name
    return "id-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def confined(base: Path, *names: str) -> Path:
    """``base/names...``, refused with :class:`LimitError` when it would resolve
    outside ``base`` (a name with a separator or ``..``, a symlink on the way)."""
    root = Path(os.path.realpath(base))
    path = root.joinpath(*names)
    resolved = Path(os.path.realpath(path))
    if any(not n or "/" in n or "\0" in n or n in (".", "..") for n in names) or (
        resolved != root and root not in resolved.parents
    ):
        raise LimitError(f"refused a path outside {base}")
    return resolved
