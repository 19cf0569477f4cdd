"""Ending the connections of downstream clients that read nothing, which hypercorn cannot.

Why: hypercorn writes to a connection with its ``send_all`` shielded from cancellation (a
frame is never cut), and ends the connection only once the app's task for it returned.
A client that stops reading fills its socket: the write waits for ever, the app's task
with it, and so does every nursery above it: the server's shutdown (Ctrl-C or SIGTERM
left ``agenthost serve --http`` running), and, after a stuck client's session was ended,
its connection and task, for as long as the client keeps the socket open (one each per
stuck session, without bound). Nothing but the socket's end releases that write, and
ASGI gives the app no handle on the socket. The process's own open descriptors do: the
connections of the exchanges still open are found there by their addresses and shut
down, which wakes the write with an error (the client sees the connection end, as it
would on a timeout; over HTTP/2, every stream on that connection ends: all of them are
that one client's). They get a grace period to end on their own first.

Platforms: Linux (``/proc/self/fd``) and macOS (``/dev/fd``); elsewhere it finds nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
from collections.abc import Callable, Collection, Iterator
from contextlib import suppress
from typing import Final

import trio

__all__ = ["Connection", "end_stuck", "shut_down"]

log = logging.getLogger("agenthost.serve.http")

#: One accepted connection, as ASGI names it: our port (``scope["server"]``), the
#: client's host and port (``scope["client"]``).
Connection = tuple[int, tuple[str, int]]

_FD_DIRS: Final = ("/proc/self/fd", "/dev/fd")
#: How often the connections are looked for while they have their grace.
_POLL: Final = 0.1


async def end_stuck(open_now: Callable[[], Collection[Connection]], *, grace: float) -> int:
    """Wait up to ``grace`` seconds for the connections ``open_now()`` names to end; shut
    down those it still names then. How many were."""
    with trio.move_on_after(grace):
        # Polled: many exchanges come and go; this runs only as a session or the
        # server ends, for at most the grace.
        while open_now():  # noqa: ASYNC110
            await trio.sleep(_POLL)
        return 0
    count = shut_down(set(open_now()))
    if count:
        log.info("ended %d connections of clients that read nothing", count)
    return count


def shut_down(connections: Collection[Connection]) -> int:
    """Shut down the TCP connections accepted on these ports from these clients (never a
    listening socket, which has no peer; never a connection of ours to another server,
    which has a port of its own); how many were found."""
    count = 0
    for sock in _sockets():
        with sock:
            try:
                port = sock.getsockname()[1]
                peer = sock.getpeername()
                if (port, (peer[0], peer[1])) not in connections:
                    continue
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                continue
        count += 1
    return count


def _sockets() -> Iterator[socket.socket]:
    """Duplicates of the process's TCP sockets (the originals stay their owners', to close
    as they will; shutting down a duplicate shuts down the connection both name)."""
    for fd in _descriptors():
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        if sock.type == socket.SOCK_STREAM and sock.family in (socket.AF_INET, socket.AF_INET6):
            yield sock
        else:
            sock.close()


def _descriptors() -> list[int]:
    for directory in _FD_DIRS:
        with suppress(OSError):
            return [int(name) for name in os.listdir(directory) if name.isdigit()]
    return []
