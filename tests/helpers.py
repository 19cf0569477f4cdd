"""Shared test helpers: a transport wrapper that records what agenthost sends."""

from __future__ import annotations

import math
import os
from typing import Any

from agenthost import jsonrpc
from agenthost.transports.base import NO_OPTIONS, SendOptions, Transport
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
