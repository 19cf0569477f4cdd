"""Issue 28, skills: a hostile skills server (hostile_skills_server.py) against the host,
the agent and the CLI. Each test reproduces one finding of the review."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from agenthost.config.model import HostConfig, ServerConfig
from agenthost.errors import ProtocolError
from agenthost.host.host import open_host
from agenthost.skills import MAX_SKILLS
from tests.hostile.conftest import LoopWatch

SERVER = str(Path(__file__).resolve().parent / "hostile_skills_server.py")
ALLOW_SKILLS: dict[str, Any] = {
    "mode": "headless",
    "rules": [{"kind": "skill", "decision": "allow"}],
}
#: YAML nested 2,000 deep: PyYAML's constructor recurses once a level (RecursionError).
DEEP_YAML = "name: deep\ndescription: d\nx: " + "[" * 2000 + "]" * 2000


def skills_server(config: dict[str, Any], name: str = "hs") -> ServerConfig:
    return ServerConfig(
        name=name, transport="stdio", command=sys.executable, args=(SERVER, json.dumps(config))
    )


def cli(tmp_path: Path, config: dict[str, Any], *argv: str) -> subprocess.CompletedProcess[str]:
    """``agenthost --config ... ARGV`` as a subprocess, against one hostile skills server."""
    path = tmp_path / "agenthost.toml"
    path.write_text(
        f"""
[servers.hs]
command = {json.dumps(sys.executable)}
args = [{json.dumps(SERVER)}, {json.dumps(json.dumps(config))}]

[policy]
mode = "headless"

[[policy.rules]]
kind = "skill"
decision = "allow"
"""
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "agenthost", "--config", str(path), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_deep_frontmatter_is_one_line_naming_server_and_skill(tmp_path: Path) -> None:
    """C2: `skills show` of a skill whose YAML is nested 2,000 deep died with a
    RecursionError traceback; now one line naming the server and the skill, exit 1."""
    config = {"skills": [{"name": "deep", "yaml": DEEP_YAML}]}
    shown = cli(tmp_path, config, "skills", "show", "hs", "deep")
    assert shown.returncode == 1, shown.stderr
    assert "Traceback" not in shown.stderr
    [line] = shown.stderr.strip().splitlines()
    assert line.startswith("agenthost: hs: ") and "deep" in line, line


async def test_deep_frontmatter_is_a_tool_error_and_the_agent_goes_on() -> None:
    """C2: the agent's load_skill of that skill ended the run; now the model reads an error
    and the run continues (a second skill of the same server still loads)."""
    from agenthost.agent.calls import SKILL_TOOL
    from agenthost_providers.base import ToolResultContent, ToolUseContent
    from agenthost_providers.scripted import ScriptedProvider, ScriptedTurn

    replay = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=(ToolUseContent(id="s1", name=SKILL_TOOL, input={"skill": "hs/deep"}),)
            ),
            ScriptedTurn(
                tool_calls=(ToolUseContent(id="s2", name=SKILL_TOOL, input={"skill": "hs/fine"}),)
            ),
            ScriptedTurn(text="done"),
        ],
        name="replay",
    )
    config = HostConfig(
        servers=[
            skills_server({"skills": [{"name": "deep", "yaml": DEEP_YAML}, {"name": "fine"}]})
        ],
        policy=ALLOW_SKILLS,
    )
    async with open_host(config, providers={"replay": replay}) as host:
        transcript = await host.run_agent("use the skills", provider="replay", model="r")
    assert [(c.name, c.status) for c in transcript.tool_calls] == [
        (SKILL_TOOL, "error"),
        (SKILL_TOOL, "ok"),
    ]
    [result] = [
        block
        for message in replay.requests[1].messages
        for block in message.content
        if isinstance(block, ToolResultContent)
    ]
    assert result.is_error
    assert "hs:" in result.content[0].text  # type: ignore[union-attr]
    assert transcript.final_text == "done"


async def test_huge_frontmatter_is_refused_without_freezing_the_loop() -> None:
    """H3: 300 KiB of frontmatter was parsed on the event loop (the host froze seconds);
    now frontmatter past its bound is refused unparsed and the loop never stalls."""
    config = HostConfig(
        servers=[skills_server({"skills": [{"name": "big", "pad": 20_000}]})], policy=ALLOW_SKILLS
    )
    watch = LoopWatch()
    async with open_host(config) as host, trio.open_nursery() as nursery:
        nursery.start_soon(watch.run)
        with pytest.raises(ProtocolError, match="frontmatter") as info:
            await host.load_skill("hs", "big")
        nursery.cancel_scope.cancel()
    assert str(info.value).startswith("hs: ")
    assert watch.worst_stall() < 0.5, watch.worst_stall()


async def test_frontmatter_is_parsed_off_the_event_loop() -> None:
    """H3: a frontmatter within the bound is parsed in a worker thread: the loop keeps
    ticking meanwhile (on the loop, a slow parse is one long stall)."""
    config = HostConfig(
        servers=[skills_server({"skills": [{"name": "wide", "pad": 3_000}]})], policy=ALLOW_SKILLS
    )
    parsed_in: list[str] = []
    import threading

    import yaml

    real = yaml.safe_load

    def spy(text: str) -> Any:
        parsed_in.append(threading.current_thread().name)
        return real(text)

    async with open_host(config) as host:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(yaml, "safe_load", spy)
            loaded = await host.load_skill("hs", "wide")
    assert loaded.entry.name == "wide"
    assert parsed_in and parsed_in[0] != threading.main_thread().name


async def test_skills_listing_is_cut_at_its_bound_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """H4: skills/list had no cap (5M skills took 2.7 GiB); now at most MAX_SKILLS per
    server, the rest left out with a warning, and no page is asked for past the cap."""
    record = tmp_path / "requests.txt"
    flood = {"flood": {"per_page": 3_000, "pages": 0}, "record": str(record)}
    config = HostConfig(servers=[skills_server(flood)], policy=ALLOW_SKILLS)
    async with open_host(config) as host:
        listed = await host.list_skills("hs")
    assert len(listed) == MAX_SKILLS
    assert record.read_text().splitlines().count("skills/list") == 1
    assert f"more than {MAX_SKILLS} skills" in caplog.text


async def test_skills_pages_are_cut_at_their_bound_and_say_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """H4: pages without end were followed up to 50 and cut silently; now said."""
    record = tmp_path / "requests.txt"
    endless = {"flood": {"per_page": 1, "pages": 0}, "record": str(record)}
    config = HostConfig(servers=[skills_server(endless)], policy=ALLOW_SKILLS)
    async with open_host(config) as host:
        listed = await host.list_skills("hs")
    assert len(listed) == 50
    assert record.read_text().splitlines().count("skills/list") == 50
    assert "more than 50 pages" in caplog.text


BAD_ENTRY_URIS = [
    "skill://a/../evil/SKILL.md",
    "skill://a/%2e%2e/evil/SKILL.md",
    "skill://a/%2E%2e/evil/SKILL.md",
    "skill://a//evil/SKILL.md",
    "skill://a\u0000b/evil/SKILL.md",
]
BAD_FILES = ["../../etc/passwd", "%2e%2e/x", "a//b", "a\u0000b", "a%2fb"]


async def test_climbing_uris_and_a_name_with_a_newline_are_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Low: skill URIs with ``../``, ``%2e%2e``, ``//`` or NUL, and a skill named
    ``"evil\\n"``, were listed; now each such entry is refused (and said)."""
    skills: list[dict[str, Any]] = [{"name": "ok"}]
    skills += [{"name": "evil", "uri": uri} for uri in BAD_ENTRY_URIS]
    skills += [
        {"name": f"f-{n}", "files": [f"skill://f-{n}/{path}"]} for n, path in enumerate(BAD_FILES)
    ]
    skills.append({"name": "evil\n", "listed": {"name": "evil\n", "description": "d"}})
    config = HostConfig(servers=[skills_server({"skills": skills})], policy=ALLOW_SKILLS)
    async with open_host(config) as host:
        listed = await host.list_skills("hs")
    assert [entry.name for _, entry in listed] == ["ok"]
    assert caplog.text.count("skill refused") == len(skills) - 1


