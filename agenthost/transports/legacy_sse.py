"""The legacy HTTP+SSE transport (MCP 2024-11-05), for servers that predate Streamable HTTP.

Wire rules (``2024-11-05/basic/transports.mdx``): the client opens a ``GET`` SSE stream;
the server's first event is ``endpoint``, whose data is the URI to ``POST`` every client
message to (relative URIs resolve against the SSE URL). Server messages arrive as
``message`` events on the stream. The stream *is* the session: when it ends, so does the
transport.

Security: an ``endpoint`` on another origin than the SSE URL is refused, so a hostile
stream cannot make us send our headers (tokens) elsewhere; for the same reason redirects
are followed only within the origin (see :mod:`agenthost.transports.http`).

A POST answered 404 means the server lost our session (a restart); the transport ends
with :class:`~agenthost.errors.SessionExpired`, as Streamable HTTP does. Another HTTP
error for a request becomes a JSON-RPC error response for it (code -32000).

Authorization (the client's ``httpx.Auth``), as on Streamable HTTP: a message the flow
cannot get through (:class:`~agenthost.errors.RequestUnauthorized`: a step-up that cannot
help) fails alone; an :class:`~agenthost.errors.AuthorizationError` that leaves us with no
token (a person must log in) ends the transport with its one line.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Final
from urllib.parse import urljoin, urlsplit

import httpx
import trio

from agenthost.errors import (
    AgentHostTimeout,
    AuthorizationError,
    MessageTooLarge,
    RequestUnauthorized,
    SessionExpired,
    TransportClosed,
    TransportError,
)
from agenthost.protocol import jsonrpc
from agenthost.protocol.jsonrpc import Request
from agenthost.protocol.sse import SSEParser
from agenthost.redaction import redact_url
from agenthost.transports._httpx import open_http_client, reason_of
from agenthost.transports.base import DEFAULT_MAX_MESSAGE_SIZE, NO_OPTIONS, SendOptions
from agenthost.transports.http_base import (
    HTTPTransportBase,
    _content_type,
    _summary,
    redirect_note,
)

__all__ = ["LegacySSETransport", "open_legacy_sse_transport"]

log = logging.getLogger("agenthost.transports.legacy_sse")


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, parts.hostname, port


class LegacySSETransport(HTTPTransportBase):
    """One HTTP+SSE connection. Open it with :func:`open_legacy_sse_transport`.

    Call :meth:`connect` before sending; ``endpoint`` is the POST URL it learned.
    """

    #: What this transport speaks (an ``http`` server's status names the one chosen).
    kind: Final = "sse"

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
        buffer: int = 256,
    ) -> None:
        super().__init__(
            url,
            name=name,
            client=client,
            nursery=nursery,
            headers=headers,
            connect_timeout=connect_timeout,
            ack_timeout=ack_timeout,
            max_message_size=max_message_size,
            buffer=buffer,
        )
        self.endpoint: str | None = None
        self._connect_timeout = self._stream_timeout.connect or 10.0

    async def connect(self) -> None:
        """Open the SSE stream and wait for the ``endpoint`` event.

        Raises:
            TransportError: the server refused the stream, or sent a bad endpoint.
            TransportClosed: the server cannot be reached.
            AgentHostTimeout: no ``endpoint`` event within the connect timeout.
        """
        self._check_open()
        try:
            with trio.fail_after(self._connect_timeout):
                self.endpoint = await self._nursery.start(self._run_stream)
        except trio.TooSlowError:
            raise AgentHostTimeout(
                f"no endpoint event from {redact_url(self.url)} within {self._connect_timeout:g}s",
                server=self.name,
                timeout=self._connect_timeout,
            ) from None

    async def _run_stream(self, *, task_status: trio.TaskStatus[str]) -> None:
        started = False
        with self._tracked():
            try:
                with self._map_errors():
                    async with self._stream(
                        "GET",
                        self.url,
                        headers=self._headers_for("text/event-stream"),
                        timeout=self._stream_timeout,
                    ) as response:
                        status = response.status_code
                        log.debug("%s: GET %s -> HTTP %d", self.name, redact_url(self.url), status)
                        if status != 200 or _content_type(response) != "text/event-stream":
                            summary = (
                                redirect_note(response)
                                if 300 <= status < 400
                                else await self._error_summary(response)
                            )
                            raise TransportError(
                                f"{redact_url(self.url)} is not an SSE endpoint (HTTP {status},"
                                f" {_content_type(response) or 'no content type'}): {summary}",
                                server=self.name,
                            )
                        parser = SSEParser(max_size=self._max)
                        async for chunk in response.aiter_bytes():
                            for event in parser.feed(chunk):
                                if event.event == "endpoint":
                                    if started:
                                        log.warning(
                                            "%s: ignoring a second endpoint event", self.name
                                        )
                                        continue
                                    endpoint = self._resolve(event.data.strip())
                                    started = True
                                    task_status.started(endpoint)
                                elif event.event == "message":
                                    if not started:
                                        log.warning(
                                            "%s: message before the endpoint event", self.name
                                        )
                                    await self._deliver_frame(event.data)
                                else:
                                    log.debug("%s: ignoring SSE event %r", self.name, event.event)
                    if not started:
                        raise TransportClosed(
                            "the SSE stream ended before the endpoint event", server=self.name
                        )
                    self._fail(TransportClosed, "the server closed the SSE stream")
            except TransportError as exc:
                # Before the endpoint event the caller of connect() gets the error as it
                # is (ours, or httpx's mapped); after it, the transport ends with it.
                if not started:
                    raise
                if isinstance(exc, TransportClosed | MessageTooLarge | AuthorizationError):
                    self._fail(type(exc), reason_of(exc))
                else:
                    self._fail(TransportClosed, f"the SSE stream broke: {reason_of(exc)}")

    def _resolve(self, data: str) -> str:
        endpoint = urljoin(self.url, data)
        if _origin(endpoint) != _origin(self.url):
            raise TransportError(
                "the server's endpoint event points to another origin; refusing to send"
                " messages (and our headers) there",
                server=self.name,
            )
        return endpoint

    async def send(
        self,
        message: jsonrpc.Message,
        *,
        deadline: float = math.inf,
        options: SendOptions = NO_OPTIONS,
    ) -> None:
        """POST one message to the endpoint; an HTTP error for a request answers it.

        Raises:
            SessionExpired: the endpoint answered 404 (the server forgot the session).
            TransportError: the server rejected a notification/response or is unreachable.
        """
        self._check_open()
        if self.endpoint is None:
            raise TransportError("not connected (no endpoint yet)", server=self.name)
        body = jsonrpc.encode(message)
        try:
            with trio.fail_at(deadline), self._map_errors(self.endpoint):
                response, content = await self._request(
                    "POST",
                    self.endpoint,
                    content=body,
                    headers={
                        **self._headers_for("application/json"),
                        "Content-Type": "application/json",
                    },
                    timeout=self._ack_timeout,
                )
        except (MessageTooLarge, RequestUnauthorized):
            raise  # this message alone (a step-up that cannot help, a fresh token refused)
        except AuthorizationError as exc:
            # No token at all (the login is dead and no person can renew it): every later
            # message would fail the same way, so the session ends with the reason, as
            # on Streamable HTTP.
            self._fail(AuthorizationError, reason_of(exc))
            raise self._error() from None
        except TransportClosed as exc:  # unreachable, or no pooled connection came free
            self._fail(TransportClosed, reason_of(exc))
            raise self._error() from None
        except TransportError as exc:
            raise TransportError(
                f"POST to the endpoint failed: {reason_of(exc)}", server=self.name
            ) from None
        status = response.status_code
        log.debug("%s: POST message -> HTTP %d", self.name, status)
        if status == 404:
            self._fail(SessionExpired, "the server no longer knows this session (HTTP 404)")
            raise self._error()
        if 300 <= status < 400 or status >= 400:
            summary = redirect_note(response) if status < 400 else _summary(content, self._redact)
            if type(message) is Request:
                try:
                    await self._deliver_error(
                        message.id,
                        f"HTTP {status} {response.reason_phrase} from the server: {summary}",
                        status,
                    )
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    raise self._error() from None
                return
            raise TransportError(
                f"the server rejected a message with HTTP {status}: {summary}", server=self.name
            )

    async def aclose(self) -> None:
        await self._close_background()


@asynccontextmanager
async def open_legacy_sse_transport(
    url: str,
    *,
    name: str,
    headers: Mapping[str, str] | None = None,
    client: httpx.AsyncClient | None = None,
    connect_timeout: float = 10.0,
    ack_timeout: float = 30.0,
    shutdown_timeout: float = 5.0,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
) -> AsyncIterator[LegacySSETransport]:
    """Connect to the SSE endpoint ``url`` and yield a transport once ``endpoint`` arrived.

    Args: as :func:`~agenthost.transports.http.open_streamable_http_transport`.

    Raises:
        TransportError, TransportClosed, AgentHostTimeout: as :meth:`LegacySSETransport.connect`.

    Resource handling: the SSE stream (the session) is closed on exit, and our client too.
    """
    async with open_http_client(
        client, connect_timeout=connect_timeout, shutdown_timeout=shutdown_timeout
    ) as (http, nursery):
        transport = LegacySSETransport(
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
            await transport.connect()
            yield transport
        finally:
            await transport.aclose()
