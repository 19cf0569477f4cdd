"""Attack on the answer-alone HTTP path: a plain 200 JSON reply that is one Response with
the request's id is returned by ``transport.exchange()`` and settled by ``rpc.call()``
itself (``_answered`` -> ``LeanResponse.whole`` / ``close_now`` / ``LeanPool.keep``).

The hostile MCP server is a raw Trio TCP server (every byte is the test's choice, see
``test_hostile_scope_free``); the client is the real transport and session.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import trio

from agenthost.errors import AgentHostError, AgentHostTimeout, JSONRPCError
from agenthost.session import ClientSession
from agenthost.transports.http import StreamableHTTPTransport
from tests.hostile.raw_mcp import (
    McpServer,
    echo,
    json_reply,
    mcp_server,
    raw_reply,
    result_body,
    serving,
    text_of,
    until,
    warnings_of,
)
from tests.hostile.raw_mcp import session_to as raw_session_to

pytestmark = pytest.mark.timeout(60)

TOKEN = "Bearer test-key-DO-NOT-PRINT-attack3"


@pytest.fixture(autouse=True)
def clean_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No traceback, no ERROR, and never the Authorization token, at any level."""
    caplog.set_level(logging.DEBUG)
    yield
    bad = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, bad[:5]
    assert "DO-NOT-PRINT" not in caplog.text


def session_to(
    server: McpServer, *, max_message_size: int = 16 * 1024 * 1024
) -> AbstractAsyncContextManager[tuple[ClientSession, StreamableHTTPTransport]]:
    """A session that sends the bearer token the tests look for in every log."""
    return raw_session_to(
        server, headers={"Authorization": TOKEN}, max_message_size=max_message_size
    )


# -- an answer whose id is the request's in another JSON type -----------------------------


async def odd_id(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    form = {
        "string": json.dumps(str(rid)),
        "float": f"{rid}.0",
        "exponent": f"{rid}e0",
        "true": "true",
        "null": "null",
        "object": json.dumps({"id": rid}),
    }[args["form"]]
    await stream.send_all(raw_reply(result_body(form, "odd")))
    return True


@pytest.mark.parametrize("form", ["string", "float", "exponent", "true", "null", "object"])
async def test_an_answer_with_the_id_in_another_type_is_not_taken(
    form: str, caplog: pytest.LogCaptureFixture
) -> None:
    """5 is not "5", 5.0, 5e0 or true (the spec: string or integer): the call fails at
    once with a clear error, and the connection and session go on."""
    async with mcp_server({"odd_id": odd_id}) as server, session_to(server) as (s, t):
        opened = t.connections_opened
        with trio.fail_after(3), pytest.raises(AgentHostError) as caught:
            await s.call_tool("odd_id", {"form": form})
        assert "response" in str(caught.value).lower(), caught.value
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"
        assert t.connections_opened == opened  # a whole reply: its connection was kept


# -- an ErrorResponse alone; batches ---------------------------------------------------------


async def error_alone(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    body = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32042, "message": "refused here"}}
    await stream.send_all(raw_reply(json.dumps(body).encode()))
    return True


async def test_an_error_response_alone_is_the_callers_error_and_the_connection_kept() -> None:
    async with mcp_server({"error_alone": error_alone}) as server, session_to(server) as (s, t):
        opened = t.connections_opened
        for _ in range(20):
            with trio.fail_after(3), pytest.raises(JSONRPCError) as caught:
                await s.call_tool("error_alone", {})
            assert caught.value.code == -32042
        assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"
        assert t.connections_opened == opened


