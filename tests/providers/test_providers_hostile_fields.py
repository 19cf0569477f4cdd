"""A vendor answer whose fields hold the wrong types is a provider error, for every adapter.

The vendor SDKs build their response models without validating, so ``"input_tokens": "40"``
or a tool call's ``"name": null`` reached the agent as is and failed there (the agent adding
up tokens, the terminal writing a delta) as a traceback; a negative token count lowered a
token budget. ``agenthost run`` is driven as a subprocess against a local HTTP server that
answers in the Responses API's shapes; the rest against each SDK with only HTTP mocked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agenthost.errors import ProviderError
from agenthost_providers import openai_responses as responses_module
from agenthost_providers.anthropic import AnthropicProvider
from agenthost_providers.base import Request, TextDelta
from agenthost_providers.openai import OpenAIProvider
from agenthost_providers.openai_responses import OpenAIResponsesProvider
from tests.providers.providers_helpers import (
    WEATHER,
    Handler,
    anthropic_message,
    ask_model,
    calls_in_one_conversation,
    function_call,
    make_provider,
    openai_completion,
    output_text,
    responses_body,
    run_with_fake_responses_api,
    sse,
)

pytestmark = pytest.mark.timeout(120)

MALFORMED = "malformed response from the API"


def test_run_reports_a_token_count_that_is_not_a_number_in_one_line(tmp_path: Path) -> None:
    body = responses_body([output_text("Paris.")])
    body["usage"]["input_tokens"] = "40"
    config = '[policy]\nmode = "headless"\n'
    proc, _ = run_with_fake_responses_api(tmp_path, config, ["run", "Capital?"], body=body)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 4, (proc.stdout, proc.stderr)
    # The run's summary line, then the failure in one line.
    errors = [
        line for line in proc.stderr.splitlines() if "error" in line and "0 tokens" not in line
    ]
    assert len(errors) == 1 and MALFORMED in errors[0] and "input_tokens" in errors[0], errors


def _responses(handler: Handler) -> OpenAIResponsesProvider:
    table = {"openai": {"api": "responses"}}
    return make_provider(OpenAIResponsesProvider, table, {"OPENAI_API_KEY": "k"}, handler)


def _ask(model: str = "gpt-6.2-sol") -> Request:
    return ask_model("Weather?", model=model, max_tokens=50, tools=(WEATHER,))


def _with(body: dict[str, Any], path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    target: Any = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return body


def _call() -> list[dict[str, Any]]:
    return [function_call("call_1", "get_weather", {"city": "Paris"})]


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (("usage", "input_tokens"), "40", "input_tokens"),
        (("usage", "output_tokens"), -1_000_000, "output_tokens"),
        (("usage", "output_tokens"), True, "output_tokens"),
        (("model",), 7, "model name"),
        (("output", 0, "name"), None, "name"),
        (("output", 0, "call_id"), 12, "id"),
    ],
)
async def test_responses_fields_of_the_wrong_type(
    path: tuple[str | int, ...], value: object, named: str
) -> None:
    body = _with(responses_body(_call()), path, value)
    async with _responses(lambda _: httpx2.Response(200, json=body)) as provider:
        with pytest.raises(ProviderError, match=MALFORMED) as info:
            await provider.complete(_ask())
    assert named in str(info.value)
    final = {"type": "response.completed", "sequence_number": 1, "response": body}
    async with _responses(lambda _: sse([("response.completed", final)])) as provider:
        with pytest.raises(ProviderError, match=MALFORMED):
            async with provider.stream(_ask()) as stream:
                async for _ in stream:
                    pass


async def test_a_streamed_text_delta_that_is_not_text() -> None:
    delta = {
        "type": "response.output_text.delta",
        "sequence_number": 0,
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "delta": {"text": "Paris"},
        "logprobs": [],
    }
    final = {"type": "response.completed", "sequence_number": 1, "response": responses_body([])}
    events = [("response.output_text.delta", delta), ("response.completed", final)]
    got: list[object] = []
    async with _responses(lambda _: sse(events)) as provider:
        with pytest.raises(ProviderError, match=r"text delta is dict"):
            async with provider.stream(_ask()) as stream:
                async for event in stream:
                    got.append(event)
    assert not any(isinstance(e, TextDelta) for e in got)


async def test_chat_completions_and_anthropic_token_counts_that_are_not_numbers() -> None:
    completion = json.loads(openai_completion({"content": "Paris."}).content)
    completion["usage"]["prompt_tokens"] = "many"
    reply = httpx2.Response(200, json=completion)
    chat = make_provider(OpenAIProvider, {"openai": {}}, {"OPENAI_API_KEY": "k"}, lambda _: reply)
    async with chat:
        with pytest.raises(ProviderError, match=f"{MALFORMED}.*input_tokens"):
            await chat.complete(_ask())

    answer = json.loads(anthropic_message([{"type": "text", "text": "Paris."}]).content)
    answer["usage"]["output_tokens"] = "six"
    message = httpx2.Response(200, json=answer)
    env = {"ANTHROPIC_API_KEY": "k"}
    claude = make_provider(AnthropicProvider, {"anthropic": {}}, env, lambda _: message)
    async with claude:
        with pytest.raises(ProviderError, match=f"{MALFORMED}.*output_tokens"):
            await claude.complete(_ask("claude-sonnet-5-5"))


async def test_kept_reasoning_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept reasoning is bounded by count (REASONING_KEPT) and by size: a server whose
    reasoning items are megabytes each would otherwise keep 256 of them alive."""
    monkeypatch.setattr(responses_module, "REASONING_BYTES", 10_000, raising=False)
    bodies: list[dict[str, Any]] = []

    def api(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        n = len(bodies)
        reasoning = {
            "type": "reasoning",
            "id": f"rs_{n}",
            "summary": [],
            "encrypted_content": "g" * 3_000,
        }
        return httpx2.Response(
            200, json=responses_body([reasoning, function_call(f"c{n}", "get_weather", {})])
        )

    async with _responses(api) as provider:
        history = await calls_in_one_conversation(provider, 6, WEATHER)
        await provider.complete(
            Request(model="gpt-6.2-sol", messages=history, max_tokens=10, tools=(WEATHER,))
        )
    kept = [item["id"] for item in bodies[-1]["input"] if item["type"] == "reasoning"]
    assert kept == ["rs_4", "rs_5", "rs_6"]  # the newest that fit in 10,000 bytes

    # One response's reasoning larger than the whole bound is not kept at all.
    monkeypatch.setattr(responses_module, "REASONING_BYTES", 1_000, raising=False)
    bodies.clear()
    async with _responses(api) as provider:
        history = await calls_in_one_conversation(provider, 1, WEATHER)
        await provider.complete(
            Request(model="gpt-6.2-sol", messages=history, max_tokens=10, tools=(WEATHER,))
        )
    kinds = [item["type"] for item in bodies[-1]["input"]]
    assert kinds == ["message", "function_call", "function_call_output"]
