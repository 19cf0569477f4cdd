"""Interop with @modelcontextprotocol/server-everything over stdio: every tool, prompt and
resource it offers, driven through agenthost's ClientSession, all sent messages validated
against the negotiated revision's schema."""

from __future__ import annotations

import base64
import gzip
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from agenthost.asks import ClientHandlers, RequestContext
from agenthost.connection import open_session
from agenthost.errors import JSONRPCError
from agenthost.protocol.types import (
    BlobResourceContents,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    ListRootsResult,
    ResourceLink,
    Root,
    TextContent,
    TextResourceContents,
)
from agenthost.session import ClientSession
from tests.helpers import PEER_TRANSPORTS, RecordingTransport, open_everything_peer

Command = tuple[str, list[str]]

CAPABILITY_TOOLS = {
    "get-roots-list",
    "trigger-sampling-request",
    "trigger-elicitation-request",
    "trigger-url-elicitation",
}


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


class Everything:
    def __init__(self) -> None:
        self.sampling: list[CreateMessageRequestParams] = []
        self.elicitations: list[ElicitRequestParams] = []
        self.updated: list[str] = []
        self.roots_asked = 0

    async def on_sampling(
        self, ctx: RequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        self.sampling.append(params)
        return CreateMessageResult(
            role="assistant",
            content=TextContent(text="a haiku about MCP"),
            model="scripted-model",
            stop_reason="endTurn",
        )

    async def on_roots(self, ctx: RequestContext, params: Any) -> ListRootsResult:
        self.roots_asked += 1
        return ListRootsResult(roots=[Root(uri="file:///tmp/project", name="project")])

    async def on_elicit(self, ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.elicitations.append(params)
        if params.mode == "url":
            return ElicitResult(action="accept")
        return ElicitResult(action="accept", content={"name": "Ada", "check": True})

    async def on_updated(self, ctx: RequestContext, params: Any) -> None:
        self.updated.append(params["uri"])

    def handlers(self) -> ClientHandlers:
        return ClientHandlers(
            roots=self.on_roots,
            sampling=self.on_sampling,
            elicitation=self.on_elicit,
            notifications={"notifications/resources/updated": self.on_updated},
        )


async def tools_when_registered(session: ClientSession) -> dict[str, Any]:
    """server-everything registers capability tools just after `initialized`."""
    with trio.fail_after(5):
        while True:
            tools = {t.name: t for t in await session.list_tools()}
            if set(tools) >= CAPABILITY_TOOLS:
                return tools
            await trio.sleep(0.02)


@pytest.mark.parametrize("transport", PEER_TRANSPORTS[:3])
async def test_everything_over_each_transport(
    transport: str,
    everything_cmd: Callable[[], Command],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agenthost.server.everything")
    peer = Everything()
    async with open_everything_peer(transport, everything_cmd(), tmp_path) as opened:
        recording = RecordingTransport(opened)
        async with open_session(recording, name="everything", handlers=peer.handlers()) as session:
            assert session.revision == "2025-11-25"
            tools = await tools_when_registered(session)
            await everything_tools(session, tools, peer)
            await everything_prompts(session)
            await everything_resources(session, peer)
            assert recording.assert_valid() > 40
    assert any(
        r.name.startswith("agenthost.server.everything") and "Roots updated" in r.getMessage()
        for r in caplog.records
    )


async def everything_tools(session: ClientSession, tools: dict[str, Any], peer: Everything) -> None:
    assert text_of(await session.call_tool("echo", {"message": "hi"})) == "Echo: hi"
    assert "3" in text_of(await session.call_tool("get-sum", {"a": 1, "b": 2}))

    annotated = await session.call_tool(
        "get-annotated-message", {"messageType": "error", "includeImage": True}
    )
    assert annotated.content[0].annotations is not None  # type: ignore[union-attr]
    assert any(isinstance(b, ImageContent) for b in annotated.content)

    env = await session.call_tool("get-env", {})
    child_env = orjson.loads(text_of(env))
    assert "PATH" in child_env
    assert not any(key.endswith("_API_KEY") for key in child_env)

    links = await session.call_tool("get-resource-links", {"count": 2})
    assert sum(isinstance(b, ResourceLink) for b in links.content) == 2

    ref = await session.call_tool("get-resource-reference", {"resourceType": "Blob"})
    embedded = [b for b in ref.content if isinstance(b, EmbeddedResource)]
    assert isinstance(embedded[0].resource, BlobResourceContents)

    weather = await session.call_tool("get-structured-content", {"location": "Chicago"})
    assert tools["get-structured-content"].output_schema is not None
    assert set(weather.structured_content) >= {"temperature", "conditions", "humidity"}

    image = await session.call_tool("get-tiny-image", {})
    png = next(b for b in image.content if isinstance(b, ImageContent))
    assert png.data.startswith(b"\x89PNG")
    assert png.mime_type == "image/png"

    data_uri = "data:text/plain;base64," + base64.b64encode(b"zip me").decode()
    gz = await session.call_tool(
        "gzip-file-as-resource", {"name": "a.txt.gz", "data": data_uri, "outputType": "resource"}
    )
    blob = next(b for b in gz.content if isinstance(b, EmbeddedResource)).resource
    assert isinstance(blob, BlobResourceContents)
    assert gzip.decompress(blob.blob) == b"zip me"

    # progress, then a call cancelled mid-way (the server stops; the session lives on)
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    done = await session.call_tool(
        "trigger-long-running-operation", {"duration": 0.4, "steps": 4}, progress=on_progress
    )
    assert "completed" in text_of(done)
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    with trio.move_on_after(0.3) as scope:
        await session.call_tool("trigger-long-running-operation", {"duration": 30, "steps": 3})
    assert scope.cancelled_caught
    assert text_of(await session.call_tool("echo", {"message": "after"})) == "Echo: after"

    # logging: toggled on, a message arrives (before the tool's result), toggled off
    await session.set_logging_level("debug")
    started = await session.call_tool("toggle-simulated-logging", {})
    assert "Started" in text_of(started)
    assert "Stopped" in text_of(await session.call_tool("toggle-simulated-logging", {}))

    # server -> client requests through our handlers
    roots = await session.call_tool("get-roots-list", {})
    assert "file:///tmp/project" in text_of(roots)
    assert peer.roots_asked >= 1
    sampled = await session.call_tool(
        "trigger-sampling-request", {"prompt": "MCP", "maxTokens": 50}
    )
    assert "a haiku about MCP" in text_of(sampled)
    assert peer.sampling[-1].max_tokens == 50
    assert peer.sampling[-1].system_prompt == "You are a helpful test server."
    form = await session.call_tool("trigger-elicitation-request", {})
    assert "Ada" in text_of(form)
    assert peer.elicitations[-1].requested_schema is not None
    url = await session.call_tool(
        "trigger-url-elicitation", {"url": "https://example.com/authorize"}
    )
    assert "completed" in text_of(url)
    assert peer.elicitations[-1].mode == "url"
    assert peer.elicitations[-1].url == "https://example.com/authorize"

    # the tasks-only tool is listed with its execution requirement
    research = tools["simulate-research-query"]
    assert research.execution is not None


async def everything_prompts(session: ClientSession) -> None:
    prompts = {p.name: p for p in await session.list_prompts()}
    assert set(prompts) == {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"}
    simple = await session.get_prompt("simple-prompt")
    assert simple.messages
    city = await session.get_prompt("args-prompt", {"city": "Paris", "state": "TX"})
    assert "Paris" in city.messages[0].content.text  # type: ignore[union-attr]
    with pytest.raises(JSONRPCError) as info:
        await session.get_prompt("args-prompt", {})
    assert info.value.code == -32602
    resource = await session.get_prompt(
        "resource-prompt", {"resourceType": "Text", "resourceId": "2"}
    )
    assert any(isinstance(m.content, EmbeddedResource) for m in resource.messages)
    completed = await session.complete(
        {"type": "ref/prompt", "name": "completable-prompt"}, "department", "E"
    )
    assert completed.completion.values == ["Engineering"]
    names = await session.complete(
        {"type": "ref/prompt", "name": "completable-prompt"},
        "name",
        "",
        context={"department": "Sales"},
    )
    assert names.completion.values == ["David", "Eve", "Frank"]


async def everything_resources(session: ClientSession, peer: Everything) -> None:
    resources = await session.list_resources()
    static = [r for r in resources if r.uri.startswith("demo://resource/static/document/")]
    assert len(static) == 7  # plus whatever earlier tool calls registered (gzip output)
    for resource in static:
        read = await session.read_resource(resource.uri)
        assert isinstance(read.contents[0], TextResourceContents)
        assert read.contents[0].text
    templates = {t.uri_template for t in await session.list_resource_templates()}
    assert templates == {
        "demo://resource/dynamic/text/{resourceId}",
        "demo://resource/dynamic/blob/{resourceId}",
    }
    text = await session.read_resource("demo://resource/dynamic/text/3")
    assert isinstance(text.contents[0], TextResourceContents)
    blob = await session.read_resource("demo://resource/dynamic/blob/3")
    assert isinstance(blob.contents[0], BlobResourceContents)
    with pytest.raises(JSONRPCError):
        await session.read_resource("demo://resource/nowhere")
    completion = await session.complete(
        {"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"},
        "resourceId",
        "5",
    )
    assert completion.completion.values == ["5"]

    uri = static[0].uri
    await session.subscribe_resource(uri)
    await session.call_tool("toggle-subscriber-updates", {})
    with trio.fail_after(5):
        while uri not in peer.updated:
            await trio.sleep(0.01)
    await session.call_tool("toggle-subscriber-updates", {})
    await session.unsubscribe_resource(uri)
