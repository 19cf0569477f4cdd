"""``agenthost serve``: agenthost as an MCP server in front of every configured server.

Over stdio (the default) the downstream client starts ``agenthost serve`` and talks on its
stdin/stdout; the session ends when the client closes stdin. Everything human-readable
(each upstream's state, warnings) goes to stderr, never to stdout.

Over ``--http`` every client authenticates, on loopback too (every local user reaches
loopback): with the token in ``AGENTHOST_SERVE_TOKEN``, else the user's own token file
(:mod:`agenthost.serve.local_token`, made on first use). Its path and a command that reads
it are printed, never the token: a secret in scrollback or a terminal log outlives the
session, and the file is already where the user can read it. ``--no-auth`` (loopback only,
with a warning) is the explicit way to serve without.
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
        help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio; clients send"
        " Authorization: Bearer with AGENTHOST_SERVE_TOKEN, else (loopback) the token kept in"
        " $XDG_STATE_HOME/agenthost/serve-token, made on first use",
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="with --http on loopback: accept clients without a token (every local user"
        " can then use your servers and answer your consent forms)",
    )


class _Auth:
    """How ``serve --http`` authenticates clients: the token (None: nobody asked) and
    the line that tells the user how to pass it."""

    def __init__(self, host: str, no_auth: bool) -> None:
        from agenthost.serve.http import check_bind, is_loopback
        from agenthost.serve.local_token import load_or_create, token_path

        given = os.environ.get(TOKEN_ENV) or None
        self.token: str | None = given
        self._file = None
        if no_auth:
            if given is not None:
                raise CLIError(f"--no-auth and {TOKEN_ENV} contradict: choose one", EXIT_USAGE)
            if not is_loopback(host):
                raise CLIError(
                    f"--no-auth is for loopback only: serving on {host} needs {TOKEN_ENV}",
                    EXIT_USAGE,
                )
        elif given is None and is_loopback(host):
            self._file = token_path()
            self.token = load_or_create(self._file)
        check_bind(host, self.token)

    def hint(self, url: str) -> str:
        if self.token is None:
            return (
                "warning: serving without authentication (--no-auth): every local user can"
                " use your servers and answer your consent forms"
            )
        if self._file is None:
            return f"clients send Authorization: Bearer ${TOKEN_ENV}"
        import shlex

        return (
            f"clients send Authorization: Bearer <the token in {self._file}>, e.g. claude mcp"
            f' add --transport http agenthost {url} --header "Authorization: Bearer'
            f' $(cat {shlex.quote(str(self._file))})"'
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
    if args.no_auth and address is None:
        raise CLIError("--no-auth goes with --http (stdio needs no authentication)", EXIT_USAGE)
    auth = _Auth(address[0], args.no_auth) if address is not None else None
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

                    assert auth is not None
                    port = await nursery.start(
                        partial(serve_http, gateway, address[0], address[1], token=auth.token)
                    )
                    url = f"http://{_host(address[0])}:{port}/mcp"
                    console.line(f"serving MCP at {url}")
                    console.line(auth.hint(url))
    return EXIT_OK
