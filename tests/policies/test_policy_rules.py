"""Rule parsing and matching, evaluation order, presets, and [policy] config errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agenthost.errors import ConfigError
from agenthost.host.catalog import SEPARATOR, tool_prefix
from agenthost_policies import (
    Action,
    ActionKind,
    Elicitation,
    PolicyConfig,
    PromptGet,
    ResourceRead,
    RootsExposure,
    Sampling,
    ToolCall,
    Verdict,
    effective_annotations,
    load_policy_file,
    load_preset,
    parse_policy,
    parse_rule,
    preset_names,
)
from agenthost_policies.rules import LISTED_SEPARATOR, first_match

READ_ONLY = {"readOnlyHint": True}
DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": True}


def tool(
    *,
    server: str = "fs",
    name: str = "read_file",
    trusted: bool = False,
    hints: dict[str, Any] | None = None,
    **ann: Any,
) -> ToolCall:
    ann = {**(hints or {}), **ann}
    return ToolCall(
        server=server,
        tool=name,
        # As the host's catalog lists it (plain form; the catalog hashes only long or
        # clashing names).
        listed=f"{tool_prefix(server)}{SEPARATOR}{name}",
        arguments={"path": "/x"},
        annotations=ann or None,
        trusted=trusted,
    )


def rule(**raw: Any) -> Any:
    return parse_rule(raw, label="r", source="test.toml", key="policy.rules[0]")


# -- matching: one row per condition, both sides ------------------------------------------

MATCH_TABLE = [
    # (rule table, action, matches?)
    ({"kind": "tool", "decision": "deny"}, tool(), True),
    ({"kind": "tool", "decision": "deny"}, PromptGet(server="fs", prompt="p"), False),
    (
        {"kind": ["prompt", "resource"], "decision": "deny"},
        ResourceRead(server="a", uri="x:/"),
        True,
    ),
    ({"server": "git*", "decision": "deny"}, tool(server="github"), True),
    ({"server": "git*", "decision": "deny"}, tool(server="gitlab"), True),
    ({"server": "git*", "decision": "deny"}, tool(server="GitHub"), False),  # case-sensitive
    ({"server": ["a", "b"], "decision": "deny"}, tool(server="b"), True),
    ({"name": "delete_*", "decision": "deny"}, tool(name="delete_file"), True),
    ({"name": "delete_*", "decision": "deny"}, tool(name="read_file"), False),
    ({"name": "delete_*", "decision": "deny"}, PromptGet(server="s", prompt="delete_me"), True),
    (
        {"name": "file:///home/*", "decision": "deny"},
        ResourceRead(server="s", uri="file:///home/u/a"),
        True,
    ),
    (
        {"name": "file:///home/*", "decision": "deny"},
        ResourceRead(server="s", uri="file:///etc/x"),
        False,
    ),
    (
        {"name": "file:///w/*", "decision": "deny"},
        RootsExposure(server="s", roots=("file:///w/a", "file:///w/b")),
        True,
    ),
    (
        {"name": "file:///w/*", "decision": "deny"},
        RootsExposure(server="s", roots=("file:///w/a", "file:///etc")),
        False,
    ),
    ({"name": "*", "decision": "deny"}, Sampling(server="s", max_tokens=5), False),  # no name
    ({"trusted": True, "decision": "deny"}, tool(trusted=True), True),
    ({"trusted": True, "decision": "deny"}, tool(trusted=False), False),
    ({"trusted": False, "decision": "deny"}, tool(trusted=False), True),
    # annotations are believed only from trusted servers
    (
        {"kind": "tool", "annotations": READ_ONLY, "decision": "allow"},
        tool(trusted=True, hints=READ_ONLY),
        True,
    ),
    (
        {"kind": "tool", "annotations": READ_ONLY, "decision": "allow"},
        tool(trusted=False, hints=READ_ONLY),
        False,
    ),
    ({"kind": "tool", "annotations": READ_ONLY, "decision": "allow"}, tool(trusted=True), False),
    # untrusted: the spec's worst-case defaults apply, so deny rules on danger still fire
    (
        {"kind": "tool", "annotations": {"destructiveHint": True}, "decision": "deny"},
        tool(trusted=False, destructiveHint=False),
        True,
    ),
    (
        {"kind": "tool", "annotations": {"openWorldHint": True}, "decision": "deny"},
        tool(trusted=False, openWorldHint=False),
        True,
    ),
    (
        {"kind": "tool", "annotations": {"destructiveHint": False}, "decision": "allow"},
        tool(trusted=True, destructiveHint=False),
        True,
    ),
    # a read-only tool is not destructive, whatever destructiveHint says
    (
        {"kind": "tool", "annotations": {"destructiveHint": True}, "decision": "deny"},
        tool(trusted=True, readOnlyHint=True, destructiveHint=True),
        False,
    ),
    (
        {"kind": "elicitation", "mode": "url", "decision": "deny"},
        Elicitation(server="s", message="m", mode="url", url="https://x"),
        True,
    ),
    (
        {"kind": "elicitation", "mode": "url", "decision": "deny"},
        Elicitation(server="s", message="m"),
        False,
    ),
    (
        {"kind": "sampling", "server": "s", "decision": "ask"},
        Sampling(server="s", max_tokens=5),
        True,
    ),
]


@pytest.mark.parametrize(("raw", "action", "expected"), MATCH_TABLE)
def test_rule_matching(raw: dict[str, Any], action: Any, expected: bool) -> None:
    assert rule(**raw).matches(action) is expected


def test_effective_annotations_ignore_untrusted_hints() -> None:
    hints = {"readOnlyHint": True, "openWorldHint": False}
    assert effective_annotations(tool(trusted=False, hints=hints)) == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
    }
    assert effective_annotations(tool(trusted=True, hints=hints)) == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    # non-boolean hints are ignored, not coerced
    assert effective_annotations(tool(trusted=True, readOnlyHint="yes"))["readOnlyHint"] is False


# -- order: first match wins, user rules before preset rules, then the mode default -------

ORDER_RULES = [
    {"id": "deny-delete", "kind": "tool", "name": "delete_*", "decision": "deny"},
    {"id": "allow-fs", "kind": "tool", "server": "fs", "decision": "allow"},
    {"id": "ask-tools", "kind": "tool", "decision": "ask"},
]

ORDER_TABLE = [
    (tool(server="fs", name="delete_file"), "deny-delete", Verdict.DENY),
    (tool(server="fs", name="read_file"), "allow-fs", Verdict.ALLOW),
    (tool(server="web", name="fetch"), "ask-tools", Verdict.ASK),
    (PromptGet(server="fs", prompt="p"), None, None),
]


@pytest.mark.parametrize(("action", "label", "verdict"), ORDER_TABLE)
def test_first_match_wins(action: Any, label: str | None, verdict: Verdict | None) -> None:
    config = parse_policy({"rules": ORDER_RULES, "preset": "none"}, source="t.toml")
    match = first_match(config.all_rules, action)
    assert (match.label if match else None) == label
    assert (match.verdict if match else None) == verdict


def test_user_rules_come_before_preset_rules() -> None:
    config = parse_policy(
        {"preset": "interactive", "rules": [{"kind": "tool", "server": "fs", "decision": "deny"}]},
        source="t.toml",
    )
    trusted_ro = tool(server="fs", trusted=True, hints=READ_ONLY)
    match = first_match(config.all_rules, trusted_ro)
    assert match is not None
    assert (match.label, match.verdict) == ("policy.rules[0]", Verdict.DENY)
    other = tool(server="other", trusted=True, hints=READ_ONLY)
    match = first_match(config.all_rules, other)
    assert match is not None
    assert match.label == "preset:interactive:trusted-read-only-tools"


# -- presets: each one, table-driven ------------------------------------------------------

SAMPLE = Sampling(server="s", max_tokens=100)
SAMPLE_T = Sampling(server="s", max_tokens=100, trusted=True)
FORM = Elicitation(server="s", message="m", requested_schema={"type": "object", "properties": {}})

PRESET_TABLE = [
    ("interactive", tool(trusted=True, hints=READ_ONLY), Verdict.ALLOW),
    ("interactive", tool(trusted=False, hints=READ_ONLY), Verdict.ASK),
    ("interactive", tool(trusted=True, hints=DESTRUCTIVE), Verdict.ASK),
    ("interactive", SAMPLE, Verdict.ASK),
    ("interactive", FORM, Verdict.ASK),
    ("interactive", PromptGet(server="s", prompt="p"), Verdict.ALLOW),
    ("interactive", ResourceRead(server="s", uri="x:/"), Verdict.ALLOW),
    ("headless-readonly", tool(trusted=True, hints=READ_ONLY), Verdict.ALLOW),
    ("headless-readonly", tool(trusted=False, hints=READ_ONLY), Verdict.DENY),
    ("headless-readonly", tool(trusted=True, hints=DESTRUCTIVE), Verdict.DENY),
    ("headless-readonly", SAMPLE_T, Verdict.DENY),
    ("headless-readonly", FORM, Verdict.DENY),
    ("headless-trusted", tool(trusted=True, hints=DESTRUCTIVE), Verdict.ALLOW),
    ("headless-trusted", tool(trusted=False, hints=READ_ONLY), Verdict.DENY),
    ("headless-trusted", SAMPLE_T, Verdict.ALLOW),
    ("headless-trusted", SAMPLE, Verdict.DENY),
    ("headless-trusted", RootsExposure(server="s", roots=("file:///w",)), Verdict.DENY),
    (
        "headless-trusted",
        RootsExposure(server="s", roots=("file:///w",), trusted=True),
        Verdict.ALLOW,
    ),
    ("ask-always", ResourceRead(server="s", uri="x:/"), Verdict.ASK),
    ("unsafe-allow-everything", tool(hints=DESTRUCTIVE), Verdict.ALLOW),
]


@pytest.mark.parametrize(("preset", "action", "verdict"), PRESET_TABLE)
def test_presets(preset: str, action: Any, verdict: Verdict) -> None:
    match = first_match(load_preset(preset), action)
    assert match is not None
    assert match.verdict is verdict


def test_every_preset_covers_every_kind() -> None:
    """A preset leaves nothing to the mode default by accident."""
    samples: dict[ActionKind, Action] = {
        ActionKind.TOOL: tool(),
        ActionKind.PROMPT: PromptGet(server="s", prompt="p"),
        ActionKind.SAMPLING: SAMPLE,
        ActionKind.ELICITATION: FORM,
        ActionKind.RESOURCE: ResourceRead(server="s", uri="x:/"),
        ActionKind.ROOTS: RootsExposure(server="s", roots=("file:///w",)),
    }
    assert set(preset_names()) >= {"interactive", "headless-readonly", "headless-trusted"}
    for name in preset_names():
        rules = load_preset(name)
        for kind, action in samples.items():
            assert first_match(rules, action) is not None, (name, kind)


def test_mode_defaults_pick_presets() -> None:
    assert PolicyConfig.for_mode("interactive").preset == "interactive"
    assert PolicyConfig.for_mode("headless").preset == "headless-readonly"
    assert parse_policy({"preset": "none"}, source="t").all_rules == ()


# -- config errors name the key ------------------------------------------------------------

ERROR_TABLE = [
    ({"mode": "yolo"}, "policy.mode"),
    ({"preset": "nope"}, "policy.preset"),
    ({"colour": 1}, "policy.colour"),
    ({"rules": {"kind": "tool"}}, "policy.rules"),
    ({"rules": ["x"]}, "policy.rules[0]"),
    ({"rules": [{"kind": "tool"}]}, "policy.rules[0].decision"),
    ({"rules": [{"kind": "tool", "decision": "maybe"}]}, "policy.rules[0].decision"),
    (
        {"rules": [{"kind": "tool", "decision": "ask"}, {"kind": "toolz", "decision": "ask"}]},
        "policy.rules[1].kind",
    ),
    ({"rules": [{"sever": "github", "decision": "allow"}]}, "policy.rules[0].sever"),
    ({"rules": [{"server": "", "decision": "deny"}]}, "policy.rules[0].server"),
    ({"rules": [{"server": [], "decision": "deny"}]}, "policy.rules[0].server"),
    ({"rules": [{"server": 3, "decision": "deny"}]}, "policy.rules[0].server"),
    (
        {"rules": [{"kind": "tool", "trusted": "yes", "decision": "deny"}]},
        "policy.rules[0].trusted",
    ),
    (
        {"rules": [{"kind": "tool", "annotations": {"readonly": True}, "decision": "deny"}]},
        "policy.rules[0].annotations.readonly",
    ),
    (
        {"rules": [{"kind": "tool", "annotations": {"readOnlyHint": 1}, "decision": "deny"}]},
        "policy.rules[0].annotations.readOnlyHint",
    ),
    (
        {"rules": [{"kind": "prompt", "annotations": {"readOnlyHint": True}, "decision": "deny"}]},
        "policy.rules[0].annotations",
    ),
    (
        {"rules": [{"kind": "tool", "max_tokens": 10, "decision": "allow"}]},
        "policy.rules[0].max_tokens",
    ),
    (
        {"rules": [{"kind": "sampling", "max_tokens": 0, "decision": "allow"}]},
        "policy.rules[0].max_tokens",
    ),
    (
        {"rules": [{"kind": "sampling", "token_budget": True, "decision": "allow"}]},
        "policy.rules[0].token_budget",
    ),
    (
        {"rules": [{"kind": "sampling", "review": "never", "decision": "allow"}]},
        "policy.rules[0].review",
    ),
    (
        {"rules": [{"kind": "sampling", "allow_include_context": "yes", "decision": "allow"}]},
        "policy.rules[0].allow_include_context",
    ),
    ({"rules": [{"kind": "sampling", "name": "x", "decision": "allow"}]}, "policy.rules[0].name"),
    (
        {"rules": [{"kind": "elicitation", "mode": "sms", "decision": "allow"}]},
        "policy.rules[0].mode",
    ),
    (
        {
            "rules": [
                {"kind": "elicitation", "mode": "form", "answers": {"a": 1}, "decision": "ask"}
            ]
        },
        "policy.rules[0].answers",
    ),
    (
        {
            "rules": [
                {"kind": "elicitation", "mode": "url", "answers": {"a": 1}, "decision": "allow"}
            ]
        },
        "policy.rules[0].answers",
    ),
    ({"rules": [{"decision": "allow"}]}, "policy.rules[0]"),  # unconditional allow
    (
        {
            "rules": [
                {"id": "x", "kind": "tool", "decision": "ask"},
                {"id": "x", "kind": "prompt", "decision": "ask"},
            ]
        },
        "policy.rules",
    ),
    ({"audit": 5}, "policy.audit"),
    ({"audit": {"path": "a.jsonl", "sync": True}}, "policy.audit.sync"),
    ({"audit": {"path": "a.jsonl", "fsync": "y"}}, "policy.audit.fsync"),
    ({"audit": {"path": "a.jsonl", "fold": -1}}, "policy.audit.fold"),
    ({"audit": {"path": "a.jsonl", "fold": "1m"}}, "policy.audit.fold"),
    ({"prompt_timeout": 0}, "policy.prompt_timeout"),
    ({"file": "p.toml", "mode": "headless"}, "policy.mode"),
]


@pytest.mark.parametrize(("raw", "key"), ERROR_TABLE)
def test_config_errors_name_the_key(raw: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_policy(raw, source="host.toml")
    assert info.value.key == key
    assert info.value.path == "host.toml"
    assert str(info.value).startswith(f"host.toml: {key}: ")


def test_unconditional_allow_points_to_the_named_preset() -> None:
    with pytest.raises(ConfigError, match="unsafe-allow-everything"):
        parse_policy({"rules": [{"decision": "allow", "reason": "lazy"}]}, source="h")
    # deny-everything and ask-everything need no such ceremony
    config = parse_policy({"rules": [{"decision": "deny"}], "preset": "none"}, source="h")
    assert config.rules[0].verdict is Verdict.DENY


def test_full_rule_round_trip(tmp_path: Path) -> None:
    text = """
