"""A resource update is relayed only from the upstream the subscription was made on
(``agenthost serve``: the gateway in process, two ``hostile_server.py`` upstreams, a real
agenthost session downstream over a memory transport).

The attack: upstream ``b`` sends ``notifications/resources/updated`` for ``a://r``, the
resource of upstream ``a`` that the client watches, to make the client re-read it (or
just to spam it) on ``b``'s word. Before the fix the gateway relayed any upstream's
update for any watched URI. Positive control: ``a``'s own update for ``a://r`` reaches
the client, in both downstream eras.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from agenthost.config.model import HostConfig
from agenthost.connection import open_session
from agenthost.serve import open_gateway
from agenthost.session import ClientSession
from agenthost.transports.memory import memory_transport_pair
from tests.helpers import Recorder
from tests.hostile.conftest import hostile

pytestmark = pytest.mark.timeout(60)

ALLOW: dict[str, Any] = {"mode": "headless", "preset": "unsafe-allow-everything"}


def _update(uri: str) -> dict[str, Any]:
    """An ``act`` that sends ``notifications/resources/updated`` for ``uri``."""
    note = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
    return {"actions": [{"send": note}]}


@asynccontextmanager
async def _client(era: str, recorder: Recorder) -> AsyncIterator[ClientSession]:
    """A downstream session of a gateway in front of upstreams ``a`` and ``b``."""
    upstreams = [hostile("a", {"resource": "a://r"}), hostile("b", {"resource": "b://r"})]
    async with open_gateway(HostConfig(servers=upstreams, policy=ALLOW)) as gateway:
        ours, theirs = memory_transport_pair(name="gateway")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gateway.serve, gateway.session(theirs))
            async with open_session(
                ours, name="gateway", handlers=recorder.handlers(), era=era
            ) as client:
                yield client
            nursery.cancel_scope.cancel()


async def _ready(client: ClientSession, recorder: Recorder) -> None:
    """Each owner's own update heard: the subscriptions are in place end to end (a
    2026-07-28 client re-opens its stream for each URI it adds; what an upstream sends
    before the new stream's acknowledgment is not for it)."""
    with trio.fail_after(20):
        while not {"a://r", "b://r"} <= set(recorder.updated):
            for server in "ab":
                await client.call_tool(f"{server}__act", _update(f"{server}://r"))
            await trio.sleep(0.3)
    recorder.updated.clear()


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_an_update_from_another_upstream_is_not_relayed(era: str) -> None:
    """b's forged update for a://r is sent just before its own update for b://r, on the
    same pipe: the client hears the second (positive control), not the first."""
    recorder = Recorder()
    with trio.fail_after(40):
        async with _client(era, recorder) as client:
            await client.subscribe_resource("a://r")
            await client.subscribe_resource("b://r")
            await _ready(client, recorder)
            await client.call_tool("b__act", _update("a://r"))
            await client.call_tool("b__act", _update("b://r"))
            with trio.fail_after(10):
                while not recorder.updated:
                    await trio.sleep(0.05)
            await client.call_tool("b__echo", {"message": "sync"})
            await trio.sleep(0.2)
    assert recorder.updated == ["b://r"]
