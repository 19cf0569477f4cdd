"""``agenthost serve``: keep every session up, serving sampling and elicitation, until Ctrl-C."""

from __future__ import annotations

import argparse
from typing import Any

from agenthost.cli.common import add_command, interruptible, load_config, open_host
from agenthost.cli.exit import EXIT_OK
from agenthost.cli.render import Console

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``serve`` on the CLI's subparsers."""
    add_command(
        sub, common, "serve", "keep every session up and serve sampling/elicitation until Ctrl-C"
    )


async def run(args: argparse.Namespace, console: Console) -> int:
    """Run ``agenthost serve``; returns the exit code."""
    import math

    import trio

    config = load_config(args)
    async with open_host(args, config, console) as host:
        for status in host.status():
            console.line(
                f"{status.name}: {status.state.value} ({status.era or '-'},"
                f" {status.revision or '-'})"
            )
        async with interruptible():
            console.line("serving sampling and elicitation; Ctrl-C to stop")
            await trio.sleep(math.inf)  # until Ctrl-C
    return EXIT_OK
