"""ClientSession contract tests against agenthost.testing.ScriptedServer (in memory).

The real-peer interop tests live in test_interop_*.py; these cover the corners a real
server cannot be made to hit on demand.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from agenthost._util import collapse_single_group
from agenthost.asks import ClientHandlers, RequestContext
from agenthost.connection import open_session
from agenthost.errors import (
    AgentHostTimeout,
    JSONRPCError,
    TransportClosed,
    UnsupportedRevision,
)
from agenthost.protocol.jsonrpc import Notification, Request, Response
from agenthost.protocol.types import ListRootsResult, Root
from agenthost.session import ClientSession
from agenthost.testing import ScriptedServer, ServerContext, memory_transport_pair


def make_server() -> ScriptedServer:
    server = ScriptedServer()

    @server.tool("echo")
    async def echo(ctx: ServerContext, args: dict[str, Any]) -> dict[str, Any]:
        await trio.sleep(args.get("delay", 0))
        return {"content": [{"type": "text", "text": str(args.get("text"))}]}

    @server.tool("hang")
    async def hang(ctx: ServerContext, args: dict[str, Any]) -> dict[str, Any]:
        await trio.sleep_forever()
        raise AssertionError

    @server.tool("progress")
    async def progress(ctx: ServerContext, args: dict[str, Any]) -> dict[str, Any]:
        for i in range(1, 6):
            await ctx.progress(i, 5)
        return {"content": []}

    @server.tool("ask")
    async def ask(ctx: ServerContext, args: dict[str, Any]) -> dict[str, Any]:
        try:
            result = await ctx.request(args["method"], args.get("params"))
        except JSONRPCError as exc:
            return {"content": [{"type": "text", "text": f"error {exc.code}: {exc.message}"}]}
        return {"content": [{"type": "text", "text": repr(result)}]}

    return server


@asynccontextmanager
async def connected(
    server: ScriptedServer, **kwargs: Any
) -> AsyncIterator[tuple[ClientSession, trio.Nursery]]:
    client_end, server_end = memory_transport_pair(name="scripted")
    with collapse_single_group():
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve, server_end)
            async with open_session(client_end, name="scripted", **kwargs) as session:
                yield session, nursery
            await client_end.aclose()
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("code", [-32602, -32022])
async def test_a_refused_offer_is_retried_at_a_shared_legacy_revision(code: int) -> None:
    """Issue 28 (Low): a server that refuses our offer naming a revision we also speak is
    offered that one, not told we cannot talk (a self-contradicting error before)."""
    server = make_server()
    server.revisions, server.refuse_with = ("2025-06-18",), code
    async with connected(server) as (session, _):
        assert session.revision == "2025-06-18"
    offers = [
        m.params["protocolVersion"] for m in server.received if isinstance(m, Request) and m.params
    ]
    assert offers == ["2025-11-25", "2025-06-18"]


async def test_a_refused_offer_with_nothing_shared_names_both_sides() -> None:
    server = make_server()
    server.revisions, server.refuse_with = ("2099-01-01",), -32602
    with pytest.raises(UnsupportedRevision, match="it supports 2099-01-01, agenthost speaks"):
        async with connected(server):
            pass


async def test_initialize_negotiates_and_announces() -> None:
    server = make_server()
    server.revisions = ("2025-03-26",)
    async with connected(server) as (session, _):
        assert session.revision == "2025-03-26"
        assert session.transport.protocol_version == "2025-03-26"  # type: ignore[attr-defined]
    init = server.received[0]
    assert isinstance(init, Request)
    assert init.method == "initialize"
    assert init.params is not None
    assert init.params["protocolVersion"] == "2025-11-25"
    assert init.params["capabilities"] == {}  # no handlers -> nothing declared
    assert server.received[1] == Notification("notifications/initialized")


async def test_capabilities_follow_handlers_and_revision() -> None:
    async def roots(ctx: RequestContext, params: Any) -> ListRootsResult:
        return ListRootsResult(roots=[])

    session = ClientSession(
        memory_transport_pair()[0], name="x", handlers=ClientHandlers(roots=roots)
    )
    assert session.client_capabilities("2024-11-05") == {"roots": {"listChanged": True}}


async def test_unsupported_answer_names_both_sides() -> None:
    server = make_server()
    server.answer_version = "1999-01-01"
    with pytest.raises(UnsupportedRevision) as info:
        async with connected(server):
            pass
    message = str(info.value)
    assert "1999-01-01" in message
    assert "2025-11-25" in message
    assert "scripted" in message


async def test_concurrent_calls_are_correlated() -> None:
    async with connected(make_server()) as (session, _):
        results: dict[int, str] = {}

        async def one(i: int) -> None:
            result = await session.call_tool("echo", {"text": i, "delay": (i % 7) * 0.001})
            results[i] = result.content[0].text  # type: ignore[union-attr]

        async with trio.open_nursery() as nursery:
            for i in range(200):
                nursery.start_soon(one, i)
        assert results == {i: str(i) for i in range(200)}


async def test_timeout_sends_cancelled_and_session_survives() -> None:
    server = make_server()
    async with connected(server) as (session, _):
        with pytest.raises(AgentHostTimeout, match="scripted: tools/call timed out"):
            await session.call_tool("hang", {}, timeout=0.05)
        result = await session.call_tool("echo", {"text": "still here"})
        assert result.content[0].text == "still here"  # type: ignore[union-attr]
    hang_id = next(
        m.id for m in server.received if isinstance(m, Request) and m.method == "tools/call"
    )
    assert hang_id in server.cancelled


async def _timed_out_at(session: ClientSession, timeout: float) -> float:
    """Call the hanging tool; return the Trio time at which it timed out."""
    with pytest.raises(AgentHostTimeout):
        await session.call_tool("hang", {}, timeout=timeout)
    return trio.current_time()


async def test_each_timeout_fires_at_its_own_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Deadlines live in one watchdog, not a scope per request: a shorter timeout that
    arrives while the watchdog sleeps towards a longer one must still fire on time."""
    async with connected(make_server()) as (session, _):
        start = trio.current_time()
        fired: dict[str, float] = {}

        async def hang(label: str, timeout: float, after: float) -> None:
            await trio.sleep(after)
            fired[label] = await _timed_out_at(session, timeout) - start

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hang, "long", 1.0, 0.0)
            nursery.start_soon(hang, "short", 0.2, 0.1)
            nursery.start_soon(hang, "same", 1.0, 0.5)
        assert fired == pytest.approx({"long": 1.0, "short": 0.3, "same": 1.5}, abs=1e-6)
        assert session.requests_watched() == 0


