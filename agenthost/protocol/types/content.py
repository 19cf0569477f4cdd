"""Content blocks: what tools return, prompts contain and sampling exchanges.

Blocks are a union tagged on ``"type"``. A block whose ``type`` we do not know (a newer
peer) becomes :class:`UnknownContent` holding the raw dict, so one exotic block never
makes a whole tool result unreadable. Binary payloads are ``bytes`` here and base64 on
the wire.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, TypeAlias

import attrs

from agenthost.protocol.types._base import Record, Role, since

__all__ = [
    "Annotations",
    "AudioContent",
    "BlobResourceContents",
    "ContentBlock",
    "EmbeddedResource",
    "Icon",
    "ImageContent",
    "ResourceContents",
    "ResourceLink",
    "SamplingContent",
    "TextContent",
    "TextResourceContents",
    "ToolResultContent",
    "ToolUseContent",
    "UnknownContent",
]


@attrs.frozen(kw_only=True, eq=False, repr=False)
class Icon(Record):
    """An icon a client may show for a server, tool, prompt or resource."""

    __mcp_since__: ClassVar[str] = "2025-11-25"

    src: str
    mime_type: str | None = None
    #: Sizes such as ``"48x48"`` or ``"any"``.
    sizes: list[str] | None = None
    theme: Literal["light", "dark"] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class Annotations(Record):
    """Hints for the client about how to use or display an object."""

    audience: list[Role] | None = None
    #: 0 (least important) to 1 (effectively required).
    priority: float | None = None
    #: ISO 8601 timestamp of the last modification.
    last_modified: str | None = attrs.field(default=None, metadata=since("2025-06-18"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class TextContent(Record):
    """Plain text."""

    type: Literal["text"] = "text"
    text: str
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-06-18"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ImageContent(Record):
    """An image; ``data`` is the decoded bytes."""

    type: Literal["image"] = "image"
    data: bytes
    mime_type: str
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-06-18"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class AudioContent(Record):
    """Audio; ``data`` is the decoded bytes."""

    __mcp_since__: ClassVar[str] = "2025-03-26"

    type: Literal["audio"] = "audio"
    data: bytes
    mime_type: str
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-06-18"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class TextResourceContents(Record):
    """The text of a resource."""

    uri: str
    mime_type: str | None = None
    text: str
    meta: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-06-18"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class BlobResourceContents(Record):
    """The binary contents of a resource; ``blob`` is the decoded bytes."""

    uri: str
    mime_type: str | None = None
    blob: bytes
    meta: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-06-18"))


ResourceContents: TypeAlias = TextResourceContents | BlobResourceContents


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ResourceLink(Record):
    """A reference to a resource the client may read or subscribe to later."""

    __mcp_since__: ClassVar[str] = "2025-06-18"

    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    #: Size in bytes, when known.
    size: int | None = None
    annotations: Annotations | None = None
    icons: list[Icon] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class EmbeddedResource(Record):
    """A resource's contents inlined into a message."""

    type: Literal["resource"] = "resource"
    resource: ResourceContents
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-06-18"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class UnknownContent(Record):
    """A content block of a ``type`` this version of agenthost does not know.

    Kept whole (``raw``) so it can be shown, logged or passed on; sent back out unchanged.
    """

    type: str
    raw: dict[str, Any]


ContentBlock: TypeAlias = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource | UnknownContent
)


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ToolUseContent(Record):
    """A model's request to call a tool, inside sampling."""

    __mcp_since__: ClassVar[str] = "2025-11-25"

    type: Literal["tool_use"] = "tool_use"
    #: Unique id matching a later ToolResultContent's ``tool_use_id``.
    id: str
    name: str
    input: dict[str, Any]
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ToolResultContent(Record):
    """The result of a tool call the model asked for, inside sampling."""

    __mcp_since__: ClassVar[str] = "2025-11-25"

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: list[ContentBlock] = attrs.field(factory=list)
    structured_content: dict[str, Any] | None = None
    is_error: bool | None = None
    meta: dict[str, Any] | None = None


SamplingContent: TypeAlias = (
    TextContent | ImageContent | AudioContent | ToolUseContent | ToolResultContent | UnknownContent
)
