"""Table-driven tests of ``select_model``: hints, tiers, priorities, ties, constraints."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from agenthost.errors import NoModelAvailable
from agenthost_providers.base import ModelInfo
from agenthost_providers.selection import Constraints, ModelPreferences, select_model


def model(provider: str, id: str, **kw: Any) -> ModelInfo:
    base: dict[str, Any] = {
        "vendor": provider,
        "family": id.rsplit("-", 1)[0],
        "tier": "mid",
        "images": True,
        "tools": True,
        "input_cost": 1.0,
        "output_cost": 5.0,
        "speed": 50.0,
        "intelligence": 50.0,
        "released": "2026-01-01",
    }
    base.update(kw)
    return ModelInfo(provider=provider, id=id, **base)


# A small lineup where each figure dominates somewhere: cheapest, fastest, smartest differ.
OPUS = model(
    "anthropic",
    "claude-opus-5-5",
    family="claude-opus",
    tier="high",
    aliases=("opus",),
    input_cost=4,
    output_cost=20,
    speed=50,
    intelligence=93,
    released="2026-10-15",
)
SONNET = model(
    "anthropic",
    "claude-sonnet-5-5",
    family="claude-sonnet",
    tier="mid",
    aliases=("sonnet",),
    input_cost=2,
    output_cost=10,
    speed=75,
    intelligence=88,
    released="2026-10-15",
)
SONNET_OLD = model(
    "anthropic",
    "claude-sonnet-5",
    family="claude-sonnet",
    tier="mid",
    aliases=("sonnet-5",),
    input_cost=2,
    output_cost=10,
    speed=75,
    intelligence=84,
    released="2026-04-01",
)
HAIKU = model(
    "anthropic",
    "claude-haiku-5-5",
    family="claude-haiku",
    tier="low",
    aliases=("haiku",),
    input_cost=0.5,
    output_cost=2.5,
    speed=100,
    intelligence=70,
    released="2026-10-07",
)
ASTRA = model(
    "openai",
    "gpt-6.2-astra",
    family="gpt-astra",
    tier="high",
    aliases=("astra",),
    input_cost=8,
    output_cost=40,
    speed=45,
    intelligence=97,
    released="2026-11-17",
)
SOL = model(
    "openai",
    "gpt-6.2-sol",
    family="gpt-sol",
    tier="mid",
    aliases=("sol",),
    input_cost=2,
    output_cost=10,
    speed=70,
    intelligence=91,
    released="2026-11-17",
)
LUNA = model(
    "openai",
    "gpt-6-luna",
    family="gpt-luna",
    tier="low",
    aliases=("luna", "mini"),
    input_cost=0.1,
    output_cost=0.5,
    speed=95,
    intelligence=74,
    released="2026-09-22",
    images=True,
)
AUDIO = model(
    "openai",
    "gpt-audio-1.5",
    family="gpt-audio",
    tier="mid",
    images=False,
    audio=True,
    input_cost=2.5,
    output_cost=10,
    speed=70,
    intelligence=60,
    released="2026-01-19",
)

ALL = (OPUS, SONNET, SONNET_OLD, HAIKU, ASTRA, SOL, LUNA, AUDIO)
ANTHROPIC_ONLY = (OPUS, SONNET, SONNET_OLD, HAIKU)
OPENAI_ONLY = (ASTRA, SOL, LUNA, AUDIO)


def prefs(
    *hints: str,
    cost: float | None = None,
    speed: float | None = None,
    intelligence: float | None = None,
) -> ModelPreferences:
    return ModelPreferences(
        hints=hints, cost_priority=cost, speed_priority=speed, intelligence_priority=intelligence
    )


CASES = [
    # id, preferences, available, constraints, expected "provider/model", reason fragment
    (
        "exact alias",
        prefs("sonnet"),
        ALL,
        None,
        "anthropic/claude-sonnet-5-5",
        "alias 'sonnet' exactly",
    ),
    (
        "substring, newest wins",
        prefs("claude-sonnet"),
        ALL,
        None,
        "anthropic/claude-sonnet-5-5",
        "newest of 2",
    ),
    (
        "case-insensitive",
        prefs("CLAUDE-HAIKU"),
        ALL,
        None,
        "anthropic/claude-haiku-5-5",
        "whole words",
    ),
    (
        "most specific beats newest",
        prefs("claude-sonnet-5"),
        ALL,
        None,
        "anthropic/claude-sonnet-5",
        "its id exactly",
    ),
    (
        "partial substring",
        prefs("onne"),
        ALL,
        None,
        "anthropic/claude-sonnet-5-5",
        "as a substring",
    ),
    (
        "hint order: first match wins",
        prefs("zzz-unknown-9", "luna", "sonnet"),
        ALL,
        None,
        "openai/gpt-6-luna",
        "hint 'zzz-unknown-9' matched no available model",
    ),
    (
        "later hint when earlier matches nothing",
        prefs("llama-70b-xyz", "opus"),
        ALL,
        None,
        "anthropic/claude-opus-5-5",
        "alias 'opus'",
    ),
    (
        "family word: claude-3-sonnet -> newest sonnet",
        prefs("claude-3-sonnet"),
        ALL,
        None,
        "anthropic/claude-sonnet-5-5",
        "'sonnet' family",
    ),
    (
        "cross-provider tier: sonnet -> openai mid",
        prefs("claude-3-sonnet"),
        OPENAI_ONLY,
        None,
        "openai/gpt-6.2-sol",
        "mid tier",
    ),
    (
        "cross-provider tier: opus -> openai high",
        prefs("claude-3-opus"),
        OPENAI_ONLY,
        None,
        "openai/gpt-6.2-astra",
        "high tier",
    ),
    (
        "cross-provider tier: gpt-4o-mini -> anthropic low",
        prefs("gpt-4o-mini"),
        ANTHROPIC_ONLY,
        None,
        "anthropic/claude-haiku-5-5",
        "low tier",
    ),
    (
        "spec example: gemini flash -> haiku",
        prefs("gemini-1.5-flash"),
        ANTHROPIC_ONLY,
        None,
        "anthropic/claude-haiku-5-5",
        "'flash'",
    ),
    (
        "tier ambiguity settled by priorities",
        prefs("gpt-4o", intelligence=1),
        OPENAI_ONLY,
        None,
        "openai/gpt-6.2-sol",
        "mid tier",
    ),
    (
        "nearest tier when the tier is empty",
        prefs("haiku"),
        (OPUS, SONNET, ASTRA),
        None,
        "anthropic/claude-sonnet-5-5",
        "nearest tier mid",
    ),
    ("cost dominates", prefs(cost=1), ALL, None, "openai/gpt-6-luna", "cost=1"),
    ("speed dominates", prefs(speed=1), ALL, None, "anthropic/claude-haiku-5-5", "speed=1"),
    (
        "intelligence dominates",
        prefs(intelligence=1),
        ALL,
        None,
        "openai/gpt-6.2-astra",
        "intelligence=1",
    ),
    (
        "mixed: smart but not pricey",
        prefs(cost=0.5, intelligence=0.8),
        ALL,
        None,
        "openai/gpt-6.2-sol",
        "scored 8 candidates",
    ),
    (
        "mixed: spec example priorities",
        prefs(intelligence=0.8, speed=0.5),
        ALL,
        None,
        "openai/gpt-6.2-sol",
        "speed=0.5",
    ),
    (
        "unusable hint falls back to priorities",
        prefs("nothing-like-it", cost=1),
        ALL,
        None,
        "openai/gpt-6-luna",
        "hint 'nothing-like-it' matched no available model",
    ),
    (
        "constraint: provider allow-list",
        prefs(intelligence=1),
        ALL,
        Constraints(providers=frozenset({"anthropic"})),
        "anthropic/claude-opus-5-5",
        "scored 4",
    ),
    (
        "constraint: hint outside allow-list maps by tier",
        prefs("astra", "sonnet"),
        ALL,
        Constraints(providers=frozenset({"anthropic"})),
        "anthropic/claude-opus-5-5",
        "hint 'astra' ('astra', high tier) matches no available model by name",
    ),
    (
        "constraint: model allow-list by alias",
        prefs(cost=1),
        ALL,
        Constraints(models=frozenset({"opus", "gpt-6.2-sol"})),
        "openai/gpt-6.2-sol",
        "scored 2",
    ),
    (
        "constraint: max cost",
        prefs(intelligence=1),
        ALL,
        Constraints(max_output_cost=10),
        "openai/gpt-6.2-sol",
        "scored",
    ),
    (
        "required capability: audio",
        prefs("sonnet", intelligence=1),
        ALL,
        Constraints(required=frozenset({"audio"})),
        "openai/gpt-audio-1.5",
        "mapped to mid tier",
    ),
    (
        "required capability: images excludes audio model",
        prefs("gpt-audio"),
        ALL,
        Constraints(required=frozenset({"images", "tools"})),
        "anthropic/claude-sonnet-5-5",
        "no usable hint or priority: using the configured default",
    ),
]


@pytest.mark.parametrize(
    ("preferences", "available", "constraints", "expected", "why"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_selection_table(
    preferences: ModelPreferences,
    available: tuple[ModelInfo, ...],
    constraints: Constraints | None,
    expected: str,
    why: str,
) -> None:
    chosen = select_model(
        preferences, available, constraints, default=("anthropic", "claude-sonnet-5-5")
    )
    assert f"{chosen.provider}/{chosen.model}" == expected, chosen.reason
    assert chosen.info.id == chosen.model
    assert why in chosen.reason


def test_no_preferences_uses_the_default() -> None:
    for preferences in (None, ModelPreferences(), prefs(cost=0, speed=0)):
        chosen = select_model(preferences, ALL, default=("openai", "sol"))
        assert (chosen.provider, chosen.model) == ("openai", "gpt-6.2-sol")
        assert "configured default openai/gpt-6.2-sol" in chosen.reason


def test_default_filtered_out_falls_back_deterministically() -> None:
    chosen = select_model(
        None,
        ALL,
        Constraints(required=frozenset({"audio"})),
        default=("anthropic", "claude-sonnet-5-5"),
    )
    assert chosen.model == "gpt-audio-1.5"
    assert "not a candidate" in chosen.reason


def test_ties_break_deterministically_whatever_the_order() -> None:
    twin_a = model("b-provider", "twin", intelligence=80, input_cost=1, output_cost=1)
    twin_b = model("a-provider", "twin", intelligence=80, input_cost=1, output_cost=1)
    older = model(
        "a-provider", "older", intelligence=80, input_cost=1, output_cost=1, released="2025-01-01"
    )
    for available in ((twin_a, twin_b, older), (older, twin_b, twin_a), (twin_b, older, twin_a)):
        chosen = select_model(prefs(speed=1), available)
        # Same score, intelligence and cost: the newer wins, then provider name order.
        assert (chosen.provider, chosen.model) == ("a-provider", "twin")


def test_no_candidate_is_a_clear_error() -> None:
    with pytest.raises(NoModelAvailable, match="no provider is configured"):
        select_model(prefs("sonnet"), ())
    with pytest.raises(NoModelAvailable) as info:
        select_model(prefs("sonnet"), ANTHROPIC_ONLY, Constraints(required=frozenset({"audio"})))
    assert "4 by required capability 'audio'" in str(info.value)
    with pytest.raises(NoModelAvailable, match="max input cost"):
        select_model(None, ALL, Constraints(max_input_cost=0.01))


def test_preferences_from_mcp_wire_shape() -> None:
    raw = {
        "hints": [
            {"name": "claude-3-sonnet"},
            {"name": ""},
            {"other": 1},
            "bad",
            {"name": "claude"},
        ],
        "costPriority": 0.3,
        "speedPriority": 1.7,
        "intelligencePriority": "high",
    }
    parsed = ModelPreferences.from_mcp(raw)
    assert parsed == ModelPreferences(
        hints=("claude-3-sonnet", "claude"),
        cost_priority=0.3,
        speed_priority=1.0,
        intelligence_priority=None,
    )
    assert ModelPreferences.from_mcp(None) == ModelPreferences()


def test_local_free_model_wins_on_cost() -> None:
    local = model(
        "local",
        "qwen3:8b",
        vendor="local",
        tier="low",
        input_cost=0,
        output_cost=0,
        speed=40,
        intelligence=40,
    )
    chosen = select_model(prefs(cost=1), (*ALL, local))
    assert chosen.model == "qwen3:8b"
    # Selection never mutates its inputs.
    assert attrs.evolve(local) == local
