"""Interop with the official Python SDK server (tests/peers/sdk_server.py) over stdio.

Every feature is driven through agenthost's ClientSession under every revision the peer
accepts, and every message agenthost sends is validated against that revision's schema.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import pytest
import trio

from agenthost.connection import open_session
from agenthost.errors import JSONRPCError
from agenthost.protocol.revisions import SUPPORTED_REVISIONS, at_least
from agenthost.protocol.types import (
    BlobResourceContents,
    TextResourceContents,
)
from agenthost.session import ClientSession
from tests.helpers import PEER_TRANSPORTS, Recorder, RecordingTransport, open_sdk_peer, text_of

Command = tuple[str, list[str]]


#: Where the peer runs: over stdio and over both HTTP transports under every revision
#: (from a plain URL: agenthost's probe must pick the transport the server speaks), and
#: behind a WebSocket bridge (tests/peers/ws_bridge.py) under the current one.
TRANSPORT_CASES = [
    *(
        (transport, revision)
        for transport in PEER_TRANSPORTS[:3]
        for revision in SUPPORTED_REVISIONS
    ),
    ("websocket", "2025-11-25"),
]


@asynccontextmanager
async def sdk_session(
    cmd: Command,
    revision: str,
    recorder: Recorder,
    env: dict[str, str] | None = None,
    transport: str = "stdio",
) -> AsyncIterator[tuple[ClientSession, RecordingTransport]]:
    """A session with the SDK peer over ``transport`` (one of :data:`PEER_TRANSPORTS`)."""
    async with open_sdk_peer(transport, cmd, env) as opened:
        recording = RecordingTransport(opened)
        async with open_session(
            recording, name="sdk", handlers=recorder.handlers(), protocol_version=revision
        ) as session:
            yield session, recording


@pytest.mark.parametrize(("transport", "revision"), TRANSPORT_CASES)
async def test_sdk_server_every_feature(
    transport: str,
    revision: str,
    sdk_server_cmd: Callable[..., Command],
    peer_log: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="agenthost.server.sdk")
    recorder = Recorder()
    env = {"AGENTHOST_PEER_LOG": str(peer_log)}
    peer = sdk_session(sdk_server_cmd(), revision, recorder, env, transport)
    async with peer as (session, recording):
        assert session.revision == revision
        assert session.initialize_result is not None
        assert session.initialize_result.server_info.name

        # tools: list, plain call, structured output checked against outputSchema, isError
        tools = {tool.name: tool for tool in await session.list_tools()}
        assert {"echo", "add", "fail", "slow", "log", "sample", "roots"} <= set(tools)
        assert text_of(await session.call_tool("echo", {"message": "hi"})) == "hi"
        added = await session.call_tool("add", {"a": 2, "b": 3})
        assert added.structured_content == {"sum": 5}
        failed = await session.call_tool("fail", {"message": "nope"})
        assert failed.is_error
        assert "nope" in text_of(failed)

        # progress, delivered to the call's callback in order
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        await session.call_tool("slow", {"seconds": 0.05, "steps": 3}, progress=on_progress)
        assert seen == [1, 2, 3]

        # logging: setLevel, then a message lands in Python logging under the server name
        await session.set_logging_level("info")
        await session.call_tool("log", {"level": "warning", "message": "careful"})
        await session.call_tool("log", {"level": "debug", "message": "filtered"})
        await session.ping()

        # server -> client: sampling and roots go through our handlers
        sampled = await session.call_tool("sample", {"prompt": "hello"})
        assert "sampled: hello" in text_of(sampled)
        assert recorder.sampling[0].max_tokens == 100
        roots = await session.call_tool("roots", {})
        assert "file:///srv/work%20space" in text_of(roots)

        # elicitation exists from 2025-06-18; URL mode from 2025-11-25
        if at_least(revision, "2025-06-18"):
            form = await session.call_tool("elicit_form", {})
            assert orjson.loads(text_of(form)) == {
                "action": "accept",
                "content": {"name": "Ada", "age": 36, "subscribe": False},
            }
            assert recorder.elicitations[-1].requested_schema is not None
        if at_least(revision, "2025-11-25"):
            url = await session.call_tool("elicit_url", {})
            assert '"accept"' in text_of(url)
            assert recorder.elicitations[-1].mode == "url"
            assert recorder.elicitations[-1].url

        # prompts with arguments
        prompts = {p.name: p for p in await session.list_prompts()}
        assert {"greet", "simple"} <= set(prompts)
        assert [a.name for a in prompts["greet"].arguments or []][:1] == ["name"]
        greeting = await session.get_prompt("greet", {"name": "Ada", "style": "formal"})
        assert "Ada" in greeting.messages[0].content.text  # type: ignore[union-attr]
        with pytest.raises(JSONRPCError):
            await session.get_prompt("greet", {"name": "Ada", "style": "no-such-style"})

        # resources: text, binary (base64 -> bytes), a template
        uris = {r.uri for r in await session.list_resources()}
        assert {"text://readme", "bin://pixel"} <= uris
        readme = await session.read_resource("text://readme")
        assert isinstance(readme.contents[0], TextResourceContents)
        pixel = await session.read_resource("bin://pixel")
        assert isinstance(pixel.contents[0], BlobResourceContents)
        assert pixel.contents[0].blob.startswith(b"\x89PNG")
        templates = await session.list_resource_templates()
        assert [t.uri_template for t in templates] == ["greeting://{name}"]
        hello = await session.read_resource("greeting://alice")
        assert "alice" in hello.contents[0].text  # type: ignore[union-attr]

        # completion
        done = await session.complete(
            {"type": "ref/resource", "uri": "greeting://{name}"}, "name", "al"
        )
        assert done.completion.values == ["alice", "alfred"]

        # subscriptions and list_changed, delivered to listeners
        await session.subscribe_resource("text://readme")
        await session.call_tool("touch_readme", {})
        await session.call_tool("toggle_extra_tool", {})
        with trio.fail_after(5):
            while not recorder.updated or not recorder.tools_changed:
                await trio.sleep(0.01)
        assert recorder.updated == ["text://readme"]
        await session.unsubscribe_resource("text://readme")

        # cancelling a call mid-way reaches the server, and the session keeps working
        with trio.move_on_after(0.3):
            await session.call_tool("slow", {"seconds": 30, "steps": 30})
        assert text_of(await session.call_tool("echo", {"message": "still"})) == "still"
        with trio.fail_after(5):
            while "cancelled slow" not in peer_log.read_text():
                await trio.sleep(0.02)

        checked = recording.assert_valid(revision)
        assert checked > 30

    messages = [r.getMessage() for r in caplog.records if r.name.startswith("agenthost.server.sdk")]
    assert "[sdk_server] careful" in messages
    assert "filtered" not in messages
