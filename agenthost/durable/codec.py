"""Plain JSON for what crosses Temporal: model requests and replies, transcripts.

Workflow state, activity arguments and results are stored in the run's history, so they
are plain JSON values (dicts, lists, strings), never pickled objects: a worker of a newer
release can read a run an older one started. One converter here, used by the workflow,
the activities and the client alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cattrs

import agenthost_providers.base as llm
from agenthost.agent.transcript import ToolCallRecord, Transcript

__all__ = ["dump", "load_content", "load_request", "load_result", "load_transcript"]

_CONTENT: dict[str, type[Any]] = {
    "text": llm.TextContent,
    "image": llm.ImageContent,
    "audio": llm.AudioContent,
    "tool_use": llm.ToolUseContent,
    "tool_result": llm.ToolResultContent,
}

_converter = cattrs.Converter()


def _content(value: Any, _: Any) -> Any:
    kind = value.get("type") if isinstance(value, Mapping) else None
    cls = _CONTENT.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown content type {kind!r}")
    return _converter.structure(value, cls)


_converter.register_structure_hook(llm.Content, _content)
_converter.register_structure_hook(llm.ToolResultPart, _content)


def dump(value: Any) -> Any:
    """Any of this module's types as plain JSON values."""
    return _converter.unstructure(value)


def load_content(value: Any) -> llm.Content:
    return _content(value, None)  # type: ignore[no-any-return]


def load_request(value: Any) -> llm.Request:
    return _converter.structure(value, llm.Request)


def load_result(value: Any) -> llm.Result:
    return _converter.structure(value, llm.Result)


def load_transcript(value: Any) -> Transcript:
    return _converter.structure(value, Transcript)


def load_call(value: Any) -> ToolCallRecord:
    return _converter.structure(value, ToolCallRecord)
