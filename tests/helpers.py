"""Shared test helpers: a transport wrapper that records what agenthost sends, and a host
whose LLM provider is Anthropic's API answered by an ``httpx2.MockTransport``."""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2

from agenthost.config.model import HostConfig, ServerConfig
from agenthost.host.host import Host, open_host
from agenthost.protocol import jsonrpc
from agenthost.transports.base import NO_OPTIONS, SendOptions, Transport
from providers.config import build_provider, parse_providers
from tests.schemacheck import validate_outgoing


class RecordingTransport(Transport):
    """Wraps a transport; keeps every message sent, and the methods of requests received.

    ``assert_valid()`` then validates everything agenthost sent against the negotiated
    revision's schema.json: the acceptance check that what we send fits the revision.
    """

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.name = inner.name
        self.sent: list[dict[str, Any]] = []
        #: The options each message was sent with (same order as ``sent``).
        self.options: list[SendOptions] = []
        self.request_methods: dict[Any, str] = {}
        #: Every message received (responses included), as JSON objects.
        self.received: list[dict[str, Any]] = []
        self.revision: str | None = None

    async def send(
        self,
        message: jsonrpc.Message,
        *,
        deadline: float = math.inf,
        options: SendOptions = NO_OPTIONS,
    ) -> None:
        self.sent.append(jsonrpc.to_object(message))
        self.options.append(options)
        await self.inner.send(message, deadline=deadline, options=options)

    def abort(self, request_id: jsonrpc.RequestId) -> None:
        self.inner.abort(request_id)

    @property
    def exchanges_per_request(self) -> bool:
        return self.inner.exchanges_per_request

    async def receive(self) -> jsonrpc.Message:
        message = await self.inner.receive()
        self.received.append(jsonrpc.to_object(message))
        if isinstance(message, jsonrpc.Request):
            self.request_methods[message.id] = message.method
        return message

    async def aclose(self) -> None:
        await self.inner.aclose()

    def set_protocol_version(self, version: str) -> None:
        self.revision = version
        self.inner.set_protocol_version(version)

    def methods_sent(self) -> list[str]:
        return [m["method"] for m in self.sent if "method" in m]

    def assert_valid(self, revision: str | None = None) -> int:
        """Validate every sent message; returns how many were checked."""
        rev = revision or self.revision
        assert rev is not None, "no revision negotiated"
        for message in self.sent:
            answers = None
            if "result" in message:
                answers = self.request_methods.get(message["id"])
            validate_outgoing(message, rev, answers_method=answers)
        return len(self.sent)


#: A policy for tests that exercise something other than consent: headless, and the
#: preset whose name says it allows everything.
ALLOW_ALL: dict[str, Any] = {"mode": "headless", "preset": "unsafe-allow-everything"}


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as dead: it has exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


#: The environment of a host with a mocked Anthropic API: a key, so the provider is set up.
ANTHROPIC_ENV = {"ANTHROPIC_API_KEY": "test-key"}


@asynccontextmanager
async def host_with_anthropic(
    servers: list[ServerConfig],
    policy: dict[str, Any],
    api: Callable[[httpx2.Request], httpx2.Response],
    *,
    prompter: Any = None,
    events: list[Any] | None = None,
) -> AsyncIterator[Host]:
    """A host whose one provider is Anthropic's, the Messages API answered by ``api``.

    Only the LLM's HTTP API is mocked (``httpx2.MockTransport``): the servers, the host, the
    consent engine, model selection and the Anthropic SDK run for real. ``events`` collects
    the host's events (``on_event``).
    """
    providers_config = parse_providers({"anthropic": {"kind": "anthropic"}}, source="<test>")
    provider = build_provider(
        providers_config.providers[0],
        ANTHROPIC_ENV,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api)),
    )
    config = HostConfig(
        servers=servers, providers={"anthropic": {"kind": "anthropic"}}, policy=policy
    )
    try:
        async with open_host(
            config,
            providers={"anthropic": provider},
            env=ANTHROPIC_ENV,
            prompter=prompter,
            on_event=events.append if events is not None else None,
        ) as host:
            yield host
    finally:
        await provider.aclose()
