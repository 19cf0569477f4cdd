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
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import attrs
import trio

from agenthost.protocol.types import Prompt, Resource, ResourceTemplate, Tool, ToolAnnotations

__all__ = [
    "Catalog",
    "CatalogTool",
    "ServerEntries",
    "annotation_hints",
    "namespaced_names",
    "tool_prefix",
]

SEPARATOR: Final = "__"
_VALID: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID_CHAR: Final = re.compile(r"[^a-zA-Z0-9_-]")
_MAX: Final = 64
log = logging.getLogger("agenthost.host.catalog")
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
        self._changed = trio.lowlevel.ParkingLot()

    async def wait_for(self, condition: Callable[[Catalog], bool]) -> None:
        """Return once ``condition(self)`` holds, checking now and after every change.

        Why: a server's list_changed, a restart or a removal changes the catalog in the
        background; a caller that needs the outcome (a UI, a test) waits for it here
        instead of polling on a timer. Bound it with the caller's own ``trio.fail_after``.
        """
        while not condition(self):
            await self._changed.park()

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
        self._changed.unpark_all()

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
        """The one server a read of ``uri`` goes to (:meth:`resource_owners`), or ``None``
        when none or several could serve it."""
        owners = self.resource_owners(uri)
        return owners[0] if len(owners) == 1 else None

    def resource_owners(self, uri: str) -> tuple[str, ...]:
        """The servers that could serve ``uri``, best first; more than one is a tie.

        Why so strict: a read carries the URI (a path, a token in a query) to the server
        it is routed to, and any server may list any template. ``f{x}`` would otherwise
        catch ``file:///home/user/.ssh/id_rsa`` meant for the filesystem server. So:

        1. the servers that listed ``uri`` itself as a resource;
        2. else the servers whose template has the longest literal prefix (the text
           before its first ``{``) that ``uri`` starts with; a template without a
           variable matches only itself;
        3. a prefix shorter than ``scheme://`` (or not starting with a scheme) routes
           nothing: it says nothing about which server the URI belongs to.
        """
        exact = sorted({s for s, resource in self.resources() if resource.uri == uri})
        if exact:
            return tuple(exact)
        best, owners = -1, set[str]()
        for server, template in self.templates():
            length = _template_match(template.uri_template, uri)
            if length > best:
                best, owners = length, {server}
            elif length == best and length >= 0:
                owners.add(server)
        return tuple(sorted(owners)) if best >= 0 else ()


#: ``scheme:`` (RFC 3986 3.1) at the start of a template.
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _template_match(template: str, uri: str) -> int:
    """The length of ``template``'s literal prefix when ``uri`` may be one of its URIs and
    the prefix is specific enough to route on; -1 otherwise."""
    prefix, brace, _ = template.partition("{")
    if not brace:
        return len(template) if uri == template else -1
    scheme = _SCHEME.match(prefix)
    if scheme is None or len(prefix) < len(scheme.group()) + len("//"):
        return -1
    return len(prefix) if uri.startswith(prefix) else -1


def annotation_hints(annotations: ToolAnnotations | None) -> dict[str, Any] | None:
    """A tool's hints under their wire names, only those the server set.

    The policy engine matches rules on these names and the CLI prints them, so both read
    the one mapping from the typed annotations.
    """
    if annotations is None:
        return None
    return {
        key: value
        for key, value in (
            ("readOnlyHint", annotations.read_only_hint),
            ("destructiveHint", annotations.destructive_hint),
            ("idempotentHint", annotations.idempotent_hint),
            ("openWorldHint", annotations.open_world_hint),
        )
        if value is not None
    }
