"""A FastMCP server with the 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``,
SEP-2663) from ``fastmcp-tasks``: the real server-side implementation the tests drive.

Why it exists: no reference server speaks the extension; ``fastmcp-tasks`` does (its
in-memory Docket backend, no Redis). A client that probes ``server/discover`` gets the
modern era and the extension in the server's capabilities; a client that sends
``initialize`` gets a legacy session, where these tools cannot run as tasks.

Usage::

    python tests/peers/tasks_server.py stdio
    python tests/peers/tasks_server.py streamable-http --port N   (serves /mcp)

Tools:

* ``research`` (task required): ``steps`` steps of ``delay`` seconds, each reported as
  progress, which the extension shows as the task's ``statusMessage``;
* ``confirm`` (task required): asks for a confirmation through the task's
  ``inputRequests`` (an elicitation), then answers with what it was told;
* ``explode`` (task required): fails with a JSON-RPC error (task status ``failed``);
* ``tool_error`` (task required): completes with an ``isError`` result;
* ``maybe_slow`` (task optional): sleeps ``seconds``; runs as a task only when asked;
* ``nag`` (task required): asks for input again after every answer, forever;
* ``spin`` (task required): sleeps ``seconds`` with a poll interval of 0 ms;
* ``echo``: a plain tool.

Every call of a tool body is appended to ``$AGENTHOST_PEER_LOG`` (one JSON per line)
when set, so a test can see what ran and whether a cancelled task stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from datetime import timedelta
from typing import Any

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension
from mcp.shared.exceptions import MCPError

POLL = timedelta(milliseconds=100)
REQUIRED = TaskConfig(mode="required", poll_interval=POLL)

server = FastMCP("tasks-peer")
server.add_extension(TasksExtension())


def note(event: str, **fields: Any) -> None:
    path = os.environ.get("AGENTHOST_PEER_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"event": event, **fields}) + "\n")


@server.tool(task=REQUIRED)
async def research(topic: str, ctx: Context, steps: int = 3, delay: float = 0.3) -> str:
    """Research a topic, slowly."""
    note("research", topic=topic)
    for step in range(steps):
        await ctx.report_progress(step, steps, f"step {step + 1} of {steps}: reading on {topic}")
        await asyncio.sleep(delay)
        note("research-step", topic=topic, step=step + 1)
    note("research-done", topic=topic)
    return f"Report on {topic}: {steps} sources read."


@server.tool(task=REQUIRED)
async def confirm(action: str, ctx: Context) -> Any:
    """Ask the user before doing ``action``."""
    answers = ctx.input_responses or {}
    answer = answers.get("ok")
    if answer is None:
        note("confirm-ask", action=action)
        return mcp_types.InputRequiredResult(
            input_requests={
                "ok": mcp_types.ElicitRequest(
                    params=mcp_types.ElicitRequestFormParams(
                        message=f"Really {action}?",
                        requested_schema={
                            "type": "object",
                            "properties": {"sure": {"type": "boolean"}},
                            "required": ["sure"],
                        },
                    )
                )
            }
        )
    data = answer.model_dump(mode="json") if hasattr(answer, "model_dump") else answer
    note("confirm-answer", action=action, answer=data)
    content = data.get("content") if isinstance(data, dict) else None
    accepted = isinstance(data, dict) and data.get("action") == "accept"
    sure = bool(content and content.get("sure"))
    return f"{action}: {'done' if accepted and sure else 'not done'}"


@server.tool(task=REQUIRED)
async def explode(reason: str) -> str:
    """Fail with a protocol error."""
    note("explode", reason=reason)
    raise MCPError(code=-32603, message=f"exploded: {reason}")


@server.tool(task=REQUIRED)
async def tool_error(reason: str) -> str:
    """Fail as a tool (an isError result)."""
    from fastmcp.exceptions import ToolError

    raise ToolError(f"tool failed: {reason}")


@server.tool(task=TaskConfig(mode="optional", poll_interval=POLL))
async def maybe_slow(seconds: float = 0.0) -> str:
    """Sleep, then say so."""
    note("maybe_slow", seconds=seconds)
    await asyncio.sleep(seconds)
    return f"slept {seconds:g}s"


@server.tool(task=REQUIRED)
async def nag(ctx: Context) -> Any:
    """Never satisfied: each answer brings a new question (a hostile server)."""
    return mcp_types.InputRequiredResult(
        input_requests={
            "again": mcp_types.ElicitRequest(
                params=mcp_types.ElicitRequestFormParams(
                    message="One more thing?",
                    requested_schema={"type": "object", "properties": {}},
                )
            )
        }
    )


@server.tool(task=TaskConfig(mode="required", poll_interval=timedelta(0)))
async def spin(seconds: float = 1.0) -> str:
    """Asks to be polled without pause (a hostile server)."""
    await asyncio.sleep(seconds)
    return "spun"


@server.tool
def echo(message: str) -> str:
    """Echo the message."""
    return message


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "streamable-http"])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio", show_banner=False)
    else:
        server.run(
            "streamable-http", show_banner=False, host="127.0.0.1", port=args.port, path="/mcp"
        )


if __name__ == "__main__":
    main()
