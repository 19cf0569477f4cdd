"""Host configuration: what servers to run, which workspaces they see, and how long to wait.

A :class:`HostConfig` comes from a file (:func:`agenthost.config.load_config`), from a
TOML-shaped mapping (:func:`agenthost.config.config_from_mapping`), or is built in code from
the attrs classes below; all three go through the same validators, so an invalid config
cannot be built at all. The loaders live in :mod:`agenthost.config.loader`, which builds
these classes; this module imports nothing from it, so the model has no circle.

Formats :func:`~agenthost.config.load_config` reads (chosen by name, then by content):

* ``agenthost.toml`` (any ``*.toml``): the full format, documented in ``docs/config.md``.
* ``{"mcpServers": {...}}`` JSON: Claude Desktop's ``claude_desktop_config.json``, Claude
  Code's ``.mcp.json``, Cursor's ``.cursor/mcp.json``. Unknown per-server keys those tools
  carry (``autoApprove``, ``alwaysAllow``, ...) are ignored with a debug log; ``disabled``
  maps to ``enabled = false``.
* ``{"servers": {...}, "inputs": [...]}`` JSON: VS Code's ``mcp.json`` (also the
  ``"mcp"`` object of a VS Code ``settings.json``). ``${input:id}`` is answered by the
  environment variable ``AGENTHOST_INPUT_<ID>``; we never prompt while loading.

JSON files may hold ``//`` and ``/* */`` comments and trailing commas (JSONC), as the
editors allow. ``${VAR}``, ``${VAR:-default}`` and ``$$`` are expanded in ``command``,
``args``, ``env`` values, ``url``, ``headers`` values, ``cwd``, ``env_file`` and workspace
paths; never in keys or names (see :mod:`agenthost.config.expand`).

Errors: every problem is a :class:`~agenthost.errors.ConfigError` carrying the file
(``path``), the key path (``key``, e.g. ``servers.github.headers.Authorization``) and the
problem; ``str(error)`` is ``"<file>: <key>: <problem>"``. Values that may be secrets
(``env`` and ``headers`` values, anything read from the environment) never appear in a
message.

=================================  ==========================================================
Case                               Message (after ``<file>: <key path>:``)
=================================  ==========================================================
file missing / unreadable          ``cannot read config file: <OS reason>`` (no key)
TOML syntax                        ``invalid TOML: <reason> (at line L, column C)``
JSON syntax                        ``invalid JSON: <reason> (at line L, column C)``
JSON comment not closed            ``invalid JSON: unterminated /* comment (at line L, ...)``
JSON top level not an object       ``the top level must be a JSON object, not <type>``
JSON without a server map          ``no 'mcpServers' ... or 'servers' ... key: ...``
JSON with both server maps         ``has both 'mcpServers' and 'servers'; ...``
unknown key (TOML)                 ``unknown key 'comand' (did you mean 'command'?); ...``
wrong type                         ``expected <what>, got <type>``
bad server name                    ``server name '<n>' is invalid: use only letters, ...``
server name with ``__``            ``server name '<n>' must not contain '__' ...``
both ``command`` and ``url``       ``has both 'command' (a local stdio server) and 'url' ...``
neither ``command`` nor ``url``    ``needs 'command' (a local stdio server) or 'url' ...``
``transport``/``type`` unknown     ``unknown transport '<t>'; valid: ...``
``transport`` and ``type`` both    ``'transport' and 'type' are the same setting; keep one``
transport vs command/url mismatch  ``transport '<t>' needs 'url', not 'command'`` (etc.)
stdio key on a remote server       ``'<k>' only applies to stdio servers (this one has ...)``
``headers`` on a stdio server      ``'headers' only applies to remote servers ...``
bad URL                            ``url must be an absolute http(s):// URL ...``
bad env / header name or value     ``invalid environment variable name ...`` (etc.)
bad timeout                        ``must be a number of seconds > 0 ...``
bad restart policy value           ``must be ...`` (range named)
``max_message_size`` < 1           ``must be a positive number of bytes``
unset variable                     ``environment variable 'X' is not set (set it, or ...)``
malformed reference                ``'${...}' is not a variable reference this file ...``
unterminated ``${``                ``unterminated '${' at character N ...``
VS Code input not declared         ``'${input:x}' refers to input 'x', which is not ...``
VS Code input not answered         ``needs input 'x' (<description>); ... AGENTHOST_INPUT_X``
``envFile`` unreadable             ``cannot read env file '<p>': <reason>``
``envFile`` bad line               ``<env file>: <key>: line N: expected NAME=value ...``
workspace path missing             ``workspace path '<p>' does not exist``
workspace path not a directory     ``workspace path '<p>' is not a directory``
duplicate workspace name / path    ``duplicate workspace name 'x' (also workspaces[0]) ...``
server names unknown workspace     ``unknown workspace 'x' (did you mean 'y'?); configured: ...``
duplicate server name (in code)    ``duplicate server name 'x'``
``providers`` / ``policy`` type    ``expected a table, got <type>``
=================================  ==========================================================
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

import attrs

from agenthost.auth.settings import OAuthSettings
from agenthost.errors import ConfigError
from agenthost.redaction import add_named_secret, add_secrets_of_url, redact_url

__all__ = [
    "PROJECT_CONFIGS",
    "PROTOCOLS",
    "PROXY_ENV_VARS",
    "REDACTED",
    "TRANSPORTS",
    "AgentSettings",
    "HostConfig",
    "RestartPolicy",
    "ServerConfig",
    "Timeouts",
    "TransportKind",
    "Workspace",
    "find_config",
    "find_project_config",
    "user_config_path",
]

#: How a server is reached. ``"http"`` means "probe": try Streamable HTTP, fall back to
#: the legacy HTTP+SSE transport (what a bare ``url`` in an editor's config means).
TransportKind = Literal["stdio", "http", "streamable-http", "sse", "websocket"]
TRANSPORTS: tuple[str, ...] = get_args(TransportKind)
#: ``ServerConfig.protocol`` values: negotiate, the ``initialize`` era, or 2026-07-28.
PROTOCOLS: tuple[str, ...] = ("auto", "legacy", "2026-07-28")

#: Host variables a stdio server inherits by default on top of the transport's allowlist:
#: how to reach the network from behind a proxy and which CAs to trust. A server that
#: fetches anything (package managers under ``npx``/``uvx`` first of all) fails behind a
#: corporate proxy without them, and they are what the user's shell gives every program.
#: A proxy URL may carry a password: ``inherit_env = []`` (host or server) withholds them.
PROXY_ENV_VARS: tuple[str, ...] = (
    "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
    "NO_PROXY", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PIP_CERT", "GIT_SSL_CAINFO",
)  # fmt: skip

#: Shown instead of a secret value in reprs and :meth:`ServerConfig.redacted`.
REDACTED = "***"

#: Any printable name the editors accept ("my server", "e.x"), but no '/' (the CLI's
#: ``SERVER/NAME`` separator), no control characters, no surrounding blanks.
_SERVER_NAME = re.compile(r"(?=[^\s])[^/\x00-\x1f\x7f]{1,128}(?<=[^\s])\Z")
_ENV_NAME = re.compile(r"[^=\x00]+\Z")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")  # RFC 9110 token
_REMOTE_SCHEMES = {
    "http": ("http", "https"),
    "streamable-http": ("http", "https"),
    "sse": ("http", "https"),
    "websocket": ("ws", "wss"),
}


# -- validators (they raise ConfigError keyed by the field; loaders prefix the key path) --


def _seconds(*, allow_inf: bool) -> Any:
    def check(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        ok = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and value > 0
            and (allow_inf or math.isfinite(value))
        )
        if not ok:
            extra = " (or inf for no limit)" if allow_inf else ""
            raise ConfigError(
                f"must be a number of seconds > 0{extra}, got {value!r}", key=attribute.name
            )

    return check


def _seconds_or_zero(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0:
        raise ConfigError(
            f"must be a number of seconds >= 0 (or inf for never), got {value!r}",
            key=attribute.name,
        )


def _number_at_least(low: float, *, high: float | None = None) -> Any:
    def check(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        ok = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= low
            and (high is None or value <= high)
        )
        if not ok:
            rng = f"between {low} and {high}" if high is not None else f">= {low}"
            raise ConfigError(f"must be a number {rng}, got {value!r}", key=attribute.name)

    return check


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _opt_str_tuple(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _frozen_map(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only copy, so a frozen config cannot be changed through a dict it holds."""
    return MappingProxyType(dict(value))


