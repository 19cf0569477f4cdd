"""MCP 2026-07-28 against real peers: era negotiation, the modern request shape, MRTR.

Peers: the official SDK's ``MCPServer`` (``tests/peers/sdk_server.py``, both eras), the
same server made modern-only (``tests/peers/modern_only.py``), the reference Node server
(legacy only) and ``crashy_server.py`` (legacy, with ways to misbehave on an unknown
first request). Everything agenthost sends on a modern session is validated against the
2026-07-28 ``schema.json``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from agenthost.config.model import ServerConfig, Timeouts
from agenthost.connection import EraCache, connect, open_session
from agenthost.errors import UnsupportedRevision
from agenthost.protocol.revisions import Era
from agenthost.protocol.types import TextResourceContents
from agenthost.session import ClientSession
from agenthost.transports.http import StreamableHTTPTransport, open_streamable_http_transport
from agenthost.transports.stdio import open_stdio_transport
from tests.conftest import PEERS_DIR, free_port
from tests.helpers import ContextRecorder, Recorder, RecordingTransport, comparable_audit, text_of
from tests.peers.http_launch import serve

Command = tuple[str, list[str]]
MODERN_ONLY = PEERS_DIR / "modern_only.py"


def stdio_config(name: str, cmd: Command, **kwargs: Any) -> ServerConfig:
    return ServerConfig(name=name, transport="stdio", command=cmd[0], args=tuple(cmd[1]), **kwargs)


def received(peer_log: Path) -> list[str]:
    """Methods of the requests crashy_server received (its peer log: one JSON per line)."""
    methods = []
    for line in peer_log.read_text().splitlines():
        entry = json.loads(line)
        if isinstance(entry, dict) and "id" in entry and "method" in entry:
            methods.append(entry["method"])
    return methods


@asynccontextmanager
async def recorded_stdio(
    cmd: Command, recorder: Recorder, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[ClientSession, RecordingTransport]]:
    command, args = cmd
    async with open_stdio_transport(command, args, name="sdk", env=env) as stdio:
        recording = RecordingTransport(stdio)
        async with open_session(
            recording, name="sdk", handlers=recorder.handlers(), era="auto"
        ) as session:
            yield session, recording


async def exercise(session: ClientSession, recorder: ContextRecorder) -> None:
    """Tools, prompts, resources, and the three server asks through MRTR."""
    tools = {tool.name: tool for tool in await session.list_tools()}
    assert {"echo", "add", "fail", "sample", "roots", "elicit_form"} <= set(tools)
    assert text_of(await session.call_tool("echo", {"message": "hi"})) == "hi"
    added = await session.call_tool("add", {"a": 2, "b": 3})
    assert added.structured_content == {"sum": 5}
    failed = await session.call_tool("fail", {"message": "nope"})
    assert failed.is_error

    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    await session.call_tool("slow", {"seconds": 0.2, "steps": 3}, progress=on_progress)
    assert seen == [1, 2, 3]

    prompts = {p.name for p in await session.list_prompts()}
    assert {"greet", "simple"} <= prompts
    greeting = await session.get_prompt("greet", {"name": "Ada", "style": "pirate"})
    assert "Ada" in json.dumps([str(m.content) for m in greeting.messages])
    readme = await session.read_resource("text://readme")
    assert isinstance(readme.contents[0], TextResourceContents)

    # MRTR: each ask comes back as input_required and is answered by the same handlers
    sampled = await session.call_tool("sample", {"prompt": "Capital of France?"})
    assert text_of(sampled) == "sampled: Capital of France?"
    assert recorder.sampling[-1].max_tokens == 100
    roots = await session.call_tool("roots", {})
    assert "file:///srv/work%20space" in text_of(roots)
    form = await session.call_tool("elicit_form", {})
    assert json.loads(text_of(form))["content"] == {"name": "Ada", "age": 36, "subscribe": False}
    assert [(c.origin, c.round) for c in recorder.contexts] == [
        ("tools/call", 1),
        ("tools/call", 1),
        ("tools/call", 1),
    ]
    assert recorder.contexts[0].origin_name == "sample"


async def test_sdk_server_over_stdio_speaks_2026_07_28(
    sdk_server_cmd: Callable[..., Command],
) -> None:
    recorder = ContextRecorder()
    async with recorded_stdio(sdk_server_cmd(), recorder) as (session, recording):
        assert session.era is Era.MODERN
        assert session.revision == "2026-07-28"
        assert session.learned == "probe: server/discover answered"
        assert session.initialize_result is None
        assert session.server_info is not None
        assert session.server_info["name"] == "agenthost-sdk-peer"
        assert session.server_capabilities is not None
        assert session.server_capabilities.tools is not None
        await exercise(session, recorder)
        sent = recording.methods_sent()
        assert sent[0] == "server/discover"
        assert "initialize" not in sent
        assert "notifications/initialized" not in sent
        # every round of an MRTR call is a new request id
        calls = [m for m in recording.sent if m.get("method") == "tools/call"]
        assert len({m["id"] for m in calls}) == len(calls)
        retries = [m for m in calls if "inputResponses" in m["params"]]
        assert len(retries) == 3
        assert all("requestState" in m["params"] for m in retries)
        assert recording.assert_valid("2026-07-28") > 15


async def test_sdk_server_over_streamable_http_speaks_2026_07_28(
    sdk_server_cmd: Callable[..., Command],
) -> None:
    port = free_port()
    recorder = ContextRecorder()
    command, args = sdk_server_cmd("streamable-http", port)
    async with serve([command, *args], port):
        url = f"http://127.0.0.1:{port}/mcp"
        async with open_streamable_http_transport(url, name="sdk") as http:
            recording = RecordingTransport(http)
            async with open_session(
                recording,
                name="sdk",
                handlers=recorder.handlers(),
                era="auto",
                fallback_in_place=False,
            ) as session:
                assert session.era is Era.MODERN
                await exercise(session, recorder)
                assert http.session_id is None  # 2026-07-28 has no sessions
                by_method = {
                    m["method"]: o.headers
                    for m, o in zip(recording.sent, recording.options, strict=True)
                    if "method" in m
                }
                assert by_method["tools/call"]["Mcp-Method"] == "tools/call"
                assert by_method["tools/call"]["MCP-Protocol-Version"] == "2026-07-28"
                assert by_method["resources/read"]["Mcp-Name"] == "text://readme"
                assert by_method["prompts/get"]["Mcp-Name"] == "greet"
                assert "Mcp-Name" not in by_method["tools/list"]
                assert recording.assert_valid("2026-07-28") > 15

        # and the same server through connect(), as a user configures it
        config = ServerConfig(name="sdk", transport="http", url=url)
        async with connect(config, era_cache=EraCache(None)) as session:
            assert session.era is Era.MODERN
            assert isinstance(session.transport, StreamableHTTPTransport)
            assert text_of(await session.call_tool("echo", {"message": "x"})) == "x"


def modern_only_cmd(mode: str = "stdio", port: int | None = None) -> Command:
    args = [str(MODERN_ONLY), mode]
    if port is not None:
        args += ["--port", str(port)]
    return sys.executable, args


async def test_modern_only_server_over_stdio(peer_log: Path) -> None:
    env = {"AGENTHOST_PEER_LOG": str(peer_log)}
    config = stdio_config("modern", modern_only_cmd(), env=env)
    async with connect(config, era_cache=EraCache(None)) as session:
        assert session.era is Era.MODERN
        assert text_of(await session.call_tool("echo", {"message": "hi"})) == "hi"
    assert "refused" not in peer_log.read_text()
    # a legacy-only client gets the server's own error, naming what it supports
    legacy = stdio_config("modern", modern_only_cmd(), env=env, protocol="legacy")
    with pytest.raises(UnsupportedRevision) as info:
        async with connect(legacy, era_cache=EraCache(None)):
            pass
    assert "2026-07-28" in str(info.value)


async def test_modern_only_server_over_http_is_not_mistaken_for_sse(peer_log: Path) -> None:
    port = free_port()
    env = {"AGENTHOST_PEER_LOG": str(peer_log)}
    command, args = modern_only_cmd("streamable-http", port)
    async with serve([command, *args], port, env=env):
        config = ServerConfig(name="modern", transport="http", url=f"http://127.0.0.1:{port}/mcp")
        async with connect(config, era_cache=EraCache(None)) as session:
            assert session.era is Era.MODERN
            assert isinstance(session.transport, StreamableHTTPTransport)
            assert text_of(await session.call_tool("echo", {"message": "hi"})) == "hi"
        assert "refused" not in peer_log.read_text()
        # legacy only: the server's 400 body (-32022, its versions) is surfaced as is
        legacy = attrs_evolve(config, protocol="legacy")
        with pytest.raises(UnsupportedRevision) as info:
            async with connect(legacy, era_cache=EraCache(None)):
                pass
        assert "2026-07-28" in str(info.value)


def attrs_evolve(config: ServerConfig, **changes: Any) -> ServerConfig:
    import attrs

    return attrs.evolve(config, **changes)


async def test_legacy_server_falls_back_and_the_era_is_cached(
    crashy_cmd: Callable[..., Command], peer_log: Path, tmp_path: Path
) -> None:
    env = {"AGENTHOST_PEER_LOG": str(peer_log)}
    config = stdio_config("crashy", crashy_cmd(), env=env)
    cache = EraCache(tmp_path / "eras.json")
    async with connect(config, era_cache=cache) as session:
        assert session.era is Era.LEGACY
        assert session.revision == "2025-11-25"
        assert session.learned == "probe: server/discover refused (-32601); initialize"
        assert text_of(await session.call_tool("echo", {"message": "hi"})) == "hi"
    assert received(peer_log) == ["server/discover", "initialize", "tools/call"]
    # the next run (a fresh cache object reading the same file) does not probe again
    peer_log.write_text("")
    async with connect(config, era_cache=EraCache(tmp_path / "eras.json")) as session:
        assert session.era is Era.LEGACY
        assert session.learned == "cached"
    assert received(peer_log) == ["initialize"]


async def test_server_that_exits_on_the_probe_is_restarted_with_initialize(
    crashy_cmd: Callable[..., Command], peer_log: Path
) -> None:
    env = {"AGENTHOST_PEER_LOG": str(peer_log)}
    config = stdio_config("crashy", crashy_cmd("--exit-on-unknown"), env=env)
    async with connect(config, era_cache=EraCache(None)) as session:
        assert session.era is Era.LEGACY
        assert session.learned is not None
        assert "exited" in session.learned
        assert text_of(await session.call_tool("echo", {"message": "hi"})) == "hi"
    assert received(peer_log) == ["server/discover", "initialize", "tools/call"]


async def test_server_silent_on_the_probe_falls_back_after_the_probe_timeout(
    crashy_cmd: Callable[..., Command], peer_log: Path
) -> None:
    env = {"AGENTHOST_PEER_LOG": str(peer_log)}
    config = stdio_config(
        "crashy",
        crashy_cmd("--silent-on-unknown"),
        env=env,
        timeouts=Timeouts(startup=0.5),
    )
    with trio.fail_after(10):
        async with connect(config, era_cache=EraCache(None)) as session:
            assert session.era is Era.LEGACY
            assert session.learned == "probe: server/discover unanswered; initialize"


async def test_legacy_http_server_falls_back_to_initialize_not_sse(
    everything_http_cmd: Callable[..., Any],
) -> None:
    port = free_port()
    command, args, env = everything_http_cmd("streamableHttp", port)
    async with serve([command, *args], port, env=env):
        config = ServerConfig(name="ev", transport="http", url=f"http://127.0.0.1:{port}/mcp")
        async with connect(config, era_cache=EraCache(None)) as session:
            assert session.era is Era.LEGACY
            assert session.revision == "2025-11-25"
            assert isinstance(session.transport.transport, StreamableHTTPTransport)  # type: ignore[attr-defined]
            assert session.learned is not None
            assert session.learned.startswith("probe: server/discover refused")


async def test_consent_and_audit_are_identical_in_both_eras(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    """The same tools over initialize (server requests) and over 2026-07-28 (MRTR): the
    policy decides the same, the sampling service answers the same, and the audit lines
    match; on the modern path each ask's line also names its request and round."""
    from agenthost_policies import read_audit
    from tests.helpers import FakeAnthropic, host_with, sampling_policy, stdio

    audits: dict[str, list[dict[str, Any]]] = {}
    answers: dict[str, list[str]] = {}
    for protocol in ("legacy", "2026-07-28"):
        run_dir = tmp_path / protocol
        run_dir.mkdir()
        policy = sampling_policy(run_dir, max_tokens=64)
        policy["rules"].append({"kind": "elicitation", "decision": "deny", "server": "*"})
        fake = FakeAnthropic()
        server = stdio("sdk", sdk_server_cmd(), protocol=protocol)
        async with host_with([server], policy, fake=fake) as host:
            assert host.session("sdk").revision == (
                "2025-11-25" if protocol == "legacy" else "2026-07-28"
            )
            sampled = await host.call_tool("sdk__sample", {"prompt": "Capital of France?"})
            roots = await host.call_tool("sdk__roots", {})
            form = await host.call_tool("sdk__elicit_form", {})
            answers[protocol] = [text_of(sampled), text_of(roots), text_of(form)]
        assert fake.bodies[0]["max_tokens"] == 64
        audits[protocol] = read_audit(run_dir / "audit.jsonl")
    assert answers["legacy"] == answers["2026-07-28"]
    assert [comparable_audit(r) for r in audits["legacy"]] == [
        comparable_audit(r) for r in audits["2026-07-28"]
    ]
    assert all("via" not in r for r in audits["legacy"])
    asks = [r for r in audits["2026-07-28"] if r["event"] == "decision" and r["kind"] != "tool"]
    assert {r["kind"] for r in asks} == {"sampling", "roots", "elicitation"}
    for record in asks:
        assert record["via"]["request"] == "tools/call"
        assert record["via"]["round"] == 1
        assert record["via"]["name"] in ("sample", "roots", "elicit_form")


