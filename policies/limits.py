"""Sampling limits: includeContext, provider/model, rate per minute, token budget, maxTokens.

These are the checks the sampling service needs beyond allow/deny. They live here, apart
from the engine, so the service can call them on their own, and so tests drive time with
an injected clock instead of sleeping.

State is per server (a server that floods sampling requests uses up its own allowance,
never another's) and lives as long as the limiter: one host session. All methods are
synchronous and O(requests in the last minute), so a check is atomic with respect to other
Trio tasks.

**Reservations.** Many requests of one server can be in flight at once (asked, then sent to
the provider), so counting only finished calls would let all of them pass the same check:
20 concurrent requests of 500 tokens each against a budget of 1,000 all got through. So
:meth:`SamplingLimiter.reserve` counts the request against the rate and holds its tokens
(the granted ``maxTokens`` plus a generous estimate of the input) at decision time, before
anyone is asked; :meth:`~SamplingLimiter.release` gives both back when the answer is no,
and :meth:`~SamplingLimiter.settle` replaces the held tokens with what the provider
reported. The budget can then be exceeded only by what the input estimate missed.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from agenthost.errors import ConsentDenied
from agenthost_policies.decision import Sampling, SamplingGrant
from agenthost_policies.rules import SamplingLimits

__all__ = ["Clock", "SamplingLimiter", "estimate_input_tokens"]

#: Seconds, monotonic. ``time.monotonic`` by default; tests pass a fake.
Clock = Callable[[], float]

_WINDOW = 60.0
#: Tokenizers of current models average about 4 bytes of English per token; 3 errs high.
_BYTES_PER_TOKEN = 3
#: Anthropic documents about 1,600 tokens for a full-size image; audio is billed alike.
_MEDIA_TOKENS = 1600
#: Framing the APIs add per message and per request (role markers, tool definitions).
_PER_MESSAGE = 8
_PER_REQUEST = 16
_PER_TOOL = 64


def _text_tokens(text: str) -> int:
    return len(text.encode("utf-8", "replace")) // _BYTES_PER_TOKEN + 1


def _content_tokens(content: Any) -> int:
    blocks = content if isinstance(content, list) else [content]
    total = 0
    for block in blocks:
        if not isinstance(block, Mapping):
            total += _text_tokens(str(block))
            continue
        kind = block.get("type")
        if kind == "text":
            total += _text_tokens(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            total += _MEDIA_TOKENS
        elif kind == "tool_result":
            total += _PER_MESSAGE + _content_tokens(block.get("content", []))
        else:
            total += _text_tokens(repr(block))
    return total


def estimate_input_tokens(action: Sampling) -> int:
    """A generous estimate of the input tokens a sampling request will be billed.

    Used only to hold budget until the provider reports the real figure.
    """
    total = _PER_REQUEST + _PER_TOOL * len(action.tools)
    if action.system_prompt:
        total += _text_tokens(action.system_prompt)
    for message in action.messages:
        total += _PER_MESSAGE + _content_tokens(message.get("content"))
    return total


@attrs.frozen
class _Held:
    server: str
    tokens: int
    #: The request's entry in the rate window, removed again on release.
    slot: float


class SamplingLimiter:
    """Per-server request rate and token accounting for sampling requests."""

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._recent: dict[str, deque[float]] = {}
        self._used: dict[str, int] = {}
        self._reserved: dict[str, int] = {}
        self._held: dict[int, _Held] = {}
        self._tickets = itertools.count(1)

    def check(self, action: Sampling, limits: SamplingLimits, *, rule: str) -> SamplingGrant:
        """Check one request against a rule's limits, without counting or holding anything.

        Returns:
            The grant: the maxTokens to use (the request's, lowered to the cap and to the
            budget left after what is used and held) and the providers/models selection
            may choose from.

        Raises:
            ConsentDenied: with a reason naming the limit that was hit.
        """
        return self._grant(action, limits, rule, self._clock())[0]

    def reserve(self, action: Sampling, limits: SamplingLimits, *, rule: str) -> SamplingGrant:
        """:meth:`check`, then count the request against the rate and hold its tokens.

        Call it once, when the request is decided (before anyone is asked), and end every
        reservation with :meth:`release` or :meth:`settle`.

        Raises:
            ConsentDenied: with a reason naming the limit that was hit.
        """
        now = self._clock()
        grant, estimate = self._grant(action, limits, rule, now)
        server = action.server
        held = _Held(server=server, tokens=grant.max_tokens + estimate, slot=now)
        ticket = next(self._tickets)
        self._held[ticket] = held
        self._recent.setdefault(server, deque()).append(now)
        self._reserved[server] = self._reserved.get(server, 0) + held.tokens
        return attrs.evolve(grant, reserved_tokens=held.tokens, ticket=ticket)

    def release(self, grant: SamplingGrant) -> None:
        """Undo a reservation whose request was refused or never sent (idempotent)."""
        held = self._unhold(grant)
        if held is None:
            return
        recent = self._recent.get(held.server)
        if recent is not None:
            with contextlib.suppress(ValueError):  # it may have slid out of the window
                recent.remove(held.slot)

    def settle(self, grant: SamplingGrant, tokens: int | None) -> None:
        """End a reservation: count ``tokens`` (input + output) the provider reported.

        ``None`` means unknown (the call was cancelled while the provider may have been
        working), and the whole reservation is counted. Idempotent: a grant already
        settled or released counts nothing more.
        """
        held = self._unhold(grant)
        if held is None:
            return
        self.record_usage(held.server, held.tokens if tokens is None else tokens)

    def _unhold(self, grant: SamplingGrant) -> _Held | None:
        if grant.ticket is None:
            return None
        held = self._held.pop(grant.ticket, None)
        if held is not None:
            self._reserved[held.server] -= held.tokens
        return held

    def _grant(
        self, action: Sampling, limits: SamplingLimits, rule: str, now: float
    ) -> tuple[SamplingGrant, int]:
        server = action.server
        if action.include_context not in ("none", "") and not limits.allow_include_context:
            raise ConsentDenied(
                f"sampling from {server!r} asks includeContext={action.include_context!r}; "
                f"rule {rule} allows only 'none' (context from other conversations stays "
                "private)",
                rule=rule,
            )
        if action.provider is not None and not limits.allows_provider(action.provider):
            raise ConsentDenied(
                f"provider {action.provider!r} is not among {list(limits.providers)} "
                f"allowed by rule {rule}",
                rule=rule,
            )
        if action.model is not None and not limits.allows_model(action.model):
            raise ConsentDenied(
                f"model {action.model!r} is not among {list(limits.models)} allowed by rule {rule}",
                rule=rule,
            )
        recent = self._recent.get(server)
        if recent is not None:
            while recent and recent[0] <= now - _WINDOW:
                recent.popleft()
        rate = limits.requests_per_minute
        if rate is not None and recent is not None and len(recent) >= rate:
            retry = recent[0] + _WINDOW - now
            raise ConsentDenied(
                f"{server!r} made {len(recent)} sampling requests in the last minute, "
                f"the limit of rule {rule} is {rate}; retry in {retry:.0f} s",
                rule=rule,
            )
        max_tokens = action.max_tokens if action.max_tokens > 0 else None
        if limits.max_tokens is not None:
            max_tokens = min(max_tokens or limits.max_tokens, limits.max_tokens)
        estimate = estimate_input_tokens(action)
        if limits.token_budget is not None:
            held = self._reserved.get(server, 0)
            left = limits.token_budget - self._used.get(server, 0) - held - estimate
            if left <= 0:
                busy = f", {held} held by requests in flight" if held else ""
                raise ConsentDenied(
                    f"{server!r} has used its sampling budget of {limits.token_budget} "
                    f"tokens (rule {rule}{busy})",
                    rule=rule,
                )
            max_tokens = min(max_tokens or left, left)
        if max_tokens is None:
            raise ConsentDenied(
                f"sampling request from {server!r} has no positive maxTokens and rule "
                f"{rule} sets no cap",
                rule=rule,
            )
        grant = SamplingGrant(
            max_tokens=max_tokens,
            providers=limits.providers,
            models=limits.models,
            auto_review=limits.auto_review,
        )
        return grant, estimate

    def record_usage(self, server: str, tokens: int) -> None:
        """Add the tokens (input + output) a finished sampling call used to its budget."""
        if tokens < 0:
            raise ValueError(f"token count must not be negative, got {tokens}")
        self._used[server] = self._used.get(server, 0) + tokens

    def tokens_used(self, server: str) -> int:
        """Tokens recorded so far for ``server``."""
        return self._used.get(server, 0)

    def tokens_reserved(self, server: str) -> int:
        """Tokens held for ``server``'s requests that are decided but not yet settled."""
        return self._reserved.get(server, 0)
