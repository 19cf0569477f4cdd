"""Requests over Streamable HTTP run in the caller's task (issue 26, "1 in flight").

The POST of a request is made by the task that calls, and its answer handed to that task
directly: no task per request, no channel and no reader in between. These tests fail if
that silently stops (a task spawned per call, or more scheduler steps per call), against
real peers: the official SDK's server and the bench's Node server. And the inline
exchange delivers exactly what the task-per-request path delivers, in the same order,
for generated response bodies (the :mod:`tests.test_hot_path` way).
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from functools import partial
from typing import Final

import orjson
import pytest
import trio

from agenthost.connection import open_remote_transport, open_session
from agenthost.protocol.jsonrpc import Message, Request
from agenthost.transports._httpx import LEAN_ENV
from agenthost.transports.http import StreamableHTTPTransport, open_streamable_http_transport
from tests.test_lean_http import config, peer, read_request, scripted, text_of

pytestmark = pytest.mark.timeout(90)


class _Count(trio.abc.Instrument):
    """Tasks spawned and task steps (each a scheduler pass that ran a task), but for the
    task that reads an SSE stream on after its response was delivered: the SDK's server
    ends its streams in a write of their own, which the caller does not wait for."""

    def __init__(self) -> None:
        self.spawned = 0
        self.steps = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if not task.name.endswith("._drain"):
            self.spawned += 1

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
    # 6 (Node) to 7.2 (SDK) steps per call; the floor client's 2 steps is the least.
    assert count.spawned == 0
    assert count.steps / calls < 3.5


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
    shape = rng.randrange(8)
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
    if lean:
        monkeypatch.delenv(LEAN_ENV, raising=False)
    else:
        monkeypatch.setenv(LEAN_ENV, "0")
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

            await transport.exchange(request, deliver)
            if not inline or getattr(inline[-1], "id", None) != _TARGET:
                inline += await _through_receive(transport)  # resumed in the background
            assert inline == general, reply
