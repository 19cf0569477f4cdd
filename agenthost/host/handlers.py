"""What the host answers when a server asks: its roots, a sampling, an elicitation.

Every answer goes through the policy. :class:`ServerAsks` builds each server's
:class:`~agenthost.asks.ClientHandlers`; the host owns one and hands the handlers to the
server's supervisor.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from agenthost.ask_tasks import AskTaskLimits
from agenthost.asks import ClientHandlers, RequestContext
from agenthost.config.model import ServerConfig
from agenthost.errors import JSONRPCError
from agenthost.host.inflight import InFlight
from agenthost.host.refresh import LIST_CHANGED, CatalogRefresher
from agenthost.host.roots import RootsRegistry
from agenthost.protocol.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ListRootsResult,
    Root,
)
from agenthost_policies import Elicitation, PolicyEngine, RootsExposure
from agenthost_providers.base import Provider

if TYPE_CHECKING:
    from agenthost.host.sampling import SamplingService

__all__ = ["MAX_DURING", "SERVER_ASK", "DecidedCalls", "RootsFilter", "SamplingRoute", "ServerAsks"]

log = logging.getLogger("agenthost.host")

#: Where an upstream's sampling request goes instead of the providers: given the server's
#: name, an ``async (params) -> result`` that hands it on (``agenthost serve`` forwards to
#: its downstream client), or None to answer it with the providers.
SamplingRoute = Callable[
    [str],
    Callable[[CreateMessageRequestParams], Awaitable[CreateMessageResult]] | None,
]

#: Narrows the roots a server is offered: ``async (server, the workspaces' roots) ->
#: roots`` (``agenthost serve`` keeps what its downstream client's roots also cover).
RootsFilter = Callable[[str, list[Root]], Awaitable[list[Root]]]

#: The server's ask this task is answering: (server name, the tool it names or None). Set
#: while a roots, sampling or elicitation request is answered, so that a
#: :data:`SamplingRoute`, a :data:`RootsFilter` or the policy's prompter can tell whose
#: call it serves (``agenthost serve`` sends it to the client that made that call).
SERVER_ASK: contextvars.ContextVar[tuple[str, str | None] | None] = contextvars.ContextVar(
    "agenthost_server_ask", default=None
)


@contextlib.contextmanager
def _asking(server: str, ctx: RequestContext) -> Iterator[None]:
    token = SERVER_ASK.set((server, ctx.origin_name))
    try:
        yield
    finally:
        SERVER_ASK.reset(token)


#: Candidate calls named in one ask's audit line (``via.during``); the rest are counted.
MAX_DURING = 16


class DecidedCalls:
    """The calls in flight whose audit lines belong elsewhere (a durable run's), so that
    what their servers ask meanwhile is audited with them.

    A durable run's tool call is decided and audited in its workflow; a sampling request
    its server sends during the call is answered here, by the worker's host. Its audit
    line names the run through ``via.during``: the ``audit`` mapping of each such call in
    flight on that server (of that tool, when the ask says which: MRTR). A legacy server's
    own request does not say which call it serves, so with several calls in flight on one
    server every candidate is listed. An MRTR ask is answered in the task of the call it
    came back in (a context variable names that call), so it is that call's alone, even
    with another run calling the same tool. Bounded by the calls in flight.
    """

    def __init__(self) -> None:
        self._calls: InFlight[Mapping[str, Any]] = InFlight()
        #: The call the current task runs (None outside :meth:`running`).
        self._current: contextvars.ContextVar[tuple[str, Mapping[str, Any]] | None] = (
            contextvars.ContextVar("agenthost_decided_call", default=None)
        )

    @contextlib.contextmanager
    def running(self, server: str, tool: str, audit: Mapping[str, Any]) -> Iterator[None]:
        """For the block: ``server`` runs ``tool`` for the call ``audit`` names."""
        with self._calls.running(server, tool, dict(audit)) as entry:
            token = self._current.set(entry)
            try:
                yield
            finally:
                self._current.reset(token)

    def via(self, server: str, ctx: RequestContext) -> dict[str, Any] | None:
        """``ctx.via()`` with ``during``: the audit mappings the ask may belong to."""
        via = ctx.via()
        current = self._current.get()
        if (
            ctx.origin is not None
            and current is not None
            and current[0] == ctx.origin_name
            and self._calls.holds(server, current)
        ):
            # Came back in the answer to the call this task runs: that call's alone.
            return {**(via or {}), "during": [current[1]]}
        during = self._calls.candidates(server, ctx.origin_name)
        if not during:
            return via
        if len(during) > MAX_DURING:  # one audit line, however many calls are in flight
            return {
                **(via or {}),
                "during": during[:MAX_DURING],
                "during_more": len(during) - MAX_DURING,
            }
        return {**(via or {}), "during": during}


class ServerAsks:
    """The host's answers to its servers' requests and list-changed notifications.

    Args:
        sampling: the host's sampling service, built on first use (a host whose servers
            never sample does not pay for model selection).
        refresher: re-lists a server's entries when it says they changed.
    """

    def __init__(
        self,
        *,
        policy: PolicyEngine,
        roots: RootsRegistry,
        providers: Mapping[str, Provider],
        sampling: Callable[[], SamplingService],
        refresher: CatalogRefresher,
        sampling_route: SamplingRoute | None = None,
        roots_filter: RootsFilter | None = None,
        decided: DecidedCalls | None = None,
    ) -> None:
        self._policy = policy
        self._decided = decided or DecidedCalls()
        self._roots = roots
        self._providers = providers
        self._sampling = sampling
        self._refresher = refresher
        self._sampling_route = sampling_route
        self._roots_filter = roots_filter

    def for_server(self, server: ServerConfig) -> ClientHandlers:
        """What the host does for ``server``: roots, sampling, elicitation, all via policy.

        Sampling is declared only when a provider is configured: a server should not be
        told it may ask for something that can only fail.
        """

        async def roots(ctx: RequestContext, params: Mapping[str, Any]) -> ListRootsResult:
            with _asking(server.name, ctx):
                return await self.list_roots(server, ctx)

        async def sampling(
            ctx: RequestContext, params: CreateMessageRequestParams
        ) -> CreateMessageResult:
            with _asking(server.name, ctx):
                return await self.sample(server, ctx, params)

        async def elicitation(ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
            with _asking(server.name, ctx):
                return await self.elicit(server, ctx, params)

        async def list_changed(ctx: RequestContext, params: Mapping[str, Any]) -> None:
            await self._refresher.list_changed(server.name, ctx)

        return ClientHandlers(
            roots=roots,
            sampling=sampling if self._providers or self._sampling_route else None,
            sampling_tools=bool(self._providers),
            elicitation=elicitation,
            ask_tasks=AskTaskLimits() if server.client_tasks else None,
            notifications=dict.fromkeys(LIST_CHANGED, list_changed),
        )

    async def list_roots(self, server: ServerConfig, ctx: RequestContext) -> ListRootsResult:
        """The roots ``server`` may see, if the policy lets it see them (kind ``roots``)."""
        # Re-resolved at every listing: a workspace whose path changed since it was
        # configured (replaced by a symlink to /etc, say) is withheld and audited.
        offered = self._roots.roots_for(server.name)
        if self._roots_filter is not None:
            offered = await self._roots_filter(server.name, offered)
        withheld = [
            {"workspace": w.name, "problem": problem}
            for w, problem in self._roots.withheld_for(server.name)
        ]
        for item in withheld:
            log.warning("%s: root %s withheld: %s", server.name, item["workspace"], item["problem"])
        action = RootsExposure(
            server=server.name,
            roots=tuple(r.uri for r in offered),
            trusted=server.trusted,
            via=self._decided.via(server.name, ctx),
        )
        decision = await self._policy.check(action)
        if not decision.allowed:
            log.info("%s: roots withheld: %s", server.name, decision.reason)
            return ListRootsResult(roots=[])
        shown: Any = [r.uri for r in offered]
        if withheld:
            shown = {"roots": shown, "withheld": withheld}
        await self._policy.record_outcome(decision.id, result=shown)
        return ListRootsResult(roots=offered)

    async def sample(
        self, server: ServerConfig, ctx: RequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        """One sampling request: where the :data:`SamplingRoute` sends it, else the providers."""
        send = self._sampling_route(server.name) if self._sampling_route else None
        if send is not None:
            return await self._sampling().forward(
                server.name,
                params,
                send=send,
                reason="forwarded to the client agenthost serves",
                trusted=server.trusted,
                via=self._decided.via(server.name, ctx),
            )
        if not self._providers:
            raise JSONRPCError(
                -32603, "No model available: no LLM provider is configured in agenthost"
            )
        return await self._sampling().create_message(
            server.name,
            params,
            revision=ctx.revision,
            trusted=server.trusted,
            via=self._decided.via(server.name, ctx),
        )

    async def elicit(
        self, server: ServerConfig, ctx: RequestContext, params: ElicitRequestParams
    ) -> ElicitResult:
        """Hand ``server``'s question to the policy's prompter; its answer goes back."""
        response = await self._policy.elicit(
            Elicitation(
                server=server.name,
                message=params.message,
                mode=params.mode or ("url" if params.url else "form"),
                requested_schema=params.requested_schema,
                url=params.url,
                elicitation_id=params.elicitation_id,
                trusted=server.trusted,
                via=self._decided.via(server.name, ctx),
            )
        )
        return ElicitResult(
            action=response.action,
            content=dict(response.content) if response.content is not None else None,
        )
