"""Tasks, the 2026-07-28 form: the ``io.modelcontextprotocol/tasks`` extension (SEP-2663),
against a real implementation of it (FastMCP with ``fastmcp-tasks``,
``tests/peers/tasks_server.py``), over stdio and Streamable HTTP (issue 16).

What is checked on the wire: the extension is declared per request, in ``_meta``'s client
capabilities; the task is polled with ``tasks/get`` to its inline result; a task's asks are
answered once and sent with ``tasks/update``; cancelling the caller sends exactly one
``tasks/cancel``; over HTTP every ``tasks/*`` request carries ``Mcp-Name: <taskId>``.
What the 2026-07-28 schema covers (``tools/call`` and the rest of the core) is validated
against it; ``tasks/*`` are extension methods the core schema does not define, so they
are checked against the JSON-RPC request envelope only.

``timeouts.task_after`` (issue 16 item 1: optional tools as tasks past a configured
duration) is driven here for both forms: the extension peer's optional tool, and a
2025-11-25 tool whose ``taskSupport`` is ``optional`` (``optional_task_server.mjs``, the
TypeScript SDK).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.asks import ClientHandlers, RequestContext
from agenthost.config import load_config
from agenthost.config.model import HostConfig, ServerConfig, Timeouts
from agenthost.connection import open_session
from agenthost.errors import AgentHostTimeout, ConfigError, JSONRPCError, ProtocolError
from agenthost.host.host import open_host
from agenthost.protocol import methods as m
from agenthost.protocol.types import ElicitRequestParams, ElicitResult, TextContent
from agenthost.protocol.types.tasks import Task
from agenthost.redaction import add_secret, discard_secret
from agenthost.session import ClientSession
from agenthost.tool_tasks import (
    MAX_INPUT_ROUNDS,
    MIN_POLL_INTERVAL,
    TASKS_EXTENSION,
    call_tool_via_extension,
    get_task,
    offers_tasks_extension,
    task_result,
)
from agenthost.transports.http import open_streamable_http_transport
from agenthost.transports.stdio import open_stdio_transport
from agenthost_policies import read_audit
from tests.conftest import PEERS_DIR, free_port
from tests.forkserver import peer_python
from tests.helpers import ALLOW_ALL, RecordingTransport
from tests.peers.http_launch import serve
from tests.schemacheck import validate_envelope, validate_outgoing

PEER = PEERS_DIR / "tasks_server.py"
MODERN = "2026-07-28"
CAPS = "io.modelcontextprotocol/clientCapabilities"

pytestmark = pytest.mark.timeout(120)


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


@asynccontextmanager
async def http_peer(env: dict[str, str] | None = None) -> AsyncIterator[str]:
    port = free_port()
    argv = [peer_python(), str(PEER), "streamable-http", "--port", str(port)]
    async with serve(argv, port, env=env):
        yield f"http://127.0.0.1:{port}/mcp"


Opened = tuple[ClientSession, RecordingTransport]


@pytest.fixture(params=["stdio", "http"])
def peer_session(
    request: pytest.FixtureRequest,
) -> Callable[..., AbstractAsyncContextManager[Opened]]:
    """``open(handlers=None, env=None)``: a 2026-07-28 session with the peer, recorded."""
    kind = request.param

    @asynccontextmanager
    async def opened(
        handlers: ClientHandlers | None = None, env: dict[str, str] | None = None
    ) -> AsyncIterator[Opened]:
        if kind == "stdio":
            async with open_stdio_transport(
                peer_python(), [str(PEER), "stdio"], name="tk", env=env
            ) as stdio:
                wire = RecordingTransport(stdio)
                async with open_session(wire, name="tk", handlers=handlers, era="modern") as s:
                    yield s, wire
        else:
            async with (
                http_peer(env) as url,
                open_streamable_http_transport(url, name="tk") as http,
            ):
                wire = RecordingTransport(http)
                async with open_session(wire, name="tk", handlers=handlers, era="modern") as s:
                    yield s, wire

    return opened


def check_wire(wire: RecordingTransport) -> None:
    """Validate what the core schema covers; the extension's own methods by envelope."""
    for message in wire.sent:
        method = message.get("method", "")
        if method.startswith("tasks/"):
            validate_envelope(message, MODERN)
            assert isinstance(message["params"].get("taskId"), str)
            assert TASKS_EXTENSION in message["params"]["_meta"][CAPS]["extensions"]
        else:
            validate_outgoing(message, MODERN)


