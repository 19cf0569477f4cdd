"""Skills (SEP-2640) against our own skills peer (tests/peers/skills_server.py): listed
without fetching, loaded on demand and verified (size, digest, frontmatter), refused with
a clear error when tampered, through the library, the host's consent layer and the CLI.
The official conformance alpha's ``sep-2640-client-*`` scenarios run in tests/conformance.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agenthost.config.model import HostConfig, ServerConfig
from agenthost.connection import open_session
from agenthost.errors import ConsentDenied, JSONRPCError, NotFound
from agenthost.host.host import open_host
from agenthost.skills import (
    SkillVerificationError,
    get_skill,
    list_skills,
    load_skill,
    load_skill_file,
    offers_skills,
)
from agenthost.transports.stdio import open_stdio_transport
from agenthost_policies import read_audit
from tests.forkserver import peer_python

PEER = str(Path(__file__).resolve().parent / "peers" / "skills_server.py")
PDF = "skill://pdf-processing/SKILL.md"
FORMS = "skill://pdf-processing/references/FORMS.md"


def reads(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [json.loads(line)["read"] for line in log.read_text().splitlines()]


def server(log: Path, *flags: str) -> ServerConfig:
    return ServerConfig(
        name="sk",
        transport="stdio",
        command=peer_python(),
        args=(PEER, *flags),
        env={"AGENTHOST_PEER_LOG": str(log)},
    )


async def test_listing_fetches_nothing_and_loading_verifies(tmp_path: Path) -> None:
    log = tmp_path / "reads.jsonl"
    async with (
        open_stdio_transport(
            sys.executable, [PEER], name="sk", env={"AGENTHOST_PEER_LOG": str(log)}
        ) as stdio,
        open_session(stdio, name="sk") as session,
    ):
        assert offers_skills(session.server_capabilities)
        entries = {entry.name: entry for entry in await list_skills(session)}
        assert set(entries) == {"pdf-processing", "release-notes"}
        assert entries["pdf-processing"].description == "Extract, fill, and assemble PDF documents"
        assert reads(log) == []  # never ahead of need
        loaded = await load_skill(session, entries["pdf-processing"])
        assert loaded.body.startswith("# PDF processing")
        forms = await load_skill_file(session, entries["pdf-processing"], FORMS)
        assert forms.startswith(b"# Forms")
        with pytest.raises(SkillVerificationError, match="not one of its listed files"):
            await load_skill_file(session, entries["pdf-processing"], "skill://pdf-processing/x")
        assert reads(log) == [PDF, FORMS]


@pytest.mark.parametrize(
    ("tamper", "message", "read"),
    [
        ("digest", "does not match its listed digest", [PDF]),
        ("size", "the listing says", [PDF]),
        ("frontmatter", "frontmatter read differs from the listing in description", [PDF]),
    ],
)
async def test_tampered_skill_is_refused_and_nothing_else_is_read(
    tmp_path: Path, tamper: str, message: str, read: list[str]
) -> None:
    log = tmp_path / "reads.jsonl"
    config = HostConfig(
        servers=[server(log, "--tamper", tamper)],
        policy={"mode": "headless", "rules": [{"kind": "skill", "decision": "allow"}]},
    )
    async with open_host(config) as host:
        with pytest.raises(SkillVerificationError, match=message) as info:
            await host.load_skill("sk", "pdf-processing")
        assert str(info.value).startswith("sk: ")
        # The untampered skill of the same server still loads.
        assert "Group the changes" in (await host.load_skill("sk", "release-notes")).text
    assert reads(log) == [*read, "skill://release-notes/SKILL.md"]


async def test_oversized_skill_is_refused_at_listing_with_a_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "reads.jsonl"
    config = HostConfig(
        servers=[server(log, "--tamper", "oversize")],
        policy={"mode": "headless", "rules": [{"kind": "skill", "decision": "allow"}]},
    )
    async with open_host(config) as host:
        listed = [entry.name for _, entry in await host.list_skills()]
        assert listed == ["release-notes"]
        with pytest.raises(NotFound, match="has no skill 'pdf-processing'"):
            await host.load_skill("sk", "pdf-processing")
    assert "skill refused" in caplog.text
    assert "bytes in all (the limit is 16777216)" in caplog.text
    assert reads(log) == []


async def test_loading_a_skill_is_its_own_consent_kind(tmp_path: Path) -> None:
    log = tmp_path / "reads.jsonl"
    audit = tmp_path / "audit.jsonl"
    policy: dict[str, Any] = {
        "mode": "headless",
        "audit": str(audit),
        "rules": [{"kind": "skill", "name": "release-notes", "decision": "allow"}],
    }
    async with open_host(HostConfig(servers=[server(log)], policy=policy)) as host:
        listed = await host.list_skills()
        assert [(s, e.name) for s, e in listed] == [
            ("sk", "pdf-processing"),
            ("sk", "release-notes"),
        ]
        await host.load_skill("sk", "release-notes")
        with pytest.raises(ConsentDenied):
            await host.load_skill("sk", "pdf-processing")
    assert reads(log) == ["skill://release-notes/SKILL.md"]
    decisions = [r for r in read_audit(str(audit)) if r.get("event") == "decision"]
    assert [(r["kind"], r["name"], r["decision"]) for r in decisions] == [
        ("skill", "release-notes", "allow"),
        ("skill", "pdf-processing", "deny"),
    ]


@pytest.mark.timeout(120)
def test_cli_lists_and_shows_skills(tmp_path: Path) -> None:
    config = tmp_path / "agenthost.toml"
    config.write_text(
        f"""
