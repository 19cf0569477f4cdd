"""Provider-neutral request/result types, the Provider protocol, and model facts.

Everything in ``providers/`` speaks these types and nothing else: the sampling service maps
an MCP ``sampling/createMessage`` onto a :class:`Request`, an adapter maps the request onto
its vendor's API and the vendor's answer back onto a :class:`Result`. Keeping the neutral
types close to MCP's own sampling shapes (2025-11-25: text / image / audio / tool_use /
tool_result content, ``toolChoice`` modes, the four standard stop reasons) makes that
mapping nearly one-to-one, while no vendor type leaks past an adapter.

Rules every adapter keeps:

* Content a model or API cannot take is refused with
  :class:`~agenthost.errors.UnsupportedContent` *before* anything is sent; never dropped.
* Vendor failures become :class:`~agenthost.errors.ProviderError` carrying the vendor's
  own message; Trio cancellation passes through untouched.
* ``stop_reason`` is one of :data:`END_TURN`, :data:`STOP_SEQUENCE`, :data:`MAX_TOKENS`,
  :data:`TOOL_USE`, or the vendor's raw reason when it is none of those (MCP keeps
  ``stopReason`` an open string for exactly this).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import attrs

from agenthost.errors import UnsupportedContent

__all__ = [
    "CAPABILITIES",
    "END_TURN",
    "MAX_TOKENS",
    "STOP_SEQUENCE",
    "TIERS",
    "TOOL_USE",
    "AudioContent",
    "Capability",
    "Completed",
    "Content",
    "ImageContent",
    "Message",
    "ModelInfo",
    "Provider",
    "Request",
    "Result",
    "Role",
    "StreamEvent",
    "TextContent",
    "TextDelta",
    "Tier",
    "Tool",
    "ToolChoice",
    "ToolReferenceContent",
    "ToolResultContent",
    "ToolResultPart",
    "ToolUseContent",
    "ToolUseEvent",
    "Usage",
    "check_capabilities",
    "required_capabilities",
]

END_TURN = "endTurn"
STOP_SEQUENCE = "stopSequence"
MAX_TOKENS = "maxTokens"
TOOL_USE = "toolUse"

Role: TypeAlias = Literal["user", "assistant"]
ToolChoice: TypeAlias = Literal["auto", "required", "none"]
Capability: TypeAlias = Literal["images", "audio", "tools"]
Tier: TypeAlias = Literal["high", "mid", "low"]

CAPABILITIES: tuple[Capability, ...] = ("images", "audio", "tools")
#: Tiers from most to least capable; cross-provider hint mapping walks this order.
TIERS: tuple[Tier, ...] = ("high", "mid", "low")


@attrs.frozen(kw_only=True)
class TextContent:
    """Plain text."""

    text: str
    type: Literal["text"] = "text"


@attrs.frozen(kw_only=True)
class ImageContent:
    """An image, base64-encoded as MCP carries it (no decode/re-encode on the hot path)."""

    data: str
    mime_type: str
    type: Literal["image"] = "image"


@attrs.frozen(kw_only=True)
class AudioContent:
    """Audio, base64-encoded as MCP carries it."""

    data: str
    mime_type: str
    type: Literal["audio"] = "audio"


@attrs.frozen(kw_only=True)
class ToolUseContent:
    """The model asks for a tool call (MCP 2025-11-25 ``tool_use``)."""

    id: str
    name: str
    input: Mapping[str, Any]
    type: Literal["tool_use"] = "tool_use"


@attrs.frozen(kw_only=True)
class ToolReferenceContent:
    """A tool a tool search found, by name, in a tool result: a provider that defers
    loading natively expands it into the tool's definition (Anthropic ``tool_reference``);
    the agent sends these only to such providers (``Provider.native_tool_search``)."""

    tool_name: str
    type: Literal["tool_reference"] = "tool_reference"


ToolResultPart: TypeAlias = TextContent | ImageContent | AudioContent


@attrs.frozen(kw_only=True)
class ToolResultContent:
    """The answer to a :class:`ToolUseContent`, sent back in a user message.

    ``content`` holds what the sampling service could express neutrally; MCP resource links
    and embedded resources are turned into text by the caller before they reach here.
    """

    tool_use_id: str
    content: tuple[ToolResultPart | ToolReferenceContent, ...] = ()
    is_error: bool = False
    #: The tool's structuredContent; sent as JSON text when ``content`` is empty.
    structured_content: Mapping[str, Any] | None = None
    type: Literal["tool_result"] = "tool_result"


Content: TypeAlias = TextContent | ImageContent | AudioContent | ToolUseContent | ToolResultContent


@attrs.frozen(kw_only=True)
class Message:
    """One conversation turn; MCP has only the user and assistant roles."""

    role: Role
    content: tuple[Content, ...]

    @classmethod
    def user(cls, *parts: Content | str) -> Message:
        """A user message; bare strings become :class:`TextContent`."""
        return cls(role="user", content=_parts(parts))

    @classmethod
    def assistant(cls, *parts: Content | str) -> Message:
        """An assistant message; bare strings become :class:`TextContent`."""
        return cls(role="assistant", content=_parts(parts))


def _parts(parts: Iterable[Content | str]) -> tuple[Content, ...]:
    return tuple(TextContent(text=p) if isinstance(p, str) else p for p in parts)


@attrs.frozen(kw_only=True)
class Tool:
    """A tool the model may call during this request (MCP sampling ``tools``)."""

    name: str
    description: str | None = None
    #: A JSON Schema object, passed to the vendor unchanged.
    input_schema: Mapping[str, Any] = attrs.field(factory=lambda: {"type": "object"})
    #: Offered for search only, its definition loaded when a search result references it
    #: (sent only to providers with ``native_tool_search``).
    defer_loading: bool = False
    #: This tool is the agent's search over the deferred tools: an API with a search tool
    #: of its own (OpenAI Responses ``tool_search``) sends it as that; others as any tool.
    tool_search: bool = False


@attrs.frozen(kw_only=True)
class Request:
    """One model call, provider-neutral; ``model`` is the concrete id selection chose."""

    model: str
    messages: tuple[Message, ...]
    max_tokens: int
    system_prompt: str | None = None
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()
    #: MCP's provider-specific pass-through; each adapter documents the keys it uses.
    metadata: Mapping[str, Any] | None = None
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice | None = None


@attrs.frozen(kw_only=True)
class Usage:
    """Token counts as the vendor billed them (input includes cached prompt tokens)."""

    input_tokens: int = 0
    output_tokens: int = 0


@attrs.frozen(kw_only=True)
class Result:
    """The assistant's answer; the role is always ``assistant``."""

    content: tuple[Content, ...]
    #: The concrete model id the vendor reports, which may be a dated snapshot.
    model: str
    stop_reason: str | None
    usage: Usage = Usage()

    @property
    def text(self) -> str:
        """All text blocks joined: what a plain chat answer shows."""
        return "".join(c.text for c in self.content if isinstance(c, TextContent))

    @property
    def tool_uses(self) -> tuple[ToolUseContent, ...]:
        """The tool calls in order, for the agent loop."""
        return tuple(c for c in self.content if isinstance(c, ToolUseContent))


