"""Actions the host asks consent for, and the decisions the policy engine returns.

Everything here is plain data: the host (and the sampling service and the agent loop)
builds an action from what it already holds - names, argument dicts, the server's trust
flag - and gets back a :class:`Decision`. Nothing in ``policies/`` imports sessions or the
host, so the whole consent layer is testable without a server.

Six kinds of action, one per place where MCP lets something happen on the user's behalf:

=================  ===========================================  =========================
kind               who starts it                                 ``name`` matched by rules
=================  ===========================================  =========================
``tool``           the model picks a tool (``tools/call``)       tool name
``prompt``         the user picks a prompt (``prompts/get``)     prompt name
``sampling``       a server asks for an LLM call                 (none)
``elicitation``    a server asks the user for input              (none; rules use ``mode``)
``resource``       the host reads a resource (``resources/read``) resource URI
``roots``          the host shows its roots to a server          each root URI
=================  ===========================================  =========================
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, TypeAlias

import attrs

from agenthost_policies.approvals import ToolDefinition

__all__ = [
    "Action",
    "ActionKind",
    "Answer",
    "DecidedBy",
    "Decision",
    "Elicitation",
    "ElicitationResponse",
    "PromptGet",
    "ResourceRead",
    "RootsExposure",
    "Sampling",
    "SamplingGrant",
    "SkillLoad",
    "ToolCall",
    "Verdict",
]


class ActionKind(enum.Enum):
    """The kind of an action; the values are what rules write in ``kind = ...``."""

    TOOL = "tool"
    PROMPT = "prompt"
    SAMPLING = "sampling"
    ELICITATION = "elicitation"
    RESOURCE = "resource"
    ROOTS = "roots"
    SKILL = "skill"


class Verdict(enum.Enum):
    """What a rule says. ``ASK`` never leaves the engine: a prompter resolves it."""

    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


class Answer(enum.Enum):
    """A human's (or callback's) answer to an "ask".

    ``ALWAYS`` and ``NEVER`` are remembered for the same kind, server and name (for the
    engine's life; tool answers also in the approvals file when one is configured). They
    only ever replace an "ask", never a rule's allow or deny, and an "always" for a tool
    holds only while the tool's definition is unchanged.
    """

    ALLOW = "allow"
    DENY = "deny"
    ALWAYS = "always"
    NEVER = "never"


#: Who settled a decision: the first matching rule, the mode's default, a remembered
#: "always"/"never" of this session or from the approvals file ("stored"), a human, the
#: embedding application's callback, the headless stand-in that turns "ask" into deny,
#: the terminal prompter finding no terminal to ask on ("no-terminal": nobody answered,
#: so it is never recorded as the user's answer), or a sampling limit (rate, budget,
#: context, model).
DecidedBy: TypeAlias = Literal[
    "rule",
    "default",
    "session",
    "stored",
    "user",
    "callback",
    "headless",
    "no-terminal",
    "limit",
]


@attrs.frozen(kw_only=True)
class ToolCall:
    """A tool call the model chose, before it is sent to the server."""

    server: str
    tool: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    #: The tool's ``annotations`` as the server listed them (hints; may be absent).
    annotations: Mapping[str, Any] | None = None
    #: Whether the host config marks this server trusted. Only then are annotations
    #: believed (spec: tools, "annotations ... untrusted unless from trusted servers").
    trusted: bool = False
    #: What the server says the tool is, as listed. A remembered "always" is bound to it:
    #: when it changed, the user is asked again. ``None``: answers bind to the name only.
    definition: ToolDefinition | None = attrs.field(default=None, eq=False, repr=False)
    #: The tool's name as the host's listings show it (``<server>__<tool>``, or a hashed
    #: form for long or clashing names): a rule may name the tool that way. The host
    #: sets it from its catalog, the one place that knows which form a tool got.
    listed: str | None = None

    kind: ClassVar[ActionKind] = ActionKind.TOOL

    @property
    def name(self) -> str:
        return self.tool


@attrs.frozen(kw_only=True)
class PromptGet:
    """A prompt the user picked, before ``prompts/get`` is sent."""

    server: str
    prompt: str
    arguments: Mapping[str, str] = attrs.field(factory=dict)
    trusted: bool = False

    kind: ClassVar[ActionKind] = ActionKind.PROMPT

    @property
    def name(self) -> str:
        return self.prompt


@attrs.frozen(kw_only=True)
class Sampling:
    """A server's ``sampling/createMessage`` request, after model selection.

    Messages stay as the plain dicts of the wire format (``{"role": ..., "content": ...}``)
    so the prompter can show every content block the server sent.
    """

    server: str
    messages: tuple[Mapping[str, Any], ...] = ()
    system_prompt: str | None = None
    max_tokens: int = 0
    #: ``none`` | ``thisServer`` | ``allServers`` (the last two are soft-deprecated).
    include_context: str = "none"
    #: Names of the tools the server offers to the model inside this request, if any.
    tools: tuple[str, ...] = ()
    #: The provider and model the selection chose, and its human-readable reason. ``None``
    #: when consent is asked before selection; the decision's grant then says which
    #: providers/models selection may use.
    provider: str | None = None
    model: str | None = None
    model_reason: str | None = None
    trusted: bool = False
    #: MRTR (2026-07-28): the request and round this ask belongs to, for the audit
    #: (``{"request", "name", "round", "input"}``); None for a legacy server request.
    via: Mapping[str, Any] | None = None

    kind: ClassVar[ActionKind] = ActionKind.SAMPLING

    @property
    def name(self) -> str:
        return ""


@attrs.frozen(kw_only=True)
class Elicitation:
    """A server's ``elicitation/create`` request (form or URL mode)."""

    server: str
    message: str
    mode: Literal["form", "url"] = "form"
    #: Form mode: the restricted JSON schema of the requested object.
    requested_schema: Mapping[str, Any] | None = None
    #: URL mode: the URL the user is asked to open, and the server's id for the flow.
    url: str | None = None
    elicitation_id: str | None = None
    trusted: bool = False
    #: MRTR (2026-07-28): the request and round this ask belongs to, for the audit
    #: (``{"request", "name", "round", "input"}``); None for a legacy server request.
    via: Mapping[str, Any] | None = None

    kind: ClassVar[ActionKind] = ActionKind.ELICITATION

    @property
    def name(self) -> str:
        return ""


@attrs.frozen(kw_only=True)
class ResourceRead:
    """A ``resources/read`` the host is about to send."""

    server: str
    uri: str
    trusted: bool = False

    kind: ClassVar[ActionKind] = ActionKind.RESOURCE

    @property
    def name(self) -> str:
        return self.uri


@attrs.frozen(kw_only=True)
class RootsExposure:
    """The host is about to answer ``roots/list`` (or announce roots) to a server."""

    server: str
    #: The root URIs (``file://...``) the server would see.
    roots: tuple[str, ...] = ()
    trusted: bool = False
    #: MRTR (2026-07-28): the request and round this ask belongs to, for the audit
    #: (``{"request", "name", "round", "input"}``); None for a legacy server request.
    via: Mapping[str, Any] | None = None

    kind: ClassVar[ActionKind] = ActionKind.ROOTS

    @property
    def name(self) -> str:
        return ""


@attrs.frozen(kw_only=True)
class SkillLoad:
    """The host is about to load a server's skill (SEP-2640) for the model to follow.

    A kind of its own because a skill is instructions, not data: what the model then does
    is steered by a server's text, so loading one deserves its own rule and audit line.
    """

    server: str
    #: The skill's name (its frontmatter ``name``).
    skill: str
    uri: str
    description: str = ""
    trusted: bool = False

    kind: ClassVar[ActionKind] = ActionKind.SKILL

    @property
    def name(self) -> str:
        return self.skill


Action: TypeAlias = (
    ToolCall | PromptGet | Sampling | Elicitation | ResourceRead | RootsExposure | SkillLoad
)


@attrs.frozen(kw_only=True)
class SamplingGrant:
    """What an allowed sampling request may do, for the sampling service to enforce.

    Returned inside the decision so the service need not re-read the rules.
    """

    #: The maxTokens to send to the provider: the request's, lowered to the rule's cap and
    #: to what is left of the server's token budget.
    max_tokens: int
    #: Globs of providers/models the rule allows (empty = any). Selection must choose
    #: within them when the action did not name a model yet.
    providers: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    #: Whether the generated answer may go back without a human review.
    auto_review: bool = False
    #: Tokens held against the server's budget until the call is settled: ``max_tokens``
    #: plus an estimate of the input (see :class:`~agenthost_policies.limits.SamplingLimiter`).
    reserved_tokens: int = 0
    #: The limiter's handle on the reservation (``None``: nothing reserved).
    ticket: int | None = None


@attrs.frozen(kw_only=True)
class Decision:
    """The engine's answer for one action: allow or deny, with the rule and why."""

    #: Unique per engine; the audit log's outcome line refers to it.
    id: str
    verdict: Verdict
    #: Label of the rule that matched (``policy.rules[2]``, ``preset:interactive[0]``, a
    #: rule's own ``id``), or ``default:<mode>`` when none did.
    rule: str
    reason: str
    by: DecidedBy = "rule"
    #: Sampling only: the limits the sampling service must apply.
    sampling: SamplingGrant | None = None

    @property
    def allowed(self) -> bool:
        return self.verdict is Verdict.ALLOW


@attrs.frozen(kw_only=True)
class ElicitationResponse:
    """The answer to an ``elicitation/create``: the spec's three actions."""

    action: Literal["accept", "decline", "cancel"]
    #: Form mode + accept only: the validated values.
    content: Mapping[str, Any] | None = None

    def to_result(self) -> dict[str, Any]:
        """The ``ElicitResult`` wire shape (``content`` omitted unless accepted)."""
        result: dict[str, Any] = {"action": self.action}
        if self.action == "accept" and self.content is not None:
            result["content"] = dict(self.content)
        return result
