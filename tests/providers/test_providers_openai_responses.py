"""The OpenAI Responses adapter (``api = "responses"``) against the Responses API's payloads.

Only the HTTP API is mocked (``httpx2.MockTransport``); the official SDK and the adapter
run for real. Every request item is checked against the SDK's own TypedDicts
(:func:`conforms`), which are generated from OpenAI's API specification.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import httpx2
import pytest
from openai.types.responses.easy_input_message_param import EasyInputMessageParam
from openai.types.responses.function_tool_param import FunctionToolParam
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from openai.types.responses.response_function_tool_call_param import (
    ResponseFunctionToolCallParam,
)
from openai.types.responses.response_input_image_content_param import (
    ResponseInputImageContentParam,
)
from openai.types.responses.response_input_image_param import ResponseInputImageParam
from openai.types.responses.response_input_item_param import FunctionCallOutput, ToolSearchCall
from openai.types.responses.response_input_text_param import ResponseInputTextParam
from openai.types.responses.response_reasoning_item_param import ResponseReasoningItemParam
from openai.types.responses.response_tool_search_output_item_param_param import (
    ResponseToolSearchOutputItemParamParam,
)
from openai.types.responses.tool_search_tool_param import ToolSearchToolParam

from agenthost.errors import ConfigError, ProviderError, UnsupportedContent
from agenthost_providers import openai_responses as responses_module
from agenthost_providers.base import (
    END_TURN,
    MAX_TOKENS,
    TOOL_USE,
    AudioContent,
    Completed,
    ImageContent,
    Message,
    Request,
    TextContent,
    TextDelta,
    Tool,
    ToolReferenceContent,
    ToolResultContent,
    ToolUseContent,
    ToolUseEvent,
)
from agenthost_providers.config import parse_providers
from agenthost_providers.openai_responses import OpenAIResponsesProvider
from tests.providers.providers_helpers import (
    PNG,
    QUESTION,
    WEATHER,
    Handler,
    Recorder,
    ask_model,
    calls_in_one_conversation,
    conforms,
    function_call,
    make_provider,
    openai_error,
    output_text,
    responses_body,
    responses_reply,
    sse,
    tool_search_call,
)

SECRET = "sk-" + "proj-test-DO-NOT-LEAK-9012"  # a fake key, built so no scanner takes it for one
REASONING = {
    "type": "reasoning",
    "id": "rs_6820f383d7c08191846711c5df8233bc",
    "summary": [],
    "encrypted_content": "gAAAAABoISQ24OyVRYbkYfukdcKOcBQIDEc8DrGPGmMKqpmEuSDObfpdYSSj",
}


def make(api: Handler, **entry: Any) -> OpenAIResponsesProvider:
    table = {"openai": {"api": "responses", **entry}}
    return make_provider(OpenAIResponsesProvider, table, {"OPENAI_API_KEY": SECRET}, api)


ask = partial(ask_model, model="gpt-6.2-sol")


def test_the_api_key_is_validated_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"providers\.openai\.api.*chat-completions, responses"):
        parse_providers({"openai": {"api": "assistants"}}, source="t.toml")
    with pytest.raises(ConfigError, match=r"providers\.anthropic\.api.*only an openai"):
        parse_providers({"anthropic": {"api": "responses"}}, source="t.toml")
    default = parse_providers({"openai": {}}, source="t.toml").get("openai")
    assert default.api == "chat-completions"


async def test_text_request_and_answer() -> None:
    rec = Recorder(responses_reply([REASONING, output_text("Paris.")]))
    async with make(rec) as provider:
        result = await provider.complete(
            ask(system_prompt="Be terse.", temperature=0.2, metadata={"user_id": "u-7"})
        )
    assert (result.text, result.model, result.stop_reason) == ("Paris.", "gpt-6.2-sol", END_TURN)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (21, 9)
    request = rec.requests[0]
    assert request.url == "https://api.openai.com/v1/responses"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    body = rec.bodies[0]
    conforms(body, ResponseCreateParamsNonStreaming)
    assert body == {
        "model": "gpt-6.2-sol",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": QUESTION}],
            }
        ],
        "max_output_tokens": 100,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "instructions": "Be terse.",
        "temperature": 0.2,
        "safety_identifier": "u-7",
    }
    conforms(body["input"][0], EasyInputMessageParam)
    conforms(body["input"][0]["content"][0], ResponseInputTextParam)


async def test_images_go_as_input_image_and_audio_is_refused() -> None:
    rec = Recorder(responses_reply([output_text("A dot.")]))
    image = ImageContent(data=PNG, mime_type="image/png")
    async with make(rec) as provider:
        await provider.complete(
            Request(model="gpt-6.2-sol", messages=(Message.user("What?", image),), max_tokens=9)
        )
        audio = Message.user(AudioContent(data="SUQz", mime_type="audio/mpeg"))
        with pytest.raises(UnsupportedContent, match="Responses API takes no audio"):
            await provider.complete(Request(model="gpt-audio-1.5", messages=(audio,), max_tokens=5))
    assert len(rec.requests) == 1
    part = rec.bodies[0]["input"][0]["content"][1]
    assert part == {
        "type": "input_image",
        "image_url": f"data:image/png;base64,{PNG}",
        "detail": "auto",
    }
    conforms(part, ResponseInputImageParam)


async def test_function_tools_round_trip_with_reasoning_kept() -> None:
    rec = Recorder(
        responses_reply(
            [
                REASONING,
                function_call("call_a", "get_weather", {"city": "Paris"}),
                function_call("call_b", "get_weather", {"city": "Oslo"}),
            ]
        ),
        responses_reply([output_text("Paris 18°C, Oslo 9°C.")]),
    )
    first_request = ask("Weather?", tools=(WEATHER,), tool_choice="required")
    async with make(rec) as provider:
        first = await provider.complete(first_request)
        assert first.stop_reason == TOOL_USE
        assert [u.input for u in first.tool_uses] == [{"city": "Paris"}, {"city": "Oslo"}]
        results = Message.user(
            ToolResultContent(tool_use_id="call_a", content=(TextContent(text="18°C"),)),
            ToolResultContent(
                tool_use_id="call_b",
                content=(
                    TextContent(text="no sensor"),
                    ImageContent(data=PNG, mime_type="image/png"),
                ),
                is_error=True,
            ),
        )
        follow_up = Request(
            model="gpt-6.2-sol",
            messages=(
                *first_request.messages,
                Message(role="assistant", content=first.content),
                results,
            ),
            max_tokens=100,
            tools=(WEATHER,),
        )
        second = await provider.complete(follow_up)
    assert second.text == "Paris 18°C, Oslo 9°C."
    sent_first, sent_second = rec.bodies
    tool = sent_first["tools"][0]
    assert tool == {
        "type": "function",
        "name": "get_weather",
        "parameters": dict(WEATHER.input_schema),
        "strict": False,
        "description": WEATHER.description,
    }
    conforms(tool, FunctionToolParam)
    assert sent_first["tool_choice"] == "required"
    _, reasoning, call_a, call_b, out_a, out_b = sent_second["input"]
    # The reasoning item goes back, as returned, before the calls it led to.
    assert reasoning == REASONING
    conforms(reasoning, ResponseReasoningItemParam)
    assert call_a == {
        "type": "function_call",
        "call_id": "call_a",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    conforms(call_b, ResponseFunctionToolCallParam)
    assert out_a == {"type": "function_call_output", "call_id": "call_a", "output": "18°C"}
    conforms(out_a, FunctionCallOutput)
    # Media a tool returned goes in the output itself, after the error mark.
    assert out_b["call_id"] == "call_b"
    error, text, image = out_b["output"]
    assert (error["text"], text["text"]) == ("Error:", "no sensor")
    conforms(text, ResponseInputTextParam)
    assert image["image_url"] == f"data:image/png;base64,{PNG}"
    conforms(image, ResponseInputImageContentParam)


DEFERRED = (
    Tool(
        name="weather__get_forecast",
        description="Forecast",
        input_schema={"type": "object"},
        defer_loading=True,
    ),
    Tool(name="calendar__create_event", description="New event", defer_loading=True),
)
SEARCH = Tool(
    name="search_tools",
    description="Find tools to use.",
    input_schema={"type": "object", "properties": {"query": {"type": "string"}}},
    tool_search=True,
)


async def test_native_tool_search_payloads() -> None:
    rec = Recorder(
        responses_reply([tool_search_call("call_s", {"query": "weather forecast"})]),
        responses_reply([function_call("call_f", "weather__get_forecast", {})]),
    )
    tools = (*DEFERRED, SEARCH)
    async with make(rec) as provider:
        assert provider.native_tool_search is True
        first = await provider.complete(ask("Weather?", tools=tools))
        search = first.tool_uses[0]
        assert search == ToolUseContent(
            id="call_s", name="search_tools", input={"query": "weather forecast"}
        )
        assert first.stop_reason == TOOL_USE
        found = ToolResultContent(
            tool_use_id="call_s",
            content=(ToolReferenceContent(tool_name="weather__get_forecast"),),
        )
        second = await provider.complete(
            Request(
                model="gpt-6.2-sol",
                messages=(
                    Message.user("Weather?"),
                    Message(role="assistant", content=first.content),
                    Message.user(found),
                ),
                max_tokens=100,
                tools=tools,
            )
        )
    assert second.tool_uses[0].name == "weather__get_forecast"
    sent_first, sent_second = rec.bodies
    deferred, _, search_tool = sent_first["tools"]
    assert deferred == {
        "type": "function",
        "name": "weather__get_forecast",
        "parameters": {"type": "object"},
        "strict": False,
        "description": "Forecast",
        "defer_loading": True,
    }
    conforms(deferred, FunctionToolParam)
    assert search_tool == {
        "type": "tool_search",
        "execution": "client",
        "description": "Find tools to use.",
        "parameters": dict(SEARCH.input_schema),
    }
    conforms(search_tool, ToolSearchToolParam)
    # The tool list does not change between requests (the prompt cache holds).
    assert sent_second["tools"] == sent_first["tools"]
    _, call, output = sent_second["input"]
    assert call == {
        "type": "tool_search_call",
        "call_id": "call_s",
        "execution": "client",
        "arguments": {"query": "weather forecast"},
        "status": "completed",
    }
    conforms(call, ToolSearchCall)
    assert output == {
        "type": "tool_search_output",
        "call_id": "call_s",
        "execution": "client",
        "status": "completed",
        "tools": [{k: v for k, v in deferred.items() if k != "defer_loading"}],
    }
    conforms(output, ResponseToolSearchOutputItemParamParam)
    conforms(output["tools"][0], FunctionToolParam)


async def test_stop_reasons_and_failures() -> None:
    rec = Recorder(
        responses_reply(
            [output_text("Once upon")], status="incomplete", incomplete="max_output_tokens"
        ),
        responses_reply([], status="incomplete", incomplete="content_filter"),
    )
    async with make(rec) as provider:
        assert (await provider.complete(ask())).stop_reason == MAX_TOKENS
        assert (await provider.complete(ask())).stop_reason == "content_filter"
        # Stop sequences have no Responses field: not sent.
        assert "stop" not in rec.bodies[0]

    failed = responses_body([], status="failed")
    failed["error"] = {"code": "server_error", "message": "The model\n  crashed"}
    async with make(Recorder(httpx2.Response(200, json=failed))) as provider:
        with pytest.raises(ProviderError, match="The model crashed"):
            await provider.complete(ask())

    bad = Recorder(openai_error(400, "Unknown parameter: 'input[0].foo'"))
    async with make(bad, max_retries=0) as provider:
        with pytest.raises(ProviderError, match=r"Unknown parameter.*\(HTTP 400\)") as info:
            await provider.complete(ask())
    assert SECRET not in str(info.value)

    for body in (b"data: {}\n\n", b'{"output": 3}'):
        garbage = Recorder(
            httpx2.Response(200, content=body, headers={"content-type": "application/json"})
        )
        async with make(garbage) as provider:
            with pytest.raises(ProviderError, match="malformed response from the API"):
                await provider.complete(ask())


async def test_stream_text_and_a_tool_call() -> None:
    final = responses_body(
        [output_text("Checking."), function_call("call_1", "get_weather", {"city": "Paris"})],
        usage={"input_tokens": 30, "output_tokens": 12},
    )
    events = [
        (
            "response.created",
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": {**final, "status": "in_progress", "output": []},
            },
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": 1,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": "Check",
                "logprobs": [],
            },
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": 2,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": "ing.",
                "logprobs": [],
            },
        ),
        (
            "response.completed",
            {"type": "response.completed", "sequence_number": 3, "response": final},
        ),
    ]
    rec = Recorder(sse(events))
    async with make(rec) as provider, provider.stream(ask(tools=(WEATHER,))) as stream:
        got = [event async for event in stream]
    assert rec.bodies[0]["stream"] is True
    tool = ToolUseContent(id="call_1", name="get_weather", input={"city": "Paris"})
    assert got[:3] == [TextDelta(text="Check"), TextDelta(text="ing."), ToolUseEvent(tool_use=tool)]
    assert isinstance(got[3], Completed)
    result = got[3].result
    assert (result.text, result.tool_uses, result.stop_reason) == ("Checking.", (tool,), TOOL_USE)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 12)


async def test_a_stream_error_event_is_a_provider_error() -> None:
    rec = Recorder(
        sse(
            [
                (
                    "error",
                    {
                        "type": "error",
                        "code": "rate_limit",
                        "message": "Slow down",
                        "param": None,
                        "sequence_number": 0,
                    },
                )
            ]
        )
    )
    async with make(rec) as provider:
        with pytest.raises(ProviderError, match="Slow down"):
            async with provider.stream(ask()) as stream:
                async for _ in stream:
                    pass


@pytest.mark.parametrize(
    "events",
    [
        [("response.completed", {"type": "response.completed", "response": 3})],
        [("response.completed", {"type": "response.completed", "response": {"output": [7]}})],
    ],
)
async def test_a_malformed_stream_is_a_provider_error(events: list[tuple[str, Any]]) -> None:
    async with make(Recorder(sse(events))) as provider:
        with pytest.raises(ProviderError, match="malformed response from the API"):
            async with provider.stream(ask()) as stream:
                async for _ in stream:
                    pass


async def test_a_streamed_tool_search_call_is_a_use_of_the_search_tool() -> None:
    final = responses_body([REASONING, tool_search_call("call_s", {"query": "forecast"})])
    rec = Recorder(sse([("response.completed", {"type": "response.completed", "response": final})]))
    async with make(rec) as provider, provider.stream(ask(tools=(*DEFERRED, SEARCH))) as stream:
        got = [event async for event in stream]
    use = ToolUseContent(id="call_s", name="search_tools", input={"query": "forecast"})
    assert got[0] == ToolUseEvent(tool_use=use)
    assert isinstance(got[1], Completed) and got[1].result.stop_reason == TOOL_USE


async def test_kept_reasoning_goes_only_to_the_conversation_it_came_from() -> None:
    """A request from another conversation (a server's sampling request, say) whose
    assistant message reuses a call id gets none of the first conversation's reasoning."""
    rec = Recorder(
        responses_reply([REASONING, function_call("call_1", "get_weather", {"city": "Paris"})]),
        responses_reply([output_text("done")]),
    )
    first_request = ask("Weather?", tools=(WEATHER,))
    async with make(rec) as provider:
        first = await provider.complete(first_request)
        other = Request(
            model="gpt-6.2-sol",
            messages=(
                Message.user(TextContent(text="Something else entirely")),
                Message(role="assistant", content=first.content),
                Message.user(
                    ToolResultContent(tool_use_id="call_1", content=(TextContent(text="x"),))
                ),
            ),
            max_tokens=100,
            tools=(WEATHER,),
        )
        await provider.complete(other)
    kinds = [item["type"] for item in rec.bodies[1]["input"]]
    assert "reasoning" not in kinds, rec.bodies[1]["input"]
    assert kinds == ["message", "function_call", "function_call_output"]


async def test_kept_reasoning_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(responses_module, "REASONING_KEPT", 3)
    bodies: list[dict[str, Any]] = []

    def api(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        n = len(bodies)
        return responses_reply([{**REASONING, "id": f"rs_{n}"}, function_call(f"c{n}", "f", {})])

    async with make(api) as provider:
        history = await calls_in_one_conversation(provider, 5, WEATHER)
        await provider.complete(
            Request(model="gpt-6.2-sol", messages=history, max_tokens=10, tools=(WEATHER,))
        )
    # Only the last three responses' reasoning is still kept, each before its own call.
    kinds = [
        (item["type"], item.get("id") or item.get("call_id"))
        for item in bodies[-1]["input"]
        if item["type"] in ("reasoning", "function_call")
    ]
    assert kinds == [
        ("function_call", "c1"),
        ("function_call", "c2"),
        ("reasoning", "rs_3"),
        ("function_call", "c3"),
        ("reasoning", "rs_4"),
        ("function_call", "c4"),
        ("reasoning", "rs_5"),
        ("function_call", "c5"),
    ]