def _keys_only(value: Mapping[str, Any]) -> str:
    """Repr of a mapping whose values may be secrets: keys shown, values hidden."""
    return "{" + ", ".join(f"{k!r}: {REDACTED!r}" for k in value) + "}"


def _plain_repr(value: Mapping[str, Any]) -> str:
    return repr(dict(value))


def _url_repr(url: str | None) -> str:
    return repr(None if url is None else redact_url(url))


# -- the classes --


@attrs.frozen(kw_only=True)
class Timeouts:
    """Built-in time limits in float seconds; cancellation enforces them (no polling)."""

    #: Spawn or connect, plus the initialize handshake.
    startup: float = attrs.field(default=30.0, validator=_seconds(allow_inf=False))
    #: Default per-request limit; ``math.inf`` (``inf`` in TOML) for none, because some
    #: tools legitimately run for a long time.
    request: float = attrs.field(default=60.0, validator=_seconds(allow_inf=True))
    #: Each phase of graceful shutdown (stdin close wait, SIGTERM wait); always bounded.
    shutdown: float = attrs.field(default=2.0, validator=_seconds(allow_inf=False))
    #: HTTP / WebSocket connection establishment.
    connect: float = attrs.field(default=10.0, validator=_seconds(allow_inf=False))
    #: Tasks (issue 16): a tool that *may* run as a task (2025-11-25 ``taskSupport:
    #: "optional"``; on 2026-07-28 any tool of a server offering the tasks extension) runs
    #: as one once a call of it has taken this long; ``0`` from the first call, ``inf``
    #: (the default) never. Tools that require a task always run as one.
    task_after: float = attrs.field(default=math.inf, validator=_seconds_or_zero)
    #: How long a tool call run as a task is followed (creation, polls, input, result)
    #: when the call names no limit; unset (``None``): ``request``. The task's ttl is the
    #: server's word and never lengthens this; at the limit the task is cancelled.
    task: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(_seconds(allow_inf=True))
    )


