"""The HTTP headers of a 2026-07-28 request (``basic/transports/streamable-http.mdx``).

Sans-I/O: the session computes them and hands them to the transport as
:class:`~agenthost.transports.base.SendOptions`, so the transport never looks inside a
message. ``Mcp-Method`` on every request; ``Mcp-Name`` for ``tools/call`` /
``prompts/get`` (the name) and ``resources/read`` (the URI); ``Mcp-Param-{Name}`` for each
tool argument whose schema property says ``x-mcp-header``. A value that is not plain
header-safe ASCII is sent as ``=?base64?...?=``.

A tool's ``inputSchema`` is untrusted input: :func:`param_header_paths` checks every
constraint the spec puts on ``x-mcp-header`` (raising :class:`ValueError`, so the caller
can leave the tool out as the spec requires) and bounds how much of a schema it walks.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["encode_value", "param_header_paths", "request_headers", "tool_param_headers"]

#: RFC 9110 ``tchar``: the characters of a header field name.
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: A plain header value: visible ASCII and inner spaces/tabs only.
_PLAIN: Final = re.compile(r"[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?")
_SENTINEL: Final = re.compile(r"=\?base64\?.*\?=", re.DOTALL)
#: Keywords whose subschemas an ``x-mcp-header`` must not sit under.
_SUBSCHEMA_KEYS: Final = (
    "items",
    "prefixItems",
    "additionalProperties",
    "patternProperties",
    "additionalItems",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "anyOf",
    "oneOf",
    "allOf",
    "$defs",
    "definitions",
    "dependentSchemas",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
)
_PRIMITIVES: Final = frozenset({"string", "integer", "boolean"})
_MAX_NODES: Final = 10_000
_MAX_DEPTH: Final = 64
_MAX_SAFE_INT: Final = 2**53 - 1

Mirror = tuple[tuple[str, ...], str]


def encode_value(value: str) -> str:
    """``value`` as a header value: as is when plain ASCII, else ``=?base64?...?=``."""
    if _PLAIN.fullmatch(value) and not _SENTINEL.fullmatch(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode("ascii") + "?="


def request_headers(revision: str, method: str, name: Any) -> dict[str, str]:
    """The standard headers of one request (``name``: the ``Mcp-Name`` source or None)."""
    headers = {"MCP-Protocol-Version": revision, "Mcp-Method": method}
    if isinstance(name, str):
        headers["Mcp-Name"] = encode_value(name)
    return headers


def param_header_paths(schema: Any) -> tuple[Mirror, ...]:
    """The ``(property path, header name)`` of each ``x-mcp-header`` in a tool schema.

    Raises:
        ValueError: an annotation breaks a rule of the spec (the message says which).
    """
    found: list[Mirror] = []
    budget = [_MAX_NODES]

    def walk(node: Any, path: tuple[str, ...], reachable: bool, depth: int) -> None:
        if not isinstance(node, Mapping):
            return
        budget[0] -= 1
        if budget[0] < 0 or depth > _MAX_DEPTH:
            raise ValueError("inputSchema too large or too deep to check x-mcp-header")
        if "x-mcp-header" in node:
            name = node["x-mcp-header"]
            where = "/".join(path) or "(root)"
            if not reachable or not path:
                raise ValueError(f"x-mcp-header at {where} is not reachable by properties only")
            if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                raise ValueError(f"x-mcp-header at {where} is not a valid header name")
            if node.get("type") not in _PRIMITIVES:
                raise ValueError(
                    f"x-mcp-header at {where} is on a {node.get('type')!r} property"
                    " (only string, integer, boolean)"
                )
            found.append((path, name))
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            for key, child in properties.items():
                walk(child, (*path, str(key)), reachable, depth + 1)
        for keyword in _SUBSCHEMA_KEYS:
            sub = node.get(keyword)
            children = (
                sub.values()
                if isinstance(sub, Mapping) and keyword in _MAP_KEYWORDS
                else sub
                if isinstance(sub, list)
                else (sub,)
            )
            for child in children:
                walk(child, path, False, depth + 1)

    walk(schema, (), True, 0)
    seen: set[str] = set()
    for _, name in found:
        if name.lower() in seen:
            raise ValueError(f"x-mcp-header {name!r} is used twice")
        seen.add(name.lower())
    return tuple(found)


_MAP_KEYWORDS: Final = frozenset({"patternProperties", "$defs", "definitions", "dependentSchemas"})


def tool_param_headers(mirrors: tuple[Mirror, ...], arguments: Mapping[str, Any]) -> dict[str, str]:
    """``Mcp-Param-{Name}`` headers for the arguments of one call (absent/null: none)."""
    headers: dict[str, str] = {}
    for path, name in mirrors:
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int) and abs(value) <= _MAX_SAFE_INT:
            text = str(value)
        elif isinstance(value, str):
            text = value
        else:
            continue  # not a value the annotation allows: the server will say so
        headers[f"Mcp-Param-{name}"] = encode_value(text)
    return headers
