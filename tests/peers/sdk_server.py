"""A real MCP server built on the official Python SDK (``mcp`` 2.x), for agenthost's tests.

Why it exists: agenthost must interoperate with servers it did not write. This script is
the reference *Python* peer: every feature agenthost's client side handles (tools with
structured output and errors, progress, cancellation, logging, sampling, roots, form and
URL elicitation, prompts with arguments and completion, static/binary/templated resources,
subscriptions, list-changed notifications) is offered here through the SDK's own API, so
a test exercises agenthost against the SDK's wire behaviour rather than our assumptions.

Usage::

    python tests/peers/sdk_server.py [stdio|streamable-http|sse] [--port N]
        [--certfile PEM --keyfile PEM]

HTTP modes bind 127.0.0.1 only (Streamable HTTP at ``/mcp``; legacy SSE at ``GET /sse``
with ``POST /messages/``). With ``--certfile``/``--keyfile`` Streamable HTTP is served
over TLS (uvicorn's ``ssl_*`` settings), for the HTTPS tests (tests/test_tls.py).
Side effects a test can observe from outside are appended to the file named by
``AGENTHOST_PEER_LOG`` (one line each), e.g. ``cancelled slow`` when the ``slow`` tool
was cancelled by ``notifications/cancelled``.

Sampling, roots and form elicitation go through the SDK's ``Resolve`` markers, so they
work on every revision: a standalone server-to-client request on the ``initialize``
revisions, an ``InputRequiredResult`` round trip on 2026-07-28. Without the matching
client capability they fail with the SDK's "missing required client capability" error
instead of sending a request the client never agreed to receive. See NOTES.md.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import typing
import uuid
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import (
    Context,
    Elicit,
    ElicitationResult,
    ListRoots,
    MCPServer,
    Resolve,
    Sample,
    UserMessage,
)
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import (
    INVALID_PARAMS,
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageResult,
    EmptyResult,
    ListRootsResult,
    NotificationParams,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, Field

__all__ = ["build_server", "main"]

PEER_LOG_ENV = "AGENTHOST_PEER_LOG"
"""Env var naming the file this server appends observable side effects to."""

README_URI = "text://readme"
BINARY_URI = "bin://pixel"
LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVELS: tuple[LogLevel, ...] = typing.get_args(LogLevel)

# A 1x1 transparent PNG: small, valid binary content with a real MIME type.
PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
NAMES = ("alice", "alfred", "bob", "carol")
STYLES = ("plain", "formal", "pirate")


def peer_log(line: str) -> None:
    """Append one line to ``$AGENTHOST_PEER_LOG`` so a test can see server-side events."""
    path = os.environ.get(PEER_LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


class SumResult(BaseModel):
    """Structured output of ``add``: the SDK derives the tool's outputSchema from it."""

    sum: int


class Person(BaseModel):
    """The form ``elicit_form`` asks for (primitive fields only, as the spec requires)."""

    name: str = Field(description="Your name")
    age: int = Field(description="Your age in years")
    subscribe: bool = Field(default=False, description="Subscribe to the newsletter")


def _ask_llm(prompt: str) -> Sample:
    """Resolver for ``sample``: one user message, a small token cap."""
    content = TextContent(type="text", text=prompt)
    return Sample([SamplingMessage(role="user", content=content)], max_tokens=100)


def _ask_roots() -> ListRoots:
    """Resolver for ``roots``."""
    return ListRoots()


def _ask_person() -> Elicit[Person]:
    """Resolver for ``elicit_form``."""
    return Elicit("Tell us about yourself", Person)


class _State:
    """Mutable server state the tools share (one server per process)."""

    def __init__(self) -> None:
        self.readme_version = 1
        self.subscribed: set[str] = set()
        self.log_level: LogLevel = "debug"
        self.extra_tool = False


