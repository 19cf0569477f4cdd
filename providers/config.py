"""``[providers.<name>]`` config, which providers are configured, and building live ones.

TOML shape (every key but ``kind`` optional; ``kind`` defaults to the name when the name is
itself a kind, so ``[providers.anthropic]`` alone is a complete entry)::

    [providers]
    default = "anthropic"            # or "anthropic/claude-opus-5-5"; see `default_choice`

    [providers.anthropic]
    kind = "anthropic"               # anthropic | openai | openai-compatible | scripted
    api_key_env = "ANTHROPIC_API_KEY"
    default_model = "claude-sonnet-5-5"
    timeout = 120.0                  # seconds per HTTP attempt
    max_retries = 2                  # the SDK's own retries on 408/409/429/5xx

    [providers.openai]
    api = "responses"                # chat-completions (the default) | responses

    [providers.local]
    kind = "openai-compatible"       # Ollama, vLLM, llama.cpp server, LM Studio, ...
    base_url = "http://127.0.0.1:11434/v1"
    default_model = "qwen3:8b"
    [providers.local.models."qwen3:8b"]
    tier = "low"
    speed = 60
    intelligence = 55                # a local model needs its own figures

    [providers.replay]
    kind = "scripted"
    script = "demo-script.toml"      # a deterministic replay, never a real model

**Configured** means a call could succeed: the API-key variable is set (non-empty), or for
``openai-compatible`` a ``base_url`` is set; the key is then optional, since local servers
take none (``api_key_env`` may still name one for hosted compatible services). A
``scripted`` provider is configured when its script is set. Only configured providers'
models are selection candidates. With no ``[providers]`` section at all, ``anthropic`` and
``openai`` entries with their standard variables are implied, so exporting a key is enough.

Keys are read from the ``env`` mapping given (normally ``os.environ``) and never logged;
errors name the variable, never its value.
"""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit

import attrs
import trio

from agenthost.errors import ConfigError

from .base import ModelInfo, Provider
from .catalog import load_catalog, parse_model

__all__ = [
    "APIS",
    "DEFAULT_KEY_ENV",
    "KINDS",
    "Api",
    "Kind",
    "ProviderSettings",
    "ProviderStatus",
    "ProvidersConfig",
    "available_models",
    "build_provider",
    "default_choice",
    "open_providers",
    "parse_providers",
    "provider_status",
]

Kind: TypeAlias = Literal["anthropic", "openai", "openai-compatible", "scripted"]
KINDS: tuple[Kind, ...] = ("anthropic", "openai", "openai-compatible", "scripted")
#: The OpenAI APIs an ``openai`` / ``openai-compatible`` provider can speak: Chat
#: Completions (the default: every compatible server has it) or Responses (native tool
#: search, reasoning items kept across turns).
Api: TypeAlias = Literal["chat-completions", "responses"]
APIS: tuple[Api, ...] = ("chat-completions", "responses")
DEFAULT_KEY_ENV: Mapping[str, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
}
_FIELDS = (
    "kind",
    "api_key_env",
    "base_url",
    "default_model",
    "timeout",
    "max_retries",
    "models",
    "script",
    "api",
)


@attrs.frozen(kw_only=True)
class ProviderSettings:
    """One ``[providers.<name>]`` entry, validated."""

    name: str
    kind: Kind
    #: The environment variable holding the key; ``None`` for keyless local servers.
    api_key_env: str | None = None
    base_url: str | None = None
    default_model: str | None = None
    #: Seconds per HTTP attempt (the SDK's timeout); cancellation still applies on top.
    timeout: float = 120.0
    max_retries: int = 2
    #: Models declared or overridden in config, already merged over the catalog's entries.
    models: tuple[ModelInfo, ...] = ()
    #: For ``scripted``: the replay script file.
    script: str | None = None
    #: For ``openai`` / ``openai-compatible``: which API (one of :data:`APIS`).
    api: Api = "chat-completions"

    @property
    def vendor(self) -> str:
        """Whose catalog entries apply: the kind for hosted APIs, none for local servers."""
        return self.kind if self.kind in ("anthropic", "openai") else self.name


