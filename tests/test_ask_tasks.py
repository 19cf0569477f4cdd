"""Server asks run as client-side tasks (MCP 2025-11-25, issue 16), against
server-everything's ``trigger-sampling-request-async`` and
``trigger-elicitation-request-async``: the server sends ``sampling/createMessage`` /
``elicitation/create`` with a ``task`` param, we answer with a ``CreateTaskResult``, and
the server polls our ``tasks/get`` and fetches ``tasks/result``.

Everything we send is validated against the 2025-11-25 schema (the task results against
their own definitions, since a ``CreateTaskResult`` answers a sampling request then).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.ask_tasks import RELATED_TASK, AskTaskLimits
from agenthost.asks import ClientHandlers, RequestContext
from agenthost.connection import open_session
from agenthost.protocol.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    TextContent,
)
from agenthost.session import ClientSession
from agenthost.transports.stdio import open_stdio_transport
from agenthost_policies import read_audit
from tests.helpers import FakeAnthropic, RecordingTransport, host_with, sampling_policy, stdio
from tests.schemacheck import validate_definition, validate_outgoing

Command = tuple[str, list[str]]
REVISION = "2025-11-25"
SAMPLING_TOOL = "trigger-sampling-request-async"
ELICIT_TOOL = "trigger-elicitation-request-async"


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


async def sample(ctx: RequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
    return CreateMessageResult(
        role="assistant", content=TextContent(text="Tides follow the moon."), model="test-model"
    )


async def wait_for_tool(session: ClientSession, name: str) -> None:
    """server-everything registers the task tools after ``initialized``, then says so."""
    with trio.fail_after(10):
        while name not in {tool.name for tool in await session.list_tools()}:
            await trio.sleep(0.05)


def check_wire(transport: RecordingTransport) -> dict[str, list[dict[str, Any]]]:
    """Validate every message we sent; return our responses grouped by the method answered."""
    answers: dict[str, list[dict[str, Any]]] = {}
    for message in transport.sent:
        if "result" in message or "error" in message:
            method = transport.request_methods.get(message["id"], "?")
            answers.setdefault(method, []).append(message)
            validate_outgoing(message, REVISION, answers_method=None)
            if "result" not in message:
                continue
            result = message["result"]
            if "task" in result:
                validate_definition(result, REVISION, "CreateTaskResult")
            elif method == "tasks/get":
                validate_definition(result, REVISION, "GetTaskResult")
            elif method == "tasks/result":
                validate_definition(result, REVISION, "GetTaskPayloadResult")
        else:
            validate_outgoing(message, REVISION)
    return answers


@pytest.mark.timeout(60)
async def test_sampling_as_a_task_end_to_end(everything_cmd: Callable[[], Command]) -> None:
    handlers = ClientHandlers(sampling=sample, ask_tasks=AskTaskLimits())
    command, args = everything_cmd()
    async with (
        open_stdio_transport(command, args, name="ev") as stdio_transport,
        open_session(RecordingTransport(stdio_transport), name="ev", handlers=handlers) as session,
    ):
        assert session.client_capabilities(REVISION)["tasks"] == {
            "list": {},
            "cancel": {},
            "requests": {"sampling": {"createMessage": {}}},
        }
        await wait_for_tool(session, SAMPLING_TOOL)
        with trio.fail_after(30):
            result = await session.call_tool(SAMPLING_TOOL, {"prompt": "tides"})
        text = text_of(result)
        assert "[COMPLETED] Async sampling completed!" in text, text
        assert "Tides follow the moon." in text
        assert "Poll 1: completed" in text
        transport = session.transport
        assert isinstance(transport, RecordingTransport)
        answers = check_wire(transport)
        [created] = answers["sampling/createMessage"]
        task = created["result"]["task"]
        assert task["status"] == "working"
        assert task["ttl"] == 300000  # what the server asked for, under our cap
        [got] = answers["tasks/get"]
        assert got["result"]["status"] == "completed"
        assert got["result"]["taskId"] == task["taskId"]
        [payload] = answers["tasks/result"]
        assert payload["result"]["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}
        assert payload["result"]["content"]["text"] == "Tides follow the moon."
        statuses = [
            m["params"]["status"]
            for m in transport.sent
            if m.get("method") == "notifications/tasks/status"
        ]
        assert statuses == ["completed"]
        # Kept for tasks/result until its ttl: the server could still list it.
        assert session.ask_tasks is not None and len(session.ask_tasks) == 1


@pytest.mark.timeout(60)
async def test_elicitation_as_a_task(everything_cmd: Callable[[], Command]) -> None:
    asked: list[RequestContext] = []

    async def elicit(ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(ctx)
        assert params.task is None  # the handler sees the plain ask
        return ElicitResult(action="accept", content={"name": "Ada", "favoriteColor": "Blue"})

    handlers = ClientHandlers(elicitation=elicit, ask_tasks=AskTaskLimits())
    command, args = everything_cmd()
    async with (
        open_stdio_transport(command, args, name="ev") as stdio_transport,
        open_session(RecordingTransport(stdio_transport), name="ev", handlers=handlers) as session,
    ):
        await wait_for_tool(session, ELICIT_TOOL)
        with trio.fail_after(30):
            result = await session.call_tool(ELICIT_TOOL, {})
        text = text_of(result)
        assert "[COMPLETED] User provided the requested information!" in text, text
        assert "- Name: Ada" in text
        [ctx] = asked
        assert ctx.task_id is not None
        assert ctx.via() == {"task": ctx.task_id}
        transport = session.transport
        assert isinstance(transport, RecordingTransport)
        check_wire(transport)


@pytest.mark.timeout(60)
async def test_not_declared_means_plain_asks(everything_cmd: Callable[[], Command]) -> None:
    """Without ``ask_tasks`` no ``tasks`` capability is declared, the server does not
    offer the task tools, and a ``tasks/get`` would be -32601."""
    command, args = everything_cmd()
    async with (
        open_stdio_transport(command, args, name="ev") as stdio_transport,
        open_session(stdio_transport, name="ev", handlers=ClientHandlers(sampling=sample)) as s,
    ):
        assert "tasks" not in s.client_capabilities(REVISION)
        await wait_for_tool(s, "trigger-sampling-request")
        assert SAMPLING_TOOL not in {tool.name for tool in await s.list_tools()}


@pytest.mark.timeout(60)
async def test_live_task_cap_refuses_the_excess(everything_cmd: Callable[[], Command]) -> None:
    release = trio.Event()
    started: list[str | None] = []

    async def slow(ctx: RequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        started.append(ctx.task_id)
        await release.wait()
        return await sample(ctx, params)

    handlers = ClientHandlers(sampling=slow, ask_tasks=AskTaskLimits(max_live=1))
    command, args = everything_cmd()
    async with (
        open_stdio_transport(command, args, name="ev") as stdio_transport,
        open_session(stdio_transport, name="ev", handlers=handlers) as session,
    ):
        await wait_for_tool(session, SAMPLING_TOOL)
        results: list[Any] = []

        async def call() -> None:
            results.append(await session.call_tool(SAMPLING_TOOL, {"prompt": "x"}))

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                while not started:
                    await trio.sleep(0.02)
                second = await session.call_tool(SAMPLING_TOOL, {"prompt": "y"})
                release.set()
        assert second.is_error
        assert "too many tasks in progress for this server (limit 1)" in text_of(second)
        assert "[COMPLETED]" in text_of(results[0])
        assert len(started) == 1


@pytest.mark.timeout(60)
async def test_ttl_expiry_cancels_the_work_and_drops_the_task(
    everything_cmd: Callable[[], Command],
) -> None:
    cancelled = trio.Event()

    async def hangs(ctx: RequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    handlers = ClientHandlers(sampling=hangs, ask_tasks=AskTaskLimits(max_ttl=0.5))
    command, args = everything_cmd()
    async with (
        open_stdio_transport(command, args, name="ev") as stdio_transport,
        open_session(RecordingTransport(stdio_transport), name="ev", handlers=handlers) as session,
    ):
        await wait_for_tool(session, SAMPLING_TOOL)
        with trio.fail_after(30):
            result = await session.call_tool(SAMPLING_TOOL, {"prompt": "x"})
        assert cancelled.is_set()
        # The server polled after the ttl: the task was gone.
        assert result.is_error
        assert "Failed to retrieve task: Task not found" in text_of(result)
        assert session.ask_tasks is not None and len(session.ask_tasks) == 0
        transport = session.transport
        assert isinstance(transport, RecordingTransport)
        answers = check_wire(transport)
        assert answers["sampling/createMessage"][0]["result"]["task"]["ttl"] == 500
        [gone] = answers["tasks/get"]
        assert gone["error"]["code"] == -32602


@pytest.mark.timeout(60)
async def test_closing_the_session_cancels_running_tasks(
    everything_cmd: Callable[[], Command],
) -> None:
    running = trio.Event()
    cancelled = trio.Event()

    async def hangs(ctx: RequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        running.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    handlers = ClientHandlers(sampling=hangs, ask_tasks=AskTaskLimits())
    command, args = everything_cmd()
    with trio.fail_after(30):
        async with (
            open_stdio_transport(command, args, name="ev") as stdio_transport,
            open_session(stdio_transport, name="ev", handlers=handlers) as session,
            trio.open_nursery() as nursery,
        ):
            await wait_for_tool(session, SAMPLING_TOOL)

            async def call() -> None:
                await session.call_tool(SAMPLING_TOOL, {"prompt": "x"})

            nursery.start_soon(call)
            await running.wait()
            nursery.cancel_scope.cancel()
    assert cancelled.is_set()


@pytest.mark.timeout(90)
async def test_host_runs_task_sampling_through_policy_and_audit(
    tmp_path: Path, everything_cmd: Callable[..., Command]
) -> None:
    """``client_tasks = true``: the same sampling service, consent and audit as a plain ask;
    the audit line says which task it ran as."""
    fake = FakeAnthropic("A haiku, in the background.")
    server = stdio("ev", everything_cmd(), client_tasks=True)
    async with host_with([server], sampling_policy(tmp_path), fake=fake) as host:
        with trio.fail_after(10):
            while host.catalog.tool(f"ev__{SAMPLING_TOOL}") is None:
                await trio.sleep(0.02)
        with trio.fail_after(30):
            result = await host.call_tool(f"ev__{SAMPLING_TOOL}", {"prompt": "MCP"})
        assert "A haiku, in the background." in text_of(result)
    assert fake.bodies[0]["system"] == "You are a helpful test server."
    sampling = [r for r in read_audit(tmp_path / "audit.jsonl") if r.get("kind") == "sampling"]
    assert [r["event"] for r in sampling] == ["decision", "review", "outcome"]
    assert sampling[0]["decision"] == "allow"
    assert set(sampling[0]["via"]) == {"task"}


def test_client_tasks_config_key(tmp_path: Path) -> None:
    from agenthost.config import load_config
    from agenthost.errors import ConfigError

    path = tmp_path / "agenthost.toml"
    path.write_text('[servers.s]\ncommand = "x"\nclient_tasks = true\n')
    [server] = load_config(path).servers
    assert server.client_tasks is True
    path.write_text('[servers.s]\ncommand = "x"\n')
    assert load_config(path).servers[0].client_tasks is False
    path.write_text('[servers.s]\ncommand = "x"\nclient_tasks = "yes"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == "servers.s.client_tasks"


@pytest.mark.timeout(60)
async def test_sampling_as_a_task_over_streamable_http(
    everything_http_cmd: Callable[..., tuple[str, list[str], dict[str, str]]],
) -> None:
    """The same exchange over Streamable HTTP: the server's asks and polls arrive on its
    SSE streams, our answers go back as POSTs."""
    from agenthost.config.model import ServerConfig
    from agenthost.connection import EraCache, connect
    from tests.peers.http_launch import free_port, serve

    port = free_port()
    command, args, env = everything_http_cmd("streamableHttp", port)
    handlers = ClientHandlers(sampling=sample, ask_tasks=AskTaskLimits())
    config = ServerConfig(
        name="ev",
        transport="streamable-http",
        url=f"http://127.0.0.1:{port}/mcp",
        protocol="legacy",
    )
    async with (
        serve([command, *args], port, env=env),
        connect(config, handlers=handlers, era_cache=EraCache(None)) as session,
    ):
        assert session.revision == REVISION
        await wait_for_tool(session, SAMPLING_TOOL)
        with trio.fail_after(30):
            result = await session.call_tool(SAMPLING_TOOL, {"prompt": "tides"})
        assert "[COMPLETED] Async sampling completed!" in text_of(result), text_of(result)
        assert "Tides follow the moon." in text_of(result)


@pytest.mark.timeout(60)
async def test_list_cancel_and_errors_served_to_a_real_requestor() -> None:
    """tasks/list, tasks/get, tasks/cancel (and again, refused), tasks/result of a cancelled
    task, an unknown id and a bad cursor, asked by a server on the official TypeScript SDK."""
    import json

    from tests.conftest import PEERS_DIR, node_bin

    hung = trio.Event()
    cancelled = trio.Event()

    async def hangs(ctx: RequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        hung.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    handlers = ClientHandlers(sampling=hangs, ask_tasks=AskTaskLimits())
    async with (
        open_stdio_transport(node_bin(), [str(PEERS_DIR / "tasks_peer.mjs")], name="tp") as inner,
        open_session(RecordingTransport(inner), name="tp", handlers=handlers) as session,
    ):
        with trio.fail_after(30):
            result = await session.call_tool("client-task-tour", {})
        answers = json.loads(text_of(result))
        task_id = answers["create"]["task"]["taskId"]
        [listed] = answers["list"]["tasks"]
        assert (listed["taskId"], listed["status"]) == (task_id, "working")
        assert "nextCursor" not in answers["list"]
        assert answers["get"]["status"] == "working"
        assert answers["cancel"]["status"] == "cancelled"
        assert answers["cancel"]["statusMessage"] == "The task was cancelled by request."
        assert answers["cancelAgain"]["error"]["code"] == -32602
        assert "terminal status 'cancelled'" in answers["cancelAgain"]["error"]["message"]
        assert answers["result"]["error"]["code"] == -32603
        assert answers["unknown"]["error"]["code"] == -32602
        assert answers["badCursor"]["error"]["code"] == -32602
        assert hung.is_set() and cancelled.is_set()  # the sampling work was stopped
        transport = session.transport
        assert isinstance(transport, RecordingTransport)
        answered = check_wire(transport)
        validate_definition(answered["tasks/list"][0]["result"], REVISION, "ListTasksResult")
        for message in answered["tasks/cancel"]:
            if "result" in message:
                validate_definition(message["result"], REVISION, "CancelTaskResult")
        statuses = [
            m["params"]["status"]
            for m in transport.sent
            if m.get("method") == "notifications/tasks/status"
        ]
        assert statuses == ["cancelled"]


@pytest.mark.timeout(60)
async def test_finished_tasks_kept_are_bounded(everything_cmd: Callable[[], Command]) -> None:
    handlers = ClientHandlers(sampling=sample, ask_tasks=AskTaskLimits(max_retained=1))
    command, args = everything_cmd()
    async with (
        open_stdio_transport(command, args, name="ev") as stdio_transport,
        open_session(stdio_transport, name="ev", handlers=handlers) as session,
    ):
        await wait_for_tool(session, SAMPLING_TOOL)
        store = session.ask_tasks
        assert store is not None
        with trio.fail_after(30):
            for prompt in ("one", "two", "three"):
                result = await session.call_tool(SAMPLING_TOOL, {"prompt": prompt})
                assert "[COMPLETED]" in text_of(result)
                assert len(store) == 1  # the newest finished task only
