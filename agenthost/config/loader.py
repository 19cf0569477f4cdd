"""Reading config files into :class:`~agenthost.config.HostConfig` (the formats' parsers).

Every format is walked by hand rather than through a schema library so that each error
can name the file, the exact key path in *that file's* spelling (``mcpServers.x.env.Y``
for an editor's JSON, ``servers.x.env_file`` for TOML), what was expected and what was
found. Value checks (ranges, names, transport consistency) live in the attrs validators of
:mod:`agenthost.config`; errors from them are re-raised here with the file and full key.
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from agenthost.auth.settings import KEYS as OAUTH_KEYS
from agenthost.auth.settings import OAuthSettings, parse_oauth_table
from agenthost.config.expand import ExpandContext, InputSpec, read_env_file
from agenthost.config.jsonc import TOO_DEEP, parse_json
from agenthost.config.model import (
    TRANSPORTS,
    AgentSettings,
    HostConfig,
    RestartPolicy,
    ServerConfig,
    Timeouts,
    TransportKind,
    Workspace,
)
from agenthost.config.values import (
    Dialect,
    LoadContext,
    check_keys,
    check_workspace_refs,
    ignore_extra,
    join_key,
    read_agent,
    read_bool,
    read_gateway,
    read_int,
    read_path,
    read_restart,
    read_str,
    read_str_list,
    read_str_map,
    read_table,
    read_timeouts,
    read_workspaces,
    type_name,
    wrong_type,
)
from agenthost.errors import ConfigError
from agenthost.redaction import add_secrets_of_url

__all__ = ["config_from_mapping", "load_config"]

log = logging.getLogger("agenthost.config")


#: A file nested deep enough to exhaust the parser's stack is no config (issue 22).

_TOP_KEYS = (
    "import", "servers", "workspaces", "timeouts", "restart", "providers", "policy",
    "inherit_env", "agent", "gateway", "temporal",
)  # fmt: skip
#: ``[gateway]`` keys (``agenthost serve``) and the values ``sampling`` takes.
#: agenthost's host-level sections, also read from an editor's JSON file when present
#: there (a person who put ``policy`` in one means it; it is never silently dropped).
_HOST_KEYS = ("workspaces", "timeouts", "restart", "providers", "policy", "inherit_env", "agent")
#: Server keys only agenthost.toml has (host settings on top of how to start a server).
_HOST_SERVER_KEYS = (
    "timeouts", "restart", "max_message_size", "required", "trusted", "enabled",
    "workspaces", "include_tools", "exclude_tools", "inherit_env", "protocol",
    "max_input_rounds", "oauth", "client_tasks",
)  # fmt: skip
_TOML_SERVER_KEYS = (
    "transport", "type", "command", "args", "cwd", "env", "env_file", "url", "headers",
    *_HOST_SERVER_KEYS,
)  # fmt: skip
_JSON_SERVER_KEYS = (
    "type",
    "command",
    "args",
    "cwd",
    "env",
    "envFile",
    "url",
    "headers",
    "disabled",
    # Other hosts' spellings of our settings, mapped (see _foreign_keys):
    "autoApprove",
    "alwaysAllow",
    "trust",
    "includeTools",
    "excludeTools",
)
#: Keys other hosts write that have no agenthost equivalent, and why they are not used
#: (warned about at the default log level: a setting the user relies on must not vanish).
_UNMAPPED_KEYS = {
    "timeout": "its unit differs between hosts (Gemini CLI: milliseconds, Cline: seconds);"
    " set [servers.NAME.timeouts] request = SECONDS in an agenthost.toml that imports this file",
}
#: Editor bookkeeping with no effect on how a server runs: skipped quietly.
_EDITOR_ONLY_KEYS = ("description", "dev", "gallery", "version", "name", "icon", "notes")
#: Editor spellings of a transport; the editors' "http" probes too (VS Code falls back to
#: SSE itself), so it maps to our probing "http".
_JSON_TYPES: dict[str, TransportKind] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "streamable-http",
    "streamableHttp": "streamable-http",
    "sse": "sse",
    "ws": "websocket",
    "websocket": "websocket",
}


_TOML_TYPES: dict[str, TransportKind] = {t: t for t in TRANSPORTS}  # type: ignore[misc]


def _transport(
    table: Mapping[str, Any], url: str | None, ctx: LoadContext, key: str
) -> TransportKind:
    """The explicit transport, or the one the keys imply (``url`` is already expanded)."""
    tkey = "type"
    if ctx.dialect == "toml":
        if "transport" in table and "type" in table:
            raise ctx.error(
                "'transport' and 'type' are the same setting; keep one", join_key(key, "type")
            )
        tkey = "transport" if "transport" in table else "type"
    has_cmd, has_url = "command" in table, "url" in table
    if has_cmd and has_url:
        raise ctx.error(
            "has both 'command' (a local stdio server) and 'url' (a remote server); keep one",
            key,
        )
    if tkey in table:
        raw = read_str(table[tkey], ctx, join_key(key, tkey), expand_vars=False)
        valid = _TOML_TYPES if ctx.dialect == "toml" else _JSON_TYPES
        if raw not in valid:
            raise ctx.error(
                f"unknown transport {raw!r}; valid: {', '.join(valid)}", join_key(key, tkey)
            )
        return valid[raw]
    if has_cmd:
        return "stdio"
    if url is not None:
        return "websocket" if url.lower().startswith(("ws://", "wss://")) else "http"
    raise ctx.error("needs 'command' (a local stdio server) or 'url' (a remote server)", key)


_GETTERS: dict[str, Callable[[object, LoadContext, str], Any]] = {
    "command": read_str,
    "args": read_str_list,
    "cwd": read_path,
    "url": read_str,
    "headers": read_str_map,
}


def _server(
    name: str,
    value: object,
    ctx: LoadContext,
    key: str,
    timeouts: Timeouts,
    restart: RestartPolicy,
    inherit_env: list[str] | None = None,
) -> ServerConfig:
    table = read_table(value, ctx, key)
    toml = ctx.dialect == "toml"
    if toml:
        check_keys(table, _TOML_SERVER_KEYS, ctx, key)
    else:
        _foreign_server_keys(table, ctx, key)
    fields: dict[str, Any] = {"name": name}
    for field, get in _GETTERS.items():
        if field in table:
            fields[field] = get(table[field], ctx, join_key(key, field))
    fields["transport"] = _transport(table, fields.get("url"), ctx, key)
    env: dict[str, str] = {}
    env_file_key = "env_file" if toml else "envFile"
    if env_file_key in table:
        sub = join_key(key, env_file_key)
        env_path = Path(read_path(table[env_file_key], ctx, sub))
        raw = table[env_file_key]
        shown = f"{raw!r} (as expanded)" if isinstance(raw, str) and "$" in raw else None
        env.update(
            read_env_file(
                env_path, source=ctx.source, key=sub, shown_as=shown, contents=ctx.contents
            )
        )
    if "env" in table:
        env.update(read_str_map(table["env"], ctx, join_key(key, "env"), numbers_ok=not toml))
    if env:
        fields["env"] = env
    fields["timeouts"], fields["restart"] = timeouts, restart
    if inherit_env is not None:
        fields["inherit_env"] = inherit_env
    if not toml:
        fields.update(_mapped_foreign_keys(name, table, ctx, key))
    fields.update(_host_server_settings(table, ctx, key, timeouts, restart))
    return _build_server(fields, ctx, key)


def _build_server(fields: Mapping[str, Any], ctx: LoadContext, key: str) -> ServerConfig:
    try:
        return ServerConfig(**fields)
    except ConfigError as exc:
        # The name is the table's key, not a key inside it.
        sub = key if exc.key in (None, "name") else f"{key}.{exc.key}"
        raise ctx.error(exc.problem, sub) from None


def _oauth(value: object, ctx: LoadContext, key: str) -> OAuthSettings:
    """``[servers.NAME.oauth]``: ``${VAR}`` expanded in strings (secrets come from there)."""
    if isinstance(value, Mapping):
        check_keys(value, OAUTH_KEYS, ctx, key)
        value = {
            k: read_str(v, ctx, join_key(key, k)) if isinstance(v, str) else v
            for k, v in value.items()
        }
    try:
        return parse_oauth_table(value, base_dir=ctx.base_dir)
    except ConfigError as exc:
        raise ctx.error(exc.problem, key if exc.key is None else join_key(key, exc.key)) from None


def _host_server_settings(
    table: Mapping[str, Any], ctx: LoadContext, key: str, timeouts: Timeouts, restart: RestartPolicy
) -> dict[str, Any]:
    """The agenthost-only server keys present in ``table`` (only TOML tables have them)."""
    if ctx.dialect != "toml":
        return {}
    fields: dict[str, Any] = {}
    if "timeouts" in table:
        fields["timeouts"] = read_timeouts(
            table["timeouts"], timeouts, ctx, join_key(key, "timeouts")
        )
    if "restart" in table:
        fields["restart"] = read_restart(table["restart"], restart, ctx, join_key(key, "restart"))
    for flag in ("required", "trusted", "enabled", "client_tasks"):
        if flag in table:
            fields[flag] = read_bool(table[flag], ctx, join_key(key, flag))
    for number in ("max_message_size", "max_input_rounds"):
        if number in table:
            fields[number] = read_int(table[number], ctx, join_key(key, number))
    if "protocol" in table:
        fields["protocol"] = read_str(
            table["protocol"], ctx, join_key(key, "protocol"), expand_vars=False
        )
    for lst in ("workspaces", "include_tools", "exclude_tools", "inherit_env"):
        if lst in table:
            fields[lst] = read_str_list(table[lst], ctx, join_key(key, lst), expand_vars=False)
    if "oauth" in table:
        fields["oauth"] = _oauth(table["oauth"], ctx, join_key(key, "oauth"))
    return fields


def _foreign_server_keys(table: Mapping[str, Any], ctx: LoadContext, key: str) -> None:
    """Warn about another host's server keys that agenthost cannot honour."""
    for k in table:
        if k in _JSON_SERVER_KEYS:
            continue
        sub = join_key(key, k)
        if k in _UNMAPPED_KEYS:
            log.warning("%s: %s is not used: %s", ctx.source, sub, _UNMAPPED_KEYS[k])
        elif k in _HOST_SERVER_KEYS:
            log.warning(
                "%s: %s is not used in an editor's file: set it in an agenthost.toml that"
                " imports this file (import = [...], then [servers.NAME] %s = ...)",
                ctx.source,
                sub,
                k,
            )
        elif k in _EDITOR_ONLY_KEYS:
            log.debug("ignoring key %s (editor bookkeeping)", sub)
        else:
            log.warning(
                "%s: %s is not an MCP server setting agenthost knows; ignored", ctx.source, sub
            )