async def test_a_hung_request_times_out_while_others_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Finished requests ahead of or behind a hung one, with the same timeout, neither
    delay its expiry nor pile up in the watchdog's queues."""
    async with connected(make_server(), request_timeout=0.5) as (session, _):
        start = trio.current_time()
        fired: list[float] = []

        async def hang() -> None:
            fired.append(await _timed_out_at(session, 0.5) - start)

        async with trio.open_nursery() as nursery:
            await session.call_tool("echo", {"text": "before"})
            nursery.start_soon(hang)
            for i in range(150):
                result = await session.call_tool("echo", {"text": i})
                assert result.content[0].text == str(i)  # type: ignore[union-attr]
                await trio.sleep(0.01)
        assert fired == [pytest.approx(0.5, abs=1e-6)]
        assert session.requests_watched() == 0


async def test_finished_requests_leave_the_watchdog_at_once() -> None:
    """The watchdog sleeps a whole timeout period; finished requests must not pile up
    for it in the meantime (a session making 100k calls/s would hold millions)."""
    async with connected(make_server()) as (session, _):
        async with trio.open_nursery() as nursery:
            for i in range(100):
                nursery.start_soon(session.call_tool, "echo", {"text": i})
        for i in range(100):
            await session.call_tool("echo", {"text": i}, timeout=30 + i % 3)
        assert session.requests_watched() == 0


async def test_cancel_scope_sends_cancelled() -> None:
    server = make_server()
    async with connected(server) as (session, _):
        with trio.move_on_after(0.05) as scope:
            await session.call_tool("hang", {}, timeout=None)
        assert scope.cancelled_caught
        await session.ping()
    cancelled = [m for m in server.received if isinstance(m, Notification) and "cancel" in m.method]
    assert len(cancelled) == 1
    assert cancelled[0].params is not None
    assert cancelled[0].params["reason"] == "cancelled by the client"


