"""The wire of the lean HTTP path (issue 26): keep-alive connections, the one-write
request, responses parsed by llhttp (``httptools``). :mod:`agenthost.transports.lean`
decides what takes this path and hands the rest to httpx; its docstring has the rules
(bounds, reuse, TLS, errors) this module keeps.

Plain TCP connections are driven through the socket itself (see :class:`_Connection`);
a request that :meth:`LeanPool.start` sends without waiting runs with no cancel scope:
:meth:`LeanResponse.cancel` aborts it by closing its connection.
"""

from __future__ import annotations

import contextlib
import logging
import math
import select
import socket
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Final

import httptools
import httpx
import trio

from agenthost.errors import TransportClosed, TransportError
from agenthost.redaction import redact_url
from agenthost.transports._httpx import ssl_context, tls_failure

__all__ = [
    "MAX_HEAD",
    "RECEIVE_SIZE",
    "LeanPool",
    "LeanResponse",
    "encode_headers",
]

log = logging.getLogger("agenthost.transports.lean")

#: Bytes of status line and headers accepted before the body (h11's default is 16 KiB;
#: servers put long tokens in cookies and challenges).
MAX_HEAD: Final = 256 * 1024
#: Bytes asked of the socket per read.
RECEIVE_SIZE: Final = 65536
_FORBIDDEN: Final = (b"\r", b"\n", b"\0")
#: A write to a closed connection raises EPIPE, never SIGPIPE (an embedding program may not
#: ignore the signal as Python does).
_SEND_FLAGS: Final = getattr(socket, "MSG_NOSIGNAL", 0)
_HAVE_POLL: Final = hasattr(select, "poll")


class _Spent:
    """The protocol of :data:`_SPENT`: no callbacks."""


#: What a finished response's parser is swapped for. The parser holds the response's bound
#: callbacks: kept, it made every response a reference cycle (response, parser, deque,
#: five methods) that only the garbage collector frees: a gen-0 collection every ~80
#: calls, a full one every ~10,000 (bench: "HTTP JSON calls/s, 1 in flight"). Nothing is
#: ever fed to it: a response without its connection reads nothing (:meth:`_fill`).
_SPENT: Final = httptools.HttpResponseParser(_Spent())


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
        if _HAVE_POLL:  # select() refuses descriptors above 1023
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

    async def send_all(self, data: bytes | memoryview, timeout: float) -> None:
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

    def interrupt(self) -> None:
        """Close a plain TCP connection now, from any task: a read or write waiting on
        it ends with ``ClosedResourceError`` (how an exchange with no cancel scope of its
        own is aborted: :meth:`LeanResponse.cancel`)."""
        sock = self.sock
        if sock is not None and sock.fileno() >= 0:
            trio.lowlevel.notify_closing(sock)
            sock.close()

    async def aclose(self) -> None:
        """Close at once (no TLS close_notify wait): a connection we give up on."""
        if self.sock is None:
            assert self.stream is not None
            await trio.aclose_forcefully(self.stream)
            return
        self.interrupt()
        await trio.lowlevel.checkpoint()


