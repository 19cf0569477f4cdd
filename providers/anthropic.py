"""Anthropic Messages API adapter (official ``anthropic`` SDK 2.x, async, runs under Trio).

Mapping choices, stated once:

* ``system_prompt`` -> ``system``; ``stop_sequences`` -> ``stop_sequences``; tools ->
  ``tools`` with ``input_schema``; tool choice auto/required/none -> auto/any/none.
* Images go as base64 sources (JPEG, PNG, GIF, WebP only). **Audio is refused**: the
  Messages API has no audio input, so it raises ``UnsupportedContent`` instead of vanishing.
* ``temperature``: the 2.x SDK and API version no longer take it (current Claude models
  choose their own sampling); MCP lets the client modify the request, so it is not sent
  and a debug log line says so.
* ``metadata``: the API accepts only ``user_id``; that key is passed, others are not.
* Tool search (``native_tool_search``): a tool with ``defer_loading`` is sent with
  ``"defer_loading": true`` and a ``tool_reference`` in a tool result as
  ``{"type": "tool_reference", "tool_name": ...}``: the Messages API's client-side tool
  search, in which the API expands each reference into the deferred tool's definition.
* Output thinking blocks and server-tool blocks are not MCP content and are skipped.
* Stop reasons end_turn / stop_sequence / max_tokens / tool_use map to MCP's four names;
  others (``refusal``, ``pause_turn`` ...) are passed through as the API gives them.

The SDK retries 408/409/429/5xx and connection errors itself (``max_retries``); a failure
that remains becomes ``ProviderError`` with Anthropic's message.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import httpx2

from agenthost.errors import ProviderError, UnsupportedContent

from ._common import (
    MALFORMED,
    AdapterBase,
    checked,
    malformed_response,
    parse_tool_input,
    provider_error,
    structured_text,
)
from .base import (
    END_TURN,
    MAX_TOKENS,
    STOP_SEQUENCE,
    TOOL_USE,
    AudioContent,
    Completed,
    Content,
    ImageContent,
    ModelInfo,
    Request,
    Result,
    StreamEvent,
    TextContent,
    TextDelta,
    ToolReferenceContent,
    ToolResultContent,
    ToolUseContent,
    ToolUseEvent,
    Usage,
)

__all__ = ["AnthropicProvider"]

log = logging.getLogger(__name__)

_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_STOP = {
    "end_turn": END_TURN,
    "stop_sequence": STOP_SEQUENCE,
    "max_tokens": MAX_TOKENS,
    "tool_use": TOOL_USE,
}
_TOOL_CHOICE = {"auto": "auto", "required": "any", "none": "none"}


class AnthropicProvider(AdapterBase):
    """A provider backed by ``anthropic.AsyncAnthropic``.

    Args:
        name: the configured provider name.
        api_key: the key itself (read from the environment by ``agenthost_providers.config``).
        base_url: a gateway URL; ``None`` is Anthropic's API (``ANTHROPIC_BASE_URL`` in the
            process environment is deliberately not consulted: config is explicit).
        timeout: seconds per HTTP attempt.
        max_retries: the SDK's retries on 408/409/429/5xx and connection errors.
        models: catalog facts by model id, for refusing content a model cannot take.
        http_client: an ``httpx2.AsyncClient`` to send through (tests inject MockTransport).
    """

    #: The Messages API defers tool definitions itself (see the module docstring).
    native_tool_search = True

    def __init__(
        self,
        *,
        name: str,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        models: Mapping[str, ModelInfo] | None = None,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        if not api_key:
            raise ProviderError("no API key given", provider=name)
        super().__init__(name=name, models=models)
        self._timeout = timeout
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url or "https://api.anthropic.com",
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )

    async def _close_client(self) -> None:
        await self._client.close()

    async def complete(self, request: Request) -> Result:
        """Send one Messages API call; see :meth:`agenthost_providers.base.Provider.complete`."""
        params = self._params(request)
        try:
            message = await self._client.messages.create(**params)
        except anthropic.AnthropicError as exc:
            raise provider_error(exc, self.name, timeout=self._timeout) from exc
        except MALFORMED as exc:
            raise malformed_response(exc, self.name) from exc
        if isinstance(message, str | bytes):  # not JSON: e.g. an SSE stream
            raise malformed_response(None, self.name, message)
        try:
            return checked(_result(message), self.name)
        except ProviderError:
            raise
        except MALFORMED as exc:
            raise malformed_response(exc, self.name) from exc

    @asynccontextmanager
    async def stream(self, request: Request) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        """Stream one Messages API call; see :meth:`agenthost_providers.base.Provider.stream`."""
        params = self._params(request)
        try:
            raw = await self._client.messages.create(**params, stream=True)
        except anthropic.AnthropicError as exc:
            raise provider_error(exc, self.name, timeout=self._timeout) from exc
        async with self._streaming(raw, self._events(raw)) as events:
            yield events

    async def _events(self, raw: Any) -> AsyncGenerator[StreamEvent, None]:
        model = ""
        stop_reason: str | None = None
        usage_in = usage_out = 0
        blocks: dict[int, dict[str, Any]] = {}
        content: list[Content] = []
        try:
            async for event in raw:
                kind = event.type
                if kind == "message_start":
                    model = event.message.model
                    usage_in = _input_tokens(event.message.usage)
                    usage_out = event.message.usage.output_tokens or 0
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "text":
                        blocks[event.index] = {"type": "text", "text": [block.text]}
                        if block.text:
                            yield TextDelta(text=block.text)
                    elif block.type == "tool_use":
                        blocks[event.index] = {
                            "type": "tool_use",
                            "id": block.id,
                            "name": block.name,
                            "json": [],
                        }
                elif kind == "content_block_delta":
                    state = blocks.get(event.index)
                    delta = event.delta
                    if state is None:
                        continue
                    if delta.type == "text_delta":
                        state["text"].append(delta.text)
                        yield TextDelta(text=delta.text)
                    elif delta.type == "input_json_delta":
                        state["json"].append(delta.partial_json)
                elif kind == "content_block_stop":
                    state = blocks.pop(event.index, None)
                    if state is None:
                        continue
                    if state["type"] == "text":
                        content.append(TextContent(text="".join(state["text"])))
                    else:
                        tool = ToolUseContent(
                            id=state["id"],
                            name=state["name"],
                            input=parse_tool_input("".join(state["json"]), self.name),
                        )
                        content.append(tool)
                        yield ToolUseEvent(tool_use=tool)
                elif kind == "message_delta":
                    if event.delta.stop_reason is not None:
                        stop_reason = _STOP.get(event.delta.stop_reason, event.delta.stop_reason)
                    if event.usage.output_tokens is not None:
                        usage_out = event.usage.output_tokens
        except anthropic.AnthropicError as exc:
            raise provider_error(exc, self.name, timeout=self._timeout) from exc
        result = Result(
            content=tuple(content),
            model=model,
            stop_reason=stop_reason,
            usage=Usage(input_tokens=usage_in, output_tokens=usage_out),
        )
        yield Completed(result=result)

    def _params(self, request: Request) -> dict[str, Any]:
        self._checked(request)
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": [
                {"role": m.role, "content": [self._block(b) for b in m.content]}
                for m in request.messages
            ],
        }
        if request.system_prompt:
            params["system"] = request.system_prompt
        if request.stop_sequences:
            params["stop_sequences"] = list(request.stop_sequences)
        if request.temperature is not None:
            log.debug("%s: temperature is not supported by the Messages API; not sent", self.name)
        if request.metadata and isinstance(request.metadata.get("user_id"), str):
            params["metadata"] = {"user_id": request.metadata["user_id"]}
        if request.tools:
            params["tools"] = [
                {
                    "name": t.name,
                    "input_schema": dict(t.input_schema),
                    **({"description": t.description} if t.description else {}),
                    **({"defer_loading": True} if t.defer_loading else {}),
                }
                for t in request.tools
            ]
        if request.tool_choice is not None:
            params["tool_choice"] = {"type": _TOOL_CHOICE[request.tool_choice]}
        return params

    def _block(self, block: Content) -> dict[str, Any]:
        if isinstance(block, TextContent):
            return {"type": "text", "text": block.text}
        if isinstance(block, ImageContent):
            return self._image(block)
        if isinstance(block, AudioContent):
            raise UnsupportedContent(
                "the Anthropic Messages API takes no audio input; this request carries "
                f"{block.mime_type} audio",
                provider=self.name,
            )
        if isinstance(block, ToolUseContent):
            return {
                "type": "tool_use",
                "id": block.id,
                "name": block.name,
                "input": dict(block.input),
            }
        return self._tool_result(block)

    def _image(self, block: ImageContent) -> dict[str, Any]:
        if block.mime_type not in _IMAGE_TYPES:
            raise UnsupportedContent(
                f"Anthropic takes JPEG, PNG, GIF or WebP images, not {block.mime_type}",
                provider=self.name,
            )
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": block.mime_type, "data": block.data},
        }

    def _tool_result(self, block: ToolResultContent) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        for part in block.content:
            if isinstance(part, AudioContent):
                raise UnsupportedContent(
                    f"the result of tool call {block.tool_use_id!r} holds audio, which the "
                    "Anthropic Messages API cannot take",
                    provider=self.name,
                )
            if isinstance(part, ToolReferenceContent):
                parts.append({"type": "tool_reference", "tool_name": part.tool_name})
                continue
            parts.append(self._block(part))
        text = structured_text(block)
        if text is not None:
            parts.append({"type": "text", "text": text})
        out: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": parts,
        }
        if block.is_error:
            out["is_error"] = True
        return out


def _input_tokens(usage: Any) -> int:
    return int(
        (usage.input_tokens or 0)
        + (getattr(usage, "cache_creation_input_tokens", None) or 0)
        + (getattr(usage, "cache_read_input_tokens", None) or 0)
    )


def _result(message: Any) -> Result:
    content: list[Content] = []
    for block in message.content:
        if block.type == "text":
            content.append(TextContent(text=block.text))
        elif block.type == "tool_use":
            content.append(ToolUseContent(id=block.id, name=block.name, input=dict(block.input)))
        else:
            log.debug("skipping %s block: not MCP sampling content", block.type)
    reason = message.stop_reason
    return Result(
        content=tuple(content),
        model=message.model,
        stop_reason=_STOP.get(reason, reason) if reason is not None else None,
        usage=Usage(
            input_tokens=_input_tokens(message.usage), output_tokens=message.usage.output_tokens
        ),
    )
