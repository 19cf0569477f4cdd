"""Typed values out of a parsed config table, each error naming the file and full key.

The loader (:mod:`agenthost.config.loader`) walks a file's tables; everything here reads
one value (a table, a string with ``${VAR}`` expansion, a bool, a number, a list, a map,
a path, the timeouts, restart, agent and gateway tables) and says precisely which key is
wrong and why.
Kept apart from the loader so each file shape's walk reads as the shape it is.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import attrs

from agenthost.config.expand import ExpandContext, expand
from agenthost.config.model import AgentSettings, RestartPolicy, ServerConfig, Timeouts, Workspace
from agenthost.errors import ConfigError

Dialect = Literal["toml", "mcpServers", "vscode"]

log = logging.getLogger("agenthost.config")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")
_GATEWAY_KEYS = ("sampling",)
_GATEWAY_SAMPLING = ("auto", "providers", "client")

__all__ = [
    "Dialect",
    "LoadContext",
    "check_keys",
    "check_workspace_refs",
    "ignore_extra",
    "join_key",
    "read_agent",
    "read_bool",
    "read_gateway",
    "read_int",
    "read_path",
    "read_restart",
    "read_str",
    "read_str_list",
    "read_str_map",
    "read_table",
    "read_timeouts",
    "read_workspaces",
    "type_name",
    "validating",
    "wrong_type",
]


@attrs.frozen(kw_only=True)
class LoadContext:
    """What every check in one load needs."""

    source: str | None
    base_dir: Path
    dialect: Dialect
    expand: ExpandContext
    #: Policy rules the file implies (another host's ``autoApprove``, ``trust``), in order.
    rules: list[dict[str, Any]] = attrs.field(factory=list)
    #: The only bytes this load may read, by resolved path (a trusted project's: what was
    #: digested), or None to read the files.
    contents: Mapping[str, bytes] | None = None

    def error(self, problem: str, key: str | None) -> ConfigError:
        return ConfigError(problem, path=self.source, key=key)


def join_key(prefix: str, part: str | int) -> str:
    """``servers`` + ``my.server`` -> ``servers."my.server"``; ints become ``[i]``."""
    if isinstance(part, int):
        return f"{prefix}[{part}]"
    seg = part if _BARE_KEY.match(part) else json.dumps(part)
    return f"{prefix}.{seg}" if prefix else seg


def type_name(value: object, ctx: LoadContext) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float" if ctx.dialect == "toml" else "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "a table" if ctx.dialect == "toml" else "an object"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def _table_word(ctx: LoadContext) -> str:
    return "a table" if ctx.dialect == "toml" else "an object"


def wrong_type(ctx: LoadContext, key: str, expected: str, value: object) -> ConfigError:
    return ctx.error(f"expected {expected}, got {type_name(value, ctx)}", key)


def check_keys(
    table: Mapping[str, Any], allowed: tuple[str, ...], ctx: LoadContext, key: str
) -> None:
    """Unknown keys are errors in our format (a typo must not silently drop a setting)."""
    for k in table:
        if k not in allowed:
            raise ConfigError.unknown_key(join_key(key, k), k, allowed, path=ctx.source)


def ignore_extra(table: Mapping[str, Any], known: tuple[str, ...], key: str) -> None:
    """Editors' files carry keys for the editor's own features; we note and skip them."""
    for k in table:
        if k not in known:
            log.debug("ignoring key %s (not used by agenthost)", join_key(key, k))


@contextmanager
def validating(ctx: LoadContext, prefix: str) -> Iterator[None]:
    """Re-raise an attrs validator's ConfigError with the file and the full key path."""
    try:
        yield
    except ConfigError as exc:
        key = prefix
        if exc.key:
            key = f"{prefix}.{exc.key}" if prefix else exc.key
        raise ctx.error(exc.problem, key) from None


# -- typed getters (the value is present; they check its type and expand strings) --


