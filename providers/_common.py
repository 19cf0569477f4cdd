"""Pieces both SDK adapters share: error mapping and the open/closed lifecycle.

Both vendor SDKs are generated from the same template, so their exceptions have the same
shape (``status_code``, ``body``); mapping them by attribute keeps this module free of
SDK imports (it is imported before any vendor SDK is).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

import attrs
import trio

from agenthost.errors import ProviderError

from .base import (
    Completed,
    ModelInfo,
    Request,
    Result,
    StreamEvent,
    TextContent,
    TextDelta,
    ToolResultContent,
    ToolUseContent,
    ToolUseEvent,
    Usage,
    check_capabilities,
)

__all__ = [
    "AdapterBase",
    "checked",
    "dumps_arguments",
    "parse_tool_input",
    "provider_error",
    "structured_text",
]

_RETRYABLE = frozenset({408, 409, 429})


def provider_error(
    exc: BaseException, provider: str, *, timeout: float | None = None
) -> ProviderError:
    """Turn a vendor SDK exception into a :class:`ProviderError` with the vendor's words.

    The SDK has already retried what it retries (connection errors, 408/409/429/5xx), so
    ``retryable`` only tells a caller that trying later may help.
    """
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    message: str | None = None
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            message = inner["message"]
    kind = type(exc).__name__
    if "Timeout" in kind:
        message = f"request timed out after {timeout:g}s" if timeout else "request timed out"
    if message is None:
        message = str(exc) or kind
    if isinstance(status, int):
        retryable = status in _RETRYABLE or status >= 500
        return ProviderError(
            f"{message} (HTTP {status})", provider=provider, status=status, retryable=retryable
        )
    # No status: a connection failure or timeout (retryable), or a client-side error.
    retryable = "Connection" in kind or "Timeout" in kind
    url = _request_url(exc)
    if retryable and url:
        message = f"{message} ({url})"  # "Connection error." alone does not say where
    return ProviderError(message, provider=provider, retryable=retryable)


#: What reading a vendor's response can raise when the body is not what the API sends:
#: not JSON, an SSE stream to a non-streaming request (the SDK then hands back a str),
#: fields missing or of the wrong type (the SDKs build their models without validating).
MALFORMED = (ValueError, TypeError, AttributeError, KeyError, IndexError)


def malformed_response(
    exc: BaseException | None, provider: str, got: object = None
) -> ProviderError:
    """A response that is not what the vendor's API sends: a provider error in one line.

    Why: a proxy, a misconfigured ``base_url`` or a half-compatible local server can answer
    anything; the user must see which provider and what was wrong, never a traceback.
    """
    if exc is None:
        what = f"expected a JSON object, got {type(got).__name__}"
        if isinstance(got, str):
            start = " ".join(got[:60].split())
            what += f" starting {start!r}" if start else " (empty)"
    else:
        what = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return ProviderError(f"malformed response from the API ({what})", provider=provider)


def checked(result: Result, provider: str) -> Result:
    """``result`` once its fields hold the types the agent relies on; else a provider error.

    Why: the SDKs build their models without validating, so a field holds whatever the body
    held (``"usage": {"input_tokens": "40"}``, a ``"name": null`` tool call). Passed on, such
    a value failed later, outside the adapter, as a traceback (the agent adding up tokens, the
    terminal writing a delta); a negative token count would also lower a token budget.
    """
    # Typed as the fields should be, held as the body had them: Any until checked.
    model: Any = result.model
    counts: tuple[Any, Any] = (result.usage.input_tokens, result.usage.output_tokens)
    if model is None or None in counts:
        # Left out by some compatible servers: not known, which is not malformed.
        usage = Usage(input_tokens=counts[0] or 0, output_tokens=counts[1] or 0)
        result = attrs.evolve(result, model=model or "", usage=usage)
    problem = _result_problem(result)
    if problem is not None:
        raise malformed_response(TypeError(problem), provider)
    return result


def _result_problem(result: Result) -> str | None:
    if _not(result.model, str):
        return f"the model name is {type(result.model).__name__}"
    if result.stop_reason is not None and _not(result.stop_reason, str):
        return f"the stop reason is {type(result.stop_reason).__name__}"
    for field, count in (
        ("input", result.usage.input_tokens),
        ("output", result.usage.output_tokens),
    ):
        if _not(count, int) or isinstance(count, bool) or count < 0:
            shown = count if isinstance(count, int) else type(count).__name__
            return f"usage {field}_tokens is {shown}, not a token count"
    for block in result.content:
        problem = _block_problem(block)
        if problem is not None:
            return problem
    return None


def _block_problem(block: object) -> str | None:
    if isinstance(block, TextContent) and _not(block.text, str):
        return f"a text is {type(block.text).__name__}"
    if isinstance(block, ToolUseContent):
        for field, value in (("id", block.id), ("name", block.name)):
            if _not(value, str):
                return f"a tool call's {field} is {type(value).__name__}"
        if _not(block.input, Mapping):
            return f"a tool call's input is {type(block.input).__name__}"
    return None


def _not(value: object, kind: type) -> bool:
    """Whether ``value`` is not a ``kind``; taking ``object``, so a field typed ``kind``
    can be checked (the SDKs do not check it) without the check reading as always true."""
    return not isinstance(value, kind)


def _checked_event(event: StreamEvent, provider: str) -> StreamEvent:
    """A stream event as :func:`checked` would take it (see there why)."""
    problem: str | None = None
    if isinstance(event, TextDelta):
        if _not(event.text, str):
            problem = f"a text delta is {type(event.text).__name__}"
    elif isinstance(event, ToolUseEvent):
        problem = _block_problem(event.tool_use)
    elif isinstance(event, Completed):
        return Completed(result=checked(event.result, provider))
    if problem is not None:
        raise malformed_response(TypeError(problem), provider)
    return event


def _request_url(exc: BaseException) -> str | None:
    """The URL the failed request went to, without credentials or query (keys travel there)."""
    url = getattr(getattr(exc, "request", None), "url", None)
    if url is None:
        return None
    parts = urlsplit(str(url))
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def structured_text(block: ToolResultContent) -> str | None:
    """The JSON text of a tool result's structuredContent, used when it has no content."""
    if block.structured_content is None or block.content:
        return None
    return json.dumps(block.structured_content, ensure_ascii=False)


