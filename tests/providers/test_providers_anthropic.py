"""The Anthropic adapter against MockTransport payloads shaped like the Messages API."""

from __future__ import annotations

import time
from functools import partial

import httpx2
import pytest
import trio

from agenthost.errors import ConfigError, ProviderError, UnsupportedContent
from agenthost_providers.anthropic import AnthropicProvider
from agenthost_providers.base import (
    END_TURN,
    MAX_TOKENS,
    STOP_SEQUENCE,
    TOOL_USE,
    AudioContent,
    Completed,
    ImageContent,
    Message,
    Request,
    TextDelta,
    ToolResultContent,
    ToolUseContent,
    ToolUseEvent,
)
from agenthost_providers.config import build_provider, parse_providers
from tests.providers.providers_helpers import (
    PNG,
    WEATHER,
    Handler,
    Recorder,
    anthropic_error,
    anthropic_message,
    ask_model,
    make_provider,
    sse,
)

SECRET = "sk-" + "ant-test-DO-NOT-LEAK-1234"  # a fake key, built so no scanner takes it for one


def make(handler: Handler) -> AnthropicProvider:
    env = {"ANTHROPIC_API_KEY": SECRET}
    return make_provider(AnthropicProvider, {"anthropic": {}}, env, handler)


ask = partial(ask_model, model="claude-sonnet-5-5")


async def test_text_with_system_prompt() -> None:
    rec = Recorder(
        anthropic_message([{"type": "text", "text": "Paris."}], model="claude-sonnet-5-5-20261015")
    )
    async with make(rec) as provider:
        result = await provider.complete(
            ask(
                system_prompt="You are terse.", temperature=0.2, metadata={"user_id": "u-1", "x": 1}
            )
        )
    assert result.text == "Paris."
    assert result.model == "claude-sonnet-5-5-20261015"
    assert result.stop_reason == END_TURN
    assert (result.usage.input_tokens, result.usage.output_tokens) == (12, 6)
    body = rec.bodies[0]
    assert rec.requests[0].url.path == "/v1/messages"
    assert body["system"] == "You are terse."
    assert body["max_tokens"] == 100
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is the capital of France?"}]}
    ]
    assert body["metadata"] == {"user_id": "u-1"}
    assert "temperature" not in body


async def test_image_input_is_a_base64_source() -> None:
    rec = Recorder(anthropic_message([{"type": "text", "text": "A red dot."}]))
    request = Request(
        model="claude-sonnet-5-5",
        messages=(Message.user("What is this?", ImageContent(data=PNG, mime_type="image/png")),),
        max_tokens=50,
    )
    async with make(rec) as provider:
        result = await provider.complete(request)
    assert result.text == "A red dot."
    image = rec.bodies[0]["messages"][0]["content"][1]
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
    }


async def test_stop_sequence_and_max_tokens() -> None:
    rec = Recorder(
        anthropic_message(
            [{"type": "text", "text": "1, 2"}], stop_reason="stop_sequence", stop_sequence=", 3"
        ),
        anthropic_message([{"type": "text", "text": "Once upon"}], stop_reason="max_tokens"),
    )
    async with make(rec) as provider:
        first = await provider.complete(ask("count", stop_sequences=(", 3",)))
        second = await provider.complete(ask("story"))
    assert first.stop_reason == STOP_SEQUENCE
    assert rec.bodies[0]["stop_sequences"] == [", 3"]
    assert second.stop_reason == MAX_TOKENS


