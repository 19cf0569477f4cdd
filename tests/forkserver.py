"""A fork server for the suite's Python peers: one warm interpreter, a fork per start.

Why: the official ``mcp`` SDK takes about 0.8 s of CPU to import, and the suite starts
Python peers built on it (tests/peers/sdk_server.py and its siblings, the conformance
client, the example notes server) many hundreds of times; on the 2-core CI machine that
import was the largest single cost of ``make test``. The peer itself, the code the tests
talk to, is unchanged: the same script, run as ``__main__`` with the same argv,
environment, working directory and stdio, in a child forked from a process that has only
imported the libraries it uses (no event loop, no thread, no socket of the libraries
opened before the fork).

Two roles, one file:

* ``python forkserver.py serve SOCKET``: imports :data:`PRELOAD`, listens on a Unix socket,
  and for every launcher forks a child that takes the launcher's stdin, stdout and stderr
  (passed over the socket), its environment, working directory and arguments, and runs the
  script with :func:`runpy.run_path` (or a module with ``-m``). It reports the child's exit
  status back, forwards the signals the launcher receives, and kills the child when its
  launcher goes away. Single-threaded (``selectors`` and pidfds), so a fork never copies a
  lock another thread holds.
* ``python -I -S forkserver.py launch SOCKET SCRIPT ARGS...``: what a test runs instead of
  ``python SCRIPT ARGS...``. Standard library only, started without ``site``: about 15 ms.
  SIGTERM, SIGINT and SIGHUP are passed on to the peer; the launcher ends as the peer did
  (the same exit status, or killed by the same signal).

What differs from a cold start, and why the suite still tells the truth: the peer process
is the fork server's child, not the launcher's, so it is outside the launcher's process
group and its ``/proc/PID/environ`` is the fork server's (its ``os.environ`` is the
launcher's). Nothing in the tests that use it looks at either: the tests of process
groups, orphans and ``/proc`` tagging (tests/hostile, the stdio transport's own tests)
start their peers cold. Linux only (``os.pidfd_open``); :func:`peer_python` falls back
to the plain interpreter elsewhere, or with ``AGENTHOST_TEST_FORK=0``.
"""

from __future__ import annotations

import _thread
import contextlib
import json
import os
import selectors
import signal
import socket
import sys

__all__ = ["PRELOAD", "launch", "peer_python", "serve", "server_pid"]

#: What the peers import, so a child does not import it again. The SDK (server and
#: client sides, uvicorn for the HTTP modes) and agenthost's client (the conformance
#: client; the transports and the OAuth flow it imports on first use).
PRELOAD = (
    "mcp",
    "mcp.server",
    "mcp.server.mcpserver",
    "mcp.client",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "fastmcp",  # the tasks peer (tests/peers/tasks_server.py)
    "fastmcp_tasks",
    "uvicorn",
    "starlette.applications",
    "anyio",
    "httpx",
    "trio",
    "agenthost",
    "agenthost.auth.flow",
    "agenthost.auth.store",
    "agenthost.connection",
    "agenthost.transports.http",
    "agenthost.transports.lean",
    # The CLI (``-m agenthost``) and what its commands import on first use.
    "agenthost.cli.app",
    "agenthost.host",
    "agenthost.agent",
    "agenthost.transports.stdio",
    "agenthost_providers.anthropic",
    "agenthost_providers.openai",
    "agenthost_providers.openai_responses",
    "anthropic",
    "openai",
)

_HEADER = 8
_STDIO = (0, 1, 2)
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


# -- the launcher (standard library only: it starts with -I -S)


def launch(path: str, argv: list[str]) -> int:
    """Hand this process's stdio, environment and ``argv`` to the server; the peer's status."""
    body = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    data = len(body).to_bytes(_HEADER, "big") + body
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        # The server is gone: start the peer cold (slower, same behaviour), and say so
        # where the suite looks when it ends (see _start's stop).
        with contextlib.suppress(OSError), open(f"{path}.cold", "a") as note:
            print(f"{argv[:2]}: {exc}", file=note)
        os.execv(sys.executable, [sys.executable, *argv])
    sent = socket.send_fds(sock, [data], list(_STDIO))
    if sent < len(data):  # (an empty send would fail once a quick peer has come and gone)
        sock.sendall(data[sent:])
    null = os.open(os.devnull, os.O_RDWR)
    for fd in _STDIO:  # the peer holds them now; ours would keep pipes open past its end
        os.dup2(null, fd)
    os.close(null)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            sock.sendall(b"%d\n" % signum)

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    line = sock.makefile("rb").readline()
    try:
        code = int(line)
    except ValueError:
        return 1
    if code < 0:  # killed by a signal: so is the launcher, as its parent would see it
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


