"""MCP protocol revisions agenthost speaks.

An MCP revision is a date string (``YYYY-MM-DD``); later revisions compare greater as plain
strings, which is all the ordering the rest of the code needs (``at_least``). The
stateful revisions are negotiated with ``initialize``; the stateless 2026-07-28 revision
(``server/discover``, per-request ``_meta``, MRTR) is reserved here so that nothing that
keys on revisions has to change shape when it lands.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "LATEST_REVISION",
    "STATELESS_REVISIONS",
    "SUPPORTED_REVISIONS",
    "at_least",
    "is_supported",
]

#: Revisions we negotiate with ``initialize``, newest first (the order we offer them in).
SUPPORTED_REVISIONS: Final[tuple[str, ...]] = (
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
)

#: The revision we ask for first.
LATEST_REVISION: Final[str] = SUPPORTED_REVISIONS[0]

#: Stateless revisions (``server/discover`` + MRTR); reserved, not implemented yet.
STATELESS_REVISIONS: Final[tuple[str, ...]] = ("2026-07-28",)

_SUPPORTED: Final = frozenset(SUPPORTED_REVISIONS)


def is_supported(rev: str) -> bool:
    """Return whether ``rev`` is a stateful revision we can negotiate."""
    return rev in _SUPPORTED


def at_least(rev: str, other: str) -> bool:
    """Return whether revision ``rev`` is ``other`` or newer.

    Revisions are ISO dates of equal length, so string order is date order.
    """
    return rev >= other
