"""Attack on the stdio caller that reads its own answer (``RPC._read_answer``,
``StdioTransport.take_reading / receive_answers / release_reading / abort``).

A hostile stdio server (``alone_stdio_server.py``, a real child process) writes whatever
bytes each test scripts, in whatever writes and at whatever times, exactly where a call
made back to back (see ``tests/test_stdio_answer_alone.py``) reads the pipe itself. Each
test checks that the call ends with the right answer or a clear error within its timeout,
that the next call works, and that nothing hangs.
"""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel

from agenthost.asks import ClientHandlers, RequestContext
from agenthost.connection import open_session
from agenthost.errors import AgentHostError, AgentHostTimeout, JSONRPCError, TransportClosed
from agenthost.protocol.types import CallToolResult, TextContent
from agenthost.session import ClientSession
from agenthost.transports.stdio import StdioTransport, open_stdio_transport

pytestmark = [pytest.mark.serial, pytest.mark.timeout(60)]

SERVER = str(Path(__file__).resolve().parent / "alone_stdio_server.py")


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


class Inline:
    """Counts the caller's own reads of the pipe (the inline path taken), and lets a test
    watch what each read returned."""

    def __init__(self, transport: StdioTransport) -> None:
        self.reads = 0
        self.last: Any = None
        self.watchers: list[Any] = []
        original = transport.receive_answers

        async def counted() -> Any:
            self.reads += 1
            self.last = got = await original()
            for watcher in self.watchers:
                watcher(got)
            return got

        transport.receive_answers = counted  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def no_tracebacks(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No ERROR and no traceback logged, whatever the server wrote."""
    caplog.set_level(logging.WARNING)
    yield
    bad = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, bad[:5]


@asynccontextmanager
async def served(
    env: Mapping[str, str] | None = None,
    notifications: Mapping[str, Any] | None = None,
    shutdown_timeout: float = 2.0,
) -> AsyncIterator[tuple[ClientSession, StdioTransport, Inline]]:
    handlers = ClientHandlers(notifications=dict(notifications or {}))
    async with (
        open_stdio_transport(
            sys.executable,
            [SERVER],
            name="alone",
            env=dict(env or {}),
            shutdown_timeout=shutdown_timeout,
        ) as transport,
        open_session(transport, name="alone", handlers=handlers) as session,
    ):
        assert isinstance(transport, StdioTransport)
        yield session, transport, Inline(transport)


async def chain(session: ClientSession, calls: int = 30) -> None:
    """Back-to-back calls: a call made right after this returns reads its own answer."""
    for i in range(calls):
        assert text_of(await session.call_tool("echo", {"message": f"w{i}"})) == f"w{i}"


async def echo_ok(session: ClientSession, message: str = "after") -> None:
    with trio.fail_after(5):
        assert text_of(await session.call_tool("echo", {"message": message})) == message


def script(message: str = "ok", *steps: dict[str, Any]) -> dict[str, Any]:
    return {"message": message, "steps": list(steps)}


def stray(request_id: int) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {}}) + "\n"


# -- a deadline that passes while the caller is between two reads ---------------------------


class SlowSink(logging.Handler):
    """A slow log handler (a remote sink, a blocked terminal): each warning about a stray
    answer or a malformed line takes ``delay`` seconds, in the task that logs it."""

    def __init__(self, delay: float) -> None:
        super().__init__(logging.WARNING)
        self.delay = delay
        self.hits = 0

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "unknown request id" in text or "malformed message" in text:
            self.hits += 1
            time.sleep(self.delay)


@pytest.mark.parametrize("junk", ["stray_answer", "malformed_line"])
async def test_a_timeout_between_two_reads_of_the_caller_still_bites(junk: str) -> None:
    """The server writes a stray answer (or a malformed line), then nothing. The caller
    reads it and settles it (unknown id) or skips it (malformed): a warning, which a slow
    log handler makes outlast the call's deadline. It then takes a turn (``checkpoint``)
    before its next read. The watchdog and the caller are then both due: when the
    watchdog runs first (Trio orders a batch either way), ``time_out`` sets the outcome
    and calls ``transport.abort()``, which does nothing (the caller is not on the fd).
    Before the fix the caller went back to ``wait_readable`` without looking at its
    outcome, and waited for the server's next write, past its timeout, for ever (seen:
    still waiting 1 s later); now it looks before every read."""
    sink = SlowSink(0.08)
    logger = logging.getLogger("agenthost")
    async with served() as (session, _, inline):
        hung = False
        attempt = 0
        logger.addHandler(sink)
        try:
            for attempt in range(30):
                await chain(session, 20)
                reads, hits = inline.reads, sink.hits
                started = trio.current_time()
                with trio.move_on_after(1) as scope, pytest.raises(AgentHostTimeout):
                    line = stray(900_000 + attempt) if junk == "stray_answer" else "not json\n"
                    await session.call_tool(
                        "script", script("never", {"write": line}), timeout=0.05
                    )
                assert inline.reads > reads
                assert sink.hits > hits  # the junk was read
                if scope.cancelled_caught:
                    hung = True
                    break
                assert trio.current_time() - started < 0.8
        finally:
            logger.removeHandler(sink)
        await echo_ok(session)
    assert not hung, f"the call outlived its 0.05 s timeout by 1 s (attempt {attempt})"


# -- a call made while the reader decodes a large frame in a worker thread --------------------

NOTE = '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"%s"}}'


async def test_a_call_while_the_reader_decodes_a_large_frame_in_a_thread() -> None:
    """The server writes a line of 1.5 MB (JSON whitespace: skipped), then in one write the
    newline, 200k blank lines, a notification ``N1`` and the first half of another one
    (``M1``); ``M1``'s second half comes just before the next answer. The reader decodes
    that 1.7 MB frame in a worker thread (``_DECODE_IN_THREAD``), with ``_buf`` swapped
    out and the queue still empty. Before the fix a call made then passed
    ``take_reading`` and read the pipe itself, concurrently with the thread's ``_split``
    on the same queue and ``_buf`` (now the reading changes hands only at the reader's
    turn before a read). The caller decoded M1's second half alone (malformed, skipped),
    and the thread then left M1's first half in ``_buf`` in front of the next line: M1 was
    lost, and the answer overtook N1, written before it."""
    seen: list[str] = []
    answered_before: list[list[str]] = []

    async def on_message(_: RequestContext, params: Mapping[str, Any]) -> None:
        seen.append(str(params.get("data")))

    m1 = NOTE % "M1"
    half = len(m1) // 2
    async with served(notifications={"notifications/message": on_message}) as (
        session,
        transport,
        _inline,
    ):
        with trio.fail_after(10):
            await session.call_tool(
                "script",
                script(
                    "s",
                    {"pipe_size": 1024 * 1024},
                    {"write": "@ANSWER@\n"},
                    {"sleep": 0.05},
                    {"spaces": 1_500_000},
                    {"sleep": 0.3},
                    {"newlines_first": 200_001, "write": NOTE % "N1" + "\n" + m1[:half]},
                    {"prefix": m1[half:] + "\n"},
                ),
            )
            # The reader holds the long line, then swaps it out to decode it in a thread.
            while transport.bytes_unread < 1_000_000:
                await trio.lowlevel.checkpoint()
            while transport.bytes_unread:
                await trio.lowlevel.checkpoint()
            # (This call reads inline here, in every run seen: the attack runs. A fix that
            # keeps it off the pipe while the reader decodes makes the test pass.)
            assert text_of(await session.call_tool("echo", {"message": "B"})) == "B"
            answered_before.append(list(seen))
            await trio.sleep(0.3)  # the thread is done
            after: str | None = None
            with suppress(AgentHostTimeout):  # the next answer must not be lost
                after = text_of(await session.call_tool("echo", {"message": "C"}, timeout=1))
        assert after == "C"
        assert seen == ["N1", "M1"], seen
        assert answered_before[0][:1] == ["N1"], answered_before  # N1 came before B's answer


# -- ids of the wrong type, duplicates, errors ------------------------------------------------


def with_id(id_json: str, text: str = "odd") -> str:
    result = json.dumps({"content": [{"type": "text", "text": text}]})
    return f'{{"jsonrpc":"2.0","id":{id_json},"result":{result}}}\n'


ODD_IDS = {
    "string": '"@ID@"',
    "true": "true",
    "false": "false",
    "null": "null",
    "float": "@ID@.0",
    "exponent": "@ID@e0",
    "huge": "123456789012345678901234567890",
    "negative": "-@ID@",
    "object": '{"id":@ID@}',
    "array": "[@ID@]",
}


@pytest.mark.parametrize("form", sorted(ODD_IDS))
async def test_an_answer_with_the_id_in_another_type_is_not_taken(form: str) -> None:
    """``@ID@`` in another JSON type (or a near miss) before the real answer: never taken
    for the call's answer; the real one is."""
    async with served() as (session, _, inline):
        await chain(session)
        reads = inline.reads
        with trio.fail_after(3):
            steps = ({"write": with_id(ODD_IDS[form])}, {"write": "@ANSWER@\n"})
            result = await session.call_tool("script", script("real", *steps), timeout=2)
        assert text_of(result) == "real"
        assert inline.reads > reads
        await echo_ok(session)


