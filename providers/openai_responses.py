"""OpenAI Responses API adapter (official ``openai`` SDK 3.x, ``client.responses.create``).

Chosen with ``api = "responses"`` in an ``openai`` (or ``openai-compatible``) provider's
config; the default stays Chat Completions (:mod:`agenthost_providers.openai`), the one API every
OpenAI-compatible server implements. Responses is OpenAI's own newer API: it has native
tool search and returns reasoning items that should go back with the next request.

Mapping choices, stated once (the rest as in :mod:`agenthost_providers.openai`: errors, stop
reasons, a malformed response is a provider error):

* ``system_prompt`` -> ``instructions``; ``max_tokens`` -> ``max_output_tokens``;
  ``metadata["user_id"]`` -> ``safety_identifier`` (``user`` for compatible servers).
* User text and images -> ``input_text`` / ``input_image`` (a data URL) parts; **audio is
  refused** (Responses input has no audio part). Assistant text -> an assistant message.
* ``stop_sequences``: the Responses API has none; they are not sent, and a debug log line
  says so (as the Anthropic adapter does for ``temperature``).
* Tools -> ``function`` tools (``strict: false``: MCP schemas are not written for OpenAI's
  strict mode); a tool use -> a ``function_call`` item, its result a
  ``function_call_output`` (text, or text and ``input_image`` parts; ``is_error`` results
  prefixed ``Error:``).
* Tool search (``native_tool_search``): a deferred tool is sent with
  ``"defer_loading": true``; the agent's search tool (``Tool.tool_search``) as
  ``{"type": "tool_search", "execution": "client", "description", "parameters"}``. The
  model's ``tool_search_call`` becomes a use of that tool, which the agent answers with
  tool references; those go back as a ``tool_search_output`` whose ``tools`` are the found
  tools' full definitions, taken from the request's own tool list.
* Reasoning items the API returns are kept (bounded, by the tool call they led to) and
  sent again before that call in later requests, as the API asks; ``store`` is false (the
  host holds the conversation), so OpenAI's API is asked for their encrypted content.
* Stop reasons: an ``incomplete`` response for ``max_output_tokens`` -> maxTokens (other
  reasons passed through); tool or search calls -> toolUse; otherwise endTurn. A
  ``failed`` response is a provider error with the API's message.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import openai

from agenthost.errors import ProviderError, UnsupportedContent

from ._common import dumps_arguments, parse_tool_input, provider_error, structured_text
from .base import (
    END_TURN,
    MAX_TOKENS,
    TOOL_USE,
    AudioContent,
    Completed,
    Content,
    ImageContent,
    Message,
    Request,
    Result,
    StreamEvent,
    TextContent,
    TextDelta,
    Tool,
    ToolReferenceContent,
    ToolResultContent,
    ToolUseContent,
    ToolUseEvent,
    Usage,
)
from .openai import OpenAIClient

__all__ = ["OpenAIResponsesProvider"]

log = logging.getLogger(__name__)

#: Responses whose reasoning items are kept for the next requests; a conversation sends
#: back only its latest ones in practice, so this bounds memory, not usefulness.
REASONING_KEPT = 256
#: And their total size (JSON characters): reasoning is normally kilobytes per response, but
#: a server sending megabytes each must not have 256 of them held for the process's life.
REASONING_BYTES = 16 * 1024 * 1024
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
_TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})


class OpenAIResponsesProvider(OpenAIClient):
    """A provider speaking the Responses API (see the module docstring); arguments as for
    :class:`agenthost_providers.openai.OpenAIClient`."""

    #: The Responses API defers tool definitions itself (see the module docstring).
    native_tool_search = True

    @functools.cached_property
    def _reasoning(self) -> OrderedDict[str, tuple[int, list[dict[str, Any]]]]:
        """The conversation a response answered and its first call id -> the size and the
        reasoning items that preceded its calls (at most :data:`REASONING_KEPT` responses
        and :data:`REASONING_BYTES` in all, the oldest dropped first).

        Keyed by the conversation too (a digest of the system prompt and every message
        before the response), not by the call id alone: one provider serves the agent and
        every server's sampling requests, and a request that merely reuses a call id
        (a compatible backend may number them) must not be sent another conversation's
        reasoning."""
        return OrderedDict()

    async def complete(self, request: Request) -> Result:
        """Send one Responses call; see :meth:`agenthost_providers.base.Provider.complete`."""
        params = self._params(request)
        search = _search_tool(request.tools)
        before = _conversation(request).hexdigest()
        return await self._answer(
            self._client.responses.create, params, lambda r: self._result(r, search, before)
        )

    @asynccontextmanager
    async def stream(self, request: Request) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        """Stream one Responses call; see :meth:`agenthost_providers.base.Provider.stream`."""
        params = self._params(request)
        params["stream"] = True
        raw = await self._open(self._client.responses.create, params)
        events = self._events(raw, _search_tool(request.tools), _conversation(request).hexdigest())
        async with self._streaming(raw, events) as stream:
            yield stream

    async def _events(
        self, raw: Any, search: str | None, before: str
    ) -> AsyncGenerator[StreamEvent, None]:
        final: Any = None
        try:
            async for event in raw:
                kind = event.type
                if kind in _TEXT_DELTAS and event.delta:
                    yield TextDelta(text=event.delta)
                elif kind in _FINAL_EVENTS:
                    final = event.response
                elif kind == "error":
                    message = getattr(event, "message", None) or "the stream reported an error"
                    raise ProviderError(_one_line(message), provider=self.name)
        except openai.OpenAIError as exc:
            raise provider_error(exc, self.name, timeout=self._timeout) from exc
        if final is None:
            raise ProviderError("the stream ended without a final response", provider=self.name)
        result = self._result(final, search, before)
        for use in result.tool_uses:
            yield ToolUseEvent(tool_use=use)
        yield Completed(result=result)

    # --------------------------------------------------------------------- request side

    def _params(self, request: Request) -> dict[str, Any]:
        self._checked(request)
        params: dict[str, Any] = {
            "model": request.model,
            "input": self._input(request),
            "max_output_tokens": request.max_tokens,
        }
        if not self._compatible:
            params["store"] = False
            params["include"] = ["reasoning.encrypted_content"]
        if request.system_prompt:
            params["instructions"] = request.system_prompt
        params.update(self._shared_params(request))
        if request.stop_sequences:
            log.debug("%s: the Responses API has no stop sequences; not sent", self.name)
        if request.tools:
            params["tools"] = [_tool(t) for t in request.tools]
        return params

    def _input(self, request: Request) -> list[dict[str, Any]]:
        search = _search_tool(request.tools)
        searches = {
            block.id
            for message in request.messages
            for block in message.content
            if isinstance(block, ToolUseContent) and block.name == search
        }
        definitions = {t.name: t for t in request.tools}
        items: list[dict[str, Any]] = []
        before = _conversation(request, messages=False)
        for message in request.messages:
            if message.role == "assistant":
                items.extend(self._assistant(message, search, before.hexdigest()))
            else:
                items.extend(self._user(message, searches, definitions))
            before.update(repr(message).encode())
        return items

    def _assistant(self, message: Message, search: str | None, before: str) -> list[dict[str, Any]]:
        uses = [b for b in message.content if isinstance(b, ToolUseContent)]
        kept = self._reasoning.get(f"{before}:{uses[0].id}") if uses else None
        items: list[dict[str, Any]] = list(kept[1]) if kept else []
        text = []
        for block in message.content:
            if isinstance(block, TextContent):
                text.append(block.text)
            elif not isinstance(block, ToolUseContent):
                raise UnsupportedContent(
                    "Responses assistant messages carry only text and tool calls, "
                    f"not {block.type}",
                    provider=self.name,
                )
        if text:
            items.append({"type": "message", "role": "assistant", "content": "".join(text)})
        for use in uses:
            if use.name == search:
                items.append(
                    {
                        "type": "tool_search_call",
                        "call_id": use.id,
                        "execution": "client",
                        "arguments": dict(use.input),
                        "status": "completed",
                    }
                )
            else:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": use.id,
                        "name": use.name,
                        "arguments": dumps_arguments(use.input),
                    }
                )
        return items

    def _user(
        self, message: Message, searches: set[str], definitions: Mapping[str, Tool]
    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        parts: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, ToolResultContent):
                if block.tool_use_id in searches:
                    items.append(_search_output(block, definitions))
                else:
                    items.append(self._function_output(block))
            elif isinstance(block, ToolUseContent):
                raise UnsupportedContent(
                    "a tool_use block can only appear in an assistant message", provider=self.name
                )
            else:
                parts.append(self._part(block))
        if parts:
            items.append({"type": "message", "role": "user", "content": parts})
        return items

    def _function_output(self, block: ToolResultContent) -> dict[str, Any]:
        """Text alone goes as a string, as the API's examples send it; with media, as
        ``input_text`` / ``input_image`` parts in order."""
        parts: list[dict[str, Any]] = []
        for part in block.content:
            if isinstance(part, ToolReferenceContent):  # only a search's result holds these
                parts.append({"type": "input_text", "text": f"Loaded tool: {part.tool_name}"})
            else:
                parts.append(self._part(part))
        structured = structured_text(block)
        if structured is not None:
            parts.append({"type": "input_text", "text": structured})
        output: str | list[dict[str, Any]]
        if all(p["type"] == "input_text" for p in parts):
            output = "\n".join(p["text"] for p in parts)
            if block.is_error:
                output = f"Error: {output}"
        else:
            output = parts
            if block.is_error:
                output.insert(0, {"type": "input_text", "text": "Error:"})
        return {"type": "function_call_output", "call_id": block.tool_use_id, "output": output}

    def _part(self, block: Content) -> dict[str, Any]:
        if isinstance(block, TextContent):
            return {"type": "input_text", "text": block.text}
        if isinstance(block, ImageContent):
            url = f"data:{block.mime_type};base64,{block.data}"
            return {"type": "input_image", "image_url": url, "detail": "auto"}
        if isinstance(block, AudioContent):
            raise UnsupportedContent(
                f"the Responses API takes no audio input; this request carries {block.mime_type}"
                ' audio (the Chat Completions API does: api = "chat-completions")',
                provider=self.name,
            )
        raise UnsupportedContent(f"{block.type} cannot appear here", provider=self.name)

    # -------------------------------------------------------------------- response side

    def _result(self, response: Any, search: str | None, before: str) -> Result:
        if response.status == "failed":
            error = getattr(response, "error", None)
            message = getattr(error, "message", None) or "the response failed"
            raise ProviderError(_one_line(message), provider=self.name)
        text: list[str] = []
        uses: list[Content] = []
        reasoning: list[dict[str, Any]] = []
        for item in response.output:
            if item.type == "message":
                for part in item.content:
                    if part.type == "output_text":
                        text.append(part.text)
                    elif part.type == "refusal":
                        text.append(part.refusal)
            elif item.type == "function_call":
                uses.append(
                    ToolUseContent(
                        id=item.call_id,
                        name=item.name,
                        input=parse_tool_input(item.arguments, self.name),
                    )
                )
            elif item.type == "tool_search_call" and search is not None:
                uses.append(self._search_use(item, search))
            elif item.type == "reasoning":
                reasoning.append(item.to_dict())
            else:
                log.debug("skipping %s output item: not MCP sampling content", item.type)
        if uses and reasoning:
            self._keep_reasoning(before, uses[0], reasoning)
        content: list[Content] = [TextContent(text="".join(text))] if text else []
        content.extend(uses)
        return Result(
            content=tuple(content),
            model=response.model,
            stop_reason=_stop_reason(response, bool(uses)),
            usage=_usage(response.usage),
        )

    def _search_use(self, item: Any, search: str) -> ToolUseContent:
        arguments = item.arguments
        if not isinstance(arguments, Mapping):
            raise ProviderError(
                "the model sent tool search arguments that are not a JSON object",
                provider=self.name,
            )
        call_id = item.call_id or item.id
        return ToolUseContent(id=call_id, name=search, input=dict(arguments))

    def _keep_reasoning(self, before: str, first: Content, items: list[dict[str, Any]]) -> None:
        assert isinstance(first, ToolUseContent)
        kept = self._reasoning
        key = f"{before}:{first.id}"
        kept.pop(key, None)
        size = len(json.dumps(items))
        if size > REASONING_BYTES:  # larger than the whole bound: sent back without it
            log.debug("%s: reasoning of %d characters not kept", self.name, size)
            return
        kept[key] = (size, items)
        total = sum(n for n, _ in kept.values())
        while len(kept) > REASONING_KEPT or total > REASONING_BYTES:
            total -= kept.popitem(last=False)[1][0]


def _conversation(request: Request, *, messages: bool = True) -> hashlib._Hash:
    """A running digest of the conversation: the system prompt, then (``messages``) every
    message of ``request``; the key under which a response's reasoning is kept."""
    digest = hashlib.sha256(repr(request.system_prompt).encode())
    if messages:
        for message in request.messages:
            digest.update(repr(message).encode())
    return digest


