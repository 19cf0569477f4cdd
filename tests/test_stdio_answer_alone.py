"""A stdio caller alone reads its own answer (issue 26, "stdio calls/s sequential").

When a request is the only one in flight and the session's reader is between reads, the
calling task reads the pipe itself (``RPC._read_answer``, ``StdioTransport.
receive_answers``): no reader task between the server's answer and the caller. Anything
that is not an answer goes to the reader, in order. These tests drive every hand-over
through a real child process (``tests/peers/answer_order_server.py``) and check that
the inline path was the one taken (``receive_answers`` called) where it matters.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel

from agenthost.asks import ClientHandlers, RequestContext
from agenthost.connection import open_session
from agenthost.errors import AgentHostTimeout, TransportClosed
from agenthost.protocol.types import CallToolResult, TextContent
from agenthost.session import ClientSession
from agenthost.transports.stdio import StdioTransport, open_stdio_transport

PEER = str(Path(__file__).parent / "peers" / "answer_order_server.py")


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


class Inline:
    """Counts the caller's own reads of the pipe (the inline path taken)."""

    def __init__(self, transport: StdioTransport) -> None:
        self.reads = 0
        original = transport.receive_answers

        async def counted() -> Any:
            self.reads += 1
            return await original()

        transport.receive_answers = counted  # type: ignore[method-assign]


@asynccontextmanager
async def served(
    env: Mapping[str, str] | None = None,
    notifications: Mapping[str, Callable[[RequestContext, Mapping[str, Any]], Any]] | None = None,
) -> AsyncIterator[tuple[ClientSession, StdioTransport, Inline]]:
    handlers = ClientHandlers(notifications=dict(notifications or {}))
    async with (
        open_stdio_transport(
            sys.executable, [PEER], name="order", env=dict(env or {})
        ) as transport,
        open_session(transport, name="order", handlers=handlers) as session,
    ):
        assert isinstance(transport, StdioTransport)
        yield session, transport, Inline(transport)


async def chain(session: ClientSession, calls: int = 30) -> None:
    """Back-to-back calls: from the first whose caller ran before the reader went back to
    the pipe (half of them: Trio orders a batch either way), each call reads its own
    answer, and so does a call made right after this returns."""
    for i in range(calls):
        assert text_of(await session.call_tool("echo", {"message": f"w{i}"})) == f"w{i}"


class _Steps(trio.abc.Instrument):
    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1


async def test_a_call_alone_reads_its_answer_without_the_reader_in_between() -> None:
    async with served() as (session, _, inline):
        await chain(session)
        count = _Steps()
        reads = inline.reads
        trio.lowlevel.add_instrument(count)
        try:
            for i in range(50):
                assert text_of(await session.call_tool("echo", {"message": f"m{i}"})) == f"m{i}"
        finally:
            trio.lowlevel.remove_instrument(count)
    # Through the reader: its step that reads, the caller's, and the reader's turn before
    # its next read (3 per call, seen with reads_inline off). Now: the caller's, and the
    # reader's turn after it (not on the answer's way).
    assert inline.reads - reads >= 50
    assert count.steps / 50 < 2.5, count.steps / 50


async def test_progress_before_the_answer_goes_through_the_reader_in_order() -> None:
    async with served() as (session, _, inline):
        seen: list[float] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append(value)

        await chain(session)
        reads = inline.reads
        result = await session.call_tool("progress", {"message": "done", "n": 5}, progress=progress)
        assert inline.reads > reads
        assert text_of(result) == "done"
        assert seen == [1, 2, 3, 4, 5]  # all of them, before the call returned
        await chain(session, 3)


async def test_a_server_request_before_the_answer_is_answered() -> None:
    async with served() as (session, _, inline):
        await chain(session)
        reads = inline.reads
        with trio.fail_after(5):
            result = await session.call_tool("ask", {"message": "asked"})
        assert inline.reads > reads
        assert text_of(result) == "asked"
        await chain(session, 3)


async def test_answers_to_other_requests_read_by_the_caller_are_settled() -> None:
    async with served() as (session, _, inline):
        await chain(session)
        results: dict[str, str] = {}
        order: list[str] = []

        chained = trio.Event()
        reads = 0

        async def call(name: str, args: dict[str, Any]) -> None:
            nonlocal reads
            if name == "slow":
                await chain(session)  # back to back: the slow call takes the reading
                reads = inline.reads
                chained.set()
            results[name] = text_of(await session.call_tool(name, args))
            order.append(name)

        async with trio.open_nursery() as nursery:
            # The slow call is alone when it starts (it takes the reading); the echo sent
            # meanwhile is answered after it, read by the slow call's task.
            nursery.start_soon(call, "slow", {"message": "slow", "seconds": 0.3})
            await chained.wait()
            await trio.sleep(0.05)
            assert inline.reads > reads
            nursery.start_soon(call, "echo", {"message": "echo"})
        assert results == {"slow": "slow", "echo": "echo"}
        assert order == ["slow", "echo"]  # the server answers in order
        await chain(session, 3)


