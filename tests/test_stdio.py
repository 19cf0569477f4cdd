"""The stdio transport against real child processes: framing, limits, env, shutdown."""

from __future__ import annotations

import logging
import os
import signal
import sys
from functools import partial
from pathlib import Path

import orjson
import pytest
import trio

from agenthost.connection import open_session
from agenthost.errors import MessageTooLarge, TransportClosed, TransportError
from agenthost.protocol.jsonrpc import Message, Notification, Request, Response
from agenthost.session import ClientSession
from agenthost.transports.stdio import child_environment, open_stdio_transport
from tests.helpers import alive

PEERS = Path(__file__).parent / "peers"
CRASHY = str(PEERS / "crashy_server.py")
PY = sys.executable


def script(code: str) -> list[str]:
    return ["-c", code]


async def test_round_trip_with_a_real_process() -> None:
    async with open_stdio_transport(PY, [CRASHY], name="crashy") as transport:
        await transport.send(Request(1, "ping"))
        assert await transport.receive() == Response(1, {})
        pid = transport.pid
    assert not alive(pid)


async def test_malformed_lines_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    async with (
        open_stdio_transport(PY, [CRASHY, "--garbage"], name="crashy") as transport,
        open_session(transport, name="crashy") as session,
    ):
        await session.ping()
        tools = await session.list_tools()
        assert [t.name for t in tools] == ["echo", "hang", "crash"]
    assert "crashy: skipping malformed message" in caplog.text
    assert "unknown request id" in caplog.text


async def test_server_killed_mid_call_fails_fast_with_name() -> None:
    async with (
        open_stdio_transport(PY, [CRASHY], name="crashy") as transport,
        open_session(transport, name="crashy") as session,
    ):
        pid = transport.pid
        with trio.fail_after(1), pytest.raises(TransportClosed) as info:
            await session.call_tool("crash", {}, timeout=None)
        assert "crashy" in str(info.value)
        assert "exited with code 3" in str(info.value)
    assert not alive(pid)


async def test_external_kill_mid_call() -> None:
    async with (
        open_stdio_transport(PY, [CRASHY], name="victim") as transport,
        open_session(transport, name="victim") as session,
    ):

        async def kill() -> None:
            await trio.sleep(0.1)
            os.kill(transport.pid, signal.SIGKILL)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(kill)
            with trio.fail_after(1), pytest.raises(TransportClosed) as info:
                await session.call_tool("hang", {}, timeout=None)
        assert "victim" in str(info.value)
        assert "SIGKILL" in str(info.value)


