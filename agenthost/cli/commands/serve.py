"""``agenthost serve``: agenthost as an MCP server in front of every configured server.

Over stdio (the default) the downstream client starts ``agenthost serve`` and talks on its
stdin/stdout; the session ends when the client closes stdin. Everything human-readable
(each upstream's state, warnings) goes to stderr, never to stdout.
"""

from __future__ import annotations

import argparse
import os
from functools import partial
from typing import Any, Final

from agenthost.cli.common import add_command, load_config
from agenthost.cli.exit import EXIT_OK, EXIT_USAGE, CLIError
from agenthost.cli.render import Console

__all__ = ["TOKEN_ENV", "add_parser", "run"]

#: The bearer token ``serve --http`` requires of every request (needed off loopback).
TOKEN_ENV: Final = "AGENTHOST_SERVE_TOKEN"


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``serve`` on the CLI's subparsers."""
    parser = add_command(
        sub,
        common,
        "serve",
        "serve every configured server as one MCP server (stdio, or --http), with agenthost's"
        " policy",
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio (a host other"
        " than loopback needs AGENTHOST_SERVE_TOKEN, the bearer token clients must send)",
    )


def _address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise CLIError(f"--http takes HOST:PORT, e.g. 127.0.0.1:8765 (got {value!r})", EXIT_USAGE)
    return host.strip("[]"), int(port)


async def run(args: argparse.Namespace, console: Console) -> int:
    """Run ``agenthost serve``; returns the exit code."""
    import signal

    import trio

    from agenthost.auth.loopback import URL_OPENER
    from agenthost.cli.common import AFTER_STARTUP, interactive_opener
    from agenthost.serve import open_gateway, serve_stdio

    address = _address(args.http) if args.http else None
    token = os.environ.get(TOKEN_ENV) or None
    if address is not None:
        from agenthost.serve.http import check_bind

        check_bind(address[0], token)
    config = load_config(args)
    URL_OPENER.set(interactive_opener())
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_gateway(config) as gateway:
            after_startup = AFTER_STARTUP.get()
            if after_startup is not None:
                after_startup()
            for status in gateway.host.status():
                # The supervisor logs a server that never started at INFO (a command's
                # summary reports it); here, this line is that summary: say why.
                why = f": {status.last_error}" if status.last_error else ""
                console.line(
                    f"{status.name}: {status.state.value} ({status.era or '-'},"
                    f" {status.revision or '-'}){why}"
                )
            async with trio.open_nursery() as nursery:

                async def stop_on_signal() -> None:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()
                        return

                async def serve() -> None:
                    console.line("serving MCP on stdio")
                    await serve_stdio(gateway)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(stop_on_signal)
                if address is None:
                    nursery.start_soon(serve)
                else:
                    from agenthost.serve.http import serve_http

                    port = await nursery.start(
                        partial(serve_http, gateway, address[0], address[1], token=token)
                    )
                    console.line(f"serving MCP at http://{_host(address[0])}:{port}/mcp")
    return EXIT_OK
