"""Config parsing, "configured" status, the shipped catalog, the replay provider and CLI helpers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.errors import ConfigError, NoModelAvailable, ProviderError
from agenthost_providers.base import (
    END_TURN,
    TOOL_USE,
    Completed,
    Message,
    Request,
    TextDelta,
    ToolUseEvent,
)
from agenthost_providers.catalog import load_catalog, parse_catalog
from agenthost_providers.cli import (
    explain,
    list_models,
    provider_rows,
    render_models,
    render_selection,
)
from agenthost_providers.config import (
    available_models,
    build_provider,
    default_choice,
    open_providers,
    parse_providers,
    provider_status,
)
from agenthost_providers.scripted import REPLAY_MODEL, ScriptedProvider

KEYS = {"ANTHROPIC_API_KEY": "sk-ant-secret-value", "OPENAI_API_KEY": "sk-openai-secret-value"}


# ------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("raw", "key", "problem"),
    [
        ({"x": {}}, "providers.x.kind", "kind must be one of"),
        ({"x": {"kind": "bedrock"}}, "providers.x.kind", "kind must be one of"),
        ({"x": "anthropic"}, "providers.x", "must be a table"),
        (
            {"anthropic": {"api_key": "sk-..."}},
            "providers.anthropic.api_key",
            "unknown key 'api_key'",
        ),
        ({"anthropic": {"timeout": 0}}, "providers.anthropic.timeout", "positive"),
        ({"anthropic": {"timeout": True}}, "providers.anthropic.timeout", "positive"),
        ({"anthropic": {"max_retries": -1}}, "providers.anthropic.max_retries", "non-negative"),
        ({"anthropic": {"base_url": ""}}, "providers.anthropic.base_url", "non-empty"),
        ({"l": {"kind": "openai-compatible"}}, "providers.l.base_url", "needs base_url"),
        ({"r": {"kind": "scripted"}}, "providers.r.script", "needs script"),
        ({"anthropic": {"models": []}}, "providers.anthropic.models", "keyed by id"),
        (
            {"anthropic": {"models": {"claude-opus-5-5": {"input_cost": "4"}}}},
            "providers.anthropic.models.claude-opus-5-5.input_cost",
            "must be a number",
        ),
        (
            {"anthropic": {"models": {"claude-opus-5-5": {"tier": "ultra"}}}},
            "providers.anthropic.models.claude-opus-5-5.tier",
            "one of high, mid, low",
        ),
        (
            {"anthropic": {"models": {"claude-opus-5-5": {"wings": 2}}}},
            "providers.anthropic.models.claude-opus-5-5.wings",
            "unknown model field",
        ),
        (
            {
                "l": {
                    "kind": "openai-compatible",
                    "base_url": "http://127.0.0.1:1/v1",
                    "models": {"qwen3:8b": {"tier": "low"}},
                }
            },
            "providers.l.models.qwen3:8b",
            "needs its own figures: speed, intelligence",
        ),
        ({"default": 3, "anthropic": {}}, "providers.default", "provider name"),
        ({"default": "nobody", "anthropic": {}}, "providers.default", "no [providers.nobody]"),
    ],
)
def test_bad_config_names_file_and_key(raw: dict[str, Any], key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_providers(raw, source="agenthost.toml")
    assert info.value.path == "agenthost.toml"
    assert info.value.key == key
    assert problem in info.value.problem


def test_full_config_round_trip() -> None:
    config = parse_providers(
        {
            "default": "local/qwen3:8b",
            "anthropic": {
                "default_model": "claude-opus-5-5",
                "timeout": 30,
                "max_retries": 0,
                "models": {"claude-opus-5-5": {"input_cost": 3.5}},
            },
            "local": {
                "kind": "openai-compatible",
                "base_url": "http://127.0.0.1:11434/v1",
                "models": {
                    "qwen3:8b": {"tier": "low", "speed": 60, "intelligence": 55, "images": True}
                },
            },
        },
        source="agenthost.toml",
    )
    anthropic = config.get("anthropic")
    assert (anthropic.kind, anthropic.api_key_env, anthropic.timeout, anthropic.max_retries) == (
        "anthropic",
        "ANTHROPIC_API_KEY",
        30.0,
        0,
    )
    local = config.get("local")
    assert local.api_key_env is None and local.vendor == "local"
    models = {m.id: m for m in available_models(config, KEYS)}
    # Override merged over the catalog entry, everything else kept.
    assert models["claude-opus-5-5"].input_cost == 3.5
    assert models["claude-opus-5-5"].output_cost == 20.0
    assert models["qwen3:8b"].provider == "local" and models["qwen3:8b"].images
    assert "gpt-6.2-sol" not in models  # no [providers.openai] entry
    assert default_choice(config, KEYS) == ("local", "qwen3:8b")
    with pytest.raises(ConfigError, match="no provider named 'nope'"):
        config.get("nope")


def test_configured_means_key_or_base_url() -> None:
    config = parse_providers(
        {
            "anthropic": {},
            "openai": {"api_key_env": "WORK_OPENAI_KEY"},
            "ollama": {
                "kind": "openai-compatible",
                "base_url": "http://127.0.0.1:11434/v1",
                "default_model": "llama3.3",
            },
            "hosted": {
                "kind": "openai-compatible",
                "base_url": "https://example.invalid/v1",
                "api_key_env": "HOSTED_KEY",
            },
        },
        source="t",
    )
    env = {"ANTHROPIC_API_KEY": "sk-ant-secret-value", "OPENAI_API_KEY": "unused-here"}
    status = {p.name: provider_status(p, env) for p in config.providers}
    assert (
        status["anthropic"].configured and status["anthropic"].reason == "ANTHROPIC_API_KEY is set"
    )
    assert (
        not status["openai"].configured and status["openai"].reason == "WORK_OPENAI_KEY is not set"
    )
    assert status["ollama"].configured and "no key" in status["ollama"].reason
    assert not status["hosted"].configured
    models = available_models(config, env)
    assert {m.provider for m in models} == {"anthropic", "ollama"}
    # An undeclared local default model is listed, with neutral figures, and says so.
    local = next(m for m in models if m.provider == "ollama")
    assert (local.id, local.intelligence, local.speed) == ("llama3.3", 50, 50)
    assert local.source == "no figures configured: neutral ones assumed"
    rendered = render_models(list_models(config, env), provider_rows(config, env))
    assert "sk-ant-secret-value" not in rendered
    assert "-- openai (openai): WORK_OPENAI_KEY is not set" in rendered


def test_no_providers_section_implies_both_hosted_providers() -> None:
    config = parse_providers({}, source="t")
    assert [p.name for p in config.providers] == ["anthropic", "openai"]
    assert default_choice(config, {}) is None
    assert default_choice(config, {"OPENAI_API_KEY": "k"}) == ("openai", "gpt-6.2-sol")
    assert default_choice(config, KEYS) == ("anthropic", "claude-sonnet-5-5")


# ------------------------------------------------------------------------------ catalog


def test_shipped_catalog_is_complete_and_sourced() -> None:
    catalog = load_catalog()
    assert load_catalog() is catalog  # parsed once
    vendors = {m.vendor for m in catalog.models}
    assert vendors == {"anthropic", "openai"}
    for m in catalog.models:
        assert m.source, m.id
        assert m.context_window > 0 and m.input_cost > 0 and m.output_cost >= m.input_cost
        assert 0 < m.speed <= 100 and 0 < m.intelligence <= 100
        assert len(m.released) == 10
    ids = [m.id for m in catalog.models]
    assert len(ids) == len(set(ids))
    for kind, model_id in catalog.defaults.items():
        assert model_id in {m.id for m in catalog.for_vendor(kind)}
    for tier_word in ("opus", "sonnet", "haiku", "mini"):
        assert tier_word in catalog.tier_keywords
    # Every tier is represented by both vendors, so cross-provider mapping has a target.
    for vendor in ("anthropic", "openai"):
        assert {m.tier for m in catalog.for_vendor(vendor)} == {"high", "mid", "low"}


def test_catalog_errors_name_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        parse_catalog(
            {"models": [{"id": "x", "vendor": "v", "tier": "mid", "speed": 1}]}, source="c.toml"
        )
    assert info.value.key == "models[0]" and "intelligence" in info.value.problem


def test_importing_providers_does_not_import_the_sdks() -> None:
    code = (
        "import sys, providers, providers.cli, providers.config;"
        "print(any(m.split('.')[0] in ('anthropic', 'openai') for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[2],
        timeout=30,
    )
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------- replay provider


SCRIPT = """
[[turns]]
text = "Let me look."
[[turns.tool_calls]]
id = "call_1"
name = "get_weather"
input = { city = "Paris" }

