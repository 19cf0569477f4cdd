"""The transport contract: a bidirectional channel of JSON-RPC messages.

A transport frames and moves messages; it never looks inside them beyond what its wire
format demands (Streamable HTTP must know a request from a notification to know whether a
response stream follows). Sessions sit on top and do correlation, timeouts and MCP.

Contract, in the shape of ``trio.abc.Channel[Message]``:

* ``send(message, deadline=..., options=...)`` may be called from many tasks at once;
  the transport serialises. A send that cannot hand its message over before ``deadline``
  (Trio's clock; the session passes the request's own deadline) raises
  ``trio.TooSlowError``, and the message was then not sent. Sends that never block may
  ignore the deadline. ``options`` (:class:`SendOptions`) carry what the layer above
  knows about this one message and the wire may need: extra HTTP headers
  (``Mcp-Method`` ...), and whether cancelling the request means aborting its exchange.
  A transport uses them instead of looking inside the message.
* ``abort(request_id)``: the caller gave up on a request (it timed out or was
  cancelled); a transport with a per-request exchange (an HTTP POST and its response
  stream, i.e. a pooled connection) drops it. For a request sent with
  ``abort_on_cancel`` that is how the server learns of the cancellation; for others the
  session has sent ``notifications/cancelled`` and this releases what the exchange
  holds (issue 14: without it, ~100 timed-out requests held every pooled connection).
  Others ignore it.
* ``exchange(request, deliver, options=...)``, only where ``inline_exchanges`` is True:
  send a request *in the caller's task* and hand every message its response carries
  to ``deliver``, in order, before returning (the caller wakes with its answer and no
  task in between: issue 26, "HTTP ... 1 in flight"); or return the answer when it is
  all the response carries (no delivery, no outcome object for the common reply). A
  message that comes later (a resumed stream, what follows the response) still arrives
  through ``receive()``, as does a failure of the whole transport. Cancelling the caller
  aborts the exchange, as ``abort`` would.
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
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Final

import attrs

from agenthost.errors import ProtocolError
from agenthost.protocol import jsonrpc

__all__ = ["NO_OPTIONS", "Deliver", "SendOptions", "Transport", "decode_frame"]


def _frozen(headers: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(headers))


@attrs.frozen(kw_only=True)
class SendOptions:
    """Per-message instructions from the session to the transport."""

    #: Extra HTTP headers for this message's POST (ignored by non-HTTP transports).
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen)
    #: Cancelling this request aborts its exchange (2026-07-28 over HTTP) instead of
    #: sending ``notifications/cancelled``.
    abort_on_cancel: bool = False


#: The largest message a transport accepts unless told otherwise (a JSON-RPC frame, an
#: HTTP body, an SSE event or a WebSocket message): big enough for real tool results,
#: small enough that a hostile server cannot exhaust memory with one line.
DEFAULT_MAX_MESSAGE_SIZE: Final = 16 * 1024 * 1024

#: The options of a message that needs none.
NO_OPTIONS: Final = SendOptions()

#: Where :meth:`Transport.exchange` hands each message of a response: the endpoint's
#: dispatch, the same one its reader applies to what :meth:`Transport.receive` returns.
Deliver = Callable[[jsonrpc.Message], Awaitable[None]]


class Transport(ABC):
    """Base class of every transport. See the module docstring for the contract."""

    #: The server's name, used in every error and log line the transport produces.
    name: str = "server"
    #: Messages are serialised here (:func:`~agenthost.protocol.jsonrpc.encode`, orjson),
    #: so a pre-serialised part of one (an ``orjson.Fragment``: the 2026-07-28 stamp)
    #: goes out as its bytes. False for a transport that hands the objects to its peer.
    serialises: bool = True
    #: Requests go through :meth:`exchange`, in the caller's task (see the module doc).
    #: A plain attribute, read once per request on every transport's call path.
    inline_exchanges: bool = False

    #: A caller whose request is the only one in flight may read the answer itself
    #: (:meth:`take_reading`): stdio.
    reads_inline: bool = False

    @property
    def exchanges_per_request(self) -> bool:
        """Each request is its own exchange (an HTTP POST): headers in
        :class:`SendOptions` apply and :meth:`abort` cancels a request."""
        return False

    async def exchange(
        self, request: jsonrpc.Request, deliver: Deliver, *, options: SendOptions = NO_OPTIONS
    ) -> jsonrpc.Response | None:
        """Send ``request`` and deliver what its response carries, or return its answer
        when that is all (see the module doc).

        Only called where :attr:`inline_exchanges` is True.
        """
        raise NotImplementedError

    def take_reading(self, request_id: jsonrpc.RequestId) -> bool:
        """Let the calling task, which sent ``request_id``, read the channel itself until
        :meth:`release_reading` (see the module doc); False when it may not now.

        Only called where :attr:`reads_inline` is True.
        """
        return False

    async def receive_answers(self) -> list[jsonrpc.Response | jsonrpc.ErrorResponse] | None:
        """For the task that took the reading: wait for the next messages and return the
        answers at their head, in order; the rest stays for :meth:`receive`. None: nothing
        was taken, and the reader should go on (anything that is not an answer came, the
        peer is gone, a large read, or :meth:`abort` woke the caller).
        """
        raise NotImplementedError

    def release_reading(self) -> None:
        """The task that took the reading is done with it: the reader goes on."""

    @abstractmethod
    async def send(
        self,
        message: jsonrpc.Message,
        *,
        deadline: float = math.inf,
        options: SendOptions = NO_OPTIONS,
    ) -> None: ...

    @abstractmethod
    async def receive(self) -> jsonrpc.Message: ...

    async def receive_many(self) -> Sequence[jsonrpc.Message]:
        """The next messages: at least one (waiting for it), and every other one already
        decoded, in order. Same contract as :meth:`receive` otherwise.

        Why: the session's reader takes a whole read's messages in one call, not one
        call per message (with 64 calls in flight one read holds dozens of responses;
        bench, "client CPU/call"). A transport that decodes in batches overrides it.
        """
        return (await self.receive(),)

    @abstractmethod
    async def aclose(self) -> None: ...

    def set_protocol_version(self, version: str) -> None:
        """Told by the session once a revision is negotiated.

        Only HTTP needs it (the ``MCP-Protocol-Version`` header, and whether the revision
        has sessions and a GET stream); others ignore it.
        """

    def abort(self, request_id: jsonrpc.RequestId) -> None:
        """Drop the exchange of a request the caller gave up on (see the module doc).

        Never blocks and never raises; unknown or finished ids are ignored.
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