def _glob_literal(text: str) -> str:
    """``text`` as an fnmatch pattern matching only itself."""
    return "".join(f"[{c}]" if c in "*?[]" else c for c in text)


def _mapped_foreign_keys(
    name: str, table: Mapping[str, Any], ctx: LoadContext, key: str
) -> dict[str, Any]:
    """Other hosts' per-server settings, turned into ours.

    ``disabled`` -> ``enabled = false``; Cline/Roo ``autoApprove`` / ``alwaysAllow`` (tools
    that run without asking) -> a policy rule allowing those tools of this server; Gemini
    CLI ``trust: true`` (no confirmation for any of its tools) -> ``trusted`` and a rule
    allowing all its tools; Gemini CLI ``includeTools`` / ``excludeTools`` -> ours.
    """
    fields: dict[str, Any] = {}
    if "disabled" in table:
        fields["enabled"] = not read_bool(table["disabled"], ctx, join_key(key, "disabled"))
    server = _glob_literal(name)
    for k in ("autoApprove", "alwaysAllow"):
        if k in table:
            tools = read_str_list(table[k], ctx, join_key(key, k), expand_vars=False)
            if tools:
                ctx.rules.append(
                    {
                        "kind": "tool",
                        "server": server,
                        "name": [_glob_literal(t) for t in tools],
                        "decision": "allow",
                        "reason": f"{k} in {ctx.source}",
                    }
                )
    if "trust" in table and read_bool(table["trust"], ctx, join_key(key, "trust")):
        fields["trusted"] = True
        ctx.rules.append(
            {
                "kind": "tool",
                "server": server,
                "decision": "allow",
                "reason": f"trust = true in {ctx.source}",
            }
        )
    for theirs, ours in (("includeTools", "include_tools"), ("excludeTools", "exclude_tools")):
        if theirs in table:
            fields[ours] = read_str_list(
                table[theirs], ctx, join_key(key, theirs), expand_vars=False
            )
    return fields


