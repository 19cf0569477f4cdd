"""Lifecycle and the base utilities: initialize, ping, pagination, progress, cancellation,
logging.

Every params/result class carries ``meta`` (``_meta`` on the wire); it is where progress
tokens and vendor metadata travel, and it is never dropped.
"""

from __future__ import annotations

from typing import Any

import attrs

from agenthost.protocol.types._base import (
    Cursor,
    LoggingLevel,
    ProgressToken,
    Record,
    RequestId,
    since,
)
from agenthost.protocol.types.capabilities import ClientCapabilities, ServerCapabilities
from agenthost.protocol.types.content import Icon

__all__ = [
    "CancelledNotificationParams",
    "EmptyResult",
    "Implementation",
    "InitializeRequestParams",
    "InitializeResult",
    "LoggingMessageNotificationParams",
    "PaginatedRequestParams",
    "ProgressNotificationParams",
    "SetLevelRequestParams",
]


@attrs.frozen(kw_only=True, eq=False, repr=False)
class Implementation(Record):
    """Name and version of an MCP client or server."""

    name: str
    version: str
    #: Display name (``name`` is the programmatic identifier).
    title: str | None = attrs.field(default=None, metadata=since("2025-06-18"))
    description: str | None = attrs.field(default=None, metadata=since("2025-11-25"))
    icons: list[Icon] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    website_url: str | None = attrs.field(default=None, metadata=since("2025-11-25"))


@attrs.frozen(kw_only=True, eq=False, repr=False)
class InitializeRequestParams(Record):
    """Params of ``initialize``: the revision we want and what we offer."""

    protocol_version: str
    capabilities: ClientCapabilities
    client_info: Implementation
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class InitializeResult(Record):
    """The server's answer to ``initialize``: the revision it picked and what it offers."""

    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    #: How to use this server; a host may add it to the model's system prompt.
    instructions: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class EmptyResult(Record):
    """A result with no content (``ping``, ``resources/subscribe``, ``logging/setLevel``...)."""

    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class PaginatedRequestParams(Record):
    """Params of the ``*/list`` requests."""

    #: The ``next_cursor`` of the previous page; ``None`` for the first page.
    cursor: Cursor | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ProgressNotificationParams(Record):
    """Params of ``notifications/progress``."""

    progress_token: ProgressToken
    progress: float
    total: float | None = None
    message: str | None = attrs.field(default=None, metadata=since("2025-03-26"))
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class CancelledNotificationParams(Record):
    """Params of ``notifications/cancelled``.

    ``request_id`` is required before 2025-11-25 (where a task cancel may omit it).
    """

    request_id: RequestId | None = None
    reason: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class SetLevelRequestParams(Record):
    """Params of ``logging/setLevel``."""

    level: LoggingLevel
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class LoggingMessageNotificationParams(Record):
    """Params of ``notifications/message``: one log record from the server."""

    level: LoggingLevel
    logger: str | None = None
    #: Any JSON value.
    data: Any
    meta: dict[str, Any] | None = None