def build_server() -> MCPServer[Any]:
    """Create the server with every tool, prompt, resource and handler registered."""
    server: MCPServer[Any] = MCPServer(
        name="agenthost-sdk-peer",
        version="1.0.0",
        instructions="Test peer for agenthost: echo, add, fail, slow, log, sample, roots...",
        log_level="WARNING",
    )
    state = _State()

    @server.tool(
        description="Echo the message back (text only, no outputSchema).", structured_output=False
    )
    def echo(message: str) -> str:
        return message

    @server.tool(description="Add two integers; structured result {sum}.")
    def add(a: int, b: int) -> SumResult:
        return SumResult(sum=a + b)

    @server.tool(description="Always fails with the given message (isError result).")
    def fail(message: str) -> str:
        raise ToolError(message)

    @server.tool(description="Sleep `seconds` in `steps` steps, reporting progress each step.")
    async def slow(ctx: Context, seconds: float, steps: int = 5) -> str:
        steps = max(1, steps)
        try:
            for i in range(steps):
                await anyio.sleep(seconds / steps)
                await ctx.report_progress(i + 1, steps, f"step {i + 1}/{steps}")
        except anyio.get_cancelled_exc_class():
            peer_log("cancelled slow")
            raise
        peer_log("finished slow")
        return f"slept {seconds}"

    @server.tool(description="Send one log message (notifications/message) at `level`.")
    async def log(ctx: Context, level: LogLevel, message: str) -> str:
        if LOG_LEVELS.index(level) >= LOG_LEVELS.index(state.log_level):
            await ctx.log(level, message, logger_name="sdk_server")
        return f"logged {level}"

    @server.tool(description="Ask the client's LLM (sampling) and return the text it got.")
    def sample(prompt: str, answer: Annotated[CreateMessageResult, Resolve(_ask_llm)]) -> str:
        del prompt  # consumed by the resolver
        content = answer.content
        if isinstance(content, TextContent):
            return content.text
        return json.dumps(content.model_dump(mode="json", by_alias=True, exclude_none=True))

    @server.tool(description="Ask the client's LLM, then work `seconds` before answering.")
    async def sample_then_wait(
        prompt: str,
        seconds: float,
        answer: Annotated[CreateMessageResult, Resolve(_ask_llm)],
    ) -> str:
        # On 2026-07-28 the body runs only in the round that carries the answer, so a
        # client that gives up meanwhile cancels that round's request (MRTR cancellation).
        del prompt
        peer_log("started sample_then_wait")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            peer_log("cancelled sample_then_wait")
            raise
        peer_log("finished sample_then_wait")
        content = answer.content
        return content.text if isinstance(content, TextContent) else "non-text answer"

    @server.tool(description="Return the client's roots (roots/list) as JSON text.")
    def roots(listing: Annotated[ListRootsResult, Resolve(_ask_roots)]) -> str:
        return json.dumps(
            [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in listing.roots]
        )

    @server.tool(description="Ask the client for a form (name, age, subscribe); return it.")
    def elicit_form(
        outcome: Annotated[ElicitationResult[Person], Resolve(_ask_person)],
    ) -> str:
        if outcome.action == "accept":
            return json.dumps({"action": "accept", "content": outcome.data.model_dump()})
        return json.dumps({"action": outcome.action})

    @server.tool(
        description="Write GATE.started, wait for the file GATE, then log, report"
        " progress and ask for a form (initialize revisions: the ask is the server's own)."
    )
    async def gated_elicit(ctx: Context, gate: str) -> str:
        Path(gate + ".started").write_text("started")
        with anyio.fail_after(30):
            while not Path(gate).exists():
                await anyio.sleep(0.02)
        await ctx.log("info", "gated_elicit: the gate opened", logger_name="sdk_server")
        await ctx.report_progress(1, 2, "gate open")
        outcome = await ctx.elicit("Who opened the gate?", Person)
        if outcome.action == "accept":
            return json.dumps({"action": "accept", "content": outcome.data.model_dump()})
        return json.dumps({"action": outcome.action})

    @server.tool(description="URL-mode elicitation (initialize revisions only).")
    async def elicit_url(ctx: Context) -> str:
        # The SDK sends URL-mode elicitation whatever the client declared; the spec says a
        # server MUST NOT use a mode the client did not declare, so this peer checks.
        caps = ctx.client_capabilities
        if caps is None or caps.elicitation is None or caps.elicitation.url is None:
            raise ToolError("client did not declare elicitation.url")
        elicitation_id = uuid.uuid4().hex
        result = await ctx.elicit_url(
            "Please sign in", f"https://example.invalid/auth?e={elicitation_id}", elicitation_id
        )
        if result.action == "accept":
            await ctx.session.send_elicit_complete(elicitation_id)
        return json.dumps({"action": result.action, "elicitationId": elicitation_id})

    @server.tool(description="Change text://readme and notify subscribers (resources/updated).")
    async def touch_readme(ctx: Context) -> str:
        state.readme_version += 1
        if README_URI in state.subscribed:
            await ctx.session.send_resource_updated(README_URI)
        await ctx.notify_resource_updated(README_URI)
        return f"readme version {state.readme_version}"

    def extra(message: str) -> str:
        return f"extra: {message}"

    @server.tool(description="Add or remove the tool `extra`, then send tools/list_changed.")
    async def toggle_extra_tool(ctx: Context) -> str:
        if state.extra_tool:
            server.remove_tool("extra")
        else:
            server.add_tool(extra, name="extra", description="Appears after toggle_extra_tool.")
        state.extra_tool = not state.extra_tool
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return "extra tool " + ("added" if state.extra_tool else "removed")

    @server.prompt(description="Greet someone, in a style.")
    def greet(name: str, style: str = "plain") -> list[UserMessage]:
        if style not in STYLES:
            message = f"unknown style {style!r}; one of {', '.join(STYLES)}"
            raise MCPError(code=INVALID_PARAMS, message=message)
        text = {
            "plain": f"Hello, {name}.",
            "formal": f"Good day, {name}.",
            "pirate": f"Ahoy, {name}!",
        }
        return [UserMessage(text[style])]

    @server.prompt(description="A prompt without arguments.")
    def simple() -> str:
        return "This is a simple prompt without arguments."

    @server.resource(README_URI, name="readme", mime_type="text/plain", description="Readme.")
    def readme() -> str:
        return f"agenthost sdk peer readme, version {state.readme_version}"

    @server.resource(BINARY_URI, name="pixel", mime_type="image/png", description="1x1 PNG.")
    def pixel() -> bytes:
        return PIXEL_PNG

    @server.resource("greeting://{name}", name="greeting", mime_type="text/plain")
    def greeting(name: str) -> str:
        if name == "nobody":
            raise ResourceNotFoundError(f"no greeting for {name}")
        return f"Hello, {name}!"

    @server.completion()  # type: ignore[no-untyped-call, untyped-decorator]
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        del context
        if argument.name == "name":
            pool: tuple[str, ...] = NAMES
        elif argument.name == "style" and isinstance(ref, PromptReference):
            pool = STYLES
        else:
            return None
        values = [v for v in pool if v.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)

    lowlevel = server._lowlevel_server  # no MCPServer API for these handlers (see NOTES.md)

    async def subscribe(_ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
        state.subscribed.add(str(params.uri))
        peer_log(f"subscribe {params.uri}")
        return EmptyResult()

    async def unsubscribe(_ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
        state.subscribed.discard(str(params.uri))
        peer_log(f"unsubscribe {params.uri}")
        return EmptyResult()

    async def set_level(_ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        state.log_level = params.level
        peer_log(f"setLevel {params.level}")
        return EmptyResult()

    async def roots_changed(_ctx: Any, _params: NotificationParams) -> None:
        peer_log("roots/list_changed")

    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
    lowlevel.add_notification_handler(
        "notifications/roots/list_changed", NotificationParams, roots_changed
    )
    # MCPServer always advertises listChanged=false; we do send list_changed, so say so.
    lowlevel.create_initialization_options = functools.partial(  # type: ignore[method-assign]
        lowlevel.create_initialization_options,
        NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True),
    )
    return server


def main(argv: list[str] | None = None) -> None:
    """Parse argv and run the server on the chosen transport until stdin/socket closes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "transport", nargs="?", default="stdio", choices=("stdio", "streamable-http", "sse")
    )
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--certfile", help="serve Streamable HTTP over TLS with this chain")
    parser.add_argument("--keyfile", help="the private key of --certfile")
    args = parser.parse_args(argv)
    # Logging/sampling/roots are deprecated at 2026-07-28 but are exactly what this peer
    # exists to exercise on the older revisions; keep stderr for real problems.
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    server = build_server()
    if args.transport == "stdio":
        server.run("stdio")
    elif args.transport == "sse":
        server.run("sse", host="127.0.0.1", port=args.port)
    elif args.certfile:
        # MCPServer.run passes no TLS settings to uvicorn: run its app the way it does.
        import uvicorn

        app = server.streamable_http_app(host="127.0.0.1")
        uvicorn.run(
            app,
            host="127.0.0.1",
            port=args.port,
            log_level="warning",
            ssl_certfile=args.certfile,
            ssl_keyfile=args.keyfile,
        )
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
