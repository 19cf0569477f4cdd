"""An upstream's ask reaches only the downstream session whose call it serves.

``agenthost serve --http`` (in process, on loopback) in front of ask_routing_server.py, a
legacy stdio upstream shared by two real downstream sessions (agenthost's own client over
Streamable HTTP, each answering asks like a user would and recording them). The upstream
sends the caller's data in its ask and makes the answer its tool result, so a misrouted
ask is a leak and a forged answer both. What must hold: an ask that can be tied to one
call goes to that call's session (positive control: A sees its own ask, with its data);
one that cannot (another session's call in flight on the same upstream, or no call at
all) is answered as in headless mode, never by the session that spoke last, and the
audit says ``by: headless``.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from agenthost.config.model import HostConfig, ServerConfig, Timeouts, Workspace
from agenthost.connection import open_remote_transport, open_session
from agenthost.errors import JSONRPCError
from agenthost.protocol.types import ListRootsResult, Root
from agenthost.serve import open_gateway
from agenthost.serve.http import serve_http
from agenthost.session import ClientSession
from tests.conftest import PEER_LOG_ENV, PEERS_DIR, free_port
from tests.helpers import Recorder, text_of
from tests.peers.http_launch import serve

SERVER = str(Path(__file__).resolve().parent / "ask_routing_server.py")
BACKCHANNEL = PEERS_DIR / "backchannel_server.py"


class Downstream:
    """One downstream session and what reached it."""

    def __init__(self, session: ClientSession, recorder: Recorder) -> None:
        self.session = session
        self.recorder = recorder

    def saw(self) -> str:
        asked = [p.message for p in self.recorder.elicitations]
        asked += [json.dumps(p.messages[0].content.text) for p in self.recorder.sampling]  # type: ignore[union-attr]
        return "\n".join(asked)


@asynccontextmanager
async def _gateway(
    tmp_path: Path,
    upstream: ServerConfig | None = None,
    *,
    workspace: Path | None = None,
    recorders: tuple[Recorder, Recorder] | None = None,
) -> AsyncIterator[tuple[Downstream, Downstream, Path]]:
    log = tmp_path / "answers.jsonl"
    upstream = upstream or ServerConfig(
        name="up",
        transport="stdio",
        command=sys.executable,
        args=(SERVER,),
        env={"ASK_LOG": str(log)},
    )
    policy = {"preset": "unsafe-allow-everything", "audit": str(tmp_path / "audit.jsonl")}
    workspaces = [Workspace.from_path(workspace)] if workspace is not None else []
    config = HostConfig(servers=[upstream], policy=policy, workspaces=workspaces)
    async with open_gateway(config) as gateway, trio.open_nursery() as nursery:
        port = await nursery.start(
            functools.partial(serve_http, token=None), gateway, "127.0.0.1", 0
        )
        remote = ServerConfig(
            name="gw",
            transport="streamable-http",
            url=f"http://127.0.0.1:{port}/mcp",
            timeouts=Timeouts(connect=3.0, shutdown=1.0),
        )
        async with AsyncExitStack() as stack:
            clients = []
            for name, recorder in zip("AB", recorders or (Recorder(), Recorder()), strict=True):
                transport = await stack.enter_async_context(open_remote_transport(remote))
                session = await stack.enter_async_context(
                    open_session(
                        transport,
                        name=name,
                        handlers=recorder.handlers(),
                        protocol_version="2025-11-25",
                    )
                )
                clients.append(Downstream(session, recorder))
            yield clients[0], clients[1], log
        nursery.cancel_scope.cancel()


async def _started(gate: Path) -> None:
    with trio.fail_after(20):
        while not gate.with_name(gate.name + ".started").exists():
            await trio.sleep(0.02)


def _answers(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _forged(entry: dict[str, Any]) -> bool:
    """Whether the upstream's ask was answered by a downstream client (the Recorder's
    canned form, or its model's text)."""
    return "Ada" in json.dumps(entry) or "sampled:" in json.dumps(entry)


