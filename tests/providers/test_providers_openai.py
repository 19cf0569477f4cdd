"""The OpenAI adapter (and OpenAI-compatible servers) against Chat Completions payloads."""

from __future__ import annotations

import json
import time
from functools import partial

import httpx2
import pytest
import trio

from agenthost.errors import ConfigError, ProviderError, UnsupportedContent
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
    TextContent,
    TextDelta,
    ToolResultContent,
    ToolUseContent,
    ToolUseEvent,
)
from agenthost_providers.config import build_provider, parse_providers
from agenthost_providers.openai import OpenAIProvider
from tests.providers.providers_helpers import (
    PNG,
    WEATHER,
    Handler,
    Recorder,
    ask_model,
    make_provider,
    openai_chunk,
    openai_completion,
    openai_error,
    sse,
)

SECRET = "sk-" + "proj-test-DO-NOT-LEAK-5678"  # a fake key, built so no scanner takes it for one


def make(handler: Handler, *, local: bool = False) -> OpenAIProvider:
    if local:
        entry = {"kind": "openai-compatible", "base_url": "http://127.0.0.1:8080/v1"}
        return make_provider(OpenAIProvider, {"local": entry}, {}, handler)
    return make_provider(OpenAIProvider, {"openai": {}}, {"OPENAI_API_KEY": SECRET}, handler)


ask = partial(ask_model, model="gpt-6.2-sol")


async def test_text_with_system_prompt() -> None:
    rec = Recorder(openai_completion({"content": "Paris."}))
    async with make(rec) as provider:
        result = await provider.complete(
            ask(system_prompt="You are terse.", temperature=0.3, metadata={"user_id": "u-1"})
        )
    assert (result.text, result.model, result.stop_reason) == ("Paris.", "gpt-6.2-sol", END_TURN)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (19, 10)
    request = rec.requests[0]
    assert request.url == "https://api.openai.com/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    body = rec.bodies[0]
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [{"type": "text", "text": "What is the capital of France?"}]},
    ]
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body
    assert body["temperature"] == 0.3
    assert body["safety_identifier"] == "u-1"


async def test_image_and_audio_inputs() -> None:
    rec = Recorder(openai_completion({"content": "A dot and a beep."}, model="gpt-audio-1.5"))
    async with make(rec) as provider:
        await provider.complete(
            Request(
                model="gpt-6.2-sol",
                messages=(
                    Message.user("What is this?", ImageContent(data=PNG, mime_type="image/png")),
                ),
                max_tokens=50,
            )
        )
        await provider.complete(
            Request(
                model="gpt-audio-1.5",
                messages=(Message.user(AudioContent(data="SUQz", mime_type="audio/mpeg")),),
                max_tokens=50,
            )
        )
    image = rec.bodies[0]["messages"][0]["content"][1]
    assert image == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    audio = rec.bodies[1]["messages"][0]["content"][0]
    assert audio == {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}}


async def test_content_a_model_cannot_take_is_refused() -> None:
    rec = Recorder(openai_completion({"content": "never"}))
    audio = Message.user(AudioContent(data="UklGRg==", mime_type="audio/wav"))
    async with make(rec) as provider:
        # gpt-6.2-sol takes text and images only (catalog): audio is refused, not dropped.
        with pytest.raises(UnsupportedContent, match=r"gpt-6\.2-sol.*audio"):
            await provider.complete(Request(model="gpt-6.2-sol", messages=(audio,), max_tokens=5))
        # gpt-audio-1.5 takes no images.
        image = Message.user(ImageContent(data=PNG, mime_type="image/png"))
        with pytest.raises(UnsupportedContent, match="images"):
            await provider.complete(Request(model="gpt-audio-1.5", messages=(image,), max_tokens=5))
        # An audio format the API cannot carry is refused even for an audio model.
        ogg = Message.user(AudioContent(data="T2dn", mime_type="audio/ogg"))
        with pytest.raises(UnsupportedContent, match="audio/ogg"):
            await provider.complete(Request(model="gpt-audio-1.5", messages=(ogg,), max_tokens=5))
    assert rec.requests == []


