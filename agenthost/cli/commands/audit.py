"""``agenthost audit`` and ``agenthost approvals``: what the policy decided and remembers."""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING, Any

from agenthost.cli.common import add_command, config_paths, load_config
from agenthost.cli.exit import EXIT_OK, EXIT_USAGE, CLIError
from agenthost.cli.render import Console, first_line, print_json, safe, say, table

if TYPE_CHECKING:
    from agenthost_policies import Approval

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``audit`` and ``approvals`` on the CLI's subparsers."""
    audit = add_command(sub, common, "audit", "show the policy's audit log")
    audit.add_argument("--tail", type=int, default=0, help="only the last N lines")
    approvals = add_command(
        sub, common, "approvals", "list or revoke remembered always/never answers for tools"
    )
    approvals.add_argument(
        "action",
        nargs="?",
        choices=["list", "revoke"],
        default="list",
        help="list the answers (default), or revoke some",
    )
    approvals.add_argument("server", nargs="?", help="revoke: the server's answers")
    approvals.add_argument("tool", nargs="?", help="revoke: only this tool (its MCP name)")
    approvals.add_argument("--all", action="store_true", help="revoke: every answer")


async def _audit(args: argparse.Namespace, console: Console) -> int:
    from agenthost_policies import parse_policy, read_audit

    config = load_config(args)
    source = config.source or "<config>"
    base = os.path.dirname(os.path.abspath(source)) if config.source else None
    policy = parse_policy(config.policy, source=source, base_dir=base)
    if policy.audit is None:
        raise CLIError("the policy has no audit log configured ([policy] audit = ...)", EXIT_USAGE)
    path = policy.audit.path
    records = read_audit(path) if os.path.exists(path) else []
    if args.tail:
        records = records[-args.tail :]
    if args.json:
        print_json(records)
        return EXIT_OK
    console.line(f"audit log {path} ({len(records)} lines shown)")
    for r in records:
        say(_audit_line(r))
    return EXIT_OK


def _audit_line(record: dict[str, Any]) -> str:
    """One audit record as one line: every field escaped to stay on it.

    Why: names, reasons and results come from servers (a tool named ``x\\n12:00:00
    decision ...``), and a line break in one would print as records that never were.
    """

    def field(key: str) -> str:
        value = record.get(key)
        return safe("" if value is None else str(value), one_line=True)

    def head(label: str) -> str:
        time_of_day = field("ts")[11:19]
        return f"{time_of_day} {label} {field('kind')} {field('server')} {field('name')} ->"

    event = record.get("event")
    if event == "review":
        return f"{head('review  ')} {field('decision')}: {field('reason')}"
    if event == "suppressed":
        return f"{head('folded  ')} {field('reason')}"
    if event == "decision":
        return f"{head('decision')} {field('decision')} by {field('rule')}: {field('reason')}"
    what = record.get("error") or record.get("result")
    return f"{head('outcome ')} {first_line(json.dumps(what, default=str), 80)}"


async def _approvals(args: argparse.Namespace, console: Console) -> int:
    """List or revoke the remembered "always"/"never" answers for tools."""
    import trio

    from agenthost_policies import ApprovalStore, default_approvals_path, parse_policy

    path = default_approvals_path()
    if any(p is not None for p in config_paths(args)):  # its [policy] may name another file
        config = load_config(args)
        source = config.source or "<config>"
        base = os.path.dirname(os.path.abspath(source)) if config.source else None
        path = parse_policy(config.policy, source=source, base_dir=base).approvals or path
    store = ApprovalStore(path)
    if args.action == "revoke":
        if not args.all and args.server is None:
            raise CLIError("revoke needs SERVER [TOOL], or --all", EXIT_USAGE)
        server = None if args.all else args.server
        gone = await trio.to_thread.run_sync(store.revoke, server, args.tool)
        if not gone and not args.all:
            what = f"{args.server}/{args.tool}" if args.tool else f"server {args.server}"
            raise CLIError(f"no remembered answer for {what} in {path}", EXIT_USAGE)
        if args.json:
            print_json({"file": str(path), "revoked": [a.to_json() for a in gone]})
        else:
            console.line(f"revoked {len(gone)} remembered answer(s) in {path}")
        return EXIT_OK
    entries = await trio.to_thread.run_sync(store.load)
    if args.json:
        print_json({"file": str(path), "approvals": [a.to_json() for a in entries]})
        return EXIT_OK
    console.line(f"approvals file {path} ({len(entries)} remembered)")
    rows = [
        [
            a.server,
            a.name,
            "always" if a.decision == "allow" else "never",
            a.at,
            _approval_place(a),
        ]
        for a in entries
    ]
    if rows:
        say(table(rows, ["server", "tool", "answer", "since", "where"]))
    return EXIT_OK


def _approval_place(approval: Approval) -> str:
    """Where an answer holds (config scope and directory): the same tool may have one
    answer per place."""
    from agenthost_policies.text import printable

    if approval.binding is None:
        return "(not recorded: asked again)" if approval.decision == "allow" else "(not recorded)"
    place = approval.scope or "user"
    return printable(f"{place} in {approval.cwd}" if approval.cwd else place)


async def run(args: argparse.Namespace, console: Console) -> int:
    """Run the command named by ``args.command``."""
    commands = {
        "audit": _audit,
        "approvals": _approvals,
    }
    return await commands[args.command](args, console)
