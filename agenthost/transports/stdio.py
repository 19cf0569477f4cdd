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
from agenthost.errors import TransportClosed, TransportError
from agenthost.protocol import jsonrpc
from agenthost.redaction import add_named_secret
from agenthost.transports.base import (
    DEFAULT_MAX_MESSAGE_SIZE,
    NO_OPTIONS,
    SendOptions,
    Transport,
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
from agenthost.transports.stdio_read import PipeReader

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
        # The config files of the agenthost processes above a server: an agenthost it
        # starts (through any wrapper) refuses to read one of them again (a loop).
        "AGENTHOST_SERVE_CHAIN",
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

#: Host variables a server's config may not set: the host's value (or none) is what the
#: server gets. The chain of config files is how an agenthost behind any wrapper finds
#: that it would start itself; a project file that could empty it could loop without end.
_HOST_OWNED_ENV_VARS: Final = frozenset({"AGENTHOST_SERVE_CHAIN"})

_tags = itertools.count(1)

#: Drop the written head of the send backlog once it is this large (amortised compaction).
_COMPACT_AT: Final = 1024 * 1024
#: Unwritten bytes beyond which a sender waits for the server to read (backpressure).
_HIGH_WATER: Final = 1024 * 1024
_STDERR_TAIL: Final = 20
#: Seconds to drain a pipe after the server exited, before we stop waiting on it.
_DRAIN: Final = 0.5


def child_environment(
    extra: Mapping[str, str] | None = None,
    host_env: Mapping[str, str] | None = None,
    inherit: Collection[str] = (),
) -> dict[str, str]:
    """The environment a server process gets: the allowlisted host variables + ``extra``.

    ``inherit`` names more host variables to pass on (the config's ``inherit_env``).
    ``extra`` cannot set the host's own bookkeeping (``AGENTHOST_SERVE_CHAIN``).
    """
    source = os.environ if host_env is None else host_env
    env = {
        key: value for key, value in source.items() if key in INHERITED_ENV_VARS or key in inherit
    }
    if extra:
        env.update((k, v) for k, v in extra.items() if k not in _HOST_OWNED_ENV_VARS)
    return env


class StdioTransport(PipeReader, Transport):
    """One server process. Create it with :func:`open_stdio_transport`."""

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
        self._init_reading(max_message_size)
        self._closed = False
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
