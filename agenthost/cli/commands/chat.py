"""``agenthost chat``: the interactive session (the REPL itself is :mod:`agenthost.cli.chat`)."""

from __future__ import annotations

import argparse
from typing import Any

from agenthost.cli.common import add_command, load_config, open_host, split_model
from agenthost.cli.exit import EXIT_USAGE, CLIError
from agenthost.cli.render import Console

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``chat`` on the CLI's subparsers."""
    chat = add_command(
        sub, common, "chat", "an interactive session with slash commands (/tools, /prompts, ...)"
    )
    chat.add_argument("--model", help="provider/model")
    chat.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="NAME",
        help="go on with a saved conversation: NAME, or the most recent one (every chat is"
        " saved in $XDG_STATE_HOME/agenthost/sessions as you go)",
    )


async def run(args: argparse.Namespace, console: Console) -> int:
    """Run ``agenthost chat``; returns the exit code."""
    from agenthost.cli.chat import chat
    from agenthost.cli.sessions import latest_session, load_session

    config = load_config(args)
    provider, model = split_model(args.model)
    name, resumed = None, None
    if args.resume is not None:
        name = args.resume or latest_session()
        if name is None:
            raise CLIError("there is no saved conversation to resume yet", EXIT_USAGE)
        resumed = load_session(name)
        if resumed is None:
            raise CLIError(f"there is no saved conversation named {name}", EXIT_USAGE)
    async with open_host(args, config, console) as host:
        return await chat(
            host, console, provider=provider, model=model, session=name, resumed=resumed
        )