@pytest.mark.parametrize("form", ["string", "true", "float", "null"])
async def test_only_an_odd_id_and_the_call_times_out_on_time(form: str) -> None:
    async with served() as (session, _, inline):
        await chain(session)
        reads = inline.reads
        started = trio.current_time()
        with trio.fail_after(3), pytest.raises(AgentHostTimeout):
            steps = ({"write": with_id(ODD_IDS[form])},)
            await session.call_tool("script", script("never", *steps), timeout=0.3)
        assert trio.current_time() - started < 1.0
        assert inline.reads > reads
        await echo_ok(session)


@pytest.mark.parametrize("gap", [0.0, 0.02])
async def test_a_duplicate_answer_is_taken_once(gap: float) -> None:
    async with served() as (session, _, _inline):
        for i in range(5):
            await chain(session, 10)
            steps = ({"write": "@ANSWER@\n"}, {"sleep": gap}, {"write": with_id("@ID@", "dup")})
            with trio.fail_after(3):
                result = await session.call_tool("script", script(f"first{i}", *steps))
            assert text_of(result) == f"first{i}"
            await echo_ok(session, f"next{i}")


async def test_an_error_response_is_the_callers_error() -> None:
    error = '{"jsonrpc":"2.0","id":@ID@,"error":{"code":-32042,"message":"refused here"}}\n'
    async with served() as (session, _, inline):
        for _ in range(5):
            await chain(session, 10)
            reads = inline.reads
            with trio.fail_after(3), pytest.raises(JSONRPCError) as caught:
                await session.call_tool("script", script("x", {"write": error}))
            assert caught.value.code == -32042
            assert inline.reads > reads
        await echo_ok(session)


