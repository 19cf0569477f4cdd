"""An in-memory transport pair, for tests and for servers living in the same process.

Messages cross as objects (no serialisation), through bounded Trio memory channels, so a
slow reader applies backpressure just as a pipe would.
"""

from __future__ import annotations

import math

import trio

from agenthost.errors import TransportClosed
from agenthost.protocol import jsonrpc
from agenthost.transports.base import NO_OPTIONS, SendOptions, Transport

__all__ = ["MemoryTransport", "memory_transport_pair"]


class MemoryTransport(Transport):
    """One end of a :func:`memory_transport_pair`."""

    #: The peer reads the message objects: they must hold plain JSON values only.
    serialises = False

    def __init__(
        self,
        send_channel: trio.MemorySendChannel[jsonrpc.Message],
        receive_channel: trio.MemoryReceiveChannel[jsonrpc.Message],
        *,
        name: str,
    ) -> None:
        self.name = name
        self._send = send_channel
        self._receive = receive_channel
        self.protocol_version: str | None = None

    async def send(
        self,
        message: jsonrpc.Message,
        *,
        deadline: float = math.inf,
        options: SendOptions = NO_OPTIONS,
    ) -> None:
        try:
            with trio.fail_at(deadline):
                await self._send.send(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise TransportClosed("peer closed the connection", server=self.name) from None

    async def receive(self) -> jsonrpc.Message:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise TransportClosed("peer closed the connection", server=self.name) from None

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()

    def set_protocol_version(self, version: str) -> None:
        self.protocol_version = version


def memory_transport_pair(
    *, name: str = "memory", buffer: int = 64
) -> tuple[MemoryTransport, MemoryTransport]:
    """Two connected transports: what one sends, the other receives."""
    a_send, b_receive = trio.open_memory_channel[jsonrpc.Message](buffer)
    b_send, a_receive = trio.open_memory_channel[jsonrpc.Message](buffer)
    return (
        MemoryTransport(a_send, a_receive, name=name),
        MemoryTransport(b_send, b_receive, name=f"{name}-peer"),
    )
