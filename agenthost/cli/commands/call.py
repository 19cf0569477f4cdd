"""``agenthost call|read|prompt``: use one tool, resource or prompt of a server."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import TYPE_CHECKING, Any

from agenthost.cli.common import (
    add_command,
    check_prompt,
    interruptible,
    key_values,
    load_config,
    offers_resources,
    one_shot,
    open_host,
    parse_json_arguments,
    progress_callback,
    report_failed_servers,
    require_ready,
)
from agenthost.cli.exit import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CLIError
from agenthost.cli.render import Console, content_text, print_json, say

if TYPE_CHECKING:
    from agenthost.errors import AmbiguousResource

__all__ = ["add_parser", "follow_command", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``call`` and ``read`` and ``prompt`` on the CLI's subparsers."""
    call = add_command(sub, common, "call", "call one tool: call server__tool '{\"arg\": 1}'")
    call.add_argument("tool", help="the tool's namespaced name, SERVER__TOOL (see `tools`)")
    call.add_argument(
        "arguments", nargs="?", default="{}", help="the arguments, a JSON object (default: {})"
    )
    call.add_argument(
        "--detach",
        action="store_true",
        help="start the call as a task, print its id and exit; `tasks get|result SERVER ID`"
        " follow it (a server over HTTP keeps it; over stdio it ends with this command)",
    )
    read = add_command(sub, common, "read", "read a resource by URI")
    read.add_argument("uri", help="the resource's URI, e.g. notes://index (see `resources`)")
    read.add_argument("--server", help="the server to ask (default: the one that lists it)")
    read.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="save the contents to FILE, bytes as they are (for binary resources)",
    )
    prompt = add_command(sub, common, "prompt", "get a prompt: prompt SERVER NAME [key=value ...]")
    prompt.add_argument("server", help="the server that offers the prompt")
    prompt.add_argument("name", help="the prompt's name (see `prompts`)")
    prompt.add_argument("arguments", nargs="*", help="the prompt's arguments, as key=value")


async def _call(args: argparse.Namespace, console: Console) -> int:
    import attrs

    from agenthost.host.catalog import SEPARATOR, tool_prefix
    from agenthost.protocol.converter import unstructure

    arguments = parse_json_arguments(args.arguments)
    prefix, sep, _ = args.tool.partition(SEPARATOR)
    if not sep:
        raise CLIError(f"tool names look like server{SEPARATOR}tool, got {args.tool!r}", EXIT_USAGE)
    config = one_shot(load_config(args))
    # Only the servers the name can belong to are started: the one named so, or those
    # whose tool prefix it is (a server "e.x" lists e_x__echo).
    owners = [s for s in config.servers if s.name == prefix or tool_prefix(s.name) == prefix]
    if owners:
        config = attrs.evolve(config, servers=owners)
    async with open_host(args, config, console) as host:
        if len(owners) == 1:
            require_ready(host, owners[0].name)
        server = host.resolve_tool(args.tool).server
        if args.detach:
            return await _detach(host, args, arguments, server, console)
        # Ctrl-C cancels the call (the server gets notifications/cancelled), then exits 130.
        async with interruptible() as scope:
            result = await host.call_tool(
                args.tool, arguments, progress=progress_callback(console, args.tool)
            )
        console.end_progress()
        if scope.cancelled_caught:
            raise CLIError(f"interrupted: {args.tool} was cancelled", EXIT_INTERRUPTED)
        revision = host.session(server).revision or "2025-11-25"
    if args.json:
        print_json(unstructure(result, revision))
    else:
        text = content_text(result.content)
        if text:
            say(text)
        if result.structured_content is not None and not text:
            say(json.dumps(result.structured_content, indent=2))
    return EXIT_ERROR if result.is_error else EXIT_OK


def follow_command(action: str, server: str, task_id: str) -> str:
    """The ``tasks`` command that follows a detached task, ready to paste.

    The id is the server's choice, any text: quoted for the shell, and after ``--`` when
    it starts with a dash (a random id did, and the printed command failed as an unknown
    option).
    """
    end = "-- " if task_id.startswith("-") else ""
    return f"agenthost tasks {action} {shlex.quote(server)} {end}{shlex.quote(task_id)}"


async def _detach(
    host: Any, args: argparse.Namespace, arguments: dict[str, Any], server: str, console: Console
) -> int:
    """``call --detach``: the call starts as a task (through the policy, audited); its id
    is printed and the task left running for a later ``tasks get|result``."""
    from agenthost.tool_tasks import TaskDetached

    async def leave(created: Any) -> None:
        raise TaskDetached(created.task.task_id)

    try:
        result = await host.call_tool(args.tool, arguments, task=True, on_task=leave)
    except TaskDetached as detached:
        if args.json:
            print_json({"server": server, "task_id": detached.task_id})
        else:
            say(detached.task_id)
            console.line(
                f"started {args.tool} as task {detached.task_id}; follow it with"
                f" `{follow_command('get', server, detached.task_id)}` or"
                f" `{follow_command('result', server, detached.task_id)}`"
            )
        return EXIT_OK
    console.line(f"{args.tool} does not run as a task here: it ran as a plain call")
    say(content_text(result.content) or json.dumps(result.structured_content))
    return EXIT_ERROR if result.is_error else EXIT_OK


