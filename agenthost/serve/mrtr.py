"""Server asks to a 2026-07-28 client: multi round-trip requests (``basic/patterns/mrtr``).

A modern client cannot be sent requests: when serving its ``tools/call``, ``prompts/get``
or ``resources/read`` needs something from it (a consent form, an upstream's elicitation
or sampling request, its roots), the request is answered with an ``InputRequiredResult``
naming what is needed, and the client sends the same request again with its
``inputResponses`` and our ``requestState``. The work itself does not restart: it runs in
a task of its own (:class:`Exchange`) that waits for the answers, so an upstream that
asked in the stateful way (a legacy server's own request) is bridged to a modern client
without calling the upstream twice.

``requestState`` is a random token naming the exchange (never state a client could
forge); an unknown or expired one is refused with -32602. Exchanges are bounded: at
most :data:`MAX_EXCHANGES` at once, and one whose client does not come back within
:data:`ANSWER_TIMEOUT` fails its ask (the work then ends as the policy's "no" does).
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol, TypeVar

import outcome
import trio

from agenthost.errors import AgentHostTimeout, JSONRPCError
from agenthost.protocol import jsonrpc
from agenthost.protocol import methods as m
from agenthost.protocol.converter import structure, unstructure
from agenthost.protocol.types import ClientCapabilities

__all__ = [
    "ANSWER_TIMEOUT",
    "MAX_EXCHANGES",
    "Asker",
    "Exchange",
    "ExchangeAsker",
    "ExchangeStore",
]

#: Exchanges waiting for their client at once (all clients together).
MAX_EXCHANGES: Final = 256
#: How long an exchange waits for the client to come back with its answers.
ANSWER_TIMEOUT: Final = 300.0

P = TypeVar("P")
R = TypeVar("R")


class Asker(Protocol):
    """A client agenthost can put a request to: a legacy session (its own request) or a
    2026-07-28 client's pending request (:class:`ExchangeAsker`)."""

    name: str
    revision: str | None

    @property
    def closed(self) -> bool: ...

    def can(self, capability: str) -> bool: ...

    async def ask(
        self, spec: m.RequestSpec[P, R], params: P | None, *, timeout: float | None
    ) -> R: ...


class Exchange:
    """One modern request whose work is under way; see the module doc."""

    def __init__(self, token: str, capabilities: ClientCapabilities, revision: str) -> None:
        self.token = token
        self.capabilities = capabilities
        self.revision = revision
        self.done = False
        self._events_send, self._events = trio.open_memory_channel[tuple[Any, ...]](1)
        self._waiting: dict[str, trio.Event] = {}
        self._answers: dict[str, Any] = {}
        self._keys = itertools.count(1)

    async def ask(self, method: str, params: dict[str, Any] | None) -> Any:
        """Put one request to the client (through the pending request's answer) and wait
        for its response in the next retry.

        Raises:
            AgentHostTimeout: the client did not come back in time.
        """
        key = f"agenthost-{next(self._keys)}"
        event = self._waiting[key] = trio.Event()
        request: dict[str, Any] = {"method": method}
        if params is not None:
            request["params"] = params
        with trio.move_on_after(ANSWER_TIMEOUT):
            await self._events_send.send(("ask", key, request))
            await event.wait()
            return self._answers.pop(key)
        self._waiting.pop(key, None)
        raise AgentHostTimeout(
            f"the client did not answer {method} within {ANSWER_TIMEOUT:g}s",
            timeout=ANSWER_TIMEOUT,
        )

    def answer(self, responses: Mapping[str, Any]) -> None:
        """The ``inputResponses`` of a retry: each wakes the ask it answers."""
        for key, value in responses.items():
            event = self._waiting.pop(key, None)
            if event is not None:
                self._answers[key] = value
                event.set()

    async def next_event(self) -> tuple[Any, ...]:
        """``("ask", key, request)`` or ``("done", outcome)``."""
        return await self._events.receive()

    async def finish(self, result: outcome.Outcome[dict[str, Any]]) -> None:
        self.done = True
        with trio.move_on_after(ANSWER_TIMEOUT):
            await self._events_send.send(("done", result))


class ExchangeAsker:
    """A 2026-07-28 client, asked through its pending request (what consent and the
    gateway call ``ask`` on, as they would a legacy client's session)."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self.name = "downstream client (2026-07-28)"
        self.revision: str | None = exchange.revision

    @property
    def closed(self) -> bool:
        return self.exchange.done

    def can(self, capability: str) -> bool:
        return getattr(self.exchange.capabilities, capability, None) is not None

    async def ask(self, spec: m.RequestSpec[P, R], params: P | None, *, timeout: float | None) -> R:
        raw = None if params is None else unstructure(params, self.exchange.revision)  # type: ignore[call-overload]
        response = await self.exchange.ask(spec.method, raw)
        if isinstance(response, dict) and "error" in response and len(response) == 1:
            error = response["error"]
            raise JSONRPCError(int(error.get("code", -32603)), str(error.get("message", "")))
        return structure(response, spec.result)


class ExchangeStore:
    """The exchanges under way, by token; their work runs in ``nursery``."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._by_token: dict[str, Exchange] = {}
        #: The newest exchange still running: over stdio (one client), an upstream's ask
        #: that arrives outside any downstream request goes to it
        #: (:func:`agenthost.serve.routing.sole_client`).
        self.latest: Exchange | None = None

    def get(self, token: str) -> Exchange:
        found = self._by_token.get(token)
        if found is None or found.done:
            raise JSONRPCError(jsonrpc.INVALID_PARAMS, "unknown or expired requestState")
        return found

    def start(
        self,
        work: Callable[[Exchange], Awaitable[dict[str, Any]]],
        capabilities: ClientCapabilities,
        revision: str,
    ) -> Exchange:
        if len(self._by_token) >= MAX_EXCHANGES:
            raise JSONRPCError(jsonrpc.INTERNAL_ERROR, "too many requests waiting for input")
        exchange = Exchange(secrets.token_urlsafe(24), capabilities, revision)
        self._by_token[exchange.token] = exchange
        self.latest = exchange

        async def run() -> None:
            try:
                result = await outcome.acapture(work, exchange)
                await exchange.finish(result)
            finally:
                exchange.done = True
                self._by_token.pop(exchange.token, None)
                if self.latest is exchange:
                    self.latest = None

        self._nursery.start_soon(run)
        return exchange