def logged(log_file: Path) -> list[dict[str, Any]]:
    """What the server received, one JSON value per line."""
    if not log_file.exists():
        return []
    return [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]


# -- what comes with the answer ---------------------------------------------------------------

PING = '{"jsonrpc":"2.0","id":"srv-ping-@N@","method":"ping"}'


@pytest.mark.parametrize("order", ["answer_first", "answer_last", "answer_between"])
async def test_an_answer_with_a_notification_and_a_server_request_in_one_write(
    order: str, tmp_path: Path
) -> None:
    log_file = tmp_path / "peer.log"
    seen: list[str] = []

    async def on_message(_: RequestContext, params: Mapping[str, Any]) -> None:
        seen.append(str(params.get("data")))

    note = NOTE % "note"
    ping = PING.replace("@N@", "1")
    lines = {
        "answer_first": ["@ANSWER@", note, ping],
        "answer_last": [note, ping, "@ANSWER@"],
        "answer_between": [note, "@ANSWER@", ping],
    }[order]
    async with served(
        env={"AGENTHOST_PEER_LOG": str(log_file)},
        notifications={"notifications/message": on_message},
    ) as (session, _, inline):
        await chain(session)
        reads = inline.reads
        with trio.fail_after(3):
            result = await session.call_tool(
                "script", script("mine", {"write": "\n".join(lines) + "\n"})
            )
        assert text_of(result) == "mine"
        assert inline.reads > reads
        await echo_ok(session)
        with trio.fail_after(3):
            while not seen:
                await trio.sleep(0.01)
        assert seen == ["note"]
        with trio.fail_after(3):  # the client answered the server's ping
            while not any(m.get("id") == "srv-ping-1" and "result" in m for m in logged(log_file)):
                await trio.sleep(0.01)