async def test_a_stale_cached_era_is_dropped_and_probed_again(
    tmp_path: Path, peer_log: Path
) -> None:
    """The cache says legacy (the server was upgraded since): initialize is refused with
    -32022, the entry is dropped, the probe finds 2026-07-28, and the cache learns it."""
    config = stdio_config("modern", modern_only_cmd(), env={"AGENTHOST_PEER_LOG": str(peer_log)})
    cache = EraCache(tmp_path / "eras.json")
    cache.put(config, "2025-11-25")
    async with connect(config, era_cache=cache) as session:
        assert session.era is Era.MODERN
        assert session.learned == "probe: server/discover answered"
    assert "refused initialize" in peer_log.read_text()
    assert EraCache(tmp_path / "eras.json").get(config) == (Era.MODERN, "2026-07-28")


async def test_a_cached_modern_era_is_dropped_when_the_server_exits_on_discover(
    tmp_path: Path, crashy_cmd: Callable[..., Command], peer_log: Path
) -> None:
    """Issue 28 M6: the cache says 2026-07-28 but the server (downgraded, or another
    server under the same name) exits on ``server/discover``: the entry is dropped and
    the server probed again, instead of failing on every run until eras.json is deleted."""
    env = {"AGENTHOST_PEER_LOG": str(peer_log)}
    config = stdio_config("crashy", crashy_cmd("--exit-on-unknown"), env=env)
    cache = EraCache(tmp_path / "eras.json")
    cache.put(config, "2026-07-28")
    async with connect(config, era_cache=cache) as session:
        assert session.era is Era.LEGACY
        assert text_of(await session.call_tool("echo", {"message": "hi"})) == "hi"
    assert EraCache(tmp_path / "eras.json").get(config) == (Era.LEGACY, "2025-11-25")


