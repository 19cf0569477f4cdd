"""Small internal helpers shared across layers."""

from __future__ import annotations

import enum
import importlib
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final, Literal, TypeAlias

__all__ = ["DEFAULT", "DefaultType", "Timeout", "collapse_single_group", "lazy_getattr"]


class DefaultType(enum.Enum):
    """The type of :data:`DEFAULT` (an enum of one, so type checkers can narrow on it)."""

    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:
        return "DEFAULT"


#: "Use the limit configured for this kind of request": the default of every ``timeout``
#: parameter that has one. ``None`` always means *no limit*, at every level (httpx's
#: rule), so a caller can say "wait forever" and "the usual" without a third meaning.
DEFAULT: Final = DefaultType.DEFAULT

#: Seconds, ``None`` for no limit, or :data:`DEFAULT` for the configured limit.
Timeout: TypeAlias = float | None | Literal[DefaultType.DEFAULT]


def lazy_getattr(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A PEP 562 module ``__getattr__`` that imports each of ``exports`` on first use.

    ``exports`` maps a public name to the module that defines it. A package re-exports its
    names this way so that importing it stays cheap (``agenthost --help`` loads no SDK; a
    stdio-only host never imports httpx; loading a config never imports Authlib); the
    first access imports the defining module and caches the value in the package, so later
    accesses do not come back here. Use: ``__getattr__ = lazy_getattr(__name__, _EXPORTS)``.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__


@contextmanager
def collapse_single_group() -> Iterator[None]:
    """Re-raise the lone exception of an exception group raised inside the block.

    Our public context managers run nurseries, and Trio's nurseries are strict: even a
    single failure arrives as an ExceptionGroup. Callers of ``connect()``/``open_host()``
    should be able to write ``except TransportClosed:``, so at each public boundary a group
    holding exactly one (non-group) exception is unwrapped. Groups of several real errors
    stay groups: hiding any of them would lose information.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        inner: BaseException = group
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if inner is group or isinstance(inner, BaseExceptionGroup):
            raise
        raise inner from None
