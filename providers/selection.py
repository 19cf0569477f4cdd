"""MCP ``modelPreferences`` -> one concrete model, with a reason a human can read.

:func:`select_model` is a pure function of its arguments (no I/O, no clock), so every rule
below is table-tested and ``agenthost models --explain`` shows exactly what a sampling
request would get.

The rules, in order:

1. **Candidates**: the ``available`` models (only configured providers' models are passed
   in), filtered by :class:`Constraints` (allowed providers/models, cost caps, capabilities
   the request needs). None left -> :class:`~agenthost.errors.NoModelAvailable`.
2. **Hints**, in the order given; the first hint that yields a model wins:

   a. case-insensitive substring of a model id or alias. Among several matches the most
      specific wins: an exact id/alias (3) beats a whole-token match such as ``sonnet``
      in ``claude-sonnet-5-5`` (2), which beats a partial substring (1); then the newest.
   b. a family word in the hint (``claude-3-sonnet`` -> ``sonnet``) -> the newest model of
      a family with that word.
   c. a tier word (``gpt-4o-mini`` -> low) -> a model of the same tier from any configured
      provider, as the spec allows ("gemini-1.5-flash could match claude-3-haiku"); the
      nearest tier when that one is empty (higher first); the hint's vendor preferred.
      Ambiguity within a tier is settled by the priorities, then the tie-break.

3. **Priorities**: with no usable hint, each candidate scores
   ``cost*c + speed*s + intelligence*i`` over min-max normalised figures (cost on a log
   scale of the 3:1 blended price, inverted so cheaper is better; absent priorities count 0).
4. **No preference at all** (no usable hint and every priority 0/absent): the configured
   default, when it is a candidate.
5. **Ties** break by higher intelligence, lower cost, newer release, then provider/id.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from agenthost.errors import NoModelAvailable

from .base import TIERS, Capability, ModelInfo, Tier
from .catalog import Catalog, load_catalog

__all__ = ["Constraints", "ModelPreferences", "Selection", "select_model"]

_TOKEN_SPLIT = re.compile(r"[-._:/\s]+")


@attrs.frozen(kw_only=True)
class ModelPreferences:
    """MCP ``ModelPreferences``: hints in order of preference, priorities in 0..1."""

    hints: tuple[str, ...] = ()
    cost_priority: float | None = None
    speed_priority: float | None = None
    intelligence_priority: float | None = None

    @classmethod
    def from_mcp(cls, raw: Mapping[str, Any] | None) -> ModelPreferences:
        """Read the wire shape (``{"hints": [{"name": ...}], "costPriority": ...}``).

        Lenient like every receive path: hints without a string ``name`` and priorities
        that are not numbers are ignored; numbers are clamped to 0..1.
        """
        if not raw:
            return cls()
        hints = tuple(
            h["name"]
            for h in raw.get("hints") or ()
            if isinstance(h, Mapping) and isinstance(h.get("name"), str) and h["name"].strip()
        )
        return cls(
            hints=hints,
            cost_priority=_priority(raw.get("costPriority")),
            speed_priority=_priority(raw.get("speedPriority")),
            intelligence_priority=_priority(raw.get("intelligencePriority")),
        )

    @property
    def weights(self) -> tuple[float, float, float]:
        """(cost, speed, intelligence), absent ones as 0."""
        return (
            self.cost_priority or 0.0,
            self.speed_priority or 0.0,
            self.intelligence_priority or 0.0,
        )


def _priority(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return min(1.0, max(0.0, float(value)))


@attrs.frozen(kw_only=True)
class Constraints:
    """Hard limits applied before any preference (from policy, config or the request)."""

    #: Allowed provider names; ``None`` allows all.
    providers: frozenset[str] | None = None
    #: Allowed model ids or aliases; ``None`` allows all.
    models: frozenset[str] | None = None
    #: Caps in USD per million tokens.
    max_input_cost: float | None = None
    max_output_cost: float | None = None
    #: What this request needs (see ``agenthost_providers.base.required_capabilities``).
    required: frozenset[Capability] = frozenset()


@attrs.frozen(kw_only=True)
class Selection:
    """The chosen model and why."""

    provider: str
    model: str
    info: ModelInfo
    reason: str


def select_model(
    preferences: ModelPreferences | None,
    available: Sequence[ModelInfo],
    constraints: Constraints | None = None,
    *,
    default: tuple[str, str] | None = None,
    catalog: Catalog | None = None,
) -> Selection:
    """Choose one model for a request.

    Args:
        preferences: the request's preferences; ``None`` means none were given.
        available: models of the configured providers only.
        constraints: hard filters; ``None`` means none.
        default: ``(provider, model id)`` to use when there is no preference.
        catalog: where the hint keywords come from (the shipped catalog by default).

    Returns:
        The :class:`Selection` with a human-readable ``reason``.

    Raises:
        NoModelAvailable: no model survives the constraints; the message says which
            filter removed what.
    """
    constraints = constraints or Constraints()
    prefs = preferences or ModelPreferences()
    keywords = catalog or load_catalog()
    candidates = _filter(available, constraints)
    notes: list[str] = []

    for hint in prefs.hints:
        picked = _by_hint(hint, candidates, prefs, keywords)
        if picked is not None:
            info, why = picked
            return _selection(info, "; ".join([*notes, why]))
        notes.append(f"hint {hint!r} matched no available model")

    weights = prefs.weights
    if not any(weights):
        chosen = _find_default(default, candidates)
        if chosen is not None:
            lead = "no model preferences" if not prefs.hints else "no usable hint or priority"
            return _selection(
                chosen,
                "; ".join([*notes, f"{lead}: using the configured default {_name(chosen)}"]),
            )
        if default is not None:
            notes.append(f"configured default {default[0]}/{default[1]} is not a candidate")
    info, scores = _best_by_score(candidates, weights)
    return _selection(info, "; ".join([*notes, _score_reason(info, scores, weights, candidates)]))


# ------------------------------------------------------------------------------ filtering


def _filter(available: Sequence[ModelInfo], c: Constraints) -> list[ModelInfo]:
    if not available:
        raise NoModelAvailable(
            "no model is available: no provider is configured (set an API key such as "
            "ANTHROPIC_API_KEY or OPENAI_API_KEY, or a base_url for a local server)"
        )
    out = list(available)
    removed: list[str] = []

    def keep(label: str, predicate: Any) -> None:
        nonlocal out
        kept = [m for m in out if predicate(m)]
        if len(kept) < len(out):
            removed.append(f"{len(out) - len(kept)} by {label}")
        out = kept

    if c.providers is not None:
        allowed = c.providers
        keep(f"allowed providers {sorted(allowed)}", lambda m: m.provider in allowed)
    if c.models is not None:
        wanted = {m.lower() for m in c.models}
        keep(
            f"allowed models {sorted(c.models)}",
            lambda m: m.id.lower() in wanted or any(a.lower() in wanted for a in m.aliases),
        )
    if c.max_input_cost is not None:
        cap_in = c.max_input_cost
        keep(f"max input cost ${cap_in}/MTok", lambda m: m.input_cost <= cap_in)
    if c.max_output_cost is not None:
        cap_out = c.max_output_cost
        keep(f"max output cost ${cap_out}/MTok", lambda m: m.output_cost <= cap_out)
    for capability in sorted(c.required):
        keep(f"required capability {capability!r}", lambda m, cap=capability: m.supports(cap))
    if not out:
        raise NoModelAvailable(
            f"no available model satisfies the constraints ({len(available)} available; "
            f"removed {', '.join(removed)})"
        )
    return out


# ---------------------------------------------------------------------------------- hints


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN_SPLIT.split(text.lower()) if t]


def _contains_tokens(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def _specificity(hint: str, name: str) -> int:
    """3 exact, 2 whole tokens, 1 partial substring, 0 no match (all case-insensitive)."""
    h, n = hint.lower(), name.lower()
    if h == n:
        return 3
    if h not in n:
        return 0
    return 2 if _contains_tokens(_tokens(n), _tokens(h)) else 1


def _by_hint(
    hint: str, candidates: list[ModelInfo], prefs: ModelPreferences, catalog: Catalog
) -> tuple[ModelInfo, str] | None:
    # a. substring of an id or alias, most specific then newest.
    matched: list[tuple[int, str, ModelInfo]] = []
    for m in candidates:
        level, via = max(((_specificity(hint, n), n) for n in (m.id, *m.aliases)), default=(0, ""))
        if level:
            matched.append((level, via, m))
    if matched:
        top = max(level for level, _, _ in matched)
        tied = [(via, m) for level, via, m in matched if level == top]
        newest = max(m.released for _, m in tied)
        finalists = [m for _, m in tied if m.released == newest]
        info = _best_by_score(finalists, prefs.weights)[0]
        via = next(v for v, m in tied if m is info)
        kind = {3: "exactly", 2: "as whole words", 1: "as a substring"}[top]
        what = "its id" if via == info.id else f"its alias {via!r}"
        extra = f" (newest of {len(matched)} matches)" if len(matched) > 1 else ""
        return info, f"hint {hint!r} matched {what} {kind}: {_name(info)}{extra}"

    hint_tokens = _tokens(hint)
    word, tier = _keyword(hint_tokens, catalog.tier_keywords)
    vendor = next((v for k, v in catalog.vendor_keywords.items() if k in hint_tokens), None)

    # b. a family word: the newest model of that family.
    if word is not None:
        family = [m for m in candidates if _contains_tokens(_tokens(m.family), _tokens(word))]
        if family:
            newest = max(m.released for m in family)
            info = _best_by_score([m for m in family if m.released == newest], prefs.weights)[0]
            return info, (
                f"hint {hint!r} names the {word!r} family; newest available: {_name(info)}"
            )

    # c. a tier word: the same niche from any configured provider.
    if tier is None:
        return None
    for candidate_tier in _nearest_tiers(tier):
        same = [m for m in candidates if m.tier == candidate_tier]
        if not same:
            continue
        preferred = [m for m in same if m.vendor == vendor] or same
        info, _ = _best_by_score(preferred, prefs.weights)
        niche = (
            f"{tier} tier"
            if candidate_tier == tier
            else f"nearest tier {candidate_tier} (none at {tier})"
        )
        return info, (
            f"hint {hint!r} ({word!r}, {tier} tier) matches no available model by name; "
            f"mapped to {niche}: {_name(info)}"
        )
    return None


def _keyword(tokens: list[str], table: Mapping[str, Tier]) -> tuple[str | None, Tier | None]:
    found = [(len(k), k) for k in table if _contains_tokens(tokens, _tokens(k))]
    if not found:
        return None, None
    word = max(found)[1]
    return word, table[word]


def _nearest_tiers(tier: Tier) -> list[Tier]:
    i = TIERS.index(tier)
    return sorted(TIERS, key=lambda t: (abs(TIERS.index(t) - i), TIERS.index(t)))


# -------------------------------------------------------------------------------- scoring


def _normalised(values: list[float]) -> list[float]:
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        return [1.0] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


def _scores(
    models: Sequence[ModelInfo], weights: tuple[float, float, float]
) -> list[tuple[float, float, float, float]]:
    """(total, cost, speed, intelligence) per model; each part normalised to 0..1."""
    # Prices span three orders of magnitude; a log scale keeps a $0.10 and a $0.50 model
    # as distinguishable as a $4 and a $20 one. The +0.01 lets free local models in.
    cost = [1.0 - v for v in _normalised([math.log(m.blended_cost + 0.01) for m in models])]
    speed = _normalised([m.speed for m in models])
    smart = _normalised([m.intelligence for m in models])
    wc, ws, wi = weights
    return [(wc * c + ws * s + wi * i, c, s, i) for c, s, i in zip(cost, speed, smart, strict=True)]


def _best_by_score(
    models: Sequence[ModelInfo], weights: tuple[float, float, float]
) -> tuple[ModelInfo, tuple[float, float, float, float]]:
    scored = list(zip(models, _scores(models, weights), strict=True))

    def key(item: tuple[ModelInfo, tuple[float, float, float, float]]) -> tuple[Any, ...]:
        m, s = item
        # Round so float noise never decides; then the documented deterministic tie-break.
        return (
            -round(s[0], 9),
            -m.intelligence,
            m.blended_cost,
            _neg_date(m.released),
            m.provider,
            m.id,
        )

    return min(scored, key=key)


def _neg_date(date: str) -> tuple[int, ...]:
    return tuple(-ord(ch) for ch in date)


def _score_reason(
    info: ModelInfo,
    scores: tuple[float, float, float, float],
    weights: tuple[float, float, float],
    candidates: Sequence[ModelInfo],
) -> str:
    wc, ws, wi = weights
    total, c, s, i = scores
    if not any(weights):
        return (
            f"no preferences and no default among {len(candidates)} candidates: "
            f"{_name(info)} by tie-break (highest intelligence, then lowest cost, newest)"
        )
    return (
        f"scored {len(candidates)} candidates with priorities cost={wc:g} speed={ws:g} "
        f"intelligence={wi:g}: {_name(info)} scored {total:.2f} "
        f"(cost {c:.2f}, speed {s:.2f}, intelligence {i:.2f}; 1.00 is best among candidates)"
    )


# -------------------------------------------------------------------------------- helpers


def _find_default(
    default: tuple[str, str] | None, candidates: Iterable[ModelInfo]
) -> ModelInfo | None:
    if default is None:
        return None
    provider, model = default
    return next(
        (m for m in candidates if m.provider == provider and model in (m.id, *m.aliases)), None
    )


def _name(info: ModelInfo) -> str:
    return f"{info.provider}/{info.id}"


def _selection(info: ModelInfo, reason: str) -> Selection:
    return Selection(provider=info.provider, model=info.id, info=info, reason=reason)
