"""OpenAI Chat Completions adapter (official ``openai`` SDK 3.x), also for compatible servers.

Chat Completions is the default API rather than Responses because it is the one API every
OpenAI-compatible server (Ollama, vLLM, llama.cpp server, LM Studio) implements, so one
mapping serves hosted and local models alike. ``api = "responses"`` in the provider's
config selects :mod:`agenthost_providers.openai_responses` instead (native tool search, reasoning
items kept across turns); both share :class:`OpenAIClient`, the SDK client set-up.

Mapping choices, stated once:

* ``system_prompt`` -> a leading ``system`` message; images -> ``image_url`` data URLs;
  audio -> ``input_audio`` (WAV and MP3 only, the formats the API takes; others refused).
* Tool results -> one ``tool`` message each (text only, as the API requires); images or
  audio a tool returned follow in one user message labelled with the tool call id, so
  nothing is dropped. ``is_error`` results are prefixed ``Error:``.
* Assistant messages carry only text and tool calls; media there is refused.
* ``max_tokens`` -> ``max_completion_tokens`` for OpenAI, ``max_tokens`` for compatible
  servers (several only know the older name). ``stop_sequences`` -> ``stop``.
* ``metadata["user_id"]`` -> ``safety_identifier`` (OpenAI) / ``user`` (compatible); other
  metadata keys are not sent (OpenAI's own ``metadata`` needs stored completions).
* Stop reasons: ``length`` -> maxTokens, ``tool_calls`` -> toolUse, ``stop`` -> endTurn, or
  stopSequence when the server says which stop string matched (vLLM's ``stop_reason``);
  OpenAI itself reports a stop sequence as plain ``stop``, which cannot be told apart.
* API key: required for ``openai``; optional for compatible servers with a ``base_url``
  (local servers take none, so a fixed placeholder, not a secret, fills the header).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import openai

from agenthost.errors import ProviderError, UnsupportedContent

from ._common import (
    MALFORMED,
    AdapterBase,
    checked,
    dumps_arguments,
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
    Message,
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

__all__ = ["OpenAIClient", "OpenAIProvider"]

log = logging.getLogger(__name__)

_NO_KEY = "no-key-configured"
_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}
_FINISH = {"length": MAX_TOKENS, "tool_calls": TOOL_USE, "function_call": TOOL_USE}


class OpenAIClient(AdapterBase):
    """The ``openai.AsyncOpenAI`` client both OpenAI APIs' adapters are built on.

    Args:
        name: the configured provider name.
        api_key: the key; may be ``None`` only when ``compatible`` and ``base_url`` is set.
        base_url: an OpenAI-compatible server (``http://127.0.0.1:11434/v1`` for Ollama);
            ``None`` is OpenAI's API.
        compatible: True for third-party servers (changes ``max_tokens``/``user`` naming).
        timeout: seconds per HTTP attempt.
        max_retries: the SDK's retries on 408/409/429/5xx and connection errors.
        models: catalog facts by model id, for refusing content a model cannot take.
        http_client: an ``httpx2.AsyncClient`` to send through (tests inject MockTransport).

    Raises:
        ProviderError: no key for OpenAI's own API.
    """

    def __init__(
        self,
        *,
        name: str,
        api_key: str | None,
        base_url: str | None = None,
        compatible: bool = False,
        timeout: float = 120.0,
        max_retries: int = 2,
        models: Mapping[str, ModelInfo] | None = None,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        if not api_key and not (compatible and base_url):
            raise ProviderError("no API key given", provider=name)
        super().__init__(name=name, models=models)
        self._compatible = compatible
        self._timeout = timeout
        self._client = openai.AsyncOpenAI(
            api_key=api_key or _NO_KEY,
            base_url=base_url or "https://api.openai.com/v1",
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )

    async def _close_client(self) -> None:
        await self._client.close()

    async def _answer(
        self,
        create: Callable[..., Awaitable[Any]],
        params: Mapping[str, Any],
        parse: Callable[[Any], Result],
    ) -> Result:
        """One non-streaming call through ``create``, its answer read by ``parse``: SDK
        failures and answers that are not what the API sends become provider errors."""
        try:
            response = await create(**params)
        except openai.OpenAIError as exc:
            raise provider_error(exc, self.name, timeout=self._timeout) from exc
        except MALFORMED as exc:
            raise malformed_response(exc, self.name) from exc
        if isinstance(response, str | bytes):  # not JSON: e.g. an SSE stream
            raise malformed_response(None, self.name, response)
        try:
            return checked(parse(response), self.name)
        except ProviderError:
            raise
        except MALFORMED as exc:
            raise malformed_response(exc, self.name) from exc

    def _shared_params(self, request: Request) -> dict[str, Any]:
        """The parameters both OpenAI APIs name alike: temperature, tool choice, and the
        end user's id (``safety_identifier``; compatible servers know the older ``user``)."""
        params: dict[str, Any] = {}
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.tool_choice is not None:
            params["tool_choice"] = request.tool_choice
        user = request.metadata.get("user_id") if request.metadata else None
        if isinstance(user, str):
            params["user" if self._compatible else "safety_identifier"] = user
        return params

    async def _open(self, create: Callable[..., Awaitable[Any]], params: Mapping[str, Any]) -> Any:
        """Start a streaming call; an SDK failure becomes a provider error."""
        try:
            return await create(**params)
        except openai.OpenAIError as exc:
            raise provider_error(exc, self.name, timeout=self._timeout) from exc


class OpenAIProvider(OpenAIClient):
    """A provider speaking Chat Completions (see the module docstring); arguments as for
    :class:`OpenAIClient`."""

    async def complete(self, request: Request) -> Result:
        """One Chat Completions call; see :meth:`agenthost_providers.base.Provider.complete`."""
        params = self._params(request)
        return await self._answer(self._client.chat.completions.create, params, self._result)

    @asynccontextmanager
    async def stream(self, request: Request) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        """Stream Chat Completions; see :meth:`agenthost_providers.base.Provider.stream`."""
        params = self._params(request)
        params["stream"] = True
        params["stream_options"] = {"include_usage": True}
        raw = await self._open(self._client.chat.completions.create, params)
        async with self._streaming(raw, self._events(raw)) as events:
            yield events

    async def _events(self, raw: Any) -> AsyncGenerator[StreamEvent, None]:
        model = ""
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        matched_stop: Any = None
        usage = Usage()
        try:
            async for chunk in raw:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices[:1]:
                    delta = choice.delta
                    if delta.content:
                        text.append(delta.content)
                        yield TextDelta(text=delta.content)
                    for call in delta.tool_calls or ():
                        state = calls.setdefault(call.index, {"id": "", "name": "", "args": []})
                        if call.id:
                            state["id"] = call.id
                        if call.function is not None:
                            if call.function.name:
                                state["name"] += call.function.name
                            if call.function.arguments:
                                state["args"].append(call.function.arguments)
                    if choice.finish_reason is not None:
                        finish = choice.finish_reason
                        matched_stop = getattr(choice, "stop_reason", None)
        except openai.OpenAIError as exc:
            raise provider_error(exc, self.name, timeout=self._timeout) from exc
        content: list[Content] = [TextContent(text="".join(text))] if text else []
        for index in sorted(calls):
            state = calls[index]
            tool = ToolUseContent(
                id=state["id"],
                name=state["name"],
                input=parse_tool_input("".join(state["args"]), self.name),
            )
            content.append(tool)
            yield ToolUseEvent(tool_use=tool)
        result = Result(
            content=tuple(content),
            model=model,
            stop_reason=_stop_reason(finish, matched_stop),
            usage=usage,
        )
        yield Completed(result=result)

    # --------------------------------------------------------------------- request side

    def _params(self, request: Request) -> dict[str, Any]:
        self._checked(request)
        messages: list[dict[str, Any]] = []
        if request.system_prompt:
            messages.append({"role": "system", "content": request.system_prompt})
        for message in request.messages:
            messages.extend(self._message(message))
        params: dict[str, Any] = {"model": request.model, "messages": messages}
        params["max_tokens" if self._compatible else "max_completion_tokens"] = request.max_tokens
        params.update(self._shared_params(request))
        if request.stop_sequences:
            params["stop"] = list(request.stop_sequences)
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "parameters": dict(t.input_schema),
                        **({"description": t.description} if t.description else {}),
                    },
                }
                for t in request.tools
            ]
        return params

    def _message(self, message: Message) -> list[dict[str, Any]]:
        if message.role == "assistant":
            return [self._assistant(message)]
        out: list[dict[str, Any]] = []
        parts: list[dict[str, Any]] = []
        carried: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, ToolResultContent):
                out.append(self._tool_message(block, carried))
            elif isinstance(block, ToolUseContent):
                raise UnsupportedContent(
                    "a tool_use block can only appear in an assistant message", provider=self.name
                )
            else:
                parts.append(self._part(block))
        if parts or carried:
            out.append({"role": "user", "content": carried + parts})
        return out

    def _assistant(self, message: Message) -> dict[str, Any]:
        text: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextContent):
                text.append(block.text)
            elif isinstance(block, ToolUseContent):
                calls.append(
                    {
                        "id": block.id,
                        "type": "function",
                        "function": {"name": block.name, "arguments": dumps_arguments(block.input)},
                    }
                )
            else:
                raise UnsupportedContent(
                    "Chat Completions assistant messages carry only text and tool calls, "
                    f"not {block.type}",
                    provider=self.name,
                )
        out: dict[str, Any] = {"role": "assistant", "content": "".join(text) if text else None}
        if calls:
            out["tool_calls"] = calls
        return out

    def _tool_message(
        self, block: ToolResultContent, carried: list[dict[str, Any]]
    ) -> dict[str, Any]:
        texts: list[str] = []
        media = 0
        for part in block.content:
            if isinstance(part, TextContent):
                texts.append(part.text)
            elif isinstance(part, ToolReferenceContent):  # no native tool search here
                texts.append(f"Loaded tool: {part.tool_name}")
            else:
                if not media:
                    carried.append(
                        {
                            "type": "text",
                            "text": f"Media returned by tool call {block.tool_use_id}:",
                        }
                    )
                media += 1
                carried.append(self._part(part))
        structured = structured_text(block)
        if structured is not None:
            texts.append(structured)
        body = "\n".join(texts)
        if media:
            body = (
                body + "\n" if body else ""
            ) + f"[{media} media item(s) follow in the next message]"
        if block.is_error:
            body = f"Error: {body}"
        return {"role": "tool", "tool_call_id": block.tool_use_id, "content": body}

    def _part(self, block: Content) -> dict[str, Any]:
        if isinstance(block, TextContent):
            return {"type": "text", "text": block.text}
        if isinstance(block, ImageContent):
            url = f"data:{block.mime_type};base64,{block.data}"
            return {"type": "image_url", "image_url": {"url": url}}
        if isinstance(block, AudioContent):
            fmt = _AUDIO_FORMATS.get(block.mime_type)
            if fmt is None:
                raise UnsupportedContent(
                    f"Chat Completions takes WAV or MP3 audio, not {block.mime_type}",
                    provider=self.name,
                )
            return {"type": "input_audio", "input_audio": {"data": block.data, "format": fmt}}
        raise UnsupportedContent(f"{block.type} cannot appear here", provider=self.name)

    # -------------------------------------------------------------------- response side

    def _result(self, response: Any) -> Result:
        if not response.choices:
            raise ProviderError("the response holds no choices", provider=self.name)
        choice = response.choices[0]
        message = choice.message
        content: list[Content] = []
        if message.content:
            content.append(TextContent(text=message.content))
        elif getattr(message, "refusal", None):
            content.append(TextContent(text=message.refusal))
        for call in message.tool_calls or ():
            if call.type != "function":
                log.debug("skipping %s tool call: not MCP sampling content", call.type)
                continue
            content.append(
                ToolUseContent(
                    id=call.id,
                    name=call.function.name,
                    input=parse_tool_input(call.function.arguments, self.name),
                )
            )
        return Result(
            content=tuple(content),
            model=response.model,
            stop_reason=_stop_reason(choice.finish_reason, getattr(choice, "stop_reason", None)),
            usage=_usage(response.usage),
        )


def _stop_reason(finish: str | None, matched_stop: Any) -> str | None:
    if finish is None:
        return None
    if finish == "stop":
        return STOP_SEQUENCE if isinstance(matched_stop, str) else END_TURN
    return _FINISH.get(finish, finish)


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    return Usage(input_tokens=usage.prompt_tokens or 0, output_tokens=usage.completion_tokens or 0)
