"""The server side of stdio: agenthost's own stdin and stdout, newline-delimited JSON-RPC.

The mirror of :class:`agenthost.transports.stdio.StdioTransport` (which owns a child
process): here the process *is* the server, the downstream client owns it, and the end of
stdin is the end of the session (the MCP stdio shutdown: the client closes our input).

Only protocol messages go to stdout; every log line goes to stderr (the CLI sets that
up). A line that is not JSON-RPC is answered with a JSON-RPC error when its id can be read
(so the client's request does not wait forever), else logged and skipped.

Resource handling: the transport reads and writes duplicates of descriptors 0 and 1, so
closing it never closes the process's own stdio (a late log line to a closed descriptor
would otherwise land in whatever file took its number).
"""

from __future__ import annotations

import logging
import math
import os
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Final

import trio

from agenthost._util import collapse_single_group
from agenthost.errors import MessageTooLarge, ProtocolError, TransportClosed
from agenthost.protocol import jsonrpc
from agenthost.transports.base import (
    DEFAULT_MAX_MESSAGE_SIZE,
    NO_OPTIONS,
    SendOptions,
    Transport,
)

__all__ = ["StdioServerTransport", "serve_until_cut"]

log = logging.getLogger("agenthost.serve.stdio")

_READ_SIZE: Final = 256 * 1024
#: Seconds the session has to end once cancelled (a shutdown) before its client, whose
#: write is still waiting, is cut off.
CUT_GRACE: Final = 2.0


class StdioServerTransport(Transport):
    """The downstream client at the other end of our stdin/stdout.

    Args:
        stdin, stdout: the descriptors to read and write (duplicated here; default 0, 1).
        name: the peer's name in log lines and errors.
        max_message_size: the longest line accepted; a longer one ends the session.
    """

    def __init__(
        self,
        *,
        stdin: int = 0,
        stdout: int = 1,
        name: str = "downstream client",
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    ) -> None:
        self.name = name
        self._in = trio.lowlevel.FdStream(os.dup(stdin))
        self._out = trio.lowlevel.FdStream(os.dup(stdout))
        self._write_lock = trio.Lock()
        self._buf = bytearray()
        self._queue: deque[jsonrpc.Message] = deque()
        self._max = max_message_size
        self._eof = False
        self._closed = False
        #: Errors owed to the client for lines it sent that were not JSON-RPC.
        self._owed: deque[jsonrpc.ErrorResponse] = deque()

    async def send(
        self,
        message: jsonrpc.Message,
        *,
        deadline: float = math.inf,
        options: SendOptions = NO_OPTIONS,
    ) -> None:
        """Write one message as one line; whole lines only, in order (serialised)."""
        data = jsonrpc.encode_line(message)
        if self._closed:
            raise TransportClosed("transport is closed", server=self.name)
        with trio.fail_at(deadline):
            async with self._write_lock:
                try:
                    # Shielded once started: a line cut in half would break the framing
                    # (a host that reads nothing is cut off whole: :meth:`cut`).
                    with trio.CancelScope(shield=True):
                        await self._out.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    self._stdout_gone()
                    raise TransportClosed(
                        "the client closed our stdout", server=self.name
                    ) from None

    def cut(self) -> None:
        """End the session now, a line being written or not (its client reads nothing:
        the write would wait for ever, shielded, and hold whoever waits for it)."""
        self._stdout_gone("reads nothing; cut off")

    def _stdout_gone(self, why: str = "our stdout is closed") -> None:
        """Nothing reaches the client any more: the session is over, as at the end of
        stdin (else its requests would still be served, for nobody, while it holds our
        stdin open). Closing our input wakes the reader, which ends the session."""
        if not self._eof:
            log.warning("%s: %s; ending the session", self.name, why)
            self._eof = True
            self._in.close()
        self._out.close()

    async def receive(self) -> jsonrpc.Message:
        while not self._queue:
            await self._fill()
        return self._queue.popleft()

    async def receive_many(self) -> list[jsonrpc.Message]:
        while not self._queue:
            await self._fill()
        batch = list(self._queue)
        self._queue.clear()
        return batch

    async def _fill(self) -> None:
        while self._owed:
            reply = self._owed.popleft()
            with suppress(TransportClosed):
                await self.send(reply)
        if self._eof:
            raise TransportClosed("the client closed our stdin", server=self.name)
        try:
            chunk = await self._in.receive_some(_READ_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            chunk = b""
        if not chunk:
            self._eof = True
            if self._buf.strip():
                self._decode(bytes(self._buf))
            self._buf.clear()
            return
        self._buf += chunk
        start = 0
        while (end := self._buf.find(b"\n", start)) >= 0:
            line = bytes(self._buf[start:end])
            start = end + 1
            if line.strip():
                self._decode(line)
        del self._buf[:start]
        if len(self._buf) > self._max:
            self._eof = True
            raise MessageTooLarge(
                f"message larger than the maximum of {self._max} bytes", server=self.name
            )

    def _decode(self, line: bytes) -> None:
        try:
            self._queue.extend(jsonrpc.decode(line))
        except ProtocolError as exc:
            log.warning("%s: bad message (%s): %r", self.name, exc, line[:200])
            self._owed.append(
                jsonrpc.ErrorResponse(exc.request_id, jsonrpc.ErrorObject(exc.code, str(exc)))
            )

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with trio.CancelScope(shield=True):
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await self._out.aclose()
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await self._in.aclose()


async def serve_until_cut(
    transport: StdioServerTransport, serve: Callable[[], Awaitable[None]]
) -> None:
    """Run ``serve`` (the session over ``transport``); once cancelled (a shutdown), it
    has :data:`CUT_GRACE` seconds to end, then the client is cut off
    (:meth:`StdioServerTransport.cut`): a line being written to a host that reads
    nothing is shielded, and would otherwise hold the session, and the shutdown, for
    ever."""
    served = trio.Event()

    async def cut_when_stuck() -> None:
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(CUT_GRACE):
                    await served.wait()
                if not served.is_set():
                    transport.cut()

    with collapse_single_group():  # the session's failure comes out as itself
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cut_when_stuck)
            try:
                await serve()
            finally:
                served.set()
                nursery.cancel_scope.cancel()