@attrs.frozen(kw_only=True)
class TextDelta:
    """A piece of assistant text as it arrives."""

    text: str


@attrs.frozen(kw_only=True)
class ToolUseEvent:
    """A complete tool call; emitted once its arguments have fully arrived."""

    tool_use: ToolUseContent


@attrs.frozen(kw_only=True)
class Completed:
    """The last event of every stream: the same :class:`Result` ``complete`` returns."""

    result: Result


StreamEvent: TypeAlias = TextDelta | ToolUseEvent | Completed


@attrs.frozen(kw_only=True)
class ModelInfo:
    """What selection and the adapters know about one model.

    Figures are relative where vendors publish none; the catalog notes the source of each.
    """

    id: str
    #: The configured provider *name* this model is reached through (``[providers.<name>]``).
    provider: str
    #: Who makes it ("anthropic", "openai", or anything for local models).
    vendor: str
    #: Family such as "claude-sonnet"; a hint naming the family matches its newest member.
    family: str
    tier: Tier
    aliases: tuple[str, ...] = ()
    context_window: int = 0
    max_output_tokens: int | None = None
    images: bool = False
    audio: bool = False
    tools: bool = False
    #: USD per million input / output tokens (0 for local models).
    input_cost: float = 0.0
    output_cost: float = 0.0
    #: Relative output speed, 0-100 (higher is faster).
    speed: float = 0.0
    #: Relative capability, 0-100 (higher is smarter).
    intelligence: float = 0.0
    #: ISO date of release; the tie-break "newest" compares these strings.
    released: str = ""
    source: str = ""

    @property
    def blended_cost(self) -> float:
        """USD per million tokens at a 3:1 input:output mix, the usual comparison basis."""
        return (3 * self.input_cost + self.output_cost) / 4

    def supports(self, capability: Capability) -> bool:
        """Whether the model takes this kind of input / feature."""
        return bool(getattr(self, capability))