@pytest.mark.parametrize("shape", ["answer_alone", "answer_then_note", "note_then_answer"])
async def test_a_batch_holding_the_answer(shape: str) -> None:
    seen: list[str] = []

    async def on_message(_: RequestContext, params: Mapping[str, Any]) -> None:
        seen.append(str(params.get("data")))

    members = {
        "answer_alone": ["@ANSWER@"],
        "answer_then_note": ["@ANSWER@", NOTE % "b"],
        "note_then_answer": [NOTE % "b", "@ANSWER@"],
    }[shape]
    async with served(notifications={"notifications/message": on_message}) as (session, _, _i):
        for i in range(5):
            await chain(session, 10)
            with trio.fail_after(3):
                steps = {"write": "[" + ",".join(members) + "]\n"}
                assert text_of(await session.call_tool("script", script(f"b{i}", steps))) == f"b{i}"
        await echo_ok(session)
        if shape != "answer_alone":
            with trio.fail_after(3):
                while len(seen) < 5:
                    await trio.sleep(0.01)


# -- framing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "lead", "end"),
    [
        (64 * 1024 - 1, "", "\n"),
        (64 * 1024, "", "\n"),
        (64 * 1024 + 1, "", "\n"),
        (64 * 1024 - 1, "", "\r\n"),
        (64 * 1024, "", "\r\n"),
        (200, "", "\r\n"),
        (200, "  \t ", "\n"),
        (200, "\r", "\r\n"),
        (64 * 1024, " " * 100, "\n"),
    ],
)
async def test_answer_lines_at_the_size_limits_and_with_odd_whitespace(
    size: int, lead: str, end: str
) -> None:
    async with served() as (session, _, inline):
        reads = inline.reads
        for i in range(3):
            await chain(session, 10)
            with trio.fail_after(3):
                steps = {"sized": size, "lead": lead, "end": end}
                result = await session.call_tool("script", script(f"s{i}", steps))
            assert text_of(result) == f"s{i}"
        assert inline.reads > reads
        await echo_ok(session)


async def test_an_answer_cut_at_every_byte_across_two_writes() -> None:
    async with served() as (session, _, inline):
        await chain(session)
        reads = inline.reads
        with trio.fail_after(20):
            for cut in range(0, 120):
                steps = {"split_at": cut, "gap": 0.002}
                result = await session.call_tool("script", script(f"cut{cut}", steps))
                assert text_of(result) == f"cut{cut}"
        assert inline.reads - reads >= 60  # most of them read inline
        await echo_ok(session)


@pytest.mark.parametrize(
    "junk",
    [
        "hello from a stray print\n",
        "{not json\n",
        "[]\n",
        "{}\n",
        "null\n",
        '"just a string"\n',
        "   \n\n\r\n",
        '{"jsonrpc":"2.0"}\n',
        '{"jsonrpc":"2.0","method":5}\n',
        '{"jsonrpc":"2.0","id":"@ID@x"}\n',
        "\u00e9\u00ff\ufffd\n",
    ],
)
async def test_garbage_lines_before_the_answer_are_skipped(junk: str) -> None:
    async with served() as (session, _, inline):
        await chain(session)
        reads = inline.reads
        with trio.fail_after(3):
            steps = ({"write": junk * 3}, {"write": "@ANSWER@\n"})
            result = await session.call_tool("script", script("after junk", *steps), timeout=2)
        assert text_of(result) == "after junk"
        assert inline.reads > reads
        await echo_ok(session)


