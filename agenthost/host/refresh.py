"""Keeping the catalog in step with each server: a full listing when it is ready, a
re-listing of one kind when it says that kind changed, nothing once it is gone."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
import trio

from agenthost.asks import RequestContext
from agenthost.config.model import ServerConfig
from agenthost.errors import AgentHostError, JSONRPCError
from agenthost.host.catalog import Catalog
from agenthost.host.supervisor import ServerState, Supervisor
from agenthost.session import ClientSession

__all__ = ["LIST_CHANGED", "CatalogRefresher"]

log = logging.getLogger("agenthost.host")

#: The notifications that re-list one kind of entry, and that kind.
LIST_CHANGED: Final = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}


class CatalogRefresher:
    """Re-lists what changed for a server and updates the :class:`Catalog`.

    Args:
        servers: the enabled servers' configs, by name (their tool filters apply).
        nursery: where a refresh a notification asks for runs: the session's dispatcher
            must not wait on a request to the same session.
        session_of: the current session of a server (a notification names the server,
            not the session), or None while it has none.
    """

    def __init__(
        self,
        catalog: Catalog,
        servers: Mapping[str, ServerConfig],
        nursery: trio.Nursery,
        session_of: Callable[[str], ClientSession | None],
    ) -> None:
        self._catalog = catalog
        self._servers = servers
        self._nursery = nursery
        self._session_of = session_of
        self._locks: dict[str, trio.Lock] = {}
        #: (server, kind) with a refresh queued that has not started listing yet.
        self._due: set[tuple[str, str]] = set()

    def on_state(self, supervisor: Supervisor) -> None:
        """A server that is gone for good offers nothing: its entries leave the catalog (a
        restarting one keeps its entries; calls fail fast until it is back)."""
        if supervisor.state in (ServerState.FAILED, ServerState.STOPPED):
            self._catalog.remove(supervisor.name)

    async def on_ready(self, session: ClientSession) -> None:
        await self.refresh(session, "tools", "prompts", "resources")

    async def list_changed(self, server: str, ctx: RequestContext) -> None:
        """Queue a refresh of the kind ``ctx``'s notification names.

        One pending refresh per server and kind: the notifications that arrive before it
        starts listing fold into it (issue 14: 100k list_changed were 100k tasks).
        """
        kind = LIST_CHANGED[ctx.method]
        session = self._session_of(server)
        if session is not None and (server, kind) not in self._due:
            self._due.add((server, kind))
            self._nursery.start_soon(self.refresh, session, kind)

    async def refresh(self, session: ClientSession, *what: str) -> None:
        """Re-list what changed for one server and update the catalog.

        A server that fails a list (or lacks the capability) contributes nothing for it;
        that is logged, and never stops the server from being used.
        """
        lock = self._locks.setdefault(session.name, trio.Lock())
        async with lock:
            self._due.difference_update((session.name, kind) for kind in what)
            caps = session.server_capabilities
            current = self._catalog.entries(session.name)
            updates: dict[str, Any] = {}
            config = self._servers[session.name]
            try:
                if "tools" in what and caps is not None and caps.tools is not None:
                    tools = await session.list_tools()
                    updates["tools"] = tuple(t for t in tools if config.tool_allowed(t.name))
                if "prompts" in what and caps is not None and caps.prompts is not None:
                    updates["prompts"] = tuple(await session.list_prompts())
                if "resources" in what and caps is not None and caps.resources is not None:
                    updates["resources"] = tuple(await session.list_resources())
                    updates["templates"] = tuple(await session.list_resource_templates())
            except JSONRPCError as exc:
                log.warning("%s: listing failed: %s", session.name, exc)
            except AgentHostError as exc:
                log.debug("%s: refresh abandoned: %s", session.name, exc)
                return
            self._catalog.update(session.name, attrs.evolve(current, **updates))
