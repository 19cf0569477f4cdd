"""How many agenthost processes are above this one in the process tree (Linux).

The chain of config files (:mod:`agenthost.config.selfstart`) travels in the environment,
and a server may drop its environment (``env -i sh serve.sh``, a wrapper that execs
``agenthost serve`` with a clean one): then each agenthost starts the next without end.
The process tree cannot be dropped that way. The ``agenthost`` command names its process
``agenthost`` (:func:`name_process`, ``/proc/self/comm``, which only the process itself
may change), and an agenthost with :data:`MAX_DEPTH` such processes above it refuses to
load any server (:func:`depth_refusal`). A gateway in front of a gateway is two; a loop
stops at the bound, whatever its command lines and environments.

Elsewhere (no ``/proc``) both do nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Final

__all__ = ["MAX_DEPTH", "PROCESS_NAME", "depth_refusal", "name_process"]

#: The name the ``agenthost`` command gives its process.
PROCESS_NAME: Final = "agenthost"
#: agenthost processes above this one at which it refuses to start servers.
MAX_DEPTH: Final = 4
#: Ancestors looked at, at most (the tree is rarely deeper than a dozen).
_MAX_ANCESTORS: Final = 64


def name_process() -> None:
    """Name this process :data:`PROCESS_NAME`, for the agenthosts below it to count."""
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as f:
        f.write(PROCESS_NAME)


def depth_refusal() -> str | None:
    """Why this agenthost must not start servers (too deep a tree of agenthosts), or None."""
    depth = sum(1 for name in _ancestor_names() if name == PROCESS_NAME)
    if depth < MAX_DEPTH:
        return None
    return (
        f"refusing to start: {depth} agenthost processes are already above this one (at"
        f" most {MAX_DEPTH - 1}): agenthost is starting itself, through a server whose"
        " command line and environment hide it (list agenthost at the other host's user"
        " or local scope, never in a file agenthost reads)"
    )


def _ancestor_names() -> Iterator[str]:
    """The command names of this process's ancestors, nearest first."""
    pid = os.getppid()
    for _ in range(_MAX_ANCESTORS):
        if pid <= 1:
            return
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                data = f.read()
        except OSError:
            return
        # The name may hold spaces and parentheses: the fields follow the last ")".
        yield data[data.find(b"(") + 1 : data.rfind(b")")].decode("utf-8", "replace")
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) < 2 or not fields[1].isdigit():
            return
        pid = int(fields[1])
