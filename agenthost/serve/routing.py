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
* A legacy upstream's own request over a transport with one stream (stdio) names
  nothing: the caller is the single request with a call in flight on that server, when
  there is exactly one (or several from one legacy client, which is then asked on its
  session).
* An ask that comes back on the response stream of a call (a Streamable HTTP upstream
  sends its request on the POST stream of the request it serves; a 2026-07-28 upstream's
  MRTR round comes back in the call's answer) is handled in a task of that call, so the
  downstream request it serves is known outright (:data:`~agenthost.serve.downstream.CURRENT`).
  So an ask from such an upstream that arrives any other way (its GET stream) is tied to
  no call, even with one call alone in flight there (:func:`asks_ride_their_calls`).
* Otherwise the ask cannot be attributed, and who answers it is the gateway's
  :data:`Fallback`, chosen once by how the gateway is served: on a gateway several clients
  share (``serve --http``), :func:`nobody` (the policy answers as in headless mode: never
  another session, which would see the first one's data and could forge its answer);
  over stdio, which serves one client, :func:`sole_client`. A log line that comes while
  calls of several clients are in flight there goes the same way (it may carry any of
  their data); a ``roots/list`` no call can be tied to gets, on a shared gateway, the
  workspaces within every client's roots
  (:meth:`~agenthost.serve.gateway.Gateway.roots_filter`).

Bounded by the downstream requests in flight (each client's are bounded by its endpoint).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agenthost.host.inflight import InFlight
from agenthost.serve.downstream import DownstreamSession, RequestInfo
from agenthost.serve.mrtr import Asker, ExchangeAsker, ExchangeStore

__all__ = [
    "CallsInFlight",
    "Fallback",
    "asker_for",
    "asks_ride_their_calls",
    "nobody",
    "sole_client",
]

#: Who answers an upstream's ask that no downstream call can be tied to (None: nobody).
Fallback = Callable[[], Asker | None]


def asks_ride_their_calls(session: Any) -> bool:
    """Whether the upstream ``session`` (the host's) sends the asks of a call on that
    call's own response stream, read in the call's task (Streamable HTTP's POST streams:
    inline exchanges), so that an ask that arrives otherwise serves no call."""
    return bool(getattr(getattr(session, "transport", None), "inline_exchanges", False))


def nobody() -> Asker | None:
    """The shared gateway's :data:`Fallback`: no client (the policy's headless answer)."""
    return None


def sole_client(session: DownstreamSession, exchanges: ExchangeStore | None) -> Fallback:
    """The :data:`Fallback` of a gateway that serves ``session`` alone (stdio): its newest
    2026-07-28 request waiting for input, else its session; there is nobody else it
    could be."""

    def pick() -> Asker | None:
        if exchanges is not None and exchanges.latest is not None:
            return ExchangeAsker(exchanges.latest)
        return session

    return pick


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
