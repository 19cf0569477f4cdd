"""The tools, resources and prompts the conformance suite's *server* scenarios call.

The suite (``conformance server``) ships no server: every SDK writes its own from the
scenarios' expectations. This one is written with the official Python SDK (``mcp`` 2.x)
and runs on stdio as the upstream of ``agenthost serve --http``, which the suite then
tests: the gateway is as conformant as the server behind it.

Usage: python tests/peers/conformance_server.py   (stdio)
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import (
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
    Sample,
    UserMessage,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import (
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, Field

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"
    "AAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


class Answer(BaseModel):
    response: str = Field(description="The user's response")


class Defaults(BaseModel):
    """SEP-1034: a default for every primitive type."""

    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active",
        description="User status",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    verified: bool = Field(default=True, description="Verification status")


class Enums(BaseModel):
    """SEP-1330: the enum shapes a form may use."""

    untitledSingle: str = Field(
        description="Simple enum", json_schema_extra={"enum": ["active", "inactive", "pending"]}
    )
    titledSingle: str = Field(
        description="Titled enum",
        json_schema_extra={
            "oneOf": [
                {"const": "low", "title": "Low Priority"},
                {"const": "medium", "title": "Medium Priority"},
                {"const": "high", "title": "High Priority"},
            ]
        },
    )
    untitledMulti: list[str] = Field(
        description="Multi-select",
        json_schema_extra={"items": {"type": "string", "enum": ["read", "write", "execute"]}},
    )
    titledMulti: list[str] = Field(
        description="Titled multi-select",
        json_schema_extra={
            "items": {
                "anyOf": [
                    {"const": "feature", "title": "New Feature"},
                    {"const": "bug", "title": "Bug Fix"},
                    {"const": "docs", "title": "Documentation"},
                ]
            }
        },
    )
    legacyEnum: str = Field(
        description="Legacy enum with enumNames",
        json_schema_extra={
            "enum": ["small", "medium", "large"],
            "enumNames": ["Small Size", "Medium Size", "Large Size"],
        },
    )


def _ask(message: str) -> Elicit[Answer]:
    return Elicit(message, Answer)


def _ask_defaults() -> Elicit[Defaults]:
    return Elicit("Please provide user information", Defaults)


def _ask_enums() -> Elicit[Enums]:
    return Elicit("Please select values using different enum schema types", Enums)


def _sample(prompt: str) -> Sample:
    content = TextContent(type="text", text=prompt)
    return Sample([SamplingMessage(role="user", content=content)], max_tokens=100)


def _outcome(label: str, result: ElicitationResult[Any]) -> str:
    content = result.data.model_dump_json() if result.action == "accept" else "{}"
    return f"{label}: action={result.action}, content={content}"


#: ``json-schema-2020-12`` (SEP-1613): the listing must keep ``$schema``, ``$defs`` (with
#: ``address``) and ``additionalProperties: false`` exactly as the server wrote them. The
#: SDK derives a schema from the function's signature, which has none of the three, so the
#: tool is registered with this one (as the TypeScript SDK's conformance server writes it).
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


def json_schema_2020_12_tool(name: str = "", address: dict[str, Any] | None = None) -> str:
    return json.dumps({"name": name, "address": address})


def _json_schema_tool() -> Tool:
    """The tool, listed with :data:`JSON_SCHEMA_2020_12` (the SDK still validates a call's
    arguments against the signature, which accepts what the schema does)."""
    tool = Tool.from_function(json_schema_2020_12_tool, description="JSON Schema 2020-12 input")
    return tool.model_copy(update={"parameters": JSON_SCHEMA_2020_12})


def build() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(
        name="agenthost-conformance-upstream", version="1.0.0", tools=[_json_schema_tool()]
    )
    watched = {"test://watched-resource"}

    @server.tool(description="Simple text content")
    def test_simple_text() -> str:
        return "This is a simple text response for testing."

    @server.tool(description="Image content")
    def test_image_content() -> list[ImageContent]:
        return [ImageContent(type="image", data=PNG, mime_type="image/png")]

    @server.tool(description="Audio content")
    def test_audio_content() -> list[AudioContent]:
        return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]

    embedded = TextResourceContents(
        uri="test://embedded-resource",
        mime_type="text/plain",
        text="This is an embedded resource content.",
    )

    @server.tool(description="Embedded resource content")
    def test_embedded_resource() -> list[EmbeddedResource]:
        return [EmbeddedResource(type="resource", resource=embedded)]

    @server.tool(description="Text, image and resource together")
    def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
        mixed = TextResourceContents(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text='{"test": "data", "value": 123}',
        )
        return [
            TextContent(type="text", text="Multiple content types test:"),
            ImageContent(type="image", data=PNG, mime_type="image/png"),
            EmbeddedResource(type="resource", resource=mixed),
        ]

    @server.tool(description="Logs while it runs")
    async def test_tool_with_logging(ctx: Context) -> str:
        for line in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.info(line)
            await anyio.sleep(0.05)
        return "Tool with logging executed successfully"

    @server.tool(description="Reports progress while it runs")
    async def test_tool_with_progress(ctx: Context) -> str:
        for done in (0, 50, 100):
            await ctx.report_progress(done, 100, f"Completed step {done} of 100")
            await anyio.sleep(0.05)
        return "Progress test completed"

    @server.tool(description="Fails")
    def test_error_handling() -> str:
        raise ToolError("This tool intentionally returns an error for testing")

    @server.tool(description="Asks the client's LLM")
    def test_sampling(prompt: str, answer: Annotated[CreateMessageResult, Resolve(_sample)]) -> str:
        del prompt
        content = answer.content
        text = content.text if isinstance(content, TextContent) else "No response"
        return f"LLM response: {text}"

    @server.tool(description="Asks the user")
    def test_elicitation(
        message: str, outcome: Annotated[ElicitationResult[Answer], Resolve(_ask)]
    ) -> str:
        del message
        return _outcome("User response", outcome)

    @server.tool(description="Elicitation with defaults (SEP-1034)")
    def test_elicitation_sep1034_defaults(
        outcome: Annotated[ElicitationResult[Defaults], Resolve(_ask_defaults)],
    ) -> str:
        return _outcome("Elicitation result", outcome)

    @server.tool(description="Elicitation enums (SEP-1330)")
    def test_elicitation_sep1330_enums(
        outcome: Annotated[ElicitationResult[Enums], Resolve(_ask_enums)],
    ) -> str:
        return _outcome("Elicitation completed", outcome)

    @server.resource("test://static-text", mime_type="text/plain")
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", mime_type="image/png")
    def static_binary() -> bytes:
        return base64.b64decode(PNG)

    @server.resource("test://template/{id}/data", mime_type="application/json")
    def template(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.resource("test://watched-resource", mime_type="text/plain")
    def watched_resource() -> str:
        return "Watched resource content"

    @server.prompt(description="A simple prompt")
    def test_simple_prompt() -> list[UserMessage]:
        return [
            UserMessage(
                content=TextContent(type="text", text="This is a simple prompt for testing.")
            )
        ]

    @server.prompt(description="A prompt with arguments")
    def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
        text = f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
        return [UserMessage(content=TextContent(type="text", text=text))]

    @server.prompt(description="A prompt with an embedded resource")
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
        resource = TextResourceContents(
            uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
        )
        return [
            UserMessage(content=EmbeddedResource(type="resource", resource=resource)),
            UserMessage(
                content=TextContent(type="text", text="Please process the embedded resource above.")
            ),
        ]

    @server.prompt(description="A prompt with an image")
    def test_prompt_with_image() -> list[UserMessage]:
        return [
            UserMessage(content=ImageContent(type="image", data=PNG, mime_type="image/png")),
            UserMessage(content=TextContent(type="text", text="Please analyze the image above.")),
        ]

    @server.completion()  # type: ignore[no-untyped-call, untyped-decorator]
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        del ref, argument, context
        return Completion(values=[], total=0, has_more=False)

    lowlevel = server._lowlevel_server

    async def subscribe(_ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
        watched.add(str(params.uri))
        return EmptyResult()

    async def unsubscribe(_ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
        watched.discard(str(params.uri))
        return EmptyResult()

    async def set_level(_ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        del params
        return EmptyResult()

    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
    return server


if __name__ == "__main__":
    build().run("stdio")