def _servers(
    value: object,
    ctx: LoadContext,
    key: str,
    timeouts: Timeouts,
    restart: RestartPolicy,
    inherit_env: list[str] | None = None,
    imported: Mapping[str, ServerConfig] | None = None,
) -> list[ServerConfig]:
    """The servers of ``value``; a table naming an ``imported`` server adds to it."""
    table = read_table(value, ctx, key)
    result: list[ServerConfig] = []
    for name, v in table.items():
        sub = join_key(key, name)
        if imported is not None and name in imported:
            result.append(_overlay(imported[name], v, ctx, sub, timeouts, restart))
        else:
            result.append(_server(name, v, ctx, sub, timeouts, restart, inherit_env))
    return result


def _overlay(
    base: ServerConfig,
    value: object,
    ctx: LoadContext,
    key: str,
    timeouts: Timeouts,
    restart: RestartPolicy,
) -> ServerConfig:
    """``[servers.NAME]`` over a server imported from another file: host settings only.

    How to start the server stays in the file it came from (one place to edit it).
    """
    table = read_table(value, ctx, key)
    check_keys(table, _HOST_SERVER_KEYS, ctx, key)
    changes = _host_server_settings(table, ctx, key, base.timeouts, base.restart)
    fields = {f.name: getattr(base, f.name) for f in attrs.fields(ServerConfig)}
    fields.update(changes)
    return _build_server(fields, ctx, key)


