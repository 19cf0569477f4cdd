"""A server refusing our protocol version names what it "supports" (version_refusing_server.py):
a secret the host gave it and a 200 kB string. The host decides from that list as sent
(``raw_data``), but the error it raises quotes it, and that error reaches logs, ``--json``
output and a gateway's downstream client: scrubbed and bounded there."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from agenthost.connection import open_session
from agenthost.errors import UnsupportedRevision
from agenthost.transports.stdio import open_stdio_transport

pytestmark = pytest.mark.timeout(60)

SERVER = str(Path(__file__).parent / "version_refusing_server.py")
SECRET = "Refuser-Token-5b7c9d1e3f"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_refusal_naming_our_secret_and_a_huge_version_is_quoted_safely(era: str) -> None:
    with trio.fail_after(30), pytest.raises(UnsupportedRevision) as info:
        async with (
            open_stdio_transport(
                sys.executable,
                [SERVER, era, "REFUSER_TOKEN"],
                name="refuser",
                env={"REFUSER_TOKEN": SECRET},
            ) as transport,
            open_session(transport, name="refuser", era=era) as session,
        ):
            await session.list_tools()
    text = str(info.value)
    assert "supports" in text, text[:500]
    assert SECRET not in text, text[:500]
    assert len(text) < 2000, len(text)
    assert SECRET in info.value.supported  # what the host decides from is as sent
