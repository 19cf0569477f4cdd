"""One dispatch for server asks: roots, sampling and elicitation, whichever era asked.

A legacy server sends its own request (``sampling/createMessage`` ...); a 2026-07-28
server returns an ``InputRequiredResult`` whose ``inputRequests`` hold the same asks
(MRTR, :mod:`agenthost.mrtr`). Both arrive at one :class:`AskRouter`, which looks each ask
up in the method table (:data:`agenthost.protocol.methods.SERVER_REQUESTS`: its params
type and the capability, hence the handler, it needs) and calls the same
:class:`ClientHandlers`, so consent, the sampling service, rate limits, budgets and the
audit log are written once and behave the same in both eras. The :class:`RequestContext`
tells a handler which it is (``round`` and ``input_key`` are set for an MRTR ask,
``task_id`` for an ask run as a task).

The types live here, below the session (arrows: asks <- mrtr <- session), so that
neither this module nor :mod:`agenthost.mrtr` needs to know the session exists.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs
import trio

from agenthost._util import collapse_single_group
from agenthost.ask_tasks import TASK_METHODS, TASKABLE_ASKS, AskTaskLimits, AskTaskStore
from agenthost.errors import JSONRPCError, ProtocolError
from agenthost.protocol import jsonrpc
from agenthost.protocol import methods as m
from agenthost.protocol.converter import structure, unstructure
from agenthost.protocol.jsonrpc import RequestId
from agenthost.protocol.revisions import at_least, is_modern
from agenthost.protocol.types import (
    ClientCapabilities,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitationCapability,
    ElicitRequestParams,
    ElicitResult,
    ListRootsResult,
    RootsCapability,
    SamplingCapability,
)

__all__ = [
    "ASK_METHODS",
    "MAX_ASKS_PER_ROUND",
    "AskRouter",
    "ClientHandlers",
    "ElicitationHandler",
    "NotificationListener",
    "RequestContext",
    "RootsHandler",
    "SamplingHandler",
    "tasks_declared",
]

#: The asks a server may make of a client (``ping`` aside): every server request of the
#: method table that needs a capability.
ASK_METHODS: Final = frozenset(
    spec.method for spec in m.SERVER_REQUESTS.values() if spec.capability is not None
)
#: Asks one ``InputRequiredResult`` may carry: a server is untrusted input.
MAX_ASKS_PER_ROUND: Final = 32
#: The longest ask key or target name kept in a context (they are the server's text).
_NAME_MAX: Final = 200


@attrs.frozen(kw_only=True)
class RequestContext:
    """What a handler knows about the message it is handling.

    It names the server (``server``), not the session: a handler that needs the session
    asks whoever built the handlers for it (the host keeps one per server), so this type
    stays below the session in the layers.
    """

    server: str
    revision: str
    method: str
    #: The id of the server's request; None for notifications and MRTR asks.
    request_id: RequestId | None = None
    meta: Mapping[str, Any] | None = None
    #: MRTR (2026-07-28): the request the ask belongs to (``tools/call``...), its target
    #: (tool or prompt name, resource URI), the round (1 = the first answer) and the
    #: server's key for the ask. None for a legacy server's own request.
    origin: str | None = None
    origin_name: str | None = None
    round: int | None = None
    input_key: str | None = None
    #: 2025-11-25: the client-side task this ask runs as (the server asked for one).
    task_id: str | None = None

    def via(self) -> dict[str, Any] | None:
        """What an audit line records about an MRTR ask or an ask run as a task (None
        for a plain legacy request)."""
        if self.round is None:
            return {"task": self.task_id} if self.task_id is not None else None
        return {
            "request": self.origin,
            "name": self.origin_name,
            "round": self.round,
            "input": self.input_key,
        }


#: ``async (ctx, params) -> None`` for a notification.
NotificationListener = Callable[[RequestContext, Mapping[str, Any]], Awaitable[None]]

RootsHandler = Callable[[RequestContext, Mapping[str, Any]], Awaitable[ListRootsResult]]
SamplingHandler = Callable[
    [RequestContext, CreateMessageRequestParams], Awaitable[CreateMessageResult]
]
ElicitationHandler = Callable[[RequestContext, ElicitRequestParams], Awaitable[ElicitResult]]


@attrs.frozen(kw_only=True)
class ClientHandlers:
    """Everything the client does for the server, in one place (STYLE.md 6).

    A capability is declared in ``initialize`` only when its handler exists, so a server
    never asks for something we cannot do. Request handlers: ``async (ctx, params) ->
    result``; raise :class:`~agenthost.errors.JSONRPCError` to answer with an error.
    Notification listeners: ``async (ctx, params) -> None``; params are the raw object.
    The attribute of each request handler is the capability its method needs in the
    method table (``RequestSpec.capability``).
    """

    roots: RootsHandler | None = None
    sampling: SamplingHandler | None = None
    elicitation: ElicitationHandler | None = None
    #: 2025-11-25: declare that sampling requests may carry ``tools``/``toolChoice``.
    sampling_tools: bool = False
    #: Declare support for ``includeContext`` other than "none" (soft-deprecated).
    sampling_context: bool = False
    #: Elicitation modes offered from 2025-11-25 on.
    elicitation_modes: tuple[str, ...] = ("form", "url")
    #: 2025-11-25: accept sampling/elicitation asks as tasks, within these bounds
    #: (:mod:`agenthost.ask_tasks`); None (the default) declares no ``tasks`` capability.
    ask_tasks: AskTaskLimits | None = None
    #: Listeners keyed by notification method, e.g. ``"notifications/tools/list_changed"``.
    notifications: Mapping[str, NotificationListener] = attrs.field(factory=dict)


class AskRouter:
    """Answers one session's server asks from the method table, in either era.

    Args:
        handlers: the session's handlers; an ask whose capability has no handler is
            refused (-32601 on the legacy path, a protocol error in an MRTR round).
        server: the server's name (contexts and error messages).
        ask_tasks: the store of asks run as tasks (2025-11-25), if offered.

    Each entry point takes the ``revision`` to name in the contexts rather than a
    context factory (RELAYER's ``make_ctx``): the only thing the session knows that the
    router does not is the revision (a legacy ask falls back to the offered revision, an
    MRTR round to the modern one), and the router builds every context itself, so the
    two eras' contexts cannot drift apart again.
    """

    def __init__(
        self, handlers: ClientHandlers, *, server: str, ask_tasks: AskTaskStore | None = None
    ) -> None:
        self.handlers = handlers
        self.server = server
        self.ask_tasks = ask_tasks
        #: The asks whose capability we declared (their handler exists).
        self.declared: frozenset[str] = frozenset(
            spec.method
            for spec in m.SERVER_REQUESTS.values()
            if spec.capability is not None and getattr(handlers, spec.capability) is not None
        )

    def capabilities(self, revision: str) -> ClientCapabilities:
        """What the client declares: only what has a handler (so a server never asks for
        something we cannot do); the revision trims the rest."""
        handlers = self.handlers
        return ClientCapabilities(
            roots=RootsCapability(list_changed=None if is_modern(revision) else True)
            if handlers.roots is not None
            else None,
            sampling=SamplingCapability(
                tools={} if handlers.sampling_tools else None,
                context={} if handlers.sampling_context else None,
            )
            if handlers.sampling is not None
            else None,
            elicitation=ElicitationCapability(
                form={} if "form" in handlers.elicitation_modes else None,
                url={} if "url" in handlers.elicitation_modes else None,
            )
            if handlers.elicitation is not None
            else None,
            tasks=self._tasks_capability(revision),
        )

    def _tasks_capability(self, revision: str) -> dict[str, Any] | None:
        """``tasks``: the asks we run as tasks (those with a handler), with list and cancel."""
        if self.ask_tasks is None or not tasks_declared(revision):
            return None
        requests: dict[str, Any] = {}
        for method, (kind, verb) in TASKABLE_ASKS.items():
            if self.task_capability(method):
                requests.setdefault(kind, {})[verb] = {}
        if not requests:
            return None
        return {"list": {}, "cancel": {}, "requests": requests}

    def task_capability(self, method: str) -> bool:
        """Whether we declared that ``method`` may come as a task (its handler exists)."""
        path = TASKABLE_ASKS.get(method)
        return path is not None and getattr(self.handlers, path[0]) is not None

    async def answer(self, ctx: RequestContext, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one ask (``ctx.method``) through the handlers; the result as plain JSON.

        Raises:
            JSONRPCError: -32601 for a method that is no ask or whose capability we did
                not declare, or whatever the handler raised.
            ProtocolError: the ask's params do not fit its type (-32602).
        """
        spec = m.SERVER_REQUESTS.get(ctx.method)
        handler = None
        if spec is not None and spec.capability is not None:
            handler = getattr(self.handlers, spec.capability)
        if spec is None or handler is None:
            raise JSONRPCError(jsonrpc.METHOD_NOT_FOUND, f"Method not found: {ctx.method}")
        typed = params if spec.params is None else structure(params, spec.params)
        result: dict[str, Any] = unstructure(await handler(ctx, typed), ctx.revision)
        return result

    async def handle_request(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        revision: str,
        request_id: RequestId | None,
    ) -> dict[str, Any]:
        """A legacy server's own request: ``ping``, the ask-task methods, an ask run as a
        task (answered at once with a ``CreateTaskResult``), or a plain ask."""
        if m.SERVER_REQUESTS.get(method) is m.PING_SPEC:
            return {}
        ctx = RequestContext(
            server=self.server,
            revision=revision,
            method=method,
            request_id=request_id,
            meta=params.get("_meta"),
        )
        store = self.ask_tasks
        if store is not None and tasks_declared(revision):
            if method in TASK_METHODS:
                return await store.handle(method, params)
            task = params.get("task")
            if isinstance(task, Mapping) and self.task_capability(method):
                plain = {key: value for key, value in params.items() if key != "task"}

                async def work(task_id: str) -> dict[str, Any]:
                    # The plain ask, through the one dispatch: same consent, same audit.
                    return await self.answer(attrs.evolve(ctx, task_id=task_id), plain)

                return store.create(method, task.get("ttl"), work)
        return await self.answer(ctx, params)

    async def answer_input_requests(
        self,
        requests: Mapping[str, Any],
        *,
        round_no: int,
        revision: str,
        origin: str,
        origin_name: str | None,
    ) -> dict[str, Any]:
        """Answer one round's ``inputRequests`` concurrently: the ``inputResponses`` map.

        For an MRTR round (:mod:`agenthost.mrtr`) and for the asks of a running task
        (the 2026-07-28 tasks extension's ``input_required``, answered with
        ``tasks/update``): the same bounds on untrusted input, and each ask's context
        names ``origin`` (the request it belongs to), its target, the round and the key.

        Raises:
            ProtocolError: more than :data:`MAX_ASKS_PER_ROUND` asks, an entry that is no
                ask, an ask we did not declare, or bad params.
            JSONRPCError: a handler refused (the ask's own error, not a group).
        """
        server = self.server
        if len(requests) > MAX_ASKS_PER_ROUND:
            raise ProtocolError(
                f"{origin}: {len(requests)} input requests in one round (at most"
                f" {MAX_ASKS_PER_ROUND} accepted)",
                server=server,
            )
        asks: list[tuple[str, str, Mapping[str, Any]]] = []
        for key, entry in requests.items():
            ask_method = entry.get("method") if isinstance(entry, Mapping) else None
            if not isinstance(ask_method, str) or ask_method not in ASK_METHODS:
                raise ProtocolError(
                    f"{origin}: input request {key[:64]!r} is not an elicitation, sampling or"
                    " roots request",
                    server=server,
                )
            if ask_method not in self.declared:
                raise ProtocolError(
                    f"{origin}: the server asked for {ask_method} (input request"
                    f" {key[:64]!r}), a capability this client did not declare",
                    server=server,
                )
            ask_params = entry.get("params") or {}
            if not isinstance(ask_params, Mapping):
                raise ProtocolError(
                    f"{origin}: input request {key[:64]!r} has bad params", server=server
                )
            asks.append((key, ask_method, ask_params))
        name = origin_name[:_NAME_MAX] if origin_name is not None else None
        answers: dict[str, Any] = {}

        async def one(key: str, ask_method: str, ask_params: Mapping[str, Any]) -> None:
            ctx = RequestContext(
                server=server,
                revision=revision,
                method=ask_method,
                origin=origin,
                origin_name=name,
                round=round_no,
                input_key=key[:_NAME_MAX],
            )
            answers[key] = await self.answer(ctx, ask_params)

        # One failed ask fails the call with that ask's own error (a refused sampling
        # request is the JSONRPCError the handler raised, as on the legacy path), not a
        # group.
        with collapse_single_group():
            async with trio.open_nursery() as nursery:
                for key, ask_method, ask_params in asks:
                    nursery.start_soon(one, key, ask_method, ask_params)
        return {key: answers[key] for key, _, _ in asks}


def tasks_declared(revision: str) -> bool:
    """Whether ``revision`` has the 2025-11-25 tasks utility (the modern era's tasks are
    an extension of their own, not declared here)."""
    return at_least(revision, "2025-11-25") and not is_modern(revision)
