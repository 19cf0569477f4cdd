"""Shared helpers for the provider tests: MockTransport plumbing and real-shaped payloads.

Only the LLM HTTP APIs are mocked (the SDKs, our adapters and their error mapping run for
real); payloads follow the shapes the Anthropic Messages API and OpenAI's Chat Completions and
Responses APIs document, SSE framing included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import typing_extensions

from agenthost_providers.base import (
    Message,
    Provider,
    Request,
    TextContent,
    Tool,
    ToolResultContent,
)
from agenthost_providers.config import build_provider, parse_providers
from tests.forkserver import peer_python

Handler = (
    Callable[[httpx2.Request], httpx2.Response]
    | Callable[[httpx2.Request], Coroutine[None, None, httpx2.Response]]
)


class Recorder:
    """A MockTransport handler that records request bodies and answers from a list."""

    def __init__(self, *responses: httpx2.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if len(self.responses) > 1:
            return self.responses.pop(0)
        return self.responses[0]

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))


def client_for(handler: Handler) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.MockTransport(handler))


P = TypeVar("P", bound=Provider)


def make_provider(
    kind: type[P], table: Mapping[str, Mapping[str, Any]], env: Mapping[str, str], api: Handler
) -> P:
    """The one provider of ``table`` (a ``[providers]`` table), built as the config builds
    it, its HTTP API answered by ``api``."""
    ((name, entry),) = table.items()
    settings = parse_providers({name: dict(entry)}, source="t.toml").get(name)
    http = api.client() if isinstance(api, Recorder) else client_for(api)
    provider = build_provider(settings, dict(env), http_client=http)
    assert isinstance(provider, kind), provider
    return provider


#: What a request asks unless a test says otherwise.
QUESTION = "What is the capital of France?"


def ask_model(text: str = QUESTION, *, model: str, max_tokens: int = 100, **fields: Any) -> Request:
    """A request of one user message (``fields``: the rest of :class:`Request`)."""
    return Request(model=model, messages=(Message.user(text),), max_tokens=max_tokens, **fields)


def sse(events: Iterable[tuple[str | None, Any]]) -> httpx2.Response:
    """An SSE response; ``(name, data)`` pairs, ``name`` None for data-only frames."""
    chunks = []
    for name, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        chunks.append((f"event: {name}\n" if name else "") + f"data: {payload}\n\n")
    return httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content="".join(chunks).encode()
    )


# --------------------------------------------------------------------------- Anthropic


def anthropic_message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    stop_sequence: str | None = None,
    model: str = "claude-sonnet-5-5",
    usage: dict[str, int] | None = None,
) -> httpx2.Response:
    return httpx2.Response(
        200,
        json={
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "usage": usage or {"input_tokens": 12, "output_tokens": 6},
        },
    )


def anthropic_error(status: int, kind: str, message: str) -> httpx2.Response:
    return httpx2.Response(
        status,
        json={"type": "error", "error": {"type": kind, "message": message}},
        headers={"retry-after-ms": "1", "request-id": "req_011"},
    )


# ------------------------------------------------------------------------------ OpenAI


def openai_completion(
    message: dict[str, Any],
    *,
    finish_reason: str = "stop",
    model: str = "gpt-6.2-sol",
    usage: dict[str, int] | None = None,
    extra_choice: dict[str, Any] | None = None,
) -> httpx2.Response:
    return httpx2.Response(
        200,
        json={
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "object": "chat.completion",
            "created": 1790000000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "refusal": None, "annotations": [], **message},
                    "logprobs": None,
                    "finish_reason": finish_reason,
                    **(extra_choice or {}),
                }
            ],
            "usage": usage or {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29},
            "service_tier": "default",
            "system_fingerprint": None,
        },
    )


def openai_error(status: int, message: str, kind: str = "invalid_request_error") -> httpx2.Response:
    return httpx2.Response(
        status,
        json={"error": {"message": message, "type": kind, "param": None, "code": None}},
        headers={"retry-after-ms": "1", "x-request-id": "req_abc"},
    )


def openai_chunk(
    delta: dict[str, Any] | None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, int] | None = None,
    model: str = "gpt-6.2-sol",
) -> dict[str, Any]:
    choices = (
        []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
    )
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1790000000,
        "model": model,
        "system_fingerprint": None,
        "choices": choices,
        "usage": usage,
    }


# ---------------------------------------------------------------- shared fixtures

# A 1x1 PNG, base64.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAE"
    "hQGAhKmMIQAAAABJRU5ErkJggg=="
)
WEATHER = Tool(
    name="get_weather",
    description="Get current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


# -------------------------------------------------------------------- OpenAI Responses


def responses_body(
    output: list[dict[str, Any]],
    *,
    status: str = "completed",
    incomplete: str | None = None,
    model: str = "gpt-6.2-sol",
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A Responses API ``response`` object, as ``POST /v1/responses`` returns it."""
    tokens = usage or {"input_tokens": 21, "output_tokens": 9}
    return {
        "id": "resp_67ccd2bed1ec8190b14f964abc054267",
        "object": "response",
        "created_at": 1790000000,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": None,
        "max_output_tokens": 100,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "store": False,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": {
            "input_tokens": tokens["input_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": tokens["output_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens["input_tokens"] + tokens["output_tokens"],
        },
        "metadata": {},
    }


def responses_reply(output: list[dict[str, Any]], **kw: Any) -> httpx2.Response:
    return httpx2.Response(200, json=responses_body(output, **kw))


def output_text(text: str) -> dict[str, Any]:
    """An assistant ``message`` output item holding ``text``."""
    return {
        "type": "message",
        "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e6",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def tool_search_call(call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_search_call",
        "id": f"tsc_{call_id}",
        "call_id": call_id,
        "execution": "client",
        "arguments": arguments,
        "status": "completed",
    }


def conforms(value: Mapping[str, Any], typed: type) -> None:
    """Assert that ``value`` is a valid instance of the SDK's TypedDict ``typed``: no key it
    does not declare, every ``Required`` key present, every ``Literal`` field one of its
    values (the SDK does not check what it sends; the API would refuse it)."""
    hints = typing_extensions.get_type_hints(typed, include_extras=True)
    origin: Any
    assert set(value) <= set(hints), (typed.__name__, set(value) - set(hints))
    for key, hint in hints.items():
        origin = typing_extensions.get_origin(hint)
        if origin is typing_extensions.Required:
            assert key in value, (typed.__name__, key)
            hint = typing_extensions.get_args(hint)[0]
            origin = typing_extensions.get_origin(hint)
        if key in value and origin is typing_extensions.Literal:
            allowed = typing_extensions.get_args(hint)
            assert value[key] in allowed, (typed.__name__, key, value[key], allowed)


async def calls_in_one_conversation(
    provider: Provider, rounds: int, tool: Tool, model: str = "gpt-6.2-sol"
) -> tuple[Message, ...]:
    """``rounds`` model turns of one growing conversation, each answering its tool call
    with "ok": the messages a final request of that conversation carries."""
    messages: tuple[Message, ...] = (Message.user("go"),)
    for _ in range(rounds):
        reply = await provider.complete(
            Request(model=model, messages=messages, max_tokens=10, tools=(tool,))
        )
        answer = ToolResultContent(
            tool_use_id=reply.tool_uses[0].id, content=(TextContent(text="ok"),)
        )
        messages = (
            *messages,
            Message(role="assistant", content=reply.content),
            Message.user(answer),
        )
    return messages


#: ``fake_responses_api.py``: OpenAI's Responses API stood in for, in a process of its own.
FAKE_RESPONSES_API = Path(__file__).with_name("fake_responses_api.py")


def run_with_fake_responses_api(
    tmp_path: Path, config: str, args: Sequence[str], *, body: Mapping[str, Any] | None = None
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """``agenthost -c CONFIG ARGS`` as a user runs it, with an ``openai`` provider (Responses
    API) whose API is :data:`FAKE_RESPONSES_API` (``body``: its one answer; None: the
    tool-search conversation). ``config`` is the rest of the config file. Returns the
    finished command and the requests the API received."""
    log = tmp_path / "requests.jsonl"
    argv = [sys.executable, str(FAKE_RESPONSES_API), str(log)]
    if body is not None:
        (tmp_path / "body.json").write_text(json.dumps(body))
        argv.append(str(tmp_path / "body.json"))
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as llm:
        try:
            assert llm.stdout is not None
            port = int(llm.stdout.readline())
            path = tmp_path / "agenthost.toml"
            path.write_text(
                config + '[providers.openai]\nkind = "openai"\napi = "responses"\n'
                f'base_url = "http://127.0.0.1:{port}/v1"\n'
                'default_model = "gpt-6.2-sol"\nmax_retries = 0\n'
            )
            env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
            env.pop("OPENAI_BASE_URL", None)
            env["OPENAI_API_KEY"] = "test-key"
            proc = subprocess.run(
                [peer_python(), "-m", "agenthost", "-c", str(path), *args],
                capture_output=True,
                text=True,
                timeout=90,
                cwd=tmp_path,
                env=env,
            )
        finally:
            llm.terminate()
    requests = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return proc, requests
