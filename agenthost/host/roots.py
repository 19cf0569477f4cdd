"""Workspaces as roots: what each server may see, and nothing more.

A root is only ever built from a configured workspace, whose path was resolved with
``realpath`` when it was configured: a symlink inside a workspace cannot turn a root into a
path outside it, and no other path is ever offered. Scoping is per server: a server whose
config lists workspace names sees those; a server that lists none sees every workspace,
including ones added at runtime.

Re-checked at every listing: a workspace directory removed while in use and replaced by
a symlink (to ``/etc``, say) still has its old name, and a server given the old URI
would follow the link. So the path is resolved again each time roots are listed, and a
workspace whose path no longer resolves to itself (or is no longer a directory) is
withheld (see :meth:`RootsRegistry.withheld_for`). The limit: this is a check at listing
time; a swap after the server received its roots is the server's to notice (the roots
spec leaves path resolution to the server).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from agenthost.config.model import Workspace
from agenthost.protocol.types import Root

__all__ = ["RootsRegistry", "workspace_problem", "workspace_root"]


def workspace_root(workspace: Workspace) -> Root:
    """The ``file://`` root for a workspace (percent-encoded as RFC 8089 wants)."""
    return Root(uri=Path(workspace.path).as_uri(), name=workspace.name)


def workspace_problem(workspace: Workspace) -> str | None:
    """Why ``workspace`` must not be offered now (its path changed), or None if it may."""
    try:
        real = os.path.realpath(workspace.path, strict=True)
    except OSError:
        return f"{workspace.path} no longer exists"
    if real != workspace.path:
        return f"{workspace.path} now resolves to {real}"
    if not os.path.isdir(real):
        return f"{workspace.path} is no longer a directory"
    return None


class RootsRegistry:
    """The workspaces, and which servers see which.

    ``scopes`` maps a server name to the workspace names it lists, or None for "all".
    """

    def __init__(
        self, workspaces: Sequence[Workspace], scopes: Mapping[str, Sequence[str] | None]
    ) -> None:
        self._workspaces: dict[str, Workspace] = {w.name: w for w in workspaces}
        self._scopes: dict[str, set[str] | None] = {
            server: (set(names) if names is not None else None) for server, names in scopes.items()
        }

    @property
    def workspaces(self) -> list[Workspace]:
        return list(self._workspaces.values())

    def _scoped(self, server: str) -> list[Workspace]:
        scope = self._scopes.get(server)
        return [w for name, w in self._workspaces.items() if scope is None or name in scope]

    def roots_for(self, server: str) -> list[Root]:
        """The roots ``server`` may see now: its workspaces whose paths still resolve to
        themselves (re-checked on every call)."""
        return [workspace_root(w) for w in self._scoped(server) if workspace_problem(w) is None]

    def withheld_for(self, server: str) -> list[tuple[Workspace, str]]:
        """``server``'s workspaces that :meth:`roots_for` leaves out, with the reason."""
        found = ((w, workspace_problem(w)) for w in self._scoped(server))
        return [(w, problem) for w, problem in found if problem is not None]

    def add(self, workspace: Workspace, servers: Iterable[str] | None = None) -> set[str]:
        """Add a workspace; returns the servers whose roots changed.

        ``servers`` also grants it to servers with an explicit list; servers that see all
        workspaces see it anyway.

        Raises:
            ValueError: a workspace with that name or path already exists.
        """
        if workspace.name in self._workspaces:
            raise ValueError(f"a workspace named {workspace.name!r} already exists")
        if any(w.path == workspace.path for w in self._workspaces.values()):
            raise ValueError(f"{workspace.path} is already a workspace")
        before = self._snapshot()
        self._workspaces[workspace.name] = workspace
        for server in servers or ():
            scope = self._scopes.get(server)
            if scope is not None:
                scope.add(workspace.name)
        return self._changed(before)

    def remove(self, name: str) -> set[str]:
        """Remove a workspace by name; returns the servers whose roots changed.

        Raises:
            KeyError: no such workspace.
        """
        before = self._snapshot()
        del self._workspaces[name]
        for scope in self._scopes.values():
            if scope is not None:
                scope.discard(name)
        return self._changed(before)

    def _snapshot(self) -> dict[str, list[Root]]:
        return {server: self.roots_for(server) for server in self._scopes}

    def _changed(self, before: dict[str, list[Root]]) -> set[str]:
        return {server for server, roots in before.items() if self.roots_for(server) != roots}
