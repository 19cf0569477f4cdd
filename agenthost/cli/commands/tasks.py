"""``agenthost tasks list|get|result|cancel SERVER [ID]``: tasks a server keeps for us."""

from __future__ import annotations

import argparse
from typing import Any

from agenthost.cli.common import add_command, interruptible, load_config, open_host, require_ready
from agenthost.cli.exit import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CLIError
from agenthost.cli.render import Console, content_text, print_json, say
from agenthost.errors import server_data

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``tasks`` on the CLI's subparsers."""
    tasks = add_command(
        sub, common, "tasks", "a server's tasks: tasks list|get|result|cancel SERVER [ID]"
    )
    tasks.add_argument("action", choices=("list", "get", "result", "cancel"))
    tasks.add_argument("server")
    tasks.add_argument("task_id", nargs="?")


async def run(args: argparse.Namespace, console: Console) -> int:
    """``tasks list|get|result|cancel SERVER [ID]``: tasks a server keeps for us.

    Over stdio a server's tasks end with its process (each CLI run starts a new one); over
    HTTP a server may keep them across runs, which is what this command is for.
    """
    from agenthost.protocol.converter import unstructure
    from agenthost.tool_tasks import (
        cancel_task,
        get_task,
        list_tasks,
        offers_tasks_extension,
        task_result,
    )

    if args.action != "list" and not args.task_id:
        raise CLIError(
            f"tasks {args.action} needs a task id: tasks {args.action} SERVER ID", EXIT_USAGE
        )
    config = load_config(args, only=args.server)
    async with open_host(args, config, console) as host:
        require_ready(host, args.server)
        session = host.session(args.server)
        revision = session.revision or "2025-11-25"
        output: Any
        # The server's answers are processed below: whatever they make us raise is its error.
        guard = server_data(args.server, f"tasks {args.action}")
        if args.action == "list" and offers_tasks_extension(session):
            raise CLIError(
                f"{args.server} uses the 2026-07-28 tasks extension, which has no tasks/list:"
                f" name the task (tasks get|result|cancel {args.server} ID)",
                EXIT_USAGE,
            )
        if args.action == "list":
            with guard:
                tasks = await list_tasks(session)
            if tasks.cut:
                console.line(
                    f"{args.server}: tasks/list has {tasks.cut}: only the first"
                    f" {len(tasks)} tasks are shown"
                )
            output = [unstructure(task, revision) for task in tasks]
            lines = [f"{t.task_id}  {t.status}  {t.status_message or ''}".rstrip() for t in tasks]
        elif args.action == "get":
            with guard:
                task = await get_task(session, args.task_id)
            output = unstructure(task, revision)
            lines = [f"{task.task_id}  {task.status}  {task.status_message or ''}".rstrip()]
        elif args.action == "cancel":
            with guard:
                task = await cancel_task(session, args.task_id)
            output = unstructure(task, revision)
            lines = [f"{task.task_id}  {task.status}"]
        else:
            async with interruptible() as scope:
                with guard:
                    result = await task_result(session, args.task_id, timeout=None)
            if scope.cancelled_caught:
                raise CLIError("interrupted", EXIT_INTERRUPTED)
            output = unstructure(result, revision)
            lines = [content_text(result.content)]
    if args.json:
        print_json(output)
    else:
        for line in lines:
            say(line)
    return EXIT_OK
