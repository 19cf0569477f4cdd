"""What the HTTP transports (Streamable HTTP, legacy SSE) share: delivery into one
channel, failure, background tasks, secrets, the same-origin redirect rule, and the
reading of error bodies.

Why its own module: :mod:`agenthost.transports.http` is the Streamable HTTP wire profile
and :mod:`agenthost.transports.lean` its fast path; the legacy SSE transport needs this
part only.
"""

from __future__ import annotations

import html
import logging
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, Final, Protocol

import httpx
import orjson
import trio

from agenthost.errors import (
    AgentHostError,
    AuthorizationError,
    MessageTooLarge,
    ProtocolError,
    TransportClosed,
    TransportError,
)
from agenthost.protocol import jsonrpc
from agenthost.protocol.jsonrpc import ErrorObject, ErrorResponse, RequestId, Response
from agenthost.protocol.sse import ServerSentEvent, SSEParser
from agenthost.redaction import add_named_secret, add_secrets_of_url, redact, redact_url
from agenthost.transports._httpx import RENEWED, map_httpx_errors, reason_of
from agenthost.transports.base import DEFAULT_MAX_MESSAGE_SIZE, Deliver, Transport, decode_frame
from agenthost.transports.lean import Handoff, LeanResponse

__all__ = [
    "HTTP_ERROR_CODE",
    "MAX_REDIRECTS",
    "Cancellable",
    "HTTPResponse",
    "HTTPTransportBase",
    "auth_hint",
    "redirect_note",
]

log = logging.getLogger("agenthost.transports.http")


class Cancellable(Protocol):
    """What a transport can abort: a cancel scope, or a lean response that runs without
    one (:meth:`~agenthost.transports.lean.LeanResponse.cancel`)."""

    def cancel(self) -> None: ...


class _Tracked:
    """:meth:`HTTPTransportBase._tracked`'s manager: a class, as every HTTP request enters
    one (bench: "HTTP JSON calls/s, 1 in flight")."""

    __slots__ = ("_owner", "_scope")

    def __init__(self, owner: HTTPTransportBase, scope: trio.CancelScope) -> None:
        self._owner = owner
        self._scope = scope

    def __enter__(self) -> trio.CancelScope:
        scope = self._scope
        scope.__enter__()
        owner = self._owner
        owner._scopes.add(scope)
        if owner._closed or owner._failure is not None:
            scope.cancel()
        return scope

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        scope = self._scope
        self._owner._scopes.discard(scope)
        if isinstance(exc, (trio.ClosedResourceError, trio.BrokenResourceError)):
            scope.__exit__(None, None, None)  # delivery into a closed transport: quiet end
            return True
        return scope.__exit__(kind, exc, tb)


class HTTPResponse(Protocol):
    """What the transports read of a response: an ``httpx.Response``, or the lean path's
    :class:`~agenthost.transports.lean.LeanResponse` (header names looked up lower-case)."""

    @property
    def status_code(self) -> int: ...

    @property
    def reason_phrase(self) -> str: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def next_request(self) -> httpx.Request | None: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...


#: JSON-RPC code of the error responses synthesised for requests the server failed at
#: the HTTP level (the -32000 range is "implementation-defined server errors").
HTTP_ERROR_CODE: Final = -32000
#: Redirects one request may follow within its origin (trailing-slash fixes and the like).
MAX_REDIRECTS: Final = 5

_SUMMARY_CHARS: Final = 200
#: How long a response stream may run on after its response before it is dropped.
_DRAIN_SECONDS: Final = 1.0
_JSON: Final = "application/json"
_SSE: Final = "text/event-stream"
_NO_RESPONSE: Final = "the server's JSON reply held no response to this request"


def _no_response(problem: str | None) -> str:
    """Why a JSON reply answered nothing: no response to this request in it, or it is not
    JSON-RPC at all (one bad member of a batch fails the whole frame)."""
    if problem is None:
        return _NO_RESPONSE
    return f"the server's JSON reply is not valid JSON-RPC ({problem}): no response to this request"