async def test_change_notifications_come_through_subscriptions_listen(
    sdk_server_cmd: Callable[..., Command],
) -> None:
    """2026-07-28 has no unsolicited notifications: the session keeps a
    subscriptions/listen open for what its handlers listen to, and re-opens it with the
    new filter when a resource is subscribed."""
    recorder = ContextRecorder()
    async with recorded_stdio(sdk_server_cmd(), recorder) as (session, recording):
        await session.list_tools()
        with trio.fail_after(10):
            while "subscriptions/listen" not in recording.methods_sent():
                await trio.sleep(0.02)
        await session.call_tool("toggle_extra_tool", {})
        with trio.fail_after(10):
            while recorder.tools_changed == 0:
                await trio.sleep(0.02)
        await session.subscribe_resource("text://readme")
        with trio.fail_after(10):
            while recording.methods_sent().count("subscriptions/listen") < 2:
                await trio.sleep(0.02)
        await session.call_tool("touch_readme", {})
        with trio.fail_after(10):
            while not recorder.updated:
                await trio.sleep(0.02)
        assert recorder.updated == ["text://readme"]
        listens = [m for m in recording.sent if m.get("method") == "subscriptions/listen"]
        assert listens[0]["params"]["notifications"] == {"toolsListChanged": True}
        assert listens[1]["params"]["notifications"]["resourceSubscriptions"] == ["text://readme"]
        assert "resources/subscribe" not in recording.methods_sent()
        recording.assert_valid("2026-07-28")


