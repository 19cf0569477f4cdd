"""A trusted project's deny/ask rules only ever add caution (issue 22, section 2).

Before: the project's rules were appended to the user's and consulted before the preset's,
so a project ``ask`` replaced a preset ``deny`` (the user got a question where their preset
said no, and a callback that allows let it run), and a project sampling rule's limits
replaced the preset's. Now they are consulted after the user's rules and preset, and
replace a verdict only when stricter; their sampling limits never apply.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agenthost.config.scope import load_scoped
from agenthost.config.trust import inspect_project
from agenthost.errors import ConfigError
from agenthost_policies import (
    Answer,
    CallbackPrompter,
    ConsentRequest,
    PolicyEngine,
    ToolCall,
    Verdict,
)
from agenthost_policies.config import parse_policy


class Yes:
    """A programmatic prompter that allows everything it is asked, and counts."""

    def __init__(self) -> None:
        self.asked: list[ConsentRequest] = []

    async def __call__(self, request: ConsentRequest) -> Answer:
        self.asked.append(request)
        return Answer.ALLOW


def _engine(tmp_path: Path, user_policy: str, project_rules: str) -> tuple[PolicyEngine, Yes]:
    user = tmp_path / "user.toml"
    user.write_text(f'[servers.mine]\ncommand = "true"\n[policy]\napprovals = false\n{user_policy}')
    project = tmp_path / "repo" / "agenthost.toml"
    project.parent.mkdir()
    project.write_text(f'[servers.theirs]\ncommand = "true"\n{project_rules}')
    digest = inspect_project(project).digest
    config = load_scoped(
        user=user, project=project, trusted_digest=digest, env={}, default_workspace=False
    )
    policy = parse_policy(config.policy, source=str(user))
    yes = Yes()
    return PolicyEngine.from_config(policy, prompter=CallbackPrompter(confirm=yes)), yes


def tool(server: str) -> ToolCall:
    return ToolCall(server=server, tool="write_file", listed=f"{server}__write_file")


async def test_a_project_ask_does_not_replace_a_preset_deny(tmp_path: Path) -> None:
    engine, yes = _engine(
        tmp_path,
        'mode = "programmatic"\npreset = "headless-readonly"\n',
        '[[policy.rules]]\nkind = "tool"\nserver = "theirs"\ndecision = "ask"\n',
    )
    decision = await engine.check(tool("theirs"))
    assert decision.verdict is Verdict.DENY
    assert decision.rule == "preset:headless-readonly:other-tools"
    assert yes.asked == []


async def test_a_project_rule_is_used_where_stricter(tmp_path: Path) -> None:
    engine, yes = _engine(
        tmp_path,
        'mode = "programmatic"\npreset = "none"\n'
        '[[policy.rules]]\nkind = "tool"\ndecision = "allow"\n',
        '[[policy.rules]]\nkind = "tool"\nserver = "theirs"\ndecision = "ask"\n'
        '[[policy.rules]]\nkind = "tool"\nserver = "mine"\ndecision = "deny"\n',
    )
    asked = await engine.check(tool("theirs"))
    assert (asked.verdict, asked.by, asked.rule) == (
        Verdict.ALLOW,
        "callback",
        "project:policy.rules[0]",
    )
    assert len(yes.asked) == 1
    denied = await engine.check(tool("mine"))
    assert (denied.verdict, denied.rule) == (Verdict.DENY, "project:policy.rules[1]")


def test_a_project_allow_rule_is_refused_even_if_it_reaches_the_policy() -> None:
    with pytest.raises(ConfigError, match="never one that allows"):
        parse_policy(
            {"project": {"file": "p.toml", "rules": [{"kind": "tool", "decision": "allow"}]}},
            source="u.toml",
        )
