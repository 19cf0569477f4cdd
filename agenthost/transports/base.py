"""The transport contract: a bidirectional channel of JSON-RPC messages.

A transport frames and moves messages; it never looks inside them beyond what its wire
format demands (Streamable HTTP must know a request from a notification to know whether a
response stream follows). Sessions sit on top and do correlation, timeouts and MCP.

Contract, in the shape of ``trio.abc.Channel[Message]``:

* ``send(message, deadline=...)`` may be called from many tasks at once; the transport
  serialises. A send that cannot hand its message over before ``deadline`` (Trio's
  clock; the session passes the request's own deadline) raises ``trio.TooSlowError``,
  and the message was then not sent. Sends that never block may ignore the deadline.
* ``receive()`` is called from one task only (the session's reader). It returns the next
  message, skipping (and logging) frames that are not valid JSON-RPC, and raises
  :class:`~agenthost.errors.TransportClosed` once the peer is gone for good.
* ``aclose()`` is idempotent, always finishes (shielded, bounded) and never raises for a
  peer that is already gone.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable

from agenthost import jsonrpc
from agenthost.errors import ProtocolError

__all__ = ["Transport", "decode_frame"]


class Transport(ABC):
    """Base class of every transport. See the module docstring for the contract."""

    #: The server's name, used in every error and log line the transport produces.
    name: str = "server"

    @abstractmethod
    async def send(self, message: jsonrpc.Message, *, deadline: float = math.inf) -> None: ...

    @abstractmethod
    async def receive(self) -> jsonrpc.Message: ...

    @abstractmethod
    async def aclose(self) -> None: ...

    def set_protocol_version(self, version: str) -> None:
        """Told by the session once a revision is negotiated.

        Only HTTP needs it (the ``MCP-Protocol-Version`` header); others ignore it.
        """


def decode_frame(
    data: bytes | bytearray | memoryview | str,
    into: deque[jsonrpc.Message],
    log: logging.Logger,
    server: str,
) -> None:
    """Decode one frame into ``into``; a malformed frame is logged and skipped.

    Skipping rather than failing is deliberate: one bad line from a chatty server (a stray
    ``print`` on stdout is the classic) must not take the whole session down.
    """
    try:
        messages: Iterable[jsonrpc.Message] = jsonrpc.decode(data)
    except ProtocolError as exc:
        preview = bytes(data[:200]) if not isinstance(data, str) else data[:200].encode()
        log.warning("%s: skipping malformed message (%s): %r", server, exc, preview)
        return
    into.extend(messages)