def _tool_search(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not True and value is not False and value != "auto":
        raise ConfigError(f'must be true, false or "auto", got {value!r}', key=attribute.name)


def _positive_or_none(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"must be an integer >= 1, got {value!r}", key=attribute.name)


@attrs.frozen(kw_only=True)
class AgentSettings:
    """``[agent]``: how the agent loop treats many tools and big results (docs/config.md)."""

    #: True, False, or "auto": offer ``search_tools`` instead of every tool's definition
    #: (auto: above 100 tools, or definitions over a tenth of the model's context window).
    tool_search: bool | Literal["auto"] = attrs.field(default="auto", validator=_tool_search)
    #: A tool result longer than this (estimated tokens) is cut for the model; None sizes
    #: it to the model (a tenth of its context window, at most 25,000).
    max_result_tokens: int | None = attrs.field(default=None, validator=_positive_or_none)


def _non_negative_int(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"must be an integer >= 0, got {value!r}", key=attribute.name)


def _bool(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"must be true or false, got {value!r}", key=attribute.name)


@attrs.frozen(kw_only=True)
class RestartPolicy:
    """How a supervisor restarts a crashed server: capped exponential backoff with jitter."""

    enabled: bool = attrs.field(default=True, validator=_bool)
    #: Restarts allowed within ``window`` seconds; one more and the server is ``failed``.
    max_restarts: int = attrs.field(default=5, validator=_non_negative_int)
    window: float = attrs.field(default=60.0, validator=_seconds(allow_inf=False))
    initial_backoff: float = attrs.field(default=0.5, validator=_number_at_least(0.0))
    max_backoff: float = attrs.field(default=30.0, validator=_number_at_least(0.0))
    multiplier: float = attrs.field(default=2.0, validator=_number_at_least(1.0))
    #: Random spread applied to each delay, as a fraction of it (0.1 = +-10%).
    jitter: float = attrs.field(default=0.1, validator=_number_at_least(0.0, high=1.0))

    def __attrs_post_init__(self) -> None:
        if self.max_backoff < self.initial_backoff:
            raise ConfigError(
                f"must be >= initial_backoff ({self.initial_backoff}), got {self.max_backoff}",
                key="max_backoff",
            )


def _server_name(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not _SERVER_NAME.match(value):
        raise ConfigError(
            f"server name {value!r} is invalid: use up to 128 printable characters, no '/'"
            " and no blanks at either end (the name prefixes the server's tool names,"
            " '<server>__<tool>', and is typed on the command line as SERVER/NAME)",
            key="name",
        )
    if "__" in value:
        raise ConfigError(
            f"server name {value!r} must not contain '__': it separates the server from"
            " the tool in namespaced tool names",
            key="name",
        )


def _env_map(_inst: object, attribute: attrs.Attribute[Any], value: Mapping[str, Any]) -> None:
    for k, v in value.items():
        if not isinstance(k, str) or not _ENV_NAME.match(k):
            raise ConfigError(
                f"invalid environment variable name {k!r} (no '=' or NUL)", key=attribute.name
            )
        if not isinstance(v, str) or "\x00" in v:
            raise ConfigError("value must be a string without NUL", key=f"{attribute.name}.{k}")


def _env_names(_inst: object, attribute: attrs.Attribute[Any], value: tuple[Any, ...]) -> None:
    for i, name in enumerate(value):
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise ConfigError(
                f"invalid environment variable name {name!r}", key=f"{attribute.name}[{i}]"
            )


def _header_map(_inst: object, attribute: attrs.Attribute[Any], value: Mapping[str, Any]) -> None:
    for k, v in value.items():
        if not isinstance(k, str) or not _HEADER_NAME.match(k):
            raise ConfigError(f"invalid HTTP header name {k!r}", key=attribute.name)
        if not isinstance(v, str) or any(c in v for c in "\r\n\x00"):
            raise ConfigError(
                "value must be a string without line breaks or NUL", key=f"{attribute.name}.{k}"
            )


def _patterns(_inst: object, attribute: attrs.Attribute[Any], value: tuple[Any, ...]) -> None:
    for i, p in enumerate(value):
        if not isinstance(p, str) or not p:
            raise ConfigError("must be a non-empty glob pattern", key=f"{attribute.name}[{i}]")


@attrs.frozen(kw_only=True)
class ServerConfig:
    """One MCP server: how to reach it and how the host treats it.

    ``repr()`` never shows ``env`` or ``headers`` values, a URL's password or its query
    string; :meth:`redacted` returns a copy with those replaced, safe to log or print.
    """

    name: str = attrs.field(validator=_server_name)
    transport: TransportKind
    #: Executable to spawn (stdio); looked up on ``PATH`` by the transport.
    command: str | None = None
    args: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    #: Working directory of the child (stdio); absolute after loading from a file.
    cwd: str | None = None
    #: Extra environment for the child (stdio), after expansion; values may be secrets.
    env: Mapping[str, str] = attrs.field(
        factory=dict, converter=_frozen_map, validator=_env_map, repr=_keys_only, hash=False
    )
    url: str | None = attrs.field(default=None, repr=_url_repr)
    #: Extra HTTP headers (remote transports), after expansion; values may be secrets.
    headers: Mapping[str, str] = attrs.field(
        factory=dict, converter=_frozen_map, validator=_header_map, repr=_keys_only, hash=False
    )
    timeouts: Timeouts = Timeouts()
    restart: RestartPolicy = RestartPolicy()
    #: Largest single message accepted from the server, in bytes.
    max_message_size: int = 16 * 1024 * 1024
    #: The host fails to open if this server fails to start.
    required: bool = attrs.field(default=False, validator=_bool)
    #: Tool annotations (readOnlyHint, ...) are believed only for trusted servers.
    trusted: bool = attrs.field(default=False, validator=_bool)
    enabled: bool = attrs.field(default=True, validator=_bool)
    #: Names of the workspaces this server sees as roots; ``None`` means all of them.
    workspaces: tuple[str, ...] | None = attrs.field(default=None, converter=_opt_str_tuple)
    #: Glob patterns of tool names to expose; empty exposes all.
    include_tools: tuple[str, ...] = attrs.field(
        default=(), converter=_str_tuple, validator=_patterns
    )
    exclude_tools: tuple[str, ...] = attrs.field(
        default=(), converter=_str_tuple, validator=_patterns
    )
    #: The protocol era: ``"auto"`` (probe with ``server/discover``, fall back to
    #: ``initialize``; the result is cached), ``"legacy"`` (``initialize``: 2024-11-05 ..
    #: 2025-11-25) or ``"2026-07-28"``.
    protocol: str = "auto"
    #: Multi Round-Trip Requests (2026-07-28): rounds one call may take.
    max_input_rounds: int = 10
    #: MCP 2025-11-25 tasks: the server may send sampling and elicitation asks as tasks
    #: (declared in ``initialize``; off by default, the utility being experimental).
    client_tasks: bool = attrs.field(default=False, validator=_bool)
    #: OAuth for a remote HTTP server (``[servers.NAME.oauth]``); None means the defaults:
    #: authorize when the server answers 401, unless an ``Authorization`` header is set.
    oauth: OAuthSettings | None = None
    #: Host environment variables passed to a stdio server on top of the transport's
    #: fixed allowlist (``HOME``, ``PATH``, ...): by default the proxy and CA variables.
    inherit_env: tuple[str, ...] = attrs.field(
        default=PROXY_ENV_VARS, converter=_str_tuple, validator=_env_names
    )
    #: Where this entry came from: ``"user"`` (the user's own config, or a file named
    #: with ``--config``) or ``"project:<resolved path>"`` (a project file the user
    #: trusted). Remembered approvals are bound to it, so an answer given for one scope
    #: never carries over to a same-looking server of another.
    scope: str = "user"

    def __attrs_post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise ConfigError(
                f"unknown transport {self.transport!r}; valid: {', '.join(TRANSPORTS)}",
                key="transport",
            )
        if (
            not isinstance(self.max_message_size, int)
            or isinstance(self.max_message_size, bool)
            or self.max_message_size < 1
        ):
            raise ConfigError("must be a positive number of bytes", key="max_message_size")
        if self.protocol not in PROTOCOLS:
            raise ConfigError(
                f"unknown protocol {self.protocol!r}; valid: {', '.join(PROTOCOLS)}",
                key="protocol",
            )
        if (
            not isinstance(self.max_input_rounds, int)
            or isinstance(self.max_input_rounds, bool)
            or not 1 <= self.max_input_rounds <= 1000
        ):
            raise ConfigError("must be a number of rounds from 1 to 1000", key="max_input_rounds")
        if self.transport == "stdio":
            self._check_stdio()
        else:
            self._check_remote()
        # Header and env values, and the URL's password and query values, are secrets
        # wherever text leaves the process (logs, errors, CLI output): register them.
        for name, value in (*self.headers.items(), *self.env.items()):
            add_named_secret(name, value)
        add_secrets_of_url(self.url)

    def _check_stdio(self) -> None:
        if self.url is not None:
            raise ConfigError("transport 'stdio' needs 'command', not 'url'", key="url")
        if not self.command:
            raise ConfigError(
                "transport 'stdio' needs 'command' (the executable to run)", key="command"
            )
        if self.headers:
            raise ConfigError(
                "'headers' only applies to remote servers (this one is stdio)", key="headers"
            )
        if self.oauth is not None:
            raise ConfigError(
                "'oauth' only applies to remote servers (this one is stdio)", key="oauth"
            )

    def _check_remote(self) -> None:
        if self.command is not None:
            raise ConfigError(
                f"transport {self.transport!r} needs 'url', not 'command'", key="command"
            )
        for key in ("args", "cwd", "env"):
            if getattr(self, key):
                raise ConfigError(
                    f"{key!r} only applies to stdio servers (this one has transport"
                    f" {self.transport!r})",
                    key=key,
                )
        if self.oauth is not None and self.oauth.enabled and self.transport == "websocket":
            raise ConfigError(
                "'oauth' applies to HTTP servers (http, streamable-http, sse), not websocket",
                key="oauth",
            )
        schemes = _REMOTE_SCHEMES[self.transport]
        parts = urlsplit(self.url) if self.url else None
        if parts is not None and parts.scheme in schemes and not parts.hostname:
            raise ConfigError("url has no host", key="url")
        if parts is None or parts.scheme not in schemes:
            shown = "a missing url" if parts is None else f"scheme {parts.scheme!r}"
            raise ConfigError(
                f"url must be an absolute {schemes[0]}(s):// URL for transport"
                f" {self.transport!r}, got {shown}",
                key="url",
            )

    @property
    def is_remote(self) -> bool:
        """True for every transport but stdio."""
        return self.transport != "stdio"

    def tool_allowed(self, tool: str) -> bool:
        """Whether ``include_tools`` / ``exclude_tools`` let this (un-namespaced) tool through."""
        if self.include_tools and not any(fnmatch.fnmatchcase(tool, p) for p in self.include_tools):
            return False
        return not any(fnmatch.fnmatchcase(tool, p) for p in self.exclude_tools)

    def redacted(self) -> ServerConfig:
        """A copy with env and header values, URL password and query hidden: safe to log."""
        return attrs.evolve(
            self,
            env=dict.fromkeys(self.env, REDACTED),
            headers=dict.fromkeys(self.headers, REDACTED),
            url=None if self.url is None else redact_url(self.url),
        )


@attrs.frozen(kw_only=True)
class Workspace:
    """A directory the host exposes to servers as a root."""

    #: Resolved real absolute path (symlinks resolved).
    path: str
    #: Unique name servers refer to in their ``workspaces`` list; default: the basename.
    name: str

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.path, str) or not os.path.isabs(self.path):
            raise ConfigError(f"workspace path must be absolute, got {self.path!r}", key="path")
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("workspace name must be a non-empty string", key="name")

    @classmethod
    def from_path(
        cls,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> Workspace:
        """Resolve ``path`` (``~``, relative to ``base_dir`` or the cwd, symlinks) and check it.

        Raises:
            ConfigError: the path does not exist or is not a directory (key ``path``).
        """
        raw = os.path.expanduser(os.fspath(path))
        if not os.path.isabs(raw):
            raw = os.path.join(os.fspath(base_dir) if base_dir is not None else os.getcwd(), raw)
        real = os.path.realpath(raw)
        if not os.path.exists(real):
            raise ConfigError(f"workspace path {os.fspath(path)!r} does not exist", key="path")
        if not os.path.isdir(real):
            raise ConfigError(f"workspace path {os.fspath(path)!r} is not a directory", key="path")
        return cls(path=real, name=name if name is not None else (os.path.basename(real) or real))


def _server_tuple(value: Iterable[ServerConfig]) -> tuple[ServerConfig, ...]:
    return tuple(value)


def _workspace_tuple(value: Iterable[Workspace]) -> tuple[Workspace, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class HostConfig:
    """Everything the host needs; see the module docstring for the file formats."""

    servers: tuple[ServerConfig, ...] = attrs.field(converter=_server_tuple)
    workspaces: tuple[Workspace, ...] = attrs.field(default=(), converter=_workspace_tuple)
    #: Defaults for servers that do not set their own (loaders merge per-server tables).
    timeouts: Timeouts = Timeouts()
    restart: RestartPolicy = RestartPolicy()
    agent: AgentSettings = AgentSettings()
    #: Raw ``[providers]`` section, checked to be a table; parsed by ``agenthost_providers.config``.
    providers: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_frozen_map, repr=_keys_only, hash=False
    )
    #: Raw ``[policy]`` section, checked to be a table; parsed by ``agenthost_policies.config``.
    policy: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_frozen_map, repr=_plain_repr, hash=False
    )
    #: ``[gateway]`` (``agenthost serve``), validated: ``{"sampling": "auto" | "providers"
    #: | "client"}``; empty when the file has none (then ``auto``).
    gateway: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_frozen_map, repr=_plain_repr, hash=False
    )
    #: Raw ``[temporal]`` section (how durable runs reach Temporal), checked to be a
    #: table; parsed by ``agenthost.durable.connection``.
    temporal: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_frozen_map, repr=_keys_only, hash=False
    )
    #: The file this came from, for messages; ``None`` when built in code.
    source: str | None = None

    def __attrs_post_init__(self) -> None:
        names: set[str] = set()
        for s in self.servers:
            if s.name in names:
                raise ConfigError(
                    f"duplicate server name {s.name!r}", path=self.source, key=f"servers.{s.name}"
                )
            names.add(s.name)
        ws_names: dict[str, int] = {}
        ws_paths: dict[str, int] = {}
        for i, w in enumerate(self.workspaces):
            if w.name in ws_names:
                raise ConfigError(
                    f"duplicate workspace name {w.name!r} (also workspaces[{ws_names[w.name]}]);"
                    " give one a different 'name'",
                    path=self.source,
                    key=f"workspaces[{i}].name",
                )
            if w.path in ws_paths:
                raise ConfigError(
                    f"duplicate workspace path (same directory as workspaces[{ws_paths[w.path]}])",
                    path=self.source,
                    key=f"workspaces[{i}].path",
                )
            ws_names[w.name] = i
            ws_paths[w.path] = i
        for s in self.servers:
            for j, ref in enumerate(s.workspaces or ()):
                if ref not in ws_names:
                    configured = ", ".join(ws_names) or "none"
                    raise ConfigError(
                        f"unknown workspace {ref!r}; configured: {configured}",
                        path=self.source,
                        key=f"servers.{s.name}.workspaces[{j}]",
                    )

    def server(self, name: str) -> ServerConfig:
        """The server called ``name``.

        Raises:
            KeyError: no such server.
        """
        for s in self.servers:
            if s.name == name:
                return s
        raise KeyError(name)

    def workspaces_for(self, server: ServerConfig) -> tuple[Workspace, ...]:
        """The workspaces ``server`` sees: its ``workspaces`` list, or all of them."""
        if server.workspaces is None:
            return self.workspaces
        wanted = set(server.workspaces)
        return tuple(w for w in self.workspaces if w.name in wanted)


