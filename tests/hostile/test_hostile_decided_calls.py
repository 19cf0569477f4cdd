"""Whose audit lines a server's ask lands in while two durable runs call the same tool on
it (agenthost.host.handlers.DecidedCalls): an MRTR ask arrives in the answer to one
call, so it belongs to that call alone, not to every call of that tool in flight."""

from __future__ import annotations

import contextlib

import trio

from agenthost.asks import RequestContext
from agenthost.host.handlers import MAX_DURING, DecidedCalls

MRTR = RequestContext(
    server="s",
    revision="2026-07-28",
    method="sampling/createMessage",
    origin="tools/call",
    origin_name="summarize",
    round=1,
    input_key="k",
)
LEGACY = RequestContext(server="s", revision="2025-11-25", method="sampling/createMessage")


async def test_an_mrtr_ask_is_audited_with_its_own_call_only() -> None:
    """Regression: the ask named its tool, and both runs' calls of that tool were listed
    in ``via.during``: run r2's ids in an audit line of r1's call."""
    calls = DecidedCalls()
    seen: dict[str, object] = {}
    both_running = trio.Event()
    checked = trio.Event()
    ready: list[str] = []

    async def run(run_id: str) -> None:
        with calls.running("s", "summarize", {"run_id": run_id}):
            ready.append(run_id)
            if len(ready) == 2:
                both_running.set()
            await both_running.wait()
            via = calls.via("s", MRTR)  # the ask, answered in the call's own task
            seen[run_id] = via["during"] if via else None
            await checked.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "r1")
        nursery.start_soon(run, "r2")
        # Outside both calls' tasks (a legacy server's own request, from the session's
        # reader): it does not say which call, so both are candidates.
        await both_running.wait()
        legacy = calls.via("s", LEGACY)
        assert legacy is not None and len(legacy["during"]) == 2
        checked.set()
    assert seen == {"r1": [{"run_id": "r1"}], "r2": [{"run_id": "r2"}]}


def test_a_legacy_ask_lists_a_bounded_number_of_candidate_calls() -> None:
    """A legacy server's own request lists every durable call in flight on it: with a
    worker running a hundred, each of its asks' audit lines carried a hundred entries.
    The list is cut, saying how many were left out."""
    calls = DecidedCalls()
    with contextlib.ExitStack() as stack:
        for n in range(100):
            stack.enter_context(calls.running("s", "summarize", {"run_id": f"r{n}"}))
        via = calls.via("s", LEGACY)
    assert via is not None
    assert len(via["during"]) == MAX_DURING
    assert via["during_more"] == 100 - MAX_DURING
