"""The host against real servers: concurrency, supervision, catalog, roots, cleanup."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.config.model import HostConfig, RestartPolicy, ServerConfig, Timeouts, Workspace
from agenthost.errors import NotFound, ServerUnavailable, TransportClosed
from agenthost.host.host import open_host
from agenthost.host.supervisor import ServerState
from agenthost.protocol.types import TextContent
from tests.helpers import ALLOW_ALL, alive

Command = tuple[str, list[str]]

FAST_RESTART = RestartPolicy(initial_backoff=0.01, max_backoff=0.05, max_restarts=2, window=30)


def stdio(name: str, cmd: Command, **kwargs: Any) -> ServerConfig:
    return ServerConfig(name=name, transport="stdio", command=cmd[0], args=tuple(cmd[1]), **kwargs)


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


async def test_twenty_servers_start_concurrently(crashy_cmd: Callable[..., Command]) -> None:
    servers = [stdio(f"s{i}", crashy_cmd("--start-delay", "0.3")) for i in range(20)]
    async with open_host(HostConfig(policy=ALLOW_ALL, servers=servers)) as host:
        statuses = host.status()
        assert [s.state for s in statuses] == [ServerState.READY] * 20
        sups = [host.supervisor(f"s{i}") for i in range(20)]
        last_start = max(s.started_at for s in sups if s.started_at is not None)
        first_ready = min(s.ready_at for s in sups if s.ready_at is not None)
        # every server had started before any became ready: the starts overlapped
        assert last_start < first_ready
        tools = await host.list_tools()
        assert len(tools) == 60
        assert {t.name for t in tools} >= {"s0__echo", "s19__crash"}
        result = await host.call_tool("s7__echo", {"message": "routed"})
        assert text_of(result) == "routed"
        pids = [s.pid for s in statuses]
    assert all(pid is not None and not alive(pid) for pid in pids)


async def test_crash_mid_call_restarts(crashy_cmd: Callable[..., Command]) -> None:
    config = HostConfig(
        policy=ALLOW_ALL, servers=[stdio("flaky", crashy_cmd(), restart=FAST_RESTART)]
    )
    async with open_host(config) as host:
        assert text_of(await host.call_tool("flaky__echo", {"message": "1"})) == "1"
        first_pid = host.status()[0].pid
        with trio.fail_after(1), pytest.raises(TransportClosed) as info:
            await host.call_tool("flaky__crash", {})
        assert "flaky" in str(info.value)
        await host.wait_ready("flaky", timeout=5)
        assert text_of(await host.call_tool("flaky__echo", {"message": "2"})) == "2"
        status = host.status()[0]
        assert status.restarts == 1
        assert status.pid != first_pid
        assert "exited with code 3" in (status.last_error or "")


async def test_exit_after_n_calls_is_restarted(crashy_cmd: Callable[..., Command]) -> None:
    config = HostConfig(
        policy=ALLOW_ALL,
        servers=[stdio("tired", crashy_cmd("--exit-after", "2"), restart=FAST_RESTART)],
    )
    async with open_host(config) as host:
        for i in range(2):
            assert text_of(await host.call_tool("tired__echo", {"message": str(i)})) == str(i)
        with trio.fail_after(5):
            while host.status()[0].restarts < 1:
                await trio.sleep(0.01)
        await host.wait_ready("tired", timeout=5)
        assert text_of(await host.call_tool("tired__echo", {"message": "again"})) == "again"


async def test_crash_loop_ends_failed_while_others_serve(
    crashy_cmd: Callable[..., Command],
) -> None:
    config = HostConfig(
        policy=ALLOW_ALL,
        servers=[
            stdio("doomed", crashy_cmd("--crash-on-start"), restart=FAST_RESTART),
            stdio("fine", crashy_cmd()),
        ],
    )
    async with open_host(config) as host:
        with trio.fail_after(5):
            await host.supervisor("doomed").wait_state(ServerState.FAILED)
        doomed = next(s for s in host.status() if s.name == "doomed")
        assert doomed.state is ServerState.FAILED
        assert doomed.restarts == 2
        assert "crashed 3 times" in (doomed.last_error or "")
        assert "exited with code 1" in (doomed.last_error or "")
        with pytest.raises(ServerUnavailable, match="doomed: server is failed"):
            host.session("doomed")
        # a server gone for good offers nothing to the model
        assert not [t for t in await host.list_tools() if t.server == "doomed"]
        assert text_of(await host.call_tool("fine__echo", {"message": "ok"})) == "ok"


async def test_required_server_failure_fails_open(crashy_cmd: Callable[..., Command]) -> None:
    config = HostConfig(
        policy=ALLOW_ALL,
        servers=[
            stdio(
                "vital",
                crashy_cmd("--crash-on-start"),
                required=True,
                restart=RestartPolicy(enabled=False),
            ),
            stdio("other", crashy_cmd()),
        ],
    )
    with pytest.raises(ServerUnavailable, match="vital: required server did not start"):
        async with open_host(config):
            pytest.fail("must not be reached")


async def test_unrequired_failure_does_not_stop_others(
    crashy_cmd: Callable[..., Command],
) -> None:
    config = HostConfig(
        policy=ALLOW_ALL,
        servers=[
            stdio(
                "missing",
                ("definitely-not-a-command-xyz", []),
                restart=RestartPolicy(enabled=False),
            ),
            stdio("ok", crashy_cmd()),
        ],
    )
    async with open_host(config) as host:
        states = {s.name: s for s in host.status()}
        assert states["missing"].state is ServerState.FAILED
        assert "command not found" in (states["missing"].last_error or "")
        assert states["ok"].state is ServerState.READY


@pytest.mark.parametrize("how", ["normal", "exception", "cancel"])
async def test_no_process_left_behind(how: str, crashy_cmd: Callable[..., Command]) -> None:
    config = HostConfig(policy=ALLOW_ALL, servers=[stdio(f"p{i}", crashy_cmd()) for i in range(3)])
    pids: list[int] = []
    outside = trio.CancelScope()

    async def body() -> None:
        async with open_host(config) as host:
            pids.extend(s.pid for s in host.status() if s.pid is not None)
            if how == "exception":
                raise KeyError("boom")
            if how == "cancel":
                outside.cancel()  # from outside the host, once it is up (not a timer)
                await trio.sleep_forever()

    if how == "normal":
        await body()
    elif how == "exception":
        with pytest.raises(KeyError):
            await body()
    else:
        with outside:
            await body()
        assert outside.cancelled_caught
    assert len(pids) == 3
    assert not any(alive(pid) for pid in pids)


async def test_tool_filters_and_unknown_tool(crashy_cmd: Callable[..., Command]) -> None:
    config = HostConfig(
        policy=ALLOW_ALL,
        servers=[
            stdio("a", crashy_cmd(), include_tools=("e*", "hang")),
            stdio("b", crashy_cmd(), exclude_tools=("crash",)),
        ],
    )
    async with open_host(config) as host:
        names = sorted(t.name for t in await host.list_tools())
        assert names == ["a__echo", "a__hang", "b__echo", "b__hang"]
        with pytest.raises(NotFound, match="a__crash"):
            await host.call_tool("a__crash", {})


async def test_list_changed_refreshes_the_catalog(sdk_server_cmd: Callable[..., Command]) -> None:
    async with open_host(
        HostConfig(policy=ALLOW_ALL, servers=[stdio("sdk", sdk_server_cmd())])
    ) as host:
        names = {t.name for t in await host.list_tools()}
        assert "sdk__extra" not in names
        await host.call_tool("sdk__toggle_extra_tool", {})
        with trio.fail_after(5):
            await host.catalog.wait_for(lambda catalog: catalog.tool("sdk__extra") is not None)
        prompts = await host.list_prompts()
        assert ("sdk", "greet") in [(s, p.name) for s, p in prompts]
        readme = await host.read_resource("text://readme")
        assert readme.contents
        greeting = await host.read_resource("greeting://bob")
        assert "bob" in greeting.contents[0].text  # type: ignore[union-attr]


async def test_filesystem_server_follows_workspaces(
    tmp_path: Path, filesystem_cmd: Callable[..., Command]
) -> None:
    inside = tmp_path / "inside ws"
    later = tmp_path / "later"
    outside = tmp_path / "outside"
    for d in (inside, later, outside):
        d.mkdir()
        (d / "note.txt").write_text(f"in {d.name}")
    link = inside / "escape"
    link.symlink_to(outside)
    config = HostConfig(
        policy=ALLOW_ALL,
        servers=[stdio("fs", filesystem_cmd())],
        workspaces=[Workspace.from_path(inside, name="inside")],
    )

    async def read(host: Any, path: Path) -> tuple[bool, str]:
        result = await host.call_tool("fs__read_text_file", {"path": str(path)})
        return bool(result.is_error), text_of(result)

    async def wait_readable(host: Any, path: Path) -> None:
        with trio.fail_after(5):
            while (await read(host, path))[0]:
                await trio.sleep(0.02)

    async with open_host(config) as host:
        assert [r.uri for r in host.roots_for("fs")] == [inside.resolve().as_uri()]
        assert "%20" in host.roots_for("fs")[0].uri
        await wait_readable(host, inside / "note.txt")
        assert await read(host, inside / "note.txt") == (False, "in inside ws")
        denied, message = await read(host, later / "note.txt")
        assert denied
        assert "Access denied" in message
        escaped, message = await read(host, link / "note.txt")
        assert escaped
        assert "Access denied" in message

        await host.add_workspace(later, name="later")
        await wait_readable(host, later / "note.txt")
        assert await read(host, later / "note.txt") == (False, "in later")

        await host.remove_workspace("inside")
        with trio.fail_after(5):
            while not (await read(host, inside / "note.txt"))[0]:
                await trio.sleep(0.02)
        assert (await read(host, later / "note.txt"))[0] is False


async def test_roots_changes_reach_exactly_the_affected_servers(
    tmp_path: Path, crashy_cmd: Callable[..., Command]
) -> None:
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.mkdir()
    b.mkdir()
    logs = {name: tmp_path / f"{name}.jsonl" for name in ("all", "only_a")}
    config = HostConfig(
        policy=ALLOW_ALL,
        servers=[
            stdio("all", crashy_cmd(), env={"AGENTHOST_PEER_LOG": str(logs["all"])}),
            stdio(
                "only_a",
                crashy_cmd(),
                env={"AGENTHOST_PEER_LOG": str(logs["only_a"])},
                workspaces=("a",),
            ),
        ],
        workspaces=[Workspace.from_path(a, name="a")],
        timeouts=Timeouts(),
    )
    async with open_host(config) as host:
        await host.add_workspace(b, name="b")
        assert [r.name for r in host.roots_for("all")] == ["a", "b"]
        assert [r.name for r in host.roots_for("only_a")] == ["a"]
        await host.session("all").ping()
        await host.session("only_a").ping()
    changed = "notifications/roots/list_changed"
    assert changed in logs["all"].read_text()
    assert changed not in logs["only_a"].read_text()
