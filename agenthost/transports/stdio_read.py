"""The read side of the stdio transport: the server's stdout, read and decoded, and who
reads it.

Split from :mod:`agenthost.transports.stdio` by job: this module frames and decodes what
the server writes (newline-delimited JSON-RPC, bounded per line; large frames and large
batches decoded off the event loop or a group at a time) and decides which task reads the
pipe. That is the session's reader, except while a request is the only one in flight:
then the calling task reads its own answer (:meth:`PipeReader.take_reading`,
:meth:`~PipeReader.receive_answers`; :meth:`agenthost.rpc.RPC.call`) and the reader parks
off the pipe. Why: a reader task between the pipe and the caller costs a scheduler pass
on the way of every answer (bench, "stdio calls/s sequential": 1.31x in the same rounds).
Anything that is not an answer, a large read, an unfinished line and the end of the pipe
are left to the reader, in order, so the general path keeps every rule it has.

Only one task may wait on a descriptor in Trio: :attr:`PipeReader._on_fd` says whether one
does, and the reading changes hands only between reads (nobody on the pipe, nothing
read and not yet handed out).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Sequence
from typing import Final

import trio

from agenthost.errors import MessageTooLarge, ProtocolError, TransportClosed
from agenthost.protocol import jsonrpc
from agenthost.transports.base import decode_frame

__all__ = ["PipeReader"]

log = logging.getLogger("agenthost.transports.stdio")

_READ_SIZE: Final = 256 * 1024
#: Bytes of complete lines beyond which they are decoded in a worker thread.
_DECODE_IN_THREAD: Final = 1024 * 1024
#: A batch line longer than this is decoded a group of members at a time (see
#: jsonrpc.BatchReader), each group of about ``_BATCH_GROUP`` bytes in the event loop, a
#: larger one (a large member) in a worker thread: one 14 MB line of 300k pings stalled
#: the event loop 0.23-0.44 s when parsed whole.
_BATCH_INLINE: Final = 64 * 1024
_BATCH_GROUP: Final = 64 * 1024
_WHITESPACE: Final = frozenset(b" \t\r\n\x0b\x0c")
#: The messages that answer one of our requests (each ends one in flight).
_ANSWERS: Final = frozenset({jsonrpc.Response, jsonrpc.ErrorResponse, jsonrpc.InvalidResponse})


class PipeReader:
    """The reading half of :class:`~agenthost.transports.stdio.StdioTransport` (a mixin:
    one object, so the hot path reads plain attributes)."""

    #: A caller alone may read its own answer (see the module doc).
    reads_inline = True

    # Set by the transport.
    name: str
    process: trio.Process
    _stdout: trio.lowlevel.FdStream
    _in_flight: int
    _burst: int
    _stderr_pumping: bool
    _stderr_done: trio.Event

    def _exit_reason(self, verb: str) -> str:
        raise NotImplementedError

    def _init_reading(self, max_message_size: int) -> None:
        self._max = max_message_size
        #: The unfinished line of the last read.
        self._buf = bytearray()
        self._queue: deque[jsonrpc.Message] = deque()
        #: A large batch being decoded group by group; ``_buf`` may hold complete lines
        #: that came after it (``_buffered_lines``), decoded once it is done.
        self._batch: jsonrpc.BatchReader | None = None
        self._buffered_lines = False
        #: Either of the two above: one check per read on the common path.
        self._held = False
        #: Lines longer than this are checked against the size limit and for a batch.
        self._large = min(max_message_size, _BATCH_INLINE)
        self._eof = False
        #: A read that :meth:`receive_answers` left for the reader (a large one, or one
        #: that continues an unfinished line).
        self._stash: bytes | None = None
        #: A task is parked in ``wait_readable`` on the server's stdout (only one may be).
        self._on_fd = False
        #: The caller reading the pipe itself (:meth:`take_reading`), and its request.
        self._reading: trio.lowlevel.Task | None = None
        self._reading_id: jsonrpc.RequestId | None = None
        #: The reader, parked while a caller reads.
        self._reader: trio.lowlevel.Task | None = None
        #: The reader is at its turn before a read: the one moment the reading may change
        #: hands (not while it dispatches what it read last, which an answer read by a
        #: caller would overtake, nor while a worker thread decodes a large frame).
        self._between = False

    async def receive(self) -> jsonrpc.Message:
        if not self._queue:
            await self._fill()
        message = self._queue.popleft()
        if self._in_flight and type(message) in _ANSWERS:
            self._in_flight -= 1
        return message

    async def receive_many(self) -> Sequence[jsonrpc.Message]:
        if not self._queue:
            await self._fill()
        batch = list(self._queue)
        self._queue.clear()
        if self._in_flight:
            answers = sum(1 for message in batch if type(message) in _ANSWERS)
            self._in_flight = max(0, self._in_flight - answers)
        return batch

    async def _fill(self) -> None:
        """Read until at least one message is decoded into the queue.

        Raises:
            TransportClosed: the server is gone and everything it wrote was delivered.
            MessageTooLarge: a message is longer than ``max_message_size``.
        """
        queue = self._queue
        while not queue:
            if self._held:
                await self._resume(queue)
                continue
            if self._eof:
                raise TransportClosed(self._exit_reason("lost"), server=self.name)
            if self._stash is not None:
                chunk, self._stash = self._stash, None
            else:
                # A turn for the others first (as FdStream.receive_some takes): the callers
                # the last read woke write their next requests before this read's system
                # calls, which then run while the server works.
                self._between = True
                try:
                    await trio.lowlevel.checkpoint()
                    while self._reading is not None:
                        # A caller reads its answer itself (take_reading): wait until it is
                        # done (no other turn after: a caller alone takes it again at once).
                        self._reader = trio.lowlevel.current_task()
                        await trio.lowlevel.wait_task_rescheduled(self._unpark_reader)
                finally:
                    self._between = False
                if queue or self._stash is not None:
                    continue  # what that caller left
                # one piece: the same read as receive_answers() makes, written out in each
                # (a shared coroutine: a frame more to resume on every answer; bench:
                # "stdio calls/s sequential"); they differ in what a closed pipe means.
                fd = self._stdout.fileno()  # -1 once closed
                while True:
                    try:
                        chunk = os.read(fd, _READ_SIZE)
                        break
                    except BlockingIOError:
                        self._on_fd = True
                        try:
                            await trio.lowlevel.wait_readable(fd)
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            chunk = b""
                            break
                        finally:
                            self._on_fd = False
                        fd = self._stdout.fileno()
                    except OSError:
                        chunk = b""
                        break
            if not chunk:
                self._eof = True
                if self._buf.strip():
                    decode_frame(self._buf, queue, log, self.name)
                self._buf.clear()
                if not queue:
                    with trio.move_on_after(0.25):
                        await self.process.wait()
                    if self._stderr_pumping:
                        # Under load stdout's EOF can come before the pump has read the
                        # crash's last stderr lines (seen in the full suite).
                        with trio.move_on_after(0.25):
                            await self._stderr_done.wait()
                continue
            if b"\n" not in chunk:
                self._buf += chunk
                if len(self._buf) > self._max:
                    self._eof = True
                    raise MessageTooLarge(
                        f"message larger than the maximum of {self._max} bytes"
                        " (raise max_message_size in the server's config if this is expected)",
                        server=self.name,
                    )
                continue
            data: bytes | bytearray = chunk
            if self._buf:
                self._buf += chunk
                data, self._buf = self._buf, bytearray()
            if len(data) > _DECODE_IN_THREAD:
                # A huge frame (a batch of 300k pings is 14 MB) takes ~1 s to decode:
                # in a worker thread, the event loop (every other server) gets the GIL
                # back every switch interval instead of waiting for the whole frame.
                await trio.to_thread.run_sync(self._split, data, queue)
            else:
                self._split(data, queue)
            self._burst = len(queue) - 1

    def _unpark_reader(self, _: object) -> trio.lowlevel.Abort:
        self._reader = None
        return trio.lowlevel.Abort.SUCCEEDED

    def take_reading(self, request_id: jsonrpc.RequestId) -> bool:
        """Only while the reader takes its turn before a read (:attr:`_between`), and
        nothing read is still to be handed out."""
        if (
            not self._between
            or self._reading is not None
            or self._queue
            or self._buf
            or self._held
            or self._eof
            or self._stash is not None
        ):
            return False
        self._reading = trio.lowlevel.current_task()
        self._reading_id = request_id
        return True

    async def receive_answers(self) -> list[jsonrpc.Response | jsonrpc.ErrorResponse] | None:
        """One read of the pipe, decoded here when it is small and whole lines (else left
        to the reader, as a stash). Why: a caller alone takes its answer without the
        reader task in between, one scheduler pass less per call (bench: "stdio calls/s
        sequential")."""
        queue = self._queue
        if not queue:
            fd = self._stdout.fileno()
            while True:
                try:
                    chunk = os.read(fd, _READ_SIZE)
                    break
                except BlockingIOError:
                    self._on_fd = True
                    try:
                        await trio.lowlevel.wait_readable(fd)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return None  # closed, or abort() woke us
                    finally:
                        self._on_fd = False
                    fd = self._stdout.fileno()  # -1 if closed since: never a reused number
                except OSError:
                    return None
            if not chunk:
                return None  # EOF: the reader's next read sees it too
            if self._buf or len(chunk) > self._large:
                self._stash = chunk
                return None
            self._split(chunk, queue)
            self._burst = len(queue) - 1
        answers: list[jsonrpc.Response | jsonrpc.ErrorResponse] = []
        while queue:
            head = queue[0]
            if type(head) is not jsonrpc.Response and type(head) is not jsonrpc.ErrorResponse:
                break
            answers.append(queue.popleft())  # type: ignore[arg-type]
        if not answers and queue:
            return None
        if self._in_flight:
            self._in_flight = max(0, self._in_flight - len(answers))
        return answers

    def release_reading(self) -> None:
        self._reading = None
        self._reading_id = None
        reader = self._reader
        if reader is not None:
            self._reader = None
            trio.lowlevel.reschedule(reader)

    def abort(self, request_id: jsonrpc.RequestId) -> None:
        """The caller reading its own answer gave up on it (timed out): wake it."""
        if self._on_fd and self._reading is not None and request_id == self._reading_id:
            trio.lowlevel.notify_closing(self._stdout.fileno())

    async def _decode(self, data: bytes | bytearray, queue: deque[jsonrpc.Message]) -> None:
        """:meth:`_split`, in a worker thread for a large ``data`` (as :meth:`_fill` does
        inline: one coroutine frame less per read on the common path)."""
        if len(data) > _DECODE_IN_THREAD:
            await trio.to_thread.run_sync(self._split, data, queue)
        else:
            self._split(data, queue)
        self._burst = len(queue) - 1

    async def _resume(self, queue: deque[jsonrpc.Message]) -> None:
        """Go on with what a large batch holds up: its next group, then the lines after it."""
        if self._batch is not None:
            # A turn for the other tasks before each group (the queue is empty: a
            # cancellation here loses nothing).
            await trio.lowlevel.checkpoint()
            await self._next_group(self._batch, queue)
            self._held = self._buffered_lines or self._batch is not None
            return
        self._held = False
        if self._buffered_lines:
            self._buffered_lines = False
            lines, self._buf = self._buf, bytearray()
            await self._decode(lines, queue)

    async def _next_group(self, batch: jsonrpc.BatchReader, queue: deque[jsonrpc.Message]) -> None:
        """Decode the next group of the batch under way into ``queue``.

        A group of about 64 KiB (a few ms) is decoded here; a larger one (a member bigger
        than that) in a worker thread like any large frame, so the loop gets the GIL back
        between orjson calls. :meth:`_fill` checkpoints before each group. Members go
        into ``queue`` before any checkpoint, so a cancelled receive loses none.
        """
        if not self._read_group(batch, queue, _BATCH_GROUP * 2):
            await trio.to_thread.run_sync(self._read_group, batch, queue, None)
        self._burst = len(queue) - 1

    def _read_group(
        self, batch: jsonrpc.BatchReader, queue: deque[jsonrpc.Message], limit: int | None
    ) -> bool:
        """One :meth:`BatchReader.read` into ``queue``; False if the group is over ``limit``."""
        try:
            members = batch.read(limit)
        except ProtocolError as exc:
            log.warning("%s: rest of a batch skipped: %s", self.name, exc)
            members = []
        if members is None:
            return False
        queue.extend(members)
        if batch.done:
            self._batch = None
        return True

    def _split(self, data: bytes | bytearray, queue: deque[jsonrpc.Message]) -> None:
        """Decode every complete line of ``data`` in order; keep the unfinished tail.

        Lines are parsed from memoryview slices, not copies: a 10 MiB message costs its
        buffer and its parsed value, not a third copy in between.

        Raises:
            MessageTooLarge: a line is longer than ``max_message_size`` (the lines before
                it are decoded first).
        """
        start = 0
        find = data.find
        with memoryview(data) as view:
            while (end := find(b"\n", start)) >= 0:
                size = end - start
                if size > self._large:  # one comparison per line for both checks
                    if size > self._max:
                        self._eof = True
                        raise MessageTooLarge(
                            f"message of {size} bytes is larger than the maximum of"
                            f" {self._max} bytes",
                            server=self.name,
                        )
                    if size > _BATCH_INLINE and jsonrpc.is_batch(view[start:end]):
                        # Decoded a group at a time by _fill(); what follows waits for it.
                        self._batch = jsonrpc.BatchReader(
                            bytes(view[start:end]), group=_BATCH_GROUP
                        )
                        self._held = True
                        if end + 1 < len(data):
                            self._buf = bytearray(data[end + 1 :])
                            self._buffered_lines = b"\n" in self._buf
                        return
                if size and not (data[start] in _WHITESPACE and data[start:end].isspace()):
                    try:  # decode_frame(), inline: this runs once per message
                        queue.extend(jsonrpc.decode(view[start:end]))
                    except ProtocolError:
                        decode_frame(view[start:end], queue, log, self.name)
                start = end + 1
        if start < len(data):
            self._buf = bytearray(data[start:])
