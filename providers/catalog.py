"""The shipped model catalog (``catalog.toml``), loaded once on first use.

The catalog is data, not code, so updating a price is a one-line change with its source
next to it. It is read lazily (``load_catalog`` is cached) so importing ``providers``
costs nothing until a model list is actually needed. :func:`parse_model` is shared with
``agenthost_providers.config`` so user-declared models are validated by the same rules.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from importlib import resources
from typing import Any

import attrs

from agenthost.errors import ConfigError

from .base import TIERS, ModelInfo, Tier

__all__ = ["MODEL_FIELDS", "Catalog", "load_catalog", "parse_catalog", "parse_model"]

_CATALOG_FILE = "catalog.toml"

#: Every field a model table may set, with its type check and a description for errors.
MODEL_FIELDS: Mapping[str, tuple[type | tuple[type, ...], str]] = {
    "id": (str, "a string"),
    "vendor": (str, "a string"),
    "family": (str, "a string"),
    "tier": (str, "one of high, mid, low"),
    "aliases": (list, "a list of strings"),
    "context_window": (int, "an integer"),
    "max_output_tokens": (int, "an integer"),
    "images": (bool, "true or false"),
    "audio": (bool, "true or false"),
    "tools": (bool, "true or false"),
    "input_cost": ((int, float), "a number (USD per million tokens)"),
    "output_cost": ((int, float), "a number (USD per million tokens)"),
    "speed": ((int, float), "a number 0-100"),
    "intelligence": ((int, float), "a number 0-100"),
    "released": (str, "an ISO date string"),
    "source": (str, "a string"),
}
_REQUIRED_NEW = ("tier", "speed", "intelligence")


@attrs.frozen(kw_only=True)
class Catalog:
    """The parsed catalog: models (``provider`` left empty), defaults and hint keywords."""

    models: tuple[ModelInfo, ...]
    #: Default model id per provider kind ("anthropic", "openai").
    defaults: Mapping[str, str]
    #: Whole-token keyword -> vendor it names ("claude" -> "anthropic").
    vendor_keywords: Mapping[str, str]
    #: Whole-token keyword -> tier ("sonnet" -> "mid").
    tier_keywords: Mapping[str, Tier]

    def for_vendor(self, vendor: str) -> tuple[ModelInfo, ...]:
        """The catalog's models of one vendor, in file order."""
        return tuple(m for m in self.models if m.vendor == vendor)


@functools.cache
def load_catalog() -> Catalog:
    """Read and validate the shipped catalog (once per process)."""
    text = resources.files(__package__).joinpath(_CATALOG_FILE).read_text(encoding="utf-8")
    return parse_catalog(tomllib.loads(text), source=_CATALOG_FILE)


def parse_catalog(raw: Mapping[str, Any], *, source: str) -> Catalog:
    """Validate catalog data (the shipped file, or a test's own).

    Raises:
        ConfigError: naming ``source`` and the offending key.
    """
    models = []
    for index, table in enumerate(_list(raw.get("models", []), source, "models")):
        where = f"models[{index}]"
        if not isinstance(table, Mapping):
            raise ConfigError("must be a table", path=source, key=where)
        models.append(parse_model(table, provider="", base=None, source=source, key=where))
    tiers = {}
    for word, tier in _table(raw.get("tier_keywords", {}), source, "tier_keywords").items():
        tiers[word.lower()] = _tier(tier, source, f"tier_keywords.{word}")
    vendors = {
        word.lower(): _str(vendor, source, f"vendor_keywords.{word}")
        for word, vendor in _table(
            raw.get("vendor_keywords", {}), source, "vendor_keywords"
        ).items()
    }
    defaults = {
        kind: _str(model, source, f"defaults.{kind}")
        for kind, model in _table(raw.get("defaults", {}), source, "defaults").items()
    }
    return Catalog(
        models=tuple(models), defaults=defaults, vendor_keywords=vendors, tier_keywords=tiers
    )


def parse_model(
    table: Mapping[str, Any],
    *,
    provider: str,
    base: ModelInfo | None,
    source: str,
    key: str,
    model_id: str | None = None,
    vendor: str | None = None,
) -> ModelInfo:
    """Build a :class:`ModelInfo` from a TOML table, optionally overriding ``base``.

    Args:
        table: the model's fields (see :data:`MODEL_FIELDS`).
        provider: the configured provider name the model belongs to.
        base: the catalog entry being overridden, or ``None`` for a new model, which must
            then give at least ``tier``, ``speed`` and ``intelligence`` (a local model's
            figures cannot be guessed).
        source, key: where the table came from, for errors.
        model_id, vendor: defaults for ``id`` / ``vendor`` when the table omits them.

    Raises:
        ConfigError: an unknown field, a wrong type, or a missing figure.
    """
    fields: dict[str, Any] = {}
    for name, value in table.items():
        spec = MODEL_FIELDS.get(name)
        if spec is None:
            raise ConfigError(
                f"unknown model field {name!r}; known: {', '.join(MODEL_FIELDS)}",
                path=source,
                key=f"{key}.{name}",
            )
        expected, description = spec
        # bool is an int in Python; a number field must not accept true/false.
        if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
            raise ConfigError(f"must be {description}", path=source, key=f"{key}.{name}")
        fields[name] = value
    if "tier" in fields:
        fields["tier"] = _tier(fields["tier"], source, f"{key}.tier")
    if "aliases" in fields:
        aliases = fields["aliases"]
        if not all(isinstance(a, str) for a in aliases):
            raise ConfigError("must be a list of strings", path=source, key=f"{key}.aliases")
        fields["aliases"] = tuple(aliases)
    for name in ("input_cost", "output_cost", "speed", "intelligence"):
        if name in fields:
            fields[name] = float(fields[name])
            if fields[name] < 0:
                raise ConfigError("must not be negative", path=source, key=f"{key}.{name}")
    if base is not None:
        return attrs.evolve(base, provider=provider, **fields)
    missing = [name for name in _REQUIRED_NEW if name not in fields]
    if missing:
        raise ConfigError(
            f"a model not in the catalog needs its own figures: {', '.join(missing)}",
            path=source,
            key=key,
        )
    fields.setdefault("id", model_id)
    fields.setdefault("vendor", vendor)
    if not fields["id"] or not fields["vendor"]:
        raise ConfigError("a model needs an id and a vendor", path=source, key=key)
    fields.setdefault("family", fields["id"])
    return ModelInfo(provider=provider, **fields)


def _tier(value: Any, source: str, key: str) -> Tier:
    for tier in TIERS:
        if value == tier:
            return tier
    raise ConfigError(f"must be one of {', '.join(TIERS)}", path=source, key=key)


def _table(value: Any, source: str, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError("must be a table", path=source, key=key)
    return value


def _list(value: Any, source: str, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigError("must be an array of tables", path=source, key=key)
    return value


def _str(value: Any, source: str, key: str) -> str:
    if not isinstance(value, str):
        raise ConfigError("must be a string", path=source, key=key)
    return value
