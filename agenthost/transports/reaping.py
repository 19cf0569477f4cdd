"""No server process outlives the host: process groups, strays and orphans.

A stdio server runs in its own process group, so stopping it stops what it started
(:func:`signal_group`, :func:`reap_group`). Children that left the group
(:func:`find_strays`: ``setsid``, a double fork) are found by walking ``/proc`` from the
server's pid before it is stopped; orphans of a server that crashed are re-parented to
us (the host is a Linux *child subreaper* while it runs stdio servers:
:func:`subreaper_acquire`) and recognised by the tag the transport put in their
environment (:func:`find_orphans`; after a crash, every process started after the
server is looked at for the tag, for an orphan that went elsewhere). Everything here is
bounded (a fork bomb gets at most :data:`MAX_ORPHANS` signals) and blocking ``/proc``
scans run in a worker thread.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
from contextlib import suppress
from typing import Final

import trio

__all__ = [
    "MAX_ORPHANS",
    "SERVER_TAG_ENV",
    "find_orphans",
    "find_strays",
    "reap_children",
    "reap_group",
    "reap_strays",
    "signal_group",
    "subreaper_acquire",
    "subreaper_release",
]

log = logging.getLogger("agenthost.transports.stdio")

#: The environment variable that tags a server's processes (``PID-N`` of the host), so
#: its orphans are recognised after it crashed.
SERVER_TAG_ENV: Final = "AGENTHOST_SERVER_TAG"

_PR_SET_CHILD_SUBREAPER: Final = 36
#: Open stdio transports: the host is a subreaper while there is at least one.
_subreaper_users = 0
#: At most this many orphans of one server are stopped (a fork bomb must not make the
#: scan unbounded; the rest die with the host's cgroup, if any).
MAX_ORPHANS: Final = 1024


def _prctl_subreaper(on: bool) -> bool:
    """Set or clear the child-subreaper flag of this process; False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def subreaper_acquire() -> None:
    global _subreaper_users
    _subreaper_users += 1
    if _subreaper_users == 1 and not _prctl_subreaper(True):
        log.debug("cannot become a child subreaper: orphans of a crashed server go to init")


def subreaper_release() -> None:
    """The last stdio transport closed: orphans go to init again, as before the host ran
    (so a library user's process is a subreaper only while it runs servers)."""
    global _subreaper_users
    _subreaper_users -= 1
    if _subreaper_users == 0:
        _prctl_subreaper(False)


def _children_of_self() -> list[int]:
    """This process's children (every thread's: an orphan goes to any of them)."""
    found: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children", "rb") as f:
                found.extend(int(pid) for pid in f.read().split())
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return found


