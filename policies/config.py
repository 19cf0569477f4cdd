"""The ``[policy]`` configuration: mode, preset, rules, audit file.

It can live inside the host config or in a file of its own (``load_policy_file``); both
go through :func:`parse_policy`, which checks every key and reports problems as
``ConfigError(problem, path=file, key="policy.rules[3].server")``.

Presets are data, not code: ``policies/presets/<name>.toml``, shipped in the package and
read with :mod:`importlib.resources`. Their rules come *after* the user's own, so a user
rule always overrides the preset (first match wins).
"""

from __future__ import annotations

import importlib.resources
import math
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs

from agenthost.errors import ConfigError
from agenthost_policies.approvals import default_approvals_path
from agenthost_policies.audit import DEFAULT_FOLD_WINDOW, default_audit_path
from agenthost_policies.decision import Verdict
from agenthost_policies.rules import Rule, parse_rule

__all__ = [
    "DEFAULT_PRESETS",
    "AuditConfig",
    "Mode",
    "PolicyConfig",
    "load_policy_file",
    "load_preset",
    "parse_policy",
    "preset_names",
]

Mode: TypeAlias = Literal["interactive", "headless", "programmatic"]
_MODES: tuple[Mode, ...] = ("interactive", "headless", "programmatic")

#: The preset used when the config names none (``preset = "none"`` disables presets).
DEFAULT_PRESETS: Mapping[Mode, str] = {
    "interactive": "interactive",
    "headless": "headless-readonly",
    "programmatic": "interactive",
}
_KEYS = frozenset(
    {
        "mode",
        "preset",
        "rules",
        "audit",
        "audit_database",
        "prompt_timeout",
        "ask_timeout",
        "file",
        "approvals",
        "project",
    }
)
#: Only a preset whose name starts with this may hold an unconditional allow rule.
_UNSAFE_PREFIX = "unsafe-"


@attrs.frozen(kw_only=True)
class AuditConfig:
    """Where the audit JSONL goes."""

    path: Path
    #: fsync after every line (durable, slower).
    fsync: bool = False
    #: Seconds within which a line identical to its subject's last one is counted, not
    #: written (a flooding server cannot flood the file); 0 writes every line.
    fold: float = DEFAULT_FOLD_WINDOW


@attrs.frozen(kw_only=True)
class PolicyConfig:
    """A validated ``[policy]`` section."""

    mode: Mode = "interactive"
    #: The preset in effect, or ``None``.
    preset: str | None = None
    #: The user's rules, in order.
    rules: tuple[Rule, ...] = ()
    #: The preset's rules, consulted after the user's.
    preset_rules: tuple[Rule, ...] = ()
    #: Rules a trusted project file added (``deny`` or ``ask`` only). They can only make
    #: a decision stricter: the engine takes one when it is stricter than what the user's
    #: rules and preset decide, never otherwise, and never its sampling limits.
    project_rules: tuple[Rule, ...] = ()
    audit: AuditConfig | None = None
    #: A PostgreSQL URI (``postgresql://...``) that durable workers append the audit to,
    #: once per ``(run_id, seq)`` across a fleet; ``None``: the JSONL file. Holds a
    #: password, maybe: whoever shows it redacts it.
    audit_database: str | None = None
    #: Seconds the terminal prompter waits for each answer.
    prompt_timeout: float = 300.0
    #: Seconds a durable run (``agenthost run --temporal``) stays parked on an "ask"
    #: before the headless default (deny) answers it: there a person answers later.
    ask_timeout: float = 86400.0
    #: Where "always"/"never" answers for tools are kept across sessions, or ``None``
    #: (this session only). Default: the XDG state file in interactive mode, else none.
    approvals: Path | None = None
    #: The file the section came from, for messages.
    source: str = "<policy>"

    @property
    def all_rules(self) -> tuple[Rule, ...]:
        """Every rule in evaluation order: user rules, then the preset's."""
        return self.rules + self.preset_rules

    @classmethod
    def for_mode(cls, mode: Mode) -> PolicyConfig:
        """The default policy of a mode: its default preset and no rules of its own."""
        return parse_policy({"mode": mode}, source="<defaults>")