async def test_a_long_task_is_polled_to_its_result(
    peer_session: Callable[..., AbstractAsyncContextManager[Opened]],
) -> None:
    statuses: list[tuple[str, str | None]] = []

    async def on_status(task: Task) -> None:
        statuses.append((task.status, task.status_message))

    async with peer_session() as (session, wire):
        assert offers_tasks_extension(session)
        with trio.fail_after(60):
            result = await call_tool_via_extension(
                session, "research", {"topic": "tides", "steps": 3}, on_status=on_status
            )
        plain = await call_tool_via_extension(session, "echo", {"message": "hi"})
    assert text_of(result) == "Report on tides: 3 sources read."
    assert text_of(plain) == "hi"
    assert statuses[0][0] == "working"
    assert statuses[-1] == ("completed", None)
    assert ("working", "step 2 of 3: reading on tides") in statuses
    calls = [m for m in wire.sent if m.get("method") == "tools/call"]
    assert [c["params"]["_meta"][CAPS]["extensions"] for c in calls] == [{TASKS_EXTENSION: {}}] * 2
    gets = [m for m in wire.sent if m.get("method") == "tasks/get"]
    assert len(gets) >= 3
    assert "tasks/result" not in wire.methods_sent()
    check_wire(wire)
    if wire.exchanges_per_request:
        # Streamable HTTP: tasks/* are routed by task (Mcp-Name carries the taskId).
        for message, options in zip(wire.sent, wire.options, strict=True):
            if message.get("method") == "tasks/get":
                assert options.headers["Mcp-Name"] == message["params"]["taskId"]
                assert options.headers["Mcp-Method"] == "tasks/get"


