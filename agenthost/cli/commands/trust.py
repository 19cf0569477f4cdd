"""``agenthost trust [PATH]``: trust a project's config file as it is now.

``--list`` shows every recorded answer, ``--revoke`` forgets one.
"""

from __future__ import annotations

import argparse
from typing import Any

from agenthost.cli.common import add_command
from agenthost.cli.exit import EXIT_OK, EXIT_USAGE, CLIError
from agenthost.cli.render import Console, print_json, safe, say, table

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``trust`` on the CLI's subparsers."""
    trust = add_command(
        sub, common, "trust", "trust the project's config file as it is now (shows what it runs)"
    )
    trust.add_argument("path", nargs="?", help="the config file, or a project folder (default: .)")
    trust.add_argument("--list", action="store_true", help="every recorded answer")
    trust.add_argument("--revoke", action="store_true", help="forget the answer for PATH")


def _trust_target(path: str | None) -> Any:
    """The project config ``trust`` means: PATH (a file, or a folder to look in), or here."""
    from pathlib import Path

    from agenthost.config.model import PROJECT_CONFIGS, find_project_config

    where = Path(path) if path else Path.cwd()
    if path and not where.is_dir():
        return where
    found = find_project_config(where)
    if found is None:
        raise CLIError(
            f"no project config in {where} (looked for {', '.join(PROJECT_CONFIGS)})", EXIT_USAGE
        )
    return found


async def run(args: argparse.Namespace, console: Console) -> int:
    """``trust [PATH]``: the command is the consent; ``--list``; ``--revoke [PATH]``."""
    from agenthost.config.trust import TrustStore, describe, inspect_project
    from agenthost.config.user_only import check_user_only

    store = TrustStore()
    if args.list:
        records = store.records()
        if args.json:
            print_json({"file": str(store.path), "projects": [r.to_json() for r in records]})
            return EXIT_OK
        console.line(f"trust store {store.path} ({len(records)} recorded)")
        rows = [[r.decision, str(r.path), r.at] for r in records]
        if rows:
            say(table(rows, ["answer", "config", "since"]))
        return EXIT_OK
    if args.revoke:
        target = args.path or _trust_target(None)
        gone = store.revoke(target)
        if not gone:
            raise CLIError(f"no recorded answer for {target} in {store.path}", EXIT_USAGE)
        if args.json:
            print_json({"file": str(store.path), "revoked": [r.to_json() for r in gone]})
        else:
            for r in gone:
                console.line(f"forgot {r.decision} for {safe(r.path)}")
        return EXIT_OK
    found = inspect_project(_trust_target(args.path))
    check_user_only(found)
    verdict = store.verdict(found)
    record = store.record(found, "trust")
    if args.json:
        print_json({"trusted": record.to_json(), "changes": list(verdict.changes)})
        return EXIT_OK
    for line in describe(found.summary):
        say(line)
    if verdict.changes:
        say("changed since you last trusted it:")
        for change in verdict.changes:
            say(f"  {change}")
    console.line(f"trusted {found.path} as it is now (`agenthost trust --revoke` to undo)")
    return EXIT_OK
