"""Client features the server asks for: roots, sampling and elicitation."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, TypeAlias

import attrs

from agenthost.protocol.types._base import Record, Role, since
from agenthost.protocol.types.content import SamplingContent
from agenthost.protocol.types.server import Tool
from agenthost.protocol.types.tasks import TaskMetadata

__all__ = [
    "CreateMessageRequestParams",
    "CreateMessageResult",
    "ElicitRequestParams",
    "ElicitResult",
    "ElicitationCompleteNotificationParams",
    "ListRootsResult",
    "ModelHint",
    "ModelPreferences",
    "Root",
    "SamplingMessage",
    "SamplingMessageContent",
    "ToolChoice",
]


# --- roots -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True, eq=False, repr=False)
class Root(Record):
    """A directory or file the server may operate on (a ``file://`` URI)."""

    uri: str
    name: str | None = None
    meta: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-06-18"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ListRootsResult(Record):
    """The client's answer to ``roots/list``."""

    roots: list[Root]
    meta: dict[str, Any] | None = None


# --- sampling ----------------------------------------------------------------------------

#: One block, or (2025-11-25) several, e.g. parallel tool uses.
SamplingMessageContent: TypeAlias = SamplingContent | list[SamplingContent]


@attrs.frozen(kw_only=True, eq=False, repr=False)
class SamplingMessage(Record):
    """One turn of the conversation a server wants sampled."""

    role: Role
    content: SamplingMessageContent
    meta: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-11-25"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ModelHint(Record):
    """A model-name hint; substrings of model names are fine (``"claude"``)."""

    name: str | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ModelPreferences(Record):
    """The server's priorities for model selection, each 0..1."""

    hints: list[ModelHint] | None = None
    cost_priority: float | None = None
    speed_priority: float | None = None
    intelligence_priority: float | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ToolChoice(Record):
    """How the model may use the tools offered in a sampling request."""

    __mcp_since__: ClassVar[str] = "2025-11-25"

    mode: Literal["auto", "required", "none"] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class CreateMessageRequestParams(Record):
    """Params of ``sampling/createMessage``: a server asks the host's LLM."""

    messages: list[SamplingMessage]
    model_preferences: ModelPreferences | None = None
    system_prompt: str | None = None
    include_context: Literal["none", "thisServer", "allServers"] | None = None
    temperature: float | None = None
    max_tokens: int
    stop_sequences: list[str] | None = None
    #: Provider-specific metadata, passed through.
    metadata: dict[str, Any] | None = None
    tools: list[Tool] | None = attrs.field(default=None, metadata=since("2025-11-25", strict=True))
    tool_choice: ToolChoice | None = attrs.field(
        default=None, metadata=since("2025-11-25", strict=True)
    )
    task: TaskMetadata | None = attrs.field(default=None, metadata=since("2025-11-25", strict=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class CreateMessageResult(Record):
    """The client's answer to ``sampling/createMessage``."""

    role: Role
    content: SamplingMessageContent
    #: The model that produced the answer.
    model: str
    #: ``endTurn``, ``stopSequence``, ``maxTokens``, ``toolUse`` or anything else.
    stop_reason: str | None = None
    meta: dict[str, Any] | None = None


# --- elicitation -------------------------------------------------------------------------


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ElicitRequestParams(Record):
    """Params of ``elicitation/create``.

    Form mode (``mode`` absent or ``"form"``) has ``requested_schema``, a flat JSON Schema
    kept raw; URL mode (2025-11-25) has ``url`` and ``elicitation_id`` instead.
    """

    __mcp_since__: ClassVar[str] = "2025-06-18"

    mode: Literal["form", "url"] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    message: str
    requested_schema: dict[str, Any] | None = None
    url: str | None = attrs.field(default=None, metadata=since("2025-11-25", strict=True))
    elicitation_id: str | None = attrs.field(
        default=None, metadata=since("2025-11-25", strict=True)
    )
    task: TaskMetadata | None = attrs.field(default=None, metadata=since("2025-11-25", strict=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ElicitResult(Record):
    """The client's answer to ``elicitation/create``."""

    __mcp_since__: ClassVar[str] = "2025-06-18"

    action: Literal["accept", "decline", "cancel"]
    #: The submitted form values (``accept`` in form mode only).
    content: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ElicitationCompleteNotificationParams(Record):
    """Params of ``notifications/elicitation/complete`` (URL mode finished)."""

    __mcp_since__: ClassVar[str] = "2025-11-25"

    elicitation_id: str
    meta: dict[str, Any] | None = None