#: Where :func:`find_config` looks in the current directory, in order: our own file, then
#: the project files other hosts read (Claude Code, VS Code, Cursor).
PROJECT_CONFIGS: tuple[str, ...] = (
    "agenthost.toml",
    ".mcp.json",
    os.path.join(".vscode", "mcp.json"),
    os.path.join(".cursor", "mcp.json"),
)


def find_config(start: Path | None = None, *, env: Mapping[str, str] | None = None) -> Path | None:
    """The first config file found here or in the user's config directory (either scope).

    The CLI no longer uses this: it takes the user's file (:func:`user_config_path`) and
    the project's (:func:`find_project_config`) separately, loads the project's only once
    the user trusts it, and combines them (:func:`agenthost.config.load_scoped`).

    Looks, in order, for each of :data:`PROJECT_CONFIGS` in ``start`` (default: the
    current directory: ``agenthost.toml``, then the ``.mcp.json``, ``.vscode/mcp.json``
    and ``.cursor/mcp.json`` a project already has for other hosts) and then
    ``$XDG_CONFIG_HOME/agenthost/agenthost.toml`` (``XDG_CONFIG_HOME`` defaulting to
    ``~/.config``, as the XDG spec says). Parent directories are not searched: a config
    starts processes, so it should not be picked up from somewhere the user did not expect.

    Args:
        start: the directory to look in first.
        env: where ``XDG_CONFIG_HOME`` is read from; ``os.environ`` by default.

    Returns:
        The first existing file, or ``None``.
    """
    env = os.environ if env is None else env
    folder = start if start is not None else Path.cwd()
    for name in PROJECT_CONFIGS:
        here = folder / name
        if here.is_file():
            return here
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    user = Path(xdg) / "agenthost" / "agenthost.toml"
    return user if user.is_file() else None


def find_project_config(start: Path | None = None) -> Path | None:
    """The project config in ``start`` (default: the current directory), or ``None``.

    The first of :data:`PROJECT_CONFIGS` that exists. Such a file is *project scope*:
    someone else's input until the user trusts it (see :mod:`agenthost.config.trust`).
    """
    folder = start if start is not None else Path.cwd()
    for name in PROJECT_CONFIGS:
        here = folder / name
        if here.is_file():
            return here
    return None


def user_config_path(env: Mapping[str, str] | None = None) -> Path | None:
    """``$XDG_CONFIG_HOME/agenthost/agenthost.toml`` if it exists: the user's own config."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    user = Path(xdg) / "agenthost" / "agenthost.toml"
    return user if user.is_file() else None
