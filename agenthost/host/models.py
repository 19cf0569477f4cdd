"""Which LLM an agent run uses, and what the host knows of it (its context and cost).

The host picks the model, not the agent: the run is handed the provider itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from agenthost.errors import ConfigError
from agenthost_providers.base import ModelInfo, Provider
from agenthost_providers.config import ProvidersConfig, available_models, default_choice

__all__ = ["agent_model", "model_info"]


def agent_model(
    config: ProvidersConfig,
    env: Mapping[str, str],
    providers: Mapping[str, Provider],
    provider: str | None,
    model: str | None,
) -> tuple[str, str]:
    """The (provider name, model) a run uses: the caller's, else the configured default.

    Raises:
        ConfigError: no provider is configured, or ``provider`` is not one of them.
    """
    if provider is None or model is None:
        choice = default_choice(config, env)
        if choice is None:
            raise ConfigError(
                "no LLM provider is configured: set ANTHROPIC_API_KEY or OPENAI_API_KEY,"
                " or add a [providers.<name>] section",
                key="providers",
            )
        provider = provider or choice[0]
        model = model or choice[1]
    if provider not in providers:
        raise ConfigError(
            f"provider {provider!r} is not configured (have: {', '.join(providers)})",
            key="providers",
        )
    return provider, model


def model_info(
    config: ProvidersConfig, env: Mapping[str, str], provider: str, model: str
) -> ModelInfo | None:
    """The catalog entry (with config overrides) of ``model`` on ``provider``, by id or
    alias; None when neither knows it (its cost is then unknown, not zero)."""
    for info in available_models(config, env):
        if info.provider == provider and (info.id == model or model in info.aliases):
            return info
    return None
