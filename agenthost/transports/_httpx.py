"""The boundary with httpx: its exceptions mapped to ours, and the client the HTTP
transports share.

Like httpcore's ``map_exceptions``, one table turns httpx's errors into agenthost's at
the place they happen, so no other module names an ``httpx.*Error``:

* ``ConnectError`` / ``ConnectTimeout`` -> :class:`~agenthost.errors.TransportClosed`
  "cannot reach URL": nothing was sent, the server is not there.
* ``PoolTimeout`` -> :class:`~agenthost.errors.TransportClosed`: every pooled connection
  is held by a request the server does not answer, so the session cannot work any more
  (issue 14); a supervisor starts afresh.
* every other ``httpx.HTTPError`` -> :class:`~agenthost.errors.TransportError` with
  httpx's words (redacted): the exchange failed part way.

Errors that are already ours (``MessageTooLarge``, the OAuth flow's
``AuthorizationError``) pass through unchanged.

Which clients the lean HTTP path (:mod:`agenthost.transports.lean`) may stand in for:
only those agenthost made itself (:func:`new_client`), with no auth or one that can hand
out its bearer token (:class:`BearerAuth`), for a URL no proxy applies to. A client a
caller gave us may carry a transport, hooks or mounts of its own: it is always used.
"""

from __future__ import annotations

import functools
import os
import ssl
import urllib.request
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Final, Protocol, runtime_checkable

import httpx
import trio

from agenthost._util import collapse_single_group
from agenthost.errors import TransportClosed, TransportError
from agenthost.redaction import redact, redact_url

__all__ = [
    "BearerAuth",
    "describe",
    "failure_name",
    "lean_allowed",
    "map_httpx_errors",
    "new_client",
    "open_http_client",
    "reason_of",
    "ssl_context",
    "tls_failure",
]

#: Clients made by :func:`new_client`: configured by us, so the lean path may replace them.
_OURS: weakref.WeakSet[httpx.AsyncClient] = weakref.WeakSet()


#: The httpx request extension telling a :class:`BearerAuth` flow that the lean path
#: already got this request a fresh token (a refusal of it is then final).
RENEWED: Final = "agenthost.renewed"


@runtime_checkable
class BearerAuth(Protocol):
    """An ``httpx.Auth`` whose token the lean path can attach (the OAuth flow is one).

    ``bearer()`` returns the access token to send now (refreshed if about to expire), or
    None when there is none yet, or ``""`` when the token is not a bearer token (DPoP,
    RFC 9449: each request needs a proof of its own): the request then goes through
    httpx and the auth flow. A 401/403 on the lean path goes to ``refused()``, which logs
    in, refreshes or steps up as the ``httpx.Auth`` flow would: the server sees the
    refused request once.
    """

    async def bearer(self) -> str | None: ...

    def bearer_now(self) -> tuple[bool, str | None]:
        """``(True, bearer()'s answer)`` when it needs no wait, else ``(False, None)``."""
        ...

    async def refused(
        self, status: int, challenges: list[str], sent: str | None, *, renewed: bool
    ) -> bool:
        """Act on a 401/403 to a request that carried ``sent`` (its ``WWW-Authenticate``
        values in ``challenges``): True to send it again with ``bearer()``'s token."""
        ...


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """httpx's default trust (``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured), built once.

    Every ``httpx.AsyncClient`` builds its own context unless given one, and loading the
    CA bundle costs ~20 ms of CPU: a connection with OAuth made three (the MCP client, the
    authorization-server client, the lean path), and a CLI command pays it per server. A
    context is safe to share between connections: httpcore sets the same ALPN protocols on
    it at every connect, and nothing else changes it after creation.
    """
    return httpx.create_ssl_context()


#: How far :func:`tls_failure` follows an exception's causes (httpx wraps three deep).
_CAUSE_DEPTH: Final = 8


def tls_failure(exc: BaseException) -> str | None:
    """What went wrong in a TLS handshake behind ``exc``, in words, or None if it was not one.

    Why: Trio reports a failed handshake as a bare ``BrokenResourceError`` (the
    ``ssl.SSLError`` is its cause) and httpx wraps that in a ``ConnectError("")``, so the
    user saw "cannot reach URL: ConnectError" for an untrusted certificate. Both the lean
    path and httpx say it the same way, with how to trust a private CA when the issuer is
    the problem (a wrong host name is not fixed by trusting more).
    """
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < _CAUSE_DEPTH:
        if isinstance(cause, ssl.SSLCertVerificationError):
            problem = (cause.verify_message or cause.reason or "").rstrip(".")
            text = f"TLS certificate verify failed: {problem}"
            if cause.verify_code in _UNTRUSTED_ISSUER:
                text += "; for a private CA, set SSL_CERT_FILE to its PEM file"
            return text
        if isinstance(cause, ssl.SSLError):
            return f"TLS handshake failed: {cause.reason or cause.strerror or cause}"
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return None


