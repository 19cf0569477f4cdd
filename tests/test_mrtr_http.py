"""MRTR end to end over Streamable HTTP, against the official SDK's ``MCPServer``.

On 2026-07-28 over HTTP every round of a Multi Round-Trip Request is its own POST: the
server's ``InputRequiredResult`` ends one exchange and the retry opens another. These
tests look at what actually crosses the wire (an ``httpx`` event hook sees every POST's
headers and body), at what the handlers were told, and at what the server observed (its
peer log): a new request id per round, ``requestState`` echoed unchanged, the
``Mcp-Method`` / ``Mcp-Name`` headers on every round, consent and audit identical to the
stateful path, and cancelling the exchange aborting the POST in flight.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from agenthost.config.model import ServerConfig
from agenthost.connection import open_session
from agenthost.errors import AgentHostTimeout
from agenthost.protocol.revisions import Era
from agenthost.session import ClientSession
from agenthost.transports.http import open_streamable_http_transport
from tests.conftest import PEER_LOG_ENV, free_port
from tests.helpers import ContextRecorder, RecordingTransport, comparable_audit, text_of
from tests.peers.http_launch import serve

Command = tuple[str, list[str]]
MODERN = "2026-07-28"


class Wire:
    """Every POST the client made: its headers and JSON body (an httpx request hook)."""

    def __init__(self) -> None:
        self.posts: list[tuple[httpx.Headers, dict[str, Any]]] = []

    async def hook(self, request: httpx.Request) -> None:
        if request.method == "POST":
            self.posts.append((request.headers, json.loads(request.content)))

    def calls(self, method: str, name: str | None = None) -> list[tuple[httpx.Headers, Any]]:
        return [
            (headers, body)
            for headers, body in self.posts
            if body.get("method") == method
            and (name is None or body.get("params", {}).get("name") == name)
        ]


@asynccontextmanager
async def modern_http_session(
    sdk_server_cmd: Callable[..., Command],
    recorder: ContextRecorder,
    env: dict[str, str] | None = None,
) -> AsyncIterator[tuple[ClientSession, RecordingTransport, Wire]]:
    """The SDK server over Streamable HTTP, a session negotiated by ``auto`` (2026-07-28)."""
    port = free_port()
    command, args = sdk_server_cmd("streamable-http", port)
    wire = Wire()
    async with (
        serve([command, *args], port, env=env),
        httpx.AsyncClient(event_hooks={"request": [wire.hook]}) as client,
        open_streamable_http_transport(
            f"http://127.0.0.1:{port}/mcp", name="sdk", client=client
        ) as http,
    ):
        recording = RecordingTransport(http)
        async with open_session(
            recording,
            name="sdk",
            handlers=recorder.handlers(),
            era="auto",
            fallback_in_place=False,
        ) as session:
            assert session.era is Era.MODERN
            yield session, recording, wire


def responses_to(recording: RecordingTransport, request_id: Any) -> dict[str, Any]:
    [response] = [m for m in recording.received if m.get("id") == request_id and "method" not in m]
    return response


async def test_mrtr_rounds_over_streamable_http_on_the_wire(
    sdk_server_cmd: Callable[..., Command],
) -> None:
    """Sampling, roots and elicitation asks, each answered through the handlers and
    retried as a second POST: new id, same requestState, the routing headers again."""
    recorder = ContextRecorder()
    async with modern_http_session(sdk_server_cmd, recorder) as (session, recording, wire):
        sampled = await session.call_tool("sample", {"prompt": "Capital of France?"})
        assert text_of(sampled) == "sampled: Capital of France?"
        roots = await session.call_tool("roots", {})
        assert "file:///srv/work%20space" in text_of(roots)
        form = await session.call_tool("elicit_form", {})
        assert json.loads(text_of(form))["content"]["name"] == "Ada"

        for tool, ask in (
            ("sample", "sampling/createMessage"),
            ("roots", "roots/list"),
            ("elicit_form", "elicitation/create"),
        ):
            rounds = wire.calls("tools/call", tool)
            assert len(rounds) == 2, f"{tool}: {len(rounds)} POSTs"
            (first_headers, first), (second_headers, second) = rounds
            # every round's POST carries the routing headers, and no session id
            for headers in (first_headers, second_headers):
                assert headers["mcp-method"] == "tools/call"
                assert headers["mcp-name"] == tool
                assert headers["mcp-protocol-version"] == MODERN
                assert "mcp-session-id" not in headers
            # a new request id per round
            assert first["id"] != second["id"]
            # round 1 came back input_required; round 2 echoes its requestState unchanged
            # and answers every inputRequests key, with the original arguments untouched
            asked = responses_to(recording, first["id"])["result"]
            assert asked["resultType"] == "input_required"
            assert [r["method"] for r in asked["inputRequests"].values()] == [ask]
            assert "requestState" not in first["params"]
            assert second["params"]["requestState"] == asked["requestState"]
            assert set(second["params"]["inputResponses"]) == set(asked["inputRequests"])
            assert second["params"]["arguments"] == first["params"]["arguments"]
            assert second["params"]["_meta"] == first["params"]["_meta"]
            done = responses_to(recording, second["id"])["result"]
            assert done.get("resultType", "complete") == "complete"

        # each ask reached the handlers with the request and round it belongs to
        assert [(c.method, c.origin, c.origin_name, c.round) for c in recorder.contexts] == [
            ("sampling/createMessage", "tools/call", "sample", 1),
            ("roots/list", "tools/call", "roots", 1),
            ("elicitation/create", "tools/call", "elicit_form", 1),
        ]
        assert all(c.input_key for c in recorder.contexts)
        assert all(c.request_id is None for c in recorder.contexts)
        # the server never sent a request of its own, and we sent nothing 2026-07-28 lacks
        assert recording.request_methods == {}
        assert recording.assert_valid(MODERN) >= 7


async def test_cancelling_an_mrtr_exchange_over_http_aborts_the_post_in_flight(
    sdk_server_cmd: Callable[..., Command], peer_log: Path
) -> None:
    """The exchange is one call: cancelled while round 2 runs on the server, the POST is
    dropped (2026-07-28's cancellation: no notifications/cancelled), the server's tool is
    cancelled, and the session stays usable. A timeout for the whole exchange does the
    same."""
    recorder = ContextRecorder()
    env = {PEER_LOG_ENV: str(peer_log)}

    def log_lines() -> list[str]:
        return peer_log.read_text().splitlines()

    async def wait_for(line: str, count: int = 1) -> None:
        with trio.fail_after(15):
            while log_lines().count(line) < count:
                await trio.sleep(0.02)

    async with modern_http_session(sdk_server_cmd, recorder, env) as (session, recording, wire):
        async with trio.open_nursery() as nursery:
            cancel_scope = trio.CancelScope()

            async def call() -> None:
                with cancel_scope:
                    await session.call_tool("sample_then_wait", {"prompt": "p", "seconds": 60})
                    raise AssertionError("the call was not cancelled")

            nursery.start_soon(call)
            await wait_for("started sample_then_wait")
            cancel_scope.cancel()
        await wait_for("cancelled sample_then_wait")
        assert len(recorder.sampling) == 1  # the ask of round 1 was answered once
        assert len(wire.calls("tools/call", "sample_then_wait")) == 2
        assert "notifications/cancelled" not in recording.methods_sent()

        # one deadline for the whole exchange: round 1, the ask, and round 2
        with pytest.raises(AgentHostTimeout):
            await session.call_tool("sample_then_wait", {"prompt": "p", "seconds": 60}, timeout=2.0)
        await wait_for("cancelled sample_then_wait", 2)
        assert "finished sample_then_wait" not in log_lines()
        assert "notifications/cancelled" not in recording.methods_sent()

        # the session lives on
        assert text_of(await session.call_tool("echo", {"message": "still here"})) == ("still here")


async def test_consent_and_audit_over_http_are_identical_in_both_eras(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    """One SDK server over Streamable HTTP, reached first over initialize (its own
    requests ride the POST's SSE stream) and then over 2026-07-28 (MRTR rounds): the
    policy decides the same, the sampling service answers the same, the audit lines
    match, and each modern ask's line names its request and round."""
    from agenthost_policies import read_audit
    from tests.helpers import FakeAnthropic, host_with, sampling_policy

    port = free_port()
    command, args = sdk_server_cmd("streamable-http", port)
    audits: dict[str, list[dict[str, Any]]] = {}
    answers: dict[str, list[str]] = {}
    async with serve([command, *args], port):
        for protocol in ("legacy", MODERN):
            run_dir = tmp_path / protocol
            run_dir.mkdir()
            policy = sampling_policy(run_dir, max_tokens=64)
            policy["rules"].append({"kind": "elicitation", "decision": "deny", "server": "*"})
            fake = FakeAnthropic()
            server = ServerConfig(
                name="sdk",
                transport="http",
                url=f"http://127.0.0.1:{port}/mcp",
                protocol=protocol,
            )
            async with host_with([server], policy, fake=fake) as host:
                session = host.session("sdk")
                assert session.era is (Era.LEGACY if protocol == "legacy" else Era.MODERN)
                sampled = await host.call_tool("sdk__sample", {"prompt": "Capital of France?"})
                roots = await host.call_tool("sdk__roots", {})
                form = await host.call_tool("sdk__elicit_form", {})
                answers[protocol] = [text_of(sampled), text_of(roots), text_of(form)]
            assert fake.bodies[0]["max_tokens"] == 64
            audits[protocol] = read_audit(run_dir / "audit.jsonl")
    assert answers["legacy"] == answers[MODERN]
    assert json.loads(answers[MODERN][2]) == {"action": "decline"}
    assert [comparable_audit(r) for r in audits["legacy"]] == [
        comparable_audit(r) for r in audits[MODERN]
    ]
    assert all("via" not in r for r in audits["legacy"])
    asks = [r for r in audits[MODERN] if r["event"] == "decision" and r["kind"] != "tool"]
    assert [r["kind"] for r in asks] == ["sampling", "roots", "elicitation"]
    for record, tool in zip(asks, ("sample", "roots", "elicit_form"), strict=True):
        assert record["via"]["request"] == "tools/call"
        assert record["via"]["name"] == tool
        assert record["via"]["round"] == 1
        assert record["via"]["input"]


class StuckElicitation(ContextRecorder):
    """Answers elicitation never (a user who walked away): the exchange waits in an ask."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = trio.Event()
        self.cancelled = False

    async def on_elicit(self, ctx: Any, params: Any) -> Any:
        self.asked.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled = True
            raise


async def test_cancelling_an_mrtr_exchange_over_http_while_an_ask_waits(
    sdk_server_cmd: Callable[..., Command],
) -> None:
    """Cancelled between rounds (no POST in flight, the user is being asked): the ask is
    cancelled and no retry is sent; the session stays usable."""
    recorder = StuckElicitation()
    async with modern_http_session(sdk_server_cmd, recorder) as (session, recording, wire):
        with trio.move_on_after(30) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.call_tool, "elicit_form", {})
                await recorder.asked.wait()
                nursery.cancel_scope.cancel()
        assert not scope.cancelled_caught
        assert recorder.cancelled
        assert len(wire.calls("tools/call", "elicit_form")) == 1  # no retry was sent
        assert "notifications/cancelled" not in recording.methods_sent()
        assert text_of(await session.call_tool("echo", {"message": "ok"})) == "ok"