async def test_cancelling_a_call_reaches_the_server(tmp_path: Path) -> None:
    peer_log = tmp_path / "peer.jsonl"
    async with (
        open_stdio_transport(
            PY, [CRASHY], name="crashy", env={"AGENTHOST_PEER_LOG": str(peer_log)}
        ) as transport,
        open_session(transport, name="crashy") as session,
    ):
        with trio.move_on_after(0.2):
            await session.call_tool("hang", {}, timeout=None)
        result = await session.call_tool("echo", {"message": "after"})
        assert result.content[0].text == "after"  # type: ignore[union-attr]
    received = [orjson.loads(line) for line in peer_log.read_bytes().splitlines()]
    hang = next(m for m in received if m.get("params", {}).get("name") == "hang")
    cancels = [m for m in received if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [hang["id"]]


async def test_env_is_an_allowlist() -> None:
    host_env = {"PATH": os.environ["PATH"], "HOME": "/home/x", "OPENAI_API_KEY": "sk-secret"}
    env = child_environment({"EXTRA": "1"}, host_env)
    assert env == {"PATH": os.environ["PATH"], "HOME": "/home/x", "EXTRA": "1"}
    code = (
        "import os, json; print(json.dumps({'jsonrpc': '2.0', 'method': 'env',"
        " 'params': dict(os.environ)}), flush=True)"
    )
    os.environ["AGENTHOST_TEST_SECRET_KEY"] = "do-not-leak"
    try:
        async with open_stdio_transport(
            PY, script(code), name="env", env={"GIVEN": "yes"}
        ) as transport:
            message = await transport.receive()
    finally:
        del os.environ["AGENTHOST_TEST_SECRET_KEY"]
    assert isinstance(message, Notification)
    assert message.params is not None
    assert message.params["GIVEN"] == "yes"
    assert "AGENTHOST_TEST_SECRET_KEY" not in message.params
    assert "PATH" in message.params


async def test_oversized_message_is_refused_without_unbounded_memory() -> None:
    code = (
        "import sys; sys.stdout.write('x' * 300000); sys.stdout.flush(); import time; time.sleep(5)"
    )
    async with open_stdio_transport(
        PY, script(code), name="big", max_message_size=100_000, shutdown_timeout=0.5
    ) as transport:
        with pytest.raises(MessageTooLarge, match="big: message larger than the maximum"):
            await transport.receive()
        assert transport.bytes_unread <= 100_000 + 256 * 1024


async def test_oversized_complete_line_is_refused() -> None:
    code = "print('[' + '1,' * 200000 + '1]', flush=True); import time; time.sleep(5)"
    async with open_stdio_transport(
        PY, script(code), name="big", max_message_size=10_000, shutdown_timeout=0.5
    ) as transport:
        with pytest.raises(MessageTooLarge):
            await transport.receive()


async def test_command_not_found_is_clear() -> None:
    with pytest.raises(TransportError, match="nope: cannot start server: command not found"):
        async with open_stdio_transport("definitely-not-a-command-xyz", name="nope"):
            pass


async def test_stderr_goes_to_logging_under_the_server_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agenthost.server")
    async with open_stdio_transport(PY, [CRASHY], name="chatty") as transport:
        await transport.send(Request(1, "ping"))
        await transport.receive()
        await trio.sleep(0.1)
    assert any(
        r.name == "agenthost.server.chatty" and "started" in r.getMessage() for r in caplog.records
    )


async def test_crash_on_start_reports_stderr() -> None:
    async with open_stdio_transport(PY, [CRASHY, "--crash-on-start"], name="dead") as transport:
        with pytest.raises(TransportClosed) as info:
            await transport.receive()
    assert "exited with code 1" in str(info.value)
    assert "last stderr" in str(info.value)


IGNORES_TERM = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
    " sys.stdin.close(); print('ready', file=sys.stderr, flush=True); time.sleep(60)"
)


async def test_shutdown_escalates_to_sigkill() -> None:
    with trio.fail_after(5):
        async with open_stdio_transport(
            PY, script(IGNORES_TERM), name="stubborn", shutdown_timeout=0.2
        ) as transport:
            pid = transport.pid
            await trio.sleep(0.2)
    assert transport.process.returncode == -signal.SIGKILL
    assert not alive(pid)


async def test_cancellation_still_shuts_down() -> None:
    with trio.move_on_after(0.3):
        async with open_stdio_transport(
            PY, script(IGNORES_TERM), name="stubborn", shutdown_timeout=0.2
        ) as transport:
            pid = transport.pid
            await trio.sleep_forever()
    assert not alive(pid)


async def test_exception_still_shuts_down() -> None:
    with pytest.raises(ZeroDivisionError):
        async with open_stdio_transport(PY, [CRASHY], name="crashy") as transport:
            pid = transport.pid
            1 / 0  # noqa: B018
    assert not alive(pid)


