"""A stdio MCP server (official SDK) whose tool has an effect that must happen once.

``record(item, seconds)`` appends ``{"key", "item"}`` to the ledger file named by
``AGENTHOST_LEDGER``, then takes ``seconds`` (a slow tool). It is idempotent the way the
durable runs' docs ask of such servers: the request's ``_meta`` key ending in
``idempotency-key`` names the call, and a key already in the ledger is answered with the
first result, not appended again. Every attempt, repeated or not, is one line of
``AGENTHOST_LEDGER_ATTEMPTS`` (``key pid``), so a test sees the retries.

``publish(item)`` does the same at once (the tests make a policy ask for it).
``bulky(kind, size)`` returns a result of about ``size`` bytes: ``text``, an ``image``,
``audio``, ``structured`` content, an ``embedded`` blob resource, or an image whose
``mime`` type is that long; each attempt is a line of the attempts file too.
``summarize(item)`` asks the client's model (sampling, hint ``scripted-sampler``) for a
summary of the item and returns its text: a server's ask during a durable tool call.

Usage: ``python tests/peers/ledger_server.py`` (stdio).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer, Resolve, Sample
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    CreateMessageResult,
    EmbeddedResource,
    ImageContent,
    ModelHint,
    ModelPreferences,
    SamplingMessage,
    TextContent,
)


def _key(ctx: Context) -> str | None:
    meta: Any = ctx.request_context.meta
    if meta is None:
        return None
    items = meta.items() if isinstance(meta, dict) else (meta.model_extra or {}).items()
    for name, value in items:
        if name.endswith("idempotency-key") and isinstance(value, str):
            return value
    return None


def _append_once(key: str | None, item: str) -> bool:
    """Append under an exclusive lock unless ``key`` is there; True when appended."""
    with open(os.environ["AGENTHOST_LEDGER"], "a+", encoding="utf-8") as ledger:
        fcntl.flock(ledger, fcntl.LOCK_EX)
        ledger.seek(0)
        if key is not None and any(json.loads(line)["key"] == key for line in ledger if line):
            return False
        ledger.write(json.dumps({"key": key, "item": item}) + "\n")
        return True


def build_server() -> MCPServer:
    server = MCPServer("ledger")

    @server.tool()
    async def record(ctx: Context, item: str, seconds: float = 0.0) -> str:
        """Record an item in the ledger (once per idempotency key), slowly."""
        key = _key(ctx)
        with open(os.environ["AGENTHOST_LEDGER_ATTEMPTS"], "a", encoding="utf-8") as log:
            log.write(f"{key} {os.getpid()}\n")
        appended = _append_once(key, item)
        await anyio.sleep(seconds)
        return f"recorded {item}" if appended else f"recorded {item} (already, key {key})"

    @server.tool()
    async def publish(ctx: Context, item: str) -> str:
        """Publish an item (once per idempotency key): a step a person approves."""
        return await record(ctx, f"published {item}")

    @server.tool()
    async def bulky(ctx: Context, kind: str, size: int) -> CallToolResult:
        """A large result that is not text (see the module docstring)."""
        with open(os.environ["AGENTHOST_LEDGER_ATTEMPTS"], "a", encoding="utf-8") as log:
            log.write(f"{_key(ctx)} {os.getpid()}\n")
        data = base64.b64encode(b"\x89PNG" + b"\0" * size).decode()[:size]
        note = TextContent(type="text", text=f"a {kind} of {size} bytes")
        blocks: dict[str, Any] = {
            "image": ImageContent(type="image", data=data, mime_type="image/png"),
            "audio": AudioContent(type="audio", data=data, mime_type="audio/wav"),
            "mime": ImageContent(type="image", data="AAAA", mime_type="image/" + "x" * size),
            "embedded": EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(uri="file:///big.bin", blob=data),
            ),
        }
        if kind == "text":
            return CallToolResult(content=[TextContent(type="text", text="t" * size)])
        if kind == "structured":
            return CallToolResult(content=[note], structured_content={"blob": "z" * size})
        return CallToolResult(content=[note, blocks[kind]])

    @server.tool()
    async def summarize(
        item: str, answer: Annotated[CreateMessageResult, Resolve(_ask_summary)]
    ) -> str:
        """Summarize an item with the client's model (sampling)."""
        content = answer.content
        return f"{item}: {content.text}" if isinstance(content, TextContent) else item

    return server


def _ask_summary(item: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Sum up {item}"))
    hints = ModelPreferences(hints=[ModelHint(name="scripted-sampler")])
    return Sample([message], max_tokens=50, model_preferences=hints)


if __name__ == "__main__":
    build_server().run("stdio")
