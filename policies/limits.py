"""Sampling limits: includeContext, provider/model, rate per minute, token budget, maxTokens.

These are the checks the sampling service needs beyond allow/deny. They live here, apart
from the engine, so the service can call them on their own, and so tests drive time with
an injected clock instead of sleeping.

State is per server (a server that floods sampling requests uses up its own allowance,
never another's) and lives as long as the limiter: one host session. All methods are
synchronous and O(requests in the last minute), so a check is atomic with respect to other
Trio tasks.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from agenthost.errors import ConsentDenied
from policies.decision import Sampling, SamplingGrant
from policies.rules import SamplingLimits

__all__ = ["Clock", "SamplingLimiter"]

#: Seconds, monotonic. ``time.monotonic`` by default; tests pass a fake.
Clock = Callable[[], float]

_WINDOW = 60.0


class SamplingLimiter:
    """Per-server request rate and token accounting for sampling requests."""

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._recent: dict[str, deque[float]] = {}
        self._used: dict[str, int] = {}

    def check(
        self, action: Sampling, limits: SamplingLimits, *, rule: str, commit: bool = False
    ) -> SamplingGrant:
        """Check one request against a rule's limits.

        Args:
            action: the sampling request.
            limits: the matched rule's limits.
            rule: the rule's label, carried by the error.
            commit: count this request against the server's rate (do it once, when the
                request is finally allowed, so refused or unanswered asks cost nothing).

        Returns:
            The grant: the maxTokens to use (the request's, lowered to the cap and to the
            budget left) and the providers/models selection may choose from.

        Raises:
            ConsentDenied: with a reason naming the limit that was hit.
        """
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
        now = self._clock()
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
        if limits.token_budget is not None:
            left = limits.token_budget - self._used.get(server, 0)
            if left <= 0:
                raise ConsentDenied(
                    f"{server!r} has used its sampling budget of {limits.token_budget} "
                    f"tokens (rule {rule})",
                    rule=rule,
                )
            max_tokens = min(max_tokens or left, left)
        if max_tokens is None:
            raise ConsentDenied(
                f"sampling request from {server!r} has no positive maxTokens and rule "
                f"{rule} sets no cap",
                rule=rule,
            )
        if commit:
            self._recent.setdefault(server, deque()).append(now)
        return SamplingGrant(
            max_tokens=max_tokens,
            providers=limits.providers,
            models=limits.models,
            auto_review=limits.auto_review,
        )

    def record_usage(self, server: str, tokens: int) -> None:
        """Add the tokens (input + output) a finished sampling call used to its budget."""
        if tokens < 0:
            raise ValueError(f"token count must not be negative, got {tokens}")
        self._used[server] = self._used.get(server, 0) + tokens

    def tokens_used(self, server: str) -> int:
        """Tokens recorded so far for ``server``."""
        return self._used.get(server, 0)
