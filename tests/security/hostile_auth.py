"""A hostile MCP server and authorization servers on 127.0.0.1, in the test's own Trio loop.

Why in process and not Starlette: the findings of issue 28 are about bytes on the wire
(a body that drips one byte every few seconds, a 200 MiB token answer, a connection closed
before any answer) and about what reached which endpoint. A small h11 server lets each test
script every answer and read a log of every request (method, path, headers, body), so
"the thief got no secret" is an assertion on that log.

One listener plays every role, told apart by path:

* ``/mcp`` (and every path under it): the protected resource. It never speaks MCP: every
  POST is answered 401 with a ``WWW-Authenticate`` pointing at its protected resource
  metadata, unless a test routes it otherwise.
* ``/.well-known/oauth-protected-resource``: names :attr:`HostileAuth.named` (mutable: a
  server that switches authorization servers between two runs); a server under ``/mcp/``
  has its own at ``/.well-known/oauth-protected-resource/mcp/...``.
* ``/legit`` and ``/thief``: two authorization servers (issuer ``{origin}/legit`` and
  ``{origin}/thief``), each with RFC 8414 metadata, ``/token``, ``/register`` and
  ``/authorize`` (which redirects straight back to the loopback with a code, as a browser
  after a person's click would).

Tests replace any answer with :meth:`HostileAuth.route` (a function of the request).

The client side the tests share is here too: :func:`server` (a config for the hostile
``/mcp``), :func:`pinned` (client credentials pinned to ``legit``), :func:`refused` (the
one-line error of a connect), :func:`posts` and :func:`browser` (a person who clicks
"Allow").
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import attrs
import h11
import pytest
import trio

import agenthost
from agenthost.auth import OAuthSettings
from agenthost.config.model import ServerConfig, Timeouts
from agenthost.errors import AuthorizationError

__all__ = [
    "SECRET",
    "Answer",
    "HostileAuth",
    "Seen",
    "browser",
    "hostile_auth",
    "pinned",
    "posts",
    "refused",
    "server",
]

#: The configured client secret of :func:`pinned`.
SECRET = "configured-client-secret-x1"


@attrs.frozen(kw_only=True)
class Seen:
    """One request as it reached the hostile listener."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        """Everything the request carried, for "no secret reached it" assertions."""
        head = " ".join(f"{k}: {v}" for k, v in self.headers.items())
        return f"{self.method} {self.path}?{self.query} {head} {self.body.decode('latin-1')}"


@attrs.frozen(kw_only=True)
class Answer:
    """A scripted answer: status, headers and a body, sent at once or dripped."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    #: Seconds between two bytes of the body (a dripping endpoint); 0: all at once.
    drip: float = 0.0
    #: A body of this many bytes (zeros, streamed in 64 KiB chunks) instead of ``body``.
    huge: int = 0
    #: Close the connection without answering.
    hang_up: bool = False

    @classmethod
    def json(cls, value: Any, status: int = 200, **kw: Any) -> Answer:
        return cls(
            status=status,
            headers=(("content-type", "application/json"),),
            body=json.dumps(value).encode(),
            **kw,
        )


Route = Callable[[Seen], Awaitable[Answer | None] | Answer | None]


@attrs.define
class HostileAuth:
    """The listener's state: its origin, the log, what the PRM names, the scripted routes."""

    origin: str
    seen: list[Seen] = attrs.Factory(list)
    #: The issuer the protected resource metadata names.
    named: str = ""
    routes: dict[str, Route] = attrs.Factory(dict)
    #: Access tokens the MCP endpoint accepts (it still answers no MCP: 400 instead of 401).
    tokens: dict[str, str] = attrs.Factory(dict)
    counter: int = 0
    #: Body bytes the listener got onto the wire, per path (a huge or dripped answer
    #: stops counting when the client hangs up).
    sent: dict[str, int] = attrs.Factory(dict)
    #: Connections accepted, whatever came on them (a TLS hello is no request we log).
    connections: int = 0

    @property
    def url(self) -> str:
        return f"{self.origin}/mcp"

    def issuer(self, name: str) -> str:
        return f"{self.origin}/{name}"

    def route(self, path: str, answer: Route) -> None:
        self.routes[path] = answer

    def to(self, prefix: str) -> list[Seen]:
        """The requests whose path starts with ``prefix``."""
        return [s for s in self.seen if s.path.startswith(prefix)]

    def default(self, seen: Seen) -> Answer:
        path = seen.path
        well_known = "/.well-known/oauth-protected-resource"
        if path == "/mcp" or path.startswith("/mcp/"):
            # /mcp points at the root document; a server under it at its own (RFC 9728).
            where = well_known if path == "/mcp" else well_known + path
            return Answer(
                status=401,
                headers=(("www-authenticate", f'Bearer resource_metadata="{self.origin}{where}"'),),
            )
        if path == well_known:
            return Answer.json({"resource": self.url, "authorization_servers": [self.named]})
        if path.startswith(well_known + "/mcp/"):
            resource = self.origin + path.removeprefix(well_known)
            return Answer.json({"resource": resource, "authorization_servers": [self.named]})
        for name in ("legit", "thief"):
            issuer = self.issuer(name)
            if path == f"/.well-known/oauth-authorization-server/{name}":
                return Answer.json(
                    {
                        "issuer": issuer,
                        "authorization_endpoint": f"{issuer}/authorize",
                        "token_endpoint": f"{issuer}/token",
                        "registration_endpoint": f"{issuer}/register",
                        "code_challenge_methods_supported": ["S256"],
                        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                    }
                )
            if path == f"/{name}/register":
                self.counter += 1
                return Answer.json(
                    {
                        "client_id": f"{name}-client-{self.counter}",
                        "client_secret": f"{name}-dcr-secret-{self.counter}",
                        "token_endpoint_auth_method": "client_secret_basic",
                        "redirect_uris": json.loads(seen.body)["redirect_uris"],
                    },
                    status=201,
                )
            if path == f"/{name}/authorize":
                query = parse_qs(seen.query)
                back = {"code": f"{name}-code", "state": query["state"][0], "iss": issuer}
                location = f"{query['redirect_uri'][0]}?{urlencode(back)}"
                return Answer(status=302, headers=(("location", location),))
            if path == f"/{name}/token":
                self.counter += 1
                token = f"{name}-access-{self.counter}"
                self.tokens[token] = name
                return Answer.json(
                    {
                        "access_token": token,
                        "token_type": "Bearer",
                        "expires_in": 3600,
                        "refresh_token": f"{name}-refresh-{self.counter}",
                    }
                )
        return Answer(status=404)