@attrs.frozen(kw_only=True)
class ProvidersConfig:
    """All provider entries in file order, plus the configured default."""

    providers: tuple[ProviderSettings, ...]
    #: ``"name"`` or ``"name/model"`` from ``[providers] default``; ``None`` when unset.
    default: str | None = None

    def get(self, name: str) -> ProviderSettings:
        """The entry called ``name``.

        Raises:
            ConfigError: no such provider.
        """
        for p in self.providers:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.providers) or "none"
        raise ConfigError(f"no provider named {name!r} (configured: {known})", key="providers")


@attrs.frozen(kw_only=True)
class ProviderStatus:
    """Whether a provider is usable, and why (for ``agenthost models``)."""

    name: str
    kind: Kind
    configured: bool
    reason: str


def parse_providers(
    raw: Mapping[str, Any], *, source: str, base_dir: str | os.PathLike[str] | None = None
) -> ProvidersConfig:
    """Validate the ``providers`` table of a config file.

    Args:
        raw: the value of the ``providers`` key (``{}`` when the file has none).
        source: the file name, for errors.
        base_dir: what a relative ``script`` path is relative to (the config file's
            directory); the current directory when ``None``.

    Raises:
        ConfigError: ``ConfigError(problem, path=source, key="providers.<name>.<field>")``.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a table", path=source, key="providers")
    default = raw.get("default")
    if default is not None and not isinstance(default, str):
        raise ConfigError(
            'must be a provider name or "provider/model"', path=source, key="providers.default"
        )
    entries = {k: v for k, v in raw.items() if k != "default"}
    if not entries:
        return ProvidersConfig(
            providers=(
                ProviderSettings(
                    name="anthropic", kind="anthropic", api_key_env="ANTHROPIC_API_KEY"
                ),
                ProviderSettings(name="openai", kind="openai", api_key_env="OPENAI_API_KEY"),
            ),
            default=default,
        )
    providers = tuple(_parse_one(name, table, source) for name, table in entries.items())
    if base_dir is not None:
        providers = tuple(
            attrs.evolve(p, script=os.path.join(base_dir, p.script))
            if p.script and not os.path.isabs(p.script)
            else p
            for p in providers
        )
    if default is not None:
        name = default.split("/", 1)[0]
        if name not in {p.name for p in providers}:
            raise ConfigError(
                f"names provider {name!r}, which has no [providers.{name}] entry",
                path=source,
                key="providers.default",
            )
    return ProvidersConfig(providers=providers, default=default)


def _parse_one(name: str, table: Any, source: str) -> ProviderSettings:
    key = f"providers.{name}"
    if not isinstance(table, Mapping):
        raise ConfigError("must be a table", path=source, key=key)
    for field in table:
        if field not in _FIELDS:
            raise ConfigError.unknown_key(f"{key}.{field}", field, _FIELDS, path=source)
    kind = table.get("kind", name if name in KINDS else None)
    if kind not in KINDS:
        raise ConfigError(f"kind must be one of {', '.join(KINDS)}", path=source, key=f"{key}.kind")
    strings = {}
    for field in ("api_key_env", "base_url", "default_model", "script"):
        value = table.get(field)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError("must be a non-empty string", path=source, key=f"{key}.{field}")
        strings[field] = value
    timeout = table.get("timeout", 120.0)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not (0 < timeout < math.inf)
    ):
        raise ConfigError("must be a positive number of seconds", path=source, key=f"{key}.timeout")
    retries = table.get("max_retries", 2)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigError("must be a non-negative integer", path=source, key=f"{key}.max_retries")
    if kind == "openai-compatible" and strings["base_url"] is None:
        raise ConfigError(
            "an openai-compatible provider needs base_url", path=source, key=f"{key}.base_url"
        )
    if kind == "scripted" and strings["script"] is None:
        raise ConfigError("a scripted provider needs script", path=source, key=f"{key}.script")
    api = table.get("api", APIS[0])
    if api not in APIS:
        raise ConfigError(f"must be one of {', '.join(APIS)}", path=source, key=f"{key}.api")
    if api != APIS[0] and kind not in ("openai", "openai-compatible"):
        raise ConfigError(
            "only an openai or openai-compatible provider has an api choice",
            path=source,
            key=f"{key}.api",
        )
    api_key_env = strings["api_key_env"] or DEFAULT_KEY_ENV.get(kind)
    settings = ProviderSettings(
        name=name,
        kind=kind,
        api_key_env=api_key_env,
        base_url=strings["base_url"],
        default_model=strings["default_model"],
        timeout=float(timeout),
        max_retries=retries,
        script=strings["script"],
        api=api,
    )
    models_raw = table.get("models", {})
    if not isinstance(models_raw, Mapping):
        raise ConfigError(
            'must be a table of models keyed by id ([providers.x.models."id"])',
            path=source,
            key=f"{key}.models",
        )
    catalog = {m.id: m for m in load_catalog().for_vendor(settings.vendor)}
    models = []
    for model_id, model_table in models_raw.items():
        where = f"{key}.models.{model_id}"
        if not isinstance(model_table, Mapping):
            raise ConfigError("must be a table", path=source, key=where)
        models.append(
            parse_model(
                model_table,
                provider=name,
                base=catalog.get(model_id),
                source=source,
                key=where,
                model_id=model_id,
                vendor=settings.vendor,
            )
        )
    return attrs.evolve(settings, models=tuple(models))


def provider_status(settings: ProviderSettings, env: Mapping[str, str]) -> ProviderStatus:
    """Decide whether ``settings`` is usable with this environment (pure)."""

    def status(ok: bool, why: str) -> ProviderStatus:
        return ProviderStatus(name=settings.name, kind=settings.kind, configured=ok, reason=why)

    if settings.kind == "scripted":
        return status(True, f"replays script {settings.script}")
    var = settings.api_key_env
    has_key = bool(var and env.get(var, "").strip())
    if settings.kind == "openai-compatible":
        if has_key:
            return status(True, f"base_url {settings.base_url}; key from {var}")
        if var:
            return status(False, f"{var} is not set")
        return status(True, f"base_url {settings.base_url}; no key (local server)")
    if has_key:
        return status(True, f"{var} is set")
    if settings.kind == "openai" and _env_base_url(settings, env):
        return status(True, f"{OPENAI_BASE_URL_ENV} is set; no key (local server)")
    return status(False, f"{var} is not set")


#: The OpenAI SDK's own variable for another endpoint (a local server such as Ollama):
#: an ``openai`` provider with no ``base_url`` of its own follows it, and then needs no key.
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"
#: The model to use on that endpoint (local servers name their models their own way).
OPENAI_MODEL_ENV = "OPENAI_MODEL"


def _env_base_url(settings: ProviderSettings, env: Mapping[str, str]) -> str | None:
    if settings.kind != "openai" or settings.base_url:
        return None
    return env.get(OPENAI_BASE_URL_ENV, "").strip() or None


def available_models(config: ProvidersConfig, env: Mapping[str, str]) -> list[ModelInfo]:
    """The selection candidates: every model of every configured provider.

    Hosted providers get the catalog's models of their vendor with config overrides
    applied; extra config models are added. An ``openai-compatible`` provider offers only
    its declared models plus an undeclared ``default_model`` (as a zero-figure entry so it
    can still be the default). A ``scripted`` provider offers one replay model.
    """
    out: list[ModelInfo] = []
    for settings in config.providers:
        if not provider_status(settings, env).configured:
            continue
        out.extend(_models_of(settings, env))
    return out


def _models_of(settings: ProviderSettings, env: Mapping[str, str]) -> list[ModelInfo]:
    overrides = {m.id: m for m in settings.models}
    local = _env_base_url(settings, env)
    if local is not None and urlsplit(local).hostname != "api.openai.com":
        # Following OPENAI_BASE_URL to another server (Ollama, vLLM, ...): it serves its
        # own models, not OpenAI's catalog; a strict server refuses any other name.
        catalog: list[ModelInfo] = []
    else:
        catalog = list(load_catalog().for_vendor(settings.vendor))
    models = [overrides.pop(m.id, attrs.evolve(m, provider=settings.name)) for m in catalog]
    models.extend(overrides.values())
    default = settings.default_model
    if settings.kind == "scripted":
        models = [_placeholder(settings, default or "scripted-replay", "a deterministic replay")]
    else:
        if local is not None:
            default = default or env.get(OPENAI_MODEL_ENV, "").strip() or None
        if default and not any(m.id == default for m in models):
            why = "no figures configured: neutral ones assumed"
            models.append(_placeholder(settings, default, why, neutral=True))
    return models


#: Figures for a model nobody described: the middle of every scale, so that priorities
#: neither favour nor exclude it (a configured local model must stay a candidate).
_NEUTRAL = {"speed": 50.0, "intelligence": 50.0, "tier": "mid"}


def _placeholder(
    settings: ProviderSettings, model_id: str, why: str, *, neutral: bool = False
) -> ModelInfo:
    figures: dict[str, Any] = dict(_NEUTRAL) if neutral else {"tier": "low"}
    return ModelInfo(
        id=model_id,
        provider=settings.name,
        vendor=settings.vendor,
        family=model_id,
        tools=True,
        source=why,
        **figures,
    )


def default_choice(config: ProvidersConfig, env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(provider, model)`` to use without preferences; ``None`` when nothing is configured.

    ``[providers] default`` wins ("name" uses that provider's default model); otherwise the
    first configured provider in file order. A provider's default model is its
    ``default_model``, else the catalog's default for its kind, else its first model.
    """
    chosen: ProviderSettings | None = None
    model: str | None = None
    if config.default:
        name, _, model_part = config.default.partition("/")
        chosen = config.get(name)
        model = model_part or None
        if not provider_status(chosen, env).configured:
            chosen, model = None, None
    if chosen is None:
        chosen = next((p for p in config.providers if provider_status(p, env).configured), None)
    if chosen is None:
        return None
    if model is None and _env_base_url(chosen, env):
        model = env.get(OPENAI_MODEL_ENV, "").strip() or None
    if model is None:
        model = chosen.default_model or load_catalog().defaults.get(chosen.kind)
    if model is None:
        models = _models_of(chosen, env)
        if not models:
            return None
        model = models[0].id
    return chosen.name, model


