"""Which calls are running on which server: whose call a server's ask may belong to.

A server asks (sampling, elicitation, roots) and logs in the middle of a tool call, and
the ask belongs to the call that caused it: a durable run's call (its audit line names
the run, :class:`agenthost.host.handlers.DecidedCalls`) or a downstream client's call
through ``agenthost serve`` (:class:`agenthost.serve.routing.CallsInFlight`). Both keep
the same record: per server, the (tool, value) pair of each call in flight. A 2026-07-28
ask names its tool; a legacy server's own request names nothing, so every call on that
server is a candidate. Bounded by the calls in flight.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["InFlight"]

T = TypeVar("T")


class InFlight(Generic[T]):
    """Server name -> the (tool, value) pairs of the calls running there."""

    def __init__(self) -> None:
        self._calls: dict[str, list[tuple[str, T]]] = {}

    @contextlib.contextmanager
    def running(self, server: str, tool: str, value: T) -> Iterator[tuple[str, T]]:
        """For the block: ``server`` runs ``tool`` for ``value``; yields the entry."""
        entry = (tool, value)
        calls = self._calls.setdefault(server, [])
        calls.append(entry)
        try:
            yield entry
        finally:
            calls.remove(entry)
            if not calls:
                del self._calls[server]

    def candidates(self, server: str, tool: str | None) -> list[T]:
        """The values of ``server``'s calls an ask may belong to: those of ``tool`` when
        the ask names it, else all."""
        return [value for name, value in self._calls.get(server, ()) if tool in (None, name)]

    def holds(self, server: str, entry: tuple[str, T]) -> bool:
        """Whether ``entry`` (from :meth:`running`) is still in flight on ``server``."""
        return any(call is entry for call in self._calls.get(server, ()))

    def has_calls(self, server: str) -> bool:
        return server in self._calls