async def test_a_task_that_needs_input_asks_once_through_the_handlers(
    peer_session: Callable[..., AbstractAsyncContextManager[Opened]],
) -> None:
    asked: list[tuple[str | None, str | None, int | None, str]] = []

    async def elicit(ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append((ctx.origin, ctx.origin_name, ctx.round, params.message))
        await trio.sleep(0.5)  # the task is polled meanwhile: the ask must not repeat
        return ElicitResult(action="accept", content={"sure": True})

    async with peer_session(ClientHandlers(elicitation=elicit)) as (session, wire):
        with trio.fail_after(60):
            result = await call_tool_via_extension(session, "confirm", {"action": "deploy"})
    assert text_of(result) == "deploy: done"
    assert asked == [("tools/call", "confirm", 1, "Really deploy?")]
    [update] = [m for m in wire.sent if m.get("method") == "tasks/update"]
    [(key, answer)] = update["params"]["inputResponses"].items()
    assert answer == {"action": "accept", "content": {"sure": True}}
    assert key
    check_wire(wire)


async def test_failed_task_raises_its_error_and_tool_errors_are_results(
    peer_session: Callable[..., AbstractAsyncContextManager[Opened]],
) -> None:
    async with peer_session() as (session, wire):
        with trio.fail_after(60), pytest.raises(JSONRPCError) as failed:
            await call_tool_via_extension(session, "explode", {"reason": "boom"})
        with trio.fail_after(60):
            errored = await call_tool_via_extension(session, "tool_error", {"reason": "bad"})
    assert failed.value.code == -32603
    assert failed.value.message == "exploded: boom"
    assert errored.is_error
    assert text_of(errored) == "tool failed: bad"
    # Both ended on their own: nothing to cancel.
    assert "tasks/cancel" not in wire.methods_sent()


async def test_cancelling_the_caller_sends_one_tasks_cancel(
    peer_session: Callable[..., AbstractAsyncContextManager[Opened]], tmp_path: Path
) -> None:
    log = tmp_path / "peer.log"
    log.touch()
    statuses: list[str] = []
    async with peer_session(env={"AGENTHOST_PEER_LOG": str(log)}) as (session, wire):
        running = trio.Event()

        async def on_status(task: Task) -> None:
            statuses.append(task.status_message or task.status)
            if task.status_message:
                running.set()

        async with trio.open_nursery() as nursery:

            async def call() -> None:
                await call_tool_via_extension(
                    session, "research", {"topic": "x", "steps": 40}, on_status=on_status
                )

            nursery.start_soon(call)
            with trio.fail_after(60):
                await running.wait()
            nursery.cancel_scope.cancel()
        [cancel] = [m for m in wire.sent if m.get("method") == "tasks/cancel"]
        task_id = cancel["params"]["taskId"]
        with trio.fail_after(30):
            while (state := await get_task(session, task_id)).status != "cancelled":
                await trio.sleep(0.1)
        assert state.task_id == task_id

        def steps() -> int:
            lines = log.read_text().splitlines()
            return sum(json.loads(line)["event"] == "research-step" for line in lines)

        # The server stopped the work: no step is taken after the cancel (a step is 0.3 s).
        stopped_at = steps()
        await trio.sleep(1.0)
        assert steps() == stopped_at < 40
    check_wire(wire)


async def test_a_task_past_its_timeout_is_cancelled(
    peer_session: Callable[..., AbstractAsyncContextManager[Opened]],
) -> None:
    async with peer_session() as (session, wire):
        with trio.fail_after(30), pytest.raises(AgentHostTimeout, match="within 1s"):
            await call_tool_via_extension(
                session, "research", {"topic": "x", "steps": 40}, timeout=1.0
            )
        [cancel] = [m for m in wire.sent if m.get("method") == "tasks/cancel"]
        state = await get_task(session, cancel["params"]["taskId"])
    assert state.status == "cancelled"


async def test_waiting_for_a_result_cancels_only_the_wait(
    peer_session: Callable[..., AbstractAsyncContextManager[Opened]],
) -> None:
    """``task_result`` (``agenthost tasks result``) waits for a task it did not create:
    giving up on the wait leaves the task running."""
    async with peer_session() as (session, wire):
        created = await session.exchange(
            m.TOOLS_CALL_SPEC,
            {"name": "research", "arguments": {"topic": "x", "steps": 40}},
            extensions={TASKS_EXTENSION: {}},
            final_kinds=frozenset({"task"}),
        )
        with trio.fail_after(30), pytest.raises(AgentHostTimeout):
            await task_result(session, created["taskId"], timeout=0.5)
        assert "tasks/cancel" not in wire.methods_sent()
        assert (await get_task(session, created["taskId"])).status == "working"


async def test_a_task_that_keeps_asking_is_refused_and_cancelled(
    peer_session: Callable[..., AbstractAsyncContextManager[Opened]],
) -> None:
    asked = 0

    async def elicit(ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
        nonlocal asked
        asked += 1
        return ElicitResult(action="accept", content={})

    async with peer_session(ClientHandlers(elicitation=elicit)) as (session, wire):
        with trio.fail_after(90), pytest.raises(ProtocolError, match="more than 32 times"):
            await call_tool_via_extension(session, "nag", {})
    assert asked == MAX_INPUT_ROUNDS
    assert wire.methods_sent().count("tasks/update") == MAX_INPUT_ROUNDS
    assert wire.methods_sent().count("tasks/cancel") == 1


async def test_a_zero_poll_interval_is_not_a_busy_loop(
    peer_session: Callable[..., AbstractAsyncContextManager[Opened]],
) -> None:
    async with peer_session() as (session, wire):
        started = trio.current_time()
        with trio.fail_after(30):
            result = await call_tool_via_extension(session, "spin", {"seconds": 1.0})
        elapsed = trio.current_time() - started
    assert text_of(result) == "spun"
    polls = wire.methods_sent().count("tasks/get")
    # pollIntervalMs 0 is taken as the 50 ms floor: at most one poll per 50 ms.
    assert polls <= elapsed / MIN_POLL_INTERVAL + 1, (polls, elapsed)


# -- the host: the same API, consent and audit as the 2025-11-25 form ------------------


def stdio_server(**options: Any) -> ServerConfig:
    return ServerConfig(
        name="tk",
        transport="stdio",
        command=peer_python(),
        args=(str(PEER), "stdio"),
        protocol=MODERN,
        **options,
    )


async def test_host_runs_a_required_task_tool_with_consent_and_audit(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    policy: dict[str, Any] = {
        "mode": "headless",
        "audit": str(audit),
        "rules": [
            {"kind": "tool", "server": "tk", "decision": "allow"},
            {
                "kind": "elicitation",
                "server": "tk",
                "mode": "form",
                "decision": "allow",
                "answers": {"sure": True},
            },
        ],
    }
    seen: list[str | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with open_host(HostConfig(servers=[stdio_server()], policy=policy)) as host:
        # The listing says nothing about tasks: the server refuses the undeclared call
        # (-32021, naming the extension) and the host retries it declared.
        with trio.fail_after(60):
            first = await host.call_tool("tk__research", {"topic": "moons"}, progress=progress)
            confirmed = await host.call_tool("tk__confirm", {"action": "ship"})
            quick = await host.call_tool("tk__echo", {"message": "hi"})
    assert text_of(first) == "Report on moons: 3 sources read."
    assert text_of(confirmed) == "ship: done"
    assert text_of(quick) == "hi"
    assert seen[0] == "working"
    assert "working: step 1 of 3: reading on moons" in seen
    assert seen[-1] == "completed"
    records = read_audit(str(audit))
    decisions = [
        (r["kind"], r.get("name"), r["decision"]) for r in records if r["event"] == "decision"
    ]
    assert decisions == [
        ("tool", "research", "allow"),
        ("tool", "confirm", "allow"),
        ("elicitation", "", "allow"),
        ("tool", "echo", "allow"),
    ]
    [ask] = [r for r in records if r["event"] == "decision" and r["kind"] == "elicitation"]
    assert ask["via"]["request"] == "tools/call"
    assert ask["via"]["name"] == "confirm"


async def test_task_false_makes_a_plain_call_that_the_server_refuses() -> None:
    async with open_host(HostConfig(servers=[stdio_server()], policy=ALLOW_ALL)) as host:
        with trio.fail_after(60), pytest.raises(JSONRPCError) as refused:
            await host.call_tool("tk__research", {"topic": "x"}, task=False)
    assert refused.value.code == -32021
    assert "requires the tasks extension" in refused.value.message


async def test_a_registered_secret_in_the_servers_error_data_does_not_change_the_decision() -> None:
    """Regression (CI of stop 30): a registered secret that happened to appear in the
    server's -32021 ``data`` was scrubbed out of it before the host read it, so the host
    no longer saw the tasks extension named there and did not retry the call as a task.
    Decisions read ``raw_data``; only what is shown is scrubbed."""
    add_secret("requiredCapabilities")
    try:
        async with open_host(HostConfig(servers=[stdio_server()], policy=ALLOW_ALL)) as host:
            with trio.fail_after(60):
                result = await host.call_tool("tk__research", {"topic": "moons"})
        assert text_of(result) == "Report on moons: 3 sources read."
    finally:
        discard_secret("requiredCapabilities")


async def _runs_as_task(host: Any, seconds: float) -> bool:
    """Whether one ``maybe_slow`` call ran as a task (only a task reports a status)."""
    seen: list[str | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    with trio.fail_after(60):
        result = await host.call_tool("tk__maybe_slow", {"seconds": seconds}, progress=progress)
    assert text_of(result) == f"slept {seconds:g}s"
    return "working" in seen


@pytest.mark.parametrize(
    ("task_after", "expected"),
    [
        (float("inf"), [False, False, False]),  # the default: never
        (0.0, [True, True, True]),  # always
        (0.5, [False, True, True]),  # once a call took 0.5 s or more
    ],
)
async def test_optional_tools_run_as_tasks_past_task_after(
    task_after: float, expected: list[bool]
) -> None:
    server = stdio_server(timeouts=Timeouts(task_after=task_after))
    async with open_host(HostConfig(servers=[server], policy=ALLOW_ALL)) as host:
        ran = [await _runs_as_task(host, 0.7), await _runs_as_task(host, 0.0)]
        ran.append(await _runs_as_task(host, 0.0))
    assert ran == expected


def _agenthost(config: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [peer_python(), "-m", "agenthost", "--config", str(config), *argv],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )


async def test_cli_call_agent_and_tasks_over_http(tmp_path: Path) -> None:
    (tmp_path / "script.toml").write_text(
        """
[[turns]]
text = "Researching."
[[turns.tool_calls]]
id = "t1"
name = "tk__research"
input = { topic = "comets" }

[[turns]]
text = "Waiting for the report."

[[turns]]
text = "Done researching."
"""
    )
    async with http_peer() as url:
        config = tmp_path / "agenthost.toml"
        config.write_text(
            f"""
[servers.tk]
url = {json.dumps(url)}

[providers.replay]
kind = "scripted"
script = "script.toml"

[policy]
mode = "headless"

[[policy.rules]]
kind = "tool"
server = "tk"
decision = "allow"
"""
        )

        def run(*argv: str) -> subprocess.CompletedProcess[str]:
            return _agenthost(config, *argv)

        called = await trio.to_thread.run_sync(
            lambda: run("call", "tk__research", '{"topic": "comets"}')
        )
        ran = await trio.to_thread.run_sync(lambda: run("--json", "run", "research comets"))
        listed = await trio.to_thread.run_sync(lambda: run("tasks", "list", "tk"))
        # A task left running on the HTTP server: the CLI finds it by id in a new run.
        async with open_host(
            HostConfig(servers=[ServerConfig(name="tk", transport="http", url=url)])
        ) as host:
            session = host.session("tk")
            raw = await session.exchange(
                m.TOOLS_CALL_SPEC,
                {"name": "research", "arguments": {"topic": "tides", "steps": 2}},
                extensions={TASKS_EXTENSION: {}},
                final_kinds=frozenset({"task"}),
            )
            long = await session.exchange(
                m.TOOLS_CALL_SPEC,
                {"name": "research", "arguments": {"topic": "tides", "steps": 100}},
                extensions={TASKS_EXTENSION: {}},
                final_kinds=frozenset({"task"}),
            )
        task_id = raw["taskId"]
        got = await trio.to_thread.run_sync(lambda: run("--json", "tasks", "get", "tk", task_id))
        result = await trio.to_thread.run_sync(lambda: run("tasks", "result", "tk", task_id))
        cancelled = await trio.to_thread.run_sync(
            lambda: run("--json", "tasks", "cancel", "tk", long["taskId"])
        )
    assert called.returncode == 0, called.stderr
    assert "Report on comets: 3 sources read." in called.stdout
    # The status of the task, as it went (stderr is no terminal here: one line each).
    assert "progress tk__research: 1 working\n" in called.stderr
    assert "working: step 2 of 3: reading on comets" in called.stderr
    assert "completed" in called.stderr
    assert ran.returncode == 0, ran.stderr
    [call] = json.loads(ran.stdout)["tool_calls"]
    assert call["status"] == "ok", call
    assert "Report on comets" in call["output"]
    assert listed.returncode == 2
    assert "has no tasks/list" in listed.stderr
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["taskId"] == task_id
    assert result.returncode == 0, result.stderr
    assert "Report on tides: 2 sources read." in result.stdout
    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["status"] == "cancelled"


def test_the_docs_task_after_example_means_what_it_says(tmp_path: Path) -> None:
    """docs/config.md's tasks example: host-wide 30 s, 0 for the one server."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "config.md").read_text()
    [block] = [
        b for b in re.findall(r"^```toml\n(.*?)^```", text, re.M | re.S) if "task_after = 30" in b
    ]
    path = tmp_path / "agenthost.toml"
    path.write_text(block)
    config = load_config(path)
    [builds] = config.servers
    assert builds.timeouts.task_after == 0
    assert config.timeouts.task_after == 30
    path.write_text("[timeouts]\ntask_after = -1\n")
    with pytest.raises(ConfigError, match=r"timeouts.task_after.*>= 0 \(or inf for never\)"):
        load_config(path)


# -- task_after on 2025-11-25: a tool whose taskSupport is "optional" -------------------


@pytest.mark.parametrize(
    ("task_after", "expected"),
    [(float("inf"), [False, False]), (0.0, [True, True]), (0.3, [False, True])],
)
async def test_legacy_optional_tools_run_as_tasks_past_task_after(
    task_after: float, expected: list[bool], node_bin: Callable[[], str]
) -> None:
    server = ServerConfig(
        name="op",
        transport="stdio",
        command=node_bin(),
        args=(str(PEERS_DIR / "optional_task_server.mjs"),),
        protocol="legacy",
        timeouts=Timeouts(task_after=task_after),
    )
    ran: list[bool] = []
    async with open_host(HostConfig(servers=[server], policy=ALLOW_ALL)) as host:
        [tool] = await host.list_tools()
        assert tool.tool.execution is not None
        assert tool.tool.execution.task_support == "optional"
        for seconds in (0.5, 0.0):
            seen: list[str | None] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                seen.append(message)  # noqa: B023 (each call has its own list)

            with trio.fail_after(30):
                result = await host.call_tool("op__sleep", {"seconds": seconds}, progress=progress)
            assert text_of(result) == f"slept {seconds:g}s"
            ran.append(any(m is not None and m.startswith("working") for m in seen))
    assert ran == expected