class LeanResponse:
    """A response on the lean path: what the transport reads of an ``httpx.Response``.

    ``headers`` maps lower-cased names to values (repeated fields joined by ``", "``).
    Iterate :meth:`aiter_bytes` once; :meth:`aclose` always, which returns the connection
    to the pool only if the response was read to its end.
    """

    next_request: None = None
    # Class-level starting values: a response sets only what it changes (one request
    # makes one response; bench: "HTTP JSON calls/s, 1 in flight").
    status_code = 0
    reason_phrase = ""
    _reason = b""
    _head_bytes = 0
    _head_done = False
    _complete = False
    _keep_alive = False
    _until_eof = False
    #: Nothing was read since the request went: its answer cannot be there yet.
    _awaiting = True
    #: What of the request is still to be written (:meth:`finish_head` writes it).
    _unsent: bytes | memoryview = b""
    #: :meth:`cancel` was called: the exchange was aborted.
    cancelled = False
    #: An interim (1xx) response's head is being read.
    _interim = False
    #: Bytes came after the final response (junk, or a response nobody asked for): they
    #: are dropped and the connection is not reused.
    _spilled = False
    #: The ``WWW-Authenticate`` values, made when the first comes (most responses have none).
    _challenges: list[str] | None = None

    def __init__(
        self,
        pool: LeanPool,
        conn: _Connection,
        read_timeout: float | None,
        url: str,
        method: str = "POST",
    ) -> None:
        self._pool = pool
        self._method = method
        self._conn: _Connection | None = conn
        self._read_timeout = math.inf if read_timeout is None else read_timeout
        self._url = url
        self.headers: dict[str, str] = {}
        self._chunks: deque[bytes] = deque()
        self._parser = httptools.HttpResponseParser(self)

    @property
    def challenges(self) -> list[str]:
        """Each ``WWW-Authenticate`` value apart (a joined one can split inside a quote)."""
        return list(self._challenges or ())

    # -- httptools callbacks (called from inside feed_data)

    def on_status(self, status: bytes) -> None:
        if self._head_done:  # bytes after the final head: another response, unasked
            self._spilled = True
            return
        self._reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._spilled:
            return
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        if key == "www-authenticate":
            if self._challenges is None:
                self._challenges = []
            self._challenges.append(text)
        old = self.headers.get(key)
        self.headers[key] = text if old is None else f"{old}, {text}"

    def on_headers_complete(self) -> None:
        if self._spilled:
            return
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            # An interim response (103 Early Hints, 100 Continue): not the answer. Its
            # head is dropped and the final one read next, as httpx does.
            self._interim = True
            self.headers = {}
            self._challenges = None
            self._reason = b""
            return
        self._head_done = True
        self.status_code = status
        self.reason_phrase = self._reason.decode("latin-1")
        self._until_eof = (
            "content-length" not in self.headers
            and "transfer-encoding" not in self.headers
            and self.status_code not in (204, 304)
        )

    def on_body(self, body: bytes) -> None:
        if body and not self._spilled:
            self._chunks.append(body)

    def on_message_complete(self) -> None:
        if self._spilled:
            return
        if self._interim:  # the end of an interim response (it has no body)
            self._interim = False
            return
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
        if self.cancelled:  # its socket is closed: no wait may start on it
            raise self._broken("the request was aborted")
        try:
            data = await conn.receive(self._read_timeout, wait_first=self._awaiting)
            if self._awaiting:
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
            if not self._complete:
                raise self._broken(f"malformed HTTP response: {exc}") from None
            self._spilled = True  # junk after a whole answer: the answer stands
        if self._spilled:  # the connection carries bytes nobody asked for: not reused
            self._keep_alive = False
        if not self._head_done and self._head_bytes > MAX_HEAD:
            raise self._broken(f"response headers larger than {MAX_HEAD} bytes")

    def cancel(self) -> None:
        """Abort the exchange from any task: its connection closes, so a wait on it ends
        (a TransportError in the waiting task). For an exchange that runs without a cancel
        scope (:meth:`LeanPool.start`); registered where a scope would be."""
        self.cancelled = True
        if self._conn is not None:
            self._conn.interrupt()

    async def finish_head(self) -> None:
        """Write what is left of the request, then read the status line and headers.

        Raises: TransportError (the response is closed then).
        """
        try:
            if self._unsent:
                unsent, self._unsent = self._unsent, b""
                assert self._conn is not None
                try:
                    await self._conn.send_all(unsent, self._pool.connect_timeout)
                except trio.TooSlowError:
                    raise self._broken("sending the request timed out") from None
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    raise self._broken(f"sending failed: {type(exc).__name__}") from None
            while not self._head_done:
                await self._fill()
            encoding = self.headers.get("content-encoding")
            if encoding is not None and encoding.lower() != "identity":
                raise self._broken(
                    f"the server sent a {encoding!r}-encoded reply though the request asked"
                    " for none (Accept-Encoding: identity)"
                )
        except BaseException:
            await self.aclose()
            raise
        if log.isEnabledFor(logging.DEBUG):  # the line httpx logs, for -vvv
            log.debug(
                'HTTP Request: %s %s "HTTP/1.1 %d %s"',
                self._method,
                redact_url(self._url),
                self.status_code,
                self.reason_phrase,
            )

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

    def whole(self, limit: int) -> bytes | None:
        """The body, when it is all in as one piece within ``limit`` bytes; else None
        (then :meth:`read`). No coroutine for the answer that came with its head, as a
        small JSON reply does (bench: "HTTP JSON calls/s, 1 in flight")."""
        chunks = self._chunks
        if self._complete and len(chunks) == 1 and len(chunks[0]) <= limit:
            return chunks.popleft()
        return None

    def peek(self, limit: int) -> bytes | None:
        """:meth:`whole` without taking the body: a caller that finds it is not what it
        can handle alone leaves it for the general path to read."""
        chunks = self._chunks
        if self._complete and len(chunks) == 1 and len(chunks[0]) <= limit:
            return chunks[0]
        return None

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
        self._parser = _SPENT
        if conn is not None:
            await self._pool.release(conn, reusable=self._reusable)

    @property
    def _reusable(self) -> bool:
        """Read to its end, kept alive, not aborted (an aborted one's socket is closed)."""
        return self._complete and self._keep_alive and not self._chunks and not self.cancelled

    def close_now(self) -> bool:
        """:meth:`aclose` when it needs no I/O (the connection goes back to the pool, or
        was gone): True then; False, and nothing done, when it must close a connection."""
        conn = self._conn
        if conn is None:
            return True
        if not self._reusable or self._pool.closed:
            return False
        self._conn = None
        self._parser = _SPENT
        self._pool.keep(conn)
        return True


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
        self.connect_timeout = connect_timeout
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

    @property
    def closed(self) -> bool:
        """:meth:`aclose` was called: no connection is kept any more."""
        return self._closed

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
        head = self._request_bytes(method, headers, body)
        conn = await self._acquire()
        response = LeanResponse(self, conn, read_timeout, self.url, method)
        response._unsent = head
        await response.finish_head()
        return response

    def start(self, method: str, headers: bytes, body: bytes | None) -> LeanResponse | None:
        """Send one request without waiting, on an idle plain-TCP connection the kernel
        takes it on at once; None (nothing sent) when anything would wait: no free slot
        or idle connection, TLS, a full socket. Then :meth:`LeanResponse.finish_head`.

        Why: a request started this way needs no cancel scope until its answer shows
        anything unusual (:meth:`LeanResponse.cancel`; bench: "HTTP JSON calls/s, 1 in
        flight": the scope cost a sixth of the client's instructions per call).
        """
        idle = self._idle
        if self._closed or not self._free or not idle:
            return None
        conn = idle[-1]
        sock = conn.sock
        if sock is None or time.monotonic() - conn.idle_since > self._idle_seconds:
            return None
        if _stale(conn):
            idle.pop()
            conn.interrupt()  # the slow path would close it too; nothing was sent on it
            return None
        head = self._request_bytes(method, headers, body)
        try:
            sent = sock.send(head, _SEND_FLAGS)
        except BlockingIOError:
            return None
        except OSError:
            idle.pop()
            conn.interrupt()
            return None
        idle.pop()
        self._free -= 1
        response = LeanResponse(self, conn, None, self.url, method)
        if sent < len(head):  # committed: finish_head writes the rest (bounded)
            response._unsent = memoryview(head)[sent:]
        return response

    def _request_bytes(self, method: str, headers: bytes, body: bytes | None) -> bytes:
        head = self._lines[method] + headers
        if body is not None:
            return head + b"Content-Length: %d\r\n\r\n" % len(body) + body
        return head + b"\r\n"

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
                with trio.move_on_after(self.connect_timeout) as waited:
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
            with trio.fail_after(self.connect_timeout):
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
        if reusable and not self._closed:
            self.keep(conn)
            return
        self._release_slot()
        await conn.aclose()

    def keep(self, conn: _Connection) -> None:
        """Free ``conn``'s slot and keep it idle for the next request (the pool is open)."""
        self._release_slot()
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

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
