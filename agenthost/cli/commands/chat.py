"""``agenthost chat``: the interactive session (the REPL itself is :mod:`agenthost.cli.chat`)."""

from __future__ import annotations

import argparse
from typing import Any

from agenthost.cli.common import add_command, load_config, open_host, split_model
from agenthost.cli.render import Console

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``chat`` on the CLI's subparsers."""
    chat = add_command(
        sub, common, "chat", "an interactive session with slash commands (/tools, /prompts, ...)"
    )
    chat.add_argument("--model", help="provider/model")


async def run(args: argparse.Namespace, console: Console) -> int:
    """Run ``agenthost chat``; returns the exit code."""
    from agenthost.cli.chat import chat

    config = load_config(args)
    provider, model = split_model(args.model)
    async with open_host(args, config, console) as host:
        return await chat(host, console, provider=provider, model=model)