def _from_toml_data(
    data: Mapping[str, Any],
    *,
    source: str | None,
    env: Mapping[str, str],
    base_dir: Path,
    default_workspace: Path | None = None,
    contents: Mapping[str, bytes] | None = None,
) -> HostConfig:
    """The ``agenthost.toml`` shape (see ``docs/config.md``) into a HostConfig."""
    ctx = LoadContext(
        source=source,
        base_dir=base_dir,
        dialect="toml",
        expand=ExpandContext(env=env, source=source),
        contents=contents,
    )
    read_table(data, ctx, "")
    check_keys(data, _TOP_KEYS, ctx, "")
    host = _host_sections(data, ctx, default_workspace)
    imported: dict[str, ServerConfig] = {}
    if "import" in data:
        imported = _imports(data["import"], ctx, host.timeouts, host.restart, host.inherit_env)
    own = _servers(
        data.get("servers", {}),
        ctx,
        "servers",
        host.timeouts,
        host.restart,
        host.inherit_env,
        imported,
    )
    mine = {s.name: s for s in own}
    servers = [mine.pop(s.name, s) for s in imported.values()] + list(mine.values())
    check_workspace_refs(servers, host.workspaces, ctx)
    return host.config(servers, ctx)


@attrs.frozen(kw_only=True)
class _HostSections:
    """The host-level sections of one file, before its servers are read (they use them)."""

    timeouts: Timeouts
    restart: RestartPolicy
    inherit_env: list[str] | None
    workspaces: list[Workspace]
    providers: Mapping[str, Any]
    policy: Mapping[str, Any]
    agent: AgentSettings
    gateway: Mapping[str, Any] = attrs.field(factory=dict)
    temporal: Mapping[str, Any] = attrs.field(factory=dict)

    def config(self, servers: list[ServerConfig], ctx: LoadContext) -> HostConfig:
        """The HostConfig of the file: one place for both file shapes."""
        return HostConfig(
            servers=servers,
            workspaces=self.workspaces,
            timeouts=self.timeouts,
            restart=self.restart,
            agent=self.agent,
            providers=self.providers,
            policy=_with_rules(self.policy, ctx),
            gateway=self.gateway,
            temporal=self.temporal,
            source=ctx.source,
        )


