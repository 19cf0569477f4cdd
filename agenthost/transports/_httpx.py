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
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpx
import trio

from agenthost._util import collapse_single_group
from agenthost.errors import TransportClosed, TransportError
from agenthost.redaction import redact, redact_url

__all__ = ["describe", "map_httpx_errors", "open_http_client", "reason_of"]


def describe(exc: BaseException, scrub: Callable[[str], str] = redact) -> str:
    """``Type: message`` of an exception, scrubbed of secrets (httpx puts URLs in it)."""
    text = str(exc)
    return scrub(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


@contextmanager
def map_httpx_errors(
    url: str, *, server: str | None, scrub: Callable[[str], str] = redact
) -> Iterator[None]:
    """Raise agenthost's error for an httpx error in the block (the table in the module doc).

    Args:
        url: the URL the block talks to, named (redacted) when it cannot be reached.
        server: the server's name, which every error carries.
        scrub: how to remove secrets from httpx's message (a transport's header values).

    The message of the raised error is :func:`reason_of` it; ``from None``: the httpx
    chain holds the request, headers included.
    """
    try:
        yield
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise TransportClosed(
            f"cannot reach {redact_url(url)}: {describe(exc, scrub)}", server=server
        ) from None
    except httpx.PoolTimeout as exc:
        raise TransportClosed(
            "no connection to the server came free in time (every pooled connection is held"
            f" by a request the server does not answer): {describe(exc, scrub)}",
            server=server,
        ) from None
    except httpx.HTTPError as exc:
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
    http = client or httpx.AsyncClient(timeout=httpx.Timeout(connect_timeout, read=None))
    try:
        with collapse_single_group():
            async with trio.open_nursery() as nursery:
                yield http, nursery
    finally:
        if owned:
            with trio.CancelScope(shield=True), trio.move_on_after(shutdown_timeout):
                await http.aclose()
