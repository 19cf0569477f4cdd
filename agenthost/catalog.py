"""The catalog: every server's tools, prompts, resources and templates in one place.

Tool names are namespaced ``server__tool`` so that a model sees one flat list and the host
can route each call back to its server. Providers constrain tool names to
``^[a-zA-Z0-9_-]{1,64}$`` (Anthropic and OpenAI alike), and MCP tool names may be longer
or contain other characters, so the scheme is:

1. ``f"{prefix}__{tool}"`` when it fits the rule and no other entry produces the same name,
   where ``prefix`` is the server's name with every character the rule forbids replaced
   by ``_`` (a server ``e.x`` or ``my server`` from an editor's config lists ``e_x__echo``,
   ``my_server__echo``: readable, and what the user types in ``agenthost call``);
2. otherwise the fitting characters (others become ``_``), cut to leave room, then ``_``
   and 8 hex digits of SHA-256 over ``server NUL tool``;
3. a tool whose hashed name still clashes with another's is refused (logged), never
   named ambiguously: a hostile server can craft such names, and one server's catalog
   must never take the host down (see :func:`namespaced_names`).

Both forms are a pure function of the (server, tool) pair and of the names currently
present, so names are stable across restarts and list refreshes; a plain name only changes
if a new entry collides with it exactly (then both take the hashed form, so neither side
wins by arrival order).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Final

import attrs

from agenthost.types import Prompt, Resource, ResourceTemplate, Tool

__all__ = [
    "Catalog",
    "CatalogTool",
    "ServerEntries",
    "namespaced_names",
    "tool_prefix",
]

SEPARATOR: Final = "__"
_VALID: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID_CHAR: Final = re.compile(r"[^a-zA-Z0-9_-]")
_MAX: Final = 64
log = logging.getLogger("agenthost.catalog")
_HASH_LEN: Final = 8


@attrs.frozen(kw_only=True)
class CatalogTool:
    """A tool as the model sees it, with the way back to its server."""

    name: str
    server: str
    tool: Tool

    @property
    def original_name(self) -> str:
        return self.tool.name


@attrs.frozen(kw_only=True)
class ServerEntries:
    """What one server offers, as last listed."""

    tools: tuple[Tool, ...] = ()
    prompts: tuple[Prompt, ...] = ()
    resources: tuple[Resource, ...] = ()
    templates: tuple[ResourceTemplate, ...] = ()


def _hashed(server: str, tool: str) -> str:
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:_HASH_LEN]
    base = _INVALID_CHAR.sub("_", f"{server}{SEPARATOR}{tool}")[: _MAX - _HASH_LEN - 1]
    return f"{base}_{digest}"


def tool_prefix(server: str) -> str:
    """The server part of its plain tool names: ``e.x`` -> ``e_x``."""
    return _INVALID_CHAR.sub("_", server)


def namespaced_names(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Map each (server, tool) pair to its provider-safe, collision-free name.

    Collision-free by construction: every name claimed by more than one pair moves its
    plain claimants to their hashed form, until no plain name is shared (each pair moves
    at most once, so this ends). A name still shared then is a clash of hashed forms (a
    server can craft one: 8 hex digits are a birthday search of ~2^16 tries); those
    pairs are refused, logged, and left out of the result, never raised: a server's
    names must not be able to stop the host (issue 14).
    """
    names: dict[tuple[str, str], str] = {}
    hashed: set[tuple[str, str]] = set()
    for pair in pairs:
        if pair in names:
            continue
        name = f"{tool_prefix(pair[0])}{SEPARATOR}{pair[1]}"
        if not _VALID.match(name):
            name = _hashed(*pair)
            hashed.add(pair)
        names[pair] = name
    while True:
        claims: dict[str, list[tuple[str, str]]] = {}
        for pair, name in names.items():
            claims.setdefault(name, []).append(pair)
        moved = False
        for claimants in claims.values():
            if len(claimants) > 1:
                for pair in claimants:
                    if pair not in hashed:
                        names[pair] = _hashed(*pair)
                        hashed.add(pair)
                        moved = True
        if not moved:
            break
    for name, claimants in claims.items():
        if len(claimants) > 1:
            for pair in claimants:
                log.warning(
                    "%s: refusing tool %r: its catalog name %s clashes with %d other tool(s)",
                    pair[0],
                    pair[1][:200],
                    name,
                    len(claimants) - 1,
                )
                del names[pair]
    return names


class Catalog:
    """Per-server entries and the namespaced tool index built from them.

    Entries are replaced per server (after a list, a list_changed or a restart); the
    flat views are rebuilt on change, so reads are dictionary lookups.
    """

    def __init__(self) -> None:
        self._servers: dict[str, ServerEntries] = {}
        self._tools: dict[str, CatalogTool] = {}

    def update(self, server: str, entries: ServerEntries) -> None:
        self._servers[server] = entries
        self._reindex()

    def update_tools(self, server: str, tools: Iterable[Tool]) -> None:
        """Replace one server's tools only (after a tools/list_changed)."""
        current = self._servers.get(server, ServerEntries())
        self.update(server, attrs.evolve(current, tools=tuple(tools)))

    def remove(self, server: str) -> None:
        if self._servers.pop(server, None) is not None:
            self._reindex()

    def _reindex(self) -> None:
        pairs = [
            (server, tool.name)
            for server, entries in sorted(self._servers.items())
            for tool in entries.tools
        ]
        names = namespaced_names(pairs)
        by_pair = {
            (server, tool.name): tool
            for server, entries in self._servers.items()
            for tool in entries.tools
        }
        self._tools = {
            name: CatalogTool(name=name, server=pair[0], tool=by_pair[pair])
            for pair, name in names.items()
        }

    def entries(self, server: str) -> ServerEntries:
        return self._servers.get(server, ServerEntries())

    @property
    def servers(self) -> Mapping[str, ServerEntries]:
        return self._servers

    def tools(self) -> list[CatalogTool]:
        """All tools, ordered by server then by the server's own order."""
        return list(self._tools.values())

    def tool(self, name: str) -> CatalogTool | None:
        return self._tools.get(name)

    def prompts(self) -> list[tuple[str, Prompt]]:
        return [(s, p) for s, e in sorted(self._servers.items()) for p in e.prompts]

    def resources(self) -> list[tuple[str, Resource]]:
        return [(s, r) for s, e in sorted(self._servers.items()) for r in e.resources]

    def templates(self) -> list[tuple[str, ResourceTemplate]]:
        return [(s, t) for s, e in sorted(self._servers.items()) for t in e.templates]

    def server_for_resource(self, uri: str) -> str | None:
        """The server that listed ``uri``, or whose template prefix matches it."""
        for server, resource in self.resources():
            if resource.uri == uri:
                return server
        for server, template in self.templates():
            prefix = template.uri_template.split("{", 1)[0]
            if prefix and uri.startswith(prefix):
                return server
        return None
