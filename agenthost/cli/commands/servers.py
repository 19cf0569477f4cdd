"""``agenthost servers`` and ``agenthost check``: start every server and show its state.

``check`` also names the config files in use and exits 5 if a server did not come up.
"""

from __future__ import annotations

import argparse
from typing import Any

from agenthost.cli.common import add_command, load_config, no_provider_note, one_shot, open_host
from agenthost.cli.exit import EXIT_OK, EXIT_UNAVAILABLE
from agenthost.cli.render import Console, first_line, print_json, say, table

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``servers`` and ``check`` on the CLI's subparsers."""
    add_command(
        sub, common, "servers", "start every server and show its state and negotiated revision"
    )
    add_command(
        sub,
        common,
        "check",
        "validate the config, start each server, report status (exit 5 if any failed)",
    )


async def run(args: argparse.Namespace, console: Console) -> int:
    """Run ``agenthost servers`` or ``agenthost check``; returns the exit code."""
    from agenthost.host.supervisor import ServerState

    config = one_shot(load_config(args))
    if args.command == "check":
        console.line(f"config: {config.source}")
        projects = sorted({s.scope[8:] for s in config.servers if s.scope.startswith("project:")})
        for project in projects:
            console.line(f"project config: {project} (trusted)")
    async with open_host(args, config, console) as host:
        statuses = host.status()
        counts = {name: len(entries.tools) for name, entries in host.catalog.servers.items()}
        roots = {s.name: [r.uri for r in host.roots_for(s.name)] for s in statuses}
        note = no_provider_note(host)
    rows: list[dict[str, Any]] = [
        {
            "name": s.name,
            "state": s.state.value,
            "transport": s.transport,
            "revision": s.revision,
            "era": s.era,
            "learned": s.learned,
            "server_info": s.server_info,
            "tools": counts.get(s.name, 0),
            "roots": roots.get(s.name, []),
            "restarts": s.restarts,
            "last_error": s.last_error,
        }
        for s in statuses
    ]
    if args.json:
        print_json(rows)
    else:
        say(
            table(
                [
                    [
                        r["name"],
                        r["state"],
                        r["transport"] or "-",
                        r["era"] or "-",
                        r["revision"] or "-",
                        first_line(r["learned"] or "", 50) or "-",
                        str(r["tools"]),
                        " ".join(r["roots"]) or "(none)",
                    ]
                    for r in rows
                ],
                ["server", "state", "transport", "era", "revision", "learned", "tools", "roots"],
            )
        )
        for r in rows:
            if r["last_error"]:
                # The whole error: for a stdio server it ends with its last stderr lines.
                say(f"\n{r['name']}: {r['last_error']}".replace(" | ", "\n    | "))
    failed = any(s.state is not ServerState.READY for s in statuses)
    if args.command == "check" and not args.json:
        if note is not None:
            say(note)
        say("all servers ready" if not failed else "some servers are not ready")
    return EXIT_UNAVAILABLE if failed else EXIT_OK
