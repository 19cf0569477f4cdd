"""Issue 27, section 3: the rest of a new user's first hour, the CLI as a subprocess.

Each test runs the real ``agenthost`` command (``python -m agenthost``) against real MCP
servers (the official SDK peer, the crashy peer, the bundled notes server) in a project
directory of its own, with the private home every test gets (tests/conftest.py), so the
default state directory (``$XDG_STATE_HOME/agenthost``) is the test's own.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agenthost.cli.commands.call import follow_command
from tests.forkserver import peer_python

Command = tuple[str, list[str]]
AGENTHOST = [peer_python(), "-m", "agenthost"]
REPO = Path(__file__).resolve().parent.parent
#: Each test runs a few agenthost processes, each starting its servers.
pytestmark = pytest.mark.timeout(180)


def agenthost(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """One ``agenthost`` command line, without API keys from the developer's environment."""
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    base.pop("OPENAI_BASE_URL", None)
    return subprocess.run(
        [*AGENTHOST, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**base, **(env or {})},
    )


def toml_str(value: Any) -> str:
    return json.dumps(value)


def server_table(name: str, cmd: Command) -> str:
    return f"[servers.{name}]\ncommand = {toml_str(cmd[0])}\nargs = {toml_str(cmd[1])}\n"


def state_dir() -> Path:
    """The test's own ``$XDG_STATE_HOME/agenthost`` (conftest points it into tmp)."""
    return Path(os.environ["XDG_STATE_HOME"]) / "agenthost"


ECHO = '{"message": "hi"}'
HEADLESS_ALLOW = '[policy]\nmode = "headless"\npreset = "unsafe-allow-everything"\n'


# ----------------------------------------------------------------------------- audit


