"""Issue 17, the first hour: the CLI as a new user meets it, driven as a subprocess.

Config discovery and reuse of other hosts' files, server names from those files, the
default workspace, exit codes and messages a script can rely on, proxy variables for
stdio servers. Every test runs the real ``agenthost`` command against real peers, from a
project directory of its own, with a home directory of its own (so no user config leaks
in).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import peer_python

Command = tuple[str, list[str]]
AGENTHOST = [peer_python(), "-m", "agenthost"]
#: Each test runs several agenthost processes (each starting its servers): up to ~15 s
#: alone on the 2-core machine, several times that under a full parallel run.
pytestmark = pytest.mark.timeout(180)


class Project:
    """A project folder to run ``agenthost`` in, with its own empty home directory."""

    def __init__(self, root: Path) -> None:
        self.root = root / "project"
        self.root.mkdir()
        self.home = root / "home"
        self.home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        self.env.update(HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / ".config"))
        self.env.pop("XDG_STATE_HOME", None)
        # These tests are about what a project file does once its user trusts it (issue
        # 22); refusing an untrusted one is tests/security's subject.
        self.env["AGENTHOST_TRUST_PROJECT"] = "1"
        #: The file given with --config (user scope), if a test wrote one.
        self.config: Path | None = None

    def write(self, name: str, content: str | dict[str, Any], *, user: bool = False) -> Path:
        """Write a file into the project; ``user=True``: the person's own config, named
        with ``--config`` (a policy, ``trusted``, ``autoApprove`` are user-only keys)."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
        if user:
            self.config = path
        return path

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        config = ("--config", str(self.config)) if self.config else ()
        return subprocess.run(
            [*AGENTHOST, *config, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            env={**self.env, **(env or {})},
        )

    def json(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, Any, str]:
        proc = self.run(*args, "--json", env=env)
        data = json.loads(proc.stdout) if proc.stdout.strip() else None
        return proc.returncode, data, proc.stderr


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def stdio_entry(cmd: Command, **extra: Any) -> dict[str, Any]:
    return {"command": cmd[0], "args": cmd[1], **extra}


def toml_str(value: Any) -> str:
    return json.dumps(value)


# ----------------------------------------------------------------------------- 1 discovery


@pytest.mark.parametrize("name", [".mcp.json", ".vscode/mcp.json", ".cursor/mcp.json"])
def test_project_files_of_other_hosts_are_found(
    project: Project, name: str, sdk_server_cmd: Callable[..., Command]
) -> None:
    key = "servers" if name.startswith(".vscode") else "mcpServers"
    project.write(name, {key: {"sdk": stdio_entry(sdk_server_cmd())}})
    code, tools, err = project.json("tools", "-v")
    assert code == 0, err
    assert "sdk__echo" in {t["name"] for t in tools}
    assert f"using config {project.root / name}" in err
    proc = project.run("check")
    assert proc.returncode == 0, proc.stderr
    assert f"config: {project.root / name}" in proc.stderr


def test_agenthost_toml_comes_before_the_editor_files(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    project.write(".mcp.json", {"mcpServers": {"fromjson": stdio_entry(sdk_server_cmd())}})
    cmd, args = sdk_server_cmd()
    project.write(
        "agenthost.toml",
        f"[servers.fromtoml]\ncommand = {toml_str(cmd)}\nargs = {toml_str(args)}\n",
    )
    code, servers, err = project.json("servers")
    assert code == 0, err
    assert [s["name"] for s in servers] == ["fromtoml"]


def test_no_config_names_the_places_it_looked(project: Project) -> None:
    proc = project.run("tools")
    assert proc.returncode == 2
    assert ".mcp.json" in proc.stderr
    assert ".vscode/mcp.json" in proc.stderr


# ----------------------------------------------------------------------------- 2 combine


def test_toml_imports_an_editor_file_and_adds_host_settings(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    (project.root / "docs").mkdir()
    project.write(".mcp.json", {"mcpServers": {"sdk": stdio_entry(sdk_server_cmd())}})
    project.write(
        "agenthost.toml",
        """
import = [".mcp.json"]

[[workspaces]]
path = "docs"

[servers.sdk]                 # adds to the imported server
trusted = true

[policy]
mode = "headless"
[[policy.rules]]
kind = ["tool", "roots"]
decision = "allow"
""",
        user=True,
    )
    code, tools, err = project.json("tools")
    assert code == 0, err
    assert {t["trusted"] for t in tools} == {True}
    code, result, err = project.json("call", "sdk__roots", "{}")
    assert code == 0, err
    uris = [r["uri"] for r in json.loads(result["content"][0]["text"])]
    assert uris == [(project.root / "docs").resolve().as_uri()]


def test_an_overlay_cannot_restate_how_to_start_an_imported_server(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    project.write(".mcp.json", {"mcpServers": {"sdk": stdio_entry(sdk_server_cmd())}})
    project.write("agenthost.toml", 'import = [".mcp.json"]\n[servers.sdk]\ncommand = "x"\n')
    proc = project.run("servers")
    assert proc.returncode == 2
    assert "servers.sdk.command" in proc.stderr
    assert "unknown key 'command'" in proc.stderr


def test_policy_in_a_vscode_file_is_honoured(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    project.write(
        ".vscode/mcp.json",
        {
            "servers": {"sdk": stdio_entry(sdk_server_cmd())},
            "policy": {
                "mode": "headless",
                "rules": [{"kind": "tool", "name": "echo", "decision": "deny", "reason": "no"}],
            },
        },
        user=True,
    )
    code, data, err = project.json("call", "sdk__echo", '{"message": "hi"}')
    assert code == 3, err
    assert "no" in data["error"]


def test_other_hosts_approval_and_trust_keys_are_mapped(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    project.write(
        ".mcp.json",
        {
            "mcpServers": {
                "cline": stdio_entry(sdk_server_cmd(), autoApprove=["echo"], timeout=60),
                "gemini": stdio_entry(sdk_server_cmd(), trust=True),
            }
        },
    )
    project.write(
        "agenthost.toml", 'import = [".mcp.json"]\n[policy]\nmode = "headless"\n', user=True
    )
    code, _, err = project.json("call", "cline__echo", '{"message": "hi"}')
    assert code == 0, err
    assert "cline.timeout is not used" in err  # warned at the default level, with why
    assert "milliseconds" in err
    code, _, err = project.json("call", "cline__add", '{"a": 1, "b": 2}')
    assert code == 3, err
    code, _, err = project.json("call", "gemini__add", '{"a": 1, "b": 2}')
    assert code == 0, err


# ----------------------------------------------------------------------------- 3 names


def test_server_names_with_dots_and_spaces(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    project.write(
        ".mcp.json",
        {
            "mcpServers": {
                "e.x": stdio_entry(sdk_server_cmd()),
                "my server": stdio_entry(sdk_server_cmd()),
            },
            "policy": {"mode": "headless", "preset": "unsafe-allow-everything"},
        },
        user=True,
    )
    code, tools, err = project.json("tools")
    assert code == 0, err
    names = {t["name"] for t in tools}
    assert {"e_x__echo", "my_server__echo"} <= names
    code, result, err = project.json("call", "e_x__echo", '{"message": "dotted"}')
    assert code == 0, err
    assert result["content"][0]["text"] == "dotted"
    code, result, err = project.json("call", "my_server__echo", '{"message": "spaced"}')
    assert code == 0, err
    assert result["content"][0]["text"] == "spaced"
    code, result, err = project.json("prompt", "my server", "simple")
    assert code == 0, err


# ----------------------------------------------------------------------------- 4 workspaces


def test_default_workspace_is_the_project_folder(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    project.write(
        ".mcp.json",
        {
            "mcpServers": {"sdk": stdio_entry(sdk_server_cmd())},
            "policy": {"mode": "headless", "preset": "unsafe-allow-everything"},
        },
        user=True,
    )
    uri = project.root.resolve().as_uri()
    code, result, err = project.json("call", "sdk__roots", "{}")
    assert code == 0, err
    assert [r["uri"] for r in json.loads(result["content"][0]["text"])] == [uri]
    proc = project.run("check")
    assert proc.returncode == 0, proc.stderr
    assert uri in proc.stdout  # check says what each server sees
    code, servers, err = project.json("servers")
    assert servers[0]["roots"] == [uri]


def test_an_empty_workspace_list_exposes_nothing(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    cmd, args = sdk_server_cmd()
    project.write(
        "agenthost.toml",
        f"workspaces = []\n[servers.sdk]\ncommand = {toml_str(cmd)}\nargs = {toml_str(args)}\n",
    )
    code, servers, err = project.json("servers")
    assert code == 0, err
    assert servers[0]["roots"] == []


# ----------------------------------------------------------------------------- 10 exit codes


def test_listing_commands_exit_5_when_a_server_did_not_start(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    project.write(
        ".mcp.json",
        {
            "mcpServers": {
                "sdk": stdio_entry(sdk_server_cmd()),
                "gone": {"command": "definitely-not-a-command-xyz"},
            }
        },
    )
    for command in ("tools", "prompts", "resources"):
        code, data, err = project.json(command)
        assert code == 5, (command, err)
        assert "server gone is failed" in err
        assert data  # what the other server offers is still listed
    code, servers, err = project.json("servers")
    assert code == 5
    assert {s["name"]: s["state"] for s in servers} == {"sdk": "ready", "gone": "failed"}


# ----------------------------------------------------------------------------- 12 surface


def test_version(project: Project) -> None:
    proc = project.run("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("agenthost 0.")
    assert "2025-11-25" in proc.stdout


def test_servers_json_says_which_transport_the_probe_chose(
    project: Project, sdk_server_cmd: Callable[..., Command], free_port: Callable[[], int]
) -> None:
    import time
    import urllib.request

    port = free_port()
    cmd, args = sdk_server_cmd("streamable-http", port)
    server = subprocess.Popen([cmd, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/mcp", timeout=1)
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
            else:
                break
        project.write(
            ".mcp.json", {"mcpServers": {"remote": {"url": f"http://127.0.0.1:{port}/mcp"}}}
        )
        code, servers, err = project.json("servers")
        assert code == 0, err
        assert servers[0]["transport"] == "http: streamable-http"
    finally:
        server.terminate()
        server.wait(10)


def test_tools_hints_follow_what_the_policy_believes(
    project: Project, everything_cmd: Callable[[], Command]
) -> None:
    cmd, args = everything_cmd()
    project.write(
        "agenthost.toml",
        f"""
[servers.trusted]
command = {toml_str(cmd)}
args = {toml_str(args)}
trusted = true

[servers.untrusted]
command = {toml_str(cmd)}
args = {toml_str(args)}
""",
        user=True,
    )
    proc = project.run("tools")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()[2:]}
    read_only = [n for n, line in rows.items() if n.startswith("trusted__") and "read-only" in line]
    assert read_only, proc.stdout
    for name in read_only:
        twin = rows[name.replace("trusted__", "untrusted__", 1)]
        assert "untrusted (says read-only" in twin


# ----------------------------------------------------------------------------- 13 proxies


def test_proxy_and_ca_variables_reach_stdio_servers(
    project: Project, everything_cmd: Callable[[], Command]
) -> None:
    cmd, args = everything_cmd()
    project.write(
        "agenthost.toml",
        f"""
[servers.plain]
command = {toml_str(cmd)}
args = {toml_str(args)}

[servers.sealed]
command = {toml_str(cmd)}
args = {toml_str(args)}
inherit_env = []

[servers.extra]
command = {toml_str(cmd)}
args = {toml_str(args)}
inherit_env = ["MY_CORP_SETTING"]

[policy]
mode = "headless"
preset = "unsafe-allow-everything"
""",
        user=True,
    )
    env = {
        "HTTPS_PROXY": "http://proxy.corp.example:3128",
        "NO_PROXY": "localhost,127.0.0.1",
        "NODE_EXTRA_CA_CERTS": "/etc/corp-ca.pem",
        "MY_CORP_SETTING": "on",
        "ANTHROPIC_API_KEY": "sk-ant-" + "x" * 20,
    }

    def server_env(server: str) -> dict[str, str]:
        code, result, err = project.json("call", f"{server}__get-env", "{}", env=env)
        assert code == 0, err
        data: dict[str, str] = json.loads(result["content"][0]["text"])
        return data

    plain = server_env("plain")
    assert plain["HTTPS_PROXY"] == env["HTTPS_PROXY"]
    assert plain["NO_PROXY"] == env["NO_PROXY"]
    assert plain["NODE_EXTRA_CA_CERTS"] == env["NODE_EXTRA_CA_CERTS"]
    assert "MY_CORP_SETTING" not in plain
    assert "ANTHROPIC_API_KEY" not in plain
    sealed = server_env("sealed")
    assert "HTTPS_PROXY" not in sealed
    assert "PATH" in sealed
    extra = server_env("extra")
    assert extra["MY_CORP_SETTING"] == "on"
    assert "HTTPS_PROXY" not in extra


# ----------------------------------------------------------------------------- 5 local model


class StrictLocalServer:
    """An OpenAI-compatible endpoint that, like Ollama, knows only the models it has.

    It answers ``POST /v1/chat/completions`` with a chat.completion shaped like the real
    API's, and 404 ``model not found`` for any other model name.
    """

    def __init__(self, models: tuple[str, ...]) -> None:
        import http.server
        import threading

        self.models = models
        self.asked: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.asked.append(body["model"])
                if body["model"] not in outer.models:
                    payload = {"error": {"message": f"model '{body['model']}' not found"}}
                    self._send(404, payload)
                    return
                self._send(
                    200,
                    {
                        "id": "chatcmpl-local-1",
                        "object": "chat.completion",
                        "created": 1790000000,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "local answer"},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_configured_local_model_is_the_candidate(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    local = StrictLocalServer(("stub-model",))
    try:
        env = {"OPENAI_BASE_URL": local.url, "OPENAI_MODEL": "stub-model"}
        project.write(
            ".mcp.json",
            {
                "mcpServers": {"sdk": stdio_entry(sdk_server_cmd())},
                "policy": {
                    "mode": "headless",
                    "rules": [
                        {"kind": "tool", "decision": "allow"},
                        {"kind": "sampling", "decision": "allow", "review": "auto"},
                    ],
                },
            },
            user=True,
        )
        code, models, err = project.json("models", env=env)
        assert code == 0, err
        listed = [(m["provider"], m["model"], m["default"]) for m in models["models"]]
        assert listed == [("openai", "stub-model", True)]
        assert models["models"][0]["intelligence"] == 50  # neutral, not zero
        code, result, err = project.json("call", "sdk__sample", '{"prompt": "say hi"}', env=env)
        assert code == 0, err
        assert local.asked == ["stub-model"]
        assert "local answer" in result["content"][0]["text"]
    finally:
        local.close()


# ----------------------------------------------------------------------------- 10 one table


def test_unknown_names_and_missing_arguments_are_usage_errors_everywhere(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    project.write(
        ".mcp.json",
        {
            "mcpServers": {"sdk": stdio_entry(sdk_server_cmd())},
            "policy": {"mode": "headless", "preset": "unsafe-allow-everything"},
        },
        user=True,
    )
    code, _, err = project.json("call", "sdk__nosuch", "{}")
    assert code == 2, err
    assert "no tool named 'sdk__nosuch'" in err
    code, _, err = project.json("prompt", "sdk", "nosuch")
    assert code == 2, err
    assert "no prompt named 'nosuch'" in err and "greet" in err
    code, _, err = project.json("prompt", "sdk", "greet")
    assert code == 2, err
    assert "needs name: add name=VALUE" in err
    code, _, err = project.json("prompt", "nosuch", "x")
    assert code == 2, err
    assert "no server named 'nosuch'" in err
    assert "config error" not in err


def test_run_that_stops_at_a_limit_has_its_own_exit_code(
    project: Project, sdk_server_cmd: Callable[..., Command]
) -> None:
    turn = (
        '[[turns]]\n[[turns.tool_calls]]\nid = "t{n}"\nname = "sdk__echo"\n'
        'input = {{ message = "again" }}\n'
    )
    project.write(
        "script.toml", "".join(turn.format(n=n) for n in range(3)) + '[[turns]]\ntext = "done"\n'
    )
    cmd, args = sdk_server_cmd()
    project.write(
        "agenthost.toml",
        f"""
[servers.sdk]
command = {toml_str(cmd)}
args = {toml_str(args)}

[providers.replay]
kind = "scripted"
script = "script.toml"

[policy]
mode = "headless"
preset = "unsafe-allow-everything"
""",
        user=True,
    )
    code, transcript, err = project.json("run", "echo three times", "--max-turns", "2")
    assert code == 6, err
    assert transcript["stop"] == "max_turns"
    code, transcript, err = project.json("run", "echo three times")
    assert code == 0, err


# ----------------------------------------------------------------------------- 11 messages


def test_messages_a_person_can_act_on(
    project: Project,
    sdk_server_cmd: Callable[..., Command],
    crashy_cmd: Callable[..., Command],
    free_port: Callable[[], int],
) -> None:
    closed = free_port()
    cmd, args = sdk_server_cmd()
    crashy, crashy_args = crashy_cmd()
    project.write(
        "agenthost.toml",
        f"""
[servers.sdk]
command = {toml_str(cmd)}
args = {toml_str(args)}

[servers.crashy]
command = {toml_str(crashy)}
args = {toml_str(crashy_args)}

[providers.local]
kind = "openai-compatible"
base_url = "http://127.0.0.1:{closed}/v1"
default_model = "m"
max_retries = 0

[policy]
mode = "headless"
preset = "unsafe-allow-everything"
""",
        user=True,
    )
    # A JSON-RPC error from the server: its words, no "(code -32602)".
    proc = project.run("read", "nosuch://x", "--server", "sdk")
    assert proc.returncode == 1, proc.stderr
    assert "(code" not in proc.stderr and "nosuch://x" in proc.stderr
    # A server that has no resources says so.
    proc = project.run("read", "file:///x", "--server", "crashy")
    assert proc.returncode == 2, proc.stderr
    assert "crashy: the server offers no resources" in proc.stderr
    # A provider that cannot be reached is named by its URL.
    proc = project.run("run", "hello")
    assert proc.returncode == 4, proc.stderr
    assert f"127.0.0.1:{closed}/v1" in proc.stderr


def test_check_shows_the_whole_error_and_the_servers_last_words(
    project: Project, crashy_cmd: Callable[..., Command]
) -> None:
    crashy, args = crashy_cmd("--crash-on-start")
    project.write(".mcp.json", {"mcpServers": {"dies": {"command": crashy, "args": args}}})
    proc = project.run("check")
    assert proc.returncode == 5
    assert "crashy_server: crashing on start as asked" in proc.stdout


def test_http_401_points_to_authentication(project: Project) -> None:
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b'{"error": "invalid_token"}'
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Bearer realm="mcp"')
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        project.write(".mcp.json", {"mcpServers": {"remote": {"url": url}}})
        proc = project.run("check")
        assert proc.returncode == 5
        # OAuth (h/oauth) takes a 401 over: the message says how to log in.
        assert "agenthost auth login remote" in proc.stdout
        assert "(code" not in proc.stdout
    finally:
        server.shutdown()
        server.server_close()


# ----------------------------------------------------------------------------- 8 streaming


class StreamingLocalServer:
    """An OpenAI-compatible endpoint streaming ``first``, then ``rest`` once released.

    Between the two it waits until the test has seen ``first`` on agenthost's stdout, so
    the test passes only if the text is shown while the model is still answering.
    """

    def __init__(self, first: str, rest: str) -> None:
        import http.server
        import threading

        self.release = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                assert body.get("stream") is True, "expected a streaming request"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self._chunk({"role": "assistant", "content": first}, None)
                outer.release.wait(30)
                self._chunk({"content": rest}, None)
                self._chunk({}, "stop")
                usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
                self._event({**self._base(), "choices": [], "usage": usage})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _base(self) -> dict[str, Any]:
                return {
                    "id": "chatcmpl-s1",
                    "object": "chat.completion.chunk",
                    "created": 1790000000,
                    "model": "stub-model",
                }

            def _chunk(self, delta: dict[str, Any], finish: str | None) -> None:
                choice = {"index": 0, "delta": delta, "finish_reason": finish}
                self._event({**self._base(), "choices": [choice]})

            def _event(self, data: dict[str, Any]) -> None:
                self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
                self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    import select
    import time

    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            seen += chunk
    return seen


def test_run_streams_the_answer_as_it_arrives(project: Project) -> None:
    local = StreamingLocalServer("Hello from", " the stream")
    project.write(".mcp.json", {"mcpServers": {}})
    env = {**project.env, "OPENAI_BASE_URL": local.url, "OPENAI_MODEL": "stub-model"}
    proc = subprocess.Popen(
        [*AGENTHOST, "run", "hi"],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        early = read_until(proc.stdout.fileno(), b"Hello from", 30)
        assert b"Hello from" in early, early  # shown before the model finished
        local.release.set()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        text = (early + out).decode()
        assert text.count("Hello from the stream") == 1  # not printed again at the end
    finally:
        local.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
