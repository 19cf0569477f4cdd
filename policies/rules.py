"""Policy rules: parsed from TOML tables once, matched against every action.

A rule is a set of conditions and a verdict. Every condition a rule states must hold for it
to match; a condition it leaves out matches anything. The engine walks the rules in order
and the first match wins (see ``POLICY.md`` for the whole evaluation order).

Globs (``server``, ``name``, ``providers``, ``models``) use :mod:`fnmatch` syntax and are
case-sensitive, because MCP tool names are. They are compiled to regular expressions at
parse time so matching costs one ``re.match`` per glob.

A tool may be named as its server names it (``read_text_file``) or as every listing shows
it, ``<server>__<tool>`` (``fs__read_text_file``): a ``name`` glob that contains ``__`` is
matched against the listed name only, so it also says which server. It is never matched
against a tool's own name: another server must not be able to define a tool literally
called ``fs__read_text_file`` and get the rule written for ``fs`` (a tool whose own name
contains ``__`` is named by its listed name, ``srv__my__tool``). A rule that can match
nothing, such as one naming a server that is not configured, is found by
:func:`unmatchable` so the host can say so at startup.

Tool annotations are hints. The spec says clients MUST treat them as untrusted unless the
server is trusted, so a rule sees the *effective* annotations from
:func:`effective_annotations`: the spec's defaults (the worst case: not read-only,
destructive, not idempotent, open world) overlaid with the server's hints only when the
host config marks that server trusted. An allow rule on ``readOnlyHint = true`` can
therefore never fire for an untrusted server, while a deny/ask rule on
``destructiveHint = true`` always does.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from agenthost.errors import ConfigError
from agenthost_policies.decision import (
    Action,
    ActionKind,
    DecidedBy,
    Elicitation,
    RootsExposure,
    ToolCall,
    Verdict,
)

__all__ = [
    "ANNOTATION_DEFAULTS",
    "Rule",
    "RuleView",
    "SamplingLimits",
    "compile_globs",
    "effective_annotations",
    "first_match",
    "listed_name",
    "parse_rule",
    "rule_view",
    "unmatchable",
]

#: The spec's defaults for ToolAnnotations (schema.json, 2025-11-25), i.e. what an
#: untrusted or silent server's tool is assumed to be.
ANNOTATION_DEFAULTS: Mapping[str, bool] = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}

_COMMON_KEYS = frozenset({"id", "kind", "server", "name", "trusted", "decision", "reason"})
_TOOL_KEYS = frozenset({"annotations"})
_SAMPLING_KEYS = frozenset(
    {
        "providers",
        "models",
        "max_tokens",
        "requests_per_minute",
        "token_budget",
        "allow_include_context",
        "review",
    }
)
_ELICITATION_KEYS = frozenset({"mode", "answers"})
_ALL_KEYS = _COMMON_KEYS | _TOOL_KEYS | _SAMPLING_KEYS | _ELICITATION_KEYS
_NAMED_KINDS = frozenset(
    {ActionKind.TOOL, ActionKind.PROMPT, ActionKind.RESOURCE, ActionKind.ROOTS, ActionKind.SKILL}
)


@attrs.frozen(kw_only=True)
class SamplingLimits:
    """The sampling-only part of a rule: what an allowed request may use."""

    providers: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    #: Cap on the request's maxTokens (lowered to it, not refused).
    max_tokens: int | None = None
    #: Per server, over a sliding 60-second window.
    requests_per_minute: int | None = None
    #: Per server, total tokens (input + output) reported back by the sampling service.
    token_budget: int | None = None
    #: Whether ``includeContext`` other than ``none`` is acceptable.
    allow_include_context: bool = False
    #: ``True`` when the generated answer may go back without a human review.
    auto_review: bool = False

    provider_patterns: tuple[re.Pattern[str], ...] = attrs.field(
        init=False,
        default=attrs.Factory(lambda self: compile_globs(self.providers), takes_self=True),
    )
    model_patterns: tuple[re.Pattern[str], ...] = attrs.field(
        init=False, default=attrs.Factory(lambda self: compile_globs(self.models), takes_self=True)
    )

    def allows_provider(self, provider: str) -> bool:
        return not self.provider_patterns or _any_match(self.provider_patterns, provider)

    def allows_model(self, model: str) -> bool:
        return not self.model_patterns or _any_match(self.model_patterns, model)


@attrs.frozen(kw_only=True)
class Rule:
    """One parsed rule. Build with :func:`parse_rule`; tests may build it directly."""

    #: How decisions and errors name this rule: its ``id`` or its position in the config.
    label: str
    verdict: Verdict
    reason: str | None = None
    #: Empty means "any kind".
    kinds: frozenset[ActionKind] = frozenset()
    servers: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    #: ``True``/``False`` match only servers the config does/does not mark trusted.
    trusted: bool | None = None
    #: Required effective hint values, e.g. ``{"readOnlyHint": True}`` (tool rules only).
    annotations: Mapping[str, bool] = attrs.field(factory=dict)
    #: Elicitation rules only: ``form`` or ``url``.
    mode: str | None = None
    #: Elicitation rules only: canned form answers that make "allow" answer by itself.
    answers: Mapping[str, Any] | None = None
    sampling: SamplingLimits | None = None
    #: The file the rule was written in, for messages about it (``None``: built in code).
    source: str | None = None

    server_patterns: tuple[re.Pattern[str], ...] = attrs.field(
        init=False, default=attrs.Factory(lambda self: compile_globs(self.servers), takes_self=True)
    )
    name_patterns: tuple[re.Pattern[str], ...] = attrs.field(
        init=False, default=attrs.Factory(lambda self: compile_globs(self.names), takes_self=True)
    )
    #: Tools only: the ``name`` globs written with the server part, ``fs__read_*``,
    #: matched against the listed name; and the others, matched against the tool's own.
    listed_tool_patterns: tuple[re.Pattern[str], ...] = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: compile_globs(n for n in self.names if _is_listed(n)), takes_self=True
        ),
    )
    own_tool_patterns: tuple[re.Pattern[str], ...] = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: compile_globs(n for n in self.names if not _is_listed(n)), takes_self=True
        ),
    )

    def matches(self, action: Action) -> bool:
        """Whether every condition this rule states holds for ``action``."""
        if self.kinds and action.kind not in self.kinds:
            return False
        if self.trusted is not None and action.trusted is not self.trusted:
            return False
        if self.server_patterns and not _any_match(self.server_patterns, action.server):
            return False
        if self.name_patterns:
            if isinstance(action, RootsExposure):
                # Every root the server would see must be one the rule names.
                if not all(_any_match(self.name_patterns, uri) for uri in action.roots):
                    return False
            elif isinstance(action, ToolCall):
                if not (
                    _any_match(self.own_tool_patterns, action.tool)
                    or _any_listed(self.listed_tool_patterns, listed_name(action))
                ):
                    return False
            elif action.kind not in _NAMED_KINDS or not _any_match(self.name_patterns, action.name):
                return False
        if self.annotations:
            if not isinstance(action, ToolCall):
                return False
            hints = effective_annotations(action)
            if any(hints[key] is not value for key, value in self.annotations.items()):
                return False
        return self.mode is None or (isinstance(action, Elicitation) and action.mode == self.mode)

    def describe(self) -> str:
        """A one-line human summary of the conditions, for prompts and errors."""
        parts = []
        if self.kinds:
            parts.append("kind=" + "|".join(sorted(k.value for k in self.kinds)))
        if self.servers:
            parts.append("server=" + "|".join(self.servers))
        if self.names:
            parts.append("name=" + "|".join(self.names))
        if self.trusted is not None:
            parts.append(f"trusted={str(self.trusted).lower()}")
        parts.extend(f"{k}={str(v).lower()}" for k, v in self.annotations.items())
        if self.mode:
            parts.append(f"mode={self.mode}")
        return f"{self.label} ({', '.join(parts) or 'any action'}) -> {self.verdict.value}"


#: The separator of a listed tool name, ``<server>__<tool>``: the host's catalog
#: (``agenthost.host.catalog.SEPARATOR``) names tools this way, and a test keeps the two
#: equal (policies import nothing of the host's: tests/test_layers.py).
LISTED_SEPARATOR: Final = "__"


def _is_listed(glob: str) -> bool:
    """A ``name`` glob written as listings show tools: with the server part."""
    return LISTED_SEPARATOR in glob


def listed_name(action: ToolCall) -> str | None:
    """The tool as listings show it (``<server>__<tool>``, or its hashed form), as the host
    said; None when the host did not say, and then no listed-form glob matches."""
    return action.listed


def _literal_head(glob: str) -> str:
    """The part of ``glob`` before its first wildcard: every match starts with it."""
    cut = min((i for i in (glob.find(c) for c in "*?[") if i >= 0), default=len(glob))
    return glob[:cut]


def unmatchable(rule: Rule, servers: Mapping[str, str]) -> str | None:
    """Why ``rule`` can match no action of the configured ``servers``, or None if it may.

    Why: a rule naming a server that is not configured (a typo, a server renamed or
    removed) is accepted and silently never fires; for an allow rule the user is then
    asked, for a deny rule the action is not denied. The host warns with this at startup.
    Errs towards None: only a rule that provably matches nothing is reported.

    Args:
        servers: each configured server's name -> the prefix its listed tool names start
            with (``<prefix>__``), as the host's catalog builds them.
    """
    names = list(servers)
    configured = ", ".join(names) or "none"
    candidates = names
    if rule.server_patterns:
        candidates = [n for n in names if _any_match(rule.server_patterns, n)]
        if not candidates:
            shown = "|".join(rule.servers)
            return f"server {shown!r} is not configured (configured: {configured})"
    if rule.kinds == {ActionKind.TOOL} and rule.names and not rule.own_tool_patterns:
        # Every name has the listed form: each must be able to start with some
        # candidate server's prefix.
        heads = [_literal_head(n) for n in rule.names]
        prefixes = [servers[n] for n in candidates]
        if not any(h.startswith(p) or p.startswith(h) for h in heads for p in prefixes):
            shown = "|".join(rule.names)
            if rule.servers:
                scope = "|".join(rule.servers)
                return f"tool {shown!r} is not on a server the rule's server {scope!r} matches"
            return (
                f"tool {shown!r} names a server that is not configured (configured: {configured})"
            )
    return None


def compile_globs(globs: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    """Compile fnmatch globs (case-sensitive) to anchored regular expressions."""
    return tuple(re.compile(fnmatch.translate(glob)) for glob in globs)


def _any_match(patterns: tuple[re.Pattern[str], ...], value: str) -> bool:
    return any(pattern.match(value) for pattern in patterns)


def _any_listed(patterns: tuple[re.Pattern[str], ...], value: str | None) -> bool:
    return value is not None and _any_match(patterns, value)


def effective_annotations(action: ToolCall) -> dict[str, bool]:
    """The tool hints a rule may rely on: the server's only if it is trusted.

    A read-only tool is, by definition, neither destructive nor non-idempotent (the spec
    says those two hints are meaningful only when ``readOnlyHint`` is false), so they are
    normalised to ``destructiveHint = false`` and ``idempotentHint = true``.
    """
    hints = dict(ANNOTATION_DEFAULTS)
    if action.trusted and action.annotations:
        for key in ANNOTATION_DEFAULTS:
            value = action.annotations.get(key)
            if isinstance(value, bool):
                hints[key] = value
    if hints["readOnlyHint"]:
        hints["destructiveHint"] = False
        hints["idempotentHint"] = True
    return hints


def first_match(rules: Iterable[Rule], action: Action) -> Rule | None:
    """The first rule that matches, or ``None``."""
    for rule in rules:
        if rule.matches(action):
            return rule
    return None


#: deny over ask over allow: how a project's rule is compared with the user's decision.
_STRICTNESS = {Verdict.ALLOW: 0, Verdict.ASK: 1, Verdict.DENY: 2}


@attrs.frozen(kw_only=True)
class RuleView:
    """What the rules say about one action, before anyone is asked."""

    #: The user's or preset's deciding rule (None: the mode's default); its sampling
    #: limits apply even when a project's rule made the verdict stricter.
    rule: Rule | None
    verdict: Verdict
    label: str
    reason: str
    by: DecidedBy


def rule_view(
    rules: Iterable[Rule],
    project_rules: Iterable[Rule],
    *,
    mode: str,
    default: Verdict,
    action: Action,
) -> RuleView:
    """The verdict of the rules for ``action``: the first match, else the mode's default.

    A project's rule is consulted after the user's rules and preset have decided, and
    replaces their verdict only when it is stricter (deny over ask over allow): a project
    can add caution, never remove any (issue 22). Pure, so the policy engine and a durable
    run's workflow (which decides in a deterministic replay) share it.
    """
    rule = first_match(rules, action)
    if rule is None:
        reason = (
            f"no rule matches this {action.kind.value} action; "
            f"the {mode} mode's default is {default.value}"
        )
        view = RuleView(
            rule=None, verdict=default, label=f"default:{mode}", reason=reason, by="default"
        )
    else:
        reason = rule.reason or rule.describe()
        view = RuleView(rule=rule, verdict=rule.verdict, label=rule.label, reason=reason, by="rule")
    project = first_match(project_rules, action)
    if project is not None and _STRICTNESS[project.verdict] > _STRICTNESS[view.verdict]:
        reason = project.reason or project.describe()
        return RuleView(
            rule=rule, verdict=project.verdict, label=project.label, reason=reason, by="rule"
        )
    return view


def parse_rule(
    raw: Any, *, label: str, source: str, key: str, allow_unconditional: bool = False
) -> Rule:
    """Validate one ``[[policy.rules]]`` table and build a :class:`Rule`.

    Unknown keys are errors, not warnings: in a consent policy a misspelt condition
    (``sever = "github"``) would silently widen an allow rule.

    Args:
        raw: the TOML table.
        label: the rule's default label (its ``id`` key overrides it).
        source: the file name, for the error message.
        key: the key path of the table (``policy.rules[3]``), for the error message.
        allow_unconditional: permit an allow rule with no condition at all. Only the preset
            whose name says it allows everything sets this.

    Raises:
        ConfigError: naming the exact key, e.g. ``policy.rules[3].server``.
    """

    def fail(problem: str, sub: str | None = None) -> ConfigError:
        return ConfigError(problem, path=source, key=f"{key}.{sub}" if sub else key)

    if not isinstance(raw, Mapping):
        raise fail("a rule must be a table")
    unknown = sorted(set(raw) - _ALL_KEYS)
    if unknown:
        raise ConfigError.unknown_key(f"{key}.{unknown[0]}", unknown[0], _ALL_KEYS, path=source)

    if "id" in raw:
        if not isinstance(raw["id"], str) or not raw["id"]:
            raise fail("must be a non-empty string", "id")
        label = raw["id"]

    decision = raw.get("decision")
    try:
        verdict = Verdict(decision)
    except ValueError:
        raise fail(
            f"must be one of 'allow', 'deny', 'ask' (got {decision!r})", "decision"
        ) from None

    kinds: set[ActionKind] = set()
    for value in _str_list(raw, "kind", fail):
        try:
            kinds.add(ActionKind(value))
        except ValueError:
            known = ", ".join(k.value for k in ActionKind)
            raise fail(f"unknown kind {value!r} (known: {known})", "kind") from None

    servers = _str_list(raw, "server", fail)
    names = _str_list(raw, "name", fail)
    if names and kinds and not kinds & _NAMED_KINDS:
        raise fail("sampling and elicitation actions have no name to match", "name")

    trusted = raw.get("trusted")
    if trusted is not None and not isinstance(trusted, bool):
        raise fail("must be true or false", "trusted")

    reason = raw.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise fail("must be a string", "reason")

    def only_for(kind: ActionKind, keys: frozenset[str]) -> None:
        present = sorted(k for k in keys if k in raw)
        if present and kinds != {kind}:
            raise fail(f"only applies to rules with kind = {kind.value!r}", present[0])

    only_for(ActionKind.TOOL, _TOOL_KEYS)
    only_for(ActionKind.SAMPLING, _SAMPLING_KEYS)
    only_for(ActionKind.ELICITATION, _ELICITATION_KEYS)

    annotations: dict[str, bool] = {}
    if "annotations" in raw:
        table = raw["annotations"]
        if not isinstance(table, Mapping) or not table:
            raise fail("must be a non-empty table of hint = true|false", "annotations")
        for hint, value in table.items():
            if hint not in ANNOTATION_DEFAULTS:
                known = ", ".join(ANNOTATION_DEFAULTS)
                raise fail(f"unknown hint {hint!r} (known: {known})", f"annotations.{hint}")
            if not isinstance(value, bool):
                raise fail("must be true or false", f"annotations.{hint}")
            annotations[hint] = value

    mode = raw.get("mode")
    if mode is not None and mode not in ("form", "url"):
        raise fail("must be 'form' or 'url'", "mode")
    answers = raw.get("answers")
    if answers is not None:
        if not isinstance(answers, Mapping):
            raise fail("must be a table of field = value", "answers")
        if verdict is not Verdict.ALLOW:
            raise fail("canned answers need decision = 'allow'", "answers")
        if mode != "form":
            raise fail("canned answers need mode = 'form' (URL mode needs a human)", "answers")

    sampling = _parse_sampling(raw, fail) if kinds == {ActionKind.SAMPLING} else None

    conditions = kinds or servers or names or trusted is not None or annotations or mode
    if verdict is Verdict.ALLOW and not conditions and not allow_unconditional:
        raise fail(
            "an allow rule with no condition allows every action; if that is really meant, "
            "use preset = 'unsafe-allow-everything', whose name says so"
        )

    return Rule(
        label=label,
        verdict=verdict,
        reason=reason,
        kinds=frozenset(kinds),
        servers=servers,
        names=names,
        trusted=trusted,
        annotations=annotations,
        mode=mode,
        answers=dict(answers) if answers is not None else None,
        sampling=sampling,
        source=source,
    )


def _str_list(raw: Mapping[str, Any], name: str, fail: Any) -> tuple[str, ...]:
    value = raw.get(name)
    if value is None:
        return ()
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values:
        raise fail("must be a string or a non-empty list of strings", name)
    for item in values:
        if not isinstance(item, str) or not item:
            raise fail("must be a string or a non-empty list of strings", name)
    return tuple(values)


def _positive_int(raw: Mapping[str, Any], name: str, fail: Any) -> int | None:
    value = raw.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise fail("must be a positive integer", name)
    return value


def _parse_sampling(raw: Mapping[str, Any], fail: Any) -> SamplingLimits:
    allow_context = raw.get("allow_include_context", False)
    if not isinstance(allow_context, bool):
        raise fail("must be true or false", "allow_include_context")
    review = raw.get("review", "ask")
    if review not in ("ask", "auto"):
        raise fail("must be 'ask' (a human reviews the answer) or 'auto'", "review")
    return SamplingLimits(
        providers=_str_list(raw, "providers", fail),
        models=_str_list(raw, "models", fail),
        max_tokens=_positive_int(raw, "max_tokens", fail),
        requests_per_minute=_positive_int(raw, "requests_per_minute", fail),
        token_budget=_positive_int(raw, "token_budget", fail),
        allow_include_context=allow_context,
        auto_review=review == "auto",
    )
