"""The lean HTTP path of Streamable HTTP (issue 26): connection reuse, the proxy rule, and
the pool's bounds, against the official SDK server and scripted HTTP byte streams.

Also: requests run in the caller's task (the last section).

The MCP peer is the SDK's server (``sdk_server.py streamable-http``, SSE responses),
reached through :class:`Forwarder`, a TCP relay that counts connections and keeps the
request lines it saw, so the tests observe the wire, not the transport's insides. The
pool's bounds are tested against raw HTTP responses (the HTTP layer, not MCP: no MCP
peer can send a malformed status line on request).
"""

from __future__ import annotations

import gc
import itertools
import random
import re
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Final

import httpx
import orjson
import pytest
import trio
import trio.testing

from agenthost.config.model import ServerConfig, Timeouts
from agenthost.connection import open_remote_transport, open_session
from agenthost.errors import TransportClosed, TransportError
from agenthost.protocol.jsonrpc import ErrorResponse, Message, Request
from agenthost.protocol.types import TextContent
from agenthost.transports.http import StreamableHTTPTransport, open_streamable_http_transport
from agenthost.transports.lean import MAX_HEAD, LeanPool, LeanResponse, encode_headers
from bench.measure import BENCH_DIR
from bench.runner import node
from tests.forkserver import peer_python
from tests.peers.http_launch import PEERS, free_port, serve

pytestmark = pytest.mark.timeout(90)

_REQUEST_LINE = re.compile(rb"(GET|POST|DELETE) (\S+) HTTP/1\.1\r\n")


class Forwarder:
    """A TCP relay to ``127.0.0.1:target``: counts connections, keeps request lines."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.connections = 0
        self.sent = bytearray()  # everything clients sent, to find the request lines
        self.received = bytearray()  # everything the server answered

    def request_lines(self) -> list[tuple[str, str]]:
        return [(m.decode(), t.decode()) for m, t in _REQUEST_LINE.findall(bytes(self.sent))]

    async def handle(self, client: trio.SocketStream) -> None:
        self.connections += 1
        try:
            server = await trio.open_tcp_stream("127.0.0.1", self.target)
        except OSError:
            await client.aclose()
            return

        async def pump(a: trio.SocketStream, b: trio.SocketStream, log: bytearray) -> None:
            try:
                while data := await a.receive_some(65536):
                    log += data
                    await b.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                await trio.aclose_forcefully(b)

        async with server, client, trio.open_nursery() as nursery:
            nursery.start_soon(pump, client, server, self.sent)
            nursery.start_soon(pump, server, client, self.received)


@pytest.fixture(autouse=True)
def _lean_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lean path is the default; a developer's ``AGENTHOST_LEAN_HTTP=0`` must not
    turn these tests into httpx tests."""
    monkeypatch.delenv("AGENTHOST_LEAN_HTTP", raising=False)


@asynccontextmanager
async def forwarding(target: int) -> AsyncIterator[tuple[Forwarder, int]]:
    forwarder = Forwarder(target)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, forwarder.handle, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        yield forwarder, port
        nursery.cancel_scope.cancel()


def sdk_argv(port: int) -> list[str]:
    return [peer_python(), str(PEERS / "sdk_server.py"), "streamable-http", "--port", str(port)]


