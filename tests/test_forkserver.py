"""The suite's fork server (tests/forkserver.py) stands in for ``python`` faithfully.

Most of the suite's Python peers and CLI runs start through it, so a launcher that lost
an exit status, a signal or a peer would make many tests wrong at once; and a server that
died would make them fail for a reason that has nothing to do with agenthost.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.forkserver import peer_python, server_pid
from tests.helpers import alive

pytestmark = pytest.mark.timeout(120)


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "peer.py"
    path.write_text(body, encoding="utf-8")
    return str(path)


def test_a_peer_runs_as_main_with_its_argv_env_cwd_and_stdio(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        "import os, sys\n"
        "line = sys.stdin.readline().strip()\n"
        "print(__name__, sys.argv[1:], os.environ['PEER_X'], os.getcwd(), line)\n"
        "print('to stderr', file=sys.stderr)\n"
        "sys.exit(7)\n",
    )
    proc = subprocess.run(
        [peer_python(), script, "a", "b c"],
        input="hello\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PEER_X": "x1", "PATH": os.environ["PATH"]},
        timeout=60,
    )
    assert proc.returncode == 7
    assert proc.stdout == f"__main__ ['a', 'b c'] x1 {tmp_path} hello\n"
    assert proc.stderr == "to stderr\n"


def test_a_module_runs_with_dash_m() -> None:
    proc = subprocess.run(
        [peer_python(), "-m", "agenthost", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("agenthost ")


def test_sigterm_reaches_the_peer_and_the_launcher_ends_as_it_did(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        "import os, signal, sys, time\n"
        "def bye(*_):\n"
        # os.write, not print: the signal may come while print('ready') is still in its
        # flush, and the buffered writer refuses a reentrant call (seen once in CI).
        "    os.write(1, b'got sigterm\\n')\n"
        "    sys.exit(3)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n",
    )
    with subprocess.Popen(
        [peer_python(), script], stdout=subprocess.PIPE, text=True, start_new_session=True
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline() == "got sigterm\n"
        assert proc.wait(30) == 3
    # Killed by a signal it does not handle: the launcher dies of the same signal.
    plain = _script(tmp_path, "import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    with subprocess.Popen([peer_python(), plain], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == -signal.SIGTERM


def test_a_killed_launcher_takes_its_peer_and_the_server_goes_on(tmp_path: Path) -> None:
    """Many launchers killed just as their peers exit (both ends ready in one batch of
    events: this once crashed the server, and every later peer of its worker failed)."""
    pids = tmp_path / "pids"
    script = _script(
        tmp_path,
        "import os, sys, time\n"
        f"open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        "print('ready', flush=True)\n"
        "if sys.argv[1] == 'stay': time.sleep(60)\n",
    )
    for round_ in range(30):
        with subprocess.Popen(
            [peer_python(), script, "stay" if round_ % 3 == 0 else "go"],
            stdout=subprocess.PIPE,
            text=True,
        ) as proc:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n"
            proc.kill()
            proc.wait(30)
    peers = [int(line) for line in pids.read_text().split()]
    deadline = time.monotonic() + 20
    while any(alive(pid) for pid in peers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in peers if alive(pid)], "a killed launcher's peer lives on"
    done = subprocess.run([peer_python(), script, "go"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ready\n", "")


def test_a_launcher_and_its_peer_ending_together_leave_the_server_serving(
    tmp_path: Path,
) -> None:
    """Both ends ready in one batch of the server's events: the peer's exit, then its
    launcher's closed connection, which the reaping had closed already. This once crashed
    the server (every later peer of that pytest worker failed to start)."""
    script = _script(tmp_path, "import os, sys\nprint(os.getpid(), flush=True)\nsys.stdin.read()\n")
    peer_python()
    pid = server_pid()
    assert pid is not None
    for _ in range(8):
        proc = subprocess.Popen(
            [peer_python(), script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdin is not None and proc.stdout is not None
        peer = int(proc.stdout.readline())
        os.kill(pid, signal.SIGSTOP)
        try:
            proc.stdin.close()  # the peer ends...
            proc.kill()  # ...and so does its launcher, while the server cannot look
            proc.wait(30)
            deadline = time.monotonic() + 20
            while alive(peer) and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            os.kill(pid, signal.SIGCONT)
        proc.stdout.close()
    assert alive(pid), "the fork server died"
    parent = _script(tmp_path, "import os\nprint(os.getppid())\n")
    done = subprocess.run([peer_python(), parent], capture_output=True, text=True, timeout=60)
    assert (done.stdout, done.stderr) == (f"{pid}\n", "")  # forked by it, not started cold


def test_the_peers_stdout_is_line_buffered_on_a_terminal(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    script = _script(tmp_path, "import sys\nprint('first line')\nsys.stdin.readline()\n")
    child = pexpect.spawn(peer_python(), [script], encoding="utf-8", timeout=30)
    try:
        child.expect("first line")  # before the peer exits or flushes by hand
        child.sendline("")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