async def test_grandchildren_do_not_outlive_the_server(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    wrapper = f"sleep 60 & echo $! > {pidfile}; exec {PY} {CRASHY}"
    async with open_stdio_transport("sh", ["-c", wrapper], name="wrapped") as transport:
        await transport.send(Request(1, "ping"))
        assert await transport.receive() == Response(1, {})
    grandchild = int(pidfile.read_text())
    with trio.fail_after(3):
        while alive(grandchild):
            await trio.sleep(0.05)


ECHO_LENGTHS = """
import json, sys, time
time.sleep(0.3)  # let the pipe fill, so senders queue behind a blocked write
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        print(json.dumps({"jsonrpc": "2.0", "method": "corrupt", "params": {"n": len(line)}}),
              flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                      "result": {"size": len(msg["params"]["blob"])}}), flush=True)
"""


async def test_concurrent_large_sends_stay_whole_under_cancellation() -> None:
    """Group-committed writes never cut a frame, even when senders are cancelled.

    A sender parked behind the backlog (over the high water mark) and cancelled queues
    nothing; one whose ``send`` returned had its bytes queued, and they go out whole.
    """
    import random

    rng = random.Random(7)
    sizes = {i: rng.choice([10, 1000, 70_000, 300_000]) for i in range(60)}
    answered: dict[int, int] = {}
    returned: set[int] = set()
    corrupt: list[Notification] = []
    async with open_stdio_transport(PY, script(ECHO_LENGTHS), name="echo") as transport:

        async def reader() -> None:
            while True:
                message = await transport.receive()
                if isinstance(message, Response):
                    answered[int(message.id)] = message.result["size"]
                else:
                    corrupt.append(message)  # type: ignore[arg-type]

        scopes = [trio.CancelScope() for _ in sizes]

        async def sender(i: int) -> None:
            request = Request(i, "blob", {"blob": "x" * sizes[i]})
            with scopes[i]:
                await transport.send(request)
                returned.add(i)

        parked: list[int] = []

        async def cancel_the_parked() -> None:
            # Once every sender is parked behind the full pipe or has queued its bytes,
            # every other parked one is cancelled. Chosen among the parked (not by a fixed
            # index, which the scheduler's order may leave all queued: seen in CI) and at
            # that moment, not after a fixed time: on a loaded machine a sender may not
            # have started within any fixed time.
            await trio.testing.wait_all_tasks_blocked()
            parked.extend(i for i in sizes if i not in returned)
            for i in parked[::2]:
                scopes[i].cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            async with trio.open_nursery() as senders:
                for i in sizes:
                    senders.start_soon(sender, i)
                senders.start_soon(cancel_the_parked)
            with trio.fail_after(20):
                while not returned <= answered.keys():
                    await trio.sleep(0.01)
            await trio.sleep(0.1)  # a cancelled sender's request, if queued, would answer now
            nursery.cancel_scope.cancel()
    cancelled = {i for i in sizes if scopes[i].cancelled_caught}
    assert corrupt == []
    assert len(parked) >= 2  # the backlog did fill: the case under test happened
    assert cancelled == set(parked[::2])
    assert answered.keys() == returned == sizes.keys() - cancelled
    assert all(answered[i] == sizes[i] for i in answered)


async def test_blank_and_whitespace_lines_are_ignored(caplog: pytest.LogCaptureFixture) -> None:
    code = (
        "import sys; sys.stdout.write('\\n   \\n\\t\\n"
        '{"jsonrpc":"2.0","method":"hello"}\\n\'); sys.stdout.flush(); import time; time.sleep(2)'
    )
    async with open_stdio_transport(
        PY, script(code), name="blank", shutdown_timeout=0.2
    ) as transport:
        assert await transport.receive() == Notification("hello")
    assert "malformed" not in caplog.text


STOPS_READING = """
import json, sys
line = sys.stdin.readline()
request = json.loads(line)
print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {
    "protocolVersion": request["params"]["protocolVersion"], "capabilities": {"tools": {}},
    "serverInfo": {"name": "deaf", "version": "1"}}}), flush=True)
sys.stdin.readline()  # notifications/initialized
import time
time.sleep(30)  # alive, but never reads again: the pipe fills up
"""


async def test_timeout_covers_writing_the_request() -> None:
    """A server that stopped reading must not make a request outlive its timeout."""
    from agenthost.errors import AgentHostTimeout

    async with (
        open_stdio_transport(PY, script(STOPS_READING), name="deaf", shutdown_timeout=0.2) as t,
        open_session(t, name="deaf") as session,
    ):
        with trio.fail_after(5), pytest.raises(AgentHostTimeout):
            await session.call_tool("x", {"blob": "y" * 2_000_000}, timeout=0.5)


async def test_senders_behind_a_stalled_pipe_wait_until_their_deadline() -> None:
    """Backpressure: past the high-water mark a sender waits for the server to read, and
    a sender whose deadline passes first has queued nothing (memory stays bounded)."""
    from agenthost.errors import AgentHostTimeout

    async with (
        open_stdio_transport(PY, script(STOPS_READING), name="deaf", shutdown_timeout=0.2) as t,
        open_session(t, name="deaf") as session,
    ):
        with trio.fail_after(5), pytest.raises(AgentHostTimeout):
            await session.call_tool("x", {"blob": "y" * 2_000_000}, timeout=0.3)
        stuck = t.bytes_unsent
        assert stuck > 1_000_000  # the server never read it
        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(partial(_expect_timeout, session, 0.3))
        assert t.bytes_unsent == stuck


async def _expect_timeout(session: ClientSession, timeout: float) -> None:
    from agenthost.errors import AgentHostTimeout

    start = trio.current_time()
    with trio.fail_after(5), pytest.raises(AgentHostTimeout):
        await session.call_tool("x", {"blob": "small"}, timeout=timeout)
    assert trio.current_time() - start >= timeout


ASKS_THEN_CANCELS = """
import json, os, sys
log = open(os.environ["PEER_LOG"], "a")
request = json.loads(sys.stdin.readline())
print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {
    "protocolVersion": request["params"]["protocolVersion"], "capabilities": {},
    "serverInfo": {"name": "fickle", "version": "1"}}}), flush=True)
sys.stdin.readline()  # notifications/initialized
# one write: a request, and at once its cancellation
sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"}) + "\\n"
                 + json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                               "params": {"requestId": "r1"}}) + "\\n")
sys.stdout.flush()
for line in sys.stdin:
    log.write(line)
    log.flush()
"""


async def test_a_request_cancelled_in_the_same_read_is_never_handled(tmp_path: Path) -> None:
    from agenthost.asks import ClientHandlers
    from agenthost.protocol.types import ListRootsResult

    called: list[object] = []

    async def roots(ctx: object, params: object) -> ListRootsResult:
        called.append(ctx)
        return ListRootsResult(roots=[])

    log = tmp_path / "peer.log"
    log.touch()
    async with (
        open_stdio_transport(
            PY, script(ASKS_THEN_CANCELS), name="fickle", env={"PEER_LOG": str(log)}
        ) as t,
        open_session(t, name="fickle", handlers=ClientHandlers(roots=roots)) as session,
    ):
        await trio.sleep(0.3)
        await session.notify("notifications/roots/list_changed")  # a marker line
        with trio.fail_after(5):
            while "list_changed" not in log.read_text():
                await trio.sleep(0.02)
    assert called == []
    assert '"r1"' not in log.read_text()  # no response to the cancelled request


# A server that reads `n` requests, then answers all of them with one write, forever.
_BATCH_ANSWERS = """
import json, os, sys
n = int(sys.argv[1])
lines = iter(sys.stdin.buffer)
while True:
    ids = [json.loads(next(lines))["id"] for _ in range(n)]
    out = "".join(json.dumps({"jsonrpc": "2.0", "id": i, "result": {}}) + "\\n" for i in ids)
    os.write(1, out.encode())
"""


async def test_callers_woken_by_one_read_share_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every answer in, the callers one read wakes send their next requests in one
    write: none of them writes alone (one wake-up of the server per burst, not two)."""
    n = 8
    writes: list[int] = []
    real_write = os.write
    with trio.fail_after(10):
        async with open_stdio_transport(PY, [*script(_BATCH_ANSWERS), str(n)], name="b") as t:
            fd = t.stdin_fd

            def counting_write(target: int, data: bytes) -> int:
                if target == fd:
                    lines = bytes(data).splitlines()
                    writes.append(sum(orjson.loads(line)["id"] >= n for line in lines))
                return real_write(target, data)

            monkeypatch.setattr(os, "write", counting_write)

            answers: dict[int, trio.Event] = {}

            async def route() -> None:
                while True:
                    message = await t.receive()
                    assert isinstance(message, Response)
                    answers.pop(int(message.id)).set()

            async def request(request_id: int) -> None:
                answers[request_id] = done = trio.Event()
                await t.send(Request(request_id, "ping"))
                await done.wait()

            async def caller(i: int) -> None:
                await request(i)
                await request(n + i)  # woken with its n-1 peers by one read: one burst

            async with trio.open_nursery() as nursery:
                nursery.start_soon(route)
                async with trio.open_nursery() as callers:
                    for i in range(n):
                        callers.start_soon(caller, i)
                nursery.cancel_scope.cancel()
    # The second round's requests (ids n..2n-1) all went out in one write.
    assert [count for count in writes if count] == [n], writes


async def test_a_large_result_is_not_kept_after_its_caller_drops_it() -> None:
    """Nothing in the session holds the last result while it waits for the next message:
    a 8 MiB result costs memory only while its caller keeps it (the peak RSS of the
    large-result benchmark was 4x the payload with the reader holding one)."""
    import tracemalloc

    from tests.conftest import MINIMAL_SERVER

    size = 8 * 1024 * 1024
    with trio.fail_after(30):
        async with (
            open_stdio_transport(PY, [str(MINIMAL_SERVER)], name="minimal") as transport,
            open_session(transport, name="minimal") as session,
        ):
            tracemalloc.start()
            try:
                result = await session.call_tool("blob", {"message": "m1:", "bytes": size})
                assert len(result.content[0].text) == size  # type: ignore[union-attr]
                held = tracemalloc.get_traced_memory()[0]
                del result
                await trio.testing.wait_all_tasks_blocked()
                released = tracemalloc.get_traced_memory()[0]
            finally:
                tracemalloc.stop()
    assert held >= size
    assert released < size / 4, f"{released} bytes still held after the result was dropped"


BATCH_THEN_LINES = """
import json, sys, time
def note(name):
    return {"jsonrpc": "2.0", "method": name}
good = json.dumps([note(f"n{k}") for k in range(3000)])
# This batch is cut short: the members before the cut reach the host, then a warning.
bad = json.dumps([note("b0"), note("b1")] + [note("pad")] * 3000)[:-20]
sys.stdout.write(good + "\\n" + json.dumps(note("after")) + "\\n" + bad + "\\n")
sys.stdout.write(json.dumps(note("last")) + "\\n")
sys.stdout.flush()
time.sleep(5)
"""


async def test_a_large_batch_is_read_member_by_member_in_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A batch line past 64 KiB is decoded a slice at a time (issue 14: parsing 300k pings
    whole held the GIL 0.4 s); the lines after it, in the same read, come after it."""
    async with open_stdio_transport(
        PY, script(BATCH_THEN_LINES), name="batch", shutdown_timeout=0.2
    ) as transport:
        got: list[Message] = []
        with trio.fail_after(10):
            while not got or got[-1] != Notification("last"):
                got.append(await transport.receive())
    names = [m.method for m in got if isinstance(m, Notification)]
    assert names[:3000] == [f"n{k}" for k in range(3000)]
    assert names[3000] == "after"
    assert names[3001:3003] == ["b0", "b1"]
    assert names[-1] == "last"
    assert "batch: rest of a batch skipped: invalid JSON" in caplog.text
