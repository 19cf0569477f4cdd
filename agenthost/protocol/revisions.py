"""MCP protocol revisions agenthost speaks, as one ordered list split into two eras.

Revisions are compared by their index in :data:`REVISIONS` (oldest first), never as
strings: a revision name is a label, and the day a label stops sorting like a date (a
draft, a suffix) string comparison would silently reorder features.

Two eras (``basic/versioning.mdx`` of 2026-07-28):

* **legacy**: 2024-11-05 .. 2025-11-25, negotiated once per connection with the
  ``initialize`` handshake; the server may send its own requests (sampling, roots,
  elicitation).
* **modern**: 2026-07-28 on. No handshake: every request carries its protocol version,
  client capabilities and client info in ``_meta``; ``server/discover`` tells what a
  server is; server asks come back as ``InputRequiredResult`` (MRTR).
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = [
    "LATEST_MODERN",
    "LATEST_REVISION",
    "LEGACY_REVISIONS",
    "MODERN_REVISIONS",
    "REVISIONS",
    "STATELESS_REVISIONS",
    "SUPPORTED_REVISIONS",
    "Era",
    "at_least",
    "era_of",
    "index",
    "is_known",
    "is_modern",
    "is_supported",
]


class Era(enum.Enum):
    """How a revision is spoken: with an ``initialize`` handshake, or per request."""

    LEGACY = "legacy"
    MODERN = "modern"


#: Every revision agenthost knows, oldest first. THE order: compare by index here.
REVISIONS: Final[tuple[str, ...]] = (
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
)

#: The first modern revision (everything from here on is per-request ``_meta``).
_FIRST_MODERN: Final = "2026-07-28"
_INDEX: Final[dict[str, int]] = {rev: i for i, rev in enumerate(REVISIONS)}

#: Revisions we negotiate with ``initialize``, newest first (the order we offer them in).
LEGACY_REVISIONS: Final[tuple[str, ...]] = tuple(reversed(REVISIONS[: _INDEX[_FIRST_MODERN]]))
#: Modern revisions, newest first.
MODERN_REVISIONS: Final[tuple[str, ...]] = tuple(reversed(REVISIONS[_INDEX[_FIRST_MODERN] :]))

#: The legacy revisions (the name predates the modern era; kept for the public API).
SUPPORTED_REVISIONS: Final[tuple[str, ...]] = LEGACY_REVISIONS
#: The legacy revision we ask for first in ``initialize``.
LATEST_REVISION: Final[str] = LEGACY_REVISIONS[0]
#: The modern revision we speak first.
LATEST_MODERN: Final[str] = MODERN_REVISIONS[0]
#: Alias of :data:`MODERN_REVISIONS` (the revisions without ``initialize``).
STATELESS_REVISIONS: Final[tuple[str, ...]] = MODERN_REVISIONS


def index(rev: str) -> int:
    """The position of ``rev`` in :data:`REVISIONS`.

    Raises:
        ValueError: a revision agenthost does not know.
    """
    try:
        return _INDEX[rev]
    except KeyError:
        raise ValueError(f"unknown MCP revision {rev!r}") from None


def is_known(rev: str) -> bool:
    """Return whether ``rev`` is any revision agenthost speaks (either era)."""
    return rev in _INDEX


def is_supported(rev: str) -> bool:
    """Return whether ``rev`` is a legacy revision we can negotiate with ``initialize``."""
    return rev in _INDEX and _INDEX[rev] < _INDEX[_FIRST_MODERN]


def is_modern(rev: str) -> bool:
    """Return whether ``rev`` is a modern (per-request ``_meta``) revision."""
    return rev in _INDEX and _INDEX[rev] >= _INDEX[_FIRST_MODERN]


def era_of(rev: str) -> Era:
    """The era of a known revision."""
    return Era.MODERN if index(rev) >= _INDEX[_FIRST_MODERN] else Era.LEGACY


def at_least(rev: str, other: str) -> bool:
    """Return whether revision ``rev`` is ``other`` or newer (by position, not by text)."""
    return index(rev) >= index(other)
