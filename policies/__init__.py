"""agenthost's consent layer: one policy engine for every action a host takes for a user.

Plain data in, decisions out: the host builds an action (:class:`ToolCall`,
:class:`PromptGet`, :class:`Sampling`, :class:`Elicitation`, :class:`ResourceRead`,
:class:`RootsExposure`) and awaits :meth:`PolicyEngine.check` (or ``guard``/``require``);
the engine matches rules, asks through the mode's prompter when a rule says "ask",
enforces sampling limits and writes the audit trail. Nothing here imports sessions or the
host. Rule syntax, evaluation order and presets: ``POLICY.md``.
"""

from __future__ import annotations

from agenthost_policies.approvals import (
    Approval,
    ApprovalStore,
    ToolDefinition,
    default_approvals_path,
)
from agenthost_policies.audit import AuditLog, default_audit_path, read_audit, redact
from agenthost_policies.config import (
    AuditConfig,
    Mode,
    PolicyConfig,
    load_policy_file,
    load_preset,
    parse_policy,
    preset_names,
)
from agenthost_policies.decision import (
    Action,
    ActionKind,
    Answer,
    DecidedBy,
    Decision,
    Elicitation,
    ElicitationResponse,
    PromptGet,
    ResourceRead,
    RootsExposure,
    Sampling,
    SamplingGrant,
    SkillLoad,
    ToolCall,
    Verdict,
)
from agenthost_policies.elicitation import (
    FormField,
    Option,
    UrlInfo,
    inspect_url,
    parse_form,
    validate_content,
)
from agenthost_policies.engine import Outcome, PolicyEngine
from agenthost_policies.limits import SamplingLimiter
from agenthost_policies.prompters import (
    CallbackPrompter,
    ConsentRequest,
    HeadlessPrompter,
    Prompter,
    TerminalPrompter,
    render_action,
)
from agenthost_policies.rules import (
    Rule,
    SamplingLimits,
    effective_annotations,
    parse_rule,
    unmatchable,
)

__all__ = [
    "Action",
    "ActionKind",
    "Answer",
    "Approval",
    "ApprovalStore",
    "AuditConfig",
    "AuditLog",
    "CallbackPrompter",
    "ConsentRequest",
    "DecidedBy",
    "Decision",
    "Elicitation",
    "ElicitationResponse",
    "FormField",
    "HeadlessPrompter",
    "Mode",
    "Option",
    "Outcome",
    "PolicyConfig",
    "PolicyEngine",
    "PromptGet",
    "Prompter",
    "ResourceRead",
    "RootsExposure",
    "Rule",
    "Sampling",
    "SamplingGrant",
    "SamplingLimiter",
    "SamplingLimits",
    "SkillLoad",
    "TerminalPrompter",
    "ToolCall",
    "ToolDefinition",
    "UrlInfo",
    "Verdict",
    "default_approvals_path",
    "default_audit_path",
    "effective_annotations",
    "inspect_url",
    "load_policy_file",
    "load_preset",
    "parse_form",
    "parse_policy",
    "parse_rule",
    "preset_names",
    "read_audit",
    "redact",
    "render_action",
    "unmatchable",
    "validate_content",
]
