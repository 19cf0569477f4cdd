"""The one catalog a downstream client sees, and the way back from its names to an upstream.

Tools are named as the host names them (``server__tool``, :mod:`agenthost.host.catalog`),
prompts the same way, so every upstream's entries live side by side without a clash.
With exactly one upstream configured there is nothing to tell apart: names are the
upstream's own, so a single server is fronted transparently (a client configured for it
keeps working when agenthost is put in front). Resource URIs are never renamed: the host
routes a read by URI (exact listing first, then the longest template prefix).

Pagination: lists are served a page of :data:`PAGE_SIZE` at a time; the cursor is the
offset, opaque to the client (``basic/utilities/pagination.mdx``), and a cursor we did not
make is refused with -32602.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TypeVar

import attrs

from agenthost.errors import JSONRPCError
from agenthost.host import Host
from agenthost.host.catalog import SEPARATOR, CatalogTool, tool_prefix
from agenthost.protocol import jsonrpc
from agenthost.protocol.types import Prompt, Tool

__all__ = ["PAGE_SIZE", "CatalogView", "page"]

#: Entries per page of a list (the spec leaves it to the server).
PAGE_SIZE: Final = 100
_CURSOR_PREFIX: Final = "agenthost:"

T = TypeVar("T")


def page(items: Sequence[T], cursor: str | None) -> tuple[list[T], str | None]:
    """One page of ``items`` from ``cursor`` on, and the cursor of the next (None: last).

    Raises:
        JSONRPCError: -32602 for a cursor this server did not hand out.
    """
    start = 0
    if cursor is not None:
        digits = cursor.removeprefix(_CURSOR_PREFIX)
        if not cursor.startswith(_CURSOR_PREFIX) or not digits.isdigit() or len(digits) > 9:
            raise JSONRPCError(jsonrpc.INVALID_PARAMS, "invalid cursor")
        start = int(digits)
    end = start + PAGE_SIZE
    following = f"{_CURSOR_PREFIX}{end}" if end < len(items) else None
    return list(items[start:end]), following


class CatalogView:
    """The host's catalog under the names a downstream client sees."""

    def __init__(self, host: Host) -> None:
        self._host = host
        #: One upstream configured: names are passed through unchanged.
        self.transparent = len([s for s in host.config.servers if s.enabled]) == 1

    def tools(self) -> list[tuple[str, CatalogTool]]:
        """(name shown, catalog entry) for every tool, in the catalog's order."""
        entries = self._host.tools()
        if self.transparent:
            return [(entry.tool.name, entry) for entry in entries]
        return [(entry.name, entry) for entry in entries]

    def listed_tools(self) -> list[Tool]:
        return [attrs.evolve(entry.tool, name=name) for name, entry in self.tools()]

    def tool(self, name: str) -> CatalogTool | None:
        """The catalog entry a name shown to the client stands for."""
        if not self.transparent:
            return self._host.catalog.tool(name)
        for shown, entry in self.tools():
            if shown == name:
                return entry
        return None

    def prompts(self) -> list[tuple[str, str, Prompt]]:
        """(name shown, server, prompt) for every prompt."""
        listed = self._host.catalog.prompts()
        if self.transparent:
            return [(prompt.name, server, prompt) for server, prompt in listed]
        return [
            (f"{tool_prefix(server)}{SEPARATOR}{prompt.name}", server, prompt)
            for server, prompt in listed
        ]

    def listed_prompts(self) -> list[Prompt]:
        return [attrs.evolve(prompt, name=name) for name, _, prompt in self.prompts()]

    def prompt(self, name: str) -> tuple[str, Prompt] | None:
        """(server, prompt) for a prompt name shown to the client."""
        for shown, server, prompt in self.prompts():
            if shown == name:
                return server, prompt
        return None
