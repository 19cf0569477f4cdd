"""Which durable call a server's ask belongs to (agenthost.host.handlers.DecidedCalls)."""

from __future__ import annotations

from agenthost.asks import RequestContext
from agenthost.host.handlers import DecidedCalls

LEGACY = RequestContext(server="s", revision="2025-11-25", method="sampling/createMessage")
MRTR = RequestContext(
    server="s",
    revision="2026-07-28",
    method="sampling/createMessage",
    origin="tools/call",
    origin_name="summarize",
    round=1,
    input_key="k",
)


def test_an_ask_names_the_calls_it_may_belong_to() -> None:
    calls = DecidedCalls()
    assert calls.via("s", LEGACY) is None
    with calls.running("s", "summarize", {"run_id": "r1", "call_id": "c1"}):
        assert calls.via("s", LEGACY) == {"during": [{"run_id": "r1", "call_id": "c1"}]}
        assert calls.via("other", LEGACY) is None
        with calls.running("s", "record", {"run_id": "r2", "call_id": "c9"}):
            # A legacy server's request does not say which call: both are candidates.
            assert calls.via("s", LEGACY) == {
                "during": [{"run_id": "r1", "call_id": "c1"}, {"run_id": "r2", "call_id": "c9"}]
            }
            # An MRTR ask names its tool: only that call.
            via = calls.via("s", MRTR)
            assert via is not None
            assert via["during"] == [{"run_id": "r1", "call_id": "c1"}]
            assert via["name"] == "summarize" and via["round"] == 1
    assert calls.via("s", LEGACY) is None
