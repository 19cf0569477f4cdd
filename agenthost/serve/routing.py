"""Whose call an upstream's ask serves, when several downstream clients share the gateway.

An upstream asks (sampling, elicitation, roots) and logs in the middle of a tool call;
over ``serve --http`` several clients may have calls running, and the ask belongs to the
client whose call caused it, not to whichever client spoke last. The gateway attributes
asks the way the host attributes them to durable calls
(:class:`agenthost.host.handlers.DecidedCalls`), on the same record
(:class:`agenthost.host.inflight.InFlight`): for each upstream server, which downstream
request has a call running there and of which tool.

* A 2026-07-28 upstream's ask names its tool (MRTR ``origin_name``): the caller is the
  one request with a call of that tool in flight on that server.
* A legacy upstream's own request names nothing: the caller is the single request with a
  call in flight on that server, when there is exactly one (or several from one legacy
  client, which is then asked on its session).
* Otherwise the ask cannot be attributed and the gateway falls back to its older rule
  (:meth:`~agenthost.serve.gateway.Gateway.asker`: the newest 2026-07-28 request under
  way, else the client that spoke last).

Bounded by the downstream requests in flight (each client's are bounded by its endpoint).
"""

from __future__ import annotations

from agenthost.host.inflight import InFlight
from agenthost.serve.downstream import RequestInfo
from agenthost.serve.mrtr import Asker, ExchangeAsker

__all__ = ["CallsInFlight", "asker_for"]


def asker_for(info: RequestInfo) -> Asker:
    """Who answers for the request ``info``: a 2026-07-28 one through its pending
    request, a legacy one on its session."""
    return ExchangeAsker(info.exchange) if info.exchange is not None else info.session


class CallsInFlight(InFlight[RequestInfo]):
    """Server name -> the (tool, downstream request) pairs with a call running there."""

    def caller(self, server: str, tool: str | None) -> RequestInfo | None:
        """The request an ask from ``server`` (about ``tool``, when it says) belongs to, or
        None when it cannot be told (no call, or calls of several requests)."""
        found = self.candidates(server, tool)
        if len(found) == 1:
            return found[0]
        sessions = {id(info.session) for info in found}
        if len(sessions) == 1 and all(info.exchange is None for info in found):
            return found[0]  # several calls of one legacy client: asked on its session
        return None
