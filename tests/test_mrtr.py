"""The MRTR retry loop's contract (agenthost.mrtr), against an in-process 2026-07-28 peer.

The real-peer runs (the SDK's MCPServer asking for sampling, roots and elicitation) are
in test_modern_era.py; these cover what a real server cannot be made to do on demand: a
server that never stops asking, one that only polls with ``requestState``, one that asks
for a capability we did not declare, or answers with an unknown ``resultType``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from agenthost import __version__
from agenthost.asks import ClientHandlers, RequestContext
from agenthost.connection import open_session
from agenthost.era import ModernEra
from agenthost.errors import AgentHostTimeout, MRTRLimitExceeded, ProtocolError
from agenthost.protocol.jsonrpc import Notification, Request, Response
from agenthost.protocol.types import ElicitRequestParams, ElicitResult, ListRootsResult, Root
from agenthost.session import ClientSession
from agenthost.testing import memory_transport_pair
from agenthost.transports.memory import MemoryTransport
from tests.helpers import WireTransport

SERVER_INFO = {"name": "m", "version": "1"}
#: ``(round, params) -> result`` for each tools/call the peer receives.
Script = Callable[[int, dict[str, Any]], Any]

ELICIT = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}


class ModernPeer:
    """A minimal 2026-07-28 server: discover, and tools/call answered by a script."""

    def __init__(self, script: Script, pauses: dict[int, float] | None = None) -> None:
        self.script = script
        #: Seconds to think before answering tools/call number n (from 1).
        self.pauses = pauses or {}
        self.calls: list[Request] = []
        self.times: list[float] = []
        self.lists = 0

    async def serve(self, transport: MemoryTransport) -> None:
        self.transport = transport
        with trio.CancelScope() as self.scope:
            while True:
                message = await transport.receive()
                if not isinstance(message, Request):
                    continue
                if message.method == "server/discover":
                    result: Any = {
                        "resultType": "complete",
                        "supportedVersions": ["2026-07-28"],
                        "capabilities": {"tools": {}},
                        "ttlMs": 0,
                        "cacheScope": "private",
                        "_meta": {
                            "io.modelcontextprotocol/serverInfo": {"name": "m", "version": "1"}
                        },
                    }
                elif message.method == "tools/list":
                    self.lists += 1
                    result = {
                        "resultType": "complete",
                        "tools": [{"name": "t", "inputSchema": {"type": "object"}}],
                        "ttlMs": 60_000,
                        "cacheScope": "public",
                    }
                else:
                    self.calls.append(message)
                    self.times.append(trio.current_time())
                    await trio.sleep(self.pauses.get(len(self.calls), 0))
                    result = self.script(len(self.calls), dict(message.params or {}))
                await transport.send(Response(message.id, result))


def done(text: str) -> dict[str, Any]:
    return {"resultType": "complete", "content": [{"type": "text", "text": text}]}


async def on_elicit(ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"name": f"round {ctx.round}"})


async def on_roots(ctx: RequestContext, params: Any) -> ListRootsResult:
    return ListRootsResult(roots=[Root(uri="file:///w")])


@asynccontextmanager
async def modern_session(
    script: Script,
    *,
    handlers: ClientHandlers | None = None,
    wire: bool = False,
    pauses: dict[int, float] | None = None,
    **kwargs: Any,
) -> AsyncIterator[tuple[ClientSession, ModernPeer]]:
    """``wire``: messages cross serialised (:class:`WireTransport`), so the client takes
    its stdio short path; else as objects (its general path)."""
    client, server = memory_transport_pair(name="m")
    peer = ModernPeer(script, pauses)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer.serve, server)
        async with open_session(
            WireTransport(client) if wire else client,
            name="m",
            handlers=handlers or ClientHandlers(elicitation=on_elicit, roots=on_roots),
            era="auto",
            **kwargs,
        ) as session:
            yield session, peer
        nursery.cancel_scope.cancel()


async def test_request_state_is_echoed_unchanged_with_a_new_id_each_round() -> None:
    state = "opaque/\u00e9+==  state with spaces"

    def script(n: int, params: dict[str, Any]) -> Any:
        if n == 1:
            return {
                "resultType": "input_required",
                "inputRequests": {"who": ELICIT, "where": {"method": "roots/list"}},
                "requestState": state,
            }
        if n == 2:
            # asks again, without state this time: the retry must not carry any
            return {"resultType": "input_required", "inputRequests": {"again": ELICIT}}
        return done("ok")

    async with modern_session(script) as (session, peer):
        result = await session.call_tool("t", {"a": 1})
    assert result.content[0].text == "ok"  # type: ignore[union-attr]
    first, second, third = (c.params or {} for c in peer.calls)
    assert len({c.id for c in peer.calls}) == 3
    assert "requestState" not in first and "inputResponses" not in first
    assert second["requestState"] == state
    assert second["inputResponses"] == {
        "who": {"action": "accept", "content": {"name": "round 1"}},
        "where": {"roots": [{"uri": "file:///w"}]},
    }
    assert second["arguments"] == {"a": 1} and second["name"] == "t"
    assert "requestState" not in third
    assert third["inputResponses"] == {
        "again": {"action": "accept", "content": {"name": "round 2"}}
    }


async def test_the_inline_call_goes_on_through_the_rounds_as_the_general_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over a transport that serialises (stdio), ``ClientSession.call_tool`` sends round 1
    itself (the era's short path, inline: issue 26) and hands a result that asks for
    input to the era's rounds: the server sees the same rounds as on the general path,
    and ``ModernEra.exchange`` is not used for the call at all."""
    exchanged: list[str] = []
    exchange = ModernEra.exchange

    async def counted(self: ModernEra, method: str, *args: Any, **kwargs: Any) -> Any:
        exchanged.append(method)
        return await exchange(self, method, *args, **kwargs)

    monkeypatch.setattr(ModernEra, "exchange", counted)

    def script(n: int, params: dict[str, Any]) -> Any:
        if n == 1:
            return {
                "resultType": "input_required",
                "inputRequests": {"who": ELICIT, "where": {"method": "roots/list"}},
                "requestState": "s1",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "m2", "version": "2"}},
            }
        if n == 2:
            return {"resultType": "input_required", "inputRequests": {"again": ELICIT}}
        return done("ok")

    seen: dict[bool, list[dict[str, Any]]] = {}
    for wire in (True, False):
        async with modern_session(script, wire=wire) as (session, peer):
            result = await session.call_tool("t", {"a": 1})
            assert result.content[0].text == "ok"  # type: ignore[union-attr]
            assert (session.server_info or {}).get("name") == "m2"
        seen[wire] = [dict(c.params or {}) for c in peer.calls]
    assert len(seen[True]) == 3
    assert seen[True] == seen[False]
    assert exchanged.count("tools/call") == 1  # the general path's call only