async def test_tool_use_round_trip() -> None:
    rec = Recorder(
        anthropic_message(
            [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
            stop_reason="tool_use",
        ),
        anthropic_message([{"type": "text", "text": "18°C in Paris."}]),
    )
    first_request = ask("Weather in Paris?", tools=(WEATHER,), tool_choice="required")
    async with make(rec) as provider:
        first = await provider.complete(first_request)
        assert first.stop_reason == TOOL_USE
        assert first.tool_uses == (
            ToolUseContent(id="toolu_01A", name="get_weather", input={"city": "Paris"}),
        )
        follow_up = Request(
            model="claude-sonnet-5-5",
            messages=(
                *first_request.messages,
                Message(role="assistant", content=first.content),
                Message.user(
                    ToolResultContent(
                        tool_use_id="toolu_01A", content=(), structured_content={"temp": 18}
                    )
                ),
            ),
            max_tokens=100,
            tools=(WEATHER,),
        )
        second = await provider.complete(follow_up)
    assert second.text == "18°C in Paris."
    sent_first, sent_second = rec.bodies
    assert sent_first["tools"] == [
        {
            "name": "get_weather",
            "input_schema": dict(WEATHER.input_schema),
            "description": WEATHER.description,
        }
    ]
    assert sent_first["tool_choice"] == {"type": "any"}
    assert sent_second["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_01A",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert sent_second["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_01A",
            "content": [{"type": "text", "text": '{"temp": 18}'}],
        }
    ]


async def test_retries_429_then_succeeds() -> None:
    rec = Recorder(
        anthropic_error(429, "rate_limit_error", "Number of requests has exceeded your rate limit"),
        anthropic_message([{"type": "text", "text": "ok"}]),
    )
    async with make(rec) as provider:
        result = await provider.complete(ask())
    assert result.text == "ok"
    assert len(rec.requests) == 2


async def test_persistent_5xx_becomes_provider_error_after_retries() -> None:
    rec = Recorder(anthropic_error(529, "overloaded_error", "Overloaded"))
    async with make(rec) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.complete(ask())
    assert len(rec.requests) == 3  # the first try + max_retries=2
    assert info.value.status == 529
    assert info.value.retryable
    assert "Overloaded" in str(info.value)
    assert info.value.provider == "anthropic"


async def test_4xx_is_not_retried_and_keeps_the_provider_message() -> None:
    rec = Recorder(anthropic_error(401, "authentication_error", "invalid x-api-key"))
    async with make(rec) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.complete(ask())
    assert len(rec.requests) == 1
    assert info.value.status == 401 and not info.value.retryable
    assert "invalid x-api-key" in str(info.value)
    assert SECRET not in str(info.value)


async def test_missing_key_names_the_variable() -> None:
    config = parse_providers({"anthropic": {}}, source="t.toml")
    with pytest.raises(ConfigError) as info:
        build_provider(config.get("anthropic"), {})
    assert "ANTHROPIC_API_KEY" in str(info.value)
    with pytest.raises(ConfigError, match="MY_KEY is not set"):
        build_provider(
            parse_providers({"a": {"kind": "anthropic", "api_key_env": "MY_KEY"}}, source="t").get(
                "a"
            ),
            {"ANTHROPIC_API_KEY": SECRET},
        )


async def test_audio_is_refused_before_sending() -> None:
    rec = Recorder(anthropic_message([{"type": "text", "text": "never"}]))
    request = Request(
        model="claude-sonnet-5-5",
        messages=(Message.user(AudioContent(data="UklGRg==", mime_type="audio/wav")),),
        max_tokens=10,
    )
    async with make(rec) as provider:
        with pytest.raises(UnsupportedContent, match="audio"):
            await provider.complete(request)
        with pytest.raises(UnsupportedContent, match="image/bmp"):
            await provider.complete(
                Request(
                    model="claude-opus-9",  # not in the catalog: the API-format check still applies
                    messages=(Message.user(ImageContent(data="Qk0=", mime_type="image/bmp")),),
                    max_tokens=10,
                )
            )
    assert rec.requests == []


async def test_closed_provider_refuses_calls() -> None:
    provider = make(Recorder(anthropic_message([{"type": "text", "text": "x"}])))
    await provider.aclose()
    await provider.aclose()
    with pytest.raises(ProviderError, match="closed"):
        await provider.complete(ask())


async def test_stream_text_and_tool_use() -> None:
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-5-5",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 25, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ("ping", {"type": "ping"}),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Let me "},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "check."},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_9",
                    "name": "get_weather",
                    "input": {},
                },
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"city": "Pa'},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": 'ris"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 42},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    rec = Recorder(sse(events))
    async with make(rec) as provider, provider.stream(ask(tools=(WEATHER,))) as stream:
        got = [event async for event in stream]
    assert rec.bodies[0]["stream"] is True
    assert got[:2] == [TextDelta(text="Let me "), TextDelta(text="check.")]
    tool = ToolUseContent(id="toolu_9", name="get_weather", input={"city": "Paris"})
    assert got[2] == ToolUseEvent(tool_use=tool)
    assert isinstance(got[3], Completed) and len(got) == 4
    result = got[3].result
    assert result.text == "Let me check." and result.tool_uses == (tool,)
    assert result.stop_reason == TOOL_USE
    assert (result.usage.input_tokens, result.usage.output_tokens) == (25, 42)


async def test_cancel_scope_cancels_a_call_promptly() -> None:
    arrived = trio.Event()

    async def never_answers(request: httpx2.Request) -> httpx2.Response:
        arrived.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with make(never_answers) as provider:
        start = time.monotonic()
        with trio.move_on_after(0.2) as scope:
            await provider.complete(ask())
        assert scope.cancelled_caught
        assert arrived.is_set()
        assert time.monotonic() - start < 2


async def test_a_malformed_stream_is_a_provider_error() -> None:
    # A message_start without its message object (a gateway that rewrites events).
    events = [("message_start", {"type": "message_start", "message": 3})]
    async with make(Recorder(sse(events))) as provider:
        with pytest.raises(ProviderError, match="malformed response from the API"):
            async with provider.stream(ask()) as stream:
                async for _ in stream:
                    pass
