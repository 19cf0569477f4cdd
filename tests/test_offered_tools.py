"""Tools a configured policy always denies are not offered to the model (issue 16), and
only those: "ask" with a human (or a callback) to answer still offers the tool."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest

from agenthost.config.model import HostConfig, ServerConfig
from agenthost.host.host import open_host
from agenthost_policies import TerminalPrompter
from agenthost_providers.scripted import ScriptedProvider, ScriptedTurn

Command = tuple[str, list[str]]


def _config(cmd: Command, policy: dict[str, Any]) -> HostConfig:
    server = ServerConfig(name="c", transport="stdio", command=cmd[0], args=tuple(cmd[1]))
    return HostConfig(servers=[server], policy=policy)


@pytest.mark.parametrize(
    ("policy", "offered"),
    [
        # headless: no rule means "deny", so only the allowed tool is offered
        (
            {"mode": "headless", "rules": [{"kind": "tool", "name": "echo", "decision": "allow"}]},
            {"c__echo"},
        ),
        # interactive: a deny rule hides its tool, "ask" keeps the others
        (
            {
                "mode": "interactive",
                "rules": [{"kind": "tool", "name": "crash", "decision": "deny"}],
            },
            {"c__echo", "c__hang"},
        ),
        # a rule that asks, in headless mode: nobody can answer, so never offered
        (
            {"mode": "headless", "rules": [{"kind": "tool", "decision": "ask"}]},
            set(),
        ),
    ],
)
async def test_offered_tools_follow_the_policy(
    crashy_cmd: Callable[..., Command], policy: dict[str, Any], offered: set[str]
) -> None:
    # Interactive: a human at a terminal would answer (a stream given to the prompter is
    # read as answers); the test's own stdin is no terminal, and with none nobody could.
    prompter = TerminalPrompter(input=io.StringIO()) if policy["mode"] == "interactive" else None
    # Observed where it matters: the tools in the request the model receives.
    replay = ScriptedProvider([ScriptedTurn(text="done")], name="replay")
    config = _config(crashy_cmd(), policy)
    async with open_host(config, prompter=prompter, providers={"replay": replay}) as host:
        await host.run_agent("list", provider="replay", model="r", system_prompt=None)
    assert {tool.name for tool in replay.requests[0].tools} == offered
