"""Test helpers shipped with agenthost (STYLE.md 14): don't mock MCP, run a small server.

:class:`ScriptedServer` is a minimal but real MCP server that speaks over any
:class:`~agenthost.transports.base.Transport` (usually one end of
:func:`~agenthost.transports.memory.memory_transport_pair`). It negotiates the revision
like a real server, serves tools written as plain async functions, can send the client
requests (sampling, roots, elicitation) and notifications, honours
``notifications/cancelled``, and records every message it receives so a test can assert
on what the client actually sent.

Tests of agenthost against real servers use the official SDK and the reference Node
servers; this one is for the corners those cannot reach on demand (a late response, an
unknown id, a handler that cancels, a revision the client does not speak).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import outcome
import trio

from agenthost.errors import JSONRPCError, TransportClosed
from agenthost.protocol import jsonrpc
from agenthost.protocol.jsonrpc import ErrorObject, ErrorResponse, Notification, Request, Response
from agenthost.protocol.revisions import SUPPORTED_REVISIONS
from agenthost.transports.base import Transport
from agenthost.transports.memory import memory_transport_pair

__all__ = ["ScriptedServer", "ServerContext", "ToolFunction", "memory_transport_pair"]

#: ``async (ctx, arguments) -> result object`` (a CallToolResult as a plain dict).
ToolFunction = Callable[["ServerContext", dict[str, Any]], Awaitable[dict[str, Any]]]


@attrs.define
class ServerContext:
    """What a scripted tool can do while it runs."""

    server: ScriptedServer
    request_id: jsonrpc.RequestId
    meta: Mapping[str, Any]

    async def progress(self, progress: float, total: float | None = None) -> None:
        token = self.meta.get("progressToken")
        if token is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        await self.server.notify("notifications/progress", params)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.server.request(method, params)


@attrs.define(eq=False)
class ScriptedServer:
    """A small real MCP server for tests; see the module docstring."""

    tools: dict[str, ToolFunction] = attrs.field(factory=dict)
    #: Revisions it accepts; it answers an unknown offer with its newest (as servers do).
    revisions: tuple[str, ...] = SUPPORTED_REVISIONS
    #: Force this protocolVersion in the initialize answer (to test the client's checks).
    answer_version: str | None = None
    #: Refuse an offer outside ``revisions`` with this error code (``data.supported``
    #: names them) instead of answering with its newest, as some servers do.
    refuse_with: int | None = None
    capabilities: dict[str, Any] = attrs.field(factory=lambda: {"tools": {"listChanged": True}})
    #: Every message received, in order.
    received: list[jsonrpc.Message] = attrs.field(factory=list)
    #: Ids of our requests the client cancelled... and client requests we saw cancelled.
    cancelled: list[jsonrpc.RequestId] = attrs.field(factory=list)
    _transport: Transport | None = None
    _ids: Any = attrs.field(factory=lambda: itertools.count(1))
    _waiting: dict[jsonrpc.RequestId, trio.MemorySendChannel[Any]] = attrs.field(factory=dict)
    _running: dict[jsonrpc.RequestId, trio.CancelScope] = attrs.field(factory=dict)

    def tool(self, name: str) -> Callable[[ToolFunction], ToolFunction]:
        """Decorator registering a tool function under ``name``."""

        def register(fn: ToolFunction) -> ToolFunction:
            self.tools[name] = fn
            return fn

        return register

    async def serve(
        self, transport: Transport, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until the client closes the transport."""
        self._transport = transport
        async with trio.open_nursery() as nursery:
            task_status.started()
            try:
                while True:
                    message = await transport.receive()
                    self.received.append(message)
                    if isinstance(message, Request):
                        nursery.start_soon(self._handle, message)
                    elif isinstance(message, Notification):
                        if message.method == "notifications/cancelled" and message.params:
                            rid = message.params.get("requestId")
                            self.cancelled.append(rid)  # type: ignore[arg-type]
                            scope = self._running.get(rid)  # type: ignore[arg-type]
                            if scope is not None:
                                scope.cancel()
                    else:
                        channel = self._waiting.pop(message.id, None)  # type: ignore[arg-type]
                        if channel is not None:
                            channel.send_nowait(message)
            except TransportClosed:
                pass
            finally:
                nursery.cancel_scope.cancel()

    async def send(self, message: jsonrpc.Message) -> None:
        """Send a raw message (a test may send anything, including nonsense)."""
        assert self._transport is not None, "serve() first"
        await self._transport.send(message)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self.send(Notification(method, params))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Ask the client something; raises JSONRPCError for an error answer."""
        rid = f"s{next(self._ids)}"
        send, receive = trio.open_memory_channel[Any](1)
        self._waiting[rid] = send
        await self.send(Request(rid, method, params))
        answer = await receive.receive()
        if isinstance(answer, ErrorResponse):
            raise JSONRPCError(answer.error.code, answer.error.message, answer.error.data)
        return answer.result  # type: ignore[no-any-return]

    async def _handle(self, request: Request) -> None:
        params = request.params or {}
        with trio.CancelScope() as scope:
            self._running[request.id] = scope
            result = await outcome.acapture(self._dispatch, request.id, request.method, params)
        self._running.pop(request.id, None)
        if scope.cancelled_caught:
            return
        if isinstance(result, outcome.Value):
            await self.send(Response(request.id, result.value))
            return
        error = result.error
        if isinstance(error, JSONRPCError):
            await self.send(
                ErrorResponse(request.id, ErrorObject(error.code, error.message, error.data))
            )
        else:
            await self.send(ErrorResponse(request.id, ErrorObject(-32603, repr(error))))

    async def _dispatch(self, rid: jsonrpc.RequestId, method: str, params: dict[str, Any]) -> Any:
        if method == "initialize":
            offered = params.get("protocolVersion")
            if self.refuse_with is not None and offered not in self.revisions:
                raise JSONRPCError(
                    self.refuse_with,
                    "Unsupported protocol version",
                    {"supported": list(self.revisions), "requested": offered},
                )
            version = self.answer_version or (
                offered if offered in self.revisions else self.revisions[0]
            )
            return {
                "protocolVersion": version,
                "capabilities": self.capabilities,
                "serverInfo": {"name": "scripted", "version": "1"},
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            return {
                "tools": [{"name": name, "inputSchema": {"type": "object"}} for name in self.tools]
            }
        if method == "tools/call":
            fn = self.tools.get(params.get("name", ""))
            if fn is None:
                raise JSONRPCError(-32602, f"Unknown tool: {params.get('name')}")
            ctx = ServerContext(self, rid, params.get("_meta") or {})
            return await fn(ctx, params.get("arguments") or {})
        raise JSONRPCError(-32601, f"Method not found: {method}")
