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

import enum
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Final

import httpx
import trio

from agenthost.transports._httpx import BearerAuth
from agenthost.transports.lean_wire import (
    MAX_HEAD,
    RECEIVE_SIZE,
    LeanPool,
    LeanResponse,
    encode_headers,
)

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
    "Started",
    "encode_headers",
]

log = logging.getLogger("agenthost.transports.lean")

#: Times one request goes again after a 401/403 the auth acted on (the auth bounds its
#: own step-ups and fresh tokens; this only keeps a confused one from looping).
MAX_AUTH_RETRIES: Final = 5
#: Bytes of a 401/403 body kept in memory while the auth logs in (it is only quoted).
_REFUSAL_BUFFER: Final = 65536


#: A request :meth:`LeanRoute.start` sent: its response (head not read yet) and the
#: token it carried.
Started = tuple["LeanResponse", "str | None"]


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
        started: Started | None = None,
    ) -> LeanResponse | Handoff:
        """The lean path's response, or the :class:`Handoff` to httpx of this request
        (``started``: the request went already, by :meth:`start`; its head is read here).

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
        if not self.enabled and started is None:
            return Handoff.HTTPX
        auth = self._auth
        renewed = False
        for _ in range(MAX_AUTH_RETRIES + 1):
            if started is not None:
                response, token = started
                started = None
                await response.finish_head()
            else:
                token = None if auth is None else await auth.bearer()  # None: not logged in
                if token == "":  # DPoP (RFC 9449): a proof per request, which httpx's auth makes
                    return _handoff(renewed)
                lines = self._lines(accept, token, body, extra, state)
                if lines is None:
                    return _handoff(renewed)
                response = await self.pool.request(method, lines, body, read_timeout=read_timeout)
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

    def start(
        self,
        method: str,
        accept: str,
        extra: Mapping[str, str],
        body: bytes | None,
        state: tuple[Any, ...],
    ) -> Started | None:
        """Send a request without waiting (:meth:`LeanPool.start`), when nothing has to
        wait: the token is at hand, the headers encode, a connection is idle. None when
        it was not sent: :meth:`send` then does it all."""
        if not self.enabled:
            return None
        token = None
        if self._auth is not None:
            ready, token = self._auth.bearer_now()
            if not ready or token == "":
                return None
        lines = self._lines(accept, token, body, extra, state)
        if lines is None:
            return None
        response = self.pool.start(method, lines, body)
        return None if response is None else (response, token)

    def _lines(
        self,
        accept: str,
        token: str | None,
        body: bytes | None,
        extra: Mapping[str, str],
        state: tuple[Any, ...],
    ) -> bytes | None:
        """Every header line of a request, or None when one cannot go as is (httpx)."""
        head = self._head(accept, token, body is not None, tuple(extra), state)
        lines = encode_headers(extra) if extra else b""
        return None if head is None or lines is None else head + lines

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
            if not any(name.lower() == "accept-encoding" for name in headers):
                # No content coding: the lean path reads bodies as they come (httpx decodes).
                headers["Accept-Encoding"] = "identity"
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

    __slots__ = ("_args", "_fallback", "_httpx", "_response", "_route", "_started", "_state")

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
        started: Started | None = None,
    ) -> None:
        self._route = route
        self._fallback = fallback
        self._args = (method, accept, extra, body, timeout)
        self._state = state
        self._started = started
        self._response: LeanResponse | None = None
        self._httpx: AbstractAsyncContextManager[Any] | None = None

    async def __aenter__(self) -> Any:
        method, accept, extra, body, timeout = self._args
        route = self._route
        handoff = Handoff.HTTPX
        if route is not None:
            started, self._started = self._started, None
            response = await route.send(
                method,
                accept,
                extra,
                body,
                state=self._state,
                read_timeout=timeout.read,
                started=started,
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
