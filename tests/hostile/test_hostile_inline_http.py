"""Attack on the inline HTTP request path (rpc.call -> HTTPTransport.exchange): the POST
runs in the caller's task, so a hostile response stream must not hold the caller past its
timeout, block it on handlers, or wedge the connection pool."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from agenthost import connect
from agenthost.asks import ClientHandlers
from agenthost.config.model import ServerConfig, Timeouts
from agenthost.errors import AgentHostTimeout, JSONRPCError
from agenthost.protocol.types import TextContent
from agenthost.transports._httpx import LEAN_ENV
from tests.conftest import free_port
from tests.peers.http_launch import wait_for_port

SERVER = Path(__file__).with_name("inline_attack_server.py")


def _text(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


@asynccontextmanager
async def attack_server() -> AsyncIterator[tuple[ServerConfig, str]]:
    port = free_port()
    process = await trio.lowlevel.open_process(
        [sys.executable, str(SERVER), str(port)],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await wait_for_port(port, process, timeout=10)
        config = ServerConfig(
            name="atk",
            transport="streamable-http",
            url=f"http://127.0.0.1:{port}/mcp",
            protocol="legacy",
            timeouts=Timeouts(request=20.0),
        )
        yield config, f"http://127.0.0.1:{port}/stats"
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


def stats(url: str) -> dict[str, int]:
    data: dict[str, int] = httpx.get(url, timeout=5).json()
    return data


async def test_endless_progress_still_times_out() -> None:
    async with attack_server() as (config, surl), connect(config) as session:
        seen = 0

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            nonlocal seen
            seen += 1

        start = trio.current_time()
        with trio.fail_after(10), pytest.raises(AgentHostTimeout):
            await session.call_tool("progress_forever", {}, timeout=1.0, progress=on_progress)
        elapsed = trio.current_time() - start
        print(f"progress_forever: timed out after {elapsed:.2f}s, {seen} progress seen")
        assert elapsed < 2.5
        assert seen > 0
        with trio.fail_after(5):
            assert _text(await session.call_tool("echo", {"message": "ok"})) == "ok"
        await trio.sleep(0.5)
        s = stats(surl)
        print(s)
        assert s.get("post:notifications/cancelled", 0) == 1
        assert s.get("open_streams", 0) == 0


@pytest.mark.parametrize("method", ["ping", "sampling/createMessage", "elicitation/create"])
async def test_server_request_flood_before_answer(method: str) -> None:
    block = trio.Event()

    async def sampling(ctx: Any, params: Any) -> Any:
        await block.wait()  # a slow handler: must not hold the caller

    async def elicit(ctx: Any, params: Any) -> Any:
        await block.wait()

    handlers = ClientHandlers(sampling=sampling, elicitation=elicit)
    async with attack_server() as (config, surl), connect(config, handlers=handlers) as session:
        start = trio.current_time()
        with trio.fail_after(15):
            result = await session.call_tool(
                "ask_flood", {"count": 2000, "method": method}, timeout=10.0
            )
        elapsed = trio.current_time() - start
        print(f"{method} flood x2000: answered in {elapsed:.2f}s")
        assert _text(result) == "after flood"
        with trio.fail_after(5):
            assert _text(await session.call_tool("echo", {"message": "ok"})) == "ok"
        await trio.sleep(1.0)
        print(method, stats(surl))
        block.set()


async def test_tail_after_answer_returns_at_once_and_pool_survives() -> None:
    async with attack_server() as (config, surl), connect(config) as session:
        for i in range(12):  # more than a small pool
            start = trio.current_time()
            with trio.fail_after(5):
                result = await session.call_tool("tail", {"chunk": 256 * 1024})
            elapsed = trio.current_time() - start
            assert _text(result) == "answer"
            assert elapsed < 1.5, f"call {i} took {elapsed:.2f}s"
        await trio.sleep(1.5)  # drains are bounded at ~1 s
        s = stats(surl)
        print(s)
        assert s.get("open_streams", 0) == 0
        with trio.fail_after(5):
            assert _text(await session.call_tool("echo", {"message": "ok"})) == "ok"


async def test_wrong_id_and_duplicate_answers() -> None:
    async with attack_server() as (config, _surl), connect(config) as session:
        with trio.fail_after(5):
            assert _text(await session.call_tool("wrong_id", {})) == "mine"
            assert _text(await session.call_tool("dup", {})) == "first"
            assert _text(await session.call_tool("echo", {"message": "ok"})) == "ok"


@pytest.mark.parametrize("lean", ["1", "0"])  # the scope-free exchange, and httpx's
async def test_junk_batch_json_body(lean: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEAN_ENV, lean)
    async with attack_server() as (config, _surl), connect(config) as session:
        with trio.fail_after(5):
            # A clean error at once (not a hang, not a traceback) that says what is wrong
            # with the reply: one bad member fails the batch, the valid response with it.
            with pytest.raises(JSONRPCError, match=r"not valid JSON-RPC .*no response") as info:
                await session.call_tool("junk_batch", {}, timeout=3.0)
            assert "Traceback" not in str(info.value)
            assert _text(await session.call_tool("echo", {"message": "ok"})) == "ok"


async def test_cancelled_mid_stream_many_times() -> None:
    async with attack_server() as (config, surl), connect(config) as session:
        for _ in range(30):
            with trio.move_on_after(0.2) as scope:
                await session.call_tool("slow", {}, timeout=20.0)
            assert scope.cancelled_caught
        with trio.fail_after(5):
            assert _text(await session.call_tool("echo", {"message": "ok"})) == "ok"
        await trio.sleep(0.5)
        s = stats(surl)
        print(s)
        assert s.get("post:notifications/cancelled", 0) == 30
        assert s.get("open_streams", 0) == 0


async def test_blocking_progress_callback_does_not_hold_timeout() -> None:
    async with attack_server() as (config, _surl), connect(config) as session:

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            await trio.sleep_forever()

        start = trio.current_time()
        with trio.fail_after(10), pytest.raises(AgentHostTimeout):
            await session.call_tool("progress_forever", {}, timeout=1.0, progress=on_progress)
        assert trio.current_time() - start < 2.5
        with trio.fail_after(5):
            assert _text(await session.call_tool("echo", {"message": "ok"})) == "ok"


async def test_valid_batch_json_body() -> None:
    async with attack_server() as (config, _surl), connect(config) as session:
        print("revision", session.revision)
        with trio.fail_after(5):
            try:
                print("batch_ok ->", _text(await session.call_tool("batch_ok", {}, timeout=3.0)))
            except Exception as exc:
                print("batch_ok raised", type(exc).__name__, exc)


async def test_endless_resume_still_times_out_and_stops() -> None:
    async with attack_server() as (config, surl), connect(config) as session:
        for _ in range(3):
            start = trio.current_time()
            with trio.fail_after(10), pytest.raises(AgentHostTimeout):
                await session.call_tool("resume_forever", {}, timeout=1.0)
            assert trio.current_time() - start < 2.5
        with trio.fail_after(5):
            assert _text(await session.call_tool("echo", {"message": "ok"})) == "ok"
        before = stats(surl).get("resume_gets", 0)
        await trio.sleep(1.0)
        after = stats(surl)
        print("resume", before, after)
        assert after.get("resume_gets", 0) == before, "resume GETs went on after the timeout"


async def test_resume_rate_is_bounded_whatever_retry_the_server_sends() -> None:
    async with attack_server() as (config, surl), connect(config) as session:
        start = trio.current_time()
        with trio.fail_after(10), pytest.raises(AgentHostTimeout):
            await session.call_tool("resume_forever", {}, timeout=2.0)
        elapsed = trio.current_time() - start
        gets = stats(surl).get("resume_gets", 0)
        print(f"resume GETs: {gets} in {elapsed:.2f}s")
        assert gets <= 20 * elapsed, f"{gets} resume GETs in {elapsed:.1f}s"


async def test_answer_for_another_in_flight_request() -> None:
    """A stream answers a different in-flight request: it is the same server, so the
    victim may take that answer (or time out); but it must return within its timeout,
    and the thief's caller must still get its own answer."""
    async with attack_server() as (config, _surl), connect(config) as session:
        victim: list[str] = []
        returned = trio.Event()

        async def slow() -> None:
            try:
                victim.append(_text(await session.call_tool("slow", {}, timeout=2.0)))
            except AgentHostTimeout:
                victim.append("timed out")
            returned.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow)
            await trio.sleep(0.3)
            with trio.fail_after(5):
                assert _text(await session.call_tool("steal", {})) == "thief"
            with trio.move_on_after(4):
                await returned.wait()
            nursery.cancel_scope.cancel()
        print("victim got", victim)
        assert victim in (["stolen"], ["timed out"]), "the victim's call never returned"


