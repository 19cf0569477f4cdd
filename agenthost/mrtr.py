"""Multi Round-Trip Requests (2026-07-28, ``basic/patterns/mrtr.mdx``): the retry loop.

A modern server that needs sampling, elicitation or roots while handling ``tools/call``,
``prompts/get`` or ``resources/read`` does not send its own request: it answers
``resultType: "input_required"`` with ``inputRequests`` (asks, keyed by the server) and/or
a ``requestState``. The client answers every ask, then retries the *original* request
with ``inputResponses`` and the ``requestState`` echoed byte for byte, under a new
request id, until a complete result comes back.

Rules kept here:

* every ask goes through :class:`agenthost.asks.AskRouter`, the same path as a legacy
  server's own request, so consent, the sampling service and the audit are identical;
  the :class:`~agenthost.asks.RequestContext` carries the round and the ask's key;
* ``requestState`` is opaque: never parsed, never changed, never sent when absent;
* a round cap (``max_rounds``, default 10): a server that keeps asking gets a clear
  :class:`~agenthost.errors.MRTRLimitExceeded` instead of an endless loop;
* a round with only ``requestState`` (nothing to answer) is retried after a back-off
  that doubles each such round, so a server polling us cannot spin us;
* the whole exchange is one call: one deadline covers every round and every ask, and
  cancelling the caller cancels whichever step is running.
* bounds on untrusted input (checked by the router): at most
  :data:`~agenthost.asks.MAX_ASKS_PER_ROUND` asks per round, each one a method we
  declared a capability for.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import trio

from agenthost.asks import AskRouter
from agenthost.errors import AgentHostTimeout, MRTRLimitExceeded, ProtocolError
from agenthost.protocol.converter import structure
from agenthost.protocol.types import InputRequiredResult

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "run_exchange",
]

#: Rounds one call may take before it fails (the issue's default; configurable).
DEFAULT_MAX_ROUNDS: Final = 10
#: Back-off before retrying a state-only round: first delay and cap, in seconds.
_BACKOFF_FIRST: Final = 0.05
_BACKOFF_MAX: Final = 2.0

COMPLETE: Final = "complete"
INPUT_REQUIRED: Final = "input_required"


#: ``async (params, timeout) -> raw result`` for one round (a fresh request id each).
SendRound = Callable[[dict[str, Any], float | None], Awaitable[dict[str, Any]]]


async def run_exchange(
    send: SendRound,
    params: Mapping[str, Any],
    *,
    method: str,
    asks: AskRouter,
    revision: str,
    origin_name: str | None,
    timeout: float | None,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    server: str = "server",
    first: dict[str, Any] | None = None,
    final_kinds: frozenset[str] = frozenset({COMPLETE}),
) -> dict[str, Any]:
    """Send ``params`` and follow ``input_required`` answers to a complete result.

    Args:
        send: sends one round (the caller stamps ``_meta`` and headers).
        params: the original request's params, as sent in round 1.
        method: the original method (for messages, and each ask's ``origin``).
        asks: the session's router: every ask is answered (and checked) through it.
        revision: the revision each ask's context names.
        origin_name: the original request's target (tool or prompt name, resource URI).
        timeout: seconds for the whole exchange (None: no limit).
        max_rounds: requests sent at most (round 1 included).
        first: round 1's result when the caller already sent it (``timeout`` is then
            what is left).
        final_kinds: the ``resultType`` values that end the exchange (the tasks
            extension adds ``"task"`` for a caller that declared it).

    Returns:
        The complete result (raw JSON).

    Raises:
        MRTRLimitExceeded: still ``input_required`` after ``max_rounds`` rounds.
        ProtocolError: an unknown ``resultType``, an empty or oversized
            ``InputRequiredResult``, or an ask we did not declare (from ``asks``).
        AgentHostTimeout: the whole exchange took longer than ``timeout``.

    Cancellation: cancels the running round (the server is told as for any request)
    or the running asks; nothing is retried.
    """
    deadline = math.inf if timeout is None else trio.current_time() + timeout
    responses: dict[str, Any] | None = None
    state: str | None = None
    backoff = _BACKOFF_FIRST
    for round_no in range(1, max_rounds + 1):
        current = dict(params)
        if responses is not None:
            current["inputResponses"] = responses
        if state is not None:
            current["requestState"] = state
        if first is not None and round_no == 1:
            raw = first
        else:
            raw = await send(current, _remaining(deadline, timeout, method, server))
        kind = raw.get("resultType", COMPLETE)
        if kind in final_kinds:
            return raw
        if kind != INPUT_REQUIRED:
            raise ProtocolError(
                f"{method}: unrecognised resultType {str(kind)[:64]!r}", server=server
            )
        if round_no == max_rounds:
            break
        asked = structure(raw, InputRequiredResult)
        if not asked.input_requests and asked.request_state is None:
            raise ProtocolError(
                f"{method}: input_required result with neither inputRequests nor requestState",
                server=server,
            )
        state = asked.request_state
        if asked.input_requests:
            backoff = _BACKOFF_FIRST
            with trio.move_on_at(deadline) as scope:
                responses = await asks.answer_input_requests(
                    asked.input_requests,
                    round_no=round_no,
                    revision=revision,
                    origin=method,
                    origin_name=origin_name,
                )
            if scope.cancelled_caught:
                raise _timed_out(method, timeout, server)
        else:
            responses = None
            if trio.current_time() + backoff >= deadline:
                raise _timed_out(method, timeout, server)
            await trio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX)
    raise MRTRLimitExceeded(
        f"{method}: the server still needs input after {max_rounds} rounds (the limit;"
        " raise it with max_input_rounds)",
        server=server,
    )


def _remaining(deadline: float, timeout: float | None, method: str, server: str) -> float | None:
    if math.isinf(deadline):
        return None
    left = deadline - trio.current_time()
    if left <= 0:
        raise _timed_out(method, timeout, server)
    return left


def _timed_out(method: str, timeout: float | None, server: str) -> AgentHostTimeout:
    limit = timeout or 0.0
    return AgentHostTimeout(f"{method} timed out after {limit:g}s", server=server, timeout=limit)