def test_audit_is_on_by_default_and_audit_false_turns_it_off(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    config = tmp_path / "agenthost.toml"
    config.write_text(server_table("sdk", sdk_server_cmd()) + HEADLESS_ALLOW)
    proc = agenthost(
        "--config", str(config), "call", "sdk__echo", '{"message": "hi"}', cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    audit = state_dir() / "audit.jsonl"
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert any(r.get("name") == "echo" and r.get("event") == "decision" for r in lines), lines
    assert audit.stat().st_mode & 0o077 == 0
    shown = agenthost("--config", str(config), "audit", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert len(json.loads(shown.stdout)) == len(lines)

    audit.unlink()
    config.write_text(server_table("sdk", sdk_server_cmd()) + HEADLESS_ALLOW + "audit = false\n")
    proc = agenthost(
        "--config", str(config), "call", "sdk__echo", '{"message": "hi"}', cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert not audit.exists()


# ----------------------------------------------------------------------------- no provider


def no_provider_config(tmp_path: Path, sdk_server_cmd: Callable[..., Command]) -> Path:
    """A config with one server that leaves a mark when it starts, and no provider."""
    marker = tmp_path / "started"
    cmd, args = sdk_server_cmd()
    script = f"touch {json.dumps(str(marker))} && exec {cmd} {' '.join(args)}"
    config = tmp_path / "agenthost.toml"
    config.write_text(server_table("sdk", ("/bin/sh", ["-c", script])) + HEADLESS_ALLOW)
    return config


def test_run_without_a_provider_fails_before_starting_servers(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    config = no_provider_config(tmp_path, sdk_server_cmd)
    proc = agenthost("--config", str(config), "run", "hello", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "no LLM provider is configured" in proc.stderr
    assert "ANTHROPIC_API_KEY" in proc.stderr
    assert not (tmp_path / "started").exists()
    # A provider named with --model that is not configured: the same, before any server.
    proc = agenthost("--config", str(config), "run", "hello", "--model", "x/y", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "'x'" in proc.stderr
    assert not (tmp_path / "started").exists()


def test_chat_without_a_provider_says_how_to_add_one_and_goes_on(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    config = no_provider_config(tmp_path, sdk_server_cmd)
    proc = subprocess.run(
        [*AGENTHOST, "--config", str(config), "chat"],
        input="hello\n/tools\n",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
    )
    assert proc.returncode == 0, proc.stderr
    assert "no LLM provider is configured" in proc.stderr
    assert "[providers." in proc.stderr
    assert "sdk__echo" in proc.stdout  # /tools ran after the message: the chat went on


def test_tools_and_check_say_sampling_is_unavailable_without_a_provider(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    config = no_provider_config(tmp_path, sdk_server_cmd)
    proc = agenthost("--config", str(config), "tools", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no LLM provider is configured" in proc.stderr
    assert "sampling" in proc.stderr
    proc = agenthost("--config", str(config), "check", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no LLM provider is configured" in proc.stdout + proc.stderr
    # With a provider there is nothing to say.
    config.write_text(
        config.read_text() + '\n[providers.r]\nkind = "scripted"\nscript = "s.toml"\n'
    )
    (tmp_path / "s.toml").write_text('[[turns]]\ntext = "hi"\n')
    proc = agenthost("--config", str(config), "tools", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no LLM provider" not in proc.stderr


# ----------------------------------------------------------------------------- failures


def failing_config(tmp_path: Path, crashy_cmd: Callable[..., Command], extra: str = "") -> Path:
    config = tmp_path / "agenthost.toml"
    with socket.socket() as probe:  # a port nothing listens on: bound, then closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config.write_text(
        server_table("missing", ("/nonexistent/bin/server", []))
        + server_table("dies", crashy_cmd("--crash-on-start"))
        + f'[servers.gone]\nurl = "http://127.0.0.1:{port}/mcp"\n'
        + "[servers.gone.restart]\nenabled = false\n"
        + '[providers.r]\nkind = "scripted"\nscript = "s.toml"\n'
        + HEADLESS_ALLOW
        + extra
    )
    (tmp_path / "s.toml").write_text('[[turns]]\ntext = "done"\n')
    return config


@pytest.mark.parametrize("command", [["tools"], ["run", "hi"], ["prompts"]])
def test_a_server_that_fails_to_start_is_reported_once(
    tmp_path: Path, crashy_cmd: Callable[..., Command], command: list[str]
) -> None:
    config = failing_config(tmp_path, crashy_cmd)
    proc = agenthost("--config", str(config), *command, cwd=tmp_path)
    assert proc.returncode in (0, 5), proc.stderr
    for name, why in (
        ("missing", "command not found"),
        ("dies", "crashing on start as asked"),
        ("gone", "cannot reach"),
    ):
        mentions = [line for line in proc.stderr.splitlines() if why in line]
        assert len(mentions) == 1, proc.stderr
        assert f"{name}: {name}:" not in proc.stderr
    # -q: no warnings, no progress; the exit code says it.
    proc = agenthost("--config", str(config), "-q", *command, cwd=tmp_path)
    assert proc.returncode in (0, 5)
    assert proc.stderr == ""


def test_check_always_shows_the_last_stderr_lines_of_a_server_that_exits_at_once(
    tmp_path: Path,
) -> None:
    # Six copies in one run: before the fix, 2 in 4 lost their last words (the write of
    # `initialize` failed first, and its error was written before stderr was read).
    config = tmp_path / "agenthost.toml"
    script = "echo 'last words: boom' >&2; exit 3"
    config.write_text("".join(server_table(f"q{i}", ("/bin/sh", ["-c", script])) for i in range(6)))
    proc = agenthost("--config", str(config), "check", "--json", cwd=tmp_path)
    assert proc.returncode == 5, proc.stderr
    errors = [row["last_error"] for row in json.loads(proc.stdout)]
    assert all("last stderr: last words: boom" in e for e in errors), errors


HTML_SITE = """
import http.server, sys

PAGE = (b"<!DOCTYPE html><html><head><title>Not Found</title><style>body{}</style></head>"
        b"<body><h1>Not Found</h1><p>The requested URL was not found.</p></body></html>")

class Site(http.server.BaseHTTPRequestHandler):
    def answer(self, code):
        self.send_response(code)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.answer(405)
    def do_GET(self):
        self.answer(404)
    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", 0), Site)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def test_the_sse_fallback_shows_no_html_page(tmp_path: Path) -> None:
    site = tmp_path / "site.py"
    site.write_text(HTML_SITE)
    with subprocess.Popen([sys.executable, str(site)], stdout=subprocess.PIPE, text=True) as web:
        try:
            assert web.stdout is not None
            port = int(web.stdout.readline())
            config = tmp_path / "agenthost.toml"
            config.write_text(f'[servers.web]\nurl = "http://127.0.0.1:{port}/mcp"\n')
            proc = agenthost("--config", str(config), "check", "-v", cwd=tmp_path)
        finally:
            web.terminate()
    assert proc.returncode == 5, proc.stderr
    out = proc.stdout + proc.stderr
    assert "legacy HTTP+SSE" in out
    assert "<" not in out and "DOCTYPE" not in out and "body{}" not in out, out
    assert "an HTML page (Not Found)" in out


# ----------------------------------------------------------------------------- examples


def examples_readme_commands() -> list[str]:
    """The commands examples/README.md tells a reader to try on the demo config."""
    text = (REPO / "examples" / "README.md").read_text(encoding="utf-8")
    start = text.index("Try the other commands")
    paragraph = text[start : text.index("\n## ", start)]
    return re.findall(r"`([^`]+)`", paragraph)


def test_every_command_in_the_examples_readme_works_as_written(tmp_path: Path) -> None:
    import shlex
    import shutil

    shutil.copytree(
        REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("*.jsonl")
    )
    env = {"AGENTHOST_PYTHON": peer_python()}
    commands = examples_readme_commands()
    assert len(commands) >= 7, commands
    for command in commands:
        proc = agenthost(
            "--config", "examples/agenthost.toml", *shlex.split(command), cwd=tmp_path, env=env
        )
        if "../x" in command:  # the README says the server refuses it
            assert proc.returncode == 1, (command, proc.stdout, proc.stderr)
            assert not (tmp_path / "examples" / "x").exists()
        else:
            assert proc.returncode == 0, (command, proc.stdout, proc.stderr)
            assert proc.stdout.strip(), command


# ----------------------------------------------------------------------------- provider


FAKE_LLM = """
import http.server, sys

BODY = (b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
        b'"delta":{"content":"hi"}}]}\\n\\ndata: [DONE]\\n\\n')

class Api(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", sys.argv[1])
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)
    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", 0), Api)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@pytest.mark.parametrize("kind", ["openai-compatible", "anthropic", "openai-responses"])
@pytest.mark.parametrize("content_type", ["text/event-stream", "application/json"])
def test_a_malformed_provider_response_is_a_provider_error(
    tmp_path: Path, content_type: str, kind: str
) -> None:
    api = tmp_path / "api.py"
    api.write_text(FAKE_LLM)
    with subprocess.Popen(
        [sys.executable, str(api), content_type], stdout=subprocess.PIPE, text=True
    ) as llm:
        try:
            assert llm.stdout is not None
            port = int(llm.stdout.readline())
            config = tmp_path / "agenthost.toml"
            base = f"http://127.0.0.1:{port}" + ("/v1" if kind != "anthropic" else "")
            extra = 'api = "responses"\n' if kind == "openai-responses" else ""
            kind = "openai-compatible" if extra else kind
            config.write_text(
                f'[providers.local]\nkind = "{kind}"\nbase_url = "{base}"\n'
                f'default_model = "m"\nmax_retries = 0\n{extra}'
            )
            key = {"ANTHROPIC_API_KEY": "test-key"}
            proc = agenthost(
                "--config", str(config), "run", "hello", "--json", cwd=tmp_path, env=key
            )
        finally:
            llm.terminate()
    assert proc.returncode == 4, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "provider error" in line]
    assert len(errors) == 1 and "local" in errors[0], proc.stderr


# ----------------------------------------------------------------------------- tasks


def test_tasks_list_says_when_there_are_none(
    tmp_path: Path, everything_cmd: Callable[[], Command]
) -> None:
    config = tmp_path / "agenthost.toml"
    config.write_text(server_table("ev", everything_cmd()))
    proc = agenthost("--config", str(config), "tasks", "list", "ev", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "no tasks on ev"


# ----------------------------------------------------------------------------- chat


def test_chat_call_takes_the_json_as_typed(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    config = tmp_path / "agenthost.toml"
    config.write_text(server_table("sdk", sdk_server_cmd()) + HEADLESS_ALLOW)
    typed = """/call sdk__echo {"message": "it's a \\"quoted\\" text"}\n"""
    typed += """/call sdk__echo '{"message": "shell-quoted too"}'\n"""
    proc = subprocess.run(
        [*AGENTHOST, "--config", str(config), "chat"],
        input=typed,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert """it's a "quoted" text""" in proc.stdout, (proc.stdout, proc.stderr)
    assert "shell-quoted too" in proc.stdout, (proc.stdout, proc.stderr)


# ----------------------------------------------------------------------------- help


def test_an_unknown_tool_suggests_the_closest_name(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    config = tmp_path / "agenthost.toml"
    config.write_text(server_table("sdk", sdk_server_cmd()) + HEADLESS_ALLOW)
    proc = agenthost("--config", str(config), "call", "sdk__ecoh", ECHO, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "did you mean sdk__echo?" in proc.stderr
    proc = agenthost("--config", str(config), "call", "sdl__echo", ECHO, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "did you mean sdk__echo?" in proc.stderr


def test_bare_agenthost_prints_help() -> None:
    proc = agenthost(cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "usage: agenthost" in proc.stdout
    assert "Exit codes" in proc.stdout and "call" in proc.stdout


def positionals_without_help(text: str) -> list[str]:
    """The positional arguments an ``--help`` text lists with no description."""
    section = text.split("positional arguments:\n", 1)
    if len(section) < 2:
        return []
    lines = section[1].split("\n\n", 1)[0].splitlines()
    bare = []
    for i, line in enumerate(lines):
        entry = re.match(r"^  (\S+)(\s{2,}\S.*)?$", line)
        if entry is None or entry.group(2):
            continue
        described_below = i + 1 < len(lines) and lines[i + 1].startswith("    ")
        if not described_below:
            bare.append(entry.group(1))
    return bare


def test_help_describes_every_positional_and_gives_examples(tmp_path: Path) -> None:
    main = agenthost("--help", cwd=tmp_path)
    assert main.returncode == 0
    assert "examples:" in main.stdout.lower()
    assert "agenthost.toml" in main.stdout
    assert "default: ./agenthost.toml" not in main.stdout  # it is not the default
    assert "$XDG_CONFIG_HOME/agenthost/agenthost.toml" in main.stdout
    commands = re.findall(r"^    (\w+)\s", main.stdout.split("command\n", 1)[-1], re.MULTILINE)
    assert {"run", "call", "tasks", "read", "prompt", "auth"} <= set(commands), commands
    bare = {}
    for command in commands:
        text = agenthost(command, "--help", cwd=tmp_path).stdout
        missing = positionals_without_help(text)
        if missing:
            bare[command] = missing
    assert bare == {}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion(tmp_path: Path, shell: str) -> None:
    code = agenthost("completion", shell, cwd=tmp_path)
    assert code.returncode == 0, code.stderr
    assert "agenthost" in code.stdout and "_ARGCOMPLETE" in code.stdout
    if shell == "bash":
        script = tmp_path / "complete.bash"
        script.write_text(code.stdout)
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    # What the shell code asks the program, as that shell asks it.
    answers = tmp_path / "answers"
    for line, want in (("agenthost ta", "tasks"), ("agenthost tasks l", "list")):
        proc = agenthost(
            cwd=tmp_path,
            env={
                "_ARGCOMPLETE": "1",
                "_ARGCOMPLETE_SHELL": shell,
                "COMP_LINE": line,
                "COMP_POINT": str(len(line)),
                "_ARGCOMPLETE_STDOUT_FILENAME": str(answers),
            },
        )
        assert proc.returncode == 0, proc.stderr
        assert want in answers.read_text().split(), answers.read_text()


# ----------------------------------------------------------------------------- read


def test_read_output_saves_a_binary_resource(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    config = tmp_path / "agenthost.toml"
    config.write_text(server_table("sdk", sdk_server_cmd()) + HEADLESS_ALLOW)
    saved = tmp_path / "pixel.png"
    proc = agenthost(
        "--config", str(config), "read", "bin://pixel", "--output", str(saved), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    data = saved.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n"), data[:16]
    assert f"{len(data)} bytes" in proc.stderr and "image/png" in proc.stderr
    text = tmp_path / "readme.txt"
    proc = agenthost(
        "--config", str(config), "read", "text://readme", "-o", str(text), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert text.read_text().startswith("agenthost sdk peer readme")


# ----------------------------------------------------------------------------- cancel


def test_a_cancelled_call_is_audited_as_cancelled_by_the_user(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    import signal
    import time

    config = tmp_path / "agenthost.toml"
    config.write_text(server_table("sdk", sdk_server_cmd()) + HEADLESS_ALLOW)
    audit = state_dir() / "audit.jsonl"
    with subprocess.Popen(
        [*AGENTHOST, "--config", str(config), "call", "sdk__slow", '{"seconds": 30}'],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as call:
        deadline = time.monotonic() + 60
        while not (audit.exists() and '"decision"' in audit.read_text()):
            assert time.monotonic() < deadline and call.poll() is None, call.stderr
            time.sleep(0.05)
        time.sleep(0.3)  # the request is out
        call.send_signal(signal.SIGINT)
        _, err = call.communicate(timeout=30)
    assert call.returncode == 130, err
    [outcome] = [
        r for r in map(json.loads, audit.read_text().splitlines()) if r["event"] == "outcome"
    ]
    assert outcome["error"] == "cancelled by the user", outcome


# ----------------------------------------------------------------------------- elicitation


def test_canned_answers_naming_unknown_fields_warn(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    config = tmp_path / "agenthost.toml"
    config.write_text(
        server_table("sdk", sdk_server_cmd())
        + HEADLESS_ALLOW
        + '[[policy.rules]]\nid = "about-me"\nkind = "elicitation"\ndecision = "allow"\n'
        + 'mode = "form"\nanswers = { nmae = "Ada", age = 36 }\n'
    )
    proc = agenthost("--config", str(config), "call", "sdk__elicit_form", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert '"decline"' in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if "about-me" in line]
    assert len(warnings) == 1, proc.stderr
    assert "nmae" in warnings[0] and "no such field" in warnings[0]


# ----------------------------------------------------------------------------- docs


def test_config_docs_describe_providers_and_the_replay_format() -> None:
    text = (REPO / "docs" / "config.md").read_text(encoding="utf-8")
    assert "\n## Providers\n" in text
    section = text.split("\n## Providers\n", 1)[1].split("\n## ", 1)[0]
    for key in ("kind", "api_key_env", "base_url", "default_model", "timeout", "max_retries"):
        assert f"`{key}`" in section, key
    for figure in ("context_window", "input_cost", "output_cost", "tier", "speed"):
        assert figure in section, figure
    for replay in ("[[turns]]", "[[turns.tool_calls]]", "stop_reason", "script exhausted"):
        assert replay in section, replay


# ----------------------------------------------------------------------------- README


def test_version_lists_every_revision_spoken(tmp_path: Path) -> None:
    proc = agenthost("--version", cwd=tmp_path)
    assert proc.returncode == 0
    spoken = sorted(p.name for p in (REPO / "tests" / "data" / "spec").iterdir() if p.is_dir())
    assert "2026-07-28" in spoken
    for revision in spoken:
        assert revision in proc.stdout, (revision, proc.stdout)


def test_the_performance_table_lives_in_docs_performance_md() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    performance = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    assert "<!-- bench:table -->" not in readme
    assert "<!-- bench:table -->" in performance and "<!-- /bench:table -->" in performance
    summary = readme.split("\n## Performance\n", 1)[1].split("\n## ", 1)[0]
    assert "docs/performance.md" in summary
    assert summary.count("\n|") <= 8, "a short summary, not the table"
    rows = performance.split("<!-- bench:table -->", 1)[1].count("\n|")
    assert rows >= 30


def test_the_readme_says_how_to_install() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    for command in ("pipx install ./agenthost", "uv tool install ./agenthost", "git+"):
        assert command in section, command
    assert "audit.jsonl" in section and "audit = false" in section


# ----------------------------------------------------------------------------- schema


def config_examples() -> list[tuple[str, str]]:
    """Every agenthost.toml example: the demo config and the docs' TOML config blocks."""
    found = [("examples/agenthost.toml", (REPO / "examples" / "agenthost.toml").read_text())]
    for doc in ("README.md", "docs/config.md"):
        text = (REPO / doc).read_text(encoding="utf-8")
        for match in re.finditer(r"^```toml\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
            block = match.group(1)
            # A replay script, or another host's own file (Codex's config.toml), is not one.
            if block.startswith("# ~/.codex/"):
                continue
            if not re.search(r"^\[\[turns\]\]", block, re.MULTILINE):
                found.append((f"{doc}:{text.count(chr(10), 0, match.start()) + 1}", match.group(1)))
    return found


def test_the_config_schema_accepts_every_example_and_flags_misspelt_keys(
    tmp_path: Path,
) -> None:
    import tomllib

    import jsonschema

    proc = agenthost("schema", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    examples = config_examples()
    assert len(examples) >= 8
    for where, text in examples:
        errors = [e.message for e in validator.iter_errors(tomllib.loads(text))]
        assert errors == [], where
    for wrong in (
        '[servers.fs]\ncomand = "npx"\n',
        '[server.fs]\ncommand = "npx"\n',
        '[servers.fs]\ncommand = "npx"\ntimeouts = { startup = "soon" }\n',
        '[policy]\nmode = "headles"\n',
        '[providers.x]\nkind = "anthropic"\nmax_retry = 3\n',
    ):
        assert list(validator.iter_errors(tomllib.loads(wrong))), wrong


# ----------------------------------------------------------------------------- detach


async def test_call_detach_prints_a_task_id_that_later_commands_follow(tmp_path: Path) -> None:
    import trio

    from tests.peers.http_launch import free_port, serve

    port = free_port()
    argv = [peer_python(), str(REPO / "tests" / "peers" / "tasks_server.py")]
    async with serve([*argv, "streamable-http", "--port", str(port)], port):
        config = tmp_path / "agenthost.toml"
        config.write_text(f'[servers.tk]\nurl = "http://127.0.0.1:{port}/mcp"\n' + HEADLESS_ALLOW)

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return agenthost("--config", str(config), *args, cwd=tmp_path)

        started = await trio.to_thread.run_sync(
            lambda: cli("call", "tk__research", '{"topic": "tides", "steps": 3}', "--detach")
        )
        assert started.returncode == 0, started.stderr
        task_id = started.stdout.strip()
        assert task_id and " " not in task_id, started.stdout
        # The printed command, as a user pastes it (a random id may start with a dash).
        printed = re.search(r"`agenthost (tasks result [^`]+)`", started.stderr)
        assert printed is not None, started.stderr
        follow = shlex.split(printed.group(1))
        assert follow[:3] == ["tasks", "result", "tk"] and follow[-1] == task_id
        result = await trio.to_thread.run_sync(lambda: cli(*follow))
        assert result.returncode == 0, result.stderr
        assert "Report on tides: 3 sources read." in result.stdout
        # An id that starts like an option: after "--", an id the server does not know,
        # not a usage error (a random id did start with "-" and the command failed).
        dashed = await trio.to_thread.run_sync(
            lambda: cli(*shlex.split(follow_command("get", "tk", "-bGkFU5x_not-a-task"))[1:])
        )
        assert dashed.returncode == 1, dashed.stderr
        assert "tk: Task -bGkFU5x_not-a-task not found" in dashed.stderr, dashed.stderr
    audit = [json.loads(line) for line in (state_dir() / "audit.jsonl").read_text().splitlines()]
    [outcome] = [r for r in audit if r["event"] == "outcome" and r["name"] == "research"]
    assert outcome["error"] is None, json.dumps(outcome)
    assert "detached_task" in outcome["result"], json.dumps(outcome)  # the id: redacted