def preset_names() -> list[str]:
    """The names of the presets shipped with agenthost."""
    folder = importlib.resources.files("agenthost_policies").joinpath("presets")
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    )


def _read_preset(name: str) -> dict[str, Any]:
    resource = importlib.resources.files("agenthost_policies").joinpath("presets", f"{name}.toml")
    if not resource.is_file():
        raise ConfigError(
            f"unknown preset {name!r} (known: {', '.join(preset_names())}, or 'none')",
            key="policy.preset",
        )
    return tomllib.loads(resource.read_text(encoding="utf-8"))


def load_preset(name: str) -> tuple[Rule, ...]:
    """The rules of a shipped preset, labelled ``preset:<name>[i]`` (or by their ``id``).

    Raises:
        ConfigError: unknown preset, or (a packaging bug) an invalid preset file.
    """
    data = _read_preset(name)
    source = f"preset {name}"
    raw_rules = data.get("rules", [])
    if not isinstance(raw_rules, list):
        raise ConfigError("must be a list of tables", path=source, key="rules")
    return tuple(
        parse_rule(
            raw,
            label=f"preset:{name}[{index}]",
            source=source,
            key=f"rules[{index}]",
            allow_unconditional=name.startswith(_UNSAFE_PREFIX),
        )
        for index, raw in enumerate(raw_rules)
    )


def parse_policy(
    raw: Mapping[str, Any], *, source: str, base_dir: str | os.PathLike[str] | None = None
) -> PolicyConfig:
    """Validate a ``[policy]`` table.

    Args:
        raw: the table (``{}`` gives the interactive defaults).
        source: the config file name, for error messages.
        base_dir: what relative paths (``audit``, ``file``) are relative to; the current
            directory when ``None``.

    Raises:
        ConfigError: naming the key, e.g. ``policy.rules[3].server``.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a table", path=source, key="policy")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ConfigError.unknown_key(f"policy.{unknown[0]}", unknown[0], _KEYS, path=source)
    base = Path(base_dir) if base_dir is not None else Path.cwd()

    if "file" in raw:
        others = sorted(set(raw) - {"file", "project"})
        if others:
            raise ConfigError(
                "a policy kept in its own file is configured there; remove this key",
                path=source,
                key=f"policy.{others[0]}",
            )
        if not isinstance(raw["file"], str):
            raise ConfigError("must be a path string", path=source, key="policy.file")
        loaded = load_policy_file(base / raw["file"])
        return attrs.evolve(loaded, project_rules=_project_rules(raw.get("project"), source))

    mode = raw.get("mode", "interactive")
    if mode not in _MODES:
        raise ConfigError(
            f"must be one of {', '.join(_MODES)} (got {mode!r})", path=source, key="policy.mode"
        )

    preset: str | None = raw.get("preset", DEFAULT_PRESETS[mode])
    if not isinstance(preset, str):
        raise ConfigError("must be a preset name or 'none'", path=source, key="policy.preset")
    preset_rules: tuple[Rule, ...] = ()
    if preset == "none":
        preset = None
    else:
        try:
            preset_rules = load_preset(preset)
        except ConfigError as exc:
            raise ConfigError(exc.problem, path=source, key="policy.preset") from None

    raw_rules = raw.get("rules", [])
    if not isinstance(raw_rules, list):
        raise ConfigError(
            "must be a list of tables ([[policy.rules]])", path=source, key="policy.rules"
        )
    rules = tuple(
        parse_rule(raw_rule, label=f"policy.rules[{i}]", source=source, key=f"policy.rules[{i}]")
        for i, raw_rule in enumerate(raw_rules)
    )
    labels = [rule.label for rule in rules]
    for label in labels:
        if labels.count(label) > 1:
            raise ConfigError(f"two rules share the id {label!r}", path=source, key="policy.rules")

    timeout = raw.get("prompt_timeout", 300.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError(
            "must be a positive number of seconds", path=source, key="policy.prompt_timeout"
        )

    ask_timeout = raw.get("ask_timeout", 86400.0)
    if (
        isinstance(ask_timeout, bool)
        or not isinstance(ask_timeout, int | float)
        or ask_timeout <= 0
    ):
        raise ConfigError(
            "must be a positive number of seconds", path=source, key="policy.ask_timeout"
        )

    return PolicyConfig(
        mode=mode,
        preset=preset,
        rules=rules,
        preset_rules=preset_rules,
        project_rules=_project_rules(raw.get("project"), source),
        audit=_parse_audit(raw.get("audit"), source=source, base=base),
        audit_database=_parse_audit_database(raw.get("audit_database"), source=source),
        prompt_timeout=float(timeout),
        ask_timeout=float(ask_timeout),
        approvals=_parse_approvals(raw.get("approvals"), mode=mode, source=source, base=base),
        source=source,
    )


def _project_rules(raw: Any, source: str) -> tuple[Rule, ...]:
    """``project = {file = "...", rules = [...]}``: a trusted project's rules, which may
    only deny or ask (the config loader puts them here; the project file cannot)."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping) or not isinstance(raw.get("rules", []), list):
        raise ConfigError("must be {file = ..., rules = [...]}", path=source, key="policy.project")
    where = str(raw.get("file", source))
    rules = tuple(
        parse_rule(r, label=f"project:policy.rules[{i}]", source=where, key=f"policy.rules[{i}]")
        for i, r in enumerate(raw.get("rules", []))
    )
    for i, rule in enumerate(rules):
        if rule.verdict is Verdict.ALLOW:
            raise ConfigError(
                "a project file may add rules that deny or ask, never one that allows",
                path=where,
                key=f"policy.rules[{i}].decision",
            )
    return rules