# -- the server


def _recv_request(conn: socket.socket) -> tuple[dict[str, object], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, len(_STDIO))
    while len(data) < _HEADER:
        more = conn.recv(1 << 16)
        if not more:
            raise EOFError("launcher closed before its request")
        data += more
    size = int.from_bytes(data[:_HEADER], "big")
    body = bytearray(data[_HEADER:])
    while len(body) < size:
        more = conn.recv(1 << 16)
        if not more:
            raise EOFError("launcher closed mid-request")
        body += more
    request = json.loads(bytes(body))
    if not isinstance(request, dict) or len(fds) != len(_STDIO):
        raise ValueError("malformed launcher request")
    return request, fds


def _run_child(request: dict[str, object], fds: list[int]) -> None:
    """In the forked child: become the launcher's peer process, then exit. Never returns."""
    import runpy

    code = 1
    try:
        for target, fd in zip(_STDIO, fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        env, argv, cwd = request["env"], request["argv"], request["cwd"]
        assert isinstance(env, dict) and isinstance(argv, list) and isinstance(cwd, str)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in env.items()})
        os.chdir(cwd)
        _reopen_stdio()
        for signum in _FORWARDED:
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        args = [str(arg) for arg in argv]
        if args[:1] == ["-m"] and len(args) > 1:
            sys.argv = args[1:]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            script = os.path.abspath(args[0])
            sys.argv = [script, *args[1:]]
            sys.path[0] = os.path.dirname(script)  # as `python SCRIPT` sets it
            runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _reopen_stdio() -> None:
    """Python's standard streams as a fresh interpreter would set them up for *these* fds.

    The fork server's own were made for its pipes at its start: a terminal on stdout
    would stay block-buffered, and ``PYTHONIOENCODING``/``PYTHONUNBUFFERED`` or the locale
    of the launcher's environment would be ignored.
    """
    import io
    import locale

    with contextlib.suppress(locale.Error):
        locale.setlocale(locale.LC_CTYPE, "")
    encoding, _, errors = (os.environ.get("PYTHONIOENCODING") or "").partition(":")
    encoding = encoding or locale.getencoding()
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    streams = []
    for fd in _STDIO:
        raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
        buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        streams.append(
            io.TextIOWrapper(
                buffered,
                encoding=encoding,
                errors="backslashreplace" if fd == 2 else (errors or "strict"),
                line_buffering=fd == 2 or (fd == 1 and raw.isatty()),
                write_through=unbuffered and fd != 0,
            )
        )
    sys.stdin, sys.stdout, sys.stderr = streams


class _Launcher:
    """One launcher's connection and the forked peer it stands for."""

    def __init__(self, conn: socket.socket, pid: int, pidfd: int) -> None:
        self.conn, self.pid, self.pidfd = conn, pid, pidfd
        self.pending = b""

    def on_readable(self) -> bool:
        """A signal to pass on, or the launcher's end (killed: so ends its peer); False then."""
        try:
            data = self.conn.recv(64)
        except OSError:
            data = b""
        if not data:
            self.kill(signal.SIGKILL)
            return False
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            with contextlib.suppress(ValueError):
                self.kill(int(line))
        return True

    def kill(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, ValueError, OSError):
            os.kill(self.pid, signum)


def serve(path: str) -> None:
    """Accept launchers until the parent goes away; one forked peer per launcher."""
    import importlib
    import threading

    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    if threading.active_count() != 1:  # a fork would copy another thread's locks
        print("test fork server: a preloaded module started a thread", file=sys.stderr)
        sys.exit(1)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(128)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    # The parent holds our stdin: its end (it exited, or was killed) ends us and every peer.
    parent = sys.stdin.fileno()
    sel.register(parent, selectors.EVENT_READ, None)
    launchers: dict[int, _Launcher] = {}  # pid -> launcher
    print("ready", flush=True)
    while True:
        for key, _events in sel.select():
            try:
                if _event(key, parent, listener, sel, launchers):
                    return
            except Exception:  # one launcher's trouble must not end the others' server
                import traceback

                traceback.print_exc()


def _event(
    key: selectors.SelectorKey,
    parent: int,
    listener: socket.socket,
    sel: selectors.BaseSelector,
    launchers: dict[int, _Launcher],
) -> bool:
    """Handle one ready file; True when the server should end (its parent is gone)."""
    if key.fileobj == parent:
        if os.read(parent, 1 << 12):
            return False
        for launcher in launchers.values():
            launcher.kill(signal.SIGKILL)
        return True
    if key.fileobj is listener:
        _accept(listener, sel, launchers)
    elif isinstance(key.data, tuple):
        _reap(key.data[1], sel, launchers)
    else:
        launcher = key.data
        assert isinstance(launcher, _Launcher)
        # Reaped earlier in this same batch of events, its connection is closed: nothing
        # to do (and its pid may be another process's by now).
        if launchers.get(launcher.pid) is launcher and not launcher.on_readable():
            sel.unregister(key.fileobj)  # its peer's exit still answers nobody
    return False


