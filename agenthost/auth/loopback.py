"""The loopback redirect of a native app's login (RFC 8252 7.3), and who opens the URL.

A tiny HTTP server on ``127.0.0.1`` (a random port unless configured) waits for the
browser to come back to ``/callback`` with the authorization response, parsed with h11
(bounded: one request line and headers, no body). It answers with a page telling the
user to go back to the terminal; the response's query parameters go to the flow, which
checks ``state`` and ``iss``. Nothing here logs the query (it holds the code).

Only a callback carrying the login's ``state`` is taken: any program on this machine, and
any web page the user has open, can reach the port, and a guessed callback must not end
the login it is not part of (it is answered, counted and ignored; the flow still checks
the one taken). Nor may idle connections pile up or crowd the browser out: at most
:data:`MAX_CONNECTIONS` are open at once, and one more closes the oldest that has not
sent its request yet (the browser sends its own at once, so it is never the oldest idle
one for long); with none idle, the new one is closed at once.

Who opens the authorization URL is a :data:`UrlOpener`: the terminal one prints the URL
(so it works over SSH) and tries the system browser; tests pass a stand-in browser.
The current opener is a context variable (:data:`URL_OPENER`): unset means headless,
where a flow that needs a person fails with a message saying how to log in.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Final
from urllib.parse import parse_qsl, urlsplit

import h11
import trio

__all__ = [
    "MAX_CONNECTIONS",
    "URL_OPENER",
    "Loopback",
    "UrlOpener",
    "open_loopback",
    "terminal_opener",
]

log = logging.getLogger("agenthost.auth")

#: ``async (server_name, url) -> None``: show the authorization URL to a person.
UrlOpener = Callable[[str, str], Awaitable[None]]

#: The opener for interactive logins in this context; None means headless.
URL_OPENER: contextvars.ContextVar[UrlOpener | None] = contextvars.ContextVar(
    "agenthost_url_opener", default=None
)

_MAX_REQUEST: Final = 16 * 1024
#: Connections open at once (a browser needs one or two, its preconnects included).
MAX_CONNECTIONS: Final = 16
_NOT_OURS: Final = (
    b"This answer is not for the login under way (its state does not match): ignored."
)
_PAGE: Final = (
    b"<!doctype html><meta charset=utf-8><title>agenthost</title>"
    b"<p>%s</p><p>You can close this window and return to the terminal.</p>"
)


def terminal_opener(*, open_browser: bool = True) -> UrlOpener:
    """An opener for a terminal: print the URL on stderr, try the browser too."""

    async def opener(server: str, url: str) -> None:
        from agenthost_policies.text import printable

        # The URL carries what the server chose (endpoint, scopes): escaped like all
        # server text on a terminal (an escape sequence would reach the terminal as is).
        shown = printable(url, one_line=True)
        redirect = dict(parse_qsl(urlsplit(url).query)).get("redirect_uri", "")
        where = urlsplit(redirect).netloc if redirect.startswith("http://127.0.0.1:") else ""
        waiting = f"\nwaiting for the browser on {where} (Ctrl-C to cancel)" if where else ""
        print(
            f"agenthost: to authorize {printable(server, one_line=True)}, open this URL in"
            f" a browser:\n  {shown}{printable(waiting)}",
            file=sys.stderr,
            flush=True,
        )
        if open_browser:
            with suppress(webbrowser.Error):
                await trio.to_thread.run_sync(webbrowser.open, url, abandon_on_cancel=True)

    return opener


class Loopback:
    """A listening redirect endpoint. Use :func:`open_loopback`."""

    def __init__(self, port: int, state: str) -> None:
        self.port = port
        self.redirect_uri = f"http://127.0.0.1:{port}/callback"
        self._state = state
        self._params: dict[str, str] | None = None
        #: Callbacks ignored for want of the login's state (another login's, or a guess).
        self.ignored = 0
        #: Connections closed unread: all MAX_CONNECTIONS open ones had sent a request.
        self.refused = 0
        #: Names the first callback carried more than once (RFC 6749 section 3.1 forbids
        #: it; the flow discards such an answer rather than pick one of the values).
        self.repeated: frozenset[str] = frozenset()
        self._done = trio.Event()
        #: The open connections, oldest first: each one's scope, and whether its request
        #: is in (the others are idle, the ones to close when one more comes).
        self._open: dict[trio.CancelScope, bool] = {}

    async def wait(self) -> dict[str, str]:
        """The query parameters of the first request to ``/callback`` with our state."""
        await self._done.wait()
        assert self._params is not None
        return self._params

    def _admit(self) -> trio.CancelScope | None:
        """Room for one more connection (closing the oldest idle one when full); None:
        every open one has sent its request, so the new one is closed instead."""
        if len(self._open) >= MAX_CONNECTIONS:
            idle = next((scope for scope, busy in self._open.items() if not busy), None)
            if idle is None:
                return None
            del self._open[idle]
            idle.cancel()
        scope = trio.CancelScope(deadline=trio.current_time() + 10)
        self._open[scope] = False
        return scope

    async def _serve(self, stream: trio.SocketStream) -> None:
        scope = self._admit()
        if scope is None:
            self.refused += 1
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await stream.aclose()
            return
        try:
            with scope:
                await self._answer(stream, scope)
        finally:
            self._open.pop(scope, None)
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await stream.aclose()

    async def _answer(self, stream: trio.SocketStream, scope: trio.CancelScope) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_REQUEST)
        try:
            event: object = h11.NEED_DATA
            while event is h11.NEED_DATA:
                data = await stream.receive_some(4096)
                conn.receive_data(data)
                event = conn.next_event()
            if not isinstance(event, h11.Request):
                return
            if scope in self._open:  # no longer one to close for a newcomer
                self._open[scope] = True
            target = event.target.decode("ascii", "replace")
            parts = urlsplit(target)
            if event.method != b"GET" or parts.path != "/callback":
                await self._respond(stream, conn, 404, b"Not found.")
                return
            pairs = parse_qsl(parts.query, keep_blank_values=True)
            params = dict(pairs)
            if ("state", self._state) not in pairs:
                # Among its values, not the last: a repeated state is the flow's
                # to discard, never a reason to wait on.
                self.ignored += 1
                log.warning("ignoring a login callback that is not for this login (its state)")
                await self._respond(stream, conn, 200, _NOT_OURS)
                return
            first = self._params is None
            if first:
                self._params = params
                if len(params) != len(pairs):
                    names = [name for name, _ in pairs]
                    self.repeated = frozenset(n for n in params if names.count(n) > 1)
            ok = first and "code" in params
            await self._respond(
                stream,
                conn,
                200,
                b"Authorization received." if ok else b"Authorization did not complete.",
            )
            if first:
                self._done.set()
        except (h11.RemoteProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
            return

    @staticmethod
    async def _respond(
        stream: trio.SocketStream, conn: h11.Connection, status: int, text: bytes
    ) -> None:
        body = _PAGE % text
        headers = [
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
            ("Connection", "close"),
        ]
        out = conn.send(h11.Response(status_code=status, headers=headers))
        out = (out or b"") + (conn.send(h11.Data(data=body)) or b"")
        out += conn.send(h11.EndOfMessage()) or b""
        await stream.send_all(out)


@asynccontextmanager
async def open_loopback(port: int = 0, *, state: str) -> AsyncIterator[Loopback]:
    """Listen on ``127.0.0.1:port`` (0: any free port) until the block ends, for the
    callback of the login whose authorization request carries ``state``.

    Resource handling: the listener and any connection still open are closed on exit.
    """
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    bound = listeners[0].socket.getsockname()[1]
    loopback = Loopback(bound, state)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, loopback._serve, listeners)
        try:
            yield loopback
        finally:
            nursery.cancel_scope.cancel()
