"""Kept for compatibility: :func:`connect` and :func:`open_transport` live in
:mod:`agenthost.dial` (building a transport from config is not a transport's job)."""

from __future__ import annotations

from agenthost.dial import connect, open_transport

__all__ = ["connect", "open_transport"]