#: What an inline exchange delivers without a wait (its caller's answer, or another's).
_ANSWERS: Final = frozenset({Response, ErrorResponse, jsonrpc.InvalidResponse})
_DEFAULT_RETRY: Final = 1.0
_MAX_RETRY: Final = 30.0
#: The shortest wait before a reconnect, whatever ``retry`` the server sends: a server
#: sending ``retry: 1`` and a new event id on every stream had the client re-GET in a busy
#: loop (~500 GETs/s) for as long as the request ran (tests/hostile/test_hostile_inline_http.py).
_MIN_RETRY: Final = 0.1


#: 2026-07-28 error codes (header mismatch, missing client capability, unsupported
#: protocol version): a 4xx carrying one comes from a modern Streamable HTTP server.
_MODERN_CODES: Final = frozenset({-32020, -32021, -32022})


def _jsonrpc_error(body: bytes) -> ErrorObject | None:
    """The JSON-RPC error object of an error response body, if that is what it is."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    error = obj.get("error") if isinstance(obj, dict) else None
    if not isinstance(error, dict):
        return None
    code, message = error.get("code"), error.get("message")
    if type(code) is not int or not isinstance(message, str):
        return None
    return ErrorObject(code, message, error.get("data"))


def _delay(retry_ms: int | None, attempt: int) -> float:
    """Seconds to wait before reconnecting: the server's ``retry``, backing off on failure."""
    base = max(retry_ms / 1000, _MIN_RETRY) if retry_ms is not None else _DEFAULT_RETRY
    return float(min(base * (2 ** max(0, attempt - 1)), max(base, _MAX_RETRY)))


def _within_origin(sent: httpx.Request, follow: httpx.Request) -> bool:
    """Whether httpx's next request for a redirect is one we follow (see the module doc).

    httpx normalises a default port to None and lower-cases hosts, so tuples compare.
    """
    a, b = sent.url, follow.url
    if follow.method != sent.method:  # 301/302/303 turn a POST into a body-less GET
        return False
    if b.userinfo and b.userinfo != a.userinfo:  # httpx would send it as Basic auth
        return False
    if (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port):
        return True
    return (
        a.host == b.host
        and (a.scheme, b.scheme) == ("http", "https")
        and a.port is None
        and b.port is None
    )


def redirect_note(response: HTTPResponse) -> str:
    """Where a redirect we did not follow pointed, safe to log (no query, no userinfo)."""
    follow = response.next_request
    where = redact_url(str(follow.url)) if follow is not None else "(no usable Location)"
    return (
        f"HTTP {response.status_code} redirect to {where} not followed (only redirects"
        " within the server's origin that keep the method are)"
    )


def auth_hint(status: int, *, authorizing: bool = False) -> str:
    """What to do about a 401/403: a bare status code does not say that a token is needed.

    ``authorizing``: the client has an auth flow (OAuth) that already tried; suggesting a
    static header then would send the user the wrong way.
    """
    if status == 401 and authorizing:
        return (
            "; the server refused the token its authorization server issued: log in again,"
            " or ask the server's operator about its authorization setup"
        )
    if status == 401:
        return (
            "; the server requires authentication: give it credentials in the config, e.g."
            ' headers = { Authorization = "Bearer ${TOKEN}" }'
        )
    if status == 403:
        return "; the credentials were refused: check the token and its scopes"
    return ""


def _content_type(response: HTTPResponse) -> str:
    value: str = response.headers.get("content-type", "")
    return value.partition(";")[0].strip().lower()


_HTML = re.compile(rb"\A\s*(<!doctype\s+html|<html[\s>]|<head[\s>])", re.IGNORECASE)
_TITLE = re.compile(rb"<title[^>]*>(.{0,400}?)</title", re.IGNORECASE | re.DOTALL)