async def test_round_cap_is_a_clear_error(autojump_clock: trio.testing.MockClock) -> None:
    def script(n: int, params: dict[str, Any]) -> Any:
        return {"resultType": "input_required", "inputRequests": {"k": ELICIT}}

    async with modern_session(script, max_input_rounds=3) as (session, peer):
        with pytest.raises(MRTRLimitExceeded, match="after 3 rounds"):
            await session.call_tool("t", {})
    assert len(peer.calls) == 3


async def test_state_only_rounds_back_off(autojump_clock: trio.testing.MockClock) -> None:
    def script(n: int, params: dict[str, Any]) -> Any:
        if n < 5:
            return {"resultType": "input_required", "requestState": f"s{n}"}
        return done("ready")

    async with modern_session(script) as (session, peer):
        await session.call_tool("t", {})
    gaps = [b - a for a, b in zip(peer.times, peer.times[1:], strict=False)]
    assert gaps == pytest.approx([0.05, 0.1, 0.2, 0.4], abs=1e-6)
    assert [c.params["requestState"] for c in peer.calls[1:]] == ["s1", "s2", "s3", "s4"]  # type: ignore[index]


@pytest.mark.parametrize("wire", [False, True], ids=["objects", "serialised"])
async def test_one_timeout_covers_the_whole_exchange(
    autojump_clock: trio.testing.MockClock, wire: bool
) -> None:
    async def slow_elicit(ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
        await trio.sleep(4)
        return ElicitResult(action="decline")

    def script(n: int, params: dict[str, Any]) -> Any:
        return {"resultType": "input_required", "inputRequests": {"k": ELICIT}}

    handlers = ClientHandlers(elicitation=slow_elicit)
    async with modern_session(script, handlers=handlers, wire=wire, pauses={1: 5.5}) as (
        session,
        peer,
    ):
        start = trio.current_time()
        with pytest.raises(AgentHostTimeout):
            await session.call_tool("t", {}, timeout=10)
        assert trio.current_time() - start == pytest.approx(10, abs=1e-6)
    # round 1 answered at 5.5 s (within its deadline: the call's), round 2 sent at 9.5 s
    # and answered at once, the second ask cut at 10 s (the rounds count from the
    # call's start, not from round 1's answer)
    assert [t - start for t in peer.times] == pytest.approx([0, 9.5], abs=1e-6)


async def test_cancelling_the_call_cancels_the_whole_exchange(
    autojump_clock: trio.testing.MockClock,
) -> None:
    asked = trio.Event()

    async def stuck(ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.set()
        await trio.sleep_forever()
        raise AssertionError

    def script(n: int, params: dict[str, Any]) -> Any:
        return {"resultType": "input_required", "inputRequests": {"k": ELICIT}}

    async with modern_session(script, handlers=ClientHandlers(elicitation=stuck)) as (
        session,
        peer,
    ):
        with trio.move_on_after(5) as scope:
            await session.call_tool("t", {})
        assert scope.cancelled_caught and asked.is_set()
        await trio.sleep(1)
        assert len(peer.calls) == 1  # nothing retried after the cancel


async def test_asks_outside_our_capabilities_and_unknown_result_types_fail() -> None:
    def script(n: int, params: dict[str, Any]) -> Any:
        if params["name"] == "sampling":
            sample = {
                "method": "sampling/createMessage",
                "params": {"messages": [], "maxTokens": 1},
            }
            return {"resultType": "input_required", "inputRequests": {"s": sample}}
        return {"resultType": "task_started"}

    async with modern_session(script) as (session, _):
        with pytest.raises(ProtocolError, match="did not declare"):
            await session.call_tool("sampling", {})
        with pytest.raises(ProtocolError, match="unrecognised resultType"):
            await session.call_tool("other", {})


async def test_list_results_are_cached_for_their_ttl(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``ttlMs`` (2026-07-28 caching): a list is not asked again while fresh; it is after
    the TTL, and at once after the server says the list changed."""

    def script(n: int, params: dict[str, Any]) -> Any:
        return done("ok")

    async with modern_session(script) as (session, peer):
        assert [t.name for t in await session.list_tools()] == ["t"]
        await trio.sleep(30)
        await session.list_tools()
        assert peer.lists == 1
        await trio.sleep(31)
        await session.list_tools()
        assert peer.lists == 2
        await peer.transport.send(Notification("notifications/tools/list_changed"))
        await trio.testing.wait_all_tasks_blocked()
        await session.list_tools()
        assert peer.lists == 3


async def test_a_peer_that_reads_message_objects_gets_the_stamp_as_plain_json() -> None:
    # Over stdio the stamp goes out as bytes serialised once (Stamp.spliced); a memory
    # transport hands the objects over, so its peer must find a plain _meta to read.
    async with modern_session(lambda n, params: done("ok")) as (session, peer):
        await session.call_tool("t", {"a": 1})
        await session.call_tool("t", {"a": 2}, meta={"k": "v"})
    for call in peer.calls:
        meta = (call.params or {})["_meta"]
        assert type(meta) is dict
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        # (the default title equals the name, so the stamp leaves it out: BaseMetadata)
        assert meta["io.modelcontextprotocol/clientInfo"] == {
            "name": "agenthost",
            "version": __version__,
        }
    assert (peer.calls[1].params or {})["_meta"]["k"] == "v"