async def test_peer_gone_fails_pending_at_once() -> None:
    server = make_server()
    client_end, server_end = memory_transport_pair(name="scripted")
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve, server_end)
        async with open_session(client_end, name="scripted") as session:

            async def kill_soon() -> None:
                await trio.sleep(0.05)
                await server_end.aclose()

            nursery.start_soon(kill_soon)
            with trio.fail_after(1), pytest.raises(TransportClosed, match="scripted"):
                await session.call_tool("hang", {}, timeout=None)
            with pytest.raises(TransportClosed, match="scripted"):
                await session.ping()
        nursery.cancel_scope.cancel()


async def test_server_requests_go_through_handlers() -> None:
    async def roots(ctx: RequestContext, params: Any) -> ListRootsResult:
        assert ctx.server == "scripted"
        return ListRootsResult(roots=[Root(uri="file:///tmp/ws", name="ws")])

    server = make_server()
    async with connected(server, handlers=ClientHandlers(roots=roots)) as (session, _):
        result = await session.call_tool("ask", {"method": "roots/list"})
        assert "file:///tmp/ws" in result.content[0].text  # type: ignore[union-attr]
        unknown = await session.call_tool("ask", {"method": "no/such"})
        assert unknown.content[0].text.startswith("error -32601")  # type: ignore[union-attr]
        # sampling was not declared, so it is "not found" rather than silently answered
        sampling = await session.call_tool("ask", {"method": "sampling/createMessage"})
        assert sampling.content[0].text.startswith("error -32601")  # type: ignore[union-attr]
        pong = await session.call_tool("ask", {"method": "ping"})
        assert pong.content[0].text == "{}"  # type: ignore[union-attr]