[servers.sk]
command = {json.dumps(peer_python())}
args = [{json.dumps(PEER)}]

[servers.bad]
command = {json.dumps(peer_python())}
args = [{json.dumps(PEER)}, "--tamper", "digest"]

[policy]
mode = "headless"

[[policy.rules]]
kind = "skill"
decision = "allow"
"""
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}

    def agenthost(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [peer_python(), "-m", "agenthost", "--config", str(config), *argv],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )

    listed = agenthost("--json", "skills")
    assert listed.returncode == 0, listed.stderr
    names = [(s["server"], s["name"]) for s in json.loads(listed.stdout)]
    assert ("sk", "release-notes") in names
    assert ("bad", "pdf-processing") in names
    shown = agenthost("skills", "show", "sk", "pdf-processing")
    assert shown.returncode == 0, shown.stderr
    assert "Skill body." in shown.stdout
    refused = agenthost("skills", "show", "bad", "pdf-processing")
    assert refused.returncode == 1
    assert "does not match its listed digest" in refused.stderr
    assert "Evil" not in refused.stdout + refused.stderr
    usage = agenthost("skills", "show", "sk")
    assert usage.returncode == 2


async def test_agent_sees_names_and_loads_a_skill_only_when_asked(tmp_path: Path) -> None:
    from agenthost.agent.calls import SKILL_TOOL
    from agenthost_providers.base import ToolResultContent, ToolUseContent
    from agenthost_providers.scripted import ScriptedProvider, ScriptedTurn

    log = tmp_path / "reads.jsonl"
    replay = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=(
                    ToolUseContent(id="s1", name=SKILL_TOOL, input={"skill": "sk/pdf-processing"}),
                )
            ),
            ScriptedTurn(text="Followed the skill."),
        ],
        name="replay",
    )
    config = HostConfig(
        servers=[server(log)],
        policy={"mode": "headless", "rules": [{"kind": "skill", "decision": "allow"}]},
    )
    async with open_host(config, providers={"replay": replay}) as host:
        transcript = await host.run_agent("fill the PDF form", provider="replay", model="r")
    first = replay.requests[0]
    [skill_tool] = [t for t in first.tools if t.name == SKILL_TOOL]
    assert skill_tool.description is not None
    assert "sk/pdf-processing: Extract, fill, and assemble PDF documents" in skill_tool.description
    assert "sk/release-notes: Write release notes" in skill_tool.description
    assert "Skill body." not in skill_tool.description  # names and descriptions only
    [call] = transcript.tool_calls
    assert (call.name, call.status) == (SKILL_TOOL, "ok")
    results = [
        block
        for message in replay.requests[1].messages
        for block in message.content
        if isinstance(block, ToolResultContent)
    ]
    assert "Skill body." in results[0].content[0].text  # type: ignore[union-attr]
    assert reads(log) == [PDF]  # only the skill asked for, only when asked


LIVE = "skill://live-docs/SKILL.md"
TODAY = "skill://live-docs/pages/today.md"


async def test_skills_get_returns_the_listed_entry(tmp_path: Path) -> None:
    """``skills/get`` fetches one entry by URI: the same, verified the same way, and
    reads nothing by itself."""
    log = tmp_path / "reads.jsonl"
    async with (
        open_stdio_transport(
            sys.executable, [PEER, "--dynamic"], name="sk", env={"AGENTHOST_PEER_LOG": str(log)}
        ) as stdio,
        open_session(stdio, name="sk") as session,
    ):
        listed = {entry.uri: entry for entry in await list_skills(session)}
        got = await get_skill(session, PDF)
        assert got == listed[PDF]
        assert [f.uri for f in got.files or ()] == [PDF, FORMS]
        live = await get_skill(session, LIVE)
        assert live == listed[LIVE]
        assert live.files is None  # "dynamic"
        assert reads(log) == []
        loaded = await load_skill(session, got)
        assert loaded.body.startswith("# PDF processing")
        with pytest.raises(JSONRPCError, match="no such skill"):
            await get_skill(session, "skill://nope/SKILL.md")
    assert reads(log) == [PDF]


async def test_skills_get_of_a_tampered_skill_is_refused_at_load(tmp_path: Path) -> None:
    log = tmp_path / "reads.jsonl"
    async with (
        open_stdio_transport(
            sys.executable,
            [PEER, "--tamper", "digest"],
            name="sk",
            env={"AGENTHOST_PEER_LOG": str(log)},
        ) as stdio,
        open_session(stdio, name="sk") as session,
    ):
        got = await get_skill(session, PDF)
        with pytest.raises(SkillVerificationError, match="does not match its listed digest"):
            await load_skill(session, got)


async def test_dynamic_skill_files_are_read_on_demand_within_the_skill(tmp_path: Path) -> None:
    """``resources: "dynamic"``: no digests to check, so SKILL.md is checked by its
    frontmatter alone, files are read only when asked for, and only inside the skill."""
    log = tmp_path / "reads.jsonl"
    async with (
        open_stdio_transport(
            sys.executable, [PEER, "--dynamic"], name="sk", env={"AGENTHOST_PEER_LOG": str(log)}
        ) as stdio,
        open_session(stdio, name="sk") as session,
    ):
        live = {entry.uri: entry for entry in await list_skills(session)}[LIVE]
        assert live.files is None
        assert reads(log) == []
        loaded = await load_skill(session, live)
        assert loaded.body == "Read pages/today.md first.\n"
        assert reads(log) == [LIVE]
        today = await load_skill_file(session, live, TODAY)
        assert today == b"# Today\n\nThe docs as of now.\n"
        with pytest.raises(SkillVerificationError, match="is outside the skill"):
            await load_skill_file(session, live, "skill://pdf-processing/SKILL.md")
        with pytest.raises(JSONRPCError, match="resource not found"):
            await load_skill_file(session, live, "skill://live-docs/pages/missing.md")
    # The file outside the skill was never requested.
    assert reads(log) == [LIVE, TODAY, "skill://live-docs/pages/missing.md"]


async def test_dynamic_skill_with_other_frontmatter_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "reads.jsonl"
    async with (
        open_stdio_transport(
            sys.executable,
            [PEER, "--dynamic", "--tamper", "frontmatter"],
            name="sk",
            env={"AGENTHOST_PEER_LOG": str(log)},
        ) as stdio,
        open_session(stdio, name="sk") as session,
    ):
        live = await get_skill(session, LIVE)
        with pytest.raises(SkillVerificationError, match="differs from the listing in description"):
            await load_skill(session, live)
    assert reads(log) == [LIVE]


async def test_host_loads_a_dynamic_skill_through_consent(tmp_path: Path) -> None:
    log = tmp_path / "reads.jsonl"
    audit = tmp_path / "audit.jsonl"
    policy: dict[str, Any] = {
        "mode": "headless",
        "audit": str(audit),
        "rules": [{"kind": "skill", "name": "live-docs", "decision": "allow"}],
    }
    async with open_host(HostConfig(servers=[server(log, "--dynamic")], policy=policy)) as host:
        loaded = await host.load_skill("sk", "live-docs")
    assert loaded.entry.files is None
    assert loaded.body == "Read pages/today.md first.\n"
    decisions = [r for r in read_audit(str(audit)) if r.get("event") == "decision"]
    assert [(r["kind"], r["name"], r["decision"]) for r in decisions] == [
        ("skill", "live-docs", "allow")
    ]