def test_the_era_cache_tells_servers_apart_by_env() -> None:
    """Issue 28 (Low): the same command with another env may be another server."""
    legacy = stdio_config("a", modern_only_cmd(), env={"MODE": "legacy"})
    modern = stdio_config("a", modern_only_cmd(), env={"MODE": "modern"})
    assert EraCache.key(legacy) != EraCache.key(modern)
    assert EraCache.key(legacy) == EraCache.key(
        stdio_config("b", modern_only_cmd(), env={"MODE": "legacy"})
    )


@pytest.mark.parametrize("entries", [8_000, 200_000])
def test_a_huge_era_cache_file_is_bounded(tmp_path: Path, entries: int) -> None:
    """Issue 28 (Low): a 1M-entry eras.json hung ``servers`` (one pop per entry over the
    bound, each a scan). The file is read up to 1 MiB and trimmed to the bound in one go."""
    path = tmp_path / "eras.json"
    path.write_bytes(
        orjson.dumps({f"{i:032x}": {"revision": "2025-11-25", "at": i} for i in range(entries)})
    )
    cache = EraCache(path)
    config = stdio_config("x", modern_only_cmd())
    assert cache.get(config) is None
    cache.put(config, "2026-07-28")
    kept = orjson.loads(path.read_bytes())
    assert len(kept) <= 256
    assert EraCache(path).get(config) == (Era.MODERN, "2026-07-28")