async def test_garbage_bytes_that_are_not_utf8_before_the_answer() -> None:
    async with served() as (session, _, _inline):
        await chain(session)
        with trio.fail_after(3):
            steps = ({"hex": "fffe00c3280a"}, {"write": "@ANSWER@\n"})
            result = await session.call_tool("script", script("after bytes", *steps), timeout=2)
        assert text_of(result) == "after bytes"
        await echo_ok(session)


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc":"2.0","id":@ID@,"result":5}',
        '{"jsonrpc":"2.0","id":@ID@,"result":null}',
        '{"jsonrpc":"1.0","id":@ID@,"result":{}}',
        '{"id":@ID@,"result":{}}',
        '{"jsonrpc":"2.0","id":@ID@,"result":{},"error":{"code":1,"message":"x"}}',
        '{"jsonrpc":"2.0","id":@ID@,"error":{"code":"x","message":"x"}}',
        '{"jsonrpc":"2.0","id":@ID@,"error":"boom"}',
        '{"jsonrpc":"2.0","id":@ID@}',
    ],
)
async def test_an_invalid_response_fails_the_call_at_once(line: str) -> None:
    async with served() as (session, _, inline):
        await chain(session)
        reads = inline.reads
        started = trio.current_time()
        with trio.fail_after(3), pytest.raises(AgentHostError) as caught:
            await session.call_tool("script", script("x", {"write": line + "\n"}), timeout=2)
        assert not isinstance(caught.value, AgentHostTimeout), caught.value
        assert "invalid response" in str(caught.value), caught.value
        assert trio.current_time() - started < 1.0
        assert inline.reads > reads
        await echo_ok(session)


# -- the server goes away ---------------------------------------------------------------


async def test_a_server_that_closes_stdout_and_keeps_running() -> None:
    async with served(shutdown_timeout=1) as (session, _, inline):
        await chain(session)
        reads = inline.reads
        with trio.fail_after(3), pytest.raises(TransportClosed) as caught:
            await session.call_tool("script", script("x", {"close_stdout": True}), timeout=None)
        assert "closed its stdout" in str(caught.value), caught.value
        assert inline.reads > reads
        with trio.fail_after(1), pytest.raises(TransportClosed):
            await session.call_tool("echo", {"message": "dead"})


@pytest.mark.parametrize("cut", [1, 20, 60])
async def test_a_server_that_exits_mid_line(cut: int) -> None:
    async with served() as (session, _, inline):
        await chain(session)
        reads = inline.reads
        steps = (
            {"write": "@ANSWER@"[:cut] if cut < 8 else '{"jsonrpc":"2.0","id":@ID@'},
            {"exit": 3},
        )
        with trio.fail_after(3), pytest.raises(TransportClosed) as caught:
            await session.call_tool("script", script("x", *steps), timeout=None)
        assert "exited with code 3" in str(caught.value), caught.value
        assert inline.reads > reads
        with trio.fail_after(1), pytest.raises(TransportClosed):
            await session.call_tool("echo", {"message": "dead"})


# -- floods -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["notifications", "stray_answers", "blank_lines"])
async def test_a_flood_that_never_answers_the_call_times_it_out_on_time(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="agenthost.rpc")  # thousands of "unknown id"
    line = {
        "notifications": NOTE % "@N@" + "\n",
        "stray_answers": '{"jsonrpc":"2.0","id":@N@000000,"result":{}}\n',
        "blank_lines": "   \n",
    }[kind]
    ticks = 0
    gap = 0.0
    async with served(notifications={"notifications/message": lambda _c, _p: None}) as (
        session,
        _,
        inline,
    ):
        await chain(session)
        reads = inline.reads
        done = False

        async def ticker() -> None:
            nonlocal ticks, gap
            last = trio.current_time()
            while not done:
                ticks += 1
                await trio.sleep(0.001)
                now = trio.current_time()
                gap, last = max(gap, now - last), now

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            started = trio.current_time()
            with trio.fail_after(5), pytest.raises(AgentHostTimeout):
                steps = {"flood": line, "seconds": 20}
                await session.call_tool("script", script("never", steps), timeout=0.5)
            elapsed = trio.current_time() - started
            done = True
        assert elapsed < 1.5, elapsed
        print(f"{kind}: {ticks} ticks, longest gap {gap * 1000:.1f} ms")
        assert ticks > 10, ticks  # the loop was not starved
        # Starved, the loop would see one gap of the whole flood (the 0.5 s timeout and
        # more); one read's decoding under CI load took 108 ms once, so 0.25 s.
        assert gap < 0.25, gap
        assert inline.reads > reads
        await echo_ok(session)  # the flood stops for the next request


async def test_a_stderr_flood_around_the_answer() -> None:
    async with served() as (session, transport, inline):
        await chain(session)
        reads = inline.reads
        with trio.fail_after(10):
            steps = ({"stderr": 4 * 1024 * 1024}, {"write": "@ANSWER@\n"}, {"stderr": 1024 * 1024})
            assert text_of(await session.call_tool("script", script("loud", *steps))) == "loud"
        assert inline.reads > reads
        await echo_ok(session)
        assert len(transport.stderr_tail) <= 20