def _parse_approvals(raw: Any, *, mode: Mode, source: str, base: Path) -> Path | None:
    if raw is None:
        # A person at a terminal expects "always" to last; an application or a headless
        # run decides with its own rules and writes nothing to the user's state unasked.
        return default_approvals_path() if mode == "interactive" else None
    if raw is True:
        return default_approvals_path()
    if raw is False:
        return None
    if isinstance(raw, str) and raw:
        return base / Path(raw).expanduser()
    raise ConfigError("must be true, false or a file path", path=source, key="policy.approvals")


def _parse_audit_database(raw: Any, *, source: str) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.startswith(("postgresql://", "postgres://")):
        # Never echo the value: it may hold a password.
        raise ConfigError(
            "must be a PostgreSQL URI, postgresql://USER:PASSWORD@HOST/DB",
            path=source,
            key="policy.audit_database",
        )
    return raw


def _parse_audit(raw: Any, *, source: str, base: Path) -> AuditConfig | None:
    if raw is None or raw is True:
        return AuditConfig(path=default_audit_path())
    if raw is False:
        return None
    if isinstance(raw, str):
        raw = {"path": raw}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            "must be false, true, a path or a table {path, fsync, fold}",
            path=source,
            key="policy.audit",
        )
    unknown = sorted(set(raw) - {"path", "fsync", "fold"})
    if unknown:
        raise ConfigError.unknown_key(
            f"policy.audit.{unknown[0]}", unknown[0], ("path", "fsync", "fold"), path=source
        )
    path = raw.get("path")
    if not isinstance(path, str) or not path:
        raise ConfigError("must be a file path", path=source, key="policy.audit.path")
    fsync = raw.get("fsync", False)
    if not isinstance(fsync, bool):
        raise ConfigError("must be true or false", path=source, key="policy.audit.fsync")
    fold = raw.get("fold", DEFAULT_FOLD_WINDOW)
    if isinstance(fold, bool) or not isinstance(fold, int | float) or not 0 <= fold < math.inf:
        raise ConfigError(
            "must be a number of seconds, 0 or more", path=source, key="policy.audit.fold"
        )
    return AuditConfig(path=base / Path(path).expanduser(), fsync=fsync, fold=float(fold))


def load_policy_file(path: str | os.PathLike[str]) -> PolicyConfig:
    """Read a policy kept in its own TOML file.

    The file holds either a ``[policy]`` table or the same keys at top level; relative
    paths inside it are relative to the file.

    Raises:
        ConfigError: unreadable file, bad TOML, or an invalid policy.
    """
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", path=str(file)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", path=str(file)) from None
    table = data.get("policy", data)
    if "file" in table:
        raise ConfigError(
            "a policy file cannot point to another", path=str(file), key="policy.file"
        )
    return parse_policy(table, source=str(file), base_dir=file.parent)
