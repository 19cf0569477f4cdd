"""The lean HTTP/1.1 path for the MCP POST and GET stream of Streamable HTTP (issue 26).

Why: through httpx -> httpcore -> h11 a request costs ~3,600 Python calls (a pool scan,
two socket writes, cookie handling ...), which made agenthost the slowest but one MCP
client over HTTP. Here the request head is encoded once per transport and sent with the
body in one write, and llhttp (``httptools``, as uvicorn uses) parses the response in C:
16-40x fewer instructions per call. h11 driven directly was measured as the pure-Python
alternative and costs 4-5x more than httptools (see the issue); httpx stays for all that
is not the plain exchange: OAuth discovery and token requests, DPoP-bound requests (a
proof each, from the ``httpx.Auth`` flow), redirects, proxies, and any client a caller
handed us (:func:`agenthost.transports._httpx.lean_allowed` decides). A 401/403 on the
lean path is handed to the auth's ``refused()`` (login, refresh, step-up: the flow's own
decision) and the request goes again once with the new token: the server never sees a
refused request twice (issue 28).

Rules:

* One :class:`LeanPool` per transport, so per origin: at most ``max_connections``
  connections; waiting for one is bounded by the connect timeout and then ends the
  transport with the words httpx's ``PoolTimeout`` got (issue 14: requests the server
  never answers hold every connection).
* A connection returns to the pool only once its response was read to the end and both
  sides keep it alive; a response closed early closes its connection, so an abandoned
  request never wedges one. Idle connections are kept ``idle_seconds`` (below the 5 s of
  common servers) and dropped before reuse if the socket turned readable (the server
  closed it, or spoke out of turn).
* Bounded: the status line and headers at most :data:`MAX_HEAD` bytes; bodies are read
  in :data:`RECEIVE_SIZE` pieces and bounded by the caller, who counts them.
* TLS through :mod:`ssl` with ``httpx.create_ssl_context()``: the trust settings httpx
  uses (certifi, ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``).
* Errors: not reaching the server is :class:`~agenthost.errors.TransportClosed` ("cannot
  reach URL", as :func:`~agenthost.transports._httpx.map_httpx_errors` says it); anything
  that breaks after is a :class:`~agenthost.errors.TransportError`. No secret is in them:
  they name the redacted URL and the failure, never a header.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import math
import select
import socket
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Final

import httptools
import httpx
import trio

from agenthost.errors import TransportClosed, TransportError
from agenthost.redaction import redact_url
from agenthost.transports._httpx import BearerAuth, ssl_context, tls_failure

__all__ = [
    "MAX_AUTH_RETRIES",
    "MAX_HEAD",
    "RECEIVE_SIZE",
    "Exchange",
    "Fallback",
    "Handoff",
    "HeldResponse",
    "LeanPool",
    "LeanResponse",
    "LeanRoute",
    "encode_headers",
]

log = logging.getLogger("agenthost.transports.lean")

#: Bytes of status line and headers accepted before the body (h11's default is 16 KiB;
#: servers put long tokens in cookies and challenges).
MAX_HEAD: Final = 256 * 1024
#: Bytes asked of the socket per read.
RECEIVE_SIZE: Final = 65536
#: Times one request goes again after a 401/403 the auth acted on (the auth bounds its
#: own step-ups and fresh tokens; this only keeps a confused one from looping).
MAX_AUTH_RETRIES: Final = 5
#: Bytes of a 401/403 body kept in memory while the auth logs in (it is only quoted).
_REFUSAL_BUFFER: Final = 65536
_FORBIDDEN: Final = (b"\r", b"\n", b"\0")
#: A write to a closed connection raises EPIPE, never SIGPIPE (an embedding program may not
#: ignore the signal as Python does).
_SEND_FLAGS: Final = getattr(socket, "MSG_NOSIGNAL", 0)


def encode_headers(headers: Mapping[str, str]) -> bytes | None:
    """``Name: value\\r\\n`` lines, or None when a header cannot go on the lean path.

    None (the caller uses httpx, which reports the problem as it always did) for a name
    or value that is not ASCII or holds CR, LF or NUL: never a header injection here.
    """
    lines = []
    for name, value in headers.items():
        try:
            raw_name, raw_value = name.encode("ascii"), value.encode("ascii")
        except UnicodeEncodeError:
            return None
        if not raw_name or b":" in raw_name or b" " in raw_name:
            return None
        if any(bad in raw_name or bad in raw_value for bad in _FORBIDDEN):
            return None
        lines.append(b"%s: %s\r\n" % (raw_name, raw_value))
    return b"".join(lines)


def _stale(conn: _Connection) -> bool:
    """Whether an idle connection's socket is readable: EOF or bytes nobody asked for."""
    sock = conn.sock
    if sock is None:
        stream = conn.stream
        inner = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
        sock = getattr(inner, "socket", None)
        if sock is None:
            return True
    try:
        if hasattr(select, "poll"):  # select() refuses descriptors above 1023
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN)
            return bool(poller.poll(0))
        readable, _, _ = select.select([sock.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class _Connection:
    """One keep-alive connection; idle between responses.

    Plain TCP is driven through the socket itself (``sock``): Trio's ``SocketStream``
    costs a scheduler pass per ``send_all`` even when the kernel takes every byte at once
    (it checkpoints), and two wrappers, a conflict detector and an error-translating
    context manager per read and write. Here a request that fits the socket's buffer, as
    every MCP request but huge arguments does, goes out without yielding; the response
    wait is the exchange's one checkpoint (bench: "HTTP JSON calls/s, 1 in flight"). TLS
    keeps Trio's ``SSLStream`` (``stream``; ``sock`` is None).
    """

    __slots__ = ("idle_since", "sock", "stream")

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.idle_since = 0.0
        self.stream: trio.abc.Stream | None = None
        self.sock: socket.socket | None = None
        if isinstance(stream, trio.SocketStream):
            # Take the descriptor from Trio's socket (already non-blocking, TCP_NODELAY).
            self.sock = socket.socket(fileno=stream.socket.detach())
            self.sock.setblocking(False)
        else:
            self.stream = stream

    async def send_all(self, data: bytes, timeout: float) -> None:
        """Write ``data``; only a write the kernel cannot take at once waits (bounded)."""
        sock = self.sock
        if sock is None:
            assert self.stream is not None
            with trio.fail_after(timeout):
                await self.stream.send_all(data)
            return
        try:
            sent = sock.send(data, _SEND_FLAGS)
        except BlockingIOError:
            sent = 0
        if sent == len(data):
            return
        with trio.fail_after(timeout):
            with memoryview(data) as view:
                while sent < len(data):
                    await trio.lowlevel.wait_writable(sock)
                    with contextlib.suppress(BlockingIOError):
                        sent += sock.send(view[sent:], _SEND_FLAGS)

    async def receive(self, timeout: float, *, wait_first: bool) -> bytes | bytearray:
        """Read once (at most :data:`RECEIVE_SIZE` bytes; b"" at EOF), waiting at most
        ``timeout`` seconds for data. ``wait_first``: data cannot be there yet (a
        response just asked for), so do not try a read that would fail."""
        sock = self.sock
        if sock is None:
            assert self.stream is not None
            if timeout == math.inf:
                return await self.stream.receive_some(RECEIVE_SIZE)
            with trio.fail_after(timeout):
                return await self.stream.receive_some(RECEIVE_SIZE)
        if not wait_first:
            try:
                return sock.recv(RECEIVE_SIZE)
            except BlockingIOError:
                pass
        while True:
            if timeout == math.inf:
                await trio.lowlevel.wait_readable(sock)
            else:
                with trio.fail_after(timeout):
                    await trio.lowlevel.wait_readable(sock)
            try:
                return sock.recv(RECEIVE_SIZE)
            except BlockingIOError:  # woken without data (spurious): wait again
                continue

    async def aclose(self) -> None:
        """Close at once (no TLS close_notify wait): a connection we give up on."""
        sock = self.sock
        if sock is None:
            assert self.stream is not None
            await trio.aclose_forcefully(self.stream)
            return
        trio.lowlevel.notify_closing(sock)
        sock.close()
        await trio.lowlevel.checkpoint()


class LeanResponse:
    """A response on the lean path: what the transport reads of an ``httpx.Response``.

    ``headers`` maps lower-cased names to values (repeated fields joined by ``", "``).
    Iterate :meth:`aiter_bytes` once; :meth:`aclose` always, which returns the connection
    to the pool only if the response was read to its end.
    """

    next_request: None = None

    def __init__(
        self, pool: LeanPool, conn: _Connection, read_timeout: float | None, url: str
    ) -> None:
        self._pool = pool
        self._conn: _Connection | None = conn
        self._read_timeout = math.inf if read_timeout is None else read_timeout
        self._url = url
        self.status_code = 0
        self.reason_phrase = ""
        self.headers: dict[str, str] = {}
        #: Each ``WWW-Authenticate`` value apart (a joined one can split inside a quote).
        self.challenges: list[str] = []
        self._reason = bytearray()
        self._chunks: deque[bytes] = deque()
        self._head_bytes = 0
        self._head_done = False
        self._complete = False
        self._keep_alive = False
        self._until_eof = False
        #: Nothing was read since the request went: its answer cannot be there yet.
        self._awaiting = True
        self._parser = httptools.HttpResponseParser(self)

    # -- httptools callbacks (called from inside feed_data)

    def on_status(self, status: bytes) -> None:
        self._reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        if key == "www-authenticate":
            self.challenges.append(text)
        old = self.headers.get(key)
        self.headers[key] = text if old is None else f"{old}, {text}"

    def on_headers_complete(self) -> None:
        self._head_done = True
        self.status_code = self._parser.get_status_code()
        self.reason_phrase = self._reason.decode("latin-1")
        self._until_eof = (
            "content-length" not in self.headers
            and "transfer-encoding" not in self.headers
            and self.status_code not in (204, 304)
        )

    def on_body(self, body: bytes) -> None:
        if body:
            self._chunks.append(body)

    def on_message_complete(self) -> None:
        self._complete = True
        self._keep_alive = self._parser.should_keep_alive()

    # -- reading

    def _broken(self, what: str) -> TransportError:
        return TransportError(f"{what} ({redact_url(self._url)})", server=self._pool.server)

    async def _fill(self) -> None:
        """Read once from the socket and feed the parser (bounded wait and size)."""
        conn = self._conn
        if conn is None:
            raise self._broken("the response was closed")
        try:
            data = await conn.receive(self._read_timeout, wait_first=self._awaiting)
            self._awaiting = False
        except trio.TooSlowError:
            raise self._broken(f"no data from the server for {self._read_timeout:g} s") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise self._broken(f"the connection broke: {type(exc).__name__}") from None
        if not data:
            if self._head_done and self._until_eof:
                self._complete = True  # a body delimited by the connection's end
                return
            raise self._broken("the server closed the connection before the response ended")
        if not self._head_done:
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            raise self._broken(f"malformed HTTP response: {exc}") from None
        if not self._head_done and self._head_bytes > MAX_HEAD:
            raise self._broken(f"response headers larger than {MAX_HEAD} bytes")

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body's pieces as they arrive (no copies: the parser's own bytes)."""
        return _Body(self)

    async def read(self, limit: int) -> bytes | None:
        """The whole body, or None once it is larger than ``limit`` bytes (what is left
        unread then closes the connection), without an iterator."""
        chunks = self._chunks
        size = sum(map(len, chunks))
        while not self._complete:
            if size > limit:
                return None
            had = len(chunks)
            await self._fill()
            for index in range(had, len(chunks)):  # near the deque's end: O(1) each
                size += len(chunks[index])
        if size > limit:
            return None
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        return body

    async def buffer(self, limit: int) -> bool:
        """Read the body into memory, up to ``limit`` bytes; True if it all came.

        A buffered response stays readable after :meth:`aclose` (which then gives the
        connection back): a refusal is kept while the auth flow logs in.
        """
        size = sum(map(len, self._chunks))
        while not self._complete and size <= limit:
            await self._fill()
            size = sum(map(len, self._chunks))
        return self._complete

    @property
    def at_end(self) -> bool:
        """Everything of the body was handed out: reading on needs no I/O."""
        return self._complete and not self._chunks

    async def aclose(self) -> None:
        """Give the connection back (read to its end and kept alive) or close it."""
        conn, self._conn = self._conn, None
        if conn is not None:
            reusable = self._complete and self._keep_alive and not self._chunks
            await self._pool.release(conn, reusable=reusable)


class _Body:
    """:meth:`LeanResponse.aiter_bytes`: a class, not an async generator, which Trio
    registers (a hook call, a weak set entry) and finalises in a task of its own when
    dropped unfinished, as the SSE reader leaves one after the answer."""

    __slots__ = ("_response",)

    def __init__(self, response: LeanResponse) -> None:
        self._response = response

    def __aiter__(self) -> _Body:
        return self

    async def __anext__(self) -> bytes:
        response = self._response
        chunks = response._chunks
        while not chunks:
            if response._complete:
                raise StopAsyncIteration
            await response._fill()
        return chunks.popleft()


class LeanPool:
    """Keep-alive connections to one origin, and the one-write request (see the module).

    Args:
        url: the endpoint; its origin is the pool's, its path and query every request's
            target.
        server: the server's name, which every error carries.
        connect_timeout: seconds to connect (TLS included), to send a request, and to
            wait for a free connection.
        max_connections: connections open at once, idle or busy.
        idle_seconds: how long an idle connection is kept.
        ssl_context: for https; default ``httpx.create_ssl_context()``.
    """

    def __init__(
        self,
        url: str,
        *,
        server: str,
        connect_timeout: float,
        max_connections: int = 100,
        idle_seconds: float = 4.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"not an http(s) URL: {redact_url(url)}")
        self.server = server
        self.url = url
        self._tls = parsed.scheme == "https"
        self._host = parsed.host
        self._port = parsed.port or (443 if self._tls else 80)
        self._connect_timeout = connect_timeout
        self._idle_seconds = idle_seconds
        self._ssl_context = ssl_context
        #: Free connection slots; a request that finds none parks in ``_waiting`` and is
        #: handed the slot of the next connection released (trio.Semaphore's rule, without
        #: its method calls per request).
        self._free = max_connections
        self._waiting = trio.lowlevel.ParkingLot()
        self._parked = 0
        self._idle: list[_Connection] = []
        self._closed = False
        #: Connections opened so far (tests and the bench count them).
        self.opened = 0
        host = parsed.netloc.decode("ascii")
        target = parsed.raw_path or b"/"
        self._lines = {
            method: b"%s %s HTTP/1.1\r\nHost: %s\r\n" % (method.encode(), target, host.encode())
            for method in ("POST", "GET")
        }

    def __repr__(self) -> str:
        return f"<LeanPool {self.server!r} {redact_url(self.url)}>"

    async def request(
        self,
        method: str,
        headers: bytes,
        body: bytes | None,
        *,
        read_timeout: float | None,
    ) -> LeanResponse:
        """Send one request (``headers`` from :func:`encode_headers`); return once the
        response's status line and headers are in.

        Cancellation: at any point; the connection is then closed, not pooled.

        Raises:
            TransportClosed: the server cannot be reached, or no connection came free.
            TransportError: the exchange broke after connecting.
        """
        head = self._lines[method] + headers
        if body is not None:
            head += b"Content-Length: %d\r\n\r\n" % len(body) + body
        else:
            head += b"\r\n"
        conn = await self._acquire()
        response = LeanResponse(self, conn, read_timeout, self.url)
        try:
            try:
                await conn.send_all(head, self._connect_timeout)
            except trio.TooSlowError:
                raise response._broken("sending the request timed out") from None
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise response._broken(f"sending failed: {type(exc).__name__}") from None
            while not response._head_done:
                await response._fill()
        except BaseException:
            await response.aclose()
            raise
        if log.isEnabledFor(logging.DEBUG):  # the line httpx logs, for -vvv
            log.debug(
                'HTTP Request: %s %s "HTTP/1.1 %d %s"',
                method,
                redact_url(self.url),
                response.status_code,
                response.reason_phrase,
            )
        return response

    async def _acquire(self) -> _Connection:
        if self._closed:
            raise TransportClosed("the connection pool is closed", server=self.server)
        if self._free:
            # A free slot is taken without a cancel scope or a scheduler pass (the send
            # that follows checkpoints; bench: "HTTP JSON calls/s, 1 in flight").
            self._free -= 1
        else:
            self._parked += 1
            try:
                with trio.move_on_after(self._connect_timeout) as waited:
                    await self._waiting.park()  # woken holding a released slot
            finally:
                self._parked -= 1
            if waited.cancelled_caught:
                raise TransportClosed(
                    "no connection to the server came free in time (every pooled connection"
                    " is held by a request the server does not answer)",
                    server=self.server,
                ) from None
        try:
            now = time.monotonic()  # real time: servers drop idle connections by it
            while self._idle:
                conn = self._idle.pop()
                if now - conn.idle_since <= self._idle_seconds and not _stale(conn):
                    return conn
                await conn.aclose()
            return _Connection(await self._connect())
        except BaseException:
            self._release_slot()
            raise

    async def _connect(self) -> trio.abc.Stream:
        try:
            with trio.fail_after(self._connect_timeout):
                stream: trio.abc.Stream = await trio.open_tcp_stream(self._host, self._port)
                if self._tls:
                    context = self._ssl_context or ssl_context()
                    tls = trio.SSLStream(stream, context, server_hostname=self._host)
                    try:
                        await tls.do_handshake()
                    except BaseException:
                        await trio.aclose_forcefully(stream)
                        raise
                    stream = tls
        except trio.TooSlowError:
            raise self._unreachable("connection timed out") from None
        except (OSError, trio.BrokenResourceError, ssl.SSLError) as exc:
            why = tls_failure(exc) or f"{type(exc).__name__}: {exc}"
            raise self._unreachable(why) from None
        self.opened += 1
        return stream

    def _unreachable(self, why: str) -> TransportClosed:
        return TransportClosed(f"cannot reach {redact_url(self.url)}: {why}", server=self.server)

    async def release(self, conn: _Connection, *, reusable: bool) -> None:
        """A response is done with ``conn``: keep it idle, or close it."""
        self._release_slot()
        if reusable and not self._closed:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            await conn.aclose()

    def _release_slot(self) -> None:
        # (A waiter that timed out has left the lot but may not have counted itself out.)
        if not (self._parked and self._waiting.unpark()):
            self._free += 1

    async def aclose(self) -> None:
        """Close the idle connections; busy ones close when their responses do."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.aclose()


class Handoff(enum.Enum):
    """Why :meth:`LeanRoute.send` gave a request to httpx (see there)."""

    #: Send it through httpx and its auth flow.
    HTTPX = "httpx"
    #: The same, but the auth already got this request a fresh token (a login or step-up
    #: on the lean path, then a DPoP-bound token): tell the flow
    #: (:data:`~agenthost.transports._httpx.RENEWED`), so that a refusal of this token is
    #: final, as within one flow.
    RENEWED = "renewed"


def _handoff(renewed: bool) -> Handoff:
    return Handoff.RENEWED if renewed else Handoff.HTTPX


class LeanRoute:
    """The lean path as a transport uses it: its pool, where its token comes from, and
    the header lines it encoded, once per session state.

    Args:
        pool: the transport's connections.
        auth: the client's auth (:class:`~agenthost.transports._httpx.BearerAuth`), or
            None without auth.
        headers_for: the transport's own headers for an ``Accept`` value.
        user_agent: sent unless the transport's headers name one.
    """

    def __init__(
        self,
        pool: LeanPool,
        auth: BearerAuth | None,
        headers_for: Callable[[str], dict[str, str]],
        user_agent: str,
    ) -> None:
        self.pool = pool
        #: False once a redirect showed that httpx must take every request.
        self.enabled = True
        self._auth = auth
        self._headers_for = headers_for
        self._user_agent = user_agent
        #: Encoded header lines by (accept, session state, token, has body, the names a
        #: message sets itself).
        self._heads: dict[tuple[Any, ...], bytes | None] = {}

    async def send(
        self,
        method: str,
        accept: str,
        extra: Mapping[str, str],
        body: bytes | None,
        *,
        state: tuple[Any, ...],
        read_timeout: float | None,
    ) -> LeanResponse | Handoff:
        """The lean path's response, or the :class:`Handoff` to httpx of this request.

        httpx takes it when a header cannot be sent as is, after a redirect (httpx
        follows it within the origin, for this request and every later one), and for a
        DPoP-bound token. A 401/403 with auth goes to the auth's ``refused()`` (a login,
        refresh or step-up; concurrent requests share one) and the request goes again
        with the new token, at most :data:`MAX_AUTH_RETRIES` times: those statuses mean
        the server did not act on it. ``state``: what the transport's headers depend on
        (session id, revision), the key of the encoded lines.

        Raises:
            RequestUnauthorized, AuthorizationError: from the auth's ``refused()``.
        """
        if not self.enabled:
            return Handoff.HTTPX
        auth = self._auth
        renewed = False
        for _ in range(MAX_AUTH_RETRIES + 1):
            token = None if auth is None else await auth.bearer()  # None: not logged in
            if token == "":  # DPoP (RFC 9449): a proof per request, which httpx's auth makes
                return _handoff(renewed)
            head = self._head(accept, token, body is not None, tuple(extra), state)
            lines = encode_headers(extra) if extra else b""
            if head is None or lines is None:
                return _handoff(renewed)
            response = await self.pool.request(
                method, head + lines, body, read_timeout=read_timeout
            )
            status = response.status_code
            if 300 <= status < 400:
                await response.aclose()
                self.enabled = False
                return _handoff(renewed)
            if auth is None or status not in (401, 403):
                return response
            try:
                if await response.buffer(_REFUSAL_BUFFER):
                    await response.aclose()  # the connection is free during a login
                retry = await auth.refused(status, response.challenges, token, renewed=renewed)
            except BaseException:
                await response.aclose()
                raise
            if not retry:
                return response  # final: the caller reads the refusal
            await response.aclose()
            renewed = True
        return response

    def _head(
        self,
        accept: str,
        token: str | None,
        has_body: bool,
        replaced: tuple[str, ...],
        state: tuple[Any, ...],
    ) -> bytes | None:
        """Our header lines, without the ``replaced`` names (a message's own headers win,
        as in a dict merge)."""
        key = (accept, state, token, has_body, replaced)
        head = self._heads.get(key, b"")
        if head == b"":
            skip = {name.lower() for name in replaced}
            headers = {
                name: value
                for name, value in self._headers_for(accept).items()
                if name.lower() not in skip
            }
            if not any(name.lower() == "user-agent" for name in headers):
                headers["User-Agent"] = self._user_agent
            if token is not None:
                headers["Authorization"] = f"Bearer {token}"
            if has_body:
                headers["Content-Type"] = "application/json"
            if len(self._heads) >= 32:  # a new token or session id: the old lines are dead
                self._heads.clear()
            head = self._heads[key] = encode_headers(headers)
        return head


#: Opens the httpx exchange of a request the lean path handed off: (why, method, accept,
#: extra headers, body, timeout).
Fallback = Callable[
    [Handoff, str, str, Mapping[str, str], "bytes | None", httpx.Timeout],
    AbstractAsyncContextManager[Any],
]


class HeldResponse(trio.abc.AsyncResource):
    """An open response taken over from its :class:`Exchange` (a task reads it on and
    closes it)."""

    __slots__ = ("_httpx", "_response")

    def __init__(
        self, response: LeanResponse | None, httpx_cm: AbstractAsyncContextManager[Any] | None
    ) -> None:
        self._response = response
        self._httpx = httpx_cm

    async def aclose(self) -> None:
        response, httpx_cm = self._response, self._httpx
        self._response = self._httpx = None
        if response is not None:
            await response.aclose()
        elif httpx_cm is not None:
            await httpx_cm.__aexit__(None, None, None)


class Exchange:
    """One POST or GET as ``async with``: on the lean path when ``route`` takes it, else
    through httpx (``fallback``); the response is closed on the way out unless
    :meth:`detach` handed it on. A class, not a generator-based manager in an
    ``AsyncExitStack``: every MCP request enters one (bench: "HTTP JSON calls/s, 1 in
    flight")."""

    __slots__ = ("_args", "_fallback", "_httpx", "_response", "_route", "_state")

    def __init__(
        self,
        route: LeanRoute | None,
        fallback: Fallback,
        method: str,
        accept: str,
        extra: Mapping[str, str],
        body: bytes | None,
        timeout: httpx.Timeout,
        state: tuple[Any, ...],
    ) -> None:
        self._route = route
        self._fallback = fallback
        self._args = (method, accept, extra, body, timeout)
        self._state = state
        self._response: LeanResponse | None = None
        self._httpx: AbstractAsyncContextManager[Any] | None = None

    async def __aenter__(self) -> Any:
        method, accept, extra, body, timeout = self._args
        route = self._route
        handoff = Handoff.HTTPX
        if route is not None:
            response = await route.send(
                method, accept, extra, body, state=self._state, read_timeout=timeout.read
            )
            if not isinstance(response, Handoff):
                self._response = response
                return response
            handoff = response
        httpx_cm = self._fallback(handoff, method, accept, extra, body, timeout)
        opened = await httpx_cm.__aenter__()
        self._httpx = httpx_cm
        return opened

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        response, httpx_cm = self._response, self._httpx
        self._response = self._httpx = None
        if response is not None:
            await response.aclose()
        elif httpx_cm is not None:
            return bool(await httpx_cm.__aexit__(kind, exc, tb))
        return False

    def detach(self) -> HeldResponse:
        """Hand the open response to whoever closes the returned handle."""
        held = HeldResponse(self._response, self._httpx)
        self._response = self._httpx = None
        return held
