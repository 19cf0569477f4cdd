"""What a run costs and how much of a tool's result the model reads: pure functions.

Estimates, stated once: a token is taken as four characters of the JSON a provider would
send. Vendors count differently (and agenthost ships no tokenizer: the vendors' own need
a download at run time), but four characters per token is the rule both vendors publish
for English and JSON, and it is only ever used to *compare* (tool search on or off, one
server against another) or to *bound* (a result cut), never billed. Costs are computed
from the token counts the vendor reported and the model catalog's USD-per-million prices.

No I/O and no Trio here, so a durable runtime reuses these as they are.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import attrs

import agenthost_providers.base as llm

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_CONTEXT_WINDOW",
    "MAX_RESULT_TOKENS_CAP",
    "cost_usd",
    "cut_result",
    "default_max_result_tokens",
    "describe_media",
    "estimate_tokens",
    "for_model",
    "tool_tokens",
]

#: The estimate's ratio (see the module docstring).
CHARS_PER_TOKEN = 4
#: Assumed when the model is not in the catalog (a local model nobody described).
DEFAULT_CONTEXT_WINDOW = 128_000
#: The default result limit never exceeds this, however large the window: a result
#: that big is almost always a listing the model should have narrowed.
MAX_RESULT_TOKENS_CAP = 25_000


def estimate_tokens(value: Any) -> int:
    """Estimated tokens of ``value``: its text, or its compact JSON for anything else."""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def tool_tokens(tool: llm.Tool) -> int:
    """Estimated tokens one tool definition costs on every request that offers it."""
    shape: dict[str, Any] = {"name": tool.name, "input_schema": dict(tool.input_schema)}
    if tool.description:
        shape["description"] = tool.description
    return estimate_tokens(shape)


def cost_usd(input_tokens: int, output_tokens: int, info: llm.ModelInfo | None) -> float | None:
    """USD for these tokens at the model's catalog prices; None when the model is unknown.

    A model the catalog lists at 0 (a local model) costs 0.0, which is a real figure; an
    unknown model has no figure at all, which is not the same thing.
    """
    if info is None:
        return None
    return (input_tokens * info.input_cost + output_tokens * info.output_cost) / 1_000_000


def default_max_result_tokens(context_window: int) -> int:
    """A tenth of the model's window, at most :data:`MAX_RESULT_TOKENS_CAP`.

    Why a tenth: the same share at which tool definitions count as crowding the context
    (tool search's "auto"); one result should not take more room than every tool did.
    """
    window = context_window or DEFAULT_CONTEXT_WINDOW
    return max(1000, min(MAX_RESULT_TOKENS_CAP, window // 10))


def cut_result(result: llm.ToolResultContent, max_tokens: int) -> llm.ToolResultContent:
    """``result`` with its text cut to about ``max_tokens``, and a note saying so.

    Only text is cut (media are the provider's to bound, and a description of binary
    content is already short). The note says how much was cut and how to get the rest:
    the model cannot read the transcript, so it is told to ask again for less.
    """
    limit = max_tokens * CHARS_PER_TOKEN
    texts = [p.text for p in result.content if isinstance(p, llm.TextContent)]
    structured = _structured_only(result)
    if structured is not None:
        texts = [structured]
    total = sum(len(t) for t in texts)
    if total <= limit:
        return result
    parts: list[llm.ToolResultPart | llm.ToolReferenceContent] = []
    left = limit
    source = (llm.TextContent(text=structured),) if structured is not None else result.content
    for part in source:
        if not isinstance(part, llm.TextContent):
            parts.append(part)
            continue
        kept = part.text[: max(left, 0)]
        left -= len(kept)
        if kept:
            parts.append(llm.TextContent(text=kept))
    cut = total - limit
    note = (
        f"[result cut: {cut:,} of {total:,} characters (about {math.ceil(cut / CHARS_PER_TOKEN):,}"
        f" tokens) are not shown, to stay within max_result_tokens = {max_tokens:,}. To see"
        " the rest, call the tool again asking for less: a range, a page, a filter or a"
        " narrower query.]"
    )
    parts.append(llm.TextContent(text=note))
    return llm.ToolResultContent(
        tool_use_id=result.tool_use_id, content=tuple(parts), is_error=result.is_error
    )


def describe_media(
    result: llm.ToolResultContent, info: llm.ModelInfo | None
) -> llm.ToolResultContent:
    """``result`` with the images or audio the model cannot take described in words.

    Why: an adapter refuses a request carrying content its model cannot take (rightly:
    nothing is silently dropped), so one tool that returns audio would end a run with
    Claude. The model is told what there was instead; the transcript keeps the original.
    An unknown model (``info`` None) is sent everything, as before.
    """
    if info is None:
        return result
    parts: list[llm.ToolResultPart | llm.ToolReferenceContent] = []
    for part in result.content:
        kind = "audio" if isinstance(part, llm.AudioContent) else "image"
        if isinstance(part, llm.AudioContent | llm.ImageContent) and not info.supports(
            "audio" if kind == "audio" else "images"
        ):
            size = len(part.data) * 3 // 4  # base64 -> bytes, near enough
            parts.append(
                llm.TextContent(
                    text=f"[{kind} ({part.mime_type}, about {size:,} bytes) not shown:"
                    f" the model {info.id} takes no {kind} input]"
                )
            )
        else:
            parts.append(part)
    if parts == list(result.content):
        return result
    return attrs.evolve(result, content=tuple(parts))


def for_model(
    result: llm.ToolResultContent, *, max_tokens: int, info: llm.ModelInfo | None
) -> llm.ToolResultContent:
    """A tool result as the model is sent it: media it cannot take described, then cut."""
    return cut_result(describe_media(result, info), max_tokens)


def _structured_only(result: llm.ToolResultContent) -> str | None:
    """The JSON text a provider sends for a result that has only structuredContent."""
    if result.content or result.structured_content is None:
        return None
    data: Mapping[str, Any] = result.structured_content
    return json.dumps(dict(data), ensure_ascii=False)
