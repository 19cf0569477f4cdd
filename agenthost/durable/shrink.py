"""Keeping a durable run's state small: its tool results, and its conversation.

A tool result goes into the run's history (the activity's result) and into every later
model request; the conversation goes into each ``llm_call`` and into the continue-as-new
input. Temporal refuses any of them over its 2 MB blob limit, so:

- :func:`cut_result` cuts a tool result to ``cap`` characters of text and
  :data:`RESULT_MAX` bytes in all, images, audio and ``structuredContent`` included
  (what does not fit is left out, with a note naming it and where the whole is kept);
- :func:`compact` elides the oldest tool results of a conversation (a stub naming the
  cut) until the conversation is under :data:`CONVERSATION_MAX` bytes;
- :func:`trim_records` keeps the tool call records (what ``runs show`` and the run's
  result list) under :data:`RECORDS_MAX`: the newest whole, older ones as previews,
  the oldest left out once even those are over (the audit has every call);
- :func:`preview` is a record as a follower's event carries it (events are carried to
  a new history too, and a ``progress`` query answers with them);
- :func:`fit_tools` keeps the tool listing (an activity's result, and part of every
  model request) under :data:`TOOLS_MAX`: a server's long descriptions are clipped,
  and tools still over are not offered.

Pure and deterministic: the workflow calls :func:`compact` on replay too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, MutableSequence, Sequence
from typing import Any

import attrs

import agenthost_providers.base as llm
from agenthost.agent.transcript import ToolCallRecord
from agenthost.durable import codec
from agenthost.durable.limits import clip, size

__all__ = [
    "CONVERSATION_MAX",
    "EVENTS_MAX",
    "RECORDS_MAX",
    "RESULT_MAX",
    "TOOLS_MAX",
    "compact",
    "cut_result",
    "fit_tools",
    "preview",
    "result_text",
    "stub",
    "too_large",
    "trim_records",
]

#: Bytes (as JSON) of one tool result in the run's history.
RESULT_MAX = 192 * 1024
#: Of those, the text's and the structuredContent's at most; images and audio share
#: what is left.
_TEXT_MAX = 64 * 1024
_STRUCTURED_MAX = 16 * 1024
#: Bytes (as JSON) of the conversation sent to the model and carried to a new history.
CONVERSATION_MAX = 224 * 1024
#: Bytes of the tool call records; half of it for the newest whole.
RECORDS_MAX = 128 * 1024
#: Bytes of the followers' events a run keeps (the oldest are dropped first).
EVENTS_MAX = 64 * 1024
#: Bytes of the tool listing.
TOOLS_MAX = 128 * 1024
#: Characters of a tool's output in a preview, and of its description in a listing.
_PREVIEW = 200
_DESCRIPTION = 2000


def result_text(result: llm.ToolResultContent) -> str:
    """The text of a result as the model reads it (its structuredContent when it has
    no text)."""
    parts = [p.text for p in result.content if isinstance(p, llm.TextContent)]
    if not parts and result.structured_content is not None:
        return json.dumps(dict(result.structured_content))
    return "\n".join(parts)


def too_large(result: llm.ToolResultContent, cap: int) -> bool:
    """Whether ``result`` must be cut: over ``cap`` characters of text, or over
    :data:`RESULT_MAX` bytes in all."""
    return len(result_text(result)) > cap or size(codec.dump(result)) > RESULT_MAX


def _fit(text: str, limit: int) -> str:
    """The longest prefix of ``text`` (halving) whose JSON is at most ``limit`` bytes."""
    while text and size(text) > limit:
        text = text[: len(text) // 2]
    return text


def _what(part: Any) -> str:
    if isinstance(part, llm.ImageContent | llm.AudioContent):
        return f"{part.type} {clip(part.mime_type, 40)} of {len(part.data)} bytes"
    return f"{getattr(part, 'type', 'part')} of {size(codec.dump(part))} bytes"


def cut_result(result: llm.ToolResultContent, cap: int, ref: str | None) -> llm.ToolResultContent:
    """``result`` cut to ``cap`` characters of text and :data:`RESULT_MAX` bytes (see
    the module docstring); ``ref`` names where the whole is kept (None: nowhere)."""
    text = result_text(result)
    head = _fit(text[:cap], _TEXT_MAX)
    room = RESULT_MAX - _TEXT_MAX - _STRUCTURED_MAX
    kept: list[llm.ToolResultPart | llm.ToolReferenceContent] = []
    left_out: list[str] = []
    for part in result.content:
        if isinstance(part, llm.TextContent):
            continue
        cost = size(codec.dump(part))
        if cost <= room:
            kept.append(part)
            room -= cost
        else:
            left_out.append(_what(part))
    structured = result.structured_content
    if structured is not None and size(dict(structured)) > _STRUCTURED_MAX:
        left_out.append(f"structuredContent of {size(dict(structured))} bytes")
        structured = None
    notes = []
    if len(head) < len(text):
        notes.append(f"cut at {len(head)} of {len(text)} characters")
    if left_out:
        notes.append("left out: " + ", ".join(left_out))
    notes.append(f"the full result: {ref}" if ref else "the full result was not kept")
    return llm.ToolResultContent(
        tool_use_id=result.tool_use_id,
        content=(llm.TextContent(text=f"{head}\n[{'; '.join(notes)}]"), *kept),
        is_error=result.is_error,
        structured_content=structured,
    )


_STUB_HEAD = "[an earlier result of "
_STUB_TAIL = (
    " characters, elided to keep the run's conversation small; call the tool again if it is needed]"
)


def stub(result: llm.ToolResultContent) -> llm.ToolResultContent:
    """What :func:`compact` puts in place of ``result`` (the worker that seals a result
    seals this too, so the elided form verifies as well)."""
    note = f"{_STUB_HEAD}{len(result_text(result))}{_STUB_TAIL}"
    return llm.ToolResultContent(
        tool_use_id=result.tool_use_id,
        content=(llm.TextContent(text=note),),
        is_error=result.is_error,
    )


def _is_stub(part: llm.ToolResultContent) -> bool:
    (first, *rest) = part.content or (None,)
    return (
        not rest
        and isinstance(first, llm.TextContent)
        and first.text.startswith(_STUB_HEAD)
        and first.text.endswith(_STUB_TAIL)
    )


def _results(messages: Sequence[llm.Message]) -> Iterable[tuple[int, int]]:
    """``(message, part)`` indices of every tool result, oldest first."""
    for m, message in enumerate(messages):
        for p, part in enumerate(message.content):
            if isinstance(part, llm.ToolResultContent):
                yield m, p


def compact(
    messages: MutableSequence[llm.Message],
    limit: int = CONVERSATION_MAX,
    *,
    stubbed: list[str] | None = None,
) -> int:
    """Elide the oldest tool results of ``messages`` (in place) until the conversation
    is at most ``limit`` bytes, or no result is left to elide; its size then. The
    ``tool_use_id`` of each result elided is added to ``stubbed``; a stub is never
    elided again (its seal is its stub's)."""
    total = size(codec.dump(list(messages)))
    if total <= limit:
        return total
    for m, p in list(_results(messages)):
        message = messages[m]
        part = message.content[p]
        assert isinstance(part, llm.ToolResultContent)
        short = stub(part)
        saved = size(codec.dump(part)) - size(codec.dump(short))
        if saved <= 0 or _is_stub(part):
            continue  # small already, or a stub: nothing to gain
        total -= saved
        content = (*message.content[:p], short, *message.content[p + 1 :])
        messages[m] = llm.Message(role=message.role, content=content)
        if stubbed is not None:
            stubbed.append(part.tool_use_id)
        if total <= limit:
            break
    return size(codec.dump(list(messages)))


def preview(record: ToolCallRecord) -> ToolCallRecord:
    """``record`` with its output and reason clipped and large arguments elided."""
    arguments = record.arguments
    if size(dict(arguments)) > _PREVIEW:
        arguments = {"elided": f"{size(dict(arguments))} bytes of arguments"}
    return attrs.evolve(
        record,
        arguments=arguments,
        output=clip(record.output, _PREVIEW) or "",
        reason=clip(record.reason, _PREVIEW),
    )


def trim_records(records: MutableSequence[ToolCallRecord], limit: int = RECORDS_MAX) -> None:
    """Newest first, records stay whole within ``limit / 2`` bytes, then become
    :func:`preview` s; those over ``limit`` in all are dropped (in place)."""
    total = 0
    for i in range(len(records) - 1, -1, -1):
        cost = size(codec.dump(records[i]))
        if total + cost > limit // 2:
            records[i] = preview(records[i])
            cost = size(codec.dump(records[i]))
        total += cost
        if total > limit:
            del records[: i + 1]
            return


def fit_tools(entries: list[dict[str, Any]], limit: int = TOOLS_MAX) -> list[str]:
    """Clip the entries' descriptions, then drop the largest entries until the listing
    is at most ``limit`` bytes (in place); the names of the dropped ones."""
    for entry in entries:
        if isinstance(entry.get("description"), str):
            entry["description"] = clip(entry["description"], _DESCRIPTION)
    dropped: list[str] = []
    total = size(entries)
    while entries and total > limit:
        largest = max(range(len(entries)), key=lambda i: size(entries[i]))
        total -= size(entries[largest]) + 1
        dropped.append(str(entries.pop(largest).get("name")))
    return dropped
