"""Resource subscriptions: which downstream client hears of which upstream resource change.

Two eras ask for the same thing differently. A legacy client sends ``resources/subscribe``
and gets plain ``notifications/resources/updated``; a 2026-07-28 client lists the URIs in
its ``subscriptions/listen`` request (``notifications.resourceSubscriptions``) and gets
them on that stream, each tagged with the stream's ``subscriptionId``
(``basic/patterns/subscriptions.mdx``). Both are one :class:`Subscriber` here, so one
upstream subscription serves every client watching a URI: the gateway subscribes upstream
for the first one and unsubscribes after the last one leaves.

A client hears only of what it subscribed to, only once its stream was acknowledged
(the spec: nothing on a stream before its acknowledgment), and only from the upstream the
URI was subscribed on: any upstream may name any URI in an update, and another server's
word that a resource changed would make clients re-read it (or just spam them).
Bounded: URIs watched at once, all clients together (:data:`MAX_URIS`) and per client
(:data:`MAX_PER_CLIENT`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

import attrs
import trio

from agenthost.errors import AgentHostError
from agenthost.protocol import methods as m
from agenthost.serve.downstream import DownstreamSession

__all__ = ["MAX_PER_CLIENT", "MAX_URIS", "Subscriber", "Subscriptions"]

log = logging.getLogger("agenthost.serve")

#: Resource URIs subscribed to at once, all clients together.
MAX_URIS: Final = 1024
#: Resource URIs one downstream client may watch at once (over all its streams).
MAX_PER_CLIENT: Final = 64
#: How long unsubscribing upstream may take when a stream ends (shielded cleanup).
_CLEANUP_TIMEOUT: Final = 5.0

#: ``async (uri) -> server name``: subscribes upstream, raises when it cannot.
Subscribe = Callable[[str], Awaitable[str]]
#: ``async (uri, server)``: unsubscribes ``server`` from ``uri``.
Unsubscribe = Callable[[str, str], Awaitable[None]]


@attrs.define(eq=False)
class Subscriber:
    """One client's interest: a legacy ``resources/subscribe`` (``stream`` None) or one
    ``subscriptions/listen`` stream (``stream``: its request id, the ``subscriptionId``)."""

    session: DownstreamSession
    stream: Any = None
    #: The stream was acknowledged: updates may go out on it.
    ready: bool = True

    async def send(self, uri: str) -> None:
        params: dict[str, Any] = {"uri": uri}
        if self.stream is not None:
            params["_meta"] = {"io.modelcontextprotocol/subscriptionId": self.stream}
        await self.session.notify(m.NOTIFICATION_RESOURCES_UPDATED, params)


class Subscriptions:
    """Resource URI -> its subscribers, with the upstream subscription shared among them.

    Args:
        subscribe: subscribes the owning upstream to a URI and returns its name (raises
            ``AgentHostError`` or ``JSONRPCError`` when it cannot).
        unsubscribe: the reverse, on that same upstream, once nobody watches the URI.
    """

    def __init__(self, subscribe: Subscribe, unsubscribe: Unsubscribe) -> None:
        self._subscribe = subscribe
        self._unsubscribe = unsubscribe
        self._by_uri: dict[str, list[Subscriber]] = {}
        #: URI -> the upstream it was subscribed on: the only one whose updates count.
        self._server: dict[str, str] = {}

    def count(self, session: DownstreamSession) -> int:
        """How many URIs ``session`` watches now (its streams and its legacy ones)."""
        return sum(1 for subs in self._by_uri.values() for s in subs if s.session is session)

    def room_for(self, session: DownstreamSession) -> bool:
        return self.count(session) < MAX_PER_CLIENT

    def find(self, uri: str, session: DownstreamSession, stream: Any) -> Subscriber | None:
        for sub in self._by_uri.get(uri, ()):
            if sub.session is session and sub.stream == stream:
                return sub
        return None

    async def add(self, uri: str, sub: Subscriber) -> None:
        """Watch ``uri`` for ``sub`` (subscribing upstream for the first watcher).

        Raises:
            AgentHostError, JSONRPCError: too many URIs, or the upstream refused.
        """
        subs = self._by_uri.get(uri)
        if subs is None:
            if len(self._by_uri) >= MAX_URIS:
                raise AgentHostError("too many resource subscriptions")
            server = await self._subscribe(uri)
            subs = self._by_uri.setdefault(uri, [])
            self._server[uri] = server
        subs.append(sub)

    async def remove(self, uri: str, sub: Subscriber) -> None:
        """Stop watching ``uri`` for ``sub`` (unsubscribing upstream after the last one).

        Cancellation: the upstream unsubscribe is shielded and bounded, so a stream
        cancelled by its client still leaves the upstream clean.
        """
        subs = self._by_uri.get(uri)
        if subs is None or sub not in subs:
            return
        subs.remove(sub)
        if subs:
            return
        del self._by_uri[uri]
        server = self._server.pop(uri)
        with trio.CancelScope(shield=True), trio.move_on_after(_CLEANUP_TIMEOUT):
            try:
                await self._unsubscribe(uri, server)
            except AgentHostError as exc:
                log.debug("unsubscribe %s: %s", uri[:200], exc)

    async def forget(self, session: DownstreamSession) -> None:
        """A client left: drop everything it watched."""
        for uri, subs in list(self._by_uri.items()):
            for sub in [s for s in subs if s.session is session]:
                await self.remove(uri, sub)

    async def updated(self, uri: str, server: str) -> None:
        """Upstream ``server`` said ``uri`` changed: when ``uri`` was subscribed on that
        upstream, tell its ready subscribers whose client is here."""
        if self._server.get(uri) != server:
            if uri in self._server:
                log.debug("%s: update for another upstream's resource dropped", server)
            return
        for sub in list(self._by_uri.get(uri, ())):
            if sub.ready and not sub.session.closed:
                await sub.send(uri)
