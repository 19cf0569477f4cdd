"""Whose call an upstream's ask serves (agenthost/serve/routing.py) and who watches which
resource (agenthost/serve/subscriptions.py); the end-to-end cases, real SDK clients on
``serve``, are in tests/test_serve.py and tests/test_serve_http.py."""

from __future__ import annotations

from agenthost.protocol.types import Implementation, ServerCapabilities
from agenthost.serve import DownstreamSession
from agenthost.serve.downstream import RequestInfo
from agenthost.serve.routing import CallsInFlight
from agenthost.serve.subscriptions import MAX_PER_CLIENT, Subscriber, Subscriptions
from agenthost.transports.memory import memory_transport_pair


def _info(name: str, request_id: int) -> RequestInfo:
    _, theirs = memory_transport_pair(name=name)
    session = DownstreamSession(
        theirs,
        handlers={},
        capabilities=ServerCapabilities,
        server_info=Implementation(name="agenthost", version="0"),
        name=name,
    )
    return RequestInfo(
        session=session, method="tools/call", request_id=request_id, revision="2025-11-25"
    )


async def test_an_ask_is_attributed_by_its_tool_else_by_the_one_call() -> None:
    calls = CallsInFlight()
    a, b = _info("a", 1), _info("b", 2)
    with calls.running("srv", "slow", a):
        assert calls.caller("srv", None) is a  # a legacy ask: the one call in flight
        assert calls.caller("other", None) is None
        with calls.running("srv", "fast", b):
            assert calls.caller("srv", None) is None  # two clients: cannot be told
            assert calls.caller("srv", "fast") is b  # a 2026-07-28 ask names its tool
            assert calls.caller("srv", "slow") is a
        again = RequestInfo(
            session=a.session, method="tools/call", request_id=3, revision="2025-11-25"
        )
        with calls.running("srv", "slow", again):
            found = calls.caller("srv", None)  # two calls, one legacy client: its session
            assert found is not None and found.session is a.session
    assert calls.caller("srv", None) is None and not calls.has_calls("srv")


async def test_subscriptions_share_the_upstream_and_are_bounded_per_client() -> None:
    """One upstream subscription per URI whoever watches it, dropped after the last
    watcher (a client that leaves included); a client watches MAX_PER_CLIENT URIs at most."""
    upstream: list[str] = []

    async def subscribe(uri: str) -> str:
        upstream.append(f"+{uri}")
        return "srv"

    async def unsubscribe(uri: str, server: str) -> None:
        assert server == "srv"
        upstream.append(f"-{uri}")

    subs = Subscriptions(subscribe, unsubscribe)
    a, b = _info("a", 1).session, _info("b", 2).session
    legacy, stream = Subscriber(a), Subscriber(b, 7, ready=False)
    await subs.add("x://1", legacy)
    await subs.add("x://1", stream)
    assert upstream == ["+x://1"]
    assert subs.find("x://1", b, 7) is stream and subs.find("x://1", b, None) is None
    await subs.remove("x://1", legacy)
    assert upstream == ["+x://1"]  # b still watches it
    await subs.forget(b)
    assert upstream == ["+x://1", "-x://1"]
    for n in range(MAX_PER_CLIENT):
        assert subs.room_for(a)
        await subs.add(f"x://{n}", Subscriber(a))
    assert not subs.room_for(a) and subs.room_for(b)
