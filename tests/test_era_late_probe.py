"""A server/discover probe answered only after the probe timeout (a slow start on a loaded
machine) must not fail the connection: the server read the probe and now serves
2026-07-28 on that connection, refusing the in-place ``initialize``; the session asks
``server/discover`` again instead of giving up (seen under load: the SDK server
"restarting" after "connection is serving the 2026-07-28 protocol")."""

from __future__ import annotations

from typing import Any

import attrs
import trio

from agenthost.connection import open_session
from agenthost.errors import JSONRPCError
from agenthost.protocol import jsonrpc
from agenthost.protocol.revisions import Era
from agenthost.testing import ScriptedServer
from agenthost.transports.memory import memory_transport_pair


@attrs.define
class SlowModernServer(ScriptedServer):
    """Switches to 2026-07-28 when it reads the first probe, and answers it late."""

    modern: bool = False
    probes: int = 0

    async def _dispatch(self, rid: jsonrpc.RequestId, method: str, params: dict[str, Any]) -> Any:
        if method == "server/discover":
            self.modern = True
            self.probes += 1
            if self.probes == 1:
                await trio.sleep(30)  # far past the probe timeout
            return {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "resultType": "complete",
            }
        if method == "initialize" and self.modern:
            raise JSONRPCError(
                -32022,
                "connection is serving the 2026-07-28 protocol",
                {"supported": ["2026-07-28"]},
            )
        return await super()._dispatch(rid, method, params)


async def test_a_late_probe_answer_settles_on_the_modern_era(autojump_clock: Any) -> None:
    server = SlowModernServer()
    client_side, server_side = memory_transport_pair()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve, server_side)
        async with open_session(
            client_side, name="slow", era="auto", probe_timeout=5, fallback_in_place=True
        ) as session:
            assert session.era is Era.MODERN
            assert session.revision == "2026-07-28"
            assert session.learned == "probe: server/discover answered late"
        nursery.cancel_scope.cancel()