async def batch(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    one = json.loads(result_body(json.dumps(rid), "first"))
    two = json.loads(result_body(json.dumps(rid), "second"))
    err = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": "second"}}
    members = {"one": [one], "twice": [one, two], "result_then_error": [one, err]}[args["shape"]]
    await stream.send_all(raw_reply(json.dumps(members).encode()))
    return True


@pytest.mark.parametrize("shape", ["one", "twice", "result_then_error"])
async def test_a_batch_answer_is_delivered_once(
    shape: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with mcp_server({"batch": batch}) as server, session_to(server) as (s, _):
        for _ in range(10):
            with trio.fail_after(3):
                assert text_of(await s.call_tool("batch", {"shape": shape})) == "first"
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"


# -- 64 callers, each answered with ANOTHER in-flight caller's id ----------------------------


class Rotation:
    """Holds ``size`` calls, then answers each with the id (and tag) of the next one."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.tags: dict[Any, str] = {}
        self.order: list[Any] = []
        self.full = trio.Event()

    async def __call__(self, stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
        self.tags[rid] = str(args["tag"])
        self.order.append(rid)
        if len(self.order) == self.size:
            self.full.set()
        await self.full.wait()
        other = self.order[(self.order.index(rid) + 1) % self.size]
        await stream.send_all(json_reply(other, self.tags[other]))
        return True


async def test_64_callers_each_answered_with_another_callers_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every caller ends well before its timeout; none gets another caller's answer (a
    caller that gets a result gets the one whose tag is its own)."""
    rotation = Rotation(64)
    got: dict[int, str] = {}
    failed: dict[int, str] = {}
    async with mcp_server({"rotate": rotation}) as server, session_to(server) as (s, _):

        async def caller(tag: int) -> None:
            try:
                got[tag] = text_of(await s.call_tool("rotate", {"tag": tag}, timeout=20))
            except AgentHostError as exc:
                failed[tag] = str(exc)

        with trio.fail_after(8):
            async with trio.open_nursery() as nursery:
                for tag in range(64):
                    nursery.start_soon(caller, tag)
        assert len(got) + len(failed) == 64
        assert all(text == str(tag) for tag, text in got.items()), got
        assert not any("timed out" in why for why in failed.values()), failed
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"
    print(f"answered {len(got)}, failed {len(failed)}: {next(iter(failed.values()), '')}")
    # (noted: the transport's own "held no response" error for a caller another reply
    # settled already is logged as "error response for unknown request id")
    print(Counter(re.sub(r"\d+", "N", w) for w in warnings_of(caplog)))


# -- the framing of the body ---------------------------------------------------------------


async def framing(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    body = result_body(json.dumps(rid), "héllo wörld")
    how = args["how"]
    if how == "short":  # Content-Length one byte short: the rest is junk on the connection
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body) - 1, body)
        )
    elif how == "long":  # Content-Length ten bytes long: the body never ends
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body) + 10, body)
        )
    else:  # chunked, the chunks of the given size (splitting a UTF-8 letter), one write
        size = int(how.split("-")[1])
        chunks = b"".join(
            b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size])
            for i in range(0, len(body), size)
        )
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
        )
    return True


@pytest.mark.parametrize("how", ["chunked-1", "chunked-7", "chunked-100000"])
async def test_a_chunked_answer_in_one_packet(how: str) -> None:
    async with mcp_server({"framing": framing}) as server, session_to(server) as (s, t):
        opened = t.connections_opened
        for _ in range(5):
            with trio.fail_after(3):
                assert text_of(await s.call_tool("framing", {"how": how})) == "héllo wörld"
        assert t.connections_opened == opened


async def test_a_content_length_one_byte_short_fails_that_call_only() -> None:
    async with mcp_server({"framing": framing}) as server, session_to(server) as (s, _):
        with trio.fail_after(3), pytest.raises(AgentHostError):
            await s.call_tool("framing", {"how": "short"})
        for i in range(3):
            with trio.fail_after(3):
                assert text_of(await s.call_tool("echo", {"message": f"e{i}"})) == f"e{i}"


async def test_a_content_length_too_long_times_out_and_the_next_call_works() -> None:
    async with mcp_server({"framing": framing}) as server, session_to(server) as (s, _):
        with trio.fail_after(3), pytest.raises(AgentHostTimeout):
            await s.call_tool("framing", {"how": "long"}, timeout=0.3)
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"
        await until(lambda: len(server.cancelled) == 1)