async def _read(args: argparse.Namespace, console: Console) -> int:
    from agenthost.errors import AmbiguousResource
    from agenthost.protocol.converter import unstructure
    from agenthost.protocol.types import TextResourceContents

    config = one_shot(load_config(args, only=args.server) if args.server else load_config(args))
    async with open_host(args, config, console) as host:
        if args.server:
            require_ready(host, args.server)
        else:
            report_failed_servers(host, console)
        offering = [
            s.name
            for s in host.status()
            if s.state.value == "ready" and offers_resources(host, s.name)
        ]
        if args.server and args.server not in offering:
            raise CLIError(
                f"{args.server}: the server offers no resources (it did not declare the"
                " resources capability)",
                EXIT_USAGE,
            )
        if not args.server and not offering:
            raise CLIError("none of the configured servers offers resources", EXIT_USAGE)
        try:
            result = await host.read_resource(args.uri, server=args.server)
        except AmbiguousResource as exc:
            chosen = await _ask_which_server(exc)
            if chosen is None:
                raise CLIError(str(exc), EXIT_USAGE) from None
            result = await host.read_resource(args.uri, server=chosen)
    if args.output:
        _save(result.contents, args.output, console)
    elif args.json:
        print_json(unstructure(result, "2025-11-25"))
    else:
        for contents in result.contents:
            if isinstance(contents, TextResourceContents):
                say(contents.text)
            else:
                say(f"[binary {contents.mime_type or 'data'}, {len(contents.blob)} bytes]")
    return EXIT_OK


def _save(parts: Any, path: str, console: Console) -> None:
    """``read --output FILE``: the resource's one part, its bytes as they are (text as
    UTF-8), so an image or a PDF arrives intact rather than as a ``[binary ...]`` note."""
    from agenthost.protocol.types import TextResourceContents

    if len(parts) != 1:
        raise CLIError(
            f"the resource has {len(parts)} parts; --output saves a resource of one part"
            " (use --json to see them all)",
            EXIT_USAGE,
        )
    [part] = parts
    data = part.text.encode() if isinstance(part, TextResourceContents) else part.blob
    try:
        with open(path, "wb") as file:
            file.write(data)
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc.strerror or exc}", EXIT_USAGE) from None
    console.line(f"saved {len(data)} bytes ({part.mime_type or 'no type'}) to {path}")


#: Seconds a person has to pick the server of an ambiguous resource URI.
_PICK_TIMEOUT = 300.0


async def _ask_which_server(exc: AmbiguousResource) -> str | None:
    """The server a person at the terminal picks for ``exc.uri``; ``None`` without a
    terminal (nobody to ask: the read is refused), on no answer, or on an answer that
    names none of them.

    **Cancellation:** the read of stdin runs in a worker thread abandoned on cancel
    (Ctrl-C returns at once); it is bounded by :data:`_PICK_TIMEOUT`.
    """
    import trio

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    choices = "\n".join(f"  {i}. {name}" for i, name in enumerate(exc.servers, 1))
    sys.stderr.write(
        f"agenthost: several servers could serve {exc.uri!r}:\n{choices}\n"
        f"read it from which one? [1-{len(exc.servers)}, or Enter for none] "
    )
    sys.stderr.flush()
    with trio.move_on_after(_PICK_TIMEOUT):
        line: str = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        answer = line.strip()
        if answer.isdigit() and 1 <= int(answer) <= len(exc.servers):
            return exc.servers[int(answer) - 1]
        return answer if answer in exc.servers else None
    sys.stderr.write("\n(no answer in time)\n")
    return None


async def _prompt(args: argparse.Namespace, console: Console) -> int:
    from agenthost.protocol.converter import unstructure

    config = one_shot(load_config(args, only=args.server))
    arguments = key_values(args.arguments)
    async with open_host(args, config, console) as host:
        require_ready(host, args.server)
        check_prompt(host, args.server, args.name, arguments)
        result = await host.get_prompt(args.server, args.name, arguments)
        revision = host.session(args.server).revision or "2025-11-25"
    if args.json:
        print_json(unstructure(result, revision))
    else:
        if result.description:
            say(f"# {result.description}")
        for message in result.messages:
            say(f"[{message.role}] {content_text([message.content])}")
    return EXIT_OK


async def run(args: argparse.Namespace, console: Console) -> int:
    """Run the command named by ``args.command``."""
    commands = {
        "call": _call,
        "read": _read,
        "prompt": _prompt,
    }
    return await commands[args.command](args, console)