[[turns]]
text = "18°C in Paris."
"""


async def test_replay_provider_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "script.toml"
    path.write_text(SCRIPT, encoding="utf-8")
    config = parse_providers({"replay": {"kind": "scripted", "script": str(path)}}, source="t")
    async with open_providers(config, {}) as providers:
        replay = providers["replay"]
        assert isinstance(replay, ScriptedProvider)
        request = Request(model=REPLAY_MODEL, messages=(Message.user("weather?"),), max_tokens=10)
        first = await replay.complete(request)
        assert first.stop_reason == TOOL_USE and first.model == REPLAY_MODEL
        assert first.tool_uses[0].input == {"city": "Paris"}
        assert first.usage.output_tokens == 0  # nothing was generated
        async with replay.stream(request) as stream:
            events = [e async for e in stream]
        assert events[0] == TextDelta(text="18°C in Paris.")
        assert isinstance(events[-1], Completed) and events[-1].result.stop_reason == END_TURN
        with pytest.raises(ProviderError, match="exhausted after 2 turn"):
            await replay.complete(request)
        assert replay.requests == [request, request, request]
    with pytest.raises(ProviderError, match="closed"):
        await replay.complete(request)
    assert [m.id for m in available_models(config, {})] == [REPLAY_MODEL]


async def test_replay_script_from_json_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"turns": [{"tool_calls": [{"name": "f", "input": {"a": 1}}]}]}))
    replay = ScriptedProvider.from_file(path)
    async with replay.stream(Request(model="m", messages=(Message.user("x"),), max_tokens=1)) as s:
        events = [e async for e in s]
    assert isinstance(events[0], ToolUseEvent) and events[0].tool_use.id == "replay_0_0"
    bad = tmp_path / "bad.toml"
    bad.write_text('[[turns]]\nstop_reason = "endTurn"\n')
    with pytest.raises(ConfigError) as info:
        ScriptedProvider.from_file(bad)
    assert info.value.key == "turns[0]" and "text or tool_calls" in info.value.problem
    with pytest.raises(ConfigError, match="cannot read"):
        ScriptedProvider.from_file(tmp_path / "missing.toml")


async def test_open_providers_closes_everything_even_when_cancelled() -> None:
    config = parse_providers({"anthropic": {}, "openai": {}}, source="t")
    with trio.move_on_after(0.1):
        async with open_providers(config, KEYS) as providers:
            assert set(providers) == {"anthropic", "openai"}
            await trio.sleep_forever()
    request = Request(model="claude-sonnet-5-5", messages=(Message.user("x"),), max_tokens=1)
    for provider in providers.values():
        with pytest.raises(ProviderError, match="closed"):
            await provider.complete(request)


def test_build_provider_never_puts_the_key_in_errors() -> None:
    config = parse_providers({"anthropic": {"api_key_env": "TEAM_KEY"}}, source="t")
    with pytest.raises(ConfigError) as info:
        build_provider(config.get("anthropic"), {"ANTHROPIC_API_KEY": "sk-ant-secret-value"})
    assert "TEAM_KEY" in str(info.value) and "sk-ant-secret-value" not in str(info.value)


# --------------------------------------------------------------------------------- CLI


def test_list_and_explain() -> None:
    config = parse_providers({}, source="t")
    rows = list_models(config, {"OPENAI_API_KEY": "k"})
    assert rows and {r["provider"] for r in rows} == {"openai"}
    assert [r["model"] for r in rows if r["default"]] == ["gpt-6.2-sol"]
    json.dumps(rows)  # JSON-able for --json

    chosen = explain('{"hints": [{"name": "claude-3-haiku"}]}', config, {"OPENAI_API_KEY": "k"})
    assert (chosen.provider, chosen.model) == ("openai", "gpt-6-luna")
    text = render_selection(chosen)
    assert text.startswith("openai/gpt-6-luna\n  because hint 'claude-3-haiku'")
    assert explain("", config, KEYS).model == "claude-sonnet-5-5"
    with pytest.raises(ConfigError, match="not valid JSON"):
        explain("{hints", config, KEYS)
    with pytest.raises(ConfigError, match="JSON object"):
        explain("[1]", config, KEYS)
    with pytest.raises(NoModelAvailable):
        explain("{}", config, {})
