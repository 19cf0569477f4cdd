"""The Streamable HTTP transport (MCP 2025-03-26 .. 2026-07-28), on httpx.

Wire rules this module follows (see ``basic/transports.mdx`` of each revision):

* Every client message is its own ``POST`` to the MCP endpoint with
  ``Accept: application/json, text/event-stream``. A notification or response is answered
  202 (an error status is raised to the sender). A request is answered with one JSON
  message or an SSE stream that may carry server requests and notifications before the
  response, read by the caller's task (:meth:`StreamableHTTPTransport.exchange`) up to
  its answer, or by a task of its own for a request given to :meth:`send`.
* ``Mcp-Session-Id`` from the first response that carries one (the answer to a legacy
  ``initialize``) goes on every later request; ``MCP-Protocol-Version`` too, from
  2025-06-18 on (the session tells us the revision). A message's
  ``SendOptions.headers`` are added to its POST (2026-07-28: ``Mcp-Method``,
  ``Mcp-Name``, ``Mcp-Param-*``, computed by the session).
* 2026-07-28 has no sessions, no GET stream and no resumption: once told a modern
  revision the transport opens no GET stream; a request sent with ``abort_on_cancel`` is
  cancelled by :meth:`StreamableHTTPTransport.abort`, which closes its POST.
* Once ``initialize`` is answered and the session has told us the negotiated revision, a
  ``GET`` opens the stream of server-initiated messages (405: the server has none),
  re-opened when it ends (2025-11-25 servers may close streams at will and ask to be
  polled) after the server's ``retry`` delay, with ``Last-Event-ID``.
* A response stream that breaks before its response is resumed with ``GET`` +
  ``Last-Event-ID`` when the server gave event ids (2025-03-26 on), after ``retry``, a
  bounded number of times. (2026-07-28 drops resumption: a client re-issues the request
  instead; when that revision lands, this is the place to branch.)
* 404 to a request carrying our session id: the server forgot the session. The transport
  ends with :class:`~agenthost.errors.SessionExpired` so the session above fails and a
  supervisor starts a new one (a fresh ``initialize``, which a transport cannot do).
* An HTTP error to a request whose body is a JSON-RPC error (a 2026-07-28 server's 400
  with -32022 and the versions it supports ...) answers that request as is: code, message
  and data. Any other HTTP error becomes a JSON-RPC error response (code -32000,
  ``data.httpStatus``) for that request id, so no caller waits for an answer that will
  never come. The HTTP status is never used as a JSON-RPC code.
* Closing sends ``DELETE`` with the session id (405 is fine: the server keeps sessions).
* Redirects are followed only within the endpoint's origin (same scheme, host and port,
  or the https upgrade of the same host) and only when they keep the method (307/308),
  at most :data:`MAX_REDIRECTS` times: the official SDK's rule. Our headers (tokens, API
  keys, the session id) were configured for that origin; httpx itself would strip only
  ``Authorization`` on the way elsewhere. Any other redirect is not followed: a request
  gets an error response naming where it was sent, other messages a TransportError.

Secrets: the configured header values (``Authorization`` ...), the URL's password and
query values and the session id are registered with :mod:`agenthost.redaction`: they
never appear in a log line, an exception message or a repr, and server text quoted in
errors is scrubbed of them too.

The transport only looks at message *types* and ids (to know which POSTs have a response
stream, and when a stream has delivered its response); everything else it learns from the
message's :class:`~agenthost.transports.base.SendOptions`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Final

import httpx
import trio

from agenthost._version import __version__
from agenthost.errors import (
    AuthorizationError,
    MessageTooLarge,
    RequestUnauthorized,
    SessionExpired,
    TransportClosed,
    TransportError,
)
from agenthost.protocol import jsonrpc
from agenthost.protocol.jsonrpc import Request, RequestId, Response
from agenthost.protocol.revisions import at_least, is_modern
from agenthost.protocol.sse import SSEParser
from agenthost.redaction import add_runtime_secret, redact_url
from agenthost.transports._httpx import (
    BearerAuth,
    lean_allowed,
    open_http_client,
    reason_of,
)
from agenthost.transports.base import (
    DEFAULT_MAX_MESSAGE_SIZE,
    NO_OPTIONS,
    Deliver,
    SendOptions,
)
from agenthost.transports.http_base import (
    _DRAIN_SECONDS,
    _JSON,
    _MODERN_CODES,
    _SSE,
    HTTP_ERROR_CODE,
    MAX_REDIRECTS,
    HTTPResponse,
    HTTPTransportBase,
    _content_type,
    _delay,
    _jsonrpc_error,
    _no_response,
    _summary,
    auth_hint,
    redirect_note,
)
from agenthost.transports.lean import Exchange, LeanPool, LeanResponse, LeanRoute, Started

__all__ = [
    "HTTP_ERROR_CODE",
    "MAX_REDIRECTS",
    "StreamableHTTPTransport",
    "auth_hint",
    "open_streamable_http_transport",
    "redirect_note",
]

log = logging.getLogger("agenthost.transports.http")

_ACCEPT_BOTH: Final = "application/json, text/event-stream"
_PROBE_STATUSES: Final = frozenset({400, 404, 405})
#: How long a request waits, once, for the GET stream's answer (see :meth:`_await_listener`).
_LISTEN_WAIT: Final = 3.0
_USER_AGENT: Final = f"agenthost/{__version__}"


class StreamableHTTPTransport(HTTPTransportBase):
    """One Streamable HTTP connection. Open it with :func:`open_streamable_http_transport`.

    Attributes:
        session_id: the ``Mcp-Session-Id`` the server assigned (None until initialize, or
            for servers without sessions). Treat it as a secret: it is never logged.
        protocol_version: the revision the session negotiated, as told by the session.
    """

    #: What this transport speaks (an ``http`` server's status names the one chosen).
    kind: Final = "streamable-http"

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
        resume_attempts: int = 5,
        open_get_stream: bool = True,
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
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._resume_attempts = resume_attempts
        self._open_get = open_get_stream
        self._get_started = False
        self._listening = trio.Event()  # the GET stream answered, or given up on
        self._initialized = False
        self._deleted = False
        #: The lean path (issue 26), when this client and URL allow it.
        self._lean: LeanRoute | None = None
        if lean_allowed(client, url):
            auth: object = client.auth  # lean_allowed(): None, or a BearerAuth
            self._lean = LeanRoute(
                LeanPool(url, server=name, connect_timeout=connect_timeout),
                auth if isinstance(auth, BearerAuth) else None,
                self._headers_for,
                _USER_AGENT,
            )

    #: Requests are POSTed from the caller's task (:meth:`exchange`).
    inline_exchanges = True

    @property
    def exchanges_per_request(self) -> bool:
        return True

    def set_protocol_version(self, version: str) -> None:
        """Told by the session after ``initialize``; opens the GET stream from then on.

        The GET waits for this rather than for the initialize response alone, so that
        it, too, carries ``MCP-Protocol-Version``.
        """
        self.protocol_version = version
        self._start_get_stream()

    def _start_get_stream(self) -> None:
        if (
            self._open_get
            and self._initialized
            and self.protocol_version is not None
            and not is_modern(self.protocol_version)
            and not self._get_started
            and not self._closed
            and self._failure is None
        ):
            self._get_started = True
            self._nursery.start_soon(self._run_get_stream)

    def _headers_for(self, accept: str) -> dict[str, str]:
        headers = super()._headers_for(accept)
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        version = self.protocol_version
        if version is not None and at_least(version, "2025-06-18"):
            headers["MCP-Protocol-Version"] = version
        return headers

    @property
    def connections_opened(self) -> int | None:
        """Connections the lean path opened so far; None when it is not used (httpx is)."""
        return self._lean.pool.opened if self._lean is not None else None

    def _exchange(
        self,
        method: str,
        accept: str,
        extra: Mapping[str, str],
        body: bytes | None,
        timeout: httpx.Timeout,
        started: Started | None = None,
    ) -> Exchange:
        """One POST (``body``) or GET: on the lean path when it can take it, else through
        httpx (:meth:`_stream`'s redirect rule). Headers: ours, ``extra``, Content-Type."""
        state = (self.session_id, self.protocol_version)
        return Exchange(
            self._lean, self._via_httpx, method, accept, extra, body, timeout, state, started
        )

    def _has_sessions(self) -> bool:
        # 2026-07-28 has none: a modern client never keeps (or echoes) a session id.
        version = self.protocol_version
        return version is None or not is_modern(version)

    def _resumable(self) -> bool:
        # Resumption exists from 2025-03-26 (the first Streamable HTTP revision); before
        # the revision is known (during initialize) a server that sends ids allows it.
        version = self.protocol_version
        return version is None or at_least(version, "2025-03-26")

    # -- sending

    async def send(
        self,
        message: jsonrpc.Message,
        *,
        deadline: float = math.inf,
        options: SendOptions = NO_OPTIONS,
    ) -> None:
        """POST one message, with the extra headers ``options`` carry.

        A request returns as soon as its POST is scheduled (so ``deadline`` never bites);
        its answer (or a synthesised error response) arrives through :meth:`receive`. A
        notification or response returns once the server accepted it.

        Raises:
            SessionExpired: the server answered 404 to our session id.
            TransportError: the server rejected a notification/response, or is unreachable.
        """
        self._check_open()
        body = jsonrpc.encode(message)
        if type(message) is Request:
            self._nursery.start_soon(self._post_request, message.id, body, options, False)
            return
        with trio.fail_at(deadline):
            await self._post_message(body, options)

    async def exchange(
        self, request: Request, deliver: Deliver, *, options: SendOptions = NO_OPTIONS
    ) -> Response | None:
        """POST ``request`` from the caller's task; what the response carries goes to
        ``deliver`` up to the response (issue 26: no task or channel between socket and
        caller); what follows it, and a resumed stream, come through :meth:`receive`.
        A plain JSON reply holding the answer alone is returned instead.

        Cancellation: the POST is closed, as by :meth:`abort`. Raises: TransportError
        (the transport is closed or failed, before the POST).
        """
        self._check_open()
        body = jsonrpc.encode(request)
        lean = self._lean
        started = None
        if lean is not None and self._initialized and not self._listener_pending():
            state = (self.session_id, self.protocol_version)
            started = lean.start("POST", _ACCEPT_BOTH, options.headers, body, state)
        if started is not None:
            answered = await self._answered(
                request.id, started[0], deliver, sessionless=self.session_id is None
            )
            if answered is not False:
                return None if answered is True else answered
        await self._post_request(request.id, body, options, False, deliver, started)
        return None

    def abort(self, request_id: RequestId) -> None:
        """Drop the POST of ``request_id``, which the session gave up on.

        On 2026-07-28 closing the stream is the cancellation. On every revision it
        releases the pooled connection the response stream holds until the server
        answers, which a server may never do: without it, about 100 timed-out requests
        (httpx's pool) left every later request waiting for a connection (issue 14).
        """
        scope = self._requests.get(request_id)
        if scope is not None:
            scope.cancel()

    async def probe(self, request: Request, options: SendOptions = NO_OPTIONS) -> int | None:
        """POST ``request`` as the backwards-compatibility probe.

        Returns:
            None when the server took it (its answer arrives through :meth:`receive`), or
            the HTTP status (400, 404, 405) with which it refused: not a Streamable HTTP
            server, try the legacy transport.

        Raises:
            TransportClosed: the server cannot be reached at all.
        """
        self._check_open()
        body = jsonrpc.encode(request)
        try:
            status: int | None = await self._nursery.start(
                self._post_request, request.id, body, options, True
            )
        except RuntimeError:  # the task ended without reporting: we are closing
            raise self._error() from None
        return status

    async def _post_message(self, body: bytes, options: SendOptions) -> None:
        had_session = self.session_id is not None
        try:
            with self._map_errors():
                async with self._exchange(
                    "POST", _ACCEPT_BOTH, options.headers, body, self._ack_timeout
                ) as response:
                    content = await self._read_limited(response)
        except (MessageTooLarge, RequestUnauthorized):
            raise
        except AuthorizationError as exc:  # no token at all: the transport ends with it
            self._fail(AuthorizationError, reason_of(exc))
            raise self._error() from None
        except TransportClosed as exc:  # unreachable, or no pooled connection came free
            self._fail(TransportClosed, reason_of(exc))
            raise self._error() from None
        except TransportError as exc:
            raise TransportError(
                f"POST to {redact_url(self.url)} failed: {reason_of(exc)}", server=self.name
            ) from None
        status = response.status_code
        log.debug("%s: POST message -> HTTP %d", self.name, status)
        if status == 404 and had_session:
            self._fail(SessionExpired, "the server no longer knows this session (HTTP 404)")
            raise self._error()
        if 300 <= status < 400:
            raise TransportError(redirect_note(response), server=self.name)
        if status >= 400:
            summary = _summary(content, self._redact)
            raise TransportError(
                f"the server rejected a message with HTTP {status}: {summary}"
                f"{auth_hint(status, authorizing=self._client.auth is not None)}",
                server=self.name,
            )

    async def _post_request(
        self,
        request_id: RequestId,
        body: bytes,
        options: SendOptions,
        probe: bool,
        into: Deliver | None = None,
        begun: Started | None = None,
        *,
        task_status: trio.TaskStatus[int | None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """POST one request and deliver everything its response carries (``into``: in
        the caller's task, see :meth:`exchange`; None: through :meth:`receive`).
        ``begun``: the POST went already (:meth:`_answered` hands it on).

        Cancellation: :meth:`abort` cancels this POST (the request's stream closes,
        which a 2026-07-28 server takes as the cancellation); nothing is delivered.
        """
        had_session = self.session_id is not None
        started = False
        status = 0  # no response (yet): a failure before one must not read it unset
        with self._tracked() as scope:
            self._requests[request_id] = scope
            if begun is not None and begun[0].cancelled:
                scope.cancel()  # aborted while its head was read
            try:
                if not probe:
                    await self._await_listener()
                with self._map_errors():
                    exchange = self._exchange(  # a drain may take it over
                        "POST", _ACCEPT_BOTH, options.headers, body, self._stream_timeout, begun
                    )
                    async with exchange as response:
                        status = response.status_code
                        if log.isEnabledFor(logging.DEBUG):
                            log.debug(
                                "%s: POST request %r -> HTTP %d", self.name, request_id, status
                            )
                        if probe and status in _PROBE_STATUSES:
                            body = await self._read_quietly(response)
                            error = _jsonrpc_error(body)
                            if error is None or error.code not in _MODERN_CODES:
                                task_status.started(status)
                                return
                            # A modern server's error (basic/transports, "Backward
                            # Compatibility"): this is Streamable HTTP; answer with it.
                            task_status.started(None)
                            started = True
                            await self._deliver_jsonrpc_error(request_id, error, status, into)
                            return
                        task_status.started(None)
                        started = True
                        if (
                            self.session_id is None
                            and self._has_sessions()
                            and not self._take_session_id(response)
                        ):
                            return
                        await self._handle_response(
                            response, request_id, had_session, into, exchange
                        )
            except MessageTooLarge as exc:
                await self._deliver_error(request_id, reason_of(exc), None, into)
            except RequestUnauthorized as exc:
                # Only this request was refused: its caller gets it, the session goes on.
                if not started:
                    if probe:
                        raise
                    task_status.started(None)
                    started = True
                await self._deliver_failure(request_id, exc, into)
            except AuthorizationError as exc:
                # From the client's OAuth flow (auth hook): the server is unusable until
                # someone logs in, so the transport ends with the reason.
                if not started and probe:
                    raise
                self._fail(AuthorizationError, reason_of(exc))
                return
            except TransportClosed as exc:  # unreachable, or no pooled connection came free
                if not started and probe:
                    raise
                self._fail(TransportClosed, reason_of(exc))
                return
            except TransportError as exc:
                if not started:
                    task_status.started(None)
                    started = True
                await self._deliver_error(
                    request_id, f"HTTP request failed: {reason_of(exc)}", None, into
                )
            finally:
                if self._requests.get(request_id) is scope:  # (a resumption may own it now)
                    del self._requests[request_id]
        if started and not self._initialized and 200 <= status < 300:
            self._initialized = True
            self._start_get_stream()

    def _take_session_id(self, response: HTTPResponse) -> bool:
        """Keep the ``Mcp-Session-Id`` of the response; False (transport failed) if invalid.

        The spec allows only visible ASCII (0x21-0x7E): anything else could not even be
        sent back in a header (httpx raised UnicodeEncodeError from the next request,
        which surfaced as an ExceptionGroup). The value is never quoted: it is a secret.
        """
        session_id = response.headers.get("mcp-session-id")
        if not session_id:
            return True
        if not all(0x21 <= ord(c) <= 0x7E for c in session_id):
            self._fail(
                TransportClosed,
                "protocol error: the server's Mcp-Session-Id header holds characters other"
                " than visible ASCII (0x21-0x7E), which the spec requires",
            )
            return False
        add_runtime_secret(session_id)  # a bearer of the session: never in a log line
        self.session_id = session_id
        return True

    async def _handle_response(
        self,
        response: HTTPResponse,
        request_id: RequestId,
        had_session: bool,
        into: Deliver | None,
        exchange: Exchange,
    ) -> None:
        """Deliver what ``response`` carries; ``exchange`` holds it open (see _post_request)."""
        status = response.status_code
        if status == 404 and had_session:
            self._fail(SessionExpired, "the server no longer knows this session (HTTP 404)")
            return
        if 300 <= status < 400:
            await self._deliver_error(request_id, redirect_note(response), status, into)
            return
        if status >= 400 or status < 200:
            body = await self._read_quietly(response)
            error = _jsonrpc_error(body)
            if error is not None:
                await self._deliver_jsonrpc_error(request_id, error, status, into)
                return
            summary = _summary(body, self._redact)
            await self._deliver_error(
                request_id,
                f"HTTP {status} {response.reason_phrase} from the server: {summary}"
                f"{auth_hint(status, authorizing=self._client.auth is not None)}",
                status,
                into,
            )
            return
        if status in (202, 204):
            return  # accepted; the answer will come on the GET stream
        kind = _content_type(response)
        if kind == _SSE:
            parser = SSEParser(max_size=self._max)
            events = response.aiter_bytes()  # one iterator: httpx's cannot be restarted
            if not await self._consume(events, parser, request_id, into):
                if into is None:
                    await self._resume(request_id, parser)
                else:  # in a task that abort() cancels; its answer comes through receive()
                    scope = self._requests[request_id] = trio.CancelScope()
                    self._nursery.start_soon(self._resume, request_id, parser, scope)
                return
            # The server ends the stream after the response: read to that end, so the
            # connection goes back to the pool (issue 26: it was one connect per call).
            # The caller that exchanges inline does not wait for that end to come.
            if isinstance(response, LeanResponse) and response.at_end:
                pass  # the end is in (the usual case): nothing to read, nothing to bound
            elif into is None:
                with trio.move_on_after(_DRAIN_SECONDS):
                    await self._consume(events, parser, None)
            else:
                self._nursery.start_soon(self._drain, exchange.detach(), events, parser)
        elif kind == _JSON:
            queue, problem = self._decode_reply(await self._read_limited(response))
            if not await self._deliver_queue(queue, request_id, into):
                await self._deliver_error(request_id, _no_response(problem), status, into)
        else:
            await self._deliver_error(
                request_id, f"unexpected Content-Type {kind or '(none)'!r} in reply", status, into
            )

    async def _resume(
        self, request_id: RequestId, parser: SSEParser, scope: trio.CancelScope | None = None
    ) -> None:
        """Re-attach to a broken response stream with ``Last-Event-ID``, or give up; as a
        task of its own in ``scope`` (registered for :meth:`abort`) after :meth:`exchange`.
        """
        if scope is None:
            return await self._resume_attempts_for(request_id, parser)
        with self._tracked(scope):
            try:
                await self._resume_attempts_for(request_id, parser)
            except MessageTooLarge as exc:
                await self._deliver_error(request_id, reason_of(exc), None)
            finally:
                if self._requests.get(request_id) is scope:
                    del self._requests[request_id]

    async def _resume_attempts_for(self, request_id: RequestId, parser: SSEParser) -> None:
        if not parser.last_event_id or not self._resumable():
            await self._deliver_error(
                request_id,
                "the server closed the response stream before answering (no event id to"
                " resume from)",
                None,
            )
            return
        attempts = 0
        while attempts < self._resume_attempts:
            attempts += 1
            await trio.sleep(_delay(parser.retry, attempts))
            before = parser.last_event_id
            try:
                with self._map_errors():
                    async with self._exchange(
                        "GET", _SSE, {"Last-Event-ID": before}, None, self._stream_timeout
                    ) as response:
                        status = response.status_code
                        log.debug("%s: resume GET for %r -> HTTP %d", self.name, request_id, status)
                        if status == 404 and self.session_id is not None:
                            self._fail(
                                SessionExpired, "the server no longer knows this session (HTTP 404)"
                            )
                            return
                        if status == 405:
                            break  # the server does not offer resumption
                        if status != 200 or _content_type(response) != _SSE:
                            continue
                        if await self._consume(response.aiter_bytes(), parser, request_id):
                            return
            except MessageTooLarge:
                raise
            except RequestUnauthorized as exc:
                await self._deliver_failure(request_id, exc)  # this request alone
                return
            except AuthorizationError as exc:
                self._fail(AuthorizationError, reason_of(exc))
                return
            except TransportError as exc:
                log.debug("%s: resume failed: %s", self.name, reason_of(exc))
                continue
            if parser.last_event_id != before:
                attempts = 0  # progress: the server is there, it just keeps polling us
        await self._deliver_error(
            request_id,
            f"the response stream broke and could not be resumed ({attempts} attempts)",
            None,
        )

    def _listener_pending(self) -> bool:
        return self._get_started and not self._listening.is_set()

    async def _await_listener(self) -> None:
        """Wait (once, bounded) for the GET stream's answer before a request goes out.

        A server may send its own request (an elicitation, sampling) on the GET stream
        rather than on the stream of the request that caused it, and the official SDKs'
        servers drop it when no GET stream is open yet: a ``tools/call`` that overtakes
        the GET loses the server's question and waits out its timeout (seen in the
        conformance suite under CPU load). A server that holds its GET answer back is
        waited for :data:`_LISTEN_WAIT` seconds, once per session.
        """
        if self._listener_pending():
            with trio.move_on_after(_LISTEN_WAIT):
                await self._listening.wait()
            self._listening.set()

    async def _run_get_stream(self) -> None:
        """The stream of server-initiated messages, re-opened whenever it ends."""
        try:
            await self._get_stream_until_done()
        finally:
            self._listening.set()  # gave up or closing: no request waits for it

    async def _get_stream_until_done(self) -> None:
        parser = SSEParser(max_size=self._max)
        failures = 0
        with self._tracked():
            while True:
                last = parser.last_event_id
                extra = {"Last-Event-ID": last} if last else {}
                try:
                    with self._map_errors():
                        async with self._exchange(
                            "GET", _SSE, extra, None, self._stream_timeout
                        ) as response:
                            status = response.status_code
                            self._listening.set()
                            log.debug("%s: GET stream -> HTTP %d", self.name, status)
                            if status == 405:
                                return  # no server-initiated stream at this endpoint
                            if status == 404 and self.session_id is not None:
                                self._fail(
                                    SessionExpired,
                                    "the server no longer knows this session (HTTP 404)",
                                )
                                return
                            if status == 200 and _content_type(response) == _SSE:
                                failures = 0
                                await self._consume(response.aiter_bytes(), parser, None)
                            else:
                                failures += 1
                                log.info(
                                    "%s: GET stream refused with HTTP %d: %s",
                                    self.name,
                                    status,
                                    await self._error_summary(response),
                                )
                except MessageTooLarge as exc:
                    self._fail(MessageTooLarge, str(exc))
                    return
                except RequestUnauthorized as exc:
                    # The stream alone needs more than we may have (a step-up that cannot
                    # help): requests go on without it, as with a server that has none.
                    log.warning(
                        "%s: going on without the stream of server-initiated messages: %s",
                        self.name,
                        reason_of(exc),
                    )
                    return
                except AuthorizationError as exc:
                    # No token at all (the login is dead): nothing more will work.
                    self._fail(AuthorizationError, reason_of(exc))
                    return
                except TransportError as exc:
                    failures += 1
                    log.debug("%s: GET stream failed: %s", self.name, reason_of(exc))
                if failures > self._resume_attempts:
                    log.warning(
                        "%s: giving up on the server-initiated message stream after %d failures",
                        self.name,
                        failures,
                    )
                    return
                await trio.sleep(_delay(parser.retry, failures))

    # -- closing

    async def aclose(self) -> None:
        await self.shutdown(5.0)

    async def shutdown(self, timeout: float) -> None:
        """End the session on the server (``DELETE``) and stop every background task.

        Cancellation: shielded; the DELETE is bounded by ``timeout``. Idempotent.
        """
        with trio.CancelScope(shield=True):
            session_id = self.session_id
            if session_id is not None and not self._deleted and self._failure is None:
                self._deleted = True
                with trio.move_on_after(timeout):
                    try:
                        with self._map_errors():
                            response, _ = await self._request(
                                "DELETE",
                                self._target,
                                headers=self._headers_for(_ACCEPT_BOTH),
                                timeout=self._ack_timeout,
                            )
                        log.debug("%s: DELETE session -> HTTP %d", self.name, response.status_code)
                    except TransportError as exc:  # httpx's (mapped), or MessageTooLarge
                        log.debug("%s: DELETE failed: %s", self.name, reason_of(exc))
            await self._close_background()
            if self._lean is not None:
                await self._lean.pool.aclose()


@asynccontextmanager
async def open_streamable_http_transport(
    url: str,
    *,
    name: str,
    headers: Mapping[str, str] | None = None,
    client: httpx.AsyncClient | None = None,
    connect_timeout: float = 10.0,
    ack_timeout: float = 30.0,
    shutdown_timeout: float = 5.0,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    resume_attempts: int = 5,
    open_get_stream: bool = True,
) -> AsyncIterator[StreamableHTTPTransport]:
    """Yield a transport speaking Streamable HTTP to the MCP endpoint ``url``.

    Nothing is sent until the first message (``initialize``); connection errors surface
    then, as the transport ending with :class:`~agenthost.errors.TransportClosed`.

    Args:
        url: the MCP endpoint, e.g. ``https://example.com/mcp``.
        name: the server's name, for logs and errors.
        headers: extra headers on every request (``Authorization`` ...); values are
            treated as secrets.
        client: an ``httpx.AsyncClient`` to use (never closed here); default: our own.
        connect_timeout: seconds to connect (and to write a request).
        ack_timeout: seconds to wait for the server to accept a notification/response.
        shutdown_timeout: seconds for the closing ``DELETE``.
        max_message_size: the largest message accepted, in bytes.
        resume_attempts: reconnections tried for a broken stream before giving up.
        open_get_stream: open the stream for server-initiated messages after initialize.

    Resource handling: on exit the session is deleted on the server, every stream is
    closed and our client is closed, shielded from cancellation and bounded.
    """
    async with open_http_client(
        client, connect_timeout=connect_timeout, shutdown_timeout=shutdown_timeout
    ) as (http, nursery):
        transport = StreamableHTTPTransport(
            url,
            name=name,
            client=http,
            nursery=nursery,
            headers=headers,
            connect_timeout=connect_timeout,
            ack_timeout=ack_timeout,
            max_message_size=max_message_size,
            resume_attempts=resume_attempts,
            open_get_stream=open_get_stream,
        )
        try:
            yield transport
        finally:
            await transport.shutdown(shutdown_timeout)
