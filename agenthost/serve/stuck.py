"""Ending the connections of downstream clients that read nothing, which hypercorn cannot.

Why: hypercorn writes to a connection with its ``send_all`` shielded from cancellation (a
frame is never cut), and ends the connection only once the app's task for it returned.
A client that stops reading fills its socket: the write waits for ever, the app's task
with it, and so does every nursery above it, the server's shutdown included (Ctrl-C or
SIGTERM left ``agenthost serve --http`` running). Nothing but the socket's end releases
that write, and ASGI gives the app no handle on the socket. The process's own open
descriptors do: :func:`shut_down_connections` finds the connections accepted on the
port we listen on and shuts them down, which wakes the write with an error (the client
sees the connection end, as it would on a timeout).

Platforms: Linux (``/proc/self/fd``) and macOS (``/dev/fd``); elsewhere it finds nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
from contextlib import suppress
from typing import Final

__all__ = ["shut_down_connections"]

log = logging.getLogger("agenthost.serve.http")

_FD_DIRS: Final = ("/proc/self/fd", "/dev/fd")


def _open_descriptors() -> list[int]:
    for directory in _FD_DIRS:
        with suppress(OSError):
            return [int(name) for name in os.listdir(directory) if name.isdigit()]
    return []


def _is_socket(fd: int) -> bool:
    try:
        return stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:
        return False


def shut_down_connections(port: int) -> int:
    """Shut down every TCP connection this process accepted on ``port`` (never the
    listening socket, never a connection of ours to another server: those have a port
    of their own); how many.
    """
    count = 0
    for fd in _open_descriptors():
        if not _is_socket(fd):
            continue
        try:
            # A duplicate: the original stays the owner's, to close as it will; shutting
            # down the duplicate shuts down the connection both name.
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        with sock:
            try:
                if sock.type != socket.SOCK_STREAM or sock.family not in (
                    socket.AF_INET,
                    socket.AF_INET6,
                ):
                    continue
                if sock.getsockname()[1] != port:
                    continue
                sock.getpeername()  # a listening socket has no peer (OSError)
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                continue
        count += 1
    return count