def required_capabilities(request: Request) -> frozenset[Capability]:
    """The capabilities a request needs: images, audio (anywhere, tool results included), tools.

    The sampling service passes this to selection as a constraint, so a model that would
    refuse the request is never chosen in the first place.
    """
    needed: set[Capability] = set()
    if request.tools:
        needed.add("tools")
    for message in request.messages:
        for block in message.content:
            if isinstance(block, ToolUseContent | ToolResultContent):
                needed.add("tools")
            parts = block.content if isinstance(block, ToolResultContent) else (block,)
            for part in parts:
                if isinstance(part, ImageContent):
                    needed.add("images")
                elif isinstance(part, AudioContent):
                    needed.add("audio")
    return frozenset(needed)


def check_capabilities(request: Request, info: ModelInfo | None, *, provider: str) -> None:
    """Refuse a request whose content the model cannot take.

    Args:
        request: the request about to be sent.
        info: what the catalog knows of ``request.model``; ``None`` skips the check (an
            unknown model on a local server: its API format checks still apply).
        provider: the provider name, for the error message.

    Raises:
        UnsupportedContent: naming the model and every missing capability.
    """
    if info is None:
        return
    missing = sorted(c for c in required_capabilities(request) if not info.supports(c))
    if missing:
        raise UnsupportedContent(
            f"model {info.id!r} cannot take {', '.join(missing)} input, which this request "
            "carries; choose a model with that capability",
            provider=provider,
        )


@runtime_checkable
class Provider(Protocol):
    """A live connection to one configured LLM provider.

    **Cancellation:** every call is cancellable by an enclosing Trio cancel scope; nothing
    is retried after cancellation. **Resource handling:** a provider owns its HTTP client;
    ``aclose()`` releases it and a closed provider refuses further calls.
    """

    @property
    def name(self) -> str:
        """The configured provider name."""
        ...

    async def complete(self, request: Request) -> Result:
        """Send ``request`` and return the whole answer.

        Raises:
            UnsupportedContent: content the model or API cannot take (nothing was sent).
            ProviderError: the vendor failed (after the SDK's own retries).
        """
        ...

    def stream(self, request: Request) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        """Send ``request`` and yield events as they arrive; the last is :class:`Completed`.

        Use as ``async with provider.stream(req) as events: async for ev in events: ...``;
        leaving the block closes the HTTP response even when the stream was not drained.
        """
        ...

    async def aclose(self) -> None:
        """Close the HTTP client; idempotent."""
        ...
