"""The WebSocket transport: one JSON-RPC message per text frame, subprotocol ``mcp``.

WebSocket is not one of the spec's standard transports but a common custom one (the
official SDKs ship it); the convention is the ``mcp`` subprotocol and one JSON-RPC message
per text frame. A binary frame is accepted too (decoded as UTF-8 JSON): being lenient on
receive costs nothing.

Built on trio-websocket, whose connection already serialises concurrent writers and reads
frames in one background task; this module only frames messages and maps errors. It opens
the TCP connection and does the TLS handshake itself (:func:`_open_stream`): with the
trust every HTTP request has (``ssl_context()``: certifi, or ``SSL_CERT_FILE`` /
``SSL_CERT_DIR``), and because trio-websocket's reader task ends quietly when a TLS
handshake fails, so an untrusted certificate waited out the connect timeout as "no
WebSocket handshake".
"""

from __future__ import annotations

import logging
import math
import re
import ssl
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import trio
import trio_websocket

from agenthost._util import collapse_single_group
from agenthost.errors import AgentHostTimeout, MessageTooLarge, TransportClosed, TransportError
from agenthost.protocol import jsonrpc
from agenthost.redaction import add_named_secret, add_secrets_of_url, redact_url
from agenthost.transports.base import (
    DEFAULT_MAX_MESSAGE_SIZE,
    NO_OPTIONS,
    SendOptions,
    Transport,
    decode_frame,
)

__all__ = ["WebSocketTransport", "open_websocket_transport"]

log = logging.getLogger("agenthost.transports.websocket")

_MESSAGE_TOO_BIG = 1009

#: The status line of the server's answer to the upgrade request (RFC 9112 section 4).
_STATUS_LINE = re.compile(rb"HTTP/\d\.\d ([0-9]{3})[ \r]")
#: Bytes read looking for that line's end: more than any real status line, far less than
#: the header limit (16 KiB) that h11, under wsproto, applies after us.
_STATUS_LINE_MAX = 1024


class WebSocketTransport(Transport):
    """One WebSocket connection. Open it with :func:`open_websocket_transport`."""

    def __init__(
        self,
        connection: trio_websocket.WebSocketConnection,
        *,
        name: str,
        url: str,
        shutdown_timeout: float = 5.0,
    ) -> None:
        self.name = name
        self._shutdown_timeout = shutdown_timeout
        self.url = url
        self._ws = connection
        self._queue: deque[jsonrpc.Message] = deque()
        self._closed = False

    def __repr__(self) -> str:
        return f"<WebSocketTransport {self.name!r} {redact_url(self.url)}>"

    @property
    def subprotocol(self) -> str | None:
        """The subprotocol the server agreed to (``"mcp"``, or None if it chose none)."""
        value: str | None = self._ws.subprotocol
        return value

    async def send(
        self,
        message: jsonrpc.Message,
        *,
        deadline: float = math.inf,
        options: SendOptions = NO_OPTIONS,
    ) -> None:
        if self._closed:
            raise TransportClosed("transport is closed", server=self.name)
        text = jsonrpc.encode(message).decode()
        try:
            with trio.fail_at(deadline):
                await self._ws.send_message(text)
        except trio_websocket.ConnectionClosed as exc:
            raise self._closed_error(exc) from None

    async def receive(self) -> jsonrpc.Message:
        queue = self._queue
        while not queue:
            try:
                data = await self._ws.get_message()
            except trio_websocket.ConnectionClosed as exc:
                raise self._closed_error(exc) from None
            decode_frame(data, queue, log, self.name)
        return queue.popleft()

    def _closed_error(self, exc: trio_websocket.ConnectionClosed) -> TransportError:
        reason = exc.reason
        code = getattr(reason, "code", None)
        text = getattr(reason, "reason", None)
        if code == _MESSAGE_TOO_BIG:
            return MessageTooLarge(
                "a message was larger than the maximum (WebSocket close 1009)", server=self.name
            )
        if self._closed:
            return TransportClosed("transport is closed", server=self.name)
        detail = f" ({code}{': ' + text if text else ''})" if code is not None else ""
        return TransportClosed(f"the WebSocket connection closed{detail}", server=self.name)

    async def aclose(self) -> None:
        """Close the connection (close handshake). Idempotent; shielded and bounded."""
        self._closed = True
        with trio.CancelScope(shield=True), trio.move_on_after(self._shutdown_timeout):
            await self._ws.aclose()


def _refused(safe: str, status: int, name: str) -> TransportError:
    return TransportError(f"{safe} refused the WebSocket handshake with HTTP {status}", server=name)


