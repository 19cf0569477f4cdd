"""``agenthost chat`` on a real pseudo-terminal: line editing, history, Tab, Ctrl-C, Ctrl-D.

The model is a local OpenAI-compatible endpoint (streamed chat.completion chunks, shaped
like the real API's) that answers "you said: <the user's last message>", so the test
sees exactly what the REPL sent; a message containing "hang" is answered only when the
test ends, to interrupt a turn in flight. The MCP server is server-everything (its
``completable-prompt`` completes ``name`` from the ``department`` chosen before it).
"""

from __future__ import annotations

import http.server
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.helpers import CHAT_READY as READY
from tests.helpers import CHAT_TIMEOUT as TIMEOUT
from tests.helpers import spawn_chat

Command = tuple[str, list[str]]


def inserted(text: str, whole: str) -> str:
    """A pattern for prompt_toolkit drawing a completion: ``text`` alone after what was
    typed, or ``whole`` (typed + completed) when it redraws the word in one go."""
    return f"(?:{re.escape(chr(27) + '[0m' + text)}|{re.escape(whole)})" + r"\x1b\["


class EchoModel:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.asked: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                said = body["messages"][-1]["content"]
                if isinstance(said, list):
                    said = "".join(part.get("text", "") for part in said)
                outer.asked.append(said)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                if "hang" in said:
                    outer.done.wait(TIMEOUT)
                    return
                self._chunk({"role": "assistant", "content": "you said: "}, None)
                self._chunk({"content": said}, None)
                self._chunk({}, "stop")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _chunk(self, delta: dict[str, Any], finish: str | None) -> None:
                data = {
                    "id": "chatcmpl-echo",
                    "object": "chat.completion.chunk",
                    "created": 1790000000,
                    "model": "echo",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
                self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
                self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.done.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def echo_model() -> Iterator[EchoModel]:
    model = EchoModel()
    yield model
    model.close()


@pytest.fixture
def chat(
    tmp_path: Path, echo_model: EchoModel, everything_cmd: Callable[[], Command]
) -> Iterator[Callable[[], pexpect.spawn[str]]]:
    cmd, args = everything_cmd()
    config = tmp_path / "agenthost.toml"
    config.write_text(
        f"""
[servers.everything]
command = {json.dumps(cmd)}
args = {json.dumps(args)}

[providers.local]
kind = "openai-compatible"
base_url = "{echo_model.url}"
default_model = "echo"

[policy]
mode = "headless"
preset = "unsafe-allow-everything"
"""
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        HOME=str(tmp_path / "home"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        TERM="xterm",
        # pexpect's terminal does not answer cursor position requests (a real one does).
        PROMPT_TOOLKIT_NO_CPR="1",
    )
    spawned: list[pexpect.spawn[str]] = []

    def start() -> pexpect.spawn[str]:
        child = spawn_chat(config, env=env, cwd=tmp_path)
        spawned.append(child)
        return child

    yield start
    for child in spawned:
        child.close(force=True)


@pytest.mark.timeout(180)  # two chat sessions and a dozen turns; ~20 s alone
def test_editing_history_completion_and_keys(
    chat: Callable[[], pexpect.spawn[str]], echo_model: EchoModel, tmp_path: Path
) -> None:
    child = chat()
    # Tab completes a slash command.
    child.send("/too\t")
    child.expect(inserted("ls", "/tools"))  # the rest of "/tools"
    child.send("\r")
    child.expect("everything__echo")
    child.expect_exact(READY)
    # An unknown command says so.
    child.send("/foo\r")
    child.expect("unknown command /foo")
    # A message; the answer streams back.
    child.send("first message\r")
    child.expect("you said: first message")
    child.expect_exact(READY)
    # Up recalls it (not "^[[A" sent to the model).
    child.send("\x1b[A\r")
    child.expect("you said: first message")
    child.expect_exact(READY)
    # Multi-line input: Esc Enter inserts a newline.
    child.send("line one\x1b\rline two\r")
    child.expect("line two")
    child.expect_exact(READY)
    assert echo_model.asked[-1] == "line one\nline two"
    # Ctrl-C at the prompt clears the line; nothing is sent.
    child.send("never sent")
    child.send("\x03")
    child.send("/servers\r")
    child.expect("ready")
    child.expect_exact(READY)
    assert "never sent" not in echo_model.asked
    # Ctrl-C during a turn cancels it; the REPL stays.
    child.send("please hang\r")
    child.expect("please hang")
    while "please hang" not in echo_model.asked:
        child.expect([pexpect.TIMEOUT], timeout=0.1)
    child.send("\x03")
    child.expect(r"\(interrupted\)")
    child.expect_exact(READY)
    # Completion that uses the arguments chosen before: names of the Engineering team.
    child.send("/prompt everything completable-prompt department=Engineering name=\t")
    child.expect("Alice")
    child.expect("Charlie")
    child.send("\x03")  # clear the line
    child.send("/prompt everything completable-prompt department=Sales name=E\t")
    child.expect(inserted("ve", "name=Eve"))  # the server's only Sales name starting with E
    child.send("\r")
    child.expect("added prompt everything/completable-prompt")
    child.expect_exact(READY)
    # Ctrl-D on an empty line leaves.
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    history = (tmp_path / "state" / "agenthost" / "chat_history").read_text()
    assert "first message" in history
    assert "never sent" not in history
    assert history.rstrip().endswith("department=Sales name=Eve")  # Tab completed it

    # History is kept across sessions.
    child = chat()
    child.send("\x1b[A\r")
    child.expect("added prompt everything/completable-prompt")
    child.expect_exact(READY)
    child.sendeof()
    child.expect(pexpect.EOF)