class AdapterBase:
    """Name, model facts and the closed flag shared by the SDK adapters."""

    def __init__(self, *, name: str, models: Mapping[str, ModelInfo] | None) -> None:
        self._name = name
        self._models = dict(models or {})
        self._closed = False

    @property
    def name(self) -> str:
        """The configured provider name."""
        return self._name

    def _ensure_open(self) -> None:
        if self._closed:
            raise ProviderError("this provider has been closed", provider=self._name)

    def _checked(self, request: Request) -> None:
        """Before building a request: refuse it on a closed provider, or when it carries
        content the model cannot take (nothing is sent then)."""
        self._ensure_open()
        check_capabilities(request, self._info(request.model), provider=self._name)

    def _info(self, model: str) -> ModelInfo | None:
        info = self._models.get(model)
        if info is None:
            info = next((m for m in self._models.values() if model in m.aliases), None)
        return info

    async def aclose(self) -> None:
        """Close the SDK client (and with it the HTTP client); idempotent."""
        if self._closed:
            return
        self._closed = True
        # Shielded and bounded: an outer cancellation must not leave the client open.
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            await self._close_client()

    async def _close_client(self) -> None:
        raise NotImplementedError

    @asynccontextmanager
    async def _streaming(
        self, raw: Any, events: AsyncGenerator[StreamEvent, None]
    ) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        """Hand out a stream's events; always close them and the HTTP response after.

        Closing runs even when the caller stopped early or is being cancelled, bounded so
        a stuck peer cannot hold us. Events that are not what the API sends (a misrouted
        ``base_url``, a half-compatible server) end the stream with a provider error.
        """
        guarded = self._guarded(events)
        try:
            yield guarded
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await guarded.aclose()
                await events.aclose()
                await raw.close()

    async def _guarded(
        self, events: AsyncGenerator[StreamEvent, None]
    ) -> AsyncGenerator[StreamEvent, None]:
        try:
            async for event in events:
                yield _checked_event(event, self._name)
        except ProviderError:
            raise
        except MALFORMED as exc:
            raise malformed_response(exc, self._name) from exc

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def dumps_arguments(value: Mapping[str, Any]) -> str:
    """Tool-call arguments as the JSON text OpenAI-style APIs carry."""
    return json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"))


def parse_tool_input(text: str, provider: str) -> Mapping[str, Any]:
    """Parse streamed/encoded tool arguments; malformed JSON is a provider failure.

    Passing a broken call on (or guessing at it) would run a tool with arguments the model
    never meant, so it is refused with the parser's own message.
    """
    if not text or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ProviderError(
            f"the model sent tool arguments that are not JSON: {exc}", provider=provider
        ) from None
    if not isinstance(value, dict):
        raise ProviderError(
            "the model sent tool arguments that are not a JSON object", provider=provider
        )
    return value
