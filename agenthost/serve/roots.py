"""The roots an upstream sees through the gateway: the client's roots within the workspaces.

Both sides limit what a server may touch: the user's workspaces (agenthost's config) and
the roots of the client agenthost serves (the project open in the editor). An upstream
sees only what both allow: for each pair of a workspace and a client root where one
contains the other, the narrower of the two. A client without roots leaves the
workspaces alone. Only ``file://`` roots can be compared; any other client root is
ignored (it cannot widen a workspace).
"""

from __future__ import annotations

import os
import urllib.parse
import urllib.request
from collections.abc import Sequence

from agenthost.protocol.types import Root

__all__ = ["intersect_roots"]


def _path(uri: str) -> str | None:
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return os.path.normpath(urllib.request.url2pathname(parts.path))


def _within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def intersect_roots(workspaces: Sequence[Root], client: Sequence[Root]) -> list[Root]:
    """The narrower root of each (workspace, client root) pair where one holds the other,
    without duplicates, in the workspaces' order."""
    kept: dict[str, Root] = {}
    for workspace in workspaces:
        outer = _path(workspace.uri)
        if outer is None:
            continue
        for root in client:
            inner = _path(root.uri)
            if inner is None:
                continue
            if _within(inner, outer):
                kept.setdefault(inner, root)
            elif _within(outer, inner):
                kept.setdefault(outer, workspace)
    return list(kept.values())