@asynccontextmanager
async def peer(kind: str) -> AsyncIterator[tuple[int, str]]:
    """A server's port and MCP endpoint path: the SDK's server, or the bench's Node
    server (its SSE responses end in a write of their own; it runs until stdin closes)."""
    port = free_port()
    if kind == "sdk":
        async with serve(sdk_argv(port), port):
            yield port, "/mcp"
        return
    argv = [node(), str(BENCH_DIR / "http_server.mjs"), str(port)]
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(
            partial(trio.run_process, argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        )
        assert process.stdin is not None and process.stdout is not None
        with trio.fail_after(30):
            line = await process.stdout.receive_some(100)
        assert line.startswith(b"listening"), line
        try:
            yield port, "/sse"
        finally:
            await process.stdin.aclose()
            with trio.move_on_after(5):
                await process.wait()
            process.kill()


def config(url: str) -> ServerConfig:
    return ServerConfig(
        name="sdk",
        transport="streamable-http",
        url=url,
        timeouts=Timeouts(connect=5.0, shutdown=2.0),
    )


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


async def calls(transport: StreamableHTTPTransport, count: int) -> None:
    async with open_session(transport, name="sdk") as session:
        for i in range(count):
            assert text_of(await session.call_tool("echo", {"message": f"m{i}"})) == f"m{i}"


# -- connection reuse on SSE responses (item 4) -------------------------------------------


@pytest.mark.parametrize("kind", ["sdk", "node"])
async def test_sse_responses_reuse_their_connection_on_the_lean_path(kind: str) -> None:
    async with peer(kind) as (port, path), forwarding(port) as (relay, relay_port):
        url = f"http://127.0.0.1:{relay_port}{path}"
        async with open_remote_transport(config(url)) as transport:
            assert isinstance(transport, StreamableHTTPTransport)
            await calls(transport, 30)
            lean = transport.connections_opened
            assert lean is not None  # the lean path took the POSTs
    assert b"text/event-stream" in relay.received  # the server did answer with SSE
    posts = [line for line in relay.request_lines() if line[0] == "POST"]
    assert len(posts) >= 32  # initialize, initialized, 30 calls
    # Before: one connection per SSE response (33). Now: the POSTs share one, the GET
    # stream holds one, the closing DELETE (httpx) may take one.
    assert lean <= 3, lean
    assert relay.connections <= 5, relay.connections


@pytest.mark.parametrize("kind", ["sdk", "node"])
async def test_sse_responses_reuse_their_connection_through_httpx(kind: str) -> None:
    """A client the caller gave us always goes through httpx; it reuses connections too."""
    async with peer(kind) as (port, path), forwarding(port) as (relay, relay_port):
        url = f"http://127.0.0.1:{relay_port}{path}"
        async with (
            httpx.AsyncClient() as client,
            open_streamable_http_transport(url, name="sdk", client=client) as transport,
        ):
            await calls(transport, 30)
            assert transport.connections_opened is None  # not the lean path
    assert len([line for line in relay.request_lines() if line[0] == "POST"]) >= 32
    assert relay.connections <= 5, relay.connections


# -- a configured proxy is honoured (the lean path steps aside) ---------------------------


async def test_a_configured_proxy_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    async with serve(sdk_argv(port), port), forwarding(port) as (proxy, proxy_port):
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy_port}")
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy_port}")
        url = f"http://127.0.0.1:{port}/mcp"
        async with open_remote_transport(config(url)) as transport:
            assert isinstance(transport, StreamableHTTPTransport)
            await calls(transport, 3)
            assert transport.connections_opened is None
    # Every request went to the proxy, in the absolute form a proxy is sent.
    lines = proxy.request_lines()
    assert len([line for line in lines if line[0] == "POST"]) >= 5
    assert {target for _, target in lines} == {url}