[policy]
mode = "headless"
preset = "headless-readonly"
prompt_timeout = 30
audit = { path = "logs/audit.jsonl", fsync = true, fold = 10 }

[[policy.rules]]
id = "gh-sampling"
kind = "sampling"
server = "github*"
providers = ["anthropic"]
models = ["claude-*"]
max_tokens = 1000
requests_per_minute = 5
token_budget = 20000
allow_include_context = true
review = "auto"
decision = "allow"
reason = "github summaries"

[[policy.rules]]
kind = "elicitation"
mode = "form"
server = "ci"
answers = { confirm = true }
decision = "allow"
"""
    (tmp_path / "policy.toml").write_text(text)
    config = load_policy_file(tmp_path / "policy.toml")
    assert config.mode == "headless"
    assert config.prompt_timeout == 30.0
    assert config.audit is not None
    assert config.audit.path == tmp_path / "logs" / "audit.jsonl"
    assert config.audit.fsync is True
    assert config.audit.fold == 10.0
    first, second = config.rules
    assert first.label == "gh-sampling"
    assert first.sampling is not None
    assert first.sampling.max_tokens == 1000
    assert first.sampling.auto_review is True
    assert first.sampling.allows_model("claude-haiku-4") and not first.sampling.allows_model(
        "gpt-5"
    )
    assert second.label == "policy.rules[1]"
    assert second.answers == {"confirm": True}
    assert config.all_rules[2:] == load_preset("headless-readonly")


def test_policy_file_via_host_config_and_errors(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text('mode = "headless"\npreset = "headless-trusted"\n')
    config = parse_policy({"file": "p.toml"}, source="host.toml", base_dir=tmp_path)
    assert (config.mode, config.preset) == ("headless", "headless-trusted")
    assert config.source == str(tmp_path / "p.toml")
    (tmp_path / "bad.toml").write_text("mode = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_policy_file(tmp_path / "bad.toml")
    with pytest.raises(ConfigError, match="cannot read"):
        load_policy_file(tmp_path / "missing.toml")
    (tmp_path / "bad-rule.toml").write_text('[[policy.rules]]\nkind = "tool"\ndecision = "nah"\n')
    with pytest.raises(ConfigError) as info:
        load_policy_file(tmp_path / "bad-rule.toml")
    assert info.value.key == "policy.rules[0].decision"
    assert info.value.path == str(tmp_path / "bad-rule.toml")


def test_a_tool_name_with_its_server_part_names_that_servers_tool_only() -> None:
    """``fs__read_text_file`` (as listings show it) is fs's tool, and nobody else's: not a
    tool another server defines with that very name (it would get a rule written for fs)."""
    listed = rule(kind="tool", name="fs__read_text_file", decision="allow")
    assert listed.matches(tool(server="fs", name="read_text_file"))
    assert not listed.matches(tool(server="evil", name="fs__read_text_file"))
    assert not listed.matches(tool(server="fs", name="fs__read_text_file"))
    assert not listed.matches(tool(server="other", name="read_text_file"))
    # The server part is the catalog's prefix: characters a provider refuses become `_`.
    spaced = rule(kind="tool", name="my_server__echo", decision="deny")
    assert spaced.matches(tool(server="my server", name="echo"))
    # A glob with the server part: every tool of that server; a tool whose own name holds
    # `__` is named by its listed name.
    every = rule(kind="tool", name="fs__*", decision="deny")
    assert every.matches(tool(server="fs", name="write_file"))
    assert not every.matches(tool(server="fsx", name="write_file"))
    assert rule(kind="tool", name="srv__my__tool", decision="deny").matches(
        tool(server="srv", name="my__tool")
    )
    # The plain spelling is unchanged.
    assert rule(kind="tool", name="read_*", decision="allow").matches(tool(name="read_text_file"))
    # The listed form is what the host said the listing shows; unsaid, it matches nothing.
    unsaid = ToolCall(server="fs", tool="read_text_file")
    assert not listed.matches(unsaid)


def test_the_listed_separator_is_the_catalogs() -> None:
    """Policies cannot import the host (tests/test_layers.py): the constant is repeated."""
    assert LISTED_SEPARATOR == SEPARATOR