def failure_name(exc: BaseException) -> str:
    """The TLS problem behind ``exc`` (:func:`tls_failure`), else its type's name: for a
    one-line "cannot reach" that must not show the message (httpx puts URLs in it)."""
    return tls_failure(exc) or type(exc).__name__


#: OpenSSL's ``X509_V_ERR_*`` codes that mean "no trusted CA vouches for this chain":
#: unable to get (local) issuer certificate (2, 20), self-signed certificate (18) or one
#: in the chain (19), unable to verify the first certificate (21).
_UNTRUSTED_ISSUER: Final = frozenset({2, 18, 19, 20, 21})


def new_client(
    *, timeout: httpx.Timeout, auth: httpx.Auth | None = None, follow_redirects: bool = False
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` configured by agenthost (see :func:`lean_allowed`)."""
    client = httpx.AsyncClient(
        timeout=timeout, auth=auth, follow_redirects=follow_redirects, verify=ssl_context()
    )
    _OURS.add(client)
    return client


def _proxied(url: httpx.URL) -> bool:
    """Whether httpx would send ``url`` through a proxy from the environment.

    httpx reads the same ``urllib.request.getproxies()``; its ``NO_PROXY`` matching is
    richer than an exact host, so anything but ``*`` or the exact host counts as proxied
    (the lean path is then not used: httpx goes through the proxy).
    """
    proxies = urllib.request.getproxies()
    if not (proxies.get(url.scheme) or proxies.get("all")):
        return False
    bypass = {host.strip().lower() for host in proxies.get("no", "").split(",")}
    return not ("*" in bypass or url.host.lower() in bypass)


#: ``AGENTHOST_LEAN_HTTP=0`` sends every request through httpx: a switch for telling a
#: lean-path problem from a server's, and for comparing the two in ``bench/``.
LEAN_ENV: Final = "AGENTHOST_LEAN_HTTP"


def lean_allowed(client: httpx.AsyncClient, url: str) -> bool:
    """Whether requests of ``client`` to ``url`` may take the lean path."""
    if os.environ.get(LEAN_ENV) == "0" or client not in _OURS:
        return False
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https") or _proxied(parsed):
        return False
    auth = client.auth
    return auth is None or isinstance(auth, BearerAuth)


def describe(exc: BaseException, scrub: Callable[[str], str] = redact) -> str:
    """``Type: message`` of an exception, scrubbed of secrets (httpx puts URLs in it)."""
    text = str(exc)
    return scrub(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


class map_httpx_errors:  # a function to its callers: ``with map_httpx_errors(...)``
    """Raise agenthost's error for an httpx error in the block (the table in the module doc).

    Args:
        url: the URL the block talks to, named (redacted) when it cannot be reached.
        server: the server's name, which every error carries.
        scrub: how to remove secrets from httpx's message (a transport's header values).

    The message of the raised error is :func:`reason_of` it; ``from None``: the httpx
    chain holds the request, headers included. A class, not a generator-based manager:
    every MCP request over HTTP enters one (bench: "HTTP JSON calls/s, 1 in flight").
    """

    __slots__ = ("_scrub", "_server", "_url")

    def __init__(
        self, url: str, *, server: str | None, scrub: Callable[[str], str] = redact
    ) -> None:
        self._url = url
        self._server = server
        self._scrub = scrub

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None or not isinstance(exc, httpx.HTTPError):
            return
        scrub, server = self._scrub, self._server
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
            tls = tls_failure(exc)
            why = scrub(tls) if tls else describe(exc, scrub)
            raise TransportClosed(
                f"cannot reach {redact_url(self._url)}: {why}", server=server
            ) from None
        if isinstance(exc, httpx.PoolTimeout):
            raise TransportClosed(
                "no connection to the server came free in time (every pooled connection is"
                f" held by a request the server does not answer): {describe(exc, scrub)}",
                server=server,
            ) from None
        raise TransportError(describe(exc, scrub), server=server) from None


def reason_of(exc: TransportError) -> str:
    """The error's message without the ``server:`` prefix, to wrap or re-raise it."""
    text = str(exc)
    return text.removeprefix(f"{exc.server}: ") if exc.server else text


@asynccontextmanager
async def open_http_client(
    client: httpx.AsyncClient | None, *, connect_timeout: float, shutdown_timeout: float
) -> AsyncIterator[tuple[httpx.AsyncClient, trio.Nursery]]:
    """A client (ours, or the one given, which we never close) and a nursery for tasks.

    The one place the three HTTP ``open_*`` functions get their client: redirects are
    off (the transports follow them within the origin only) and reads have no timeout
    (a stream may idle for as long as the server likes).

    Resource handling: a client created here is closed on the way out (shielded, bounded).
    """
    owned = client is None
    http = client or new_client(timeout=httpx.Timeout(connect_timeout, read=None))
    try:
        with collapse_single_group():
            async with trio.open_nursery() as nursery:
                yield http, nursery
    finally:
        if owned:
            with trio.CancelScope(shield=True), trio.move_on_after(shutdown_timeout):
                await http.aclose()
