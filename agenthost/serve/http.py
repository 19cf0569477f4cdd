"""``agenthost serve --http``: Streamable HTTP at ``/mcp``, served by hypercorn on Trio.

The transport side only: an ASGI app that turns HTTP exchanges into messages for
:class:`~agenthost.serve.downstream.DownstreamSession` (which knows MCP), and the
session's messages back into HTTP (``basic/transports/streamable-http``):

* ``POST /mcp`` with requests: the answer is an SSE stream carrying, in order, whatever
  the session sends while they run (progress, our requests to the client: a consent
  form, a forwarded sampling request) and then their responses; the stream ends when the
  last of them is answered. A POST of only notifications or responses gets 202.
* Legacy revisions have sessions: ``initialize`` creates one (``Mcp-Session-Id`` in the
  answer), later POSTs name it (404 for one we do not know: the client starts again),
  ``GET /mcp`` opens its stream for messages tied to no request (``list_changed``),
  ``DELETE /mcp`` ends it. At most :data:`MAX_SESSIONS` at once (a new one ends the
  least recently used), each with a bounded inbox and a bounded backlog for its GET
  stream.
* 2026-07-28 requests have no session: each POST gets a session of its own for the
  exchange, which ends with it. A client that goes away mid-request (the stream
  closes) cancels it, upstream too. Their tasks are reached by id alone
  (:mod:`agenthost.serve.tasks`).
* A POST is all one era: a legacy request beside a 2026-07-28 one, or in a POST served
  without a session (an ``initialize`` with the 2026-07-28 header), gets 400 with -32600.

Security (the same rules the spec gives servers): the ``Host`` header must name the
address we listen on (DNS rebinding), an ``Origin``, when sent, must be one of ours too;
every request needs ``Authorization: Bearer <token>`` (compared in constant time) unless
the app was given no token: the CLI gives one on loopback too (every local user reaches
loopback; ``serve --no-auth`` is the user's explicit choice), and :func:`check_bind`
refuses a non-loopback bind without one, and a token shorter than 32 characters. A request
carrying ``Authorization`` (or ``Host``, ``Origin``, ``Mcp-Session-Id``,
``MCP-Protocol-Version``) more than once gets 400: which copy counts would be ambiguous.
Bodies over :data:`~agenthost.transports.base.DEFAULT_MAX_MESSAGE_SIZE` get 413.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import math
import secrets
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

import trio

from agenthost._util import collapse_single_group
from agenthost.errors import ConfigError, ProtocolError, TransportClosed
from agenthost.protocol import jsonrpc
from agenthost.serve.downstream import DownstreamSession
from agenthost.serve.gateway import Gateway
from agenthost.serve.listeners import cannot_listen
from agenthost.serve.local_token import check_given
from agenthost.serve.modern import modern_stamp
from agenthost.serve.stuck import Connection, end_stuck, shut_down
from agenthost.serve.tasks import STATELESS
from agenthost.transports.base import DEFAULT_MAX_MESSAGE_SIZE, NO_OPTIONS, SendOptions, Transport

__all__ = ["MAX_SESSIONS", "McpHttpApp", "check_bind", "serve_http"]

log = logging.getLogger("agenthost.serve.http")

#: Legacy sessions open at once; a new one ends the least recently used.
MAX_SESSIONS: Final = 64
#: Messages a session holds for its GET stream while none is open (oldest dropped).
_BACKLOG: Final = 256
#: Their encoded size, together (the newest is kept even when larger on its own).
_BACKLOG_BYTES: Final = 8 * 1024 * 1024
#: Messages waiting for the session's reader, per session.
_INBOX: Final = 64
#: Seconds the streams of an ended session have to end before their connections are.
_STREAMS_GRACE: Final = 2.0
_MIXED: Final = (
    "a POST may not mix the eras: 2026-07-28 requests (each naming its protocol version"
    " in _meta, no session) and legacy ones (initialize, then Mcp-Session-Id) go in POSTs"
    " of their own"
)
#: Headers a request may carry once at most (lower case -> as named in the refusal).
_SINGLE: Final = {
    "authorization": "Authorization",
    "host": "Host",
    "origin": "Origin",
    "mcp-session-id": "Mcp-Session-Id",
    "mcp-protocol-version": "MCP-Protocol-Version",
}
_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback bind without a bearer token, and a guessable token.

    Raises:
        ConfigError: naming where the token comes from (and how to make one).
    """
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"serving on {host} (not loopback) needs a bearer token: set"
            " AGENTHOST_SERVE_TOKEN; clients then send Authorization: Bearer <token>",
            key="serve.http",
        )
    if token:
        check_given(token)