def _elicitations(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Each elicitation's decision in the audit: message -> (decision, by)."""
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    return {
        r["args"]["message"]: (r["decision"], r["by"])
        for r in lines
        if r.get("event") == "decision" and r.get("kind") == "elicitation"
    }


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["elicit", "sample"])
async def test_an_ask_during_two_sessions_calls_goes_to_neither(tmp_path: Path, kind: str) -> None:
    """Cross-session ask: with B's call in flight on the same upstream, A's call's ask
    could not be told apart and went to the client that spoke last: B saw A's data, and
    B's answer became A's tool result."""
    with trio.fail_after(60):
        async with _gateway(tmp_path) as (a, b, log):
            # Positive control: A's call alone in flight: its ask reaches A, with its data.
            mine = tmp_path / "mine"
            mine.write_text("open")
            result = await a.session.call_tool(
                "ask", {"gate": str(mine), "kind": kind, "secret": "A-own-1"}
            )
            assert "A-own-1" in a.saw() and "A-own-1" not in b.saw()
            assert "error" not in text_of(result), text_of(result)
            held, gate = tmp_path / "held", tmp_path / "gate"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(b.session.call_tool, "hold", {"gate": str(held)})
                await _started(held)
                outcome: list[Any] = []

                async def call_a() -> None:
                    args = {"gate": str(gate), "kind": kind, "secret": "A-private-2"}
                    outcome.append(await a.session.call_tool("ask", args))

                nursery.start_soon(call_a)
                await _started(gate)
                await b.session.list_tools()  # B is now the client that spoke last
                gate.write_text("open")
                with trio.fail_after(20):
                    while not outcome:
                        await trio.sleep(0.02)
                held.write_text("open")
    assert "A-private-2" not in b.saw(), b.saw()
    answered = [e for e in _answers(log) if e["secret"] == "A-private-2"]
    assert len(answered) == 1 and not _forged(answered[0]), answered
    if kind == "elicit":  # audited as the headless answer (the control: A's own, the user's)
        assert _elicitations(tmp_path) == {
            "A-own-1": ("allow", "user"),
            "A-private-2": ("deny", "headless"),
        }


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["elicit", "sample"])
async def test_an_ask_with_no_call_in_flight_goes_to_no_session(tmp_path: Path, kind: str) -> None:
    """An ask the upstream sends after A's call ended, with B the client that spoke last,
    went to B."""
    with trio.fail_after(60):
        async with _gateway(tmp_path) as (a, b, log):
            result = await a.session.call_tool(
                "later", {"delay": 0.5, "kind": kind, "secret": "A-late-3"}
            )
            assert text_of(result) == "asked later"
            await b.session.list_tools()  # B spoke last
            with trio.fail_after(20):
                while not any(e["secret"] == "A-late-3" for e in _answers(log)):
                    await trio.sleep(0.02)
    assert "A-late-3" not in b.saw() and "A-late-3" not in a.saw(), (a.saw(), b.saw())
    late = [e for e in _answers(log) if e["secret"] == "A-late-3"]
    assert not _forged(late[0]), late
    if kind == "elicit":
        assert _elicitations(tmp_path) == {"A-late-3": ("deny", "headless")}


@pytest.mark.timeout(90)
async def test_an_ask_on_the_upstreams_get_stream_goes_to_no_session(tmp_path: Path) -> None:
    """A Streamable HTTP upstream sends the requests of a call on that call's POST stream;
    the official SDK's ``session.create_message`` (no related request) goes on the GET
    stream instead, tied to no call: with A's call the only one in flight it went to A,
    and would have gone to whoever's call was alone there. Positive control: the SDK's
    ``ctx.elicit`` (on the POST stream of A's call) reaches A."""
    port = free_port()
    argv = [sys.executable, str(BACKCHANNEL), "streamable-http", "--port", str(port)]
    async with serve(argv, port, env={PEER_LOG_ENV: str(tmp_path / "peer.log")}):
        upstream = ServerConfig(
            name="up", transport="streamable-http", url=f"http://127.0.0.1:{port}/mcp"
        )
        with trio.fail_after(60):
            async with _gateway(tmp_path, attrs.evolve(upstream, protocol="legacy")) as (a, b, _):
                named = await a.session.call_tool("whoami", {})
                assert "Ada" in text_of(named) and a.recorder.elicitations, text_of(named)
                # The headless answer (no providers here): the upstream's ask fails, and
                # so does its tool (the SDK passes the error on).
                with pytest.raises(JSONRPCError, match="No model available"):
                    await a.session.call_tool("ask", {"prompt": "A-stream-4"})
    assert "A-stream-4" not in a.saw() + b.saw(), (a.saw(), b.saw())


