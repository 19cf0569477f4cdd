"""Small internal helpers shared across layers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collapse_single_group"]


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
