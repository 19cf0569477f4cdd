"""The policy a durable run decides with: a plain-data snapshot taken at submit time.

A run may last days and be replayed on any worker, so its consent rules cannot be read
from a worker's config (which may differ, or change mid-run): the submitting command
writes the tool-relevant rules into the run's input, and the workflow decides every call
with :func:`agenthost_policies.rules.rule_view`, the same function the policy engine uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenthost_policies.config import PolicyConfig
from agenthost_policies.decision import ActionKind, ToolCall, Verdict
from agenthost_policies.rules import Rule, RuleView, rule_view

__all__ = ["action", "decide", "snapshot"]


def _rule(rule: Rule) -> dict[str, Any]:
    return {
        "label": rule.label,
        "verdict": rule.verdict.value,
        "reason": rule.reason,
        "kinds": sorted(kind.value for kind in rule.kinds),
        "servers": list(rule.servers),
        "names": list(rule.names),
        "trusted": rule.trusted,
        "annotations": dict(rule.annotations),
        "mode": rule.mode,
    }


def snapshot(config: PolicyConfig) -> dict[str, Any]:
    """What a durable run needs of ``config`` to decide its tool calls, as JSON."""
    return {
        "mode": config.mode,
        "ask_timeout": config.ask_timeout,
        "rules": [_rule(rule) for rule in config.all_rules],
        "project_rules": [_rule(rule) for rule in config.project_rules],
    }


def _load(raw: Mapping[str, Any]) -> Rule:
    return Rule(
        label=raw["label"],
        verdict=Verdict(raw["verdict"]),
        reason=raw.get("reason"),
        kinds=frozenset(ActionKind(kind) for kind in raw.get("kinds", ())),
        servers=tuple(raw.get("servers", ())),
        names=tuple(raw.get("names", ())),
        trusted=raw.get("trusted"),
        annotations=dict(raw.get("annotations", {})),
        mode=raw.get("mode"),
    )


def action(entry: Mapping[str, Any], arguments: Mapping[str, Any]) -> ToolCall:
    """The policy's view of a call of the listed tool ``entry`` (a ``list_tools`` row)."""
    return ToolCall(
        server=entry["server"],
        tool=entry["tool"],
        listed=entry["name"],
        arguments=dict(arguments),
        annotations=entry.get("annotations"),
        trusted=bool(entry.get("trusted")),
    )


def decide(policy: Mapping[str, Any], action: ToolCall) -> RuleView:
    """The verdict for ``action``: allow, deny, or ask (which parks the run).

    The mode's default is the engine's (deny in headless mode, else ask); an "ask" is
    never turned into a deny here, whatever the mode: in a durable run a person answers
    later (``agenthost runs approve``), or the policy's ``ask_timeout`` does.
    """
    mode = str(policy.get("mode", "interactive"))
    return rule_view(
        [_load(raw) for raw in policy.get("rules", ())],
        [_load(raw) for raw in policy.get("project_rules", ())],
        mode=mode,
        default=Verdict.DENY if mode == "headless" else Verdict.ASK,
        action=action,
    )
