"""``agenthost schema``: a JSON Schema for agenthost.toml, for editors.

Editors that read TOML with a JSON Schema (Taplo / "Even Better TOML", JetBrains) then
complete keys and flag misspelt ones as you type. The schema is built from the same key
lists the config loader checks (top-level sections, server keys, OAuth, timeouts, restart,
providers, policy, rules), so it cannot drift from what the loader accepts; a section the
schema does not detail is allowed as any table, never refused.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from agenthost.cli.common import add_command
from agenthost.cli.exit import EXIT_OK
from agenthost.cli.render import Console

__all__ = ["add_parser", "config_schema", "run"]

_STRINGS = {"type": "array", "items": {"type": "string"}}
_SECONDS = {"type": "number", "minimum": 0}


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``schema`` on the CLI's subparsers."""
    add_command(
        sub,
        common,
        "schema",
        "print a JSON Schema for agenthost.toml (for editors: key completion and checks)",
    )


def _table(properties: dict[str, Any], *, closed: bool = True) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": not closed}


def _fields(cls: Any) -> dict[str, Any]:
    """An attrs class's fields as schema properties, typed by their defaults."""
    import attrs

    out: dict[str, Any] = {}
    for field in attrs.fields(cls):
        default = field.default
        if isinstance(default, bool):
            out[field.name] = {"type": "boolean"}
        elif isinstance(default, int | float):
            out[field.name] = {"type": "number"}
        else:
            out[field.name] = {}
    return out


def _server() -> dict[str, Any]:
    from agenthost.auth.settings import KEYS as OAUTH_KEYS
    from agenthost.config.loader import _TOML_SERVER_KEYS  # the loader's own list
    from agenthost.config.model import PROTOCOLS, TRANSPORTS, RestartPolicy, Timeouts

    known: dict[str, Any] = {
        "command": {"type": "string", "description": "program to run (stdio)"},
        "args": _STRINGS,
        "cwd": {"type": "string"},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "env_file": {"type": "string"},
        "url": {"type": "string", "description": "a remote server's URL"},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "transport": {"enum": list(TRANSPORTS)},
        "type": {"enum": list(TRANSPORTS)},
        "protocol": {"enum": list(PROTOCOLS)},
        "timeouts": _table(_fields(Timeouts)),
        "restart": _table(_fields(RestartPolicy)),
        "max_message_size": {"type": "integer", "minimum": 1},
        "required": {"type": "boolean"},
        "trusted": {"type": "boolean", "description": "believe its tool annotations"},
        "enabled": {"type": "boolean"},
        "client_tasks": {"type": "boolean"},
        "workspaces": _STRINGS,
        "include_tools": _STRINGS,
        "exclude_tools": _STRINGS,
        "inherit_env": {"type": ["array", "boolean"], "items": {"type": "string"}},
        "oauth": {"anyOf": [{"type": "boolean"}, _table({key: {} for key in OAUTH_KEYS})]},
    }
    return _table({key: known.get(key, {}) for key in _TOML_SERVER_KEYS})


def _providers() -> dict[str, Any]:
    from agenthost_providers.catalog import MODEL_FIELDS
    from agenthost_providers.config import _FIELDS, KINDS  # the provider parser's own key list

    known: dict[str, Any] = {
        "kind": {"enum": list(KINDS)},
        "timeout": {"type": "number", "exclusiveMinimum": 0},
        "max_retries": {"type": "integer", "minimum": 0},
        "models": {
            "type": "object",
            "additionalProperties": _table({key: {} for key in MODEL_FIELDS if key != "id"}),
        },
    }
    provider = _table({key: known.get(key, {"type": "string"}) for key in _FIELDS})
    return {
        "type": "object",
        "properties": {"default": {"type": "string"}},
        "additionalProperties": provider,
    }


def _policy() -> dict[str, Any]:
    from agenthost_policies.config import _KEYS, _MODES  # the policy parser's own lists
    from agenthost_policies.decision import ActionKind
    from agenthost_policies.rules import _ALL_KEYS

    rule = _table({key: {} for key in sorted(_ALL_KEYS)})
    rule["properties"]["kind"] = {"enum": [kind.value for kind in ActionKind]}
    rule["properties"]["decision"] = {"enum": ["allow", "deny", "ask"]}
    known: dict[str, Any] = {
        "mode": {"enum": list(_MODES)},
        "preset": {"type": "string"},
        "rules": {"type": "array", "items": rule},
        "audit": {
            "description": "false, true, a path, or {path, fsync, fold}; default: on, in"
            " $XDG_STATE_HOME/agenthost/audit.jsonl",
            "type": ["boolean", "string", "object"],
        },
        "prompt_timeout": {"type": "number", "exclusiveMinimum": 0},
        "file": {"type": "string"},
        "approvals": {"type": ["boolean", "string"]},
    }
    return _table({key: known.get(key, {}) for key in sorted(_KEYS)})


def config_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of an agenthost.toml file."""
    from agenthost.config.loader import _TOP_KEYS  # the loader's own list
    from agenthost.config.model import RestartPolicy, Timeouts

    workspace = {"anyOf": [{"type": "string"}, _table({"path": {"type": "string"}, "name": {}})]}
    sections: dict[str, Any] = {
        "import": _STRINGS,
        "servers": {"type": "object", "additionalProperties": _server()},
        "workspaces": {"type": "array", "items": workspace},
        "timeouts": _table(_fields(Timeouts)),
        "restart": _table(_fields(RestartPolicy)),
        "providers": _providers(),
        "policy": _policy(),
        "inherit_env": {"type": ["array", "boolean"], "items": {"type": "string"}},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "agenthost.toml",
        "description": "agenthost's configuration (docs/config.md)",
        **_table({key: sections.get(key, {"type": "object"}) for key in _TOP_KEYS}),
    }


async def run(args: argparse.Namespace, console: Console) -> int:
    """Print the schema on stdout."""
    print(json.dumps(config_schema(), indent=2))
    return EXIT_OK