async def test_handler_failure_is_an_error_response_and_session_lives(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def roots(ctx: RequestContext, params: Any) -> ListRootsResult:
        raise RuntimeError("boom")

    async with connected(make_server(), handlers=ClientHandlers(roots=roots)) as (session, _):
        result = await session.call_tool("ask", {"method": "roots/list"})
        assert "-32603" in result.content[0].text  # type: ignore[union-attr]
        assert "boom" in result.content[0].text  # type: ignore[union-attr]
        await session.ping()
    assert "handler for roots/list failed" in caplog.text


async def test_incoming_cancellation_stops_handler_without_response() -> None:
    started = trio.Event()
    stopped = trio.Event()

    async def roots(ctx: RequestContext, params: Any) -> ListRootsResult:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError

    server = make_server()
    async with connected(server, handlers=ClientHandlers(roots=roots)) as (session, _nursery):
        before = len(server.received)
        await server.send(Request("r1", "roots/list", None))
        await started.wait()
        await server.notify("notifications/cancelled", {"requestId": "r1"})
        with trio.fail_after(1):
            await stopped.wait()
        await session.ping()
        await trio.testing.wait_all_tasks_blocked()
        answers = [m for m in server.received[before:] if getattr(m, "id", None) == "r1"]
        assert answers == []


async def test_progress_is_delivered_in_order() -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with connected(make_server()) as (session, _):
        await session.call_tool("progress", {}, progress=on_progress)
        await trio.testing.wait_all_tasks_blocked()
    assert seen == [(i, 5) for i in range(1, 6)]


async def test_unknown_response_id_is_logged_and_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = make_server()
    async with connected(server) as (session, _):
        await server.send(Response(999, {}))
        await session.ping()
    assert "unknown request id 999" in caplog.text


async def test_server_log_messages_reach_python_logging(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = make_server()
    caplog.set_level(logging.DEBUG, logger="agenthost.server")
    async with connected(server) as (session, _):
        await server.notify(
            "notifications/message", {"level": "warning", "logger": "db", "data": "disk low"}
        )
        await session.ping()
        await trio.testing.wait_all_tasks_blocked()
    # One fixed logger per server; the server's logger name is in the record (issue 14).
    record = next(r for r in caplog.records if r.name == "agenthost.server.scripted")
    assert record.levelno == logging.WARNING
    assert record.getMessage() == "[db] disk low"
    assert record.__dict__["mcp_logger"] == "db"  # set through logging's extra=


async def test_list_changed_listeners() -> None:
    calls: list[str] = []

    async def on_change(ctx: RequestContext, params: Any) -> None:
        calls.append(ctx.method)

    handlers = ClientHandlers(notifications={"notifications/tools/list_changed": on_change})
    server = make_server()

    async def also(ctx: RequestContext, params: Any) -> None:
        calls.append("also")

    async with connected(server, handlers=handlers) as (session, _):
        await server.notify("notifications/tools/list_changed")
        await session.ping()
        await trio.testing.wait_all_tasks_blocked()
        remove = session.add_listener("notifications/tools/list_changed", also)
        await server.notify("notifications/tools/list_changed")
        await session.ping()
        await trio.testing.wait_all_tasks_blocked()
        remove()
        await server.notify("notifications/tools/list_changed")
        await session.ping()
        await trio.testing.wait_all_tasks_blocked()
    changed = "notifications/tools/list_changed"
    assert calls == [changed, changed, "also", changed]


async def test_cancellation_with_a_bad_request_id_is_ignored() -> None:
    server = make_server()
    async with connected(server) as (session, _):
        await server.notify("notifications/cancelled", {"requestId": [1]})
        await server.notify("notifications/progress", {"progressToken": {"x": 1}, "progress": 1})
        await session.ping()
        assert not session.closed


async def test_malformed_result_is_a_protocol_error_naming_the_path() -> None:
    from agenthost.errors import ProtocolError

    server = make_server()

    @server.tool("broken")
    async def broken(ctx: ServerContext, args: dict[str, Any]) -> dict[str, Any]:
        return {"content": "not a list"}

    async with connected(server) as (session, _):
        with pytest.raises(ProtocolError, match="content"):
            await session.call_tool("broken", {})
        await session.ping()


async def test_server_requests_past_the_cap_are_refused_with_an_error() -> None:
    """Issue 14: at most max_server_requests run at once; the excess (pings included)
    is answered by the reader, a ping with its result, anything else with an error."""
    release = trio.Event()
    started = 0

    async def roots(ctx: RequestContext, params: Any) -> ListRootsResult:
        nonlocal started
        started += 1
        await release.wait()
        return ListRootsResult(roots=[Root(uri="file:///tmp/x")])

    server = make_server()
    answers: list[str] = []

    async def ask(method: str) -> None:
        try:
            await server.request(method)
            answers.append(f"{method} ok")
        except JSONRPCError as exc:
            answers.append(f"{method} error: {exc.message}")

    client_end, server_end = memory_transport_pair(name="scripted")
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve, server_end)
        session = ClientSession(
            client_end, name="scripted", handlers=ClientHandlers(roots=roots), max_server_requests=4
        )
        await nursery.start(session.run)
        await session.initialize()
        async with trio.open_nursery() as asks:
            for _ in range(6):
                asks.start_soon(ask, "roots/list")
            await trio.testing.wait_all_tasks_blocked()
            asks.start_soon(ask, "ping")
            await trio.testing.wait_all_tasks_blocked()
            assert started == 4
            assert (
                sorted(answers)
                == ["ping ok"]
                + ["roots/list error: too many concurrent requests from this server (limit 4)"] * 2
            )
            release.set()
        assert answers.count("roots/list ok") == 4
        # Below the cap again: a new request runs.
        await ask("roots/list")
        assert answers[-1] == "roots/list ok"
        await session.aclose()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "first",
    [
        "import agenthost.connection",
        "import agenthost.host",
        "import agenthost.host.supervisor",
        "pass",
    ],
)
def test_agenthost_connect_is_the_function_whatever_was_imported_first(first: str) -> None:
    """``agenthost.connect`` is a plain function (no callable-module trick): importing the
    module that defines it, in any order, never replaces the package attribute."""
    import subprocess
    import sys

    script = (
        f"{first}\n"
        "import inspect, agenthost, agenthost.connection\n"
        "assert agenthost.connect is agenthost.connection.connect\n"
        "assert inspect.isfunction(agenthost.connect), type(agenthost.connect)\n"
        "assert 'connect' in agenthost.__all__\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