def _summary(body: bytes, redact: Callable[[str], str] = redact) -> str:
    """A short, redacted description of an error body (a JSON-RPC error's message if any).

    An HTML page (a web server's or proxy's error page, met when a URL is not an MCP
    endpoint) is named by its title: its markup, styles and scripts say nothing to a
    person reading a one-line error.
    """
    if _HTML.match(body[:1024]):
        found = _TITLE.search(body[:65536])
        raw = found.group(1).decode("utf-8", "replace") if found else ""
        title = " ".join(html.unescape(raw).split())
        return redact(f"an HTML page ({title[:_SUMMARY_CHARS]})" if title else "an HTML page")
    text: str | None = None
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        error = obj.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            text = error["message"]
        elif isinstance(error, str):
            text = error
    if text is None:
        text = body.decode("utf-8", "replace")
    text = " ".join(text.split())
    if len(text) > _SUMMARY_CHARS:
        text = text[:_SUMMARY_CHARS] + "..."
    return redact(text) or "(empty body)"


class HTTPTransportBase(Transport):
    """What the HTTP-based transports share: delivery, failure, background tasks, secrets.

    ``receive()`` is fed by background tasks through one bounded memory channel; when
    the transport fails (or closes) the channel is closed after the messages already in
    it, and ``receive()`` raises the reason.
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
        buffer: int = 256,
    ) -> None:
        self.name = name
        self.url = url
        #: The URL parsed once: httpx parses a string URL on every request (bench, HTTP).
        self._target = httpx.URL(url)
        self._client = client
        self._nursery = nursery
        self._headers = dict(headers or {})
        # Configured header values are secrets wherever text leaves the process (logs,
        # errors); the URL's password and query values too (agenthost.redaction).
        for name, value in self._headers.items():
            add_named_secret(name, value)
        add_secrets_of_url(url)
        self._redact = redact
        self._max = max_message_size
        #: Long-lived streams: no read timeout (the session's request timeouts apply).
        self._stream_timeout = httpx.Timeout(
            connect=connect_timeout, read=None, write=connect_timeout, pool=connect_timeout
        )
        #: POSTs that expect a quick 202 (notifications, responses, legacy messages).
        self._ack_timeout = httpx.Timeout(
            connect=connect_timeout, read=ack_timeout, write=connect_timeout, pool=connect_timeout
        )
        self._in, self._out = trio.open_memory_channel[jsonrpc.Message](buffer)
        self._failure: tuple[type[TransportError], str] | None = None
        self._closed = False
        #: What :meth:`_fail` and closing cancel: tasks' scopes, inline exchanges.
        self._scopes: set[Cancellable] = set()
        #: What ends each request's POST, for ``abort()``: its cancel scope, or the lean
        #: response of a request that runs without one (:meth:`_answered`).
        self._requests: dict[RequestId, Cancellable] = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {redact_url(self.url)}>"

    # -- receiving

    async def receive(self) -> jsonrpc.Message:
        try:
            return await self._out.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise self._error() from None

    def _error(self) -> TransportError:
        if self._failure is not None:
            cls, reason = self._failure
            return cls(reason, server=self.name)
        return TransportClosed("transport is closed", server=self.name)

    def _check_open(self) -> None:
        if self._failure is not None or self._closed:
            raise self._error()

    async def _deliver(self, message: jsonrpc.Message) -> None:
        """Hand one message to ``receive()``; raises ClosedResourceError once closed."""
        await self._in.send(message)

    async def _deliver_frame(
        self, data: str | bytes, watch: RequestId | None = None, into: Deliver | None = None
    ) -> bool:
        """Decode and deliver one frame; True if it held the response to ``watch``.

        ``into``: where its messages go (an inline exchange's caller); else ``receive()``.
        """
        queue: deque[jsonrpc.Message] = deque()
        decode_frame(data, queue, log, self.name)
        return await self._deliver_queue(queue, watch, into)

    def _decode_reply(self, body: bytes) -> tuple[list[jsonrpc.Message], str | None]:
        """A JSON reply's messages, or none and why the reply is not JSON-RPC (logged)."""
        try:
            return jsonrpc.decode(body), None
        except ProtocolError as exc:
            log.warning("%s: skipping malformed JSON reply: %s", self.name, exc)
            return [], str(exc)

    async def _deliver_queue(
        self,
        queue: Sequence[jsonrpc.Message],
        watch: RequestId | None,
        into: Deliver | None,
    ) -> bool:
        """:meth:`_deliver_frame` of a decoded frame."""
        send = self._in.send if into is None else into
        found = False
        for message in queue:
            if (
                watch is not None
                and (
                    type(message) is Response
                    or type(message) is ErrorResponse
                    or type(message) is jsonrpc.InvalidResponse
                )
                and message.id == watch
            ):
                found = True
            await send(message)
        return found

    async def _deliver_error(
        self, request_id: RequestId, message: str, status: int | None, into: Deliver | None = None
    ) -> None:
        """Answer ``request_id`` locally: the server will not (HTTP error, broken stream)."""
        data = {"httpStatus": status} if status is not None else None
        log.warning("%s: request %r failed: %s", self.name, request_id, message)
        reply = ErrorResponse(request_id, ErrorObject(HTTP_ERROR_CODE, message, data))
        await (self._in.send if into is None else into)(reply)

    async def _deliver_failure(
        self, request_id: RequestId, error: AgentHostError, into: Deliver | None = None
    ) -> None:
        """Fail ``request_id`` alone with ``error``, raised to its caller as is."""
        log.info("%s: request %r failed: %s", self.name, request_id, error)  # the caller says it
        failure = jsonrpc.InvalidResponse(request_id, str(error), error)
        await (self._in.send if into is None else into)(failure)

    # -- failure and background tasks

    def _fail(self, cls: type[TransportError], reason: str) -> None:
        """End the transport: ``receive()`` raises ``cls(reason)`` after what is queued."""
        if self._failure is None and not self._closed:
            self._failure = (cls, reason)
            # INFO: ``receive()`` raises it, and whoever holds the session reports it (the
            # supervisor, the CLI's "server X is failed" line): a warning here said it twice.
            log.info("%s: %s", self.name, reason)
        self._in.close()
        for scope in list(self._scopes):
            scope.cancel()

    def _tracked(self, scope: trio.CancelScope | None = None) -> _Tracked:
        """Run a background task's body in a scope the transport can cancel on close
        (``scope``, made before the task started, or a new one).

        The nursery's own scope cannot be used: the user's ``async with`` block runs in it.
        Delivery into a closed transport ends the task quietly.
        """
        return _Tracked(self, scope or trio.CancelScope())

    async def _answered(
        self, request_id: RequestId, response: LeanResponse, into: Deliver, *, sessionless: bool
    ) -> bool | Response:
        """The scope-free rest of an exchange :meth:`LeanRoute.start` began: the answer
        when the reply is it alone (the caller takes it: no delivery), True when the
        reply's messages were delivered, False when its answer is other than a plain JSON
        reply (then :meth:`_post_request` takes the open response on, in a cancel scope).
        ``sessionless``: the transport has no session id yet (a reply that sets one goes
        the long way too).

        Why: a cancel scope per request cost a sixth of the client's instructions per
        call (bench: "HTTP JSON calls/s, 1 in flight"). Without one, :meth:`abort` and a
        failing transport end the exchange by closing its connection
        (:meth:`LeanResponse.cancel`), which ends every wait here: only socket reads, and
        deliveries that cannot block (responses).
        """
        self._requests[request_id] = response
        self._scopes.add(response)
        if self._closed or self._failure is not None:
            response.cancel()
        handed_on = False
        try:
            try:
                await response.finish_head()
                status = response.status_code
                if log.isEnabledFor(logging.DEBUG):
                    log.debug("%s: POST request %r -> HTTP %d", self.name, request_id, status)
                kind = _content_type(response)
                if (
                    status != 200
                    or (kind != _JSON and kind != _SSE)
                    or (sessionless and "mcp-session-id" in response.headers)
                ):
                    handed_on = not response.cancelled
                    return response.cancelled
                if kind == _SSE:
                    answer = self._sse_answer(request_id, response)
                    if answer is None:  # anything else: the stream's general path
                        handed_on = not response.cancelled
                        return response.cancelled
                    return answer
                body = response.whole(self._max)
                if body is None:
                    body = await self._read_limited(response)
            except MessageTooLarge as exc:
                if not response.cancelled:
                    await self._deliver_error(request_id, reason_of(exc), None, into)
                return True
            except TransportError as exc:
                if not response.cancelled:
                    reason = f"HTTP request failed: {reason_of(exc)}"
                    await self._deliver_error(request_id, reason, None, into)
                return True
            queue, problem = self._decode_reply(body)
            if len(queue) == 1 and type(queue[0]) is Response and queue[0].id == request_id:
                return queue[0]  # the answer alone
            if (len(queue) == 1 and type(queue[0]) in _ANSWERS) or all(
                type(message) in _ANSWERS for message in queue
            ):
                found = await self._deliver_queue(queue, request_id, into)  # never waits
            else:  # a notification or server request may wait to be taken: in a scope
                with self._tracked() as scope:
                    self._requests[request_id] = scope
                    if response.cancelled:
                        scope.cancel()
                    found = await self._deliver_queue(queue, request_id, into)
            if not found and not response.cancelled:
                await self._deliver_error(request_id, _no_response(problem), 200, into)
            return True
        finally:
            self._scopes.discard(response)
            if self._requests.get(request_id) is response:
                del self._requests[request_id]
            if not handed_on and not response.close_now():
                await response.aclose()

    def _sse_answer(self, request_id: RequestId, response: LeanResponse) -> Response | None:
        """The answer, when an event stream that is all in (one read: at most 64 KiB) holds
        it and nothing else but priming events; else None, and the stream is left
        unread.

        Why: a server that answers every POST with a one-event stream took the general
        path, a cancel scope and the stream's reader, 835 Python
        lines per call against 458 for a JSON reply (bench: "HTTP SSE calls/s, 1 in
        flight"). Nothing here logs: a stream it does not take is read and reported by
        the general path, once.
        """
        body = response.peek(self._max)
        if body is None:
            return None
        try:
            events = SSEParser(max_size=self._max).feed(body)
        except MessageTooLarge:
            return None
        answer: Response | None = None
        for event in events:
            if event.event != "message":
                return None  # the general path logs what it ignores
            if not event.data:
                continue  # a priming event (id and/or retry only)
            if answer is not None:
                return None  # a second message: the general path delivers them in order
            try:
                queue = jsonrpc.decode(event.data)
            except ProtocolError:
                return None
            if len(queue) != 1 or type(queue[0]) is not Response or queue[0].id != request_id:
                return None
            answer = queue[0]
        if answer is not None:
            response.whole(self._max)  # taken: the connection goes back to the pool
        return answer

    def _via_httpx(
        self,
        handoff: Handoff,
        method: str,
        accept: str,
        extra: Mapping[str, str],
        body: bytes | None,
        timeout: httpx.Timeout,
    ) -> AbstractAsyncContextManager[httpx.Response]:
        headers = {**self._headers_for(accept), **extra}
        if body is not None:
            headers["Content-Type"] = _JSON
        extensions = {RENEWED: True} if handoff is Handoff.RENEWED else None
        return self._stream(
            method,
            self._target,
            content=body,
            headers=headers,
            timeout=timeout,
            extensions=extensions,
        )

    def _headers_for(self, accept: str) -> dict[str, str]:
        headers = dict(self._headers)
        headers["Accept"] = accept
        return headers

    @asynccontextmanager
    async def _stream(
        self, method: str, url: str | httpx.URL, **kwargs: Any
    ) -> AsyncIterator[httpx.Response]:
        """``client.stream(...)``, following redirects only within the origin.

        A redirect we do not follow is yielded as the response (a 3xx), as httpx does
        with ``follow_redirects=False``; the caller reports it with :func:`redirect_note`.
        The client's own ``follow_redirects`` setting is not consulted.
        """
        client = self._client
        request = client.build_request(method, url, **kwargs)
        followed = 0
        while True:
            response = await client.send(request, stream=True, follow_redirects=False)
            follow = response.next_request
            if follow is None or followed == MAX_REDIRECTS or not _within_origin(request, follow):
                break
            # Not drained: a redirect body is the server's to choose, and closing an
            # unread response only costs the connection.
            await response.aclose()
            request = follow
            followed += 1
        try:
            yield response
        finally:
            await response.aclose()

    async def _request(
        self, method: str, url: str | httpx.URL, **kwargs: Any
    ) -> tuple[httpx.Response, bytes]:
        """One exchange with :meth:`_stream`'s redirect rule; the body read up to the limit."""
        async with self._stream(method, url, **kwargs) as response:
            return response, await self._read_limited(response)

    async def _read_limited(self, response: HTTPResponse) -> bytes:
        if type(response) is LeanResponse:  # no async generator per body (issue 26)
            body = await response.read(self._max)
            if body is None:
                raise self._too_large()
            return body
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self._max:
                raise self._too_large()
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self) -> MessageTooLarge:
        return MessageTooLarge(
            f"response body larger than the maximum of {self._max} bytes", server=self.name
        )

    async def _read_quietly(self, response: HTTPResponse) -> bytes:
        """An error response's body, or nothing if it cannot be read (or is too large)."""
        try:
            with self._map_errors():
                return await self._read_limited(response)
        except TransportError:  # httpx's (mapped), or MessageTooLarge
            return b""

    async def _error_summary(self, response: HTTPResponse) -> str:
        return _summary(await self._read_quietly(response), self._redact)

    async def _deliver_jsonrpc_error(
        self, request_id: RequestId, error: ErrorObject, status: int, into: Deliver | None = None
    ) -> None:
        """An HTTP error whose body is a JSON-RPC error: surfaced as is (code, message,
        data), the message scrubbed of secrets, for the request it answers."""
        log.info(
            "%s: request %r refused with HTTP %d: %s",
            self.name,
            request_id,
            status,
            self._redact(error.message[:_SUMMARY_CHARS]),
        )
        reply = ErrorResponse(
            request_id, ErrorObject(error.code, self._redact(error.message), error.data)
        )
        await (self._in.send if into is None else into)(reply)

    async def _drain(
        self, response: trio.abc.AsyncResource, events: AsyncIterator[bytes], parser: SSEParser
    ) -> None:
        """Read a response stream on after its response (delivered through receive()),
        bounded, then close it: the connection is reused if it ended."""
        with self._tracked(), trio.move_on_after(_DRAIN_SECONDS):
            try:
                with self._map_errors():
                    async with response:
                        await self._consume(events, parser, None)
            except TransportError as exc:  # too large, or refused: the request is answered
                log.debug("%s: response stream dropped: %s", self.name, reason_of(exc))

    async def _consume(
        self,
        body: AsyncIterator[bytes],
        parser: SSEParser,
        watch: RequestId | None,
        into: Deliver | None = None,
    ) -> bool:
        """Deliver the messages of a stream's ``body``; True once the response to
        ``watch`` came (the rest of ``body`` can still be read).

        A broken connection just ends the stream (False): the caller decides whether to
        resume. Too large a message propagates.
        """
        try:
            with self._map_errors():
                async for chunk in body:
                    events = parser.feed(chunk)
                    for index, event in enumerate(events):
                        if await self._on_event(event, watch, into):
                            # What came after the answer in the same read is parsed
                            # already: delivered now, or lost (the rest of the stream is
                            # read on from the next read).
                            for later in events[index + 1 :]:
                                await self._on_event(later, None, into)
                            return True
        except (MessageTooLarge, AuthorizationError):
            raise
        except TransportError as exc:
            log.debug("%s: stream broke: %s", self.name, reason_of(exc))
        return False

    async def _on_event(
        self, event: ServerSentEvent, watch: RequestId | None, into: Deliver | None
    ) -> bool:
        if event.event != "message":
            log.debug("%s: ignoring SSE event of type %r", self.name, event.event)
            return False
        if not event.data:
            return False  # a priming event (id and/or retry only)
        return await self._deliver_frame(event.data, watch, into)

    def _map_errors(self, url: str | None = None) -> AbstractContextManager[None]:
        """:func:`map_httpx_errors` for this server: its name, its secrets scrubbed."""
        return map_httpx_errors(url or self.url, server=self.name, scrub=self._redact)

    async def _close_background(self) -> None:
        self._closed = True
        self._in.close()
        for scope in list(self._scopes):
            scope.cancel()