def _host_sections(
    data: Mapping[str, Any], ctx: LoadContext, default_workspace: Path | None
) -> _HostSections:
    """The host-level sections, the same in agenthost.toml and in an editor's JSON file."""
    timeouts = read_timeouts(data.get("timeouts", {}), Timeouts(), ctx, "timeouts")
    restart = read_restart(data.get("restart", {}), RestartPolicy(), ctx, "restart")
    inherit_env = None
    if "inherit_env" in data:
        inherit_env = read_str_list(data["inherit_env"], ctx, "inherit_env", expand_vars=False)
    if "workspaces" in data:
        workspaces = read_workspaces(data["workspaces"], ctx)
    elif default_workspace is not None:
        # None configured: the project folder, as Claude Code, VS Code and Cursor expose
        # it (``workspaces = []`` exposes nothing).
        workspaces = [Workspace.from_path(default_workspace)]
    else:
        workspaces = []
    providers = read_table(data.get("providers", {}), ctx, "providers")
    policy = read_table(data.get("policy", {}), ctx, "policy")
    if isinstance(policy.get("audit_database"), str):
        # Its password is a secret from the moment it is read, before anything shows it.
        add_secrets_of_url(policy["audit_database"])
    agent = read_agent(data.get("agent", {}), ctx)
    gateway = read_gateway(data.get("gateway", {}), ctx)
    temporal = read_table(data.get("temporal", {}), ctx, "temporal")
    return _HostSections(
        timeouts=timeouts,
        restart=restart,
        inherit_env=inherit_env,
        workspaces=workspaces,
        providers=providers,
        policy=policy,
        agent=agent,
        gateway=gateway,
        temporal=temporal,
    )


def _with_rules(policy: Mapping[str, Any], ctx: LoadContext) -> Mapping[str, Any]:
    """``policy`` with the rules the servers' files imply after the user's own."""
    if not ctx.rules:
        return policy
    if "file" in policy:
        log.warning(
            "%s: the policy lives in its own file, so autoApprove / trust settings of the"
            " servers are not applied; add rules for them there",
            ctx.source,
        )
        return policy
    rules = policy.get("rules", [])
    if not isinstance(rules, list):
        return policy  # the policy parser reports it, naming the key
    return {**policy, "rules": [*rules, *ctx.rules]}


def _imports(
    value: object,
    ctx: LoadContext,
    timeouts: Timeouts,
    restart: RestartPolicy,
    inherit_env: list[str] | None,
) -> dict[str, ServerConfig]:
    """``import = ["./.mcp.json", ...]``: the servers of other hosts' files, in order.

    Only their servers are taken (and the policy rules their ``autoApprove`` / ``trust``
    imply); host settings come from this file, which may add to any imported server.
    """
    paths = read_str_list(value, ctx, "import")
    servers: dict[str, ServerConfig] = {}
    origin: dict[str, str] = {}
    for i, raw in enumerate(paths):
        key = join_key("import", i)
        path = Path(read_path(raw, ctx, key))
        implied: list[dict[str, Any]] = []
        try:
            other = _load_file(
                path, env=ctx.expand.env, rules_out=implied, imported=True, contents=ctx.contents
            )
        except ConfigError as exc:
            if exc.path == str(path):
                raise  # a problem inside that file: it names itself and its key
            raise ctx.error(exc.problem, key) from None
        for server in other.servers:
            if server.name in servers:
                raise ctx.error(
                    f"server {server.name!r} is in both {origin[server.name]} and {path};"
                    " rename one, or import only one of the files",
                    key,
                )
            changes: dict[str, Any] = {"timeouts": timeouts, "restart": restart}
            if inherit_env is not None:
                changes["inherit_env"] = inherit_env
            servers[server.name] = attrs.evolve(server, **changes)
            origin[server.name] = str(path)
        ctx.rules.extend(implied)
    return servers