def read_table(value: object, ctx: LoadContext, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise wrong_type(ctx, key, _table_word(ctx), value)
    return value


def read_str(value: object, ctx: LoadContext, key: str, *, expand_vars: bool = True) -> str:
    if not isinstance(value, str):
        raise wrong_type(ctx, key, "a string", value)
    return expand(value, ctx.expand, key) if expand_vars else value


def read_bool(value: object, ctx: LoadContext, key: str) -> bool:
    if not isinstance(value, bool):
        raise wrong_type(ctx, key, "a boolean (true or false)", value)
    return value


def read_int(value: object, ctx: LoadContext, key: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise wrong_type(ctx, key, "an integer", value)
    return value


def _number(value: object, ctx: LoadContext, key: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise wrong_type(ctx, key, "a number", value)
    return float(value)


def read_str_list(
    value: object, ctx: LoadContext, key: str, *, expand_vars: bool = True
) -> list[str]:
    if not isinstance(value, list):
        raise wrong_type(ctx, key, "an array of strings", value)
    return [
        read_str(v, ctx, join_key(key, i), expand_vars=expand_vars) for i, v in enumerate(value)
    ]


def read_str_map(
    value: object, ctx: LoadContext, key: str, *, numbers_ok: bool = False
) -> dict[str, str]:
    """A table of strings (values expanded). Editors' JSON also allows numbers as values."""
    table = read_table(value, ctx, key)
    out: dict[str, str] = {}
    for k, v in table.items():
        sub = join_key(key, k)
        if numbers_ok and isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = str(v)
        elif isinstance(v, str):
            out[k] = expand(v, ctx.expand, sub)
        else:
            raise wrong_type(ctx, sub, "a string", v)
    return out


def read_path(value: object, ctx: LoadContext, key: str) -> str:
    """Expanded, ``~``-expanded, absolute (relative to the config's base directory)."""
    raw = os.path.expanduser(read_str(value, ctx, key))
    return os.path.normpath(raw if os.path.isabs(raw) else os.path.join(ctx.base_dir, raw))


# -- sections --


def read_timeouts(value: object, base: Timeouts, ctx: LoadContext, key: str) -> Timeouts:
    table = read_table(value, ctx, key)
    names = tuple(f.name for f in attrs.fields(Timeouts))
    check_keys(table, names, ctx, key)
    changes = {k: _number(v, ctx, join_key(key, k)) for k, v in table.items()}
    with validating(ctx, key):
        return attrs.evolve(base, **changes)


def read_restart(value: object, base: RestartPolicy, ctx: LoadContext, key: str) -> RestartPolicy:
    table = read_table(value, ctx, key)
    names = tuple(f.name for f in attrs.fields(RestartPolicy))
    check_keys(table, names, ctx, key)
    changes: dict[str, Any] = {}
    for k, v in table.items():
        sub = join_key(key, k)
        if k == "enabled":
            changes[k] = read_bool(v, ctx, sub)
        elif k == "max_restarts":
            changes[k] = read_int(v, ctx, sub)
        else:
            changes[k] = _number(v, ctx, sub)
    with validating(ctx, key):
        return attrs.evolve(base, **changes)


def read_workspaces(value: object, ctx: LoadContext) -> list[Workspace]:
    if not isinstance(value, list):
        raise wrong_type(ctx, "workspaces", "an array of tables ([[workspaces]])", value)
    result: list[Workspace] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(value):
        key = join_key("workspaces", i)
        name: str | None = None
        if isinstance(entry, str):
            raw = entry
            path_key = key
        else:
            table = read_table(entry, ctx, key)
            check_keys(table, ("path", "name"), ctx, key)
            path_key = join_key(key, "path")
            if "path" not in table:
                raise ctx.error("missing required key 'path'", path_key)
            raw = table["path"]
            if "name" in table:
                name = read_str(table["name"], ctx, join_key(key, "name"), expand_vars=False)
        expanded = read_str(raw, ctx, path_key)
        try:
            ws = Workspace.from_path(expanded, name=name, base_dir=ctx.base_dir)
        except ConfigError as exc:
            problem = exc.problem
            if expanded != raw:  # show what the file says, not what the environment held
                problem = problem.replace(repr(expanded), f"{raw!r} (as expanded)")
            where = join_key(key, "name") if exc.key == "name" else path_key
            raise ctx.error(problem, where) from None
        if ws.name in seen:
            raise ctx.error(
                f"duplicate workspace name {ws.name!r} (also workspaces[{seen[ws.name]}]);"
                " give one a different 'name'",
                join_key(key, "name"),
            )
        seen[ws.name] = i
        result.append(ws)
    return result


def check_workspace_refs(
    servers: list[ServerConfig], workspaces: list[Workspace], ctx: LoadContext
) -> None:
    names = [w.name for w in workspaces]
    for s in servers:
        for j, ref in enumerate(s.workspaces or ()):
            if ref not in names:
                close = difflib.get_close_matches(ref, names, n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ctx.error(
                    f"unknown workspace {ref!r}{hint}; configured: {', '.join(names) or 'none'}",
                    join_key(join_key(join_key("servers", s.name), "workspaces"), j),
                )


def read_agent(value: object, ctx: LoadContext) -> AgentSettings:
    """``[agent]``: tool search and the result limit (``AgentSettings`` checks values)."""
    table = read_table(value, ctx, "agent")
    check_keys(table, ("tool_search", "max_result_tokens"), ctx, "agent")
    with validating(ctx, "agent"):
        return AgentSettings(**table)


def read_gateway(value: object, ctx: LoadContext) -> Mapping[str, Any]:
    """``[gateway]``: how ``agenthost serve`` answers its upstreams' sampling requests."""
    table = read_table(value, ctx, "gateway")
    check_keys(table, _GATEWAY_KEYS, ctx, "gateway")
    sampling = table.get("sampling", "auto")
    if sampling not in _GATEWAY_SAMPLING:
        raise ctx.error(
            f"must be one of {', '.join(_GATEWAY_SAMPLING)} (got {str(sampling)[:40]!r})",
            "gateway.sampling",
        )
    return {"sampling": sampling}