async def _answer(
    stream: trio.SocketStream,
    conn: h11.Connection,
    answer: Answer,
    sent_bytes: dict[str, int],
    path: str,
) -> None:
    if answer.hang_up:
        return
    size = answer.huge or len(answer.body)
    headers = [*answer.headers, ("content-length", str(size))]
    await stream.send_all(conn.send(h11.Response(status_code=answer.status, headers=headers)))
    if answer.huge:
        chunk = b"0" * 65536
        sent = 0
        counts = sent_bytes
        while sent < answer.huge:
            part = chunk[: answer.huge - sent]
            await stream.send_all(conn.send(h11.Data(data=part)))
            sent += len(part)
            counts[path] = sent
    elif answer.drip:
        for n, byte in enumerate(answer.body):
            await stream.send_all(conn.send(h11.Data(data=bytes([byte]))))
            sent_bytes[path] = n + 1
            await trio.sleep(answer.drip)
    elif answer.body:
        await stream.send_all(conn.send(h11.Data(data=answer.body)))
    await stream.send_all(conn.send(h11.EndOfMessage()))


async def _serve_one(state: HostileAuth, stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            request: h11.Request | None = None
            body = bytearray()
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    conn.receive_data(data)
                elif isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
                else:
                    return
            assert request is not None
            target = urlsplit(request.target.decode())
            seen = Seen(
                method=request.method.decode(),
                path=target.path,
                query=target.query,
                headers={k.decode().lower(): v.decode("latin-1") for k, v in request.headers},
                body=bytes(body),
            )
            state.seen.append(seen)
            answer: Answer | None = None
            route = state.routes.get(seen.path)
            if route is not None:
                got = route(seen)
                answer = await got if not isinstance(got, Answer | None) else got
            await _answer(stream, conn, answer or state.default(seen), state.sent, seen.path)
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
    except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
        return
    finally:
        await stream.aclose()


@asynccontextmanager
async def hostile_auth(named: str = "thief") -> AsyncIterator[HostileAuth]:
    """Listen on 127.0.0.1 (a free port) until the block ends; yields the state."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    state = HostileAuth(origin=f"http://127.0.0.1:{port}")
    state.named = state.issuer(named)
    async with trio.open_nursery() as nursery:

        async def handler(stream: trio.SocketStream) -> None:
            state.connections += 1
            await _serve_one(state, stream)

        await nursery.start(trio.serve_listeners, handler, listeners)
        try:
            yield state
        finally:
            nursery.cancel_scope.cancel()


def server(url: str, *, name: str = "victim", **oauth: Any) -> ServerConfig:
    """A Streamable HTTP server at ``url`` with ``[servers.NAME.oauth]`` from ``oauth``."""
    return ServerConfig(
        name=name,
        transport="streamable-http",
        url=url,
        oauth=OAuthSettings(**oauth),
        timeouts=Timeouts(startup=20, request=20),
    )


def pinned(auth: HostileAuth, **more: Any) -> ServerConfig:
    """Client credentials with :data:`SECRET`, pinned to ``legit`` (which the PRM names)."""
    auth.named = auth.issuer("legit")
    return server(
        auth.url,
        grant="client_credentials",
        client_id="c",
        client_secret=SECRET,
        issuer=auth.issuer("legit"),
        **more,
    )


async def refused(config: ServerConfig) -> str:
    """The message of the AuthorizationError a connect to ``config`` fails with (one line)."""
    with pytest.raises(AuthorizationError) as caught:
        async with agenthost.connect(config):
            pass
    message = str(caught.value)
    assert "\n" not in message
    return message


def posts(auth: HostileAuth) -> list[Seen]:
    """Every request but the discovery GETs and the MCP endpoint's."""
    return [s for s in auth.seen if s.method == "POST" and s.path != "/mcp"]


async def browser(_server: str, url: str) -> None:
    """A person who clicks "Allow": follow the authorize redirect back to the loopback."""
    import httpx

    async with httpx.AsyncClient(follow_redirects=True, timeout=10) as client:
        await client.get(url)