def _editor_folder(path: Path) -> Path:
    """``${workspaceFolder}``: the project root for ``.vscode/`` or ``.cursor/`` files."""
    parent = path.resolve().parent
    return parent.parent if parent.name in (".vscode", ".cursor") else parent


def _inputs(value: object, ctx: LoadContext, key: str) -> dict[str, InputSpec]:
    if not isinstance(value, list):
        raise wrong_type(ctx, key, "an array of input objects", value)
    specs: dict[str, InputSpec] = {}
    for i, entry in enumerate(value):
        sub = join_key(key, i)
        table = read_table(entry, ctx, sub)
        if "id" not in table:
            raise ctx.error("missing required key 'id'", join_key(sub, "id"))
        input_id = read_str(table["id"], ctx, join_key(sub, "id"), expand_vars=False)
        if input_id in specs:
            raise ctx.error(f"duplicate input id {input_id!r}", join_key(sub, "id"))
        desc = table.get("description")
        if desc is not None:
            desc = read_str(desc, ctx, join_key(sub, "description"), expand_vars=False)
        specs[input_id] = InputSpec(id=input_id, description=desc)
    return specs


def _from_json_data(
    data: object,
    *,
    path: Path,
    env: Mapping[str, str],
    default_workspace: bool = False,
    rules_out: list[dict[str, Any]] | None = None,
    imported: bool = False,
    contents: Mapping[str, bytes] | None = None,
) -> HostConfig:
    source = str(path)
    folder = _editor_folder(path)
    probe = LoadContext(
        source=source,
        base_dir=folder,
        dialect="mcpServers",
        expand=ExpandContext(env=env, source=source),
    )
    if not isinstance(data, Mapping):
        raise probe.error(
            f"the top level must be a JSON object, not {type_name(data, probe)}", None
        )
    root: Mapping[str, Any] = data
    prefix = ""
    if "mcpServers" not in data and "servers" not in data and isinstance(data.get("mcp"), Mapping):
        root, prefix = data["mcp"], "mcp"  # a VS Code settings.json
    if "mcpServers" in root and "servers" in root:
        raise probe.error(
            "has both 'mcpServers' and 'servers'; keep the one for the tool you use",
            prefix or None,
        )
    if "mcpServers" in root:
        dialect: Dialect = "mcpServers"
        inputs: dict[str, InputSpec] = {}
        known: tuple[str, ...] = ("mcpServers",)
    elif "servers" in root:
        dialect = "vscode"
        inputs = _inputs(root.get("inputs", []), probe, join_key(prefix, "inputs"))
        known = ("servers", "inputs")
    else:
        raise probe.error(
            "no 'mcpServers' (Claude Desktop, Claude Code, Cursor) or 'servers' (VS Code) key:"
            " not an MCP server config",
            prefix or None,
        )
    ignore_extra(root, (*known, *_HOST_KEYS), prefix)
    ctx = LoadContext(
        source=source,
        base_dir=folder,
        dialect=dialect,
        expand=ExpandContext.for_editor(
            env=env, source=source, workspace_folder=folder, inputs=inputs
        ),
        contents=contents,
    )
    host_keys = [k for k in _HOST_KEYS if k in root]
    if imported and host_keys:
        log.warning(
            "%s: %s not used: an imported file gives only its servers; set host settings"
            " in the agenthost.toml that imports it",
            source,
            ", ".join(join_key(prefix, k) for k in host_keys),
        )
        root = {k: v for k, v in root.items() if k not in _HOST_KEYS}
    # The default root is where the user runs the command, never the file's folder: for
    # Claude Desktop's file that folder holds every server's secrets (issue 22).
    host = _host_sections(root, ctx, Path.cwd() if default_workspace else None)
    servers_key = join_key(prefix, known[0])
    servers = _servers(
        root[known[0]], ctx, servers_key, host.timeouts, host.restart, host.inherit_env
    )
    if rules_out is not None:
        rules_out.extend(ctx.rules)
    return host.config(servers, ctx)