async def test_concurrent_cancel_storms_do_not_exhaust_the_pool() -> None:
    async with attack_server() as (config, surl), connect(config) as session:
        for _ in range(5):
            async with trio.open_nursery() as nursery:
                for _ in range(20):
                    nursery.start_soon(partial(session.call_tool, "slow", {}, timeout=20.0))
                await trio.sleep(0.3)
                nursery.cancel_scope.cancel()
        with trio.fail_after(5):
            assert _text(await session.call_tool("echo", {"message": "ok"})) == "ok"
        await trio.sleep(0.5)
        s = stats(surl)
        print(s)
        assert s.get("post:notifications/cancelled", 0) == s.get("post:tools/call", 0) - 1
        assert s.get("open_streams", 0) == 0


# -- the scope-free JSON exchange (issue 26): a request on an idle connection runs with no
# cancel scope of its own; abort() closes its connection instead. These drive every way
# out of it: a timeout, the session closing, deliveries that may wait.


async def test_a_json_reply_that_never_comes_times_out_and_the_next_call_works() -> None:
    async with attack_server() as (config, surl), connect(config) as session:
        for round_ in range(3):
            assert _text(await session.call_tool("echo", {"message": "warm"})) == "warm"
            start = trio.current_time()
            with trio.fail_after(10), pytest.raises(AgentHostTimeout):
                await session.call_tool("json_hang", {}, timeout=0.5)
            elapsed = trio.current_time() - start
            assert elapsed < 1.5, f"round {round_}: timed out after {elapsed:.2f}s"
            with trio.fail_after(5):
                assert _text(await session.call_tool("echo", {"message": "ok"})) == "ok"
        await trio.sleep(0.3)
        s = stats(surl)
        assert s.get("json_hang", 0) == 3
        assert s.get("post:notifications/cancelled", 0) == 3


