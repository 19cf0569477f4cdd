"""Whose call an upstream's ask serves (agenthost/serve/routing.py); the end-to-end case,
two real SDK clients on ``serve --http``, is in tests/test_serve_http.py."""

from __future__ import annotations

from agenthost.protocol.types import Implementation, ServerCapabilities
from agenthost.serve import DownstreamSession
from agenthost.serve.downstream import RequestInfo
from agenthost.serve.routing import CallsInFlight
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