def _load_file(
    path: Path,
    *,
    env: Mapping[str, str],
    default_workspace: bool = False,
    rules_out: list[dict[str, Any]] | None = None,
    imported: bool = False,
    contents: Mapping[str, bytes] | None = None,
) -> HostConfig:
    """Read ``path`` and parse it in the format its name or content says.

    Args:
        default_workspace: with no ``workspaces`` key, expose the current directory,
            whatever the file and wherever it is, as the CLI does; the library default
            is no workspace at all.
        rules_out: receives the policy rules the file's servers imply (``autoApprove``).
        imported: the file is read for its servers by another file's ``import``.
        contents: read the file (and its imports) from these bytes, by resolved path,
            never from the disk; a file not among them is refused.
    """
    source = str(path)
    try:
        if contents is None:
            text = path.read_text(encoding="utf-8")
        elif str(path.resolve()) in contents:
            text = contents[str(path.resolve())].decode("utf-8")
        else:
            raise ConfigError(
                "is not one of the files that were read and trusted; not read", path=source
            )
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror or exc}", path=source) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"cannot read config file: not UTF-8 ({exc.reason} at byte {exc.start})", path=source
        ) from None
    suffix = path.suffix.lower()
    is_json = suffix in (".json", ".jsonc") or (
        suffix != ".toml" and text.lstrip("\ufeff \t\r\n").startswith("{")
    )
    if is_json:
        return _from_json_data(
            parse_json(text.lstrip("\ufeff"), source),
            path=path,
            env=env,
            default_workspace=default_workspace,
            rules_out=rules_out,
            imported=imported,
            contents=contents,
        )
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise ConfigError(TOO_DEEP, path=source) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", path=source) from None
    if imported:
        raise ConfigError(
            "only editors' JSON files can be imported (their servers); an agenthost.toml"
            " cannot import another one",
            path=source,
        )
    return _from_toml_data(
        data,
        source=source,
        env=env,
        base_dir=path.resolve().parent,
        default_workspace=Path.cwd() if default_workspace else None,
        contents=contents,
    )


def load_config(
    path: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    default_workspace: bool = False,
    contents: Mapping[str, bytes] | None = None,
) -> HostConfig:
    """Load a config file in any supported format (see :mod:`agenthost.config.model`).

    A function here rather than a ``HostConfig`` classmethod: the loader builds the model's
    classes, so a method on the model that called back into the loader was an import circle.

    Args:
        path: the file. ``*.toml`` is agenthost's format; ``*.json`` / ``*.jsonc`` is an
            editor's (``mcpServers`` or VS Code ``servers``); otherwise the content
            decides (``{`` first means JSON).
        env: variables for ``${VAR}`` expansion and VS Code inputs; ``os.environ`` by
            default.
        default_workspace: when the file configures no ``workspaces``, expose the
            current directory as the CLI does, whichever file was loaded: never the
            folder of the file itself (Claude Desktop's folder holds every server's
            secrets). Off by default: a library caller decides what servers see.
        contents: the bytes of the file and of every file it imports, by resolved path
            (:attr:`agenthost.config.trust.ProjectFile.contents`): the load reads these
            and nothing else, so it loads exactly what was digested and trusted.

    Raises:
        ConfigError: any problem, naming the file, the key path and the problem.
    """
    return _load_file(
        Path(path),
        env=os.environ if env is None else env,
        default_workspace=default_workspace,
        contents=contents,
    )


def config_from_mapping(
    data: Mapping[str, Any],
    *,
    source: str | None = None,
    env: Mapping[str, str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
) -> HostConfig:
    """Build from a mapping shaped like ``agenthost.toml`` (as ``tomllib`` returns it).

    Args:
        data: the TOML-shaped mapping.
        source: named in error messages; also the default ``base_dir`` (its directory).
        env: variables for ``${VAR}`` expansion; ``os.environ`` by default.
        base_dir: where relative ``cwd``, ``env_file`` and workspace paths resolve;
            default: ``source``'s directory, else the current directory.

    Raises:
        ConfigError: as for :func:`load_config`.
    """
    if base_dir is not None:
        base = Path(base_dir)
    elif source:
        base = Path(source).parent
    else:
        base = Path.cwd()
    return _from_toml_data(
        data, source=source, env=os.environ if env is None else env, base_dir=base
    )
