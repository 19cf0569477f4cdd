"""Pure functions behind ``agenthost models`` and ``agenthost models --explain``.

The CLI only parses arguments, calls these with ``os.environ`` and prints; everything
here is a plain function of config + environment, so it is tested without a terminal.
``--json`` output is :func:`list_models` / :func:`selection_data` dumped as is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agenthost.errors import ConfigError

from .config import ProvidersConfig, available_models, default_choice, provider_status
from .selection import Constraints, ModelPreferences, Selection, select_model

__all__ = [
    "explain",
    "list_models",
    "provider_rows",
    "render_models",
    "render_selection",
    "selection_data",
]


def provider_rows(config: ProvidersConfig, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """One row per configured entry: name, kind, configured and why (never a key value)."""
    return [
        {"provider": s.name, "kind": s.kind, "configured": st.configured, "reason": st.reason}
        for s in config.providers
        for st in (provider_status(s, env),)
    ]


def list_models(config: ProvidersConfig, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The models selection can choose from, as JSON-able rows in catalog order."""
    default = default_choice(config, env)
    return [
        {
            "provider": m.provider,
            "model": m.id,
            "tier": m.tier,
            "aliases": list(m.aliases),
            "context_window": m.context_window,
            "images": m.images,
            "audio": m.audio,
            "tools": m.tools,
            "input_cost": m.input_cost,
            "output_cost": m.output_cost,
            "speed": m.speed,
            "intelligence": m.intelligence,
            "default": default == (m.provider, m.id),
        }
        for m in available_models(config, env)
    ]


def explain(
    preferences_json: str,
    config: ProvidersConfig,
    env: Mapping[str, str],
    *,
    constraints: Constraints | None = None,
) -> Selection:
    """Select as a sampling request with these ``modelPreferences`` would.

    Args:
        preferences_json: MCP ``modelPreferences`` JSON, e.g.
            ``'{"hints": [{"name": "sonnet"}], "costPriority": 0.8}'``; ``""`` or
            ``"{}"`` means no preferences.

    Raises:
        ConfigError: the JSON does not parse or is not an object.
        NoModelAvailable: nothing is configured or nothing fits.
    """
    text = preferences_json.strip()
    try:
        raw = json.loads(text) if text else {}
    except ValueError as exc:
        raise ConfigError(f"not valid JSON: {exc}", key="--explain") from None
    if not isinstance(raw, dict):
        raise ConfigError("must be a JSON object (MCP modelPreferences)", key="--explain")
    preferences = ModelPreferences.from_mcp(raw) if raw else None
    return select_model(
        preferences,
        available_models(config, env),
        constraints,
        default=default_choice(config, env),
    )


def selection_data(selection: Selection) -> dict[str, Any]:
    """A selection as JSON-able data (for ``--json``)."""
    return {"provider": selection.provider, "model": selection.model, "reason": selection.reason}


def render_selection(selection: Selection) -> str:
    """Two lines: the choice, and why."""
    return f"{selection.provider}/{selection.model}\n  because {selection.reason}"


def render_models(
    rows: Sequence[Mapping[str, Any]], providers: Sequence[Mapping[str, Any]] = ()
) -> str:
    """A plain-text table of :func:`list_models` rows, then each provider's status."""
    header = ("PROVIDER", "MODEL", "TIER", "CONTEXT", "INPUTS", "$IN/M", "$OUT/M", "SPEED", "IQ")
    table = [header]
    for r in rows:
        inputs = (
            "text"
            + "".join(f"+{cap}" for cap in ("images", "audio") if r[cap])
            + ("+tools" if r["tools"] else "")
        )
        table.append(
            (
                r["provider"],
                r["model"] + (" *" if r["default"] else ""),
                r["tier"],
                _tokens(r["context_window"]),
                inputs,
                f"{r['input_cost']:g}",
                f"{r['output_cost']:g}",
                f"{r['speed']:g}",
                f"{r['intelligence']:g}",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]
    if not rows:
        lines.append("(no models: no provider is configured)")
    else:
        lines.append("* default; speed and IQ are relative 0-100 estimates (see catalog.toml)")
    for p in providers:
        mark = "ok " if p["configured"] else "-- "
        lines.append(f"{mark}{p['provider']} ({p['kind']}): {p['reason']}")
    return "\n".join(lines)


def _tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:g}M"
    if n >= 1000:
        return f"{n // 1000}K"
    return str(n) if n else "?"
