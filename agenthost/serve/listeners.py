"""Who listens on a TCP port already (Linux: ``/proc/net/tcp``, ``/proc/net/tcp6``).

``serve --http`` on a port another local user took first cannot listen; worse, every
client set up for that address sends that user its bearer token. :func:`cannot_listen`
says so in one line, naming the user when the system tells (elsewhere: the error alone).
"""

from __future__ import annotations

import errno
import os

__all__ = ["cannot_listen", "listener_uids"]

_LISTEN = "0A"
#: Lines read per table, at most (a busy host has thousands of sockets; a listener is
#: found long before this).
_MAX_LINES = 100_000


def listener_uids(port: int) -> set[int]:
    """The uids of the sockets listening on ``port``, any address (empty: none seen)."""
    found: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii", errors="replace") as f:
                next(f, None)  # the header
                for _, line in zip(range(_MAX_LINES), f, strict=False):
                    fields = line.split()
                    if len(fields) < 8 or fields[3] != _LISTEN:
                        continue
                    local_port = fields[1].rpartition(":")[2]
                    if int(local_port, 16) == port and fields[7].isdigit():
                        found.add(int(fields[7]))
        except (OSError, ValueError):
            continue
    return found


def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """The one line for a failed bind of ``host:port``."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if exc.errno != errno.EADDRINUSE:
        return f"cannot listen on {where}: {exc.strerror or exc}"
    others = sorted(uid for uid in listener_uids(port) if uid != os.geteuid())
    if not others:
        return f"cannot listen on {where}: already in use (another agenthost serve?)"
    return (
        f"cannot listen on {where}: another user (uid {others[0]}) already listens there,"
        " and a client set up for this address sends them its token: choose another port,"
        " and if a client already connected there, make a new token (delete the token file;"
        " the next start makes one)"
    )
