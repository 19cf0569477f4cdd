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

import trio

from agenthost.errors import ProviderError

from .base import ModelInfo, Request, StreamEvent, ToolResultContent, check_capabilities

__all__ = [
    "AdapterBase",
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
                yield event
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
