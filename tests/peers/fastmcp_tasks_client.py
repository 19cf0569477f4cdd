"""A 2026-07-28 task client for ``agenthost serve --http``: FastMCP's ``Client`` with the
tasks extension (``fastmcp-tasks``: it declares ``io.modelcontextprotocol/tasks`` on each
request and drives ``tasks/get``/``tasks/cancel``), on asyncio in its own process.

Usage: python tests/peers/fastmcp_tasks_client.py URL [tour|ask]
       python tests/peers/fastmcp_tasks_client.py tour -- COMMAND ARGS...   (stdio)

``tour`` (the default) runs ``tk__research`` (an upstream with the extension) and
``ev__simulate-research-query`` (server-everything, 2025-11-25 tasks) as tasks, cancels a
long one, and calls ``tk__research`` transparently (the client drives the task itself).
``ask`` calls ``tk__research`` (the client answers the gateway's MRTR consent form "allow
once" with its elicitation handler, then drives the task the gateway answers with) and
records the forms it was shown. Prints what it saw as one JSON object: the test decides,
this records.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp_tasks.client import call_tool_task


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def ask(url: str) -> None:
    forms: list[str] = []

    async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        forms.append(message)
        return {"decision": "allow once"}

    async with Client(url, mode="auto", elicitation_handler=on_elicit) as client:
        result = await client.call_tool("tk__research", {"topic": "asked", "steps": 1})
    print(json.dumps({"forms": forms, "text": _text(result)}))


async def main(target: str | StdioTransport) -> None:
    seen: dict[str, Any] = {}
    async with Client(target, mode="auto") as client:
        seen["protocol"] = client.protocol_version
        extensions = getattr(client.server_capabilities, "extensions", None) or {}
        seen["extensions"] = sorted(extensions)
        for key, name, args in (
            ("research", "tk__research", {"topic": "waves", "steps": 2, "delay": 0.2}),
            ("everything", "ev__simulate-research-query", {"topic": "waves"}),
        ):
            task = await call_tool_task(client, name, args)
            first = await task.status()
            result = await task.result()
            final = await task.status()
            seen[key] = {
                "id": task.task_id,
                "created": task.create_result.status,
                "first": first.status,
                "final": final.status,
                "text": _text(result),
            }
        long = await call_tool_task(
            client, "tk__research", {"topic": "long", "steps": 100, "delay": 0.2}
        )
        seen["long"] = (await long.status()).status
        await long.cancel()
        seen["cancelled"] = (await long.wait(timeout=20)).status
        plain = await client.call_tool("tk__research", {"topic": "plain", "steps": 1, "delay": 0.1})
        seen["plain"] = _text(plain)
    print(json.dumps(seen))


if __name__ == "__main__":
    if sys.argv[2:3] == ["--"]:
        asyncio.run(main(StdioTransport(sys.argv[3], sys.argv[4:])))
    elif sys.argv[2:3] == ["ask"]:
        asyncio.run(ask(sys.argv[1]))
    else:
        asyncio.run(main(sys.argv[1]))
