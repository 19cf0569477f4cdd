"""A conversation as JSON and back, so a chat or a run can be saved and resumed.

What is kept: the messages (every content kind the agent sends), the tools tool search
loaded, and every model call's usage (so a resumed conversation's cost adds up). Tool
call records are not kept: they describe what happened in a run, and the messages already
hold what the model saw. Pure functions, no I/O: where the file lives is the caller's.

A saved conversation is read back as untrusted input (a file can be edited or damaged):
anything that is not the shape written here is a :class:`ValueError` naming the place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

import agenthost_providers.base as llm
from agenthost.agent.transcript import Transcript, TurnUsage

__all__ = ["HISTORY_VERSION", "history_from_json", "history_to_json"]

HISTORY_VERSION = 1


def history_to_json(transcript: Transcript) -> dict[str, Any]:
    """The conversation of ``transcript`` as a JSON-ready dict."""
    return {
        "version": HISTORY_VERSION,
        "task": transcript.task,
        "provider": transcript.provider,
        "model": transcript.model,
        "messages": [
            {
                "role": m.role,
                "content": [attrs.asdict(c, value_serializer=_plain) for c in m.content],
            }
            for m in transcript.messages
        ],
        "loaded_tools": list(transcript.loaded_tools),
        "usage": [u.to_json() for u in transcript.usage],
    }


def _plain(_inst: Any, _field: Any, value: Any) -> Any:
    """Any read-only mapping (tool arguments may be one) as a dict, for JSON."""
    if isinstance(value, Mapping) and not isinstance(value, dict):
        return dict(value)
    return value


def history_from_json(data: Any) -> Transcript:
    """A transcript holding the saved conversation (no tool calls, no stop reason).

    Raises:
        ValueError: not a conversation saved by :func:`history_to_json`.
    """
    if not isinstance(data, Mapping) or data.get("version") != HISTORY_VERSION:
        raise ValueError(f"not a saved conversation (version {HISTORY_VERSION})")
    record = Transcript(
        task=_str(data.get("task"), "task"),
        provider=_str(data.get("provider"), "provider"),
        model=_str(data.get("model"), "model"),
    )
    for i, message in enumerate(_list(data.get("messages"), "messages")):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
            raise ValueError(f"{where}: needs a role, user or assistant")
        blocks = _list(message.get("content"), f"{where}.content")
        content = tuple(_content(b, f"{where}.content[{j}]") for j, b in enumerate(blocks))
        record.messages.append(llm.Message(role=message["role"], content=content))
    loaded = _list(data.get("loaded_tools", []), "loaded_tools")
    record.loaded_tools = [_str(name, "loaded_tools[]") for name in loaded]
    for i, usage in enumerate(_list(data.get("usage", []), "usage")):
        record.usage.append(_usage(usage, f"usage[{i}]"))
    record.input_tokens = sum(u.input_tokens for u in record.usage)
    record.output_tokens = sum(u.output_tokens for u in record.usage)
    return record


def _content(raw: Any, where: str) -> llm.Content:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: must be an object")
    kind = raw.get("type")
    try:
        if kind == "text":
            return llm.TextContent(text=_str(raw["text"], where))
        if kind == "image":
            return llm.ImageContent(
                data=_str(raw["data"], where), mime_type=_str(raw["mime_type"], where)
            )
        if kind == "audio":
            return llm.AudioContent(
                data=_str(raw["data"], where), mime_type=_str(raw["mime_type"], where)
            )
        if kind == "tool_use":
            arguments = raw["input"]
            if not isinstance(arguments, Mapping):
                raise ValueError(f"{where}.input: must be an object")
            return llm.ToolUseContent(
                id=_str(raw["id"], where), name=_str(raw["name"], where), input=dict(arguments)
            )
        if kind == "tool_result":
            return _tool_result(raw, where)
    except KeyError as exc:
        raise ValueError(f"{where}: missing {exc.args[0]!r}") from None
    raise ValueError(f"{where}: unknown content type {kind!r}")


def _tool_result(raw: Mapping[str, Any], where: str) -> llm.ToolResultContent:
    parts: list[llm.ToolResultPart | llm.ToolReferenceContent] = []
    for j, part in enumerate(_list(raw.get("content", []), f"{where}.content")):
        if isinstance(part, Mapping) and part.get("type") == "tool_reference":
            parts.append(llm.ToolReferenceContent(tool_name=_str(part.get("tool_name"), where)))
            continue
        block = _content(part, f"{where}.content[{j}]")
        if not isinstance(block, llm.TextContent | llm.ImageContent | llm.AudioContent):
            raise ValueError(f"{where}.content[{j}]: not allowed in a tool result")
        parts.append(block)
    structured = raw.get("structured_content")
    if structured is not None and not isinstance(structured, Mapping):
        raise ValueError(f"{where}.structured_content: must be an object")
    return llm.ToolResultContent(
        tool_use_id=_str(raw.get("tool_use_id"), where),
        content=tuple(parts),
        is_error=raw.get("is_error") is True,
        structured_content=dict(structured) if structured is not None else None,
    )


def _usage(raw: Any, where: str) -> TurnUsage:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: must be an object")
    numbers = [raw.get("input_tokens"), raw.get("output_tokens")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers):
        raise ValueError(f"{where}: token counts must be integers >= 0")
    cost = raw.get("cost_usd")
    if cost is not None and (not isinstance(cost, int | float) or isinstance(cost, bool)):
        raise ValueError(f"{where}.cost_usd: must be a number or null")
    return TurnUsage(
        model=_str(raw.get("model"), where),
        input_tokens=raw["input_tokens"],
        output_tokens=raw["output_tokens"],
        cost_usd=None if cost is None else float(cost),
    )


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: must be a string")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{where}: must be a list")
    return value