HttpClientFactory: TypeAlias = Callable[[ProviderSettings], Any]


def build_provider(
    settings: ProviderSettings,
    env: Mapping[str, str],
    *,
    http_client: Any = None,
) -> Provider:
    """Create the live provider for ``settings``; the vendor SDK is imported only here.

    Args:
        settings: a validated entry.
        env: where the API key is read from (normally ``os.environ``).
        http_client: an ``httpx2.AsyncClient`` to use instead of the SDK's own (tests
            inject ``httpx2.MockTransport`` this way); the provider closes it.

    Raises:
        ConfigError: the provider is not configured; names the variable to set.
    """
    status = provider_status(settings, env)
    if not status.configured:
        raise ConfigError(
            f"provider {settings.name!r} is not usable: {status.reason}",
            key=f"providers.{settings.name}.api_key_env",
        )
    models = {m.id: m for m in _models_of(settings, env)}
    key = env.get(settings.api_key_env, "").strip() if settings.api_key_env else ""
    if settings.kind == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(
            name=settings.name,
            api_key=key,
            base_url=settings.base_url,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            models=models,
            http_client=http_client,
        )
    if settings.kind in ("openai", "openai-compatible"):
        from .openai import OpenAIProvider
        from .openai_responses import OpenAIResponsesProvider

        env_url = _env_base_url(settings, env)
        api: type[OpenAIProvider | OpenAIResponsesProvider] = (
            OpenAIResponsesProvider if settings.api == "responses" else OpenAIProvider
        )
        return api(
            name=settings.name,
            api_key=key or None,
            base_url=settings.base_url or env_url,
            compatible=settings.kind == "openai-compatible" or env_url is not None,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            models=models,
            http_client=http_client,
        )
    from .scripted import ScriptedProvider

    assert settings.script is not None  # parse_providers guarantees it
    return ScriptedProvider.from_file(settings.script, name=settings.name)


@asynccontextmanager
async def open_providers(
    config: ProvidersConfig,
    env: Mapping[str, str],
    *,
    http_client_factory: HttpClientFactory | None = None,
) -> AsyncIterator[dict[str, Provider]]:
    """Build every configured provider; close them all on exit.

    **Resource handling:** closing runs shielded with its own 5 s bound, so an outer
    cancellation never leaves an HTTP client open.
    """
    providers: dict[str, Provider] = {}
    try:
        for settings in config.providers:
            if provider_status(settings, env).configured:
                client = http_client_factory(settings) if http_client_factory else None
                providers[settings.name] = build_provider(settings, env, http_client=client)
        yield providers
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            for provider in providers.values():
                await provider.aclose()