# -- cancellation, concurrency, closing ----------------------------------------------------


def random_steps(rng: random.Random, message: str) -> list[dict[str, Any]]:
    """An answer after a random delay, cut at a random byte, or after stray answers."""
    kind = rng.randrange(4)
    if kind == 0:
        return [{"sleep": rng.uniform(0, 0.003)}, {"write": "@ANSWER@\n"}]
    if kind == 1:
        return [{"split_at": rng.randrange(1, 110), "gap": rng.uniform(0, 0.003)}]
    if kind == 2:
        return [{"write": stray(rng.randrange(10**9, 2 * 10**9))}, {"write": "@ANSWER@\n"}]
    return [{"write": "@ANSWER@\n"}]


@pytest.mark.parametrize("how", ["cancel", "timeout"])
async def test_a_storm_of_cancellations_at_random_points(
    how: str, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """200 calls, each cancelled (or timed out) after a random 0-4 ms: before its send,
    while it reads its own answer, between two reads, with half a line read. The session
    goes on, every call that returns has its own answer, a timeout bites on time, and no
    late answer to a call given up is a mystery (only the scripted strays are)."""
    rng = random.Random(20261126)
    log_file = tmp_path / "peer.log"
    async with served(env={"AGENTHOST_PEER_LOG": str(log_file)}) as (session, _, inline):
        await chain(session)
        reads = inline.reads
        given_up = answered = 0
        with trio.fail_after(30):
            for i in range(200):
                steps = random_steps(rng, f"c{i}")
                limit = rng.uniform(0, 0.004)
                started = trio.current_time()
                with trio.move_on_after(limit if how == "cancel" else 5) as scope:
                    try:
                        result = await session.call_tool(
                            "script",
                            script(f"c{i}", *steps),
                            timeout=5 if how == "cancel" else limit,
                        )
                        assert text_of(result) == f"c{i}"
                        answered += 1
                    except AgentHostTimeout:
                        assert how == "timeout"
                        assert trio.current_time() - started < limit + 0.5
                        given_up += 1
                if scope.cancelled_caught:
                    assert how == "cancel", "a call outlived its timeout by 5 s"
                    given_up += 1
                if i % 20 == 19:
                    await echo_ok(session, f"probe{i}")
            await chain(session, 5)
        assert given_up > 20 and answered > 20, (given_up, answered)
        assert inline.reads - reads > 50
        await trio.sleep(0.2)  # the late answers come in
    unexpected = [
        r.getMessage()
        for r in caplog.records
        if "unknown request id" in r.getMessage()
        and not (
            10**9 <= int(r.getMessage().split("unknown request id ")[1].split()[0]) < 2 * 10**9
        )
    ]
    assert not unexpected, unexpected[:5]


async def test_concurrent_callers_start_and_stop_around_the_inline_caller() -> None:
    """One task makes calls back to back (each reads its own answer when alone) while
    others start calls, and cancel some, at random moments: every call that returns has
    its own answer; nothing hangs."""
    rng = random.Random(7)
    got: list[tuple[str, str]] = []
    async with served() as (session, _, inline):
        reads = inline.reads

        async def back_to_back(tag: str) -> None:
            for i in range(150):
                message = f"{tag}{i}"
                steps = random_steps(rng, message)
                got.append(
                    (message, text_of(await session.call_tool("script", script(message, *steps))))
                )

        async def others(tag: str) -> None:
            for i in range(60):
                await trio.sleep(rng.uniform(0, 0.004))
                message = f"{tag}{i}"
                with trio.move_on_after(rng.uniform(0, 0.01)):
                    steps = random_steps(rng, message)
                    result = await session.call_tool("script", script(message, *steps))
                    got.append((message, text_of(result)))

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(back_to_back, "a")
                nursery.start_soon(others, "b")
                nursery.start_soon(others, "c")
            await chain(session, 5)
        assert all(sent == received for sent, received in got), [
            pair for pair in got if pair[0] != pair[1]
        ][:5]
        assert len([1 for sent, _ in got if sent.startswith("a")]) == 150
        assert inline.reads > reads


async def test_a_slow_inline_caller_settles_the_answers_of_callers_that_came_after() -> None:
    async with served() as (session, _, inline):
        results: dict[str, str] = {}
        chained = trio.Event()
        reads = 0

        async def call(message: str, *steps: dict[str, Any]) -> None:
            nonlocal reads
            if message == "slow":
                await chain(session)  # back to back: the slow call reads inline
                reads = inline.reads
                chained.set()
            results[message] = text_of(await session.call_tool("script", script(message, *steps)))

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, "slow", {"sleep": 0.2}, {"write": "@ANSWER@\n"})
                await chained.wait()
                await trio.sleep(0.05)
                assert inline.reads > reads
                for i in range(10):
                    nursery.start_soon(call, f"e{i}", {"write": "@ANSWER@\n"})
        assert results == {"slow": "slow", **{f"e{i}": f"e{i}" for i in range(10)}}
        await echo_ok(session)