async def test_closing_the_session_ends_a_waiting_json_exchange() -> None:
    async with attack_server() as (config, _surl):
        outcome: list[str] = []
        with trio.fail_after(10):
            async with connect(config) as session, trio.open_nursery() as nursery:
                assert _text(await session.call_tool("echo", {"message": "warm"})) == "warm"

                async def hang() -> None:
                    try:
                        await session.call_tool("json_hang", {}, timeout=None)
                    except Exception as exc:  # the session's closing error
                        outcome.append(type(exc).__name__)

                nursery.start_soon(hang)
                await trio.sleep(0.3)
                await session.aclose()
        assert outcome and outcome[0] != "AgentHostTimeout", outcome


async def test_a_json_batch_with_a_notification_delivers_it_before_the_answer() -> None:
    async with attack_server() as (config, _surl), connect(config) as session:
        seen: list[str] = []

        async def on_log(context: Any, params: Mapping[str, Any]) -> None:
            seen.append(str(params.get("data")))

        session.add_listener("notifications/message", on_log)
        for _ in range(3):
            with trio.fail_after(5):
                result = await session.call_tool("json_with_log", {})
            assert _text(result) == "after the log"
        assert seen == ["before the answer"] * 3, seen


async def test_a_json_batch_with_a_server_request_answers_it() -> None:
    async with attack_server() as (config, surl), connect(config) as session:
        for _ in range(3):
            with trio.fail_after(5):
                assert _text(await session.call_tool("json_with_ping", {})) == "after the ping"
        with trio.fail_after(5):
            while stats(surl).get("client_responses", 0) < 3:
                await trio.sleep(0.05)
        assert stats(surl).get("client_errors", 0) == 0