def _log_lines(downstream: Downstream) -> list[str]:
    """The log lines (``notifications/message`` data) the gateway sends ``downstream``,
    from now on; its level is set to debug."""
    lines: list[str] = []

    async def heard(ctx: Any, params: Any) -> None:
        lines.append(json.dumps(params.get("data")))

    downstream.session.add_listener("notifications/message", heard)
    return lines


@pytest.mark.timeout(90)
async def test_a_log_line_during_two_sessions_calls_reaches_neither(tmp_path: Path) -> None:
    """Cross-session log lines: with B's call held in flight on the same upstream, the
    line the upstream logs during A's call (A's data) could not be tied to one call and
    went to every client that set a level: B, by keeping a call open, read A's lines."""
    with trio.fail_after(60):
        async with _gateway(tmp_path) as (a, b, _):
            heard_a, heard_b = _log_lines(a), _log_lines(b)
            for downstream in (a, b):
                await downstream.session.set_logging_level("debug")
            # Positive controls: each one's line alone in flight reaches it, and only it.
            await a.session.call_tool("log", {"secret": "A-log-1"})
            await b.session.call_tool("log", {"secret": "B-log-1"})
            await a.session.list_tools()
            await b.session.list_tools()
            with trio.fail_after(10):
                while not (heard_a and heard_b):
                    await trio.sleep(0.02)
            assert "A-log-1" in str(heard_a) and "A-log-1" not in str(heard_b), heard_b
            assert "B-log-1" in str(heard_b) and "B-log-1" not in str(heard_a), heard_a
            held = tmp_path / "held"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(b.session.call_tool, "hold", {"gate": str(held)})
                await _started(held)
                await a.session.call_tool("log", {"secret": "A-log-2"})
                await b.session.list_tools()  # B's notifications queued so far are out
                await trio.sleep(0.3)
                held.write_text("open")
    assert "A-log-2" not in str(heard_b), heard_b


class _Rooted(Recorder):
    """A downstream client whose roots are ``roots``."""

    def __init__(self, *roots: Path) -> None:
        super().__init__()
        self.roots = [Root(uri=r.as_uri(), name=r.name) for r in roots]

    async def on_roots(self, ctx: Any, params: Any) -> ListRootsResult:
        return ListRootsResult(roots=self.roots)


def _relisted(log: Path) -> list[list[str]]:
    """The roots the upstream got each time it listed them outside any call."""
    return [
        [root["uri"] for root in entry["answer"].get("roots", [])]
        for entry in _answers(log)
        if entry["tool"] == "roots"
    ]


@pytest.mark.timeout(90)
async def test_roots_listed_outside_any_call_stay_within_every_clients_roots(
    tmp_path: Path,
) -> None:
    """An upstream lists its roots again on ``roots/list_changed`` (the gateway sends it
    when a client with roots arrives, so that it lists them "through its roots"), outside
    any call: such an ask goes to nobody on a shared gateway, and the roots filter took
    nobody for "a client without roots": the upstream saw the whole workspace, wider than
    what either client allows. Positive control: a call's own ask sees its client's."""
    workspace = tmp_path / "ws"
    (workspace / "a").mkdir(parents=True)
    (workspace / "shared" / "b").mkdir(parents=True)
    a_root, b_root = workspace / "shared", workspace / "shared" / "b"
    recorders = (_Rooted(a_root), _Rooted(b_root))
    with trio.fail_after(60):
        async with _gateway(tmp_path, workspace=workspace, recorders=recorders) as (_, b, log):
            with trio.fail_after(20):
                while len(_relisted(log)) < 2:  # once per client's arrival
                    await trio.sleep(0.02)
            await b.session.call_tool("ask", {"gate": str(tmp_path), "kind": "roots"})
    during_b = [e["answer"] for e in _answers(log) if e["tool"] == "ask"][-1]
    assert during_b == {"roots": [{"uri": b_root.as_uri(), "name": "b"}]}, during_b
    seen = _relisted(log)
    assert all(workspace.as_uri() not in roots for roots in seen), seen
    # What both allow: B's root (within A's); once B is there, nothing wider.
    assert seen[-1] == [b_root.as_uri()], seen
