"""``agenthost tools|prompts|resources``: what every server offers, listed."""

from __future__ import annotations

import argparse
from typing import Any

from agenthost.cli.common import (
    add_command,
    load_config,
    no_provider_note,
    one_shot,
    open_host,
    report_failed_servers,
)
from agenthost.cli.exit import EXIT_OK, EXIT_UNAVAILABLE
from agenthost.cli.render import Console, first_line, print_json, say, table

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``tools`` and ``prompts`` and ``resources`` on the CLI's subparsers."""
    add_command(sub, common, "tools", "list every server's tools, namespaced server__tool")
    add_command(sub, common, "prompts", "list every server's prompts")
    add_command(sub, common, "resources", "list every server's resources and resource templates")


async def _tools(args: argparse.Namespace, console: Console) -> int:
    config = one_shot(load_config(args))
    async with open_host(args, config, console) as host:
        failed = report_failed_servers(host, console)
        if (note := no_provider_note(host)) is not None:
            console.line(note)
        tools = await host.list_tools()
    trusted = {s.name for s in config.servers if s.trusted}
    if args.json:
        print_json(
            [
                {
                    "name": t.name,
                    "server": t.server,
                    "tool": t.tool.name,
                    "description": t.tool.description,
                    "input_schema": t.tool.input_schema,
                    "annotations": _annotations(t.tool.annotations),
                    "trusted": t.server in trusted,
                    "definition_tokens": _definition_tokens(t),
                }
                for t in tools
            ]
        )
    else:
        say(
            table(
                [
                    [
                        t.name,
                        _flags(t.tool.annotations, trusted=t.server in trusted),
                        first_line(t.tool.description),
                    ]
                    for t in tools
                ],
                ["tool", "hints", "description"],
            )
        )
        say(_server_costs(tools))
    return EXIT_UNAVAILABLE if failed else EXIT_OK


def _definition_tokens(entry: Any) -> int:
    """Estimated tokens of the tool's definition as the agent offers it to a model."""
    import agenthost_providers.base as llm
    from agenthost.agent.budget import tool_tokens

    tool = entry.tool
    return tool_tokens(
        llm.Tool(
            name=entry.name,
            description=tool.description or tool.title or tool.name,
            input_schema=tool.input_schema or {"type": "object"},
        )
    )


def _server_costs(tools: Any) -> str:
    """Each server's definitions: what it costs on every model request (tool search off)."""
    per: dict[str, list[int]] = {}
    for t in tools:
        per.setdefault(t.server, []).append(_definition_tokens(t))
    lines = ["tool definitions per model request (estimated tokens):"]
    for server, sizes in per.items():
        lines.append(f"  {server}: {sum(sizes):,} ({len(sizes)} tools)")
    total = sum(sum(sizes) for sizes in per.values())
    lines.append(f"  total: {total:,}")
    return "\n".join(lines)


def _annotations(annotations: Any) -> dict[str, Any] | None:
    from agenthost.host.catalog import annotation_hints

    return annotation_hints(annotations)


def _flags(annotations: Any, *, trusted: bool) -> str:
    """The hints the policy acts on: an untrusted server's annotations count for nothing."""
    data = _annotations(annotations) or {}
    flags = []
    if data.get("readOnlyHint"):
        flags.append("read-only")
    if data.get("destructiveHint"):
        flags.append("destructive")
    if flags and not trusted:
        return f"untrusted (says {','.join(flags)})"
    return ",".join(flags) or "-"


async def _prompts(args: argparse.Namespace, console: Console) -> int:
    config = one_shot(load_config(args))
    async with open_host(args, config, console) as host:
        failed = report_failed_servers(host, console)
        prompts = await host.list_prompts()
    if args.json:
        print_json(
            [
                {
                    "server": server,
                    "name": p.name,
                    "description": p.description,
                    "arguments": [
                        {"name": a.name, "required": bool(a.required), "description": a.description}
                        for a in p.arguments or []
                    ],
                }
                for server, p in prompts
            ]
        )
    else:
        say(
            table(
                [
                    [
                        server,
                        p.name,
                        " ".join(
                            (a.name if a.required else f"[{a.name}]") for a in p.arguments or []
                        ),
                        first_line(p.description, 50),
                    ]
                    for server, p in prompts
                ],
                ["server", "prompt", "arguments", "description"],
            )
        )
    return EXIT_UNAVAILABLE if failed else EXIT_OK


async def _resources(args: argparse.Namespace, console: Console) -> int:
    config = one_shot(load_config(args))
    async with open_host(args, config, console) as host:
        failed = report_failed_servers(host, console)
        resources = await host.list_resources()
        templates = await host.list_resource_templates()
    if args.json:
        print_json(
            {
                "resources": [
                    {"server": s, "uri": r.uri, "name": r.name, "mime_type": r.mime_type}
                    for s, r in resources
                ],
                "templates": [
                    {"server": s, "uri_template": t.uri_template, "name": t.name}
                    for s, t in templates
                ],
            }
        )
    else:
        rows = [[s, r.uri, r.mime_type or "-", r.name] for s, r in resources]
        rows += [
            [s, t.uri_template, t.mime_type or "-", f"{t.name} (template)"] for s, t in templates
        ]
        say(table(rows, ["server", "uri", "type", "name"]))
    return EXIT_UNAVAILABLE if failed else EXIT_OK


async def run(args: argparse.Namespace, console: Console) -> int:
    """Run the command named by ``args.command``."""
    commands = {
        "tools": _tools,
        "prompts": _prompts,
        "resources": _resources,
    }
    return await commands[args.command](args, console)
