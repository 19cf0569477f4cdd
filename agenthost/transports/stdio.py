"""The stdio transport: an MCP server as a child process, newline-delimited JSON-RPC.

Resource handling: :func:`open_stdio_transport` owns the process. On every way out of its
block (normal exit, exception, cancellation) it shuts the server down as the spec asks:
close the server's stdin, wait, SIGTERM, wait, SIGKILL; shielded from cancellation and
bounded by ``shutdown_timeout`` per phase. The child runs in its own process group and the
whole group is signalled, so a server started through a wrapper (``npx``, ``uv run``, a
shell script) leaves no grandchildren behind. A descendant that left the group (``setsid``)
is found through ``/proc`` just before shutdown (Linux) and stopped too.

Orphans (Linux): while it runs stdio servers, the host process is a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``), so a descendant whose parent died (the ``setsid``
grandchild of a server that crashed, a double-forked daemon) is re-parented to the host
rather than to init. Each server process gets its own :data:`SERVER_TAG_ENV` value,
inherited by its descendants: when a server ends, on a crash as on shutdown, the host's
children that carry that server's tag, and their descendants, are stopped (SIGTERM, then
SIGKILL) and reaped, so no orphan survives and none stays a zombie. Only the host's own
children are looked at (``/proc/self/task/*/children``), and only tagged ones are touched:
a library user's own subprocesses are never signalled nor reaped. The limits: a descendant
that dropped its environment (``env -i``) cannot be traced back to its server (it stays
the host's child, and dies with nothing else), nor can an orphan that exited on its own
before its server ended (it stays a zombie of the host until then); a cgroup (e.g. start
the host under ``systemd-run --user --scope``) contains everything. Elsewhere nothing of
this applies.

Ctrl-C: the transport's tasks and :meth:`StdioTransport.send` are KI-protected, as the
RPC endpoint's are (see :mod:`agenthost.rpc`): a KeyboardInterrupt landing in them would
kill the flusher (later messages queued for no one) or cut a send between its write and
its bookkeeping (the message written twice); it goes to the main task instead.

The child's environment is an allowlist: only the variables in
:data:`INHERITED_ENV_VARS` are copied from the host, plus what the server's config names.
A host holds LLM API keys; a third-party server must never see them by accident.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Final

import trio

from agenthost._util import collapse_single_group
from agenthost.errors import MessageTooLarge, ProtocolError, TransportClosed, TransportError
from agenthost.protocol import jsonrpc
from agenthost.redaction import add_named_secret
from agenthost.transports.base import (
    DEFAULT_MAX_MESSAGE_SIZE,
    NO_OPTIONS,
    SendOptions,
    Transport,
    decode_frame,
)
from agenthost.transports.reaping import (
    SERVER_TAG_ENV,
    find_orphans,
    find_strays,
    reap_children,
    reap_group,
    reap_strays,
    signal_group,
    subreaper_acquire,
    subreaper_release,
)

__all__ = [
    "INHERITED_ENV_VARS",
    "StdioTransport",
    "child_environment",
    "open_stdio_transport",
]

log = logging.getLogger("agenthost.transports.stdio")


#: Host variables a server inherits. Everything else (API keys above all) stays behind
#: unless the server's config passes it explicitly.
INHERITED_ENV_VARS: Final = frozenset(
    {
        "HOME",
        "PATH",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "LANG",
        "LANGUAGE",
        "LC_ALL",
        "LC_CTYPE",
        "LC_MESSAGES",
        "TMPDIR",
        "TEMP",
        "TMP",
        "TZ",
        "XDG_RUNTIME_DIR",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        # Windows equivalents, harmless elsewhere.
        "APPDATA",
        "LOCALAPPDATA",
        "SYSTEMROOT",
        "SYSTEMDRIVE",
        "USERPROFILE",
        "PROGRAMFILES",
        "COMSPEC",
        "PATHEXT",
    }
)

_tags = itertools.count(1)

_READ_SIZE: Final = 256 * 1024
#: Drop the written head of the send backlog once it is this large (amortised compaction).
_COMPACT_AT: Final = 1024 * 1024
#: Unwritten bytes beyond which a sender waits for the server to read (backpressure).
_HIGH_WATER: Final = 1024 * 1024
#: Bytes of complete lines beyond which they are decoded in a worker thread.
_DECODE_IN_THREAD: Final = 1024 * 1024
#: A batch line longer than this is decoded a group of members at a time (see
#: jsonrpc.BatchReader), each group of about ``_BATCH_GROUP`` bytes in the event loop, a
#: larger one (a large member) in a worker thread: one 14 MB line of 300k pings stalled
#: the event loop 0.23-0.44 s when parsed whole.
_BATCH_INLINE: Final = 64 * 1024
_BATCH_GROUP: Final = 64 * 1024
_STDERR_TAIL: Final = 20
#: Seconds to drain a pipe after the server exited, before we stop waiting on it.
_DRAIN: Final = 0.5
_WHITESPACE: Final = frozenset(b" \t\r\n\x0b\x0c")
#: The messages that answer one of our requests (each ends one in flight).
_ANSWERS: Final = frozenset({jsonrpc.Response, jsonrpc.ErrorResponse, jsonrpc.InvalidResponse})


def child_environment(
    extra: Mapping[str, str] | None = None,
    host_env: Mapping[str, str] | None = None,
    inherit: Collection[str] = (),
) -> dict[str, str]:
    """The environment a server process gets: the allowlisted host variables + ``extra``.

    ``inherit`` names more host variables to pass on (the config's ``inherit_env``).
    """
    source = os.environ if host_env is None else host_env
    env = {
        key: value for key, value in source.items() if key in INHERITED_ENV_VARS or key in inherit
    }
    if extra:
        env.update(extra)
    return env


class StdioTransport(Transport):
    """One server process. Create it with :func:`open_stdio_transport`."""

    reads_inline = True

    def __init__(
        self, process: trio.Process, *, name: str, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    ) -> None:
        # POSIX pipes: the send path writes to the descriptor directly (see send()), the
        # read path reads it directly (see _fill() and receive_answers()).
        assert isinstance(process.stdin, trio.lowlevel.FdStream)
        assert isinstance(process.stdout, trio.lowlevel.FdStream)
        self.name = name
        self.process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._max = max_message_size
        #: Bytes accepted by :meth:`send` but not yet written, from ``_offset`` on.
        self._backlog = bytearray()
        self._offset = 0
        #: The flusher task parked with nothing to write (None while it writes or is due).
        self._flusher: trio.lowlevel.Task | None = None
        #: A flush is due or under way: it will write whatever is queued by then.
        self._flushing = False
        #: Set when the backlog drains below the high-water mark (senders wait on it).
        self._drained: trio.Event | None = None
        #: Requests sent minus responses received: a hint (never exact: a cancelled
        #: request may get no answer) that senders will soon queue up behind each other.
        self._in_flight = 0
        #: Messages of the last read still to be followed by sends: the callers they wake
        #: run in one scheduler batch, so their sends should share one write (see send()).
        self._burst = 0
        #: Why the pipe cannot be written any more, once it cannot.
        self._broken: str | None = None
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
        self._closed = False
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
        #: The last lines the server wrote to stderr, quoted when it dies: the reason a
        #: server crashed is almost always there.
        self.stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL)
        # Set when the stderr pump has read to the end: the exit reason waits for it
        # (briefly), so a crash's last words are in the error, not only in the log.
        self._stderr_done = trio.Event()
        self._stderr_pumping = False
        #: This process's :data:`SERVER_TAG_ENV` value (None: not tagged, not Linux).
        self._tag: str | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def bytes_unread(self) -> int:
        """Bytes read from the server and not decoded yet (bounded: max message size
        plus one read)."""
        return len(self._buf)

    @property
    def bytes_unsent(self) -> int:
        """Bytes queued for the server's stdin and not written yet (backpressure)."""
        return len(self._backlog) - self._offset

    @property
    def stdin_fd(self) -> int:
        """The file descriptor of the server's stdin (what each write goes to)."""
        return int(self._stdin.fileno())

    @trio.lowlevel.enable_ki_protection  # see the module doc, "Ctrl-C"
    async def send(
        self,
        message: jsonrpc.Message,
        *,
        deadline: float = math.inf,
        options: SendOptions = NO_OPTIONS,
    ) -> None:
        """Queue one message, whole and in order; return once it is bound for the pipe.

        Alone (no other request in flight), the message is written at once: no scheduler
        pass between the caller and the pipe. Under load, it joins the backlog and the
        flusher task writes everything queued in this scheduler batch with one
        ``os.write`` next pass: one system call per batch, not per message (the largest
        cost the profile showed), and no sender waits for a write lock or a leader.

        Backpressure: while more than :data:`_HIGH_WATER` bytes are unwritten (a server
        that stopped reading, or a huge message in flight), a sender of a request or a
        response waits for the backlog to drain before queuing, until ``deadline`` (then
        ``trio.TooSlowError``: nothing of the message was queued). Notifications are
        queued at once (see below).

        Cancellation: only before the message is queued. Once queued, it goes out whole
        before anything sent later, so a frame is never cut and the pipe's framing
        survives any cancellation.

        Raises:
            TransportClosed: the transport is closed, or the server stopped reading.
            trio.TooSlowError: still backed up at ``deadline``.
        """
        data = jsonrpc.encode_line(message)
        if self._closed:
            raise TransportClosed("transport is closed", server=self.name)
        await trio.lowlevel.checkpoint_if_cancelled()
        # Notifications are queued at once: ours are few and small (initialized,
        # cancelled, list_changed), and a cancel notice must not wait behind the request
        # it cancels (issue 14: a 4 MiB request to a server that stopped reading took
        # twice its timeout, the notice waiting for the backlog to drain).
        while (
            len(self._backlog) - self._offset > _HIGH_WATER
            and self._broken is None
            and type(message) is not jsonrpc.Notification
        ):
            if self._drained is None:
                self._drained = trio.Event()
            with trio.fail_at(deadline):
                await self._drained.wait()
        if self._broken is not None:
            raise TransportClosed(self._broken, server=self.name)
        # Batch only when other requests are in flight, or when the last read woke several
        # callers at once (with every answer in, the first of them would otherwise write
        # its request alone and wake the server for it: half the writes at 64 in flight;
        # make bench's "stdio wake-ups/call" figure, server side, -12%). One request at a
        # time, waiting would only add latency.
        alone = self._in_flight == 0
        if self._burst:
            self._burst -= 1
            alone = False
        if type(message) is jsonrpc.Request:
            self._in_flight += 1
        self._backlog += data
        if self._flushing:
            return  # the flush that is due or under way takes these bytes too
        if alone:
            try:
                self._write_some()
            except TransportClosed:
                raise await self._broken_with_last_words() from None
            if self._offset == len(self._backlog):
                return
        self._flushing = True
        flusher = self._flusher
        if flusher is not None:
            self._flusher = None
            trio.lowlevel.reschedule(flusher)

    def _write_some(self) -> None:
        """Write what the pipe takes now, without blocking.

        Raises:
            TransportClosed: the pipe is broken (the server is gone).
        """
        fd = self._stdin.fileno()  # -1 once closed: never a recycled fd number
        while self._offset < len(self._backlog):
            try:
                with memoryview(self._backlog) as view, view[self._offset :] as rest:
                    sent = os.write(fd, rest)
            except BlockingIOError:
                break
            except OSError:
                raise self._fail(self._exit_reason("cannot write to")) from None
            self._offset += sent
        if self._offset == len(self._backlog):
            self._backlog.clear()
            self._offset = 0
        elif self._offset >= _COMPACT_AT:
            del self._backlog[: self._offset]
            self._offset = 0
        drained = self._drained
        if drained is not None and len(self._backlog) - self._offset <= _HIGH_WATER:
            self._drained = None
            drained.set()

    @trio.lowlevel.enable_ki_protection
    async def _flush_loop(self) -> None:
        """Write the backlog whenever a sender queued some; wait on the pipe when full."""
        try:
            while True:
                if self._offset == len(self._backlog):
                    self._flushing = False
                    self._flusher = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(self._park_abort)
                    continue
                self._write_some()
                if self._offset < len(self._backlog):
                    await trio.lowlevel.wait_writable(self._stdin.fileno())
        except TransportClosed:
            await self._broken_with_last_words()  # _fail recorded why; now with the tail
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self._fail(self._exit_reason("cannot write to"))
            await self._broken_with_last_words()
        finally:
            self._flusher = None

    async def _broken_with_last_words(self) -> TransportClosed:
        """The write failed because the server is gone: the reason, once its exit status
        and last stderr lines are in (each waited for 0.25 s at most).

        Why: a server that exits at once usually breaks the pipe of our first write before
        the stderr pump has read why it exited; ``check`` then showed no last words in
        about half the runs (issue 27).
        """
        with trio.move_on_after(0.25):
            await self.process.wait()
        if self._stderr_pumping:
            with trio.move_on_after(0.25):
                await self._stderr_done.wait()
        return self._fail(self._exit_reason("cannot write to"))

    def _park_abort(self, _: object) -> trio.lowlevel.Abort:
        self._flusher = None
        return trio.lowlevel.Abort.SUCCEEDED

    def _fail(self, reason: str) -> TransportClosed:
        """The pipe is broken: every waiting sender and every later one gets ``reason``."""
        self._broken = reason
        if self._drained is not None:
            self._drained.set()
            self._drained = None
        return TransportClosed(reason, server=self.name)

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
                await trio.lowlevel.checkpoint()
                while self._reading is not None:
                    # A caller reads its answer itself (take_reading): wait until it is done
                    # (no other turn after: a caller alone takes the reading again at once).
                    self._reader = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(self._unpark_reader)
                if queue or self._stash is not None:
                    continue  # what that caller left
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
        """Only between reads: nobody on the pipe, nothing read and not yet handed out."""
        if (
            self._on_fd
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

    def _exit_reason(self, verb: str) -> str:
        code = self.process.returncode
        if code is None:
            what = f"{verb} the server's stdio (server closed its stdout)"
        elif code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = str(-code)
            what = f"server process exited on signal {sig}"
        else:
            what = f"server process exited with code {code}"
        if self.stderr_tail:
            what += "; last stderr: " + " | ".join(self.stderr_tail)
        return what

    async def aclose(self) -> None:
        self._closed = True
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
            await self._stdin.aclose()

    async def _serve_live(self, scope: trio.CancelScope) -> None:
        """Run the exit watcher and the flusher until ``scope`` is cancelled."""
        with scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_exit)
                nursery.start_soon(self._flush_loop)

    @trio.lowlevel.enable_ki_protection
    async def _watch_exit(self) -> None:
        """End reading when the server has exited, even if its stdout stays open.

        Stdout normally reaches EOF when the server exits; but a descendant that detached
        (its own session) may hold the pipe open forever, and then the session would never
        learn that its server is gone. After a grace period to drain what the server
        wrote, closing our end wakes the reader with the exit reason.
        """
        await self.process.wait()
        await trio.sleep(_DRAIN)
        if not self._eof and not self._closed:
            log.warning("%s: server exited but its stdout is still open; closing it", self.name)
            await self._stdout.aclose()

    @trio.lowlevel.enable_ki_protection
    async def _pump_stderr(self, stream: trio.abc.ReceiveStream) -> None:
        """Forward the server's stderr to logging, line by line, under its name."""
        server_log = logging.getLogger(f"agenthost.server.{self.name}")
        pending = b""
        self._stderr_pumping = True
        try:
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    self._log_stderr(server_log, raw)
                if len(pending) > 65536:  # a server that never ends its line
                    self._log_stderr(server_log, pending)
                    pending = b""
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            if pending:
                self._log_stderr(server_log, pending)
            self._stderr_done.set()

    def _log_stderr(self, server_log: logging.Logger, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip()
        if text:
            self.stderr_tail.append(text[:500])
            server_log.info("%s", text)

    async def shutdown(self, timeout: float) -> None:
        """Stop the server: close stdin, wait, SIGTERM, wait, SIGKILL. Always finishes.

        Cancellation: shielded; bounded by ``timeout`` per phase (so at most ~2x timeout
        plus the final kill).
        """
        self._closed = True
        proc = self.process
        with trio.CancelScope(shield=True):
            # Before the server can exit (orphaned descendants lose their ancestry):
            # descendants that left its process group (setsid) are not reached by killpg.
            strays: list[tuple[int, bytes]] = []
            # It ended (or closed its stdout) before we asked it to: a crash, whose orphans
            # are looked for among every process, not only ours (see find_orphans).
            crashed = self._eof or proc.returncode is not None
            if proc.returncode is None:
                with trio.move_on_after(timeout):
                    strays = await trio.to_thread.run_sync(find_strays, proc.pid)
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self._stdin.aclose()
            with trio.move_on_after(timeout):
                await proc.wait()
            if proc.returncode is None:
                signal_group(proc.pid, signal.SIGTERM)
                with trio.move_on_after(timeout):
                    await proc.wait()
            if proc.returncode is None:
                log.warning("%s: server ignored SIGTERM; killing it", self.name)
                signal_group(proc.pid, signal.SIGKILL)
                await proc.wait()
            await reap_group(proc.pid, timeout)
            if self._tag is not None:
                # Orphaned by the server's exit (a crash, above all) and adopted by us.
                adopted = await trio.to_thread.run_sync(
                    partial(find_orphans, self._tag, proc.pid, anywhere=crashed)
                )
                strays = list(dict.fromkeys([*strays, *adopted]))
            if strays:
                await reap_strays(self.name, strays, timeout)
                await reap_children(strays, timeout)
            with suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                await self._stdout.aclose()


@asynccontextmanager
async def open_stdio_transport(
    command: str,
    args: Sequence[str] = (),
    *,
    name: str,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    shutdown_timeout: float = 5.0,
    host_env: Mapping[str, str] | None = None,
    inherit: Collection[str] = (),
) -> AsyncIterator[StdioTransport]:
    """Start ``command args`` and yield a transport speaking to it over stdin/stdout.

    Args:
        command: the executable, looked up on the child's PATH.
        args: its arguments.
        name: the server's name, used in every log line and error.
        cwd: working directory of the child.
        env: extra environment variables for the child (on top of the allowlist).
        max_message_size: the largest message accepted from the server, in bytes. A larger
            one ends the session with :class:`~agenthost.errors.MessageTooLarge` rather than
            growing memory without bound.
        shutdown_timeout: seconds for each graceful shutdown phase.
        host_env: the host environment to take allowlisted variables from (default
            ``os.environ``).
        inherit: names of further host variables to pass on (proxy and CA settings).

    Raises:
        TransportError: the command cannot be started (not found, not executable, bad cwd).

    Resource handling: the process (and its process group) is gone when the block exits,
    however it exits; see the module docstring.
    """
    for key, value in (env or {}).items():  # the server's own settings: often its tokens
        add_named_secret(key, value)  # (not ``name``: that is the server's, used below)
    child_env = child_environment(env, host_env, inherit)
    tag: str | None = None
    if sys.platform.startswith("linux"):
        tag = child_env[SERVER_TAG_ENV] = f"{os.getpid()}-{next(_tags)}"
    argv = [command, *args]
    subreaper_acquire()
    try:
        async with _spawned(argv, child_env, cwd, name, max_message_size, shutdown_timeout) as t:
            t._tag = tag
            yield t
    finally:
        subreaper_release()


@asynccontextmanager
async def _spawned(
    argv: list[str],
    child_env: dict[str, str],
    cwd: str | os.PathLike[str] | None,
    name: str,
    max_message_size: int,
    shutdown_timeout: float,
) -> AsyncIterator[StdioTransport]:
    """Start the process and own it (the body of :func:`open_stdio_transport`)."""
    command = argv[0]
    try:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
            cwd=cwd,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        missing = exc.filename if exc.filename not in (None, command) else command
        if cwd is not None and not os.path.isdir(cwd):  # noqa: ASYNC240 (error path)
            raise TransportError(
                f"cannot start server: cwd {cwd!s} does not exist", server=name
            ) from None
        raise TransportError(
            f"cannot start server: command not found: {missing}", server=name
        ) from None
    except PermissionError:
        raise TransportError(
            f"cannot start server: {command} is not executable", server=name
        ) from None
    except OSError as exc:
        raise TransportError(
            f"cannot start server {command}: {exc.strerror or exc}", server=name
        ) from None
    transport = StdioTransport(process, name=name, max_message_size=max_message_size)
    log.debug("%s: started pid %d: %s", name, process.pid, command)
    try:
        with collapse_single_group():
            async with trio.open_nursery() as nursery:
                assert process.stderr is not None
                nursery.start_soon(transport._pump_stderr, process.stderr)
                # The exit watcher and the flusher serve a live server only: once it is
                # shut down they stop at once (waiting for them cost every close 0.5 s).
                live = trio.CancelScope()
                nursery.start_soon(transport._serve_live, live)
                try:
                    yield transport
                finally:
                    await transport.shutdown(shutdown_timeout)
                    live.cancel()
                    # The stderr pump ends at EOF; a detached descendant still holding
                    # the pipe must not hold us here: a short drain, then stop it.
                    nursery.cancel_scope.deadline = min(
                        nursery.cancel_scope.deadline, trio.current_time() + _DRAIN
                    )
    finally:
        if process.returncode is None:  # the nursery itself failed before shutdown ran
            with trio.CancelScope(shield=True):
                signal_group(process.pid, signal.SIGKILL)
                await process.wait()
        log.debug("%s: process %d exited with %s", name, process.pid, process.returncode)
