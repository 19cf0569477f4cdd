"""OPENAI_BASE_URL (+ OPENAI_MODEL): the stock `openai` provider follows a local server."""

from __future__ import annotations

import httpx2

from agenthost_providers.base import Message, Request
from agenthost_providers.config import (
    build_provider,
    default_choice,
    parse_providers,
    provider_status,
)
from tests.providers.providers_helpers import Recorder, openai_completion

ENV = {"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "OPENAI_MODEL": "qwen3:8b"}


async def test_local_endpoint_needs_no_key_and_is_used() -> None:
    config = parse_providers({"openai": {"kind": "openai"}}, source="<test>")
    settings = config.providers[0]
    assert provider_status(settings, {}).configured is False
    status = provider_status(settings, ENV)
    assert status.configured
    assert "OPENAI_BASE_URL" in status.reason
    assert default_choice(config, ENV) == ("openai", "qwen3:8b")
    recorder = Recorder(openai_completion({"content": "local hello"}, model="qwen3:8b"))
    provider = build_provider(settings, ENV, http_client=recorder.client())
    try:
        result = await provider.complete(
            Request(model="qwen3:8b", messages=(Message.user("hi"),), max_tokens=10)
        )
    finally:
        await provider.aclose()
    assert result.text == "local hello"
    request = recorder.requests[0]
    assert str(request.url) == "http://127.0.0.1:11434/v1/chat/completions"
    assert isinstance(request, httpx2.Request)
    assert recorder.bodies[0]["model"] == "qwen3:8b"