# -- a body larger than the maximum, arriving in one read ---------------------------------


async def big(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    """A body of exactly ``total`` bytes, sent in one write with its head."""
    pad = int(args["total"]) - len(result_body(json.dumps(rid), ""))
    await stream.send_all(raw_reply(result_body(json.dumps(rid), "x" * pad)))
    return True


LIMIT = 4096


@pytest.mark.parametrize("total", [LIMIT - 1, LIMIT])
async def test_a_body_at_the_maximum_in_one_read_is_taken(total: int) -> None:
    async with (
        mcp_server({"big": big}) as server,
        session_to(server, max_message_size=LIMIT) as (
            s,
            t,
        ),
    ):
        opened = t.connections_opened
        for _ in range(3):
            with trio.fail_after(3):
                result = await s.call_tool("big", {"total": total})
            assert len(text_of(result)) > LIMIT - 200
        assert t.connections_opened == opened


@pytest.mark.parametrize("total", [LIMIT + 1, LIMIT + 5000, 200_000])
async def test_a_body_over_the_maximum_in_one_read_fails_that_call_only(total: int) -> None:
    async with (
        mcp_server({"big": big}) as server,
        session_to(server, max_message_size=LIMIT) as (
            s,
            _,
        ),
    ):
        for _ in range(3):
            with trio.fail_after(3), pytest.raises(AgentHostError, match="larger than the max"):
                await s.call_tool("big", {"total": total})
            with trio.fail_after(3):
                assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"


# -- a forged answer for the NEXT request, sent ahead on the idle connection -------------


async def presend(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    await stream.send_all(json_reply(rid, "mine"))
    await trio.sleep(0.05)  # the connection is idle in the client's pool by now
    forged = json_reply(rid + 1, "forged")
    await stream.send_all(forged + forged)
    return True


async def test_a_forged_answer_sent_ahead_on_an_idle_connection_is_not_taken() -> None:
    async with mcp_server({"presend": presend}) as server, session_to(server) as (s, _):
        for _ in range(5):
            with trio.fail_after(3):
                assert text_of(await s.call_tool("presend", {})) == "mine"
            await trio.sleep(0.1)  # the forged bytes are in
            with trio.fail_after(3):
                assert text_of(await s.call_tool("echo", {"message": "real"})) == "real"


# -- the answer racing the caller's timeout, many times ----------------------------------


class Racy:
    def __init__(self, seed: int, low: float, high: float) -> None:
        self.rng = random.Random(seed)
        self.low, self.high = low, high
        self.rids: list[Any] = []

    async def __call__(self, stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
        self.rids.append(rid)
        await trio.sleep(self.rng.uniform(self.low, self.high))
        await stream.send_all(json_reply(rid, f"{rid}:{args['tag']}"))
        return True


@pytest.mark.parametrize(
    ("workers", "rounds", "timeout", "spread"), [(8, 60, 0.05, 0.015), (1, 150, 0.02, 0.002)]
)
async def test_answers_racing_the_timeout(
    workers: int, rounds: int, timeout: float, spread: float, caplog: pytest.LogCaptureFixture
) -> None:
    """No answer delivered twice or to another call, one notifications/cancelled per
    timed-out call (none for an answered one), the next call works, connections bounded."""
    racy = Racy(7, timeout - spread, timeout + spread)
    outcomes: Counter[str] = Counter()
    answered: list[Any] = []
    async with mcp_server({"racy": racy}) as server, session_to(server) as (s, t):
        base = t.connections_opened or 0

        async def worker(w: int) -> None:
            for i in range(rounds):
                tag = f"{w}.{i}"
                start = trio.current_time()
                try:
                    text = text_of(await s.call_tool("racy", {"tag": tag}, timeout=timeout))
                except AgentHostTimeout:
                    outcomes["timeout"] += 1
                else:
                    rid, _, echoed = text.partition(":")
                    assert echoed == tag, (text, tag)
                    answered.append(int(rid))
                    outcomes["answer"] += 1
                    # taken though its deadline had passed (the watchdog fired first)
                    outcomes["late_answer"] += trio.current_time() - start >= timeout

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for w in range(workers):
                    nursery.start_soon(worker, w)
        print(dict(outcomes), "opened", (t.connections_opened or 0) - base)
        assert outcomes["answer"] + outcomes["timeout"] == workers * rounds
        assert len(set(answered)) == len(answered)
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"
        await until(lambda: len(server.cancelled) >= outcomes["timeout"])
        await trio.sleep(0.1)
        assert len(server.cancelled) == outcomes["timeout"]
        assert len(set(server.cancelled)) == len(server.cancelled)
        assert not set(server.cancelled) & set(answered)
        assert set(server.cancelled) <= set(racy.rids)
        opened = (t.connections_opened or 0) - base
        assert opened <= outcomes["timeout"] + 2 * workers + 4, (opened, dict(outcomes))
    unknown = [w for w in warnings_of(caplog) if "unknown request id" in w]
    assert not unknown, unknown[:3]


# -- the GET stream delivers the answer while the POST returns it too --------------------


class GetStreamServer(McpServer):
    """An McpServer with a GET stream (SSE) the tools can write on."""

    def __init__(self) -> None:
        super().__init__({"echo": echo, "both": self.both})
        self.get_stream: trio.SocketStream | None = None
        self.get_lock = trio.Lock()
        self.get_open = trio.Event()

    async def answer(self, stream: trio.SocketStream, head: bytes, body: bytes) -> bool:
        if head.startswith(b"GET"):
            self.stats["gets"] += 1
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            self.get_stream = stream
            self.get_open.set()
            await trio.sleep_forever()
        return await super().answer(stream, head, body)

    async def on_get(self, message: dict[str, Any]) -> None:
        assert self.get_stream is not None
        async with self.get_lock:
            data = json.dumps(message).encode()
            await self.get_stream.send_all(b"event: message\ndata: " + data + b"\n\n")

    async def both(self, stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
        order = args["order"]
        mine = json.loads(result_body(json.dumps(rid), "post"))
        on_get = json.loads(result_body(json.dumps(rid), "get"))
        if order == "get_first":
            await self.on_get(on_get)
            await trio.sleep(0.005)
            await stream.send_all(raw_reply(json.dumps(mine).encode()))
        elif order == "post_first":
            await stream.send_all(raw_reply(json.dumps(mine).encode()))
            await self.on_get(on_get)
        else:  # at once
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.on_get, on_get)
                nursery.start_soon(stream.send_all, raw_reply(json.dumps(mine).encode()))
        return True


@pytest.mark.parametrize("order", ["get_first", "post_first", "at_once"])
async def test_the_answer_on_the_get_stream_and_in_the_post_is_taken_once(
    order: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = GetStreamServer()
    got: Counter[str] = Counter()
    async with serving(server), session_to(server) as (s, _):
        with trio.fail_after(3):
            await server.get_open.wait()
        for _ in range(30):
            with trio.fail_after(3):
                got[text_of(await s.call_tool("both", {"order": order}))] += 1
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"
    print(dict(got), warnings_of(caplog)[:2])
    assert sum(got.values()) == 30


# -- malformed answers with the request's id; odd HTTP framings -------------------------


MALFORMED = {
    "result_string": '{"jsonrpc":"2.0","id":RID,"result":"x"}',
    "result_null": '{"jsonrpc":"2.0","id":RID,"result":null}',
    "no_jsonrpc": '{"id":RID,"result":{}}',
    "both": '{"jsonrpc":"2.0","id":RID,"result":{},"error":{}}',
    "error_no_code": '{"jsonrpc":"2.0","id":RID,"error":{"message":"m"}}',
    "empty": "",
    "deep": "[" * 5000 + "]" * 5000,
    "empty_batch": "[]",
    "nul": "\x00",
}


async def malformed(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    body = MALFORMED[args["kind"]].replace("RID", json.dumps(rid))
    await stream.send_all(raw_reply(body.encode()))
    return True


@pytest.mark.parametrize("kind", sorted(MALFORMED))
async def test_a_malformed_answer_fails_that_call_at_once(kind: str) -> None:
    async with mcp_server({"malformed": malformed}) as server, session_to(server) as (s, t):
        opened = t.connections_opened
        for _ in range(3):
            with trio.fail_after(3), pytest.raises(AgentHostError):
                await s.call_tool("malformed", {"kind": kind})
        with trio.fail_after(3):
            assert text_of(await s.call_tool("echo", {"message": "ok"})) == "ok"
        assert t.connections_opened == opened


async def http10(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    """HTTP/1.0 (or Connection: close) and the server closes after it: not kept."""
    body = result_body(json.dumps(rid), "closing")
    status = b"HTTP/1.0 200 OK" if args["kind"] == "1.0" else b"HTTP/1.1 200 OK"
    extra = b"Connection: close\r\n" if args["kind"] == "close" else b""
    await stream.send_all(
        status
        + b"\r\nContent-Type: application/json\r\n"
        + extra
        + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    return False


@pytest.mark.parametrize("kind", ["1.0", "close"])
async def test_an_answer_then_the_server_closes(kind: str) -> None:
    async with mcp_server({"http10": http10}) as server, session_to(server) as (s, t):
        opened = t.connections_opened or 0
        for i in range(10):
            with trio.fail_after(3):
                assert text_of(await s.call_tool("http10", {"kind": kind})) == "closing"
            with trio.fail_after(3):
                assert text_of(await s.call_tool("echo", {"message": f"e{i}"})) == f"e{i}"
        assert (t.connections_opened or 0) - opened >= 9  # none reused after its close


# -- the session closes as the answers come -------------------------------------------------


async def close_as_answers_come(delay: float, callers: int) -> tuple[dict[int, str], list[str]]:
    """``callers`` calls held by the server, all released as the session closes."""
    gate = trio.Event()

    async def held(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
        await gate.wait()
        await stream.send_all(json_reply(rid, str(args["tag"])))
        return True

    got: dict[int, str] = {}
    errors: list[str] = []
    async with mcp_server({"held": held}) as server:

        async def caller(s: ClientSession, tag: int) -> None:
            try:
                got[tag] = text_of(await s.call_tool("held", {"tag": tag}, timeout=20))
            except AgentHostError as exc:
                errors.append(str(exc))

        with trio.fail_after(10):
            async with trio.open_nursery() as outer, session_to(server) as (s, _):
                for tag in range(callers):
                    outer.start_soon(caller, s, tag)
                await until(lambda: len(server.call_ids) == callers + 1)
                gate.set()
                await trio.sleep(delay)  # the answers are on their way; the session closes
    return got, errors


@pytest.mark.parametrize("delay", [0.0, 0.0005, 0.001, 0.002, 0.004])
async def test_the_session_closing_as_50_answers_arrive(delay: float) -> None:
    got, errors = await close_as_answers_come(delay, 50)
    print(len(got), "answered;", len(errors), "closed:", errors[:1])
    assert len(got) + len(errors) == 50
    assert all(text == str(tag) for tag, text in got.items())
    assert not any("timed out" in why for why in errors), errors


async def test_answers_to_calls_ended_by_the_sessions_close_are_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The client ended these calls (rpc.close() marks their ids abandoned, as a timeout
    does): a server's answer to one is no mystery to warn about (was: WARNING "ignoring
    response to unknown request id N", seen failing as a strict xfail)."""
    for delay in (0.0, 0.0005, 0.001):
        await close_as_answers_come(delay, 20)
    unknown = [w for w in warnings_of(caplog) if "unknown request id" in w]
    assert not unknown, unknown[:3]


# -- the server quotes our Authorization header back --------------------------------------


async def quote_token(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    error = {"code": -32001, "message": f"bad Authorization: {TOKEN}", "data": {"got": TOKEN}}
    if args["where"] == "alone":
        body: Any = {"jsonrpc": "2.0", "id": rid, "error": error}
    elif args["where"] == "result":  # the answer alone, then an unmatched error quoting it
        body = [
            json.loads(result_body(json.dumps(rid), "ok")),
            {"jsonrpc": "2.0", "id": rid, "error": error},
        ]
    else:  # an error for an id nobody sent, then the answer
        body = [
            {"jsonrpc": "2.0", "id": 987654, "error": error},
            json.loads(result_body(json.dumps(rid), "ok")),
        ]
    await stream.send_all(raw_reply(json.dumps(body).encode()))
    return True


@pytest.mark.parametrize("where", ["alone", "result", "stranger"])
async def test_a_token_quoted_back_is_never_printed(where: str) -> None:
    async with mcp_server({"quote_token": quote_token}) as server, session_to(server) as (s, _):
        with trio.fail_after(3):
            if where != "alone":
                assert text_of(await s.call_tool("quote_token", {"where": where})) == "ok"
                return
            with pytest.raises(JSONRPCError) as caught:
                await s.call_tool("quote_token", {"where": where})
        exc = caught.value
        assert "DO-NOT-PRINT" not in f"{exc} {exc!r} {exc.data}"


# -- ambiguous framing (request-smuggling shapes): never a desynchronised connection -------


async def ambiguous(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
    body = result_body(json.dumps(rid), "framed")
    forged = result_body(json.dumps(rid + 1), "forged")
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    shape = args["shape"]
    if shape == "te_and_cl":  # CL covers the chunked body and a forged answer after it
        data = chunked + raw_reply(forged)
        frame = b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n" % len(data)
    elif shape == "two_lengths":
        data = body + raw_reply(forged)
        frame = b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(body), len(data))
    elif shape == "te_not_last":  # chunked, then identity: the length is not known
        data = chunked
        frame = b"Transfer-Encoding: chunked, identity\r\n\r\n"
    else:  # a negative length
        data = body
        frame = b"Content-Length: -1\r\n\r\n"
    await stream.send_all(head + frame + data)
    return True


@pytest.mark.parametrize("shape", ["te_and_cl", "two_lengths", "te_not_last", "negative"])
async def test_ambiguous_framing_never_desynchronises(shape: str) -> None:
    async with mcp_server({"ambiguous": ambiguous}) as server, session_to(server) as (s, _):
        with trio.fail_after(3):
            try:
                text = text_of(await s.call_tool("ambiguous", {"shape": shape}, timeout=0.3))
            except AgentHostError as exc:
                text = f"error: {exc}"
        print(shape, "->", text)
        assert text == "framed" or text.startswith("error"), text
        for i in range(3):
            with trio.fail_after(3):
                assert text_of(await s.call_tool("echo", {"message": f"e{i}"})) == f"e{i}"


# -- more callers than the pool holds: kept connections hand their slots on -----------------


async def test_250_callers_through_a_100_connection_pool() -> None:
    """Answers alone (connections kept without I/O) wake the callers parked for a slot;
    every call is answered with its own tag, the pool never opens more than 100."""
    rng = random.Random(5)

    async def jittery(stream: trio.SocketStream, rid: Any, args: dict[str, Any]) -> bool:
        await trio.sleep(rng.uniform(0, 0.02))
        await stream.send_all(json_reply(rid, str(args["tag"])))
        return True

    got: dict[int, str] = {}
    async with mcp_server({"jittery": jittery}) as server, session_to(server) as (s, t):

        async def caller(tag: int) -> None:
            for round_ in range(4):
                text = text_of(await s.call_tool("jittery", {"tag": f"{tag}.{round_}"}))
                assert text == f"{tag}.{round_}"
            got[tag] = text

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                for tag in range(250):
                    nursery.start_soon(caller, tag)
        print("opened", t.connections_opened)
        assert len(got) == 250
        assert (t.connections_opened or 0) <= 101, t.connections_opened