class _UpgradeWatch(trio.abc.Stream):
    """The connection's stream, whose answer to the upgrade is read here first.

    trio-websocket reads a refusal's body to its end, appending each 4 KiB to one bytes
    object, before it reports the status: a server that refuses with an endless body held
    the host at full CPU, with memory growing, until the connect timeout, which then blamed
    "no handshake". The body is never shown, so a refusal ends at its status line: in
    bounded memory (:data:`_STATUS_LINE_MAX`) and as soon as the line arrives. After a
    ``101`` the stream is only passed through (one flag test per read).
    """

    def __init__(self, inner: trio.abc.Stream, *, name: str, safe: str) -> None:
        self.inner = inner
        self.watching = True
        self._head = b""
        self._name = name
        self._safe = safe

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        if self.watching:
            self._watch(data)
        return data

    def _watch(self, data: bytes | bytearray) -> None:
        self._head += data[:_STATUS_LINE_MAX]
        if b"\n" not in self._head and len(self._head) < _STATUS_LINE_MAX and data:
            return
        self.watching = False  # one line decides; what is not HTTP is wsproto's to refuse
        match = _STATUS_LINE.match(self._head)
        if match is not None and int(match[1]) != 101:
            raise _refused(self._safe, int(match[1]), self._name)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _open_stream(
    url: str, *, name: str, safe: str
) -> tuple[trio.SocketStream | trio.SSLStream[trio.SocketStream], str, str]:
    """The connection to ``url``'s server, TLS done for ``wss``; with the ``Host`` value
    and the resource (path and query) the opening handshake names.

    Raises:
        TransportClosed: the server cannot be reached, or its certificate not trusted.
    """
    parts = urllib.parse.urlsplit(url)
    secure = parts.scheme == "wss"
    host = parts.hostname or ""
    port = parts.port or (443 if secure else 80)
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    authority = parts.netloc.rpartition("@")[2]  # host[:port] as written, [v6] kept
    try:
        stream = await trio.open_tcp_stream(host, port)
    except OSError as exc:
        raise TransportClosed(
            f"cannot reach {safe}: {exc.strerror or type(exc).__name__}", server=name
        ) from None
    if not secure:
        return stream, authority, resource
    # Here, not at the top: httpx (which builds the shared context) only for wss://.
    from agenthost.transports._httpx import failure_name, ssl_context

    tls = trio.SSLStream(stream, ssl_context(), server_hostname=host, https_compatible=True)
    try:
        await tls.do_handshake()
    except (trio.BrokenResourceError, ssl.SSLError, OSError) as exc:
        await trio.aclose_forcefully(stream)
        raise TransportClosed(f"cannot reach {safe}: {failure_name(exc)}", server=name) from None
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    return tls, authority, resource


@asynccontextmanager
async def open_websocket_transport(
    url: str,
    *,
    name: str,
    headers: Mapping[str, str] | None = None,
    connect_timeout: float = 10.0,
    shutdown_timeout: float = 5.0,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
) -> AsyncIterator[WebSocketTransport]:
    """Connect to ``url`` (``ws://`` or ``wss://``) with subprotocol ``mcp``.

    Args:
        url: the server's WebSocket URL.
        name: the server's name, for logs and errors.
        headers: extra handshake headers (``Authorization`` ...); values are secrets.
        connect_timeout: seconds for the TCP/TLS connect and the handshake.
        shutdown_timeout: seconds for the closing handshake.
        max_message_size: the largest frame accepted; a larger one ends the transport with
            :class:`~agenthost.errors.MessageTooLarge`.

    Raises:
        TransportError: the handshake was refused (HTTP status named) or failed.
        TransportClosed: the server cannot be reached.
        AgentHostTimeout: no handshake within ``connect_timeout``.

    Resource handling: the connection is closed when the block exits, however it exits.
    """
    for name, value in (headers or {}).items():
        add_named_secret(name, value)
    add_secrets_of_url(url)
    extra = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    safe = redact_url(url)
    # trio-websocket reports a refused handshake from its reader task, i.e. out of the
    # nursery, so the mapping sits outside it.
    try:
        with collapse_single_group():
            async with trio.open_nursery() as nursery:
                stream = None
                try:
                    with trio.fail_after(connect_timeout):
                        stream, authority, resource = await _open_stream(url, name=name, safe=safe)
                        connection = await trio_websocket.wrap_client_stream(
                            nursery,
                            # Typed as the two concrete streams only for its `local` and
                            # `remote` properties, which agenthost never reads.
                            _UpgradeWatch(stream, name=name, safe=safe),  # type: ignore[arg-type]
                            authority,
                            resource,
                            subprotocols=["mcp"],
                            extra_headers=extra,
                            message_queue_size=64,
                            max_message_size=max_message_size,
                        )
                except BaseException as exc:
                    if stream is not None:
                        await trio.aclose_forcefully(stream)
                    if isinstance(exc, trio.TooSlowError):
                        raise AgentHostTimeout(
                            f"no WebSocket handshake with {safe} within {connect_timeout:g}s",
                            server=name,
                            timeout=connect_timeout,
                        ) from None
                    raise
                transport = WebSocketTransport(
                    connection, name=name, url=url, shutdown_timeout=shutdown_timeout
                )
                if transport.subprotocol != "mcp":
                    log.warning(
                        "%s: the server did not select the 'mcp' subprotocol (got %r); continuing",
                        name,
                        transport.subprotocol,
                    )
                try:
                    yield transport
                finally:
                    transport._closed = True
                    with trio.CancelScope(shield=True), trio.move_on_after(shutdown_timeout):
                        await connection.aclose()
                    nursery.cancel_scope.cancel()
    except trio_websocket.ConnectionRejected as exc:  # a status line only h11 could read
        raise _refused(safe, exc.status_code, name) from None
    except trio_websocket.HandshakeError as exc:
        raise TransportError(
            f"WebSocket handshake with {safe} failed: {type(exc).__name__}", server=name
        ) from None
