"""Config: every format loads, every malformed case fails with file, key path and problem."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import attrs
import pytest

from agenthost.config import config_from_mapping, load_config
from agenthost.config.expand import ExpandContext, expand, input_variable
from agenthost.config.jsonc import strip_jsonc
from agenthost.config.model import (
    HostConfig,
    RestartPolicy,
    ServerConfig,
    Timeouts,
    Workspace,
    find_config,
)
from agenthost.errors import ConfigError

DATA = Path(__file__).parent / "data" / "config"

SECRET = "s3cr3t-value-never-shown"

FIXTURE_ENV = {
    "NODE_MODULES": "/opt/nm",
    "GITHUB_TOKEN": SECRET,
    "ANTHROPIC_API_KEY": "sk-test",
    "HOME": "/home/user",
    "API_KEY": SECRET,
    "CURSOR_TOKEN": SECRET,
    "AGENTHOST_INPUT_GITHUB_TOKEN": SECRET,
}


# -- every format loads --------------------------------------------------------------------


def test_agenthost_toml_loads() -> None:
    cfg = load_config(DATA / "agenthost.toml", env=FIXTURE_ENV)
    assert cfg.source == str(DATA / "agenthost.toml")
    assert cfg.timeouts == Timeouts(startup=20.0, request=45.5)
    assert cfg.restart == RestartPolicy(max_restarts=3, initial_backoff=1.0)
    real = os.path.realpath(DATA)
    assert cfg.workspaces == (
        Workspace(path=real, name="fixtures"),
        Workspace(path=os.path.join(real, "workspace-b"), name="workspace-b"),
    )

    ev = cfg.server("everything")
    assert ev.transport == "stdio"
    assert ev.command == "node"
    assert ev.args == ("/opt/nm/@modelcontextprotocol/server-everything/dist/index.js", "stdio")
    assert ev.cwd == os.path.join(real, "workspace-b")
    # env_file first, then env on top; ${VAR:-default}; $$ is a literal $.
    assert dict(ev.env) == {
        "FROM_FILE": "one",
        "QUOTED": "two words\nnext",
        "SINGLE": "lit\\n",
        "LOG_LEVEL": "info",
        "PRICE": "$5",
    }
    assert (ev.required, ev.trusted, ev.enabled) == (True, True, True)
    assert ev.workspaces == ("fixtures",)
    assert ev.include_tools == ("echo", "get*")
    assert ev.exclude_tools == ("get_env",)
    assert ev.max_message_size == 1048576
    # Per-server tables merge over the host defaults.
    assert ev.timeouts == Timeouts(startup=20.0, request=math.inf)
    assert ev.restart == RestartPolicy(enabled=False, max_restarts=3, initial_backoff=1.0)

    gh = cfg.server("github")
    assert gh.transport == "http"  # a bare https url probes
    assert dict(gh.headers) == {"Authorization": f"Bearer {SECRET}"}
    assert gh.timeouts == cfg.timeouts
    assert gh.workspaces is None
    assert cfg.server("legacy").transport == "sse"
    assert cfg.server("legacy").enabled is False
    assert cfg.server("socket").transport == "websocket"
    # providers / policy stay raw, unexpanded, for their own parsers.
    assert cfg.providers == {
        "anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "model": "claude-sonnet-4-5"}
    }
    assert cfg.policy == {"preset": "ask"}
    assert cfg.workspaces_for(ev) == cfg.workspaces[:1]
    assert cfg.workspaces_for(gh) == cfg.workspaces


def test_claude_desktop_config_loads() -> None:
    cfg = load_config(DATA / "claude_desktop_config.json", env={})
    fs, weather = cfg.servers
    assert fs == ServerConfig(
        name="filesystem",
        transport="stdio",
        command="npx",
        args=("-y", "@modelcontextprotocol/server-filesystem", "/tmp"),
        env={"DEBUG": "1"},
    )
    assert weather.name == "weather"
    assert weather.enabled is False  # "disabled": true; autoApprove/alwaysAllow ignored
    assert cfg.workspaces == ()
    assert cfg.providers == {}


def test_claude_code_mcp_json_loads() -> None:
    cfg = load_config(DATA / "claude-code" / ".mcp.json", env=FIXTURE_ENV)
    local = cfg.server("local")
    assert local.transport == "stdio"
    assert local.command == "/home/user/bin/server"
    assert local.args == ("--root", ".")
    assert dict(local.env) == {"API_KEY": SECRET}
    remote = cfg.server("remote")
    assert remote.transport == "http"
    assert remote.url == "https://mcp.example.com/mcp"
    assert dict(remote.headers) == {"Authorization": f"Bearer {SECRET}"}
    assert cfg.server("events").transport == "sse"


def test_cursor_mcp_json_loads() -> None:
    cfg = load_config(DATA / "cursor" / ".cursor" / "mcp.json", env=FIXTURE_ENV)
    project = cfg.server("project")
    folder = os.path.realpath(DATA / "cursor")  # .cursor/ -> the project root
    assert project.args == (f"{folder}/server.py",)
    assert project.env["TOKEN"] == SECRET  # ${env:NAME}
    assert project.env["FROM_FILE"] == "one"  # envFile, relative to the workspace folder
    assert cfg.server("remote").transport == "streamable-http"


def test_vscode_mcp_json_loads() -> None:
    cfg = load_config(DATA / "vscode" / ".vscode" / "mcp.json", env=FIXTURE_ENV)
    folder = os.path.realpath(DATA / "vscode")
    gh = cfg.server("github")
    assert gh.transport == "http"
    assert dict(gh.headers) == {"Authorization": f"Bearer {SECRET}"}  # ${input:github-token}
    fetch = cfg.server("fetch")
    assert fetch.args == ("mcp-server-fetch", "--root", folder)
    assert fetch.cwd == folder
    assert dict(fetch.env) == {"PORT": "8080", "URL": "http://x//y"}
    assert cfg.server("events").transport == "sse"


def test_vscode_settings_json_mcp_object(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"editor.fontSize": 12, "mcp": {"servers": {"a": {"command": "x"}}}}')
    cfg = load_config(path, env={})
    assert [s.name for s in cfg.servers] == ["a"]


@pytest.mark.parametrize(
    ("text", "transport"),
    [
        ('[servers.a]\ncommand = "x"\n', "stdio"),
        ('{"mcpServers": {"a": {"url": "wss://h/m"}}}', "websocket"),
    ],
    ids=["toml", "json"],
)
def test_format_sniffed_without_a_known_suffix(tmp_path: Path, text: str, transport: str) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    assert load_config(path, env={}).servers[0].transport == transport


def test_from_dict_is_the_toml_shape(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    data: dict[str, Any] = {
        "workspaces": [str(tmp_path / "ws")],
        "timeouts": {"request": 5},
        "servers": {"a": {"command": "${CMD}", "cwd": "ws"}},
    }
    cfg = config_from_mapping(data, env={"CMD": "python"}, base_dir=tmp_path)
    assert cfg.source is None
    a = cfg.server("a")
    assert (a.command, a.cwd, a.timeouts.request) == ("python", str(tmp_path / "ws"), 5.0)
    assert cfg.workspaces[0].name == "ws"
    with pytest.raises(KeyError):
        cfg.server("b")


def test_built_in_code_with_defaults() -> None:
    server = ServerConfig(name="echo", transport="stdio", command="python", args=["-m", "x"])
    cfg = HostConfig(servers=[server])
    assert cfg.servers == (server,)
    assert server.args == ("-m", "x")
    assert server.timeouts == Timeouts(startup=30.0, request=60.0, shutdown=2.0, connect=10.0)
    assert server.restart == RestartPolicy()
    assert server.max_message_size == 16 * 1024 * 1024
    assert (server.required, server.trusted, server.enabled) == (False, False, True)
    assert hash(server) == hash(attrs.evolve(server))  # usable as a dict key / in sets
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        server.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        server.env["X"] = "y"  # type: ignore[index]


def test_workspace_from_path_resolves_symlinks(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    ws = Workspace.from_path("link", base_dir=tmp_path)
    assert ws == Workspace(path=str(real.resolve()), name="real")


def test_find_config(tmp_path: Path) -> None:
    cwd, xdg = tmp_path / "project", tmp_path / "xdg"
    cwd.mkdir()
    env = {"XDG_CONFIG_HOME": str(xdg)}
    assert find_config(cwd, env=env) is None
    (xdg / "agenthost").mkdir(parents=True)
    (xdg / "agenthost" / "agenthost.toml").write_text("")
    assert find_config(cwd, env=env) == xdg / "agenthost" / "agenthost.toml"
    (cwd / "agenthost.toml").write_text("")
    assert find_config(cwd, env=env) == cwd / "agenthost.toml"


# -- secrets stay out of reprs, logs and errors ---------------------------------------------


def test_repr_and_redacted_hide_secrets() -> None:
    remote = ServerConfig(
        name="r",
        transport="http",
        url=f"https://user:{SECRET}@h.example/mcp?token={SECRET}",
        headers={"Authorization": SECRET},
    )
    local = ServerConfig(name="l", transport="stdio", command="x", env={"TOKEN": SECRET})
    cfg = HostConfig(servers=[remote, local], providers={"p": {"api_key": SECRET}})
    for text in (repr(remote), repr(local), repr(cfg), str(remote.redacted())):
        assert SECRET not in text
    assert "Authorization" in repr(remote)
    assert "TOKEN" in repr(local)
    red = remote.redacted()
    assert red.url == "https://user:***@h.example/mcp?***"
    assert dict(red.headers) == {"Authorization": "***"}
    assert dict(local.redacted().env) == {"TOKEN": "***"}
    assert remote.headers["Authorization"] == SECRET  # the original is untouched


def test_tool_filters() -> None:
    s = ServerConfig(
        name="s",
        transport="stdio",
        command="x",
        include_tools=["get_*", "echo"],
        exclude_tools=["get_secret*"],
    )
    assert [t for t in ("echo", "get_a", "get_secret_x", "add") if s.tool_allowed(t)] == [
        "echo",
        "get_a",
    ]
    everything = ServerConfig(name="e", transport="stdio", command="x")
    assert everything.tool_allowed("anything")


# -- expansion and JSONC details ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),
        ("$$", "$"),
        ("$${A}", "${A}"),
        ("cost $5 and $", "cost $5 and $"),
        ("${A}/${A}", "a/a"),
        ("${EMPTY:-fallback}", "fallback"),
        ("${MISSING:-}", ""),
        ("${MISSING:-${A}-x}", "a-x"),
        ("${A:-unused}", "a"),
    ],
)
def test_expand(text: str, expected: str) -> None:
    ctx = ExpandContext(env={"A": "a", "EMPTY": ""})
    assert expand(text, ctx, "k") == expected


def test_input_variable_names() -> None:
    assert input_variable("github-token") == "AGENTHOST_INPUT_GITHUB_TOKEN"
    assert input_variable("a.b c") == "AGENTHOST_INPUT_A_B_C"


def test_strip_jsonc_keeps_strings_and_positions() -> None:
    text = '{"a": "x // not, a comment /* */", // c\n "b": [1, 2,], /* m\n */ "c": {"d": 1,},}'
    out = strip_jsonc(text)
    assert len(out) == len(text)
    assert out.count("\n") == text.count("\n")
    import json

    assert json.loads(out) == {"a": "x // not, a comment /* */", "b": [1, 2], "c": {"d": 1}}


# -- every malformed case: file, key path, problem ---------------------------------------------

TOML = "agenthost.toml"
JSON = ".mcp.json"
VSCODE = ".vscode/mcp.json"


def bad(case_id: str, name: str, key: str | None, content: str, *fragments: str, **env: str) -> Any:
    """One malformed case: file name, expected key path, content, problem fragments, env."""
    return pytest.param(name, content, env, key, fragments, id=case_id)


# fmt: off
MALFORMED = [
    bad("toml-syntax", TOML, None,
        '[servers.a]\ncommand = "x\n',
        "invalid TOML", "line 2"),
    bad("json-syntax", JSON, None,
        '{\n  "mcpServers": {\n    "a": {"command": "x" "args": []}}}',
        "invalid JSON", "line 3, column"),
    bad("json-unterminated-comment", JSON, None,
        '{"mcpServers": {}} /* never closed',
        "invalid JSON", "unterminated /* comment", "line 1"),
    bad("json-top-level-array", JSON, None,
        "[]",
        "top level must be a JSON object", "an array"),
    bad("json-no-servers", JSON, None,
        '{"foo": {}}',
        "no 'mcpServers'", "'servers'"),
    bad("json-both-maps", JSON, None,
        '{"mcpServers": {}, "servers": {}}',
        "both 'mcpServers' and 'servers'"),
    bad("unknown-top-level-key", TOML, "servrs",
        '[servrs.a]\ncommand = "x"\n',
        "unknown key 'servrs'", "did you mean 'servers'?"),
    bad("unknown-server-key", TOML, "servers.a.comand",
        '[servers.a]\ncomand = "x"\n',
        "unknown key 'comand'", "did you mean 'command'?"),
    bad("unknown-timeouts-key", TOML, "timeouts.startup_s",
        "[timeouts]\nstartup_s = 3\n",
        "unknown key", "did you mean 'startup'?"),
    bad("unknown-workspace-key", TOML, "workspaces[0].nmae",
        '[[workspaces]]\npath = "."\nnmae = "x"\n',
        "did you mean 'name'?"),
    bad("servers-not-table", TOML, "servers",
        'servers = "x"\n',
        "expected a table, got a string"),
    bad("server-not-table", TOML, "servers.a",
        "servers = { a = 1 }\n",
        "expected a table, got an integer"),
    bad("args-not-array", TOML, "servers.a.args",
        '[servers.a]\ncommand = "x"\nargs = "-v"\n',
        "expected an array of strings, got a string"),
    bad("arg-not-string", TOML, "servers.a.args[1]",
        '[servers.a]\ncommand = "x"\nargs = ["-v", 2]\n',
        "expected a string, got an integer"),
    bad("env-value-not-string", TOML, "servers.a.env.PORT",
        '[servers.a]\ncommand = "x"\nenv = { PORT = 80 }\n',
        "expected a string, got an integer"),
    bad("json-args-not-array", JSON, "mcpServers.a.args",
        '{"mcpServers": {"a": {"command": "x", "args": {}}}}',
        "expected an array of strings, got an object"),
    bad("json-server-not-object", JSON, "mcpServers.a",
        '{"mcpServers": {"a": null}}',
        "expected an object, got null"),
    bad("json-disabled-not-bool", JSON, "mcpServers.a.disabled",
        '{"mcpServers": {"a": {"command": "x", "disabled": "yes"}}}',
        "expected a boolean"),
    bad("bool-not-bool", TOML, "servers.a.required",
        '[servers.a]\ncommand = "x"\nrequired = 1\n',
        "expected a boolean", "got an integer"),
    bad("bad-server-name", TOML, 'servers."my\\tserver"',
        '[servers."my\\tserver"]\ncommand = "x"\n',
        "server name 'my\\tserver' is invalid", "printable"),
    bad("json-bad-server-name", JSON, 'mcpServers."my/server"',
        '{"mcpServers": {"my/server": {"command": "x"}}}',
        "is invalid", "tool names"),
    bad("server-name-double-underscore", TOML, "servers.a__b",
        '[servers.a__b]\ncommand = "x"\n',
        "must not contain '__'"),
    bad("command-and-url", TOML, "servers.a",
        '[servers.a]\ncommand = "x"\nurl = "http://h/"\n',
        "has both 'command'", "'url'"),
    bad("neither-command-nor-url", TOML, "servers.a",
        "[servers.a]\nenabled = true\n",
        "needs 'command'", "or 'url'"),
    bad("unknown-transport", TOML, "servers.a.transport",
        '[servers.a]\ntransport = "grpc"\nurl = "http://h/"\n',
        "unknown transport 'grpc'", "streamable-http"),
    bad("json-unknown-type", JSON, "mcpServers.a.type",
        '{"mcpServers": {"a": {"type": "grpc", "url": "http://h/"}}}',
        "unknown transport 'grpc'"),
    bad("transport-and-type", TOML, "servers.a.type",
        '[servers.a]\ntransport = "sse"\ntype = "sse"\nurl = "http://h/"\n',
        "same setting"),
    bad("stdio-with-url", TOML, "servers.a.url",
        '[servers.a]\ntransport = "stdio"\nurl = "http://h/"\n',
        "transport 'stdio' needs 'command', not 'url'"),
    bad("remote-with-command", JSON, "mcpServers.a.command",
        '{"mcpServers": {"a": {"type": "sse", "command": "x"}}}',
        "transport 'sse' needs 'url', not 'command'"),
    bad("args-on-remote", TOML, "servers.a.args",
        '[servers.a]\nurl = "http://h/"\nargs = ["x"]\n',
        "'args' only applies to stdio servers"),
    bad("headers-on-stdio", TOML, "servers.a.headers",
        '[servers.a]\ncommand = "x"\nheaders = { A = "b" }\n',
        "'headers' only applies to remote servers"),
    bad("bad-url-scheme", TOML, "servers.a.url",
        '[servers.a]\ntransport = "websocket"\nurl = "http://h/"\n',
        "url must be an absolute ws(s):// URL", "scheme 'http'"),
    bad("url-without-host", TOML, "servers.a.url",
        '[servers.a]\nurl = "http:///mcp"\n',
        "url has no host"),
    bad("url-from-env-bad-scheme", TOML, "servers.a.url",
        '[servers.a]\nurl = "${URL}"\n',
        "url must be an absolute http(s):// URL", "scheme 'ftp'", URL="ftp://" + SECRET),
    bad("bad-header-name", TOML, "servers.a.headers",
        '[servers.a]\nurl = "http://h/"\nheaders = { "A B" = "c" }\n',
        "invalid HTTP header name 'A B'"),
    bad("header-value-newline", TOML, "servers.a.headers.Authorization",
        '[servers.a]\nurl = "http://h/"\nheaders = { Authorization = "${TOKEN}" }\n',
        "without line breaks", TOKEN=SECRET + "\r\nX-Evil: 1"),
    bad("bad-env-name", TOML, "servers.a.env",
        '[servers.a]\ncommand = "x"\nenv = { "A=B" = "c" }\n',
        "invalid environment variable name 'A=B'"),
    bad("timeout-negative", TOML, "timeouts.request",
        "[timeouts]\nrequest = -1\n",
        "must be a number of seconds > 0", "-1"),
    bad("timeout-inf-startup", TOML, "servers.a.timeouts.startup",
        "[servers.a]\ncommand = 'x'\n[servers.a.timeouts]\nstartup = inf\n",
        "must be a number of seconds > 0"),
    bad("timeout-not-number", TOML, "timeouts.connect",
        '[timeouts]\nconnect = "10s"\n',
        "expected a number, got a string"),
    bad("restart-jitter-range", TOML, "restart.jitter",
        "[restart]\njitter = 1.5\n",
        "between 0.0 and 1.0"),
    bad("restart-backoff-order", TOML, "restart.max_backoff",
        "[restart]\ninitial_backoff = 10\nmax_backoff = 1\n",
        "must be >= initial_backoff"),
    bad("restart-count-float", TOML, "restart.max_restarts",
        "[restart]\nmax_restarts = 2.5\n",
        "expected an integer, got a float"),
    bad("restart-count-negative", TOML, "servers.a.restart.max_restarts",
        "[servers.a]\ncommand = 'x'\n[servers.a.restart]\nmax_restarts = -1\n",
        "integer >= 0"),
    bad("max-message-size-zero", TOML, "servers.a.max_message_size",
        "[servers.a]\ncommand = 'x'\nmax_message_size = 0\n",
        "positive number of bytes"),
    bad("missing-variable", TOML, "servers.a.headers.Authorization",
        '[servers.a]\nurl = "http://h/"\nheaders = { Authorization = "Bearer ${GH_TOKEN}" }\n',
        "environment variable 'GH_TOKEN' is not set"),
    bad("missing-variable-in-default", JSON, "mcpServers.a.args[0]",
        '{"mcpServers": {"a": {"command": "x", "args": ["${A:-${B}}"]}}}',
        "'B' is not set"),
    bad("malformed-reference", TOML, "servers.a.command",
        '[servers.a]\ncommand = "${1X}"\n',
        "'${1X}' is not a variable reference"),
    bad("unterminated-reference", TOML, "servers.a.cwd",
        '[servers.a]\ncommand = "x"\ncwd = "${HOME"\n',
        "unterminated '${'", "'$$'"),
    bad("editor-syntax-in-toml", TOML, "servers.a.command",
        '[servers.a]\ncommand = "${env:X}"\n',
        "'${env:X}' is not a variable reference", X="y"),
    bad("input-not-declared", VSCODE, "servers.a.args[0]",
        '{"servers": {"a": {"command": "x", "args": ["${input:nope}"]}}}',
        "input 'nope'", "not declared"),
    bad("input-not-answered", VSCODE, "servers.a.headers.X-Key",
        '{"inputs": [{"type": "promptString", "id": "api-key", "description": "The API key", '
        '"password": true}], "servers": {"a": {"url": "http://h/", "headers": {"X-Key": "${in'
        'put:api-key}"}}}}',
        "input 'api-key'", "The API key", "AGENTHOST_INPUT_API_KEY", "does not prompt"),
    bad("input-without-id", VSCODE, "inputs[0].id",
        '{"inputs": [{"type": "promptString"}], "servers": {}}',
        "missing required key 'id'"),
    bad("inputs-not-array", VSCODE, "inputs",
        '{"inputs": {}, "servers": {}}',
        "expected an array"),
    bad("env-file-missing", VSCODE, "servers.a.envFile",
        '{"servers": {"a": {"command": "x", "envFile": "${workspaceFolder}/none.env"}}}',
        "cannot read env file '${workspaceFolder}/none.env' (as expanded)", "No such file"),
    bad("workspace-missing", TOML, "workspaces[0].path",
        '[[workspaces]]\npath = "does-not-exist"\n',
        "'does-not-exist' does not exist"),
    bad("workspace-not-directory", TOML, "workspaces[0].path",
        '[[workspaces]]\npath = "agenthost.toml"\n',
        "is not a directory"),
    bad("workspace-path-from-env", TOML, "workspaces[0].path",
        '[[workspaces]]\npath = "${WS}"\n',
        "'${WS}' (as expanded) does not exist", WS=SECRET),
    bad("workspace-without-path", TOML, "workspaces[0].path",
        '[[workspaces]]\nname = "x"\n',
        "missing required key 'path'"),
    bad("workspaces-not-array", TOML, "workspaces",
        '[workspaces]\npath = "."\n',
        "expected an array of tables"),
    bad("workspace-duplicate-name", TOML, "workspaces[1].name",
        '[[workspaces]]\npath = "."\nname = "w"\n[[workspaces]]\npath = "sub"\nname = "w"\n',
        "duplicate workspace name 'w'", "workspaces[0]"),
    bad("workspace-duplicate-path", TOML, "workspaces[1].path",
        '[[workspaces]]\npath = "."\nname = "a"\n[[workspaces]]\npath = "sub/.."\nname = "b"\n',
        "duplicate workspace path"),
    bad("server-unknown-workspace", TOML, "servers.a.workspaces[0]",
        '[[workspaces]]\npath = "sub"\n[servers.a]\ncommand = "x"\nworkspaces = ["subb"]\n',
        "unknown workspace 'subb'", "did you mean 'sub'?"),
    bad("providers-not-table", TOML, "providers",
        'providers = ["anthropic"]\n',
        "expected a table, got an array"),
    bad("policy-not-table", TOML, "policy",
        'policy = "ask"\n',
        "expected a table, got a string"),
]
# fmt: on


@pytest.mark.parametrize(("name", "content", "env", "key", "fragments"), MALFORMED)
def test_malformed(
    tmp_path: Path,
    name: str,
    content: str,
    env: dict[str, str],
    key: str | None,
    fragments: tuple[str, ...],
) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_config(path, env=env)
    err = info.value
    assert err.path == str(path)
    assert err.key == key
    for fragment in fragments:
        assert fragment in err.problem
    prefix = f"{path}: {key}: " if key else f"{path}: "
    assert str(err) == prefix + err.problem
    assert SECRET not in str(err)


def test_missing_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert info.value.path == str(path)
    assert info.value.key is None
    assert "cannot read config file" in info.value.problem


def test_env_file_bad_line_names_env_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad.env").write_text(f"OK=1\n{SECRET}\n")
    path = tmp_path / "agenthost.toml"
    path.write_text('[servers.a]\ncommand = "x"\nenv_file = "bad.env"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert info.value.path == str(tmp_path / "bad.env")
    assert info.value.key == "servers.a.env_file"
    assert info.value.problem.startswith("line 2: expected NAME=value")
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    ("build", "key", "fragment"),
    [
        (lambda: ServerConfig(name="", transport="stdio", command="x"), "name", "invalid"),
        (lambda: ServerConfig(name="a", transport="stdio"), "command", "needs 'command'"),
        (
            lambda: ServerConfig(name="a", transport="pipe", command="x"),  # type: ignore[arg-type]
            "transport",
            "unknown transport",
        ),
        (lambda: Timeouts(shutdown=math.inf), "shutdown", "seconds > 0"),
        (lambda: RestartPolicy(multiplier=0.5), "multiplier", ">= 1.0"),
        (lambda: Workspace(path="relative", name="r"), "path", "absolute"),
        (
            lambda: HostConfig(
                servers=[ServerConfig(name="a", transport="stdio", command="x")] * 2
            ),
            "servers.a",
            "duplicate server name",
        ),
        (
            lambda: HostConfig(
                servers=[ServerConfig(name="a", transport="stdio", command="x", workspaces=["w"])]
            ),
            "servers.a.workspaces[0]",
            "unknown workspace 'w'",
        ),
    ],
    ids=[
        "name",
        "stdio-command",
        "transport",
        "timeout",
        "restart",
        "workspace-path",
        "duplicate-server",
        "unknown-workspace",
    ],
)
def test_code_built_config_is_validated_too(build: Any, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    assert info.value.key == key
    assert fragment in info.value.problem


def test_other_hosts_keys_are_mapped_or_logged_by_name_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("DEBUG", logger="agenthost.config")
    cfg = load_config(DATA / "claude_desktop_config.json", env={})
    assert "globalShortcut" in caplog.text  # the desktop app's own setting: debug only
    rules = cfg.policy["rules"]
    assert [(r["server"], r["name"], r["decision"]) for r in rules] == [
        ("weather", ["forecast"], "allow"),
        ("weather", ["alerts"], "allow"),
    ]


def test_the_annotated_example_in_docs_config_md_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/config.md's agenthost.toml example (every key, protocol eras included) is a
    config that loads: its workspaces and env_file are made to exist, its variables set."""
    import re

    doc = (Path(__file__).resolve().parents[1] / "docs" / "config.md").read_text()
    section = doc[doc.index("## agenthost.toml") :]
    example = re.search(r"```toml\n(.*?)```", section, re.DOTALL)
    assert example is not None
    home = tmp_path / "home"
    (home / "code" / "project").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / "secrets.env").write_text("TOKEN=x\n")
    path = config_dir / "agenthost.toml"
    path.write_text(example.group(1))
    monkeypatch.setenv("HOME", str(home))  # "~" in a workspace path
    env = {"HOME": str(home), "GITHUB_TOKEN": "t0ken", "ANTHROPIC_API_KEY": "k"}
    config = load_config(path, env=env)
    servers = {server.name: server for server in config.servers}
    assert servers["filesystem"].protocol == "auto"
    assert servers["filesystem"].max_input_rounds == 10
    assert servers["github"].protocol == "auto"


def test_protocol_and_max_input_rounds_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "agenthost.toml"
    path.write_text('[servers.s]\ncommand = "x"\nprotocol = "2025-06-18"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert info.value.key == "servers.s.protocol"
    assert "unknown protocol '2025-06-18'; valid: auto, legacy, 2026-07-28" in str(info.value)
    path.write_text('[servers.s]\ncommand = "x"\nmax_input_rounds = 0\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert info.value.key == "servers.s.max_input_rounds"
    path.write_text('[servers.s]\ncommand = "x"\nprotocol = "legacy"\nmax_input_rounds = 3\n')
    server = load_config(path, env={}).servers[0]
    assert (server.protocol, server.max_input_rounds) == ("legacy", 3)