async def test_no_proxy_for_the_host_keeps_the_lean_path(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    async with serve(sdk_argv(port), port):
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
        monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        async with open_remote_transport(config(f"http://127.0.0.1:{port}/mcp")) as transport:
            assert isinstance(transport, StreamableHTTPTransport)
            await calls(transport, 2)
            assert transport.connections_opened


# -- the pool against scripted HTTP responses ---------------------------------------------


Script = Callable[[trio.SocketStream], Awaitable[None]]


@asynccontextmanager
async def scripted(script: Script) -> AsyncIterator[str]:
    """An HTTP server on 127.0.0.1 whose every connection runs ``script``."""

    async def handle(stream: trio.SocketStream) -> None:
        async with stream:
            await script(stream)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        yield f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"
        nursery.cancel_scope.cancel()


async def read_request(stream: trio.SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    found = re.search(rb"Content-Length: (\d+)", head)
    length = int(found.group(1)) if found else 0
    while len(body) < length:
        body += await stream.receive_some(65536)
    return head


async def body_of(pool: LeanPool) -> bytes:
    response = await pool.request("POST", b"", b"{}", read_timeout=5)
    try:
        return b"".join([chunk async for chunk in response.aiter_bytes()])
    finally:
        await response.aclose()


async def test_keep_alive_reuse_and_an_early_close() -> None:
    async def keep_alive(stream: trio.SocketStream) -> None:
        while await read_request(stream):
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    async with scripted(keep_alive) as url:
        pool = LeanPool(url, server="s", connect_timeout=5)
        assert [await body_of(pool) for _ in range(5)] == [b"ok"] * 5
        assert pool.opened == 1
        # A response closed before its end closes its connection (never reused half-read).
        response = await pool.request("POST", b"", b"{}", read_timeout=5)
        await response.aclose()
        assert await body_of(pool) == b"ok"
        assert pool.opened == 2
        await pool.aclose()


async def test_the_no_io_ends_of_a_response_keep_only_a_whole_answer() -> None:
    """``whole()`` hands out a body only when all of it is in, and ``close_now()`` pools a
    connection only when it was read to its end and the pool is open (else the caller's
    ``aclose()`` closes it)."""
    split: list[bool] = []  # the answers to send in two pieces, in order

    async def script(stream: trio.SocketStream) -> None:
        while await read_request(stream):
            if split and split.pop(0):
                await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nha")
                await trio.sleep(0.2)
                await stream.send_all(b"lf")
            else:
                await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    async with scripted(script) as url:
        pool = LeanPool(url, server="s", connect_timeout=5)
        response = await pool.request("POST", b"", b"{}", read_timeout=5)
        await response.finish_head()
        assert response.whole(1) is None  # over the limit: read() says so
        assert response.whole(2) == b"ok"
        assert response.close_now()
        assert pool.opened == 1 and await body_of(pool) == b"ok" and pool.opened == 1

        aborted = await pool.request("POST", b"", b"{}", read_timeout=5)
        await aborted.finish_head()
        aborted.cancel()  # aborted after its answer came: its socket is closed
        assert aborted.whole(100) == b"ok"
        assert not aborted.close_now()  # never pooled
        await aborted.aclose()
        assert await body_of(pool) == b"ok" and pool.opened == 2

        split.append(True)
        halved = await pool.request("POST", b"", b"{}", read_timeout=5)
        await halved.finish_head()
        assert halved.whole(100) is None  # half of it came: the rest needs a read
        assert not halved.close_now()  # not read to its end: not pooled (nothing done)
        assert await halved.read(100) == b"half"
        other = await pool.request("POST", b"", b"{}", read_timeout=5)  # a second connection
        await other.finish_head()
        assert other.whole(100) == b"ok"
        await pool.aclose()
        assert not halved.close_now()  # whole now, but the pool is closed: nothing kept
        assert not other.close_now()
        await halved.aclose()
        await other.aclose()
        assert pool.opened == 3
        assert await _refused(pool)


async def _refused(pool: LeanPool) -> bool:
    try:
        await pool.request("POST", b"", b"{}", read_timeout=5)
    except TransportClosed:
        return True
    return False


async def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    closed = trio.Event()

    async def answer_once(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await stream.aclose()  # a keep-alive timeout on the server's side
        closed.set()

    async with scripted(answer_once) as url:
        pool = LeanPool(url, server="s", connect_timeout=5)
        assert await body_of(pool) == b"ok"
        await closed.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert await body_of(pool) == b"ok"  # not "the connection broke"
        assert pool.opened == 2


async def test_a_body_that_ends_with_the_connection() -> None:
    async def until_close(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")

    async with scripted(until_close) as url:
        pool = LeanPool(url, server="s", connect_timeout=5)
        assert await body_of(pool) == b"all of it"
        assert await body_of(pool) == b"all of it"
        assert pool.opened == 2


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * (MAX_HEAD + 10), "headers larger than"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "closed the connection"),
        (b"NOT HTTP AT ALL\r\n\r\n", "malformed HTTP response"),
    ],
)
async def test_a_bad_response_is_a_transport_error(answer: bytes, words: str) -> None:
    async def bad(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(answer)

    async with scripted(bad) as url:
        pool = LeanPool(url, server="s", connect_timeout=5)
        with trio.fail_after(10), pytest.raises(TransportError, match=words) as info:
            await body_of(pool)
        assert not isinstance(info.value, TransportClosed)


async def test_a_request_larger_than_the_socket_takes_goes_whole() -> None:
    """A body the kernel cannot take in one write (the server reads slowly) goes out in
    pieces as the socket drains: the request's one write is only a fast path."""
    size = 8 * 1024 * 1024
    got: list[int] = []

    async def slow_reader(stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(4096)
        head, _, body = data.partition(b"\r\n\r\n")
        found = re.search(rb"Content-Length: (\d+)", head)
        assert found is not None
        length = len(body)
        while length < int(found.group(1)):
            await trio.sleep(0.001)  # slower than the client writes: its buffer fills
            length += len(await stream.receive_some(65536))
        got.append(length)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    async with scripted(slow_reader) as url:
        pool = LeanPool(url, server="s", connect_timeout=20)
        with trio.fail_after(30):
            response = await pool.request("POST", b"", b"x" * size, read_timeout=20)
            assert await response.read(10) == b"ok"
            await response.aclose()
        assert got == [size]
        await pool.aclose()


async def test_a_server_that_never_reads_the_request_times_out_the_write() -> None:
    async def never_read(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with scripted(never_read) as url:
        pool = LeanPool(url, server="s", connect_timeout=0.5)
        with trio.fail_after(10), pytest.raises(TransportError, match="sending the request"):
            await pool.request("POST", b"", b"x" * (32 * 1024 * 1024), read_timeout=5)
        # The half-written connection was closed, not pooled: the next request opens one.
        with trio.fail_after(5), pytest.raises(TransportError, match="no data from"):
            await pool.request("POST", b"", b"{}", read_timeout=0.1)
        assert pool.opened == 2
        await pool.aclose()


async def test_a_cancelled_write_closes_its_connection() -> None:
    connected = trio.Event()

    async def never_read(stream: trio.SocketStream) -> None:
        connected.set()
        await trio.sleep_forever()

    async with scripted(never_read) as url:
        pool = LeanPool(url, server="s", connect_timeout=30, max_connections=1)
        scope = trio.CancelScope()

        async def write_forever() -> None:
            with scope:
                await pool.request("POST", b"", b"x" * (32 * 1024 * 1024), read_timeout=5)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(write_forever)
            # Cancelled once the write is parked on the full socket (not after a fixed
            # time: on a loaded machine the connection may not even be open by then).
            await connected.wait()
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
        assert scope.cancelled_caught
        # The one slot came back: a second request gets a connection (and waits for an
        # answer that never comes), not "no connection came free".
        with trio.fail_after(5), pytest.raises(TransportError, match="no data from"):
            await pool.request("POST", b"", b"{}", read_timeout=0.1)
        assert pool.opened == 2
        await pool.aclose()


async def test_waiting_for_a_connection_is_bounded() -> None:
    async def never_answer(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await trio.sleep_forever()

    async with scripted(never_answer) as url:
        pool = LeanPool(url, server="s", connect_timeout=0.5, max_connections=2)
        async with trio.open_nursery() as nursery:
            for _ in range(2):
                nursery.start_soon(body_of, pool)
            await trio.sleep(0.2)
            with trio.fail_after(5), pytest.raises(TransportClosed, match="came free"):
                await body_of(pool)
            nursery.cancel_scope.cancel()
        # The cancelled requests gave their connections back.
        with trio.move_on_after(0.2):
            await body_of(pool)  # waits on the server, not on the pool
        assert pool.opened == 3


async def test_a_released_connection_goes_to_the_request_waiting_for_one() -> None:
    """One slot: requests queue for it in order, each handed the released slot; one that
    gave up waiting (cancelled) does not take a slot with it."""

    async def keep_alive(stream: trio.SocketStream) -> None:
        while await read_request(stream):
            await trio.sleep(0.05)
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    async with scripted(keep_alive) as url:
        pool = LeanPool(url, server="s", connect_timeout=5, max_connections=1)
        done: list[int] = []

        async def one(index: int) -> None:
            assert await body_of(pool) == b"ok"
            done.append(index)

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for index in range(5):
                    nursery.start_soon(one, index)
                    await trio.testing.wait_all_tasks_blocked()
                with trio.move_on_after(0.01):  # a waiter that gives up
                    await body_of(pool)
            assert done == [0, 1, 2, 3, 4]
            assert await body_of(pool) == b"ok"  # the slot of the one that gave up is free
        assert pool.opened == 1
        await pool.aclose()


async def test_a_started_request_aborted_from_another_task_ends_its_wait() -> None:
    """LeanPool.start() sends with no wait and no cancel scope; cancel() (abort, a closing
    transport) closes the connection: a wait on it ends, and one that has not begun
    refuses to (a TransportError, not an error about a closed descriptor)."""

    async def keep_alive_then_hang(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await read_request(stream)
        await trio.sleep_forever()

    async with scripted(keep_alive_then_hang) as url:
        pool = LeanPool(url, server="s", connect_timeout=5)
        assert pool.start("POST", b"", b"{}") is None  # no idle connection yet
        assert await body_of(pool) == b"ok"
        response = pool.start("POST", b"", b"{}")
        assert response is not None  # on the idle connection, sent without a wait
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_soon, response)
                with pytest.raises(TransportError, match="broke"):
                    await response.finish_head()
        assert pool.start("POST", b"", b"{}") is None  # that connection is gone
        # Aborted before its wait began: refused at once; its slot comes back.
        assert await body_of(pool) == b"ok"  # a new connection (each answers once)
        response = pool.start("POST", b"", b"{}")
        assert response is not None
        response.cancel()
        with trio.fail_after(5), pytest.raises(TransportError, match="aborted"):
            await response.finish_head()
        assert await body_of(pool) == b"ok"
        assert pool.opened == 3
        await pool.aclose()


async def _cancel_soon(response: Any) -> None:
    await trio.sleep(0.1)
    response.cancel()


async def test_nothing_listening_is_transport_closed() -> None:
    pool = LeanPool(f"http://127.0.0.1:{free_port()}/mcp", server="s", connect_timeout=5)
    with pytest.raises(TransportClosed, match="cannot reach"):
        await body_of(pool)


def test_headers_that_could_inject_are_not_sent_on_the_lean_path() -> None:
    assert encode_headers({"Mcp-Name": "echo"}) == b"Mcp-Name: echo\r\n"
    for headers in (
        {"Mcp-Name": "a\r\nX-Injected: 1"},
        {"Mcp-Name": "a\nb"},
        {"Mcp-Name": "caf\u00e9"},
        {"Bad Name": "x"},
        {"Bad:Name": "x"},
    ):
        assert encode_headers(headers) is None, headers


async def test_a_connection_dropped_before_any_response_answers_the_request() -> None:
    """The server reads the request and hangs up: the request gets an error response.

    Before: the POST task read ``status`` before any response set it (UnboundLocalError
    out of the transport's nursery), on either path.
    """

    async def hang_up(stream: trio.SocketStream) -> None:
        await read_request(stream)

    async with scripted(hang_up) as url:
        for client in (None, httpx.AsyncClient()):
            async with open_streamable_http_transport(url, name="s", client=client) as t:
                await t.send(Request(7, "tools/list", {}))
                with trio.fail_after(10):
                    answer = await t.receive()
                assert isinstance(answer, ErrorResponse) and answer.id == 7
                assert "HTTP request failed" in answer.error.message
            if client is not None:
                await client.aclose()


# -- requests in the caller's task (issue 26, "1 in flight") ------------------------------
#
# The POST of a request is made by the task that calls, and its answer handed to that
# task directly: no task per request, no channel and no reader in between. The first
# test fails if that silently stops (a task spawned per call, or more scheduler steps
# per call) against the SDK's server and the bench's Node server; the second checks
# that the inline exchange delivers exactly what the task-per-request path delivers, in
# the same order, for generated responses (the tests/test_hot_path.py way).


class _Count(trio.abc.Instrument):
    """Tasks spawned and task steps (each a scheduler pass that ran a task), but for the
    task that reads an SSE stream on after its response was delivered (the SDK's server
    ends its streams in a write of their own, which the caller does not wait for) and a
    new connection's connect attempt."""

    def __init__(self) -> None:
        self.spawned = 0
        self.steps = 0
        self.names: list[str] = []

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        # A connect's own attempt task is not the exchange's: the pool opens a connection
        # when every one is busy (under load, a drain may still hold the last one).
        if not task.name.endswith("._drain") and "open_tcp_stream" not in task.name:
            self.spawned += 1
            self.names.append(task.name)

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if not task.name.endswith("._drain"):
            self.steps += 1


@pytest.mark.parametrize(("kind", "path"), [("sdk", None), ("node", "/json"), ("node", "/sse")])
async def test_a_call_spawns_no_task_and_wakes_its_caller_directly(
    kind: str, path: str | None
) -> None:
    calls = 50
    async with peer(kind) as (port, default_path):
        url = f"http://127.0.0.1:{port}{path or default_path}"
        async with open_remote_transport(config(url)) as transport:
            assert isinstance(transport, StreamableHTTPTransport)
            async with open_session(transport, name="sdk") as session:
                for i in range(5):  # the GET stream, the first connections
                    await session.call_tool("echo", {"message": f"w{i}"})
                count = _Count()
                trio.lowlevel.add_instrument(count)
                try:
                    for i in range(calls):
                        result = await session.call_tool("echo", {"message": f"m{i}"})
                        assert text_of(result) == f"m{i}"
                finally:
                    trio.lowlevel.remove_instrument(count)
    print(f"{kind} {path}: spawned/call {count.spawned / calls}, steps/call {count.steps / calls}")
    # Before (a task per POST, its answer through a channel and the reader): 1 task and
    # 6 (Node) to 7.2 (SDK) steps per call; the floor client's 2 steps. Then 2 (Node) and
    # 3 (SDK) with a scheduler pass for the write; now a request the socket takes at once
    # does not yield, and the wait for its answer is the one step (the SDK's server writes
    # the head and body of its reply apart: a second).
    assert count.spawned == 0, count.names
    assert count.steps / calls < (2.5 if kind == "sdk" else 1.5)


async def test_a_whole_one_event_stream_costs_what_a_json_reply_costs() -> None:
    # The Node server answers every POST with a stream of one event, all in one read: the
    # answer is taken where a JSON reply's is, with no cancel scope or stream reader.
    # Before, every such call took the general path: 1.8x the Python function calls of
    # a JSON reply (bench "HTTP SSE calls/s, 1 in flight": 835 lines against 458).
    async with peer("node") as (port, _):
        json_calls = await _python_calls(f"http://127.0.0.1:{port}/json")
        sse_calls = await _python_calls(f"http://127.0.0.1:{port}/sse")
    print(f"Python calls per call: JSON {json_calls:.1f}, SSE {sse_calls:.1f}")
    assert sse_calls < 1.3 * json_calls, (json_calls, sse_calls)


async def _python_calls(url: str, calls: int = 40) -> float:
    """Python function calls per tool call (a profile hook), warm connections."""
    count = 0

    def hook(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    async with open_remote_transport(config(url)) as transport:
        assert isinstance(transport, StreamableHTTPTransport)
        async with open_session(transport, name="sdk") as session:
            for i in range(3):  # the GET stream, the first connections
                await session.call_tool("echo", {"message": f"w{i}"})
            sys.setprofile(hook)
            try:
                for i in range(calls):
                    result = await session.call_tool("echo", {"message": f"m{i}"})
                    assert text_of(result) == f"m{i}"
            finally:
                sys.setprofile(None)
    return count / calls


@pytest.mark.parametrize(("kind", "path"), [("sdk", None), ("node", "/json"), ("node", "/sse")])
async def test_a_finished_response_is_freed_without_the_garbage_collector(
    kind: str, path: str | None
) -> None:
    # A response's parser holds its bound callbacks: kept after the answer, every call left
    # a cycle (response, parser, deque, five methods) that only the collector frees, a
    # gen-0 collection every ~80 calls and a full one every ~10,000 (bench: "HTTP JSON
    # calls/s, 1 in flight"). With the collector off, none may pile up.
    calls = 40
    async with peer(kind) as (port, default_path):
        url = f"http://127.0.0.1:{port}{path or default_path}"
        async with open_remote_transport(config(url)) as transport:
            assert isinstance(transport, StreamableHTTPTransport)
            async with open_session(transport, name="sdk") as session:
                for i in range(3):  # the GET stream, the first connections
                    await session.call_tool("echo", {"message": f"w{i}"})
                gc.collect()
                gc.disable()
                try:
                    before = _responses()
                    for i in range(calls):
                        result = await session.call_tool("echo", {"message": f"m{i}"})
                        assert text_of(result) == f"m{i}"
                    left = _responses() - before
                finally:
                    gc.enable()
    assert left <= 1, f"{left} responses of {calls} calls wait for the garbage collector"


def _responses() -> int:
    return sum(type(o) is LeanResponse for o in gc.get_objects())


# -- the inline exchange delivers what the task-per-request path delivers -----------------

_TARGET: Final = 7


def _messages(rng: random.Random) -> list[bytes]:
    """What a server may send on a request's stream: its notifications, its own
    requests, answers to other ids, junk, and (usually) the answer, last."""
    out = []
    for i in range(rng.randrange(4)):
        out.append(
            rng.choice(
                [
                    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"n": i}},
                    {"jsonrpc": "2.0", "id": f"s{i}", "method": "ping"},
                    {"jsonrpc": "2.0", "id": 900 + i, "result": {"other": i}},
                    {"jsonrpc": "2.0", "method": "notifications/message"},
                ]
            )
        )
    end = rng.randrange(6)
    if end == 1:
        out.append({"jsonrpc": "2.0", "id": _TARGET, "error": {"code": -5, "message": "no"}})
    elif end == 2:
        out.append({"jsonrpc": "2.0", "id": _TARGET, "result": 5})  # invalid
    elif end > 2:
        out.append({"jsonrpc": "2.0", "id": _TARGET, "result": {"ok": rng.random()}})
    frames = [orjson.dumps(m) for m in out]
    if frames and rng.random() < 0.2:
        frames.insert(rng.randrange(len(frames)), b"{not json")
    return frames


def _response(rng: random.Random) -> list[bytes]:
    """One generated HTTP response to a POST, in the pieces it is written in."""
    frames = _messages(rng)
    shape = rng.randrange(10)
    if shape >= 8:  # a stream of the answer alone, dressed as servers dress it
        return [_one_event_stream(rng)]
    if shape == 0:  # an HTTP error, with a JSON-RPC error body or not
        status, kind = rng.choice([b"400 Bad Request", b"500 Oops", b"404 Not Found"]), b"json"
        body = rng.choice([b'{"error":{"code":-32022,"message":"v"}}', b"<html>down</html>"])
    elif shape == 1:  # neither JSON nor SSE
        status, kind, body = b"200 OK", b"text/plain", b"hello"
    elif shape in (2, 3):  # JSON: one message or a batch
        status, kind = b"200 OK", b"application/json"
        body = frames[-1] if frames and shape == 2 else b"[" + b",".join(frames) + b"]"
    else:  # SSE: event ids and a 1 ms retry (a broken stream is resumed: GET says 405)
        status, kind = b"200 OK", b"text/event-stream"
        ids = rng.random() < 0.5
        events = [b"id: p\nretry: 1\ndata:\n\n"] if ids else []
        for i, frame in enumerate(frames):
            if rng.random() < 0.2:
                events.append(b"event: other\ndata: x\n\n")
            events.append(b"id: %d\ndata: %s\n\n" % (i, frame) if ids else b"data: %s\n\n" % frame)
        body = b"".join(events)
    head = b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" % (
        status,
        kind,
        len(body),
    )
    data = head + body
    cuts = sorted(rng.randrange(len(data)) for _ in range(rng.randrange(3)))
    return [data[a:b] for a, b in itertools.pairwise([0, *cuts, len(data)]) if a < b]


def _one_event_stream(rng: random.Random) -> bytes:
    """A whole 200 event stream whose one message is the answer (or not quite: another
    id, an error, a batch, an event type of its own), in one write: what the inline
    exchange may take without the general path."""
    answer = {"jsonrpc": "2.0", "id": _TARGET, "result": {"ok": rng.random()}}
    twist = rng.randrange(12)  # 0 and 6-11: the answer as it should be
    if twist == 1:
        answer["id"] = _TARGET + 1
    elif twist == 2:
        answer = {"jsonrpc": "2.0", "id": _TARGET, "error": {"code": -1, "message": "no"}}
    data = orjson.dumps([answer] if twist == 3 else answer)
    lines = [b": keep-alive"] if rng.random() < 0.3 else []
    if rng.random() < 0.5:
        lines += [b"id: prime", b"retry: 5", b""]  # a priming event
    if twist == 4:
        lines.append(b"event: progress")
    elif rng.random() < 0.5:
        lines.append(b"event: message")
    if rng.random() < 0.5:
        lines.append(b"id: 1")
    lines += [b"data: " + data, b""]
    if rng.random() < 0.3:
        lines += [b"data:", b""]  # an empty event after the answer
    end = rng.choice([b"\n", b"\r\n", b"\r"])
    body = (b"\xef\xbb\xbf" if rng.random() < 0.2 else b"") + end.join(lines) + end
    if twist == 5:
        body = body[: -len(end)]  # the answer's event never ends
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n"
    return head % len(body) + body


async def _serve(replies: deque[list[bytes]], stream: trio.SocketStream) -> None:
    try:
        while head := await read_request(stream):
            if head.startswith(b"GET"):
                await stream.send_all(b"HTTP/1.1 405 No\r\nContent-Length: 0\r\n\r\n")
                continue
            for piece in replies.popleft():
                await stream.send_all(piece)
                await trio.lowlevel.checkpoint()  # the pieces apart, as a server may
    except (trio.BrokenResourceError, ConnectionError):
        pass  # the client closed a response it did not read (an unexpected Content-Type)


async def _through_receive(transport: StreamableHTTPTransport) -> list[Message]:
    got: list[Message] = []
    while not got or getattr(got[-1], "id", None) != _TARGET or type(got[-1]) is Request:
        got.append(await transport.receive())
    return got


@pytest.mark.parametrize("lean", [True, False])
async def test_the_inline_exchange_delivers_what_a_request_task_delivers(
    lean: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not lean:  # (_lean_on made the lean path the default)
        monkeypatch.setenv("AGENTHOST_LEAN_HTTP", "0")
    rng = random.Random(26)
    replies: deque[list[bytes]] = deque()
    request = Request(_TARGET, "tools/call", {"name": "echo"})
    async with (
        scripted(partial(_serve, replies)) as url,
        open_streamable_http_transport(url, name="scripted") as transport,
    ):
        assert (transport.connections_opened is not None) is lean
        for _ in range(150):
            reply = _response(rng)
            replies.extend([reply, reply])
            await transport.send(request)
            general = await _through_receive(transport)
            inline: list[Message] = []

            async def deliver(message: Message, into: list[Message] = inline) -> None:
                into.append(message)

            answer = await transport.exchange(request, deliver)
            if answer is not None:  # the answer alone is returned, not delivered
                assert inline == []
                inline.append(answer)
            if not inline or getattr(inline[-1], "id", None) != _TARGET:
                inline += await _through_receive(transport)  # resumed in the background
            assert inline == general, reply