async def test_stop_sequence_and_max_tokens() -> None:
    rec = Recorder(
        openai_completion({"content": "1, 2"}, finish_reason="stop"),
        openai_completion({"content": "Once upon"}, finish_reason="length"),
    )
    async with make(rec) as provider:
        first = await provider.complete(ask("count", stop_sequences=(", 3",)))
        second = await provider.complete(ask("story"))
    assert rec.bodies[0]["stop"] == [", 3"]
    # OpenAI reports a matched stop sequence as plain "stop": indistinguishable from end of turn.
    assert first.stop_reason == END_TURN
    assert second.stop_reason == MAX_TOKENS


async def test_compatible_server_without_key() -> None:
    rec = Recorder(
        openai_completion(
            {"content": "1, 2"}, model="qwen3:8b", extra_choice={"stop_reason": ", 3"}
        )
    )
    async with make(rec, local=True) as provider:
        result = await provider.complete(ask("count", model="qwen3:8b", stop_sequences=(", 3",)))
    assert rec.requests[0].url == "http://127.0.0.1:8080/v1/chat/completions"
    body = rec.bodies[0]
    assert body["max_tokens"] == 100 and "max_completion_tokens" not in body
    # vLLM-style servers name the stop string that matched.
    assert result.stop_reason == STOP_SEQUENCE
    assert result.model == "qwen3:8b"


async def test_tool_use_round_trip() -> None:
    rec = Recorder(
        openai_completion(
            {
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "call_def",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"London"}'},
                    },
                ],
            },
            finish_reason="tool_calls",
        ),
        openai_completion({"content": "Paris 18°C, London 15°C."}),
    )
    first_request = ask("Weather in Paris and London?", tools=(WEATHER,), tool_choice="auto")
    async with make(rec) as provider:
        first = await provider.complete(first_request)
        assert first.stop_reason == TOOL_USE
        assert [t.input for t in first.tool_uses] == [{"city": "Paris"}, {"city": "London"}]
        follow_up = Request(
            model="gpt-6.2-sol",
            messages=(
                *first_request.messages,
                Message(role="assistant", content=first.content),
                Message.user(
                    ToolResultContent(tool_use_id="call_abc", content=(TextContent(text="18°C"),)),
                    ToolResultContent(
                        tool_use_id="call_def",
                        content=(ImageContent(data=PNG, mime_type="image/png"),),
                        is_error=True,
                    ),
                ),
            ),
            max_tokens=100,
            tools=(WEATHER,),
        )
        second = await provider.complete(follow_up)
    assert second.text == "Paris 18°C, London 15°C."
    sent_first, sent_second = rec.bodies
    assert sent_first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": dict(WEATHER.input_schema),
                "description": WEATHER.description,
            },
        }
    ]
    assert sent_first["tool_choice"] == "auto"
    assistant, tool_a, tool_b, carried = sent_second["messages"][1:]
    assert assistant["role"] == "assistant" and assistant["content"] is None
    assert [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        {"city": "Paris"},
        {"city": "London"},
    ]
    assert tool_a == {"role": "tool", "tool_call_id": "call_abc", "content": "18°C"}
    assert tool_b["tool_call_id"] == "call_def" and tool_b["content"].startswith("Error: ")
    # The image a tool returned is carried in a user message, not dropped.
    assert carried["role"] == "user"
    assert carried["content"][1]["image_url"]["url"].endswith(PNG)


async def test_invalid_tool_arguments_are_a_provider_error() -> None:
    rec = Recorder(
        openai_completion(
            {
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{oops"},
                    }
                ],
            },
            finish_reason="tool_calls",
        )
    )
    async with make(rec) as provider:
        with pytest.raises(ProviderError, match="not JSON"):
            await provider.complete(ask(tools=(WEATHER,)))


