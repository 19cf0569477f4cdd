"""A fork server for the conformance client: one warm interpreter, a fork per scenario.

Why: one ``make test`` starts the conformance client about 450 times (every scenario of
both suite versions plus the ``--requirements`` run, several clients for some scenarios),
and each start spends about 0.5 s of CPU importing the interpreter's and agenthost's
modules before it sends a byte. On the 2-core CI machine that was some 250 s of CPU, the
largest single cost of the suite. The scenario itself, the code under test, is unchanged:
the same ``client.py`` module, the same ``main``, in a child forked from a process that
has only imported it (no trio run, no thread, no socket opened by agenthost before the
fork).

Two roles, one file:

* ``python forkserver.py serve SOCKET``: imports ``client.py`` and the modules it imports
  on first use, listens on a Unix socket, and for every launcher forks a child that takes
  the launcher's stdin, stdout and stderr (passed over the socket), its environment,
  working directory and arguments, and runs ``client.main``. It reports the child's exit
  status back, and kills the child when its launcher goes away (the suite's timeout kills
  the launcher). Single-threaded (``selectors`` and pidfds), so a fork never copies a lock
  another thread holds.
* ``python -I -S forkserver.py launch SOCKET ARGS...``: what the suite runs as the client
  command. Standard library only, started without ``site``: about 15 ms. It exits with
  the client's status.

Linux only (``os.pidfd_open``); ``harness.client_command`` falls back to starting
``client.py`` directly where the server cannot run, or with ``AGENTHOST_CONFORMANCE_FORK=0``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys

__all__ = ["launch", "serve"]

_HEADER = 8
_STDIO = (0, 1, 2)


def launch(path: str, args: list[str]) -> int:
    """Hand this process's stdio, environment and arguments to the server; its exit code."""
    body = json.dumps({"argv": args, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    data = len(body).to_bytes(_HEADER, "big") + body
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(path)
        except OSError as exc:
            print(f"conformance fork server: cannot connect to {path}: {exc}", file=sys.stderr)
            return 1
        sent = socket.send_fds(sock, [data], list(_STDIO))
        sock.sendall(data[sent:])
        line = sock.makefile("rb").readline()
    try:
        code = int(line)
    except ValueError:
        print("conformance fork server: no exit status for the client", file=sys.stderr)
        return 1
    return 128 - code if code < 0 else code  # killed by a signal: the shell's convention


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


def _run_child(request: dict[str, object], fds: list[int], main: object) -> None:
    """In the forked child: become the launcher's client process, then exit. Never returns."""
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
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = [str(arg) for arg in argv]
        assert callable(main)
        code = main(sys.argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(path: str) -> None:
    """Accept launchers until killed; one forked client per launcher."""
    import importlib.util
    import selectors

    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("conformance_client", f"{here}/client.py")
    assert spec is not None and spec.loader is not None
    client = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = client
    spec.loader.exec_module(client)
    # What a client imports on first use (the HTTP transports, the OAuth flow, the token
    # store's keyring), so a child does not import it again.
    import agenthost.auth.flow
    import agenthost.auth.store
    import agenthost.connection
    import agenthost.transports.http
    import agenthost.transports.lean  # noqa: F401

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(128)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, ("accept", 0))
    # The harness holds our stdin: its end (the harness exited, or was killed) ends us.
    sel.register(sys.stdin, selectors.EVENT_READ, ("harness", 0))
    children: dict[int, tuple[socket.socket, int]] = {}  # pid -> (launcher, pidfd)
    print("ready", flush=True)
    while True:
        for key, _events in sel.select():
            kind, pid = key.data
            if kind == "harness" and not os.read(sys.stdin.fileno(), 1 << 12):
                for child in children:
                    os.kill(child, signal.SIGKILL)
                return
            if kind == "accept":
                conn, _ = listener.accept()
                try:
                    request, fds = _recv_request(conn)
                except (OSError, EOFError, ValueError):
                    conn.close()
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                child = os.fork()
                if child == 0:
                    listener.close()
                    conn.close()
                    for other, pidfd in children.values():
                        other.close()
                        os.close(pidfd)
                    _run_child(request, fds, client.main)
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(child)
                children[child] = (conn, pidfd)
                sel.register(pidfd, selectors.EVENT_READ, ("exit", child))
                sel.register(conn, selectors.EVENT_READ, ("launcher", child))
            elif kind == "exit":
                conn, pidfd = children.pop(pid)
                _, status = os.waitpid(pid, 0)
                sel.unregister(pidfd)
                os.close(pidfd)
                with contextlib.suppress(KeyError):
                    sel.unregister(conn)
                with contextlib.suppress(OSError):
                    conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
                conn.close()
            elif kind == "launcher":
                # The launcher went away (killed by the suite's timeout): so does the client.
                sel.unregister(key.fileobj)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    role, socket_path, *rest = sys.argv[1:]
    if role == "launch":
        sys.exit(launch(socket_path, [os.path.join(os.path.dirname(__file__), "client.py"), *rest]))
    serve(socket_path)