class _HttpTransport(Transport):
    """The messages of one downstream session, carried by HTTP exchanges."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._in_send, self._in_receive = trio.open_memory_channel[jsonrpc.Message](_INBOX)
        #: Request id -> the stream of the POST that carried it.
        self._streams: dict[jsonrpc.RequestId, trio.MemorySendChannel[jsonrpc.Message]] = {}
        #: The streams open now, newest last: where messages tied to no response go.
        self._open: list[trio.MemorySendChannel[jsonrpc.Message]] = []
        self.get_stream: trio.MemorySendChannel[jsonrpc.Message] | None = None
        self._backlog: deque[tuple[jsonrpc.Message, int]] = deque()
        self._backlog_bytes = 0
        self._closed = False
        #: Set once the session ended (:meth:`aclose`).
        self.ended = trio.Event()
        self.last_used = trio.current_time()

    async def deliver(self, message: jsonrpc.Message) -> None:
        self.last_used = trio.current_time()
        try:
            await self._in_send.send(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise TransportClosed("session closed", server=self.name) from None

    def expect(
        self, request_id: jsonrpc.RequestId, stream: trio.MemorySendChannel[jsonrpc.Message]
    ) -> None:
        self._streams[request_id] = stream

    def opened(self, stream: trio.MemorySendChannel[jsonrpc.Message]) -> None:
        self._open.append(stream)

    def closed_stream(self, stream: trio.MemorySendChannel[jsonrpc.Message]) -> None:
        if stream in self._open:
            self._open.remove(stream)
        for key in [k for k, s in self._streams.items() if s is stream]:
            del self._streams[key]

    def attach_get(self, stream: trio.MemorySendChannel[jsonrpc.Message]) -> None:
        self.get_stream = stream
        while self._backlog:
            stream.send_nowait(self._backlog.popleft()[0])
        self._backlog_bytes = 0

    def _hold(self, message: jsonrpc.Message) -> None:
        """Keep ``message`` for the GET stream, dropping the oldest beyond the bounds."""
        size = len(jsonrpc.encode(message))
        self._backlog.append((message, size))
        self._backlog_bytes += size
        while len(self._backlog) > 1 and (
            len(self._backlog) > _BACKLOG or self._backlog_bytes > _BACKLOG_BYTES
        ):
            self._backlog_bytes -= self._backlog.popleft()[1]

    async def send(
        self,
        message: jsonrpc.Message,
        *,
        deadline: float = math.inf,
        options: SendOptions = NO_OPTIONS,
    ) -> None:
        if self._closed:
            raise TransportClosed("session closed", server=self.name)
        if isinstance(message, jsonrpc.Response | jsonrpc.ErrorResponse):
            stream = self._streams.pop(message.id, None) if message.id is not None else None
            if stream is not None:
                await _put(stream, message)
            return
        target = self._open[-1] if self._open else self.get_stream
        if target is None or not await _put(target, message):
            self._hold(message)

    async def receive(self) -> jsonrpc.Message:
        try:
            return await self._in_receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise TransportClosed("session ended", server=self.name) from None

    async def aclose(self) -> None:
        self._closed = True
        self.ended.set()
        # The session's streams end with it: no answer can come on them any more.
        for stream in [*self._open, *self._streams.values(), self.get_stream]:
            if stream is not None:
                stream.close()
        await self._in_send.aclose()


async def _put(stream: trio.MemorySendChannel[jsonrpc.Message], message: jsonrpc.Message) -> bool:
    try:
        await stream.send(message)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return False
    return True


class _Session:
    def __init__(self, session: DownstreamSession, transport: _HttpTransport) -> None:
        self.session = session
        self.transport = transport
        self.scope = trio.CancelScope()


#: The connection the current ASGI call came on (None: ASGI did not say).
_CONNECTION: ContextVar[Connection | None] = ContextVar("agenthost_serve_http_connection")


def _connection(scope: Scope) -> Connection | None:
    server, client = scope.get("server"), scope.get("client")
    if not server or not client:
        return None
    return int(server[1]), (str(client[0]), int(client[1]))


class McpHttpApp:
    """The ASGI app (``/mcp``) for one gateway; run it with :func:`serve_http`.

    Args:
        gateway: answers every session.
        nursery: where sessions run (they outlive the exchange that started them).
        allowed_hosts: ``host[:port]`` values the Host and Origin headers may name.
        token: the bearer token every request must carry (None: none needed).
    """

    def __init__(
        self,
        gateway: Gateway,
        nursery: trio.Nursery,
        *,
        allowed_hosts: set[str],
        token: str | None,
    ) -> None:
        self._gateway = gateway
        self._nursery = nursery
        #: Kept by reference: the port is known only once the server listens.
        self._allowed = allowed_hosts
        self._token = token
        self._sessions: dict[str, _Session] = {}
        #: The connections of the HTTP exchanges in progress (see :meth:`stuck`).
        self._calls: Counter[Connection] = Counter()

    def stuck(self) -> Counter[Connection]:
        """The connections of the exchanges still in progress: on shutdown, those that
        stay are held by a write to a client that reads nothing (:mod:`.stuck`)."""
        return +self._calls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = _connection(scope) if scope["type"] == "http" else None
        _CONNECTION.set(connection)
        with _counted(self._calls, connection):
            await self._call(scope, receive, send)

    @contextmanager
    def _released(self, transport: _HttpTransport) -> Iterator[None]:
        """A stream of ``transport``'s session: once the session ended (which closes its
        streams), one still open after :data:`_STREAMS_GRACE` is held in hypercorn's
        write to a client that reads nothing, and its connection is ended."""
        connection = _CONNECTION.get(None)
        watch = trio.CancelScope()

        async def release() -> None:
            with watch:
                await transport.ended.wait()
                await trio.sleep(_STREAMS_GRACE)
                if connection is not None and shut_down({connection}):
                    log.info(
                        "%s: ended the connection of a stream it does not read", transport.name
                    )

        self._nursery.start_soon(release)
        try:
            yield
        finally:
            watch.cancel()

    async def _call(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        pairs = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
        headers = dict(pairs)
        problem = _repeated(pairs) or self._refuse(scope, headers)
        if problem is not None:
            await _plain(send, *problem)
            return
        method = scope["method"]
        if method == "POST":
            await self._post(headers, receive, send)
        elif method == "GET":
            await self._get(headers, receive, send)
        elif method == "DELETE":
            found = self._sessions.pop(headers.get("mcp-session-id", ""), None)
            if found is not None:
                found.scope.cancel()
            await _plain(send, 200 if found else 404, "")
        else:
            await _plain(send, 405, "method not allowed")

    def _refuse(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        if scope["path"].rstrip("/") != "/mcp":
            return 404, "not found: the MCP endpoint is /mcp"
        host = headers.get("host", "").lower()
        if host not in self._allowed:
            return 421, "misdirected request: unexpected Host header"
        origin = headers.get("origin")
        if origin is not None and origin.lower().split("://", 1)[-1] not in self._allowed:
            return 403, "forbidden: unexpected Origin"
        if self._token is not None:
            given = headers.get("authorization", "")
            expected = f"Bearer {self._token}"
            if not hmac.compare_digest(given.encode(), expected.encode()):
                return 401, "unauthorized: a bearer token is required"
        return None

    async def _post(self, headers: dict[str, str], receive: Receive, send: Send) -> None:
        body = await _body(receive)
        if body is None:
            await _plain(send, 413, "request body too large")
            return
        try:
            messages = jsonrpc.decode(body)
        except ProtocolError as exc:
            reply = jsonrpc.ErrorResponse(exc.request_id, jsonrpc.ErrorObject(exc.code, str(exc)))
            await _json(send, 400, jsonrpc.encode(reply))
            return
        requests = [m for m in messages if isinstance(m, jsonrpc.Request)]
        modern = _is_modern(headers, requests)
        if _mixes_eras(modern, requests):
            # A legacy request (an initialize above all) in a sessionless POST would be
            # served at its legacy revision in the POST's own session, and with the
            # sessionless tasks as its own: one POST must be all one era or all the other.
            error = jsonrpc.ErrorObject(jsonrpc.INVALID_REQUEST, _MIXED)
            await _json(send, 400, jsonrpc.encode(jsonrpc.ErrorResponse(None, error)))
            return
        if modern:
            await self._stateless(requests, send)
            return
        sid = headers.get("mcp-session-id")
        is_init = any(r.method == "initialize" for r in requests)
        if sid is None and is_init:
            if len(self._sessions) >= MAX_SESSIONS:
                # Clients often leave without DELETE: the least recently used session
                # makes room (its client, if it comes back, gets 404 and starts again).
                oldest = min(self._sessions, key=lambda k: self._sessions[k].transport.last_used)
                self._sessions.pop(oldest).scope.cancel()
                log.info("session %s... ended to make room (at most %d)", oldest[:6], MAX_SESSIONS)
            sid, entry = await self._new_session()
        else:
            found = self._sessions.get(sid or "")
            if found is None:
                await _plain(send, 404 if sid else 400, "unknown or missing Mcp-Session-Id")
                return
            entry = found
        await self._exchange(entry, messages, requests, send, sid)

    async def _new_session(self) -> tuple[str, _Session]:
        sid = secrets.token_urlsafe(24)
        transport = _HttpTransport(f"http client {sid[:6]}")
        entry = _Session(self._gateway.session(transport, name=transport.name), transport)
        self._sessions[sid] = entry

        async def run() -> None:
            with entry.scope:
                await self._gateway.serve(entry.session)
            self._sessions.pop(sid, None)

        self._nursery.start_soon(run)
        return sid, entry

    async def _exchange(
        self,
        entry: _Session,
        messages: list[jsonrpc.Message],
        requests: list[jsonrpc.Request],
        send: Send,
        sid: str | None,
    ) -> None:
        if not requests:
            for message in messages:
                await entry.transport.deliver(message)
            await _plain(send, 202, "")
            return
        out_send, out_receive = trio.open_memory_channel[jsonrpc.Message](_INBOX)
        with self._released(entry.transport):
            await self._stream(entry, messages, requests, send, sid, out_send, out_receive)

    async def _stream(
        self,
        entry: _Session,
        messages: list[jsonrpc.Message],
        requests: list[jsonrpc.Request],
        send: Send,
        sid: str | None,
        out_send: trio.MemorySendChannel[jsonrpc.Message],
        out_receive: trio.MemoryReceiveChannel[jsonrpc.Message],
    ) -> None:
        waiting = {r.id for r in requests}
        for request in requests:
            entry.transport.expect(request.id, out_send)
        entry.transport.opened(out_send)
        extra = [(b"mcp-session-id", sid.encode())] if sid else []
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS + extra})
        try:
            for message in messages:
                await entry.transport.deliver(message)
            async with out_receive:
                async for message in out_receive:
                    await _event(send, message)
                    if isinstance(message, jsonrpc.Response | jsonrpc.ErrorResponse):
                        waiting.discard(message.id)
                        if not waiting:
                            break
        finally:
            entry.transport.closed_stream(out_send)
            with trio.CancelScope(shield=True):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _stateless(self, requests: list[jsonrpc.Request], send: Send) -> None:
        """A 2026-07-28 POST: a session for this exchange alone (see the module doc)."""
        transport = _HttpTransport("http client (2026-07-28)")
        entry = _Session(self._gateway.session(transport, name=transport.name), transport)
        entry.session.task_owner = STATELESS  # no session: the task id is the only key
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                with entry.scope:
                    await self._gateway.serve(entry.session)

            nursery.start_soon(run)
            try:
                await self._exchange(entry, list(requests), requests, send, None)
            finally:
                entry.scope.cancel()

    async def _get(self, headers: dict[str, str], receive: Receive, send: Send) -> None:
        entry = self._sessions.get(headers.get("mcp-session-id", ""))
        if entry is None:
            await _plain(send, 405, "no session: GET needs an Mcp-Session-Id")
            return
        out_send, out_receive = trio.open_memory_channel[jsonrpc.Message](_BACKLOG)
        entry.transport.attach_get(out_send)
        with self._released(entry.transport):
            await self._get_stream(entry, receive, send, out_send, out_receive)

    async def _get_stream(
        self,
        entry: _Session,
        receive: Receive,
        send: Send,
        out_send: trio.MemorySendChannel[jsonrpc.Message],
        out_receive: trio.MemoryReceiveChannel[jsonrpc.Message],
    ) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        ended = False
        try:
            async with trio.open_nursery() as nursery:

                async def until_gone() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    nursery.cancel_scope.cancel()

                nursery.start_soon(until_gone)
                async with out_receive:
                    async for message in out_receive:
                        await _event(send, message)
                # The session ended (its transport closed this stream): the GET ends too.
                nursery.cancel_scope.cancel()
                ended = True
            if ended:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if entry.transport.get_stream is out_send:
                entry.transport.get_stream = None


def _repeated(pairs: list[tuple[str, str]]) -> tuple[int, str] | None:
    """A header the app decides on, sent more than once: which one counts is ambiguous (a
    proxy in front may check the first, this app read the last), so none does."""
    names = [name for name, _ in pairs if name in _SINGLE]
    for name in _SINGLE:
        if names.count(name) > 1:
            return 400, f"bad request: more than one {_SINGLE[name]} header"
    return None


@contextmanager
def _counted(counter: Counter[Connection], connection: Connection | None) -> Iterator[None]:
    """``connection`` counted in ``counter`` for the duration of the block."""
    if connection is None:
        yield
        return
    counter[connection] += 1
    try:
        yield
    finally:
        counter[connection] -= 1


def _is_modern(headers: dict[str, str], requests: list[jsonrpc.Request]) -> bool:
    version = headers.get("mcp-protocol-version", "")
    if version >= "2026" and "mcp-session-id" not in headers:
        return True
    return any(_stamped(r) for r in requests)


def _stamped(request: jsonrpc.Request) -> bool:
    """Whether ``request`` names its protocol version in ``_meta`` (2026-07-28), by the
    session's own rule (:func:`modern_stamp`: a key with a non-string value does not
    count, or such a request would pass here as modern and be served as legacy)."""
    meta = (request.params or {}).get("_meta")
    return modern_stamp(meta if isinstance(meta, dict) else None) is not None


def _mixes_eras(modern: bool, requests: list[jsonrpc.Request]) -> bool:
    """Whether a POST served the sessionless way (``modern``) carries a request that is
    not a 2026-07-28 one, or one served in a session carries a 2026-07-28 one."""
    stamped = sum(1 for r in requests if _stamped(r))
    return stamped != (len(requests) if modern else 0)


async def _body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await receive()
        chunk = event.get("body", b"")
        size += len(chunk)
        if size > DEFAULT_MAX_MESSAGE_SIZE:
            return None
        chunks.append(chunk)
        if not event.get("more_body"):
            return b"".join(chunks)


async def _event(send: Send, message: jsonrpc.Message) -> None:
    data = b"event: message\ndata: " + jsonrpc.encode(message) + b"\n\n"
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def _plain(send: Send, status: int, text: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8")],
        }
    )
    await send({"type": "http.response.body", "body": text.encode()})


async def _json(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def serve_http(
    gateway: Gateway,
    host: str,
    port: int,
    *,
    token: str | None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``gateway`` at ``http://host:port/mcp`` until cancelled; reports the port.

    Raises:
        ConfigError: a non-loopback ``host`` without ``token``; ``host:port`` taken.
    """
    from hypercorn.config import Config
    from hypercorn.trio import serve

    check_bind(host, token)
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("agenthost.serve.http.hypercorn")
    config.graceful_timeout = 2.0
    async with trio.open_nursery() as sessions:
        allowed: set[str] = set()
        app = McpHttpApp(gateway, sessions, allowed_hosts=allowed, token=token)
        try:
            with collapse_single_group():  # a failure before listening comes as a group
                binds: list[str] = await sessions.start(_hypercorn, serve, app, config)
        except OSError as exc:  # the port is taken (by another user: see cannot_listen)
            raise ConfigError(cannot_listen(host, port, exc), key="serve.http") from None
        bound = int(binds[0].rsplit(":", 1)[1])
        sessions.start_soon(_end_stuck_connections, app, config.graceful_timeout)
        names = {host, "localhost", "127.0.0.1", "[::1]"} if is_loopback(host) else {host}
        allowed.update(f"{name}:{bound}".lower() for name in names)
        log.info("serving MCP at http://%s:%d/mcp", host, bound)
        task_status.started(bound)


async def _hypercorn(
    serve: Any, app: McpHttpApp, config: Any, *, task_status: trio.TaskStatus[list[str]]
) -> None:
    await serve(app, config, task_status=task_status)


async def _end_stuck_connections(app: McpHttpApp, grace: float) -> None:
    """On shutdown, give the connections ``grace`` seconds to end, then end those still
    held by a write to a client that reads nothing (:mod:`agenthost.serve.stuck`)."""
    try:
        await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            await end_stuck(app.stuck, grace=grace)