async def close_between_reads(attempt: int) -> bool:
    """One try of the test below: True when the caller outlived the close by 3 s."""
    async with served(shutdown_timeout=0.5) as (session, _, inline):
        armed = live = False

        def on_read(got: Any) -> None:
            nonlocal armed
            if got and live:
                armed = True

        inline.watchers[:] = [on_read]
        failure: list[BaseException] = []

        async def closer() -> None:
            while not armed:
                await trio.lowlevel.checkpoint()
            await session.aclose()

        async def caller() -> None:
            nonlocal live
            await chain(session, 20)  # in this task: the call below reads inline
            live = True
            try:
                steps = ({"write": stray(800_000 + attempt)}, {"sleep": 30})
                await session.call_tool("script", script("never", *steps), timeout=None)
            except TransportClosed as exc:
                failure.append(exc)

        with trio.move_on_after(3) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(closer)
                nursery.start_soon(caller)
        assert armed, "the call did not read the stray answer inline"
        if scope.cancelled_caught:
            return True
        assert failure and "closed by the client" in str(failure[0])
        return False


async def test_closing_the_session_while_the_caller_is_between_two_reads() -> None:
    """As the timeout above, for ``session.aclose()`` from another task: ``close()``
    sets the caller's outcome and calls ``transport.abort()``, a no-op while the caller is
    not on the fd; before the fix the caller then waited on the pipe of a server that
    stays silent (it ignores its closed stdin) for ever, and the nursery around it with
    it."""
    for attempt in range(12):
        hung = await close_between_reads(attempt)
        if hung:
            break
    assert hung == 0, f"the caller outlived the session's close by 3 s (attempt {attempt})"


async def test_leaving_the_transport_while_a_caller_reads_its_own_answer() -> None:
    """The whole block is cancelled while a call reads its own (slow) answer from a server
    that ignores stdin's end: everything unwinds within the shutdown bounds."""
    started = trio.current_time()
    reads = 0
    with trio.fail_after(6):
        with trio.move_on_after(0.3) as outer:
            async with served(shutdown_timeout=0.5) as (session, _, inline):
                await chain(session)
                reads = inline.reads
                steps = ({"sleep": 30}, {"write": "@ANSWER@\n"})
                await session.call_tool("script", script("late", *steps), timeout=None)
        assert outer.cancelled_caught
        assert reads  # the call had started reading inline
    assert trio.current_time() - started < 4
    async with served() as (session, _, _inline):
        await echo_ok(session)  # a fresh server: nothing left behind in this process


async def test_a_server_that_exits_while_a_detached_descendant_holds_its_stdout() -> None:
    """No EOF ever comes (the descendant holds the pipe): the exit watcher closes our end
    while the caller waits on it; the call fails with the exit reason, promptly."""
    async with served(shutdown_timeout=0.5) as (session, _, inline):
        await chain(session)
        reads = inline.reads
        started = trio.current_time()
        with trio.fail_after(4), pytest.raises(TransportClosed) as caught:
            steps = ({"holder": 20}, {"write": '{"jsonrpc":"2.0","id":@ID@'}, {"exit": 5})
            await session.call_tool("script", script("x", *steps), timeout=None)
        assert "exited with code 5" in str(caught.value), caught.value
        assert trio.current_time() - started < 2.5
        assert inline.reads > reads


