"""``agenthost serve``: agenthost as an MCP server in front of every configured server.

Over stdio (the default) the downstream client starts ``agenthost serve`` and talks on its
stdin/stdout; the session ends when the client closes stdin. Everything human-readable
(each upstream's state, warnings) goes to stderr, never to stdout.
"""

from __future__ import annotations

import argparse
from typing import Any

from agenthost.cli.common import add_command, load_config
from agenthost.cli.exit import EXIT_OK
from agenthost.cli.render import Console

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``serve`` on the CLI's subparsers."""
    add_command(
        sub,
        common,
        "serve",
        "serve every configured server as one MCP server (stdio), with agenthost's policy",
    )


async def run(args: argparse.Namespace, console: Console) -> int:
    """Run ``agenthost serve``; returns the exit code."""
    import signal

    import trio

    from agenthost.auth.loopback import URL_OPENER
    from agenthost.cli.common import AFTER_STARTUP, interactive_opener
    from agenthost.serve import open_gateway, serve_stdio

    config = load_config(args)
    URL_OPENER.set(interactive_opener())
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_gateway(config) as gateway:
            after_startup = AFTER_STARTUP.get()
            if after_startup is not None:
                after_startup()
            for status in gateway.host.status():
                console.line(
                    f"{status.name}: {status.state.value} ({status.era or '-'},"
                    f" {status.revision or '-'})"
                )
            console.line("serving MCP on stdio")
            async with trio.open_nursery() as nursery:

                async def stop_on_signal() -> None:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()
                        return

                async def serve() -> None:
                    await serve_stdio(gateway)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(stop_on_signal)
                nursery.start_soon(serve)
    return EXIT_OK
