"""``agenthost models``: the models sampling and agents can use, and why one is chosen."""

from __future__ import annotations

import argparse
import os
from typing import Any

from agenthost.cli.common import add_command, config_paths, load_config
from agenthost.cli.exit import EXIT_OK
from agenthost.cli.render import Console, print_json, say

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``models`` on the CLI's subparsers."""
    models = add_command(sub, common, "models", "list the models sampling and agents can use")
    models.add_argument(
        "--explain", metavar="JSON", help="explain the choice for a modelPreferences JSON"
    )


async def run(args: argparse.Namespace, console: Console) -> int:
    """Run ``agenthost models``; returns the exit code."""
    from agenthost_providers.cli import (
        explain,
        list_models,
        provider_rows,
        render_models,
        render_selection,
        selection_data,
    )
    from agenthost_providers.config import parse_providers

    raw: dict[str, Any] = {}
    source = "<defaults>"
    base_dir = None
    if any(p is not None for p in config_paths(args)):
        config = load_config(args)
        raw = dict(config.providers)
        source = config.source or "<config>"
        base_dir = os.path.dirname(os.path.abspath(source)) if config.source else None
    providers_config = parse_providers(raw, source=source, base_dir=base_dir)
    env = os.environ
    if args.explain is not None:
        selection = explain(args.explain, providers_config, env)
        if args.json:
            print_json(selection_data(selection))
        else:
            say(render_selection(selection))
        return EXIT_OK
    rows = list_models(providers_config, env)
    if args.json:
        print_json({"providers": provider_rows(providers_config, env), "models": rows})
    else:
        say(render_models(rows, provider_rows(providers_config, env)))
    return EXIT_OK