async def test_an_answer_over_the_message_size_limit_read_inline() -> None:
    async with (
        open_stdio_transport(
            sys.executable, [SERVER], name="alone", max_message_size=4096, shutdown_timeout=1
        ) as transport,
        open_session(transport, name="alone") as session,
    ):
        assert isinstance(transport, StdioTransport)
        inline = Inline(transport)
        await chain(session)
        reads = inline.reads
        with trio.fail_after(3), pytest.raises(AgentHostError) as caught:
            steps = ({"split_at": 30, "gap": 0.01},)
            await session.call_tool("script", script("y" * 10_000, *steps), timeout=2)
        assert "larger than the maximum" in str(caught.value), caught.value
        assert inline.reads > reads


@pytest.mark.parametrize("method", ["ping", "sampling/createMessage", "roots/list"])
async def test_server_requests_flooded_in_front_of_the_answer(method: str, tmp_path: Path) -> None:
    log_file = tmp_path / "peer.log"
    flood = "".join(
        json.dumps({"jsonrpc": "2.0", "id": f"ask-{i}", "method": method, "params": {}}) + "\n"
        for i in range(200)
    )
    async with served(env={"AGENTHOST_PEER_LOG": str(log_file)}) as (session, _, inline):
        await chain(session)
        reads = inline.reads
        with trio.fail_after(5):
            steps = ({"write": flood + "@ANSWER@\n"},)
            assert text_of(await session.call_tool("script", script("asked", *steps))) == "asked"
        assert inline.reads > reads
        await echo_ok(session)
        with trio.fail_after(5):  # every one of them answered, with a result or an error
            while (
                len({m.get("id") for m in logged(log_file) if str(m.get("id")).startswith("ask-")})
                < 200
            ):
                await trio.sleep(0.02)


# -- Ctrl-C ----------------------------------------------------------------------------------

#: Ctrl-C (``signal.raise_signal``: the handler runs right there) while a call reads its
#: own answer: in the caller just after a read (argv[3] == "after-read"), or from another
#: thread while the caller waits on the pipe ("on-fd").
CTRL_C_SCRIPT = """
import signal, sys, threading, trio
from agenthost.connection import open_session
from agenthost.transports.stdio import StdioTransport, open_stdio_transport

signal.signal(signal.SIGINT, signal.default_int_handler)
server, log_path, where = sys.argv[1:4]
reads = 0
live = False
original = StdioTransport.receive_answers

async def receive_answers(self):
    global reads
    got = await original(self)
    if live:
        reads += 1
        if where == "after-read":
            signal.raise_signal(signal.SIGINT)
    return got

StdioTransport.receive_answers = receive_answers

async def main():
    global live
    async with (
        open_stdio_transport(sys.executable, [server], name="alone",
                             env={"AGENTHOST_PEER_LOG": log_path}) as transport,
        open_session(transport, name="alone") as session,
    ):
        for i in range(30):
            await session.call_tool("echo", {"message": str(i)})
        live = True
        if where == "on-fd":
            threading.Timer(0.2, signal.raise_signal, (signal.SIGINT,)).start()
        stray = '{"jsonrpc":"2.0","id":123456789,"result":{}}\\n'
        steps = [{"write": stray}, {"sleep": 2}, {"write": "@ANSWER@\\n"}]
        await session.call_tool("script", {"message": "late", "steps": steps}, timeout=None)

try:
    trio.run(main)
except BaseException as exc:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    print("inline-reads", reads)
    if isinstance(exc, KeyboardInterrupt):
        sys.exit(130)
    raise
"""


@pytest.mark.parametrize("where", ["after-read", "on-fd"])
def test_ctrl_c_while_a_caller_reads_its_own_answer_tells_the_server(
    where: str, tmp_path: Path
) -> None:
    log_file = tmp_path / "peer.log"
    argv = [sys.executable, "-c", CTRL_C_SCRIPT, SERVER, str(log_file), where]
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": repo}
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=30, check=False, cwd=repo, env=env
    )
    assert done.returncode == 130, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    reads = int(done.stdout.split("inline-reads")[1].split()[0])
    assert reads >= 1, done.stdout
    messages = logged(log_file)
    [call] = [m for m in messages if m.get("params", {}).get("name") == "script"]
    cancelled = [m for m in messages if m.get("method") == "notifications/cancelled"]
    assert [m["params"]["requestId"] for m in cancelled] == [call["id"]], messages[-3:]
