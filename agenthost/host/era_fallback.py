"""A call made again in the initialize era when a 2026-07-28 server could not finish it.

A server whose code sends a back-channel request of its own (``sampling/createMessage``
while a tool runs, say) cannot do so in MCP 2026-07-28: the request fails with
:class:`~agenthost.errors.BackChannelRequired`, the server's supervisor reconnects it in
the initialize era (:meth:`Supervisor.fall_back_to_legacy`), and the call is made again
on the new session when doing it twice cannot add an effect. Tool calls, prompts and
resource reads all go through :func:`with_era_fallback`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from agenthost.errors import BackChannelRequired, ServerUnavailable, TransportClosed, server_data
from agenthost.host.supervisor import Supervisor
from agenthost.session import ClientSession

__all__ = ["with_era_fallback"]

R = TypeVar("R")


async def with_era_fallback(
    supervisor: Supervisor,
    session: ClientSession,
    what: str,
    call: Callable[[ClientSession], Awaitable[R]],
    *,
    repeatable: bool,
) -> R:
    """``call(session)``; after a "no back-channel" failure, the server is reconnected
    in the initialize era (:meth:`Supervisor.fall_back_to_legacy`) and the call made
    again on the new session when that is safe.

    The safety rule: the SDK refuses the back-channel request *while the tool runs*,
    so whatever the tool did before it asked has been done. The call is repeated only
    when doing it again cannot add an effect: a tool the server declares
    ``readOnlyHint`` or ``idempotentHint`` (``repeatable``), or a ``prompts/get`` /
    ``resources/read`` (retrievals by the spec). Trusting the server's hints is sound
    here whether or not the server is trusted: a server that lies about them can only
    repeat its own effect, which it could do within one call anyway. Any other call
    is not repeated: the error says the server was switched and to call again. A call
    that was still running on the old session when another call's failure switched
    it is cut off with that session, and follows the same rule.

    Whatever handling the server's answer raises is that server's error, about
    ``what`` (:func:`~agenthost.errors.server_data`).

    Raises:
        BackChannelRequired: no fallback applies, or the call must not be repeated.
        ServerUnavailable: the server did not come back, or a cut-off call must not
            be repeated.
    """
    server = supervisor.name
    try:
        with server_data(server, what):
            return await call(session)
    except BackChannelRequired as exc:
        error: BackChannelRequired | None = exc
        new = await supervisor.fall_back_to_legacy(session, exc)
    except TransportClosed:
        if not supervisor.left_for_legacy(session):
            raise
        error = None
        new = await supervisor.replacement(session)
    if repeatable:
        with server_data(server, what):
            return await call(new)
    if error is None:
        raise ServerUnavailable(
            "the call was cut off: the server was reconnected in the initialize era"
            " while it ran (another call needed that era); it was not repeated because"
            " the tool is not declared read-only or idempotent: call it again",
            server=server,
        )
    what = f"{error.request} {error.name!r}" if error.name else error.request
    raise BackChannelRequired(
        error.code,
        f"{what} did not complete: the server's code sent {error.ask} as its own request,"
        " which MCP 2026-07-28 does not carry, so agenthost reconnected the server in the"
        " initialize era; the call was not repeated because the tool is not declared"
        " read-only or idempotent and may have acted before it asked: call it again"
        ' (protocol = "legacy" for this server avoids this)',
        error.data,
        server=server,
        ask=error.ask,
        request=error.request,
        name=error.name,
    )