def find_orphans(tag: str, server: int, *, anywhere: bool = False) -> list[tuple[int, bytes]]:
    """Live children of ours (re-parented orphans) carrying ``tag``, and every descendant
    of theirs, with their start times; at most :data:`MAX_ORPHANS`.

    ``anywhere`` (a server that crashed): every process started after the server is
    looked at too, not only our children. Why: an orphan reaches us only if the host was
    a subreaper at the moment of the crash and the kernel's children list showed it to
    us; one that went elsewhere (init) still carries the tag, and a crash test saw one
    survive in about one CI run in ten.
    """
    needle = f"\0{SERVER_TAG_ENV}={tag}\0".encode()  # a whole variable, not a suffix
    table = _proc_table() if anywhere else None
    candidates = list(dict.fromkeys(_children_of_self()))
    if table is not None:
        ours = set(candidates)
        candidates += [pid for pid in table if pid > server and pid not in ours]
    marked: list[int] = []
    for pid in candidates[: MAX_ORPHANS * 8]:
        if pid == server:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = b"\0" + f.read() + b"\0"
        except OSError:
            continue  # gone, not ours to read, or a zombie (its environment is gone)
        if needle in environ:
            marked.append(pid)
    if not marked:
        return []
    if table is None:
        table = _proc_table()
    children: dict[int, list[int]] = {}
    for child, (parent, *_) in table.items():
        children.setdefault(parent, []).append(child)
    found: list[tuple[int, bytes]] = []
    stack = [pid for pid in marked if pid in table]
    seen = set(stack)
    while stack and len(found) < MAX_ORPHANS:
        pid = stack.pop()
        found.append((pid, table[pid][2]))
        for child in children.get(pid, ()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return found


async def reap_children(strays: list[tuple[int, bytes]], timeout: float) -> None:
    """Collect the exit status of the strays that are our children (adopted orphans), so
    none stays a zombie. Only those: their pid and start time say they are the processes
    we stopped, so nobody else waits for them."""
    pending = set(strays)
    with trio.move_on_after(min(timeout, 2.0)):
        # Not woken by anything (no pidfd for an adopted child): poll, briefly.
        while pending := await trio.to_thread.run_sync(_collect, pending):  # noqa: ASYNC110
            await trio.sleep(0.02)


def _collect(pending: set[tuple[int, bytes]]) -> set[tuple[int, bytes]]:
    """Reap those of ``pending`` that are our exited children; the ones still running."""
    me = os.getpid()
    table = _proc_table(after=min(pid for pid, _ in pending) - 1)
    left: set[tuple[int, bytes]] = set()
    for pid, started in pending:
        entry = table.get(pid)
        if entry is None or entry[2] != started or entry[0] != me:
            continue  # gone, or not ours to reap
        if entry[3] == b"Z":
            with suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        else:
            left.add((pid, started))
    return left


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Signal a whole process group; False when it is already gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _proc_table(after: int = 0) -> dict[int, tuple[int, int, bytes, bytes]]:
    """pid -> (ppid, pgid, start time, state) of the processes with a pid above ``after``
    (Linux ``/proc``; else {}).

    A server's descendants were started after it, so (until pids wrap around) their pids
    are above its own: reading only those keeps the scan to a few files.
    """
    table: dict[int, tuple[int, int, bytes, bytes]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit() or int(entry) <= after:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue  # gone meanwhile
        # The command name may hold spaces and parentheses: fields follow the last ")".
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) > 19:
            table[int(entry)] = (int(fields[1]), int(fields[2]), fields[19], fields[0])
    return table


def find_strays(pid: int) -> list[tuple[int, bytes]]:
    """Live descendants of ``pid`` outside its process group, with their start times."""
    table = _proc_table(after=pid)
    children: dict[int, list[int]] = {}
    for child, (parent, *_) in table.items():
        children.setdefault(parent, []).append(child)
    found: list[tuple[int, bytes]] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            stack.append(child)
            if table[child][1] != pid:
                found.append((child, table[child][2]))
    return found


def _signal_strays(strays: list[tuple[int, bytes]], sig: int) -> int:
    """Signal each stray that is still the same live process (pid reuse guard); how many."""
    table = _proc_table(after=min(pid for pid, _ in strays) - 1)
    hit = 0
    for pid, started in strays:
        entry = table.get(pid)
        if entry is not None and entry[2] == started and entry[3] != b"Z":
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                hit += 1
    return hit


async def reap_strays(name: str, strays: list[tuple[int, bytes]], timeout: float) -> None:
    """SIGTERM the descendants that escaped the process group, then SIGKILL survivors."""
    if not await trio.to_thread.run_sync(_signal_strays, strays, signal.SIGTERM):
        return
    log.info("%s: stopping %d server descendant(s) outside its process group", name, len(strays))
    with trio.move_on_after(min(timeout, 2.0)):
        while await trio.to_thread.run_sync(_signal_strays, strays, 0):  # noqa: ASYNC110
            await trio.sleep(0.02)
        return
    await trio.to_thread.run_sync(_signal_strays, strays, signal.SIGKILL)


async def reap_group(pgid: int, timeout: float) -> None:
    """Make sure nothing of the server's process group outlives it.

    The leader is gone by now; a wrapper's children may not be. They get SIGTERM and a
    short grace period, then SIGKILL.
    """
    if not signal_group(pgid, signal.SIGTERM):
        return
    with trio.move_on_after(min(timeout, 2.0)):
        # Not our children, so nothing to wait() on: poll the group until it is empty.
        # Those that outlived the leader were adopted by us (subreaper): reap them, or
        # their zombies would keep the group alive, and stay.
        while signal_group(pgid, 0):  # type: ignore[arg-type]
            await trio.to_thread.run_sync(_reap_group_zombies, pgid)
            await trio.sleep(0.02)
        return
    signal_group(pgid, signal.SIGKILL)
    with trio.move_on_after(min(timeout, 0.5)):  # only to reap the killed
        while signal_group(pgid, 0):  # type: ignore[arg-type]
            await trio.to_thread.run_sync(_reap_group_zombies, pgid)
            await trio.sleep(0.02)


def _reap_group_zombies(pgid: int) -> None:
    """Reap our exited children of process group ``pgid`` (a zombie keeps its group id:
    the server's group is the server's pid, which no other process group can hold while
    the group has members)."""
    for pid in _children_of_self():
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) > 2 and fields[0] == b"Z" and int(fields[2]) == pgid:
            with suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