async def test_a_timeout_wakes_a_caller_reading_its_own_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log_file = tmp_path / "peer.log"
    async with served(env={"AGENTHOST_PEER_LOG": str(log_file)}) as (session, _, inline):
        await chain(session)
        reads = inline.reads
        started = trio.current_time()
        with pytest.raises(AgentHostTimeout):
            await session.call_tool("slow", {"message": "late", "seconds": 0.8}, timeout=0.2)
        assert trio.current_time() - started < 0.6
        assert inline.reads > reads
        # The late answer is no mystery, and the session goes on.
        with caplog.at_level(logging.WARNING, logger="agenthost.rpc"):
            assert text_of(await session.call_tool("echo", {"message": "after"})) == "after"
        assert "unknown request id" not in caplog.text
        await chain(session, 3)
    sent = [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]
    assert any(m.get("method") == "notifications/cancelled" for m in sent)


async def test_a_cancelled_caller_reading_its_own_answer_leaves_the_session_usable(
    tmp_path: Path,
) -> None:
    log_file = tmp_path / "peer.log"
    async with served(env={"AGENTHOST_PEER_LOG": str(log_file)}) as (session, _, inline):
        await chain(session)
        reads = inline.reads
        with trio.move_on_after(0.1) as scope:
            await session.call_tool("slow", {"message": "late", "seconds": 0.4}, timeout=5)
        assert scope.cancelled_caught
        assert inline.reads > reads
        with trio.fail_after(5):
            assert text_of(await session.call_tool("echo", {"message": "after"})) == "after"
            await chain(session, 3)
    sent = [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]
    assert any(m.get("method") == "notifications/cancelled" for m in sent)


async def test_a_split_answer_and_a_large_one_arrive_whole() -> None:
    async with served() as (session, _, inline):
        await chain(session)
        reads = inline.reads
        result = await session.call_tool("split", {"message": "halves", "seconds": 0.05})
        assert text_of(result) == "halves"
        assert inline.reads > reads
        await chain(session)
        big = await session.call_tool("big", {"message": "big", "bytes": 3 * 1024 * 1024})
        assert text_of(big) == "big" + "x" * (3 * 1024 * 1024)
        await chain(session, 3)


async def test_a_notification_when_idle_arrives_without_another_call() -> None:
    changed = trio.Event()

    async def on_changed(_: RequestContext, __: Mapping[str, Any]) -> None:
        changed.set()

    async with served(notifications={"notifications/tools/list_changed": on_changed}) as (
        session,
        _,
        inline,
    ):
        await chain(session)
        reads = inline.reads
        result = await session.call_tool("notify_later", {"message": "now", "seconds": 0.1})
        assert inline.reads > reads
        assert text_of(result) == "now"
        with trio.fail_after(3):
            await changed.wait()  # the reader is back on the pipe


async def test_a_flood_of_stray_answers_does_not_starve_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with served() as (session, _, _inline):
        await chain(session)
        ticks = 0
        done = False

        async def ticker() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await trio.lowlevel.checkpoint()

        caplog.set_level(logging.ERROR, logger="agenthost.rpc")  # 20k warnings: not the point
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            await trio.lowlevel.checkpoint()
            with trio.fail_after(20):
                result = await session.call_tool("flood", {"message": "end", "n": 20_000})
            done = True
        assert text_of(result) == "end"
        assert ticks > 5
        await chain(session, 3)


async def test_a_server_that_exits_instead_of_answering_fails_the_call_with_its_reason() -> None:
    async with served() as (session, _, inline):
        await chain(session)
        reads = inline.reads
        with trio.fail_after(5), pytest.raises(TransportClosed) as info:
            await session.call_tool("exit", {}, timeout=None)
        assert inline.reads > reads
        assert "exited with code 7" in str(info.value)


async def test_closing_the_session_wakes_a_caller_reading_its_own_answer() -> None:
    async with served() as (session, _, inline):
        chained = trio.Event()
        reads = 0
        failure: list[BaseException] = []

        async def call() -> None:
            nonlocal reads
            await chain(session)
            reads = inline.reads
            chained.set()
            try:
                await session.call_tool("slow", {"message": "x", "seconds": 10}, timeout=None)
            except TransportClosed as exc:
                failure.append(exc)

        with trio.fail_after(3):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await chained.wait()
                await trio.sleep(0.1)
                assert inline.reads > reads  # the slow call reads its own answer
                await session.aclose()
        assert failure and "closed by the client" in str(failure[0])


async def test_a_call_does_not_overtake_what_the_reader_is_still_dispatching() -> None:
    """The reading changes hands only while the reader waits for a read, never while it
    still dispatches the last one: an answer read by a caller then would overtake the
    notifications that came before it."""
    gate = trio.Event()
    delivered: list[int] = []

    async def on_log(_: RequestContext, params: Mapping[str, Any]) -> None:
        await gate.wait()
        delivered.append(int(params["data"]))

    async with served(notifications={"notifications/message": on_log}) as (session, _, _i):
        # 1,030 log lines once the call returned: the dispatcher holds the first (gate
        # closed), the channel takes 1,024 more, and the reader waits with the last few
        # of its read still to queue.
        await session.call_tool("log_burst", {"message": "burst", "n": 1030, "seconds": 0.1})
        await trio.sleep(0.4)
        seen_at_return: list[int] = []

        async def call() -> None:
            assert text_of(await session.call_tool("echo", {"message": "after"})) == "after"
            seen_at_return.append(len(delivered))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.sleep(0.2)
            gate.set()
        # The call's answer came after all 1,030: it returns once they are delivered.
        assert seen_at_return == [1030]
        assert delivered == list(range(1030))
