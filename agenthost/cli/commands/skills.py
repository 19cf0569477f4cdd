"""``agenthost skills [SERVER]`` and ``skills show SERVER NAME``: servers' skills."""

from __future__ import annotations

import argparse
from typing import Any

from agenthost.cli.common import (
    add_command,
    load_config,
    open_host,
    report_failed_servers,
    require_ready,
)
from agenthost.cli.exit import EXIT_OK, EXIT_USAGE, CLIError
from agenthost.cli.render import Console, print_json, say

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``skills`` on the CLI's subparsers."""
    skills = add_command(
        sub, common, "skills", "servers' skills: skills [SERVER] | skills show SERVER NAME"
    )
    skills.add_argument(
        "words",
        nargs="*",
        metavar="SERVER | show SERVER NAME",
        help="a server's skills, or one skill loaded (default: every server's skills)",
    )


async def run(args: argparse.Namespace, console: Console) -> int:
    """``skills [SERVER]`` lists skills (names and descriptions only, nothing is fetched);
    ``skills show SERVER NAME`` loads one, through the policy (kind ``skill``), verified."""
    words = list(args.words)
    show = bool(words) and words[0] == "show"
    if show and len(words) != 3:
        raise CLIError("usage: skills show SERVER NAME", EXIT_USAGE)
    if not show and len(words) > 1:
        raise CLIError("usage: skills [SERVER] | skills show SERVER NAME", EXIT_USAGE)
    server = words[1] if show else (words[0] if words else None)
    config = load_config(args, only=server) if server else load_config(args)
    async with open_host(args, config, console) as host:
        if server:
            require_ready(host, server)
        else:
            report_failed_servers(host, console)
        if show:
            loaded = await host.load_skill(server or "", words[2])
            if args.json:
                print_json({"server": server, "uri": loaded.entry.uri, "text": loaded.text})
            else:
                say(loaded.text)
            return EXIT_OK
        found = await host.list_skills(server)
    if args.json:
        print_json(
            [
                {"server": name, "name": e.name, "description": e.description, "uri": e.uri}
                for name, e in found
            ]
        )
    else:
        for name, entry in found:
            say(f"{name}/{entry.name}  {entry.description}")
        if not found:
            console.line("no skills")
    return EXIT_OK
