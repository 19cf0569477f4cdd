"""A WebSocket MCP server for the tests: trio-websocket in front of a stdio MCP server.

Why it exists: no WebSocket MCP server ships with the test peers, and the transport must
be tested against a real one. Each connection that asks for the ``mcp`` subprotocol gets
its own child process (the command after ``--``): every text frame becomes one line on
the child's stdin, every line of its stdout one text frame. When either side ends, the
other is closed; the child is terminated with its connection.

Usage::

    python tests/peers/ws_bridge.py --port N [--token T] -- python tests/peers/crashy_server.py

With ``--token T`` a handshake without ``Authorization: Bearer T`` is rejected (401).
With ``--certfile PEM --keyfile PEM`` it serves ``wss://`` (TLS). Binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import signal
import ssl
import subprocess
from functools import partial

import trio
from trio_websocket import ConnectionClosed, WebSocketRequest, serve_websocket

__all__ = ["main"]


async def handle(command: list[str], token: str | None, request: WebSocketRequest) -> None:
    if "mcp" not in request.proposed_subprotocols:
        await request.reject(400, body=b"subprotocol 'mcp' required")
        return
    if token is not None:
        headers = {k.lower(): v for k, v in request.headers}
        if headers.get(b"authorization") != f"Bearer {token}".encode():
            await request.reject(401, body=b"unauthorized")
            return
    ws = await request.accept(subprotocol="mcp")
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    async def frames_to_stdin() -> None:
        try:
            while True:
                message = await ws.get_message()
                text = message if isinstance(message, str) else message.decode()
                await stdin.send_all(text.encode() + b"\n")
        except (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        await stdin.aclose()

    async def stdout_to_frames() -> None:
        buf = b""
        while True:
            chunk = await stdout.receive_some(65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    try:
                        await ws.send_message(line.decode())
                    except ConnectionClosed:
                        return
        await ws.aclose(1000, "server process exited")

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(frames_to_stdin)
            await stdout_to_frames()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(3):
                    await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


async def run(port: int, token: str | None, command: list[str], tls: ssl.SSLContext | None) -> None:
    await serve_websocket(partial(handle, command, token), "127.0.0.1", port, ssl_context=tls)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", default=None)
    parser.add_argument("--certfile", help="serve wss:// with this certificate chain")
    parser.add_argument("--keyfile", help="the private key of --certfile")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    tls = None
    if args.certfile:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.certfile, args.keyfile)
    trio.run(run, args.port, args.token, command, tls)


if __name__ == "__main__":
    main()
