"""A server with many tools, on the official SDK's low-level ``Server``: tool search's peer.

Why: a user with ten servers has hundreds of tools; the tool-search tests and the
measurement start ten of these (one per theme) for 300 tools with realistic names,
descriptions and parameter schemas (each tool's definition is 150-250 tokens, like the
servers people use). Every call answers ``THEME__TOOL called with {arguments}``.

Usage::

    python tests/peers/many_tools_server.py THEME [--media]   # one of THEMES, over stdio

``--media`` adds one tool, ``get_recording``, whose result is a short text, a 1x1 PNG and
a tiny WAV: content some models cannot take.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

#: theme -> (what it is about, the objects its tools act on)
THEMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "github": (
        "a GitHub repository",
        ("issue", "pull_request", "branch", "release", "comment", "label"),
    ),
    "slack": ("a Slack workspace", ("message", "channel", "thread", "reaction", "member", "file")),
    "jira": ("a Jira project", ("ticket", "sprint", "epic", "board", "worklog", "component")),
    "calendar": (
        "a team calendar",
        ("event", "attendee", "reminder", "calendar", "room", "invitation"),
    ),
    "mail": ("a mailbox", ("email", "draft", "folder", "attachment", "contact", "filter")),
    "drive": (
        "a shared drive",
        ("document", "directory", "permission", "revision", "spreadsheet", "shortcut"),
    ),
    "db": ("a PostgreSQL database", ("table", "row", "index", "query", "backup", "migration")),
    "k8s": ("a Kubernetes cluster", ("pod", "deployment", "service", "secret", "namespace", "job")),
    "weather": (
        "a weather service",
        ("forecast", "alert", "station", "observation", "radar", "climate"),
    ),
    "billing": (
        "a billing system",
        ("invoice", "customer", "subscription", "refund", "payment", "coupon"),
    ),
}
VERBS = ("create", "get", "list", "update", "delete")
_VERB_TEXT = {
    "create": "Create a new {obj} in {where}. Returns the new {obj} with its id, so later"
    " calls can refer to it. Fails if a {obj} with the same name already exists.",
    "get": "Get one {obj} from {where} by its id, with every field the API returns"
    " (owner, timestamps, status and links to related objects).",
    "list": "List the {obj}s in {where}, newest first, one page at a time. Use the cursor of"
    " the previous page to get the next one; filter by status or owner to narrow it.",
    "update": "Update the fields of an existing {obj} in {where}. Only the fields given are"
    " changed; the others keep their values. Returns the {obj} as it is after the change.",
    "delete": "Delete a {obj} from {where} for good. This cannot be undone; related objects"
    " that only this {obj} refers to are deleted with it.",
}


def _schema(verb: str, obj: str) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    if verb in ("get", "update", "delete"):
        props[f"{obj}_id"] = {"type": "string", "description": f"The id of the {obj}."}
        required.append(f"{obj}_id")
    if verb in ("create", "update"):
        props["name"] = {"type": "string", "description": f"A short name for the {obj}."}
        props["description"] = {"type": "string", "description": "Longer free text."}
        props["owner"] = {"type": "string", "description": "Who it belongs to (user id)."}
        props["labels"] = {"type": "array", "items": {"type": "string"}, "description": "Tags."}
        props["when"] = {"type": "string", "format": "date-time", "description": "ISO 8601."}
        if verb == "create":
            required.append("name")
    if verb == "list":
        props["status"] = {"type": "string", "enum": ["open", "closed", "all"], "default": "all"}
        props["owner"] = {"type": "string", "description": "Only those of this user id."}
        props["cursor"] = {"type": "string", "description": "From the previous page."}
        props["limit"] = {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}
    if verb == "delete":
        props["confirm"] = {"type": "boolean", "description": "Must be true."}
        required.append("confirm")
    return {"type": "object", "properties": props, "required": required}


def tools_of(theme: str) -> list[types.Tool]:
    """The theme's 30 tools (6 objects x 5 verbs)."""
    where, objects = THEMES[theme]
    return [
        types.Tool(
            name=f"{verb}_{obj}",
            title=f"{verb.capitalize()} {obj.replace('_', ' ')}",
            description=_VERB_TEXT[verb].format(obj=obj.replace("_", " "), where=where),
            input_schema=_schema(verb, obj),
        )
        for obj in objects
        for verb in VERBS
    ]


_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
_WAV = base64.b64decode("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=")
_RECORDING = types.Tool(
    name="get_recording",
    description="Get the latest recording: a snapshot and its sound.",
    input_schema={"type": "object", "properties": {}},
)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _recording() -> types.CallToolResult:
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="recording 7"),
            types.ImageContent(type="image", data=_b64(_PNG), mime_type="image/png"),
            types.AudioContent(type="audio", data=_b64(_WAV), mime_type="audio/wav"),
        ]
    )


def main() -> None:
    theme = sys.argv[1]
    tools = tools_of(theme)
    if "--media" in sys.argv[2:]:
        tools.append(_RECORDING)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == _RECORDING.name:
            return _recording()
        text = f"{theme}__{params.name} called with {json.dumps(params.arguments or {})}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    server = Server(theme, on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