async def test_server_data_maps_any_failure_to_that_servers_error() -> None:
    """C2, the general rule: inside ``server_data`` whatever is raised (RecursionError,
    KeyError, ...) leaves as that server's ProtocolError; our own errors and
    cancellation pass unchanged."""
    from agenthost.errors import ConsentDenied, server_data

    for raised in (RecursionError("deep"), KeyError("k"), MemoryError(), ValueError("v")):
        with pytest.raises(ProtocolError) as info, server_data("srv", "skill x"):
            raise raised
        assert str(info.value).startswith("srv: skill x: ")
        assert type(raised).__name__ in str(info.value)
        assert info.value.__cause__ is raised
    with pytest.raises(ConsentDenied), server_data("srv", "x"):
        raise ConsentDenied("no")
    with trio.CancelScope() as scope, server_data("srv", "x"):
        scope.cancel()
        await trio.sleep(1)
    assert scope.cancelled_caught


async def test_a_slow_parse_does_not_hold_the_caller_past_its_deadline() -> None:
    """H3: the parse runs in a worker thread the caller need not wait for: cancelling a
    load (a deadline, Ctrl-C) returns at once even while the parser is still busy."""
    import threading
    import time

    import yaml

    release = threading.Event()
    real = yaml.safe_load

    def stuck(text: str) -> Any:
        release.wait(10)  # a parse that takes seconds
        return real(text)

    config = HostConfig(servers=[skills_server({"skills": [{"name": "s"}]})], policy=ALLOW_SKILLS)
    async with open_host(config) as host:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(yaml, "safe_load", stuck)
            started = time.monotonic()
            with trio.move_on_after(0.3) as scope:
                await host.load_skill("hs", "s")
            took = time.monotonic() - started
        release.set()
    assert scope.cancelled_caught
    assert took < 2, took
