"""JSON with comments and trailing commas (the editors' ``mcp.json``), read as JSON.

VS Code and Cursor write JSONC; :func:`strip_jsonc` removes ``//`` and ``/* */``
comments and trailing commas outside strings, so the standard parser reads the rest, and
:func:`parse_json` turns every way that can fail (nesting too deep included) into one
:class:`~agenthost.errors.ConfigError` naming the file.
"""

from __future__ import annotations

import json
from typing import Final

from agenthost.errors import ConfigError

__all__ = ["TOO_DEEP", "parse_json", "strip_jsonc"]

#: The problem named when a file nests deeper than a parser's stack.
TOO_DEEP: Final = "tables and arrays nested too deep; not a config file"


def strip_jsonc(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments and trailing commas, keeping positions.

    Positions are kept (comments become spaces, newlines stay) so a JSON syntax error
    still names the right line and column.

    Raises:
        ValueError: an unterminated ``/*`` comment (message names line and column).
    """
    out = list(text)
    n = len(text)
    i = 0
    pending_comma = -1
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] in "/*":
            if text[i + 1] == "/":
                end = text.find("\n", i)
                end = n if end < 0 else end
            else:
                close = text.find("*/", i + 2)
                if close < 0:
                    line = text.count("\n", 0, i) + 1
                    col = i - (text.rfind("\n", 0, i) + 1) + 1
                    raise ValueError(f"unterminated /* comment (at line {line}, column {col})")
                end = close + 2
            for k in range(i, end):
                if out[k] != "\n":
                    out[k] = " "
            i = end
            continue
        if c == '"':
            in_string = True
            pending_comma = -1
        elif c == ",":
            pending_comma = i
        elif c in "}]":
            if pending_comma >= 0:
                out[pending_comma] = " "
            pending_comma = -1
        elif not c.isspace():
            pending_comma = -1
        i += 1
    return "".join(out)


def parse_json(text: str, source: str) -> object:
    try:
        return json.loads(strip_jsonc(text))
    except RecursionError:
        raise ConfigError(TOO_DEEP, path=source) from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            problem = f"{exc.msg} (at line {exc.lineno}, column {exc.colno})"
        else:
            problem = str(exc)
        raise ConfigError(f"invalid JSON: {problem}", path=source) from None
