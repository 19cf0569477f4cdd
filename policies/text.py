"""Making server-supplied text safe to show on a terminal.

Everything a prompt shows - tool names, arguments, sampling messages, form titles - comes
from a server or a model, and a terminal obeys escape sequences. A server that could send
``\\x1b[2K\\r`` could erase the line that shows a dangerous argument, or hide it with
colours; so control characters are shown as visible escapes, never emitted. A field
shown on one line (a tool name in an audit record, a suggestion in a question) escapes
its line breaks and tabs too: otherwise a name can print as extra, real-looking lines.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["pretty_json", "printable"]

# C0 controls except tab and newline, DEL, C1 controls, and the Unicode bidi overrides
# and isolates that can reorder what the reader sees ("Trojan Source").
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# The same, plus newline, tab and the Unicode line and paragraph separators.
_UNSAFE_ONE_LINE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_NAMED = {"\n": "\\n", "\t": "\\t"}


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character replaced by a visible ``\\xNN``/``\\uNNNN``.

    Args:
        one_line: also escape line breaks and tabs (``\\n``, ``\\t``, ``\\u2028``), for
            a field that must stay on the line it is shown in.
    """
    return (_UNSAFE_ONE_LINE if one_line else _UNSAFE).sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    named = _NAMED.get(char)
    if named is not None:
        return named
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def pretty_json(value: Any) -> str:
    """Indented JSON of ``value`` for display (non-JSON values shown by ``repr``)."""
    return printable(orjson.dumps(value, option=orjson.OPT_INDENT_2, default=repr).decode())
