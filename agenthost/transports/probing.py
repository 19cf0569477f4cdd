"""The spec's backwards-compatibility probe: Streamable HTTP or legacy HTTP+SSE, found out.

A server entry with a plain ``url`` (transport ``"http"``) may speak Streamable HTTP or
the legacy HTTP+SSE transport; users should not need to know which. The probe follows the
spec ("Backwards Compatibility" in ``basic/transports.mdx`` from 2025-03-26 on): POST the
first message (``initialize``) to the URL as Streamable HTTP; if the server answers 400,
404 or 405, GET the same URL as a legacy SSE stream, wait for its ``endpoint`` event and
send the message there. The probe happens on the first :meth:`ProbingTransport.send`,
because only then do we have an ``initialize`` to POST; both candidate transports share
one client and one nursery, owned by :func:`open_http_transport`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TypedDict

import httpx
import trio

from agenthost.errors import TransportClosed, TransportError
from agenthost.protocol import jsonrpc
from agenthost.protocol.jsonrpc import Request, Response
from agenthost.redaction import redact_url
from agenthost.transports._httpx import open_http_client
from agenthost.transports.base import (
    DEFAULT_MAX_MESSAGE_SIZE,
    NO_OPTIONS,
    Deliver,
    SendOptions,
    Transport,
)
from agenthost.transports.http import (
    StreamableHTTPTransport,
)
from agenthost.transports.legacy_sse import LegacySSETransport

__all__ = ["ProbingTransport", "open_http_transport"]

log = logging.getLogger("agenthost.transports.probing")


class _Options(TypedDict):
    headers: Mapping[str, str] | None
    connect_timeout: float
    ack_timeout: float
    max_message_size: int


class ProbingTransport(Transport):
    """Streamable HTTP or legacy HTTP+SSE, decided by the first message. See the module doc.

    Attributes:
        kind: ``"streamable-http"`` or ``"sse"`` once the probe decided; None before.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str,
        client: httpx.AsyncClient,
        nursery: trio.Nursery,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        ack_timeout: float = 30.0,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    ) -> None:
        self.name = name
        self.url = url
        self._client = client
        self._nursery = nursery
        #: What both candidate transports are built with.
        self._options = _Options(
            headers=headers,
            connect_timeout=connect_timeout,
            ack_timeout=ack_timeout,
            max_message_size=max_message_size,
        )
        self._streamable = StreamableHTTPTransport(
            url, name=name, client=client, nursery=nursery, **self._options
        )
        self._chosen: Transport | None = None
        self._failure: TransportError | None = None
        self._decided = trio.Event()
        self._lock = trio.Lock()
        self._version: str | None = None
        self.kind: str | None = None

    def __repr__(self) -> str:
        return f"<ProbingTransport {self.name!r} {redact_url(self.url)} kind={self.kind}>"

    @property
    def transport(self) -> Transport | None:
        """The transport the probe chose (None before the first message)."""
        return self._chosen

    def set_protocol_version(self, version: str) -> None:
        self._version = version
        if self._chosen is not None:
            self._chosen.set_protocol_version(version)

    async def send(
        self,
        message: jsonrpc.Message,
        *,
        deadline: float = math.inf,
        options: SendOptions = NO_OPTIONS,
    ) -> None:
        chosen = self._chosen
        if chosen is None:
            with trio.fail_at(deadline):
                async with self._lock:
                    if self._chosen is None:
                        await self._probe(message, options)
                        return
            chosen = self._chosen
        await chosen.send(message, deadline=deadline, options=options)

    async def exchange(
        self, request: Request, deliver: Deliver, *, options: SendOptions = NO_OPTIONS
    ) -> Response | None:
        assert self._chosen is not None  # inline_exchanges is the chosen one's
        return await self._chosen.exchange(request, deliver, options=options)

    @property
    def exchanges_per_request(self) -> bool:
        chosen = self._chosen
        return chosen.exchanges_per_request if chosen is not None else True

    def abort(self, request_id: jsonrpc.RequestId) -> None:
        if self._chosen is not None:
            self._chosen.abort(request_id)

    async def _probe(self, message: jsonrpc.Message, options: SendOptions) -> None:
        if self._failure is not None:
            raise self._failure
        if type(message) is not Request:
            raise TransportError(
                "the first message over a probed HTTP connection must be a request (initialize)",
                server=self.name,
            )
        try:
            status = await self._streamable.probe(message, options)
        except TransportError as exc:
            self._decide_failed(exc)
            raise
        if status is None:
            self._decide(self._streamable, "streamable-http")
            return
        log.info(
            "%s: %s answered the Streamable HTTP POST with HTTP %d; trying legacy HTTP+SSE",
            self.name,
            redact_url(self.url),
            status,
        )
        legacy = LegacySSETransport(
            self.url, name=self.name, client=self._client, nursery=self._nursery, **self._options
        )
        try:
            await legacy.connect()
        except TransportError as exc:
            inner = str(exc).removeprefix(f"{self.name}: ")
            error = TransportError(
                f"not a Streamable HTTP server (POST answered HTTP {status}), and the legacy"
                f" HTTP+SSE transport failed too: {inner}",
                server=self.name,
            )
            self._decide_failed(error)
            raise error from None
        except BaseException:
            await legacy.aclose()
            raise
        await self._streamable.aclose()
        self._decide(legacy, "sse")
        await legacy.send(message, options=options)

    def _decide(self, transport: Transport, kind: str) -> None:
        self._chosen = transport
        self.kind = kind
        self.inline_exchanges = transport.inline_exchanges
        if transport.inline_exchanges:
            # Every request's exchange goes straight to the chosen transport: a coroutine
            # frame less per call (bench: "HTTP JSON calls/s, 1 in flight").
            self.exchange = transport.exchange  # type: ignore[method-assign]
        if self._version is not None:
            transport.set_protocol_version(self._version)
        log.debug("%s: speaking %s", self.name, kind)
        self._decided.set()

    def _decide_failed(self, exc: TransportError) -> None:
        self._failure = exc
        self._decided.set()

    async def receive(self) -> jsonrpc.Message:
        await self._decided.wait()
        if self._chosen is None:
            raise self._failure or TransportClosed("transport is closed", server=self.name)
        return await self._chosen.receive()

    async def aclose(self) -> None:
        await self.shutdown(5.0)

    async def shutdown(self, timeout: float) -> None:
        """Close whichever transport is in use (shielded, bounded). Idempotent."""
        chosen = self._chosen
        if isinstance(chosen, StreamableHTTPTransport) or chosen is None:
            await self._streamable.shutdown(timeout)
        else:
            await chosen.aclose()
        if self._failure is None and chosen is None:
            self._failure = TransportClosed("transport is closed", server=self.name)
        self._decided.set()


@asynccontextmanager
async def open_http_transport(
    url: str,
    *,
    name: str,
    headers: Mapping[str, str] | None = None,
    client: httpx.AsyncClient | None = None,
    connect_timeout: float = 10.0,
    ack_timeout: float = 30.0,
    shutdown_timeout: float = 5.0,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
) -> AsyncIterator[ProbingTransport]:
    """Yield a transport to ``url`` that finds out which HTTP transport the server speaks.

    Args: as :func:`~agenthost.transports.http.open_streamable_http_transport`.

    Resource handling: whichever transport was chosen is closed on exit (a Streamable
    HTTP session is deleted), then our client is closed; shielded and bounded.
    """
    async with open_http_client(
        client, connect_timeout=connect_timeout, shutdown_timeout=shutdown_timeout
    ) as (http, nursery):
        transport = ProbingTransport(
            url,
            name=name,
            client=http,
            nursery=nursery,
            headers=headers,
            connect_timeout=connect_timeout,
            ack_timeout=ack_timeout,
            max_message_size=max_message_size,
        )
        try:
            yield transport
        finally:
            await transport.shutdown(shutdown_timeout)
