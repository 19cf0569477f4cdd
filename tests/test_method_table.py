"""The method table used both ways (issue 23, item 4): every request in production is
built from a spec, and a spec the session cannot use fails here, before anything is sent.
"""

from __future__ import annotations

import ast
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost._util import collapse_single_group
from agenthost.connection import open_session
from agenthost.errors import ProtocolError
from agenthost.protocol import jsonrpc
from agenthost.protocol import methods as m
from agenthost.protocol.types import ServerCapabilities, TaskRequestParams
from agenthost.session import ClientSession
from agenthost.testing import ScriptedServer, memory_transport_pair

PACKAGE = Path(__file__).resolve().parent.parent / "agenthost"
#: What a JSON-RPC method name looks like (``tools/call``, ``notifications/x/y``...).
_METHOD = re.compile(r"^(?:ping|initialize|[a-z]+(?:/[A-Za-z_]+)+)$")
#: The calls that put a request (or a notification) on the wire.
_SENDERS = frozenset(
    {"send_request", "exchange", "request", "call", "_modern_call", "notify", "send_notification"}
)


def _raw_method_strings() -> list[str]:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        # protocol/ is the table; testing.py plays the *server* in tests (a scripted
        # peer sends whatever a test tells it to).
        if "protocol" in path.relative_to(PACKAGE).parts or path.name == "testing.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name not in _SENDERS:
                continue
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if (
                    isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    and _METHOD.match(arg.value)
                ):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {arg.value}")
    return found


def test_no_request_names_its_method_outside_the_table() -> None:
    assert _raw_method_strings() == []


def test_the_scan_sees_a_raw_method() -> None:
    tree = ast.parse('await session.send_request("tasks/get", {})')
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call))
    arg = call.args[0]
    assert isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    assert _METHOD.match(arg.value)


# --- available(), h11 style: plain values in, a verdict out ----------------------------


@pytest.mark.parametrize(
    ("spec", "revision", "extensions", "expected"),
    [
        (m.TASKS_GET_SPEC, "2025-11-25", (), True),
        (m.TASKS_GET_SPEC, "2025-06-18", (), False),
        (m.TASKS_GET_SPEC, "2026-07-28", (), False),
        (m.TASKS_EXT_GET_SPEC, "2026-07-28", (m.TASKS_EXTENSION,), True),
        (m.TASKS_EXT_GET_SPEC, "2026-07-28", (), False),
        (m.TASKS_EXT_GET_SPEC, "2025-11-25", (m.TASKS_EXTENSION,), False),
        (m.TASKS_EXT_UPDATE_SPEC, "2026-07-28", (m.TASKS_EXTENSION,), True),
        (m.SKILLS_LIST_SPEC, "2025-06-18", (m.SKILLS_EXTENSION,), True),
        (m.SKILLS_LIST_SPEC, "2026-07-28", (m.TASKS_EXTENSION,), False),
        (m.TOOLS_CALL_SPEC, "2024-11-05", (), True),
        (m.INITIALIZE_SPEC, "2026-07-28", (), False),
        (m.SERVER_DISCOVER_SPEC, "2026-07-28", (), True),
    ],
)
def test_available(
    spec: m.RequestSpec[Any, Any], revision: str, extensions: tuple[str, ...], expected: bool
) -> None:
    assert m.available(spec, revision, extensions) is expected


def test_declared_extensions_reads_the_capabilities_extra() -> None:
    caps = ServerCapabilities(extra={"extensions": {m.SKILLS_EXTENSION: {}, 3: {}}})
    assert m.declared_extensions(caps) == {m.SKILLS_EXTENSION}
    assert m.declared_extensions(ServerCapabilities()) == frozenset()
    assert m.declared_extensions(None) == frozenset()


def test_every_extension_method_names_its_extension() -> None:
    for spec in m.EXTENSION_REQUESTS:
        assert spec.extension in {m.TASKS_EXTENSION, m.SKILLS_EXTENSION}, spec.method


# --- enforced by the session -------------------------------------------------------------


@asynccontextmanager
async def legacy(revision: str) -> AsyncIterator[tuple[ClientSession, ScriptedServer]]:
    server = ScriptedServer()
    server.revisions = (revision,)
    client_end, server_end = memory_transport_pair(name="scripted")
    with collapse_single_group():
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve, server_end)
            async with open_session(client_end, name="scripted") as session:
                yield session, server
            await client_end.aclose()
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("revision", "spec", "says"),
    [
        ("2025-06-18", m.TASKS_GET_SPEC, "tasks/get is not available"),
        ("2025-11-25", m.SKILLS_GET_SPEC, m.SKILLS_EXTENSION),
        ("2025-11-25", m.TASKS_EXT_CANCEL_SPEC, "speaks 2025-11-25"),
    ],
)
async def test_a_method_the_session_lacks_fails_before_anything_is_sent(
    revision: str, spec: m.RequestSpec[Any, Any], says: str
) -> None:
    async with legacy(revision) as (session, server):
        before = len(server.received)
        with pytest.raises(ProtocolError, match=re.escape(says)):
            await session.request(spec, TaskRequestParams(task_id="t"))
        assert len(server.received) == before
        assert not any(
            isinstance(msg, jsonrpc.Request) and msg.method.startswith(("tasks/", "skills/"))
            for msg in server.received
        )
