"""``agenthost serve``: agenthost as an MCP server, driven by real downstream clients.

The official Python SDK client (tests/peers/sdk_client.py, on asyncio in its own process)
starts ``agenthost serve`` as a subprocess over stdio, as Claude Code or VS Code would;
the upstreams are real servers (the SDK peer, server-everything). In-process tests put
agenthost's own client session in front of the gateway over a memory transport pair to
cover every legacy revision, namespacing and pagination quickly.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost._version import __version__
from agenthost.config.model import HostConfig, ServerConfig
from agenthost.connection import open_session
from agenthost.protocol.revisions import LEGACY_REVISIONS
from agenthost.serve import Gateway, open_gateway
from agenthost.session import ClientSession
from agenthost.transports.memory import memory_transport_pair
from agenthost_policies import read_audit
from tests.forkserver import peer_python
from tests.helpers import AGENTHOST, REPO, check_ts_progress, stdio

Command = tuple[str, list[str]]

SDK_CLIENT = REPO / "tests" / "peers" / "sdk_client.py"


def _toml(servers: dict[str, Command], policy: str) -> str:
    lines = []
    for name, (command, args) in servers.items():
        lines += [
            f"[servers.{name}]",
            f"command = {json.dumps(command)}",
            f"args = {json.dumps(args)}",
            "",
        ]
    return "\n".join(lines) + "\n" + policy


def _allow_all(tmp_path: Path, servers: dict[str, Command]) -> Path:
    """An agenthost.toml with ``servers`` and a headless policy that allows everything."""
    config = tmp_path / "agenthost.toml"
    config.write_text(
        _toml(servers, '[policy]\nmode = "headless"\npreset = "unsafe-allow-everything"\n')
    )
    return config


def _drive(
    config: Path, scenario: str, *, mode: str = "legacy", **env: str
) -> tuple[dict[str, Any], str]:
    """Run the SDK client scenario against ``agenthost serve``; (what it saw, serve's stderr)."""
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environ.update(env)
    serve = [*AGENTHOST, "--config", str(config), "serve"]
    proc = subprocess.run(
        [peer_python(), str(SDK_CLIENT), scenario, mode, "--", *serve],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), proc.stderr


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_sdk_client_tours_one_upstream_transparently(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command], mode: str
) -> None:
    """Legacy: the client initializes (2025-11-25). Auto: it probes server/discover, gets
    our answer and speaks 2026-07-28 per request, to an upstream that speaks it too."""
    config = _allow_all(tmp_path, {"sdk": sdk_server_cmd()})
    seen, stderr = _drive(config, "tour", mode=mode)
    assert seen["protocol_version"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert seen["server_info"]["name"] == "agenthost"
    # One upstream: its own names, no prefix.
    assert {"echo", "fail", "slow", "toggle_extra_tool"} <= set(seen["tools"])
    assert seen["echo"]["content"] == [{"type": "text", "text": "hello"}]
    # The upstream's 2026-07-28 serverInfo stays behind; a modern client gets ours.
    info = (seen["echo"].get("_meta") or {}).get("io.modelcontextprotocol/serverInfo")
    assert info == (None if mode == "legacy" else {"name": "agenthost", "version": __version__})
    assert seen["fail"]["isError"] is True
    assert "boom" in seen["fail"]["content"][0]["text"]
    assert seen["progress"] == [1.0, 2.0, 3.0]
    assert seen["notifications"].count("notifications/progress") == 3
    assert seen["prompts"] == ["greet", "simple"]
    assert seen["greet"]["messages"][0]["content"]["text"] == "Hello, Ada."
    assert "text://readme" in seen["resources"]
    assert seen["templates"] == ["greeting://{name}"]
    assert seen["readme"]["contents"][0]["text"].startswith("agenthost sdk peer readme")
    assert seen["completion"] == ["plain", "formal", "pirate"]
    # The upstream added a tool and said so; the client heard it (a 2026-07-28 one on its
    # subscriptions/listen stream) and sees the tool.
    assert "notifications/tools/list_changed" in seen["notifications"]
    if mode != "legacy":
        assert "listen: ToolsListChanged" in seen["notifications"]
    assert "extra" in seen["tools_after"] and "extra" not in seen["tools"]
    assert "sdk: ready" in stderr


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_era_bridging_to_a_legacy_upstream(
    tmp_path: Path, everything_cmd: Callable[..., Command], mode: str
) -> None:
    """server-everything speaks only the initialize era; a 2026-07-28 client reaches it
    through the gateway as a legacy one does."""
    config = _allow_all(tmp_path, {"ev": everything_cmd()})
    seen, stderr = _drive(config, "echo", mode=mode)
    assert "ev: ready (legacy" in stderr
    assert seen["protocol_version"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert "echo" in seen["tools"]
    assert seen["echo"]["content"][0]["text"] == "Echo: bridged"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_consent_at_the_boundary(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command], mode: str
) -> None:
    """ask -> a form in the client (answered "always": asked once); deny -> a tool error
    with the reason; an upstream's elicitation is forwarded; all audited as in the CLI.
    A 2026-07-28 client gets the forms as InputRequiredResult rounds (MRTR)."""
    audit = tmp_path / "audit.jsonl"
    config = tmp_path / "agenthost.toml"
    config.write_text(
        _toml(
            {"sdk": sdk_server_cmd()},
            f"[policy]\naudit = {json.dumps(str(audit))}\n"
            'rules = [\n  {kind = "tool", decision = "ask", server = "*", name = "echo"},\n'
            '  {kind = "tool", decision = "deny", server = "*", name = "fail"},\n'
            '  {kind = "tool", decision = "allow", server = "*", name = "elicit_form"},\n]\n',
        )
    )
    seen, _ = _drive(config, "consent", mode=mode, ANSWER="always")
    assert seen["echo"]["content"] == [{"type": "text", "text": "hello"}]
    assert seen["echo_again"]["content"] == [{"type": "text", "text": "again"}]
    consent_forms = [f for f in seen["forms"] if "decision" in f["schema"].get("properties", {})]
    assert len(consent_forms) == 1  # "always" is remembered
    assert "Tool:        echo" in consent_forms[0]["message"]
    assert '"message": "hello"' in consent_forms[0]["message"]  # the full arguments
    assert seen["fail"]["isError"] is True
    assert "denied by agenthost's policy" in seen["fail"]["content"][0]["text"]
    assert "policy.rules[1]" in seen["fail"]["content"][0]["text"]
    # The upstream's own form reached the client and its answer came back.
    assert "Ada" in seen["elicit"]["content"][0]["text"]
    records = read_audit(audit)
    decisions = [
        (r["kind"], r["name"], r["decision"], r["by"]) for r in records if r["event"] == "decision"
    ]
    assert ("tool", "echo", "allow", "user") in decisions
    assert ("tool", "fail", "deny", "rule") in decisions
    assert any(kind == "elicitation" for kind, *_ in decisions)


def test_no_elicitation_means_headless(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    """A client that cannot show a form leaves nobody to ask: the "ask" is a denial."""
    config = tmp_path / "agenthost.toml"
    audit = tmp_path / "audit.jsonl"
    config.write_text(
        _toml(
            {"sdk": sdk_server_cmd()},
            f"[policy]\naudit = {json.dumps(str(audit))}\n"
            'rules = [{kind = "tool", decision = "ask", server = "*", name = "echo"}]\n',
        )
    )
    seen, _ = _drive(config, "consent", ANSWER="none")
    assert seen["echo"]["isError"] is True
    assert "headless" in seen["echo"]["content"][0]["text"]
    assert seen["forms"] == []
    by = {r["by"] for r in read_audit(audit) if r["event"] == "decision" and r["name"] == "echo"}
    assert by == {"headless"}


def test_upstream_sampling_is_forwarded_to_the_client(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    """The upstream speaks 2026-07-28 (its sampling comes as an MRTR ask); the client is
    legacy (it gets a sampling/createMessage request): bridged, through the policy, and
    the audit names where the answer came from and the model that gave it."""
    audit = tmp_path / "audit.jsonl"
    config = tmp_path / "agenthost.toml"
    config.write_text(
        _toml(
            {"sdk": sdk_server_cmd()},
            f'[gateway]\nsampling = "auto"\n\n[policy]\nmode = "headless"\n'
            f"audit = {json.dumps(str(audit))}\n"
            'rules = [\n  {kind = "tool", decision = "allow", server = "*", name = "*"},\n'
            '  {kind = "sampling", decision = "allow", server = "*"},\n]\n',
        )
    )
    seen, stderr = _drive(config, "sample")
    assert "sdk: ready (modern, 2026-07-28)" in stderr
    assert seen["sample"]["content"][0]["text"] == "Paris, said the client."
    [asked] = seen["samplings"]
    assert asked["messages"][0]["content"]["text"] == "Capital of France?"
    sampling = [r for r in read_audit(audit) if r["kind"] == "sampling"]
    assert [r["event"] for r in sampling] == ["decision", "outcome"]
    assert sampling[0]["decision"] == "allow"
    assert "forwarded to the client" in json.dumps(sampling[0])
    assert sampling[1]["result"]["model"] == "client-model"


def test_upstream_roots_are_the_clients_within_the_workspaces(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    workspace = tmp_path / "ws"
    inner = workspace / "sub"
    inner.mkdir(parents=True)
    config = tmp_path / "agenthost.toml"
    config.write_text(
        _toml(
            {"sdk": sdk_server_cmd()},
            f'[[workspaces]]\npath = {json.dumps(str(workspace))}\nname = "ws"\n\n'
            '[policy]\nmode = "headless"\npreset = "unsafe-allow-everything"\n',
        )
    )
    outside = (tmp_path / "elsewhere").as_uri()
    seen, _ = _drive(config, "roots", ROOTS=json.dumps([inner.as_uri(), outside]))
    listed = json.loads(seen["roots"]["content"][0]["text"])
    assert [r["uri"] for r in listed] == [inner.as_uri()]  # not the workspace, not elsewhere


def test_ts_sdk_client_progress_completion_and_cancellation(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command], node_bin: Callable[[], str]
) -> None:
    """The TypeScript SDK client: a cancelled call is cancelled upstream too, and the
    session goes on."""
    peer_log = tmp_path / "peer.log"
    command, args = sdk_server_cmd()
    config = tmp_path / "agenthost.toml"
    config.write_text(
        f"[servers.sdk]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
        f"env = {{ AGENTHOST_PEER_LOG = {json.dumps(str(peer_log))} }}\n\n"
        '[policy]\nmode = "headless"\npreset = "unsafe-allow-everything"\n'
    )
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.run(
        [
            node_bin(),
            str(REPO / "tests" / "peers" / "ts_client.mjs"),
            "--",
            *AGENTHOST,
            "--config",
            str(config),
            "serve",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    assert seen["serverVersion"]["name"] == "agenthost"
    assert "echo" in seen["tools"] and seen["prompts"] == ["greet", "simple"]
    assert seen["echo"]["content"] == [{"type": "text", "text": "from ts"}]
    check_ts_progress(seen, [1, 2, 3])
    assert seen["completion"] == ["plain", "pirate"]
    assert seen["cancelled"] is True
    assert seen["afterCancel"]["content"] == [{"type": "text", "text": "still here"}]
    # The upstream saw the cancellation (it logs it from its own cancelled task).
    assert "cancelled slow" in peer_log.read_text().splitlines()


# ---------------------------------------------------------------------- in process


@asynccontextmanager
async def _client(gateway: Gateway, revision: str) -> AsyncIterator[ClientSession]:
    ours, theirs = memory_transport_pair(name="gateway")
    async with trio.open_nursery() as nursery:
        session = gateway.session(theirs)
        nursery.start_soon(gateway.serve, session)
        async with open_session(ours, name="gateway", protocol_version=revision) as client:
            yield client
        nursery.cancel_scope.cancel()


def _config(servers: list[ServerConfig]) -> HostConfig:
    return HostConfig(
        servers=servers, policy={"mode": "headless", "preset": "unsafe-allow-everything"}
    )


async def test_every_legacy_revision_two_upstreams_namespaced(
    sdk_server_cmd: Callable[..., Command], everything_cmd: Callable[..., Command]
) -> None:
    config = _config([stdio("sdk", sdk_server_cmd()), stdio("ev", everything_cmd())])
    with trio.fail_after(60):
        async with open_gateway(config) as gateway:
            for revision in LEGACY_REVISIONS:
                async with _client(gateway, revision) as client:
                    assert client.revision == revision
                    names = {t.name for t in await client.list_tools()}
                    assert {"sdk__echo", "ev__echo"} <= names
                    result = await client.call_tool("ev__echo", {"message": revision})
                    assert revision in result.content[0].text  # type: ignore[union-attr]
                    prompts = {p.name for p in await client.list_prompts()}
                    assert {"sdk__greet", "ev__simple-prompt"} <= prompts
                    got = await client.get_prompt("sdk__greet", {"name": "Bo"})
                    assert got.messages[0].content.text == "Hello, Bo."  # type: ignore[union-attr]


async def test_lists_are_paginated(
    sdk_server_cmd: Callable[..., Command],
    everything_cmd: Callable[..., Command],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("agenthost.serve.names.PAGE_SIZE", 4)
    config = _config([stdio("sdk", sdk_server_cmd()), stdio("ev", everything_cmd())])
    with trio.fail_after(60):
        async with open_gateway(config) as gateway, _client(gateway, "2025-11-25") as client:
            first = await client.list_tools_page()
            assert len(first.tools) == 4 and first.next_cursor is not None
            everything = [t.name for t in await client.list_tools()]  # follows every cursor
            assert everything == [name for name, _ in gateway.view.tools()]
            assert len(everything) > 8
            from agenthost.errors import JSONRPCError

            with pytest.raises(JSONRPCError) as bad:
                await client.list_tools_page("not-ours")
            assert bad.value.code == -32602


def test_gateway_section_is_validated() -> None:
    from agenthost.config import config_from_mapping
    from agenthost.errors import ConfigError

    assert config_from_mapping({"gateway": {"sampling": "client"}}).gateway == {
        "sampling": "client"
    }
    assert config_from_mapping({}).gateway == {"sampling": "auto"}
    with pytest.raises(ConfigError, match=r"gateway\.sampling.*auto, providers, client"):
        config_from_mapping({"gateway": {"sampling": "llm"}})
    with pytest.raises(ConfigError, match=r"gateway\.samplin"):
        config_from_mapping({"gateway": {"samplin": "auto"}})


def test_intersect_roots_keeps_the_narrower_of_each_overlap() -> None:
    from agenthost.protocol.types import Root
    from agenthost.serve.roots import intersect_roots

    ws = [Root(uri="file:///home/u/proj", name="proj"), Root(uri="file:///srv/data", name="d")]
    client = [
        Root(uri="file:///home/u/proj/app", name="app"),  # inside a workspace: kept
        Root(uri="file:///srv", name="srv"),  # holds a workspace: the workspace is kept
        Root(uri="file:///home/u/projects", name="x"),  # a sibling with a shared prefix
        Root(uri="https://example.com/", name="web"),  # not comparable: ignored
    ]
    assert [r.uri for r in intersect_roots(ws, client)] == [
        "file:///home/u/proj/app",
        "file:///srv/data",
    ]
    assert intersect_roots(ws, []) == []


def test_modern_requests_are_checked_on_their_own_fields() -> None:
    from agenthost.errors import JSONRPCError
    from agenthost.serve.modern import check_stamp, modern_stamp, stamp_result

    caps: dict[str, Any] = {"io.modelcontextprotocol/clientCapabilities": {}}
    assert modern_stamp(None) is None
    assert modern_stamp({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}) == "2026-07-28"
    assert check_stamp("2026-07-28", caps) == "2026-07-28"
    with pytest.raises(JSONRPCError) as old:
        check_stamp("2025-11-25", caps)  # a legacy revision is negotiated with initialize
    assert old.value.code == -32022
    assert old.value.data["supported"][0] == "2026-07-28"
    assert old.value.data["requested"] == "2025-11-25"
    with pytest.raises(JSONRPCError) as bare:
        check_stamp("2026-07-28", {})
    assert bare.value.code == -32602
    from agenthost.protocol.types import Implementation

    me = Implementation(name="agenthost", version="1")
    listed = stamp_result({"tools": []}, me, "2026-07-28", "tools/list")
    assert (listed["ttlMs"], listed["cacheScope"], listed["resultType"]) == (
        0,
        "private",
        "complete",
    )
    assert "ttlMs" not in stamp_result({"content": []}, me, "2026-07-28", "tools/call")


async def test_requests_read_with_initialize_wait_for_it(
    sdk_server_cmd: Callable[..., Command],
) -> None:
    """Regression: a client that pipelines tools/list right behind initialize (one read
    of stdin) got "before initialize": each request runs in a task of its own, and Trio
    starts a batch of tasks in no set order (it reverses one at random): 16 tries."""
    import os

    from agenthost.serve import StdioServerTransport

    config = _config([stdio("sdk", sdk_server_cmd())])
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    lines = (
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        + "\n"
        + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        + "\n"
    ).encode()
    with trio.fail_after(60):
        async with open_gateway(config) as gateway:
            for _ in range(16):
                client_in, server_out = os.pipe()
                server_in, client_out = os.pipe()
                os.write(client_out, lines)  # both requests in one read
                transport = StdioServerTransport(stdin=server_in, stdout=server_out)
                for fd in (server_in, server_out):
                    os.close(fd)  # the transport holds its own duplicates
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(gateway.serve, gateway.session(transport))
                    reader = trio.lowlevel.FdStream(client_in)
                    data = b""
                    while data.count(b"\n") < 2:
                        data += await reader.receive_some(1 << 16)
                    replies = {r["id"]: r for r in map(json.loads, data.splitlines())}
                    assert "result" in replies[2], replies[2]
                    assert replies[2]["result"]["tools"][0]["name"] == "echo"
                    os.close(client_out)
                    await reader.aclose()
                    nursery.cancel_scope.cancel()


def test_a_project_file_may_not_set_the_gateway(tmp_path: Path) -> None:
    """[gateway] decides whose model answers servers' sampling (the user's providers are
    paid for): user-only, like a provider's base_url."""
    from agenthost.config.trust import inspect_project
    from agenthost.config.user_only import check_user_only
    from agenthost.errors import ConfigError

    project = tmp_path / "agenthost.toml"
    project.write_text('[gateway]\nsampling = "providers"\n')
    with pytest.raises(ConfigError, match="gateway"):
        check_user_only(inspect_project(project))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_resource_updates_reach_only_their_subscribers(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command], mode: str
) -> None:
    """A 2026-07-28 client subscribes through subscriptions/listen and hears of the
    readme's change on the stream that named it, tagged with that stream's id, and not
    on its other stream (the pixel's); an unknown URI is left out of the acknowledgment.
    A legacy client still subscribes with resources/subscribe."""
    config = _allow_all(tmp_path, {"sdk": sdk_server_cmd()})
    seen, _ = _drive(config, "watch", mode=mode)
    assert seen["touch"]["content"][0]["text"].startswith("readme version")
    if mode == "legacy":
        assert "notifications/resources/updated" in seen["notifications"]
        return
    assert seen["protocol_version"] == "2026-07-28"
    assert seen["honoured_one"]["resourceSubscriptions"] == ["text://readme"]
    assert seen["honoured_two"]["resourceSubscriptions"] == ["bin://pixel"]
    assert seen["stream_readme"] == ["ResourceUpdated text://readme"]
    assert seen["stream_pixel"] == []


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_log_lines_reach_only_a_client_that_asked(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command], mode: str
) -> None:
    """A (legacy) upstream's log lines during a call: a legacy client gets them once it
    sent logging/setLevel, a 2026-07-28 one for the request whose _meta names a level;
    each at or above its level."""
    command, args = sdk_server_cmd()
    config = tmp_path / "agenthost.toml"
    config.write_text(
        _toml(
            {"sdk": (command, args)},
            '[policy]\nmode = "headless"\npreset = "unsafe-allow-everything"\n',
        ).replace("\n\n[policy]", '\nprotocol = "legacy"\n\n[policy]', 1)
    )
    seen, _ = _drive(config, "logs", mode=mode)
    assert seen.get("logs", []) == ["asked"]
