"""MCP content <-> provider-neutral content, for sampling and the agent loop.

MCP carries binary as bytes (decoded from base64 by the converter); the provider types
carry base64 text, which is what the vendor APIs want. Content that has no neutral form
(resource links, embedded text resources) becomes text the model can read, with the URI
kept, rather than being dropped: a model that is told a resource exists can ask for it.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

import agenthost_providers.base as llm
from agenthost.errors import JSONRPCError
from agenthost.protocol.jsonrpc import INVALID_PARAMS
from agenthost.protocol.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    ResourceLink,
    SamplingMessage,
    TextContent,
    TextResourceContents,
    ToolResultContent,
    ToolUseContent,
    UnknownContent,
)

__all__ = [
    "mcp_block_to_llm",
    "prompt_messages_to_llm",
    "sampling_messages_to_llm",
    "tool_result_to_llm",
]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _resource_text(resource: Any) -> str:
    if isinstance(resource, TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}"
    if isinstance(resource, BlobResourceContents):
        mime = resource.mime_type or "application/octet-stream"
        return f"[binary resource {resource.uri} ({mime}, {len(resource.blob)} bytes)]"
    return f"[resource {getattr(resource, 'uri', '?')}]"


def _simple_part(block: Any) -> llm.ToolResultPart:
    """A block as text, image or audio (what every provider's tool results can hold)."""
    if isinstance(block, TextContent):
        return llm.TextContent(text=block.text)
    if isinstance(block, ImageContent):
        return llm.ImageContent(data=_b64(block.data), mime_type=block.mime_type)
    if isinstance(block, AudioContent):
        return llm.AudioContent(data=_b64(block.data), mime_type=block.mime_type)
    if isinstance(block, ResourceLink):
        about = f": {block.description}" if block.description else ""
        return llm.TextContent(text=f"[resource link {block.uri} ({block.name}){about}]")
    if isinstance(block, EmbeddedResource):
        return llm.TextContent(text=_resource_text(block.resource))
    if isinstance(block, UnknownContent):
        raise JSONRPCError(INVALID_PARAMS, f"unsupported content type {block.type!r}")
    raise JSONRPCError(INVALID_PARAMS, f"unsupported content block {type(block).__name__}")


def mcp_block_to_llm(block: Any) -> llm.Content:
    """One MCP content block as provider-neutral content."""
    if isinstance(block, ToolUseContent):
        return llm.ToolUseContent(id=block.id, name=block.name, input=block.input)
    if isinstance(block, ToolResultContent):
        return llm.ToolResultContent(
            tool_use_id=block.tool_use_id,
            content=tuple(_simple_part(b) for b in block.content),
            is_error=bool(block.is_error),
            structured_content=block.structured_content,
        )
    return _simple_part(block)


def sampling_messages_to_llm(messages: Iterable[SamplingMessage]) -> tuple[llm.Message, ...]:
    out = []
    for message in messages:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        out.append(llm.Message(role=message.role, content=tuple(map(mcp_block_to_llm, blocks))))
    return tuple(out)


def prompt_messages_to_llm(messages: Sequence[PromptMessage]) -> list[llm.Message]:
    """A prompt's messages (text, image, embedded resources) as conversation turns."""
    return [llm.Message(role=m.role, content=(mcp_block_to_llm(m.content),)) for m in messages]


def tool_result_to_llm(tool_use_id: str, result: CallToolResult) -> llm.ToolResultContent:
    """A tool call's result as the model will read it (errors included: it may retry)."""
    parts = tuple(_simple_part(block) for block in result.content)
    if not parts and result.structured_content is not None:
        parts = (llm.TextContent(text=orjson.dumps(result.structured_content).decode()),)
    return llm.ToolResultContent(
        tool_use_id=tool_use_id,
        content=parts,
        is_error=bool(result.is_error),
        structured_content=result.structured_content
        if isinstance(result.structured_content, dict)
        else None,
    )
