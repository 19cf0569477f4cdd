"""Revision metadata and shared aliases for the MCP types.

Revision facts live on the classes as data, so the converter can build one cattrs
converter per revision once and pay nothing extra per message:

* an optional field is ``x: T | None = None``, left out of what we send when ``None``;
* ``attrs.field(default=None, metadata=since("2025-06-18"))`` marks a field that first
  appeared in that revision: when we send to an older peer the field is left out. With
  ``strict=True`` a set value is refused instead, for fields whose loss would change what
  the message means (task augmentation, sampling tools, URL-mode elicitation);
* ``__mcp_since__`` on a class: the revision that introduced the whole entity; sending it
  to an older peer raises :class:`~agenthost.errors.ProtocolError`.

Wire names are the camelCase of the field names; ``meta`` is ``_meta``. The ``since``
values were derived by diffing the official schema.json of each revision, and
``tests/test_types.py`` re-derives and checks them against those files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeAlias

import attrs

__all__ = [
    "SINCE",
    "STRICT",
    "Cursor",
    "LoggingLevel",
    "ProgressToken",
    "Record",
    "RequestId",
    "Role",
    "since",
    "wire_name",
]

SINCE: Final = "mcp_since"
STRICT: Final = "mcp_strict"

Role: TypeAlias = Literal["user", "assistant"]
LoggingLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
RequestId: TypeAlias = str | int
ProgressToken: TypeAlias = str | int
Cursor: TypeAlias = str


class Record:
    """The base of every MCP type: value equality, hashing and repr, written once.

    Each type is ``@attrs.frozen(kw_only=True, eq=False, repr=False)`` over this class.
    attrs would otherwise compile an ``__eq__``, ``__hash__`` and ``__repr__`` for each of
    the ~75 types at import: about 10 ms of every one-shot ``agenthost`` command
    (measured with ``-X importtime``), for methods that mostly only tests call. These read
    the fields from ``__attrs_attrs__`` instead, with the same meaning as attrs' own.
    """

    __slots__ = ()
    if TYPE_CHECKING:  # a runtime annotation would leak into every type's hints
        __attrs_attrs__: ClassVar[tuple[attrs.Attribute[Any], ...]]

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{a.name}={getattr(self, a.name)!r}" for a in self.__attrs_attrs__ if a.repr
        )
        return f"{type(self).__qualname__}({fields})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(
            getattr(self, a.name) == getattr(other, a.name) for a in self.__attrs_attrs__ if a.eq
        )

    def __hash__(self) -> int:
        return hash(
            (self.__class__, *(getattr(self, a.name) for a in self.__attrs_attrs__ if a.eq))
        )


def since(revision: str, *, strict: bool = False) -> dict[str, Any]:
    """Field metadata: the field first appeared in ``revision``.

    Args:
        revision: the first revision whose schema has the field; older peers never see it.
        strict: refuse (rather than silently drop) a set value for an older peer.
    """
    return {SINCE: revision, STRICT: strict}


def wire_name(field: attrs.Attribute[Any]) -> str:
    """The JSON key of an attrs field: ``meta`` -> ``_meta``, otherwise camelCase."""
    name = field.name
    if name == "meta":
        return "_meta"
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
