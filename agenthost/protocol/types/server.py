"""Server features: tools, resources, prompts and completion."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, TypeAlias

import attrs

from agenthost.protocol.types._base import Cursor, Record, Role, since
from agenthost.protocol.types.content import Annotations, ContentBlock, Icon, ResourceContents
from agenthost.protocol.types.tasks import TaskMetadata

__all__ = [
    "CallToolRequestParams",
    "CallToolResult",
    "CompleteRequestParams",
    "CompleteResult",
    "Completion",
    "CompletionArgument",
    "CompletionContext",
    "CompletionReference",
    "GetPromptRequestParams",
    "GetPromptResult",
    "ListPromptsResult",
    "ListResourceTemplatesResult",
    "ListResourcesResult",
    "ListToolsResult",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "PromptReference",
    "ReadResourceRequestParams",
    "ReadResourceResult",
    "Resource",
    "ResourceTemplate",
    "ResourceTemplateReference",
    "ResourceUpdatedNotificationParams",
    "SubscribeRequestParams",
    "Tool",
    "ToolAnnotations",
    "ToolExecution",
    "UnsubscribeRequestParams",
]


# --- tools -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ToolAnnotations(Record):
    """Untrusted hints about a tool's behaviour (never a security boundary)."""

    __mcp_since__: ClassVar[str] = "2025-03-26"

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ToolExecution(Record):
    """How a tool may be run (task support)."""

    __mcp_since__: ClassVar[str] = "2025-11-25"

    task_support: Literal["forbidden", "optional", "required"] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class Tool(Record):
    """A tool a server offers.

    The schemas stay raw JSON Schema dicts: they are handed to jsonschema and to LLM
    providers as they are, and modelling them would lose keywords.
    """

    name: str
    title: str | None = attrs.field(default=None, metadata=since("2025-06-18"))
    description: str | None = None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-06-18"))
    annotations: ToolAnnotations | None = attrs.field(default=None, metadata=since("2025-03-26"))
    execution: ToolExecution | None = attrs.field(default=None, metadata=since("2025-11-25"))
    icons: list[Icon] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    meta: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-06-18"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ListToolsResult(Record):
    """One page of ``tools/list``."""

    tools: list[Tool]
    next_cursor: Cursor | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class CallToolRequestParams(Record):
    """Params of ``tools/call``."""

    name: str
    arguments: dict[str, Any] | None = None
    #: Run as a task (2025-11-25); refused for older peers rather than silently dropped.
    task: TaskMetadata | None = attrs.field(default=None, metadata=since("2025-11-25", strict=True))
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class CallToolResult(Record):
    """The result of ``tools/call``; ``is_error`` marks a tool-level (not protocol) error."""

    content: list[ContentBlock] = attrs.field(factory=list)
    #: Any JSON value conforming to the tool's ``output_schema`` (an object by the spec).
    structured_content: Any = attrs.field(default=None, metadata=since("2025-06-18"))
    is_error: bool | None = None
    meta: dict[str, Any] | None = None


# --- resources ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True, eq=False, repr=False)
class Resource(Record):
    """A resource a server can read."""

    uri: str
    name: str
    title: str | None = attrs.field(default=None, metadata=since("2025-06-18"))
    description: str | None = None
    mime_type: str | None = None
    annotations: Annotations | None = None
    #: Raw size in bytes, when known.
    size: int | None = None
    icons: list[Icon] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    meta: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-06-18"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ResourceTemplate(Record):
    """A parameterised family of resources (RFC 6570 URI template)."""

    uri_template: str
    name: str
    title: str | None = attrs.field(default=None, metadata=since("2025-06-18"))
    description: str | None = None
    mime_type: str | None = None
    annotations: Annotations | None = None
    icons: list[Icon] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    meta: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-06-18"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ListResourcesResult(Record):
    """One page of ``resources/list``."""

    resources: list[Resource]
    next_cursor: Cursor | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ListResourceTemplatesResult(Record):
    """One page of ``resources/templates/list``."""

    resource_templates: list[ResourceTemplate]
    next_cursor: Cursor | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ReadResourceRequestParams(Record):
    """Params of ``resources/read``."""

    uri: str
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ReadResourceResult(Record):
    """The result of ``resources/read``."""

    contents: list[ResourceContents]
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class SubscribeRequestParams(Record):
    """Params of ``resources/subscribe``."""

    uri: str
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class UnsubscribeRequestParams(Record):
    """Params of ``resources/unsubscribe``."""

    uri: str
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ResourceUpdatedNotificationParams(Record):
    """Params of ``notifications/resources/updated``."""

    uri: str
    meta: dict[str, Any] | None = None


# --- prompts -----------------------------------------------------------------------------


@attrs.frozen(kw_only=True, eq=False, repr=False)
class PromptArgument(Record):
    """An argument a prompt template accepts."""

    name: str
    title: str | None = attrs.field(default=None, metadata=since("2025-06-18"))
    description: str | None = None
    required: bool | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class Prompt(Record):
    """A prompt template a server offers."""

    name: str
    title: str | None = attrs.field(default=None, metadata=since("2025-06-18"))
    description: str | None = None
    arguments: list[PromptArgument] | None = None
    icons: list[Icon] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    meta: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-06-18"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class PromptMessage(Record):
    """One message of a rendered prompt."""

    role: Role
    content: ContentBlock


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ListPromptsResult(Record):
    """One page of ``prompts/list``."""

    prompts: list[Prompt]
    next_cursor: Cursor | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class GetPromptRequestParams(Record):
    """Params of ``prompts/get``."""

    name: str
    arguments: dict[str, str] | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class GetPromptResult(Record):
    """The result of ``prompts/get``."""

    description: str | None = None
    messages: list[PromptMessage]
    meta: dict[str, Any] | None = None


# --- completion --------------------------------------------------------------------------


@attrs.frozen(kw_only=True, eq=False, repr=False)
class PromptReference(Record):
    """Completion target: a prompt's argument."""

    type: Literal["ref/prompt"] = "ref/prompt"
    name: str
    title: str | None = attrs.field(default=None, metadata=since("2025-06-18"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ResourceTemplateReference(Record):
    """Completion target: a resource template's variable (``ResourceReference`` before
    2025-06-18, same wire shape)."""

    type: Literal["ref/resource"] = "ref/resource"
    uri: str


CompletionReference: TypeAlias = PromptReference | ResourceTemplateReference


@attrs.frozen(kw_only=True, eq=False, repr=False)
class CompletionArgument(Record):
    """The argument being completed and what the user typed so far."""

    name: str
    value: str


@attrs.frozen(kw_only=True, eq=False, repr=False)
class CompletionContext(Record):
    """Arguments already resolved, to narrow completions."""

    __mcp_since__: ClassVar[str] = "2025-06-18"

    arguments: dict[str, str] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class CompleteRequestParams(Record):
    """Params of ``completion/complete``."""

    ref: CompletionReference
    argument: CompletionArgument
    context: CompletionContext | None = attrs.field(default=None, metadata=since("2025-06-18"))
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class Completion(Record):
    """Completion values (at most 100 per response)."""

    values: list[str]
    total: int | None = None
    has_more: bool | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class CompleteResult(Record):
    """The result of ``completion/complete``."""

    completion: Completion
    meta: dict[str, Any] | None = None
