"""Attack: a 401 on the scope-free lean exchange (the request went on an idle connection
with a revoked token) while the caller is cancelled from outside or times out during the
refresh; the SDK authorization server is real (tests/peers/sdk_auth_server.py)."""

from __future__ import annotations

import random
from pathlib import Path

import trio

import agenthost
from agenthost.auth import URL_OPENER
from agenthost.errors import AgentHostError
from tests.auth.sdk_peer import auth_server, browser, config, peer_log, revoke_access_token


async def test_cancels_and_timeouts_during_a_fast_path_refresh(tmp_path: Path) -> None:
    rng = random.Random(3)
    outcomes: dict[str, int] = {}
    async with auth_server(tmp_path) as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url)) as session:
            await session.list_tools()
            URL_OPENER.set(None)  # no person: only refreshes from here
            for i in range(25):
                await session.call_tool("echo", {"message": "warm"})  # an idle connection
                await revoke_access_token(url)
                with trio.move_on_after(rng.uniform(0.0, 0.02)) as scope:
                    try:
                        result = await session.call_tool(
                            "echo", {"message": f"m{i}"}, timeout=rng.uniform(0.001, 0.03)
                        )
                        kind = "error" if result.is_error else "ok"
                    except AgentHostError as exc:  # one clean line, or it counts as such
                        clean = "Traceback" not in str(exc) and "\n" not in str(exc)
                        kind = type(exc).__name__ if clean else f"UNCLEAN {exc!r}"
                if scope.cancelled_caught:
                    kind = "cancelled"
                outcomes[kind] = outcomes.get(kind, 0) + 1
            with trio.fail_after(10):
                result = await session.call_tool("echo", {"message": "end"})
            assert not result.is_error
    assert not [kind for kind in outcomes if kind.startswith("UNCLEAN")], outcomes
    print(outcomes, "401s on the wire:", peer_log(tmp_path).count("wire POST /mcp 401"))