def _accept(
    listener: socket.socket, sel: selectors.BaseSelector, launchers: dict[int, _Launcher]
) -> None:
    conn, _ = listener.accept()
    try:
        request, fds = _recv_request(conn)
    except (OSError, EOFError, ValueError):
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        listener.close()
        conn.close()
        for other in launchers.values():
            other.conn.close()
            os.close(other.pidfd)
        _run_child(request, fds)
    for fd in fds:
        os.close(fd)
    launcher = _Launcher(conn, pid, os.pidfd_open(pid))
    launchers[pid] = launcher
    sel.register(launcher.pidfd, selectors.EVENT_READ, ("exit", pid))
    sel.register(conn, selectors.EVENT_READ, launcher)


def _reap(pid: int, sel: selectors.BaseSelector, launchers: dict[int, _Launcher]) -> None:
    launcher = launchers.pop(pid)
    _, status = os.waitpid(pid, 0)
    sel.unregister(launcher.pidfd)
    os.close(launcher.pidfd)
    with contextlib.suppress(KeyError, ValueError):
        sel.unregister(launcher.conn)
    with contextlib.suppress(OSError):
        launcher.conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
    launcher.conn.close()


# -- the suite's side


#: The started server, ``(wrapper, pid)``, or None where it cannot run; unset before the
#: first :func:`peer_python`. ``_thread``'s lock: the launcher imports this module too, and
#: ``threading`` would cost it start-up time for nothing.
_SERVER: list[tuple[str, int] | None] = []
_SERVER_LOCK = _thread.allocate_lock()


def peer_python() -> str:
    """An executable that runs ``SCRIPT ARGS...`` (or ``-m MODULE ARGS...``) like Python does.

    The first call in a process starts the fork server (its parent is this process: it
    ends with it) and writes a two-line shell wrapper around the launcher; later calls
    return the same wrapper, from any thread (the conformance batch asks from several at
    once). Where the server cannot run: ``sys.executable``.
    """
    server = _server()
    return sys.executable if server is None else server[0]


def server_pid() -> int | None:
    """The fork server's pid once :func:`peer_python` started it (for its own tests)."""
    server = _server()
    return None if server is None else server[1]


def _server() -> tuple[str, int] | None:
    with _SERVER_LOCK:
        if not _SERVER:
            _SERVER.append(_start())
        return _SERVER[0]


def _start() -> tuple[str, int] | None:
    import atexit
    import select
    import shlex
    import shutil
    import subprocess
    import tempfile
    import warnings

    if os.environ.get("AGENTHOST_TEST_FORK") == "0" or not hasattr(os, "pidfd_open"):
        return None
    folder = tempfile.mkdtemp(prefix="ahfork-")
    path = os.path.join(folder, "s")
    here = os.path.abspath(__file__)
    log = os.path.join(folder, "log")
    with open(log, "wb") as errors:
        proc = subprocess.Popen(
            [sys.executable, here, "serve", path],
            cwd=os.path.dirname(os.path.dirname(here)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            start_new_session=True,  # a signal to the suite's process group is not for it
        )
    assert proc.stdout is not None

    def stop() -> None:
        """End the server; say so if it ended early or peers had to start cold."""
        died = proc.poll()
        proc.kill()
        proc.wait()
        trouble = [f"it exited early ({died})"] if died is not None else []
        for name in (log, f"{path}.cold"):
            with contextlib.suppress(OSError), open(name) as f:
                trouble += [line.rstrip() for line in f][-20:]
        if trouble:
            print("test fork server trouble:", *trouble, sep="\n  ", file=sys.__stderr__)
        shutil.rmtree(folder, ignore_errors=True)

    # One line once it listens (EOF if it failed to start); bounded like every wait here.
    readable, _, _ = select.select([proc.stdout], [], [], 120)
    if not readable or proc.stdout.readline().strip() != b"ready":
        stop()
        warnings.warn("test fork server did not start; peers start cold", stacklevel=3)
        return None
    atexit.register(stop)
    wrapper = os.path.join(folder, "python")
    launcher = shlex.join([sys.executable, "-I", "-S", here, "launch", path])
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec {launcher} "$@"\n')
    os.chmod(wrapper, 0o755)
    return wrapper, proc.pid


if __name__ == "__main__":
    role, socket_path, *rest = sys.argv[1:]
    if role == "launch":
        sys.exit(launch(socket_path, rest))
    serve(socket_path)
