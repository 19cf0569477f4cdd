"""A hostile stdio MCP server: every byte around a call's answer is the test's choice.

Why it exists: a stdio caller alone reads its own answer from the server's stdout
(agenthost.rpc ``_read_answer``, ``StdioTransport.receive_answers``). The attacks in
``test_hostile_stdio_alone.py`` need to put arbitrary bytes, in arbitrary writes, at
arbitrary times, exactly where that caller reads. Stdlib only.

Tools (``tools/call`` by name):

- ``echo``: answers ``message`` at once.
- ``script``: runs ``steps`` in order, each a dict with one of these keys:

  - ``write``: text written in one ``write`` (UTF-8); ``@ID@`` is replaced by the JSON of
    the call's id, ``@ANSWER@`` by the answer object (``message`` as its text), without
    its newline. With ``newlines_first``, that many ``\\n`` before it, in the same write.
  - ``sized``: the answer line, after ``lead``, padded with spaces to exactly that many
    bytes, then ``end`` (default ``\n``).
  - ``split_at``: the answer line in two writes ``gap`` seconds apart, cut at that byte.
  - ``pipe_size``: resize the stdout pipe (``F_SETPIPE_SZ``): one write, one read.
  - ``hex``: bytes given in hex, in one write (no substitution).
  - ``spaces``: that many spaces (a long line of JSON whitespace), no newline.
  - ``newlines``: that many ``\\n``.
  - ``sleep``: seconds.
  - ``flood``: a line (``@ID@`` and ``@N@`` substituted, the latter by a counter) written
    over and over until the next request comes in, or ``seconds`` (default 30) passed.
  - ``stderr``: that many bytes of junk written to stderr, in 4 KiB writes.
  - ``holder``: start a detached ``sleep`` of that many seconds that inherits stdout.
  - ``close_stdout``: close stdout and keep running (until stdin closes).
  - ``exit``: exit with that code at once.
  - ``prefix``: text written just before the next answer to an ``echo`` (same write).

Every received line is appended to ``$AGENTHOST_PEER_LOG`` (when set). Requests are read
and answered in order, one at a time.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import time
from typing import Any

__all__ = ["main"]

TOOLS = [{"name": name, "inputSchema": {"type": "object"}} for name in ("echo", "script")]


class Lines:
    """Lines off fd 0 without blocking when asked (a flood stops for the next request)."""

    def __init__(self) -> None:
        self.buf = b""
        self.ready: list[bytes] = []
        self.eof = False

    def _fill(self, timeout: float | None) -> None:
        readable, _, _ = select.select([0], [], [], timeout)
        if not readable:
            return
        data = os.read(0, 65536)
        if not data:
            self.eof = True
            return
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        self.ready.extend(lines)

    def next(self) -> bytes | None:
        while not self.ready and not self.eof:
            self._fill(None)
        return self.ready.pop(0) if self.ready else None

    def request_waiting(self) -> bool:
        """Whether a request (not a notification) came in, without blocking."""
        self._fill(0)
        return any(b'"id"' in line and b'"method"' in line for line in self.ready)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def main() -> None:
    log_path = os.environ.get("AGENTHOST_PEER_LOG")
    lines = Lines()
    prefix = b""
    stdout_open = True

    def line(message: dict[str, Any]) -> bytes:
        return json.dumps(message).encode() + b"\n"

    def text(request_id: Any, value: str) -> bytes:
        result = {"content": [{"type": "text", "text": value}]}
        return line({"jsonrpc": "2.0", "id": request_id, "result": result})

    def out(data: bytes) -> None:
        if stdout_open:
            write_all(1, data)

    while True:
        raw = lines.next()
        if raw is None:
            return
        if log_path:
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(raw.decode(errors="replace").strip() + "\n")
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        method = msg.get("method")
        request_id = msg.get("id")
        if method is None or request_id is None:
            continue
        if method == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "alone-hostile", "version": "1"},
            }
            out(line({"jsonrpc": "2.0", "id": request_id, "result": result}))
        elif method == "tools/list":
            out(line({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}}))
        elif method == "tools/call":
            name = msg["params"]["name"]
            args = msg["params"].get("arguments") or {}
            message = str(args.get("message", ""))
            if name == "echo":
                out(prefix + text(request_id, message))
                prefix = b""
                continue
            rid = json.dumps(request_id)
            answer = text(request_id, message).decode().rstrip("\n")
            for step in args.get("steps", []):
                if "write" in step:
                    data = step["write"].replace("@ID@", rid).replace("@ANSWER@", answer)
                    out(b"\n" * int(step.get("newlines_first", 0)) + data.encode())
                elif "hex" in step:
                    out(bytes.fromhex(step["hex"]))
                elif "spaces" in step:
                    out(b" " * int(step["spaces"]))
                elif "newlines" in step:
                    out(b"\n" * int(step["newlines"]))
                elif "sleep" in step:
                    time.sleep(float(step["sleep"]))
                elif "flood" in step:
                    until = time.monotonic() + float(step.get("seconds", 30))
                    n = 0
                    template = step["flood"].replace("@ID@", rid)
                    while time.monotonic() < until and not lines.request_waiting():
                        batch = "".join(template.replace("@N@", str(n + i)) for i in range(50))
                        n += 50
                        out(batch.encode())
                elif "stderr" in step:
                    junk = b"E" * 4095 + b"\n"
                    for _ in range(int(step["stderr"]) // 4096):
                        write_all(2, junk)
                elif "pipe_size" in step:
                    fcntl.fcntl(1, 1031, int(step["pipe_size"]))  # F_SETPIPE_SZ (Linux)
                elif "holder" in step:  # a detached descendant that keeps stdout open
                    subprocess.Popen(["sleep", str(step["holder"])], start_new_session=True)
                elif "close_stdout" in step:
                    os.close(1)
                    stdout_open = False
                elif "exit" in step:
                    os._exit(int(step["exit"]))
                elif "prefix" in step:
                    prefix = step["prefix"].encode()
                elif "sized" in step:
                    body = (step.get("lead", "") + answer).encode()
                    pad = int(step["sized"]) - len(body)
                    out(body + b" " * pad + step.get("end", "\n").encode())
                elif "split_at" in step:
                    data = (answer + "\n").encode()
                    cut = min(int(step["split_at"]), len(data))
                    out(data[:cut])
                    time.sleep(float(step.get("gap", 0.005)))
                    out(data[cut:])
        else:
            error = {"code": -32601, "message": "method not found"}
            out(line({"jsonrpc": "2.0", "id": request_id, "error": error}))


if __name__ == "__main__":
    main()