async def test_retries_then_success_and_persistent_errors() -> None:
    rec = Recorder(
        openai_error(429, "Rate limit reached for gpt-6.2-sol", "requests"),
        openai_completion({"content": "ok"}),
    )
    async with make(rec) as provider:
        assert (await provider.complete(ask())).text == "ok"
    assert len(rec.requests) == 2

    failing = Recorder(openai_error(503, "The server is overloaded", "server_error"))
    async with make(failing) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.complete(ask())
    assert len(failing.requests) == 3
    assert info.value.status == 503 and info.value.retryable
    assert "The server is overloaded" in str(info.value)

    bad = Recorder(openai_error(400, "Invalid value for 'temperature'"))
    async with make(bad) as provider:
        with pytest.raises(ProviderError, match="Invalid value for 'temperature'") as info:
            await provider.complete(ask())
    assert len(bad.requests) == 1 and not info.value.retryable
    assert SECRET not in str(info.value)


async def test_missing_key_names_the_variable() -> None:
    settings = parse_providers({"openai": {}}, source="t.toml").get("openai")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        build_provider(settings, {"OPENAI_API_KEY": "  "})


async def test_stream_text_tool_calls_and_usage() -> None:
    rec = Recorder(
        sse(
            [
                (None, openai_chunk({"role": "assistant", "content": "", "refusal": None})),
                (None, openai_chunk({"content": "Checking"})),
                (None, openai_chunk({"content": " now."})),
                (
                    None,
                    openai_chunk(
                        {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": "get_weather", "arguments": ""},
                                }
                            ]
                        }
                    ),
                ),
                (
                    None,
                    openai_chunk(
                        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city"'}}]}
                    ),
                ),
                (
                    None,
                    openai_chunk(
                        {"tool_calls": [{"index": 0, "function": {"arguments": ':"Paris"}'}}]}
                    ),
                ),
                (None, openai_chunk({}, finish_reason="tool_calls")),
                (
                    None,
                    openai_chunk(
                        None,
                        usage={"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
                    ),
                ),
                (None, "[DONE]"),
            ]
        )
    )
    async with make(rec) as provider, provider.stream(ask(tools=(WEATHER,))) as stream:
        got = [event async for event in stream]
    body = rec.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    tool = ToolUseContent(id="call_1", name="get_weather", input={"city": "Paris"})
    assert got[:3] == [
        TextDelta(text="Checking"),
        TextDelta(text=" now."),
        ToolUseEvent(tool_use=tool),
    ]
    assert isinstance(got[3], Completed)
    result = got[3].result
    assert result.text == "Checking now." and result.tool_uses == (tool,)
    assert result.stop_reason == TOOL_USE
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 12)


async def test_leaving_a_stream_early_closes_it() -> None:
    rec = Recorder(
        sse(
            [
                (None, openai_chunk({"content": "a"})),
                (None, openai_chunk({"content": "b"})),
                (None, "[DONE]"),
            ]
        )
    )
    async with make(rec) as provider:
        async with provider.stream(ask()) as stream:
            async for event in stream:
                assert event == TextDelta(text="a")
                break
        # The provider stays usable after an abandoned stream.
        async with provider.stream(ask()) as stream:
            assert [e async for e in stream][-1].result.text == "ab"  # type: ignore[union-attr]


async def test_cancel_scope_cancels_a_call_promptly() -> None:
    async def never_answers(request: httpx2.Request) -> httpx2.Response:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with make(never_answers) as provider:
        start = time.monotonic()
        with trio.move_on_after(0.2) as scope:
            await provider.complete(ask())
        assert scope.cancelled_caught
        assert time.monotonic() - start < 2
        with trio.move_on_after(0.2) as scope:
            async with provider.stream(ask()) as stream:
                async for _ in stream:
                    pass
        assert scope.cancelled_caught


async def test_a_malformed_stream_is_a_provider_error() -> None:
    # A Responses API event where Chat Completions chunks belong (a misrouted base_url).
    event = {"type": "response.completed", "response": {"output": []}}
    async with make(Recorder(sse([(None, event), (None, "[DONE]")]))) as provider:
        with pytest.raises(ProviderError, match="malformed response from the API"):
            async with provider.stream(ask()) as stream:
                async for _ in stream:
                    pass
