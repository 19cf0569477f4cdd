"""Tool search: with hundreds of tools, the model searches instead of reading every schema.

Every tool definition is sent with every model request, so ten servers with three hundred
tools cost tens of thousands of input tokens per request before the model reads a word,
and models pick worse from long lists. When tool search is on, the model is offered a
built-in ``search_tools`` tool and the tools it already loaded in this conversation; each
tool a search returns is offered with its full definition from the next request on.

When it is on (``[agent] tool_search``): ``true``, ``false``, or ``"auto"`` (the default):
on when the offered tools' definitions exceed a tenth of the model's context window, or
when more than 100 tools are offered, whichever comes first (the thresholds Claude Code
and Codex use).

The search is BM25 (Okapi, k1 = 1.2, b = 0.75) over each tool's namespaced name, title,
description and parameter names and descriptions; written here rather than taken from a
library because the ones on PyPI need numpy (or scipy) for what is forty lines over a few
hundred short documents, and the CLI starts without them. Names are split on ``__``,
``_``, ``-`` and camelCase, so "read file" finds ``fs__read_file``.

Providers with native deferred loading (Anthropic: ``defer_loading`` on a tool, and a
client-side search whose ``tool_result`` holds ``tool_reference`` blocks that the API
expands into the definitions) get every tool marked deferred instead of left out, and the
search result as references, which the API expands from the conversation on every later
request: the request's tool list never changes, which keeps the provider's prompt cache.
OpenAI's Responses API is the same with its own shapes: the search tool goes as a
client-executed ``tool_search`` tool and the references as a ``tool_search_output``
carrying the found tools' definitions (the adapter fills them in from the request's own
tool list, so the agent stays provider-neutral). Other providers get the loaded tools
only, and the search result as text. Consent is unchanged either way: searching runs
nothing, and every call of a found tool goes through the host's policy like any other.

Pure functions and plain data, no I/O: a durable runtime can reuse this as it is.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

import agenthost_providers.base as llm
from agenthost.agent.budget import DEFAULT_CONTEXT_WINDOW, tool_tokens

__all__ = [
    "AUTO_CONTEXT_SHARE",
    "AUTO_TOOL_COUNT",
    "SEARCH_TOOL",
    "ToolIndex",
    "ToolSearch",
    "ToolSearchSetting",
    "search_wanted",
]

#: The built-in tool's name. Catalog names always hold the ``server__tool`` separator, so
#: this never shadows a server's tool.
SEARCH_TOOL = "search_tools"
#: "auto" turns search on above this many offered tools...
AUTO_TOOL_COUNT = 100
#: ... or when the definitions take more than this share of the context window.
AUTO_CONTEXT_SHARE = 0.10
#: Results a search returns unless the model asks for another number (at most _MAX_LIMIT).
DEFAULT_LIMIT = 5
_MAX_LIMIT = 20

ToolSearchSetting: TypeAlias = bool | Literal["auto"]

_WORD = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_STOP = frozenset(
    ("a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "into", "is", "it",
     "of", "on", "or", "that", "the", "this", "to", "with")
)  # fmt: skip


def search_wanted(
    setting: ToolSearchSetting, tools: Sequence[llm.Tool], context_window: int
) -> bool:
    """Whether tool search is on for a request offering ``tools`` (see the module docs)."""
    if setting is not True and setting is not False:
        if len(tools) > AUTO_TOOL_COUNT:
            return True
        window = context_window or DEFAULT_CONTEXT_WINDOW
        return sum(tool_tokens(t) for t in tools) > AUTO_CONTEXT_SHARE * window
    return setting


def _terms(text: str) -> list[str]:
    """Lower-case words, camelCase split, stop words out, a plural ``s`` dropped."""
    out = []
    for word in _WORD.findall(_CAMEL.sub(" ", text)):
        word = word.lower()
        if word in _STOP:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def _document(tool: llm.Tool, title: str | None) -> list[str]:
    """What a tool is found by; its name counts twice (a name says the most per word)."""
    parts = [tool.name, tool.name, title or "", tool.description or ""]
    properties = tool.input_schema.get("properties")
    if isinstance(properties, Mapping):
        for name, schema in properties.items():
            parts.append(str(name))
            if isinstance(schema, Mapping) and isinstance(schema.get("description"), str):
                parts.append(schema["description"])
    return _terms(" ".join(parts))


class ToolIndex:
    """BM25 over tool documents; built per search (a few hundred documents is instant).

    Args:
        tools: the tools to search, in the order ties are broken.
        titles: a tool's MCP ``title`` by name, where it has one.
    """

    K1 = 1.2
    B = 0.75

    def __init__(self, tools: Sequence[llm.Tool], titles: Mapping[str, str] | None = None) -> None:
        titles = titles or {}
        self._tools = list(tools)
        self._docs = [Counter(_document(t, titles.get(t.name))) for t in self._tools]
        self._lengths = [sum(d.values()) for d in self._docs]
        self._avg = (sum(self._lengths) / len(self._docs)) if self._docs else 0.0
        df: Counter[str] = Counter()
        for doc in self._docs:
            df.update(doc.keys())
        n = len(self._docs)
        self._idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[llm.Tool]:
        """The best ``limit`` tools for ``query``, best first; those matching no term left out.

        A query naming a tool exactly (its namespaced name) returns that tool first.
        """
        exact = [t for t in self._tools if t.name == query.strip()]
        terms = _terms(query)
        scored = []
        for index, doc in enumerate(self._docs):
            score = 0.0
            norm = self.K1 * (1 - self.B + self.B * self._lengths[index] / (self._avg or 1))
            for term in terms:
                tf = doc.get(term, 0)
                if tf:
                    score += self._idf[term] * tf * (self.K1 + 1) / (tf + norm)
            if score > 0:
                scored.append((-score, index))
        scored.sort()
        found = exact + [self._tools[i] for _, i in scored if self._tools[i] not in exact]
        return found[:limit]


@attrs.define(eq=False)
class ToolSearch:
    """One conversation's tool search: what is loaded, and the requests' tool lists.

    ``loaded`` is the transcript's own list (so a chat, and a resumed session, keep what
    was loaded); ``native`` says the provider defers loading itself (see the module docs).
    """

    loaded: list[str]
    native: bool = False

    def offer(self, tools: Sequence[llm.Tool]) -> tuple[llm.Tool, ...]:
        """The tools for one request: the loaded ones in full and the search tool; or
        (native) every tool marked deferred, and the search tool."""
        loaded = set(self.loaded)
        search = self.search_tool(tools)
        if self.native:
            # Every tool stays deferred, found ones included: the API expands the
            # references in the conversation, and an unchanged tool list keeps the cache.
            return (*(attrs.evolve(t, defer_loading=True) for t in tools), search)
        return (*(t for t in tools if t.name in loaded), search)

    def search_tool(self, tools: Sequence[llm.Tool]) -> llm.Tool:
        """The built-in tool; its description says how many tools there are and whose."""
        servers = sorted({t.name.partition("__")[0] for t in tools if "__" in t.name})
        shown = ", ".join(servers[:30])
        if len(servers) > 30:
            shown += f" and {len(servers) - 30} more"
        return llm.Tool(
            name=SEARCH_TOOL,
            description=(
                f"Find tools to use. {len(tools)} tools from MCP servers ({shown}) are"
                " available but not loaded: search them by what you want to do (words from"
                " the task, or a tool's name). Every tool found is loaded, and you can call"
                " it from your next step on by the name the search gives."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "what the tool should do, in a few words",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": _MAX_LIMIT,
                        "description": f"how many tools at most (default {DEFAULT_LIMIT})",
                    },
                },
                "required": ["query"],
            },
            tool_search=True,
        )

    def run(
        self,
        use: llm.ToolUseContent,
        tools: Sequence[llm.Tool],
        titles: Mapping[str, str] | None = None,
    ) -> llm.ToolResultContent:
        """Answer one ``search_tools`` call, loading what it found."""
        query = use.input.get("query")
        limit = _limit(use.input.get("limit"))
        if not isinstance(query, str) or not query.strip():
            return _text(use.id, "search_tools needs a query: a few words", error=True)
        found = ToolIndex(tools, titles).search(query, limit)
        if not found:
            return _text(use.id, f"No tool matches {query!r}; try other words.")
        for tool in found:
            if tool.name not in self.loaded:
                self.loaded.append(tool.name)
        if self.native:
            refs = tuple(llm.ToolReferenceContent(tool_name=t.name) for t in found)
            return llm.ToolResultContent(tool_use_id=use.id, content=refs)
        return _text(use.id, _listing(found))


def _limit(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return max(1, min(_MAX_LIMIT, value))
    return DEFAULT_LIMIT


def _listing(found: Iterable[llm.Tool]) -> str:
    """The neutral result: each tool's name, what it does and its parameters."""
    lines = ["Loaded these tools; call them by these names from your next step on:"]
    for tool in found:
        properties = tool.input_schema.get("properties")
        params = ", ".join(properties) if isinstance(properties, Mapping) else ""
        description = (tool.description or "").strip().splitlines()
        lines.append(
            f"- {tool.name}: {description[0] if description else '(no description)'}"
            + (f" (parameters: {params})" if params else "")
        )
    return "\n".join(lines)


def _text(tool_use_id: str, text: str, *, error: bool = False) -> llm.ToolResultContent:
    return llm.ToolResultContent(
        tool_use_id=tool_use_id, content=(llm.TextContent(text=text),), is_error=error
    )