def _one_line(message: object) -> str:
    """The API's own words for a failure, as one bounded line (they come from the peer)."""
    return " ".join(str(message).split())[:500]


def _search_tool(tools: Sequence[Tool]) -> str | None:
    """The name of the request's search tool, if it offers one."""
    return next((t.name for t in tools if t.tool_search), None)


def _tool(tool: Tool) -> dict[str, Any]:
    if tool.tool_search:
        return {
            "type": "tool_search",
            "execution": "client",
            "description": tool.description,
            "parameters": dict(tool.input_schema),
        }
    out = _function(tool)
    if tool.defer_loading:
        out["defer_loading"] = True
    return out


def _function(tool: Tool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "function",
        "name": tool.name,
        "parameters": dict(tool.input_schema),
        "strict": False,
    }
    if tool.description:
        out["description"] = tool.description
    return out


def _search_output(block: ToolResultContent, definitions: Mapping[str, Tool]) -> dict[str, Any]:
    """A search's answer: the definitions of the tools it found (none when it found none
    or failed; its words are for the neutral search, this API takes only tools)."""
    found = [
        definitions[p.tool_name]
        for p in block.content
        if isinstance(p, ToolReferenceContent) and p.tool_name in definitions
    ]
    return {
        "type": "tool_search_output",
        "call_id": block.tool_use_id,
        "execution": "client",
        "status": "completed",
        "tools": [_function(t) for t in found],
    }


def _stop_reason(response: Any, used_tools: bool) -> str | None:
    if response.status == "incomplete":
        details = getattr(response, "incomplete_details", None)
        reason = getattr(details, "reason", None) or "incomplete"
        return MAX_TOKENS if reason == "max_output_tokens" else reason
    return TOOL_USE if used_tools else END_TURN


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    return Usage(input_tokens=usage.input_tokens or 0, output_tokens=usage.output_tokens or 0)
