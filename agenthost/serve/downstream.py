"""One downstream client: the server side of an MCP session, over the client side's machinery.

The mirror of :class:`agenthost.session.ClientSession`: the same JSON-RPC endpoint
(:class:`agenthost.rpc.RPC`: reader task, pending requests, deadlines, cancellation), the
same method table (:data:`agenthost.protocol.methods.CLIENT_REQUESTS` for what the client
may ask, :data:`~agenthost.protocol.methods.SERVER_REQUESTS` for what we ask it) and the
same converter (params structured on the way in, results unstructured for the negotiated
revision on the way out). What each method *does* is the gateway's
(:mod:`agenthost.serve.gateway`): this module only knows the lifecycle.

Lifecycle (legacy revisions, ``basic/lifecycle.mdx``): ``initialize`` first (a revision we
speak is accepted as asked, any other gets our latest), then anything. ``ping`` is always
answered. A request before ``initialize`` is refused with -32600 naming the problem.

Cancellation: a client's ``notifications/cancelled`` cancels the handler's task (the RPC
endpoint does it), which cancels the upstream call it was waiting on; no response is sent.

Error handling: a handler that raises :class:`~agenthost.errors.JSONRPCError` answers with
it; params that do not fit the method's type get -32602 with the converter's words.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar

import attrs
import trio

from agenthost.errors import JSONRPCError, ProtocolError, TransportClosed
from agenthost.protocol import jsonrpc
from agenthost.protocol import methods as m
from agenthost.protocol.converter import structure, unstructure
from agenthost.protocol.jsonrpc import Request
from agenthost.protocol.revisions import (
    LATEST_REVISION,
    LEGACY_REVISIONS,
    MODERN_REVISIONS,
    SUPPORTED_REVISIONS,
)
from agenthost.protocol.types import (
    ClientCapabilities,
    DiscoverResult,
    Implementation,
    InitializeResult,
    ServerCapabilities,
)
from agenthost.rpc import RPC
from agenthost.serve.modern import (
    META_CLIENT_CAPABILITIES,
    check_stamp,
    modern_stamp,
    stamp_result,
    without_upstream_meta,
)
from agenthost.serve.mrtr import Exchange, ExchangeStore
from agenthost.serve.outbox import Outbox
from agenthost.transports.base import Transport

__all__ = [
    "CURRENT",
    "DownstreamSession",
    "Handler",
    "RawHandler",
    "RequestInfo",
]

log = logging.getLogger("agenthost.serve")

P = TypeVar("P")
R = TypeVar("R")

#: Requests one downstream client has in progress at once (a client that calls 64 tools
#: in parallel is normal; the excess is refused by the endpoint, not queued).
MAX_DOWNSTREAM_REQUESTS: Final = 256
#: How long a request read with (or just after) ``initialize`` waits for it to be handled.
_INITIALIZE_GRACE: Final = 1.0


@attrs.frozen(kw_only=True)
class RequestInfo:
    """What a handler knows about the downstream request it serves."""

    session: DownstreamSession
    method: str
    request_id: jsonrpc.RequestId
    revision: str
    #: The request's ``_meta`` (its progress token, among others), as sent.
    meta: Mapping[str, Any] | None = None
    #: A 2026-07-28 request whose work may need the client's input (MRTR).
    exchange: Exchange | None = None

    @property
    def progress_token(self) -> str | int | None:
        token = (self.meta or {}).get("progressToken")
        return token if isinstance(token, str | int) and not isinstance(token, bool) else None


#: ``async (info, typed params) -> typed result`` for one client method.
Handler = Callable[[RequestInfo, Any], Awaitable[Any]]
#: ``async (info, raw params) -> JSON result``: a method whose params or result the method
#: table cannot type on its own (``tasks/*``: two forms share the names).
RawHandler = Callable[[RequestInfo, Mapping[str, Any]], Awaitable[dict[str, Any]]]

#: The downstream request the current task serves (for consent asked on its behalf).
CURRENT: contextvars.ContextVar[RequestInfo | None] = contextvars.ContextVar(
    "agenthost_serve_request", default=None
)


class DownstreamSession:
    """The server side of one MCP session. Run it with ``await nursery.start(s.run)``.

    Args:
        transport: the channel to the client (closed by :meth:`aclose`).
        handlers: one per client method, keyed by method name.
        capabilities: what we declare in ``initialize``.
        server_info: our name and version.
        instructions: our ``instructions`` (the upstreams', joined).
        on_notification: the client's notifications (``initialized``, roots changes).
    """

    def __init__(
        self,
        transport: Transport,
        *,
        handlers: Mapping[str, Handler],
        capabilities: Callable[[], ServerCapabilities],
        server_info: Implementation,
        instructions: Callable[[], str | None] = lambda: None,
        on_notification: Callable[[DownstreamSession, str, Mapping[str, Any]], Awaitable[None]]
        | None = None,
        name: str = "downstream client",
        exchanges: ExchangeStore | None = None,
        raw_handlers: Mapping[str, RawHandler] | None = None,
        extensions: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self._raw_handlers = dict(raw_handlers or {})
        self._extensions = dict(extensions or {})
        #: Whose tasks this client reaches (:mod:`agenthost.serve.tasks`): its own; the
        #: HTTP app gives sessionless 2026-07-28 requests a shared one.
        self.task_owner: object = self
        self._exchanges = exchanges
        self._handlers = dict(handlers)
        self._capabilities = capabilities
        self._server_info = server_info
        self._instructions = instructions
        self._on_notification = on_notification
        self._rpc = RPC(
            transport,
            name=name,
            handle_request=self._handle,
            deliver=self._deliver,
            max_peer_requests=MAX_DOWNSTREAM_REQUESTS,
        )
        #: What the client is sent unasked (progress, log lines, list changes): queued,
        #: so a client that stops reading holds up nobody else (see the module).
        self._outbox = Outbox(name, self._rpc.notify, spawn=self._rpc.spawn, stuck=self._end_stuck)
        #: The negotiated legacy revision (None until ``initialize``).
        self.revision: str | None = None
        self.client_capabilities: ClientCapabilities | None = None
        self.client_info: Implementation | None = None
        #: ``notifications/initialized`` arrived: the client is ready for our requests.
        self.initialized = trio.Event()
        #: The client spoke 2026-07-28 (per-request ``_meta``): it cannot be sent requests.
        self.modern = False
        self._initialize_done = trio.Event()

    # ------------------------------------------------------------------ lifecycle

    @property
    def closed(self) -> bool:
        return self._rpc.closed

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until the client goes away (end of input, closed stream)."""
        await self._rpc.run(task_status=task_status)

    async def aclose(self) -> None:
        self._outbox.close()
        await self._rpc.aclose()

    def _end_stuck(self) -> None:
        """The client stopped reading (:class:`Outbox`): its session ends, as if it left."""
        if not self._rpc.spawn(self.aclose):
            self._rpc.close(TransportClosed("the client stopped reading", server=self.name))

    async def _flushed(self) -> None:
        """What the client waits for goes out after the notifications queued before it
        (a call's progress before its result)."""
        if self._outbox.pending:
            await self._outbox.flushed()

    def can(self, capability: str) -> bool:
        """Whether the client declared ``capability`` (``sampling``, ``elicitation``, ``roots``)."""
        caps = self.client_capabilities
        return not self.modern and caps is not None and getattr(caps, capability, None) is not None

    # ------------------------------------------------------------------ requests in

    async def _handle(self, request: Request) -> dict[str, Any]:
        try:
            return await self._answer(request)
        finally:
            await self._flushed()

    async def _answer(self, request: Request) -> dict[str, Any]:
        method = request.method
        params = request.params or {}
        meta = params.get("_meta")
        meta = meta if isinstance(meta, dict) else None
        stamp = modern_stamp(meta)
        if stamp is not None:
            return await self._handle_modern(request, params, meta or {}, stamp)
        if method == m.INITIALIZE:
            return self._initialize(params)
        if method == m.PING:
            return {}
        if self.revision is None:
            # Requests read in the same batch as initialize run in tasks of their own, in
            # no set order: give the initialize a moment to be handled first.
            with trio.move_on_after(_INITIALIZE_GRACE):
                await self._initialize_done.wait()
        if self.revision is None:
            raise JSONRPCError(
                jsonrpc.INVALID_REQUEST, f"{method[:64]} before initialize: send initialize first"
            )
        out = await self._dispatch(request, params, self.revision, meta)
        return without_upstream_meta(out)

    async def _handle_modern(
        self, request: Request, params: Mapping[str, Any], meta: Mapping[str, Any], stamp: str
    ) -> dict[str, Any]:
        """A 2026-07-28 request: everything it needs is in its own ``_meta`` (no session)."""
        revision = check_stamp(stamp, meta)
        self.modern = True
        spec = m.request_spec(request.method)
        out: dict[str, Any]
        if spec is not None and spec.mrtr and self._exchanges is not None:
            out = await self._exchange(request, params, meta, revision)
        elif request.method == m.SERVER_DISCOVER:
            result = DiscoverResult(
                supported_versions=[*MODERN_REVISIONS, *LEGACY_REVISIONS],
                capabilities=self._capabilities(),
                instructions=self._instructions(),
            )
            out = unstructure(result, revision)
            if self._extensions:
                out["capabilities"]["extensions"] = dict(self._extensions)
        else:
            out = await self._dispatch(request, params, revision, meta)
        return stamp_result(without_upstream_meta(out), self._server_info, revision, request.method)

    async def _exchange(
        self, request: Request, params: Mapping[str, Any], meta: Mapping[str, Any], revision: str
    ) -> dict[str, Any]:
        """A modern request that may need the client's input (see :mod:`agenthost.serve.mrtr`):
        the first time, its work starts; on a retry, the answers go to it. Either way the
        answer is its next ask (``input_required``) or its result."""
        assert self._exchanges is not None
        state = params.get("requestState")
        if isinstance(state, str):
            exchange = self._exchanges.get(state)
            responses = params.get("inputResponses")
            exchange.answer(responses if isinstance(responses, dict) else {})
        else:
            caps = structure(dict(meta.get(META_CLIENT_CAPABILITIES) or {}), ClientCapabilities)
            clean = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}

            async def work(exchange: Exchange) -> dict[str, Any]:
                return await self._dispatch(request, clean, revision, meta, exchange=exchange)

            exchange = self._exchanges.start(work, caps, revision)
        event = await exchange.next_event()
        if event[0] == "ask":
            _, key, asked = event
            return {
                "resultType": "input_required",
                "inputRequests": {key: asked},
                "requestState": exchange.token,
            }
        result: dict[str, Any] = event[1].unwrap()
        return result

    async def _dispatch(
        self,
        request: Request,
        params: Mapping[str, Any],
        revision: str,
        meta: Mapping[str, Any] | None,
        *,
        exchange: Exchange | None = None,
    ) -> dict[str, Any]:
        """Run the gateway's handler for one request at ``revision``; its result as JSON."""
        method = request.method
        spec = m.request_spec(method)
        handler = self._handlers.get(method)
        raw = self._raw_handlers.get(method)
        if raw is None and (spec is None or handler is None or not m.available(spec, revision)):
            raise JSONRPCError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {method[:64]}")
        info = RequestInfo(
            session=self,
            method=method,
            request_id=request.id,
            revision=revision,
            meta=meta,
            exchange=exchange,
        )
        token = CURRENT.set(info)
        try:
            if raw is not None:
                return await raw(info, params)
            assert spec is not None and handler is not None
            result = await handler(info, _params(spec, params))
        finally:
            CURRENT.reset(token)
        out: dict[str, Any] = result if isinstance(result, dict) else unstructure(result, revision)
        return out

    def _initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        typed = _params(m.INITIALIZE_SPEC, params)
        asked = typed.protocol_version
        revision = asked if asked in SUPPORTED_REVISIONS else LATEST_REVISION
        if self.revision is not None and revision != self.revision:
            raise JSONRPCError(jsonrpc.INVALID_REQUEST, "initialize was already done")
        self.revision = revision
        self.client_capabilities = typed.capabilities
        self.client_info = typed.client_info
        self._initialize_done.set()
        log.info(
            "%s: initialize at %s (asked %s) by %s %s",
            self.name,
            revision,
            asked[:32],
            typed.client_info.name[:64],
            typed.client_info.version[:32],
        )
        result = InitializeResult(
            protocol_version=revision,
            capabilities=self._capabilities(),
            server_info=self._server_info,
            instructions=self._instructions(),
        )
        out: dict[str, Any] = unstructure(result, revision)
        return out

    async def _deliver(self, method: str, params: Mapping[str, Any]) -> None:
        if method == m.NOTIFICATION_INITIALIZED:
            self.initialized.set()
        if self._on_notification is not None:
            await self._on_notification(self, method, params)

    # ------------------------------------------------------------------ requests out

    async def ask(self, spec: m.RequestSpec[P, R], params: P | None, *, timeout: float | None) -> R:
        """Send one of the server's requests (sampling, elicitation, roots) to the client.

        Raises:
            JSONRPCError: the client refused (or lacks the method at its revision).
            AgentHostTimeout, TransportClosed: as any request.
        """
        revision = self.revision
        if revision is None or not m.available(spec, revision):
            raise JSONRPCError(
                jsonrpc.METHOD_NOT_FOUND,
                f"the downstream client cannot answer {spec.method} (revision {revision})",
            )
        raw = None if params is None else unstructure(params, revision)  # type: ignore[call-overload]
        await self._flushed()
        result = await self._rpc.call(spec.method, raw, timeout=timeout)
        return structure(result, spec.result)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification: queued for the client's writer, never waited for (the
        callers are shared: an upstream's dispatch, the catalog watcher); a client that
        is gone or cannot keep up loses it (:class:`~agenthost.serve.outbox.Outbox`)."""
        if not self._rpc.closed:
            self._outbox.put(method, params)


def _params(spec: m.RequestSpec[P, Any], params: Mapping[str, Any]) -> P:
    """The typed params of a request; -32602 with the converter's words when they do not fit."""
    if spec.params is None:
        return None  # type: ignore[return-value]
    try:
        return structure(dict(params), spec.params)
    except ProtocolError as exc:
        raise JSONRPCError(
            jsonrpc.INVALID_PARAMS, f"invalid params for {spec.method}: {exc}"
        ) from None
