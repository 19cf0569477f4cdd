"""LLM providers for agenthost: neutral types, the model catalog, selection, adapters.

Importing this package is cheap: the vendor SDKs (``anthropic``, ``openai``) are imported
only when a provider of that kind is built (``agenthost_providers.config.build_provider``), so
``agenthost --help`` never pays for them. This package knows nothing of MCP sessions or
the host; it takes plain :class:`Request` objects and returns :class:`Result` objects.
"""

from __future__ import annotations

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
    Provider,
    Request,
    Result,
    StreamEvent,
    TextContent,
    TextDelta,
    Tool,
    ToolResultContent,
    ToolUseContent,
    ToolUseEvent,
    Usage,
    required_capabilities,
)
from .config import (
    ProvidersConfig,
    ProviderSettings,
    ProviderStatus,
    available_models,
    build_provider,
    default_choice,
    open_providers,
    parse_providers,
    provider_status,
)
from .selection import Constraints, ModelPreferences, Selection, select_model

__all__ = [
    "END_TURN",
    "MAX_TOKENS",
    "STOP_SEQUENCE",
    "TOOL_USE",
    "AudioContent",
    "Completed",
    "Constraints",
    "Content",
    "ImageContent",
    "Message",
    "ModelInfo",
    "ModelPreferences",
    "Provider",
    "ProviderSettings",
    "ProviderStatus",
    "ProvidersConfig",
    "Request",
    "Result",
    "Selection",
    "StreamEvent",
    "TextContent",
    "TextDelta",
    "Tool",
    "ToolResultContent",
    "ToolUseContent",
    "ToolUseEvent",
    "Usage",
    "available_models",
    "build_provider",
    "default_choice",
    "open_providers",
    "parse_providers",
    "provider_status",
    "required_capabilities",
    "select_model",
]
