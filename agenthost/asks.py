"""One dispatch for server asks: roots, sampling and elicitation, whichever era asked.

A legacy server sends its own request (``sampling/createMessage`` ...); a 2026-07-28
server returns an ``InputRequiredResult`` whose ``inputRequests`` hold the same asks
(MRTR, :mod:`agenthost.mrtr`). Both arrive here and reach the same
:class:`~agenthost.session.ClientHandlers`, so consent, the sampling service, rate limits,
budgets and the audit log are written once and behave the same in both eras. The
:class:`~agenthost.session.RequestContext` tells a handler which it is (``round`` and
``input_key`` are set for an MRTR ask).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from agenthost.errors import JSONRPCError
from agenthost.protocol import jsonrpc
from agenthost.protocol.converter import structure, unstructure
from agenthost.protocol.types import CreateMessageRequestParams, ElicitRequestParams

if TYPE_CHECKING:
    from agenthost.session import ClientHandlers, RequestContext

__all__ = ["ASK_METHODS", "answer_ask"]

#: The asks a server may make of a client (``ping`` only in the legacy era).
ASK_METHODS: Final = frozenset({"roots/list", "sampling/createMessage", "elicitation/create"})


async def answer_ask(
    handlers: ClientHandlers, ctx: RequestContext, params: Mapping[str, Any]
) -> dict[str, Any]:
    """Answer one ask (``ctx.method``) through ``handlers``; the result as plain JSON.

    Raises:
        JSONRPCError: -32601 for an ask we have no handler for (a capability we did not
            declare), or whatever the handler raised.
        ProtocolError: the ask's params do not fit its type (-32602).
    """
    method = ctx.method
    revision = ctx.revision
    if method == "roots/list" and handlers.roots is not None:
        return unstructure(await handlers.roots(ctx, params), revision)
    if method == "sampling/createMessage" and handlers.sampling is not None:
        typed = structure(params, CreateMessageRequestParams)
        return unstructure(await handlers.sampling(ctx, typed), revision)
    if method == "elicitation/create" and handlers.elicitation is not None:
        elicit = structure(params, ElicitRequestParams)
        return unstructure(await handlers.elicitation(ctx, elicit), revision)
    raise JSONRPCError(jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}")
