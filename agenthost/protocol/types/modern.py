"""Entities that exist only from MCP 2026-07-28 on: discovery and Multi Round-Trip Requests.

Kept apart from the legacy superset because nothing here can be sent to (or received
from) a server that speaks an ``initialize`` revision.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from agenthost.protocol.types._base import Record
from agenthost.protocol.types.capabilities import ServerCapabilities

__all__ = [
    "DiscoverResult",
    "InputRequiredResult",
    "SubscriptionFilter",
    "SubscriptionsListenRequestParams",
]


@attrs.frozen(kw_only=True, eq=False, repr=False)
class DiscoverResult(Record):
    """The answer to ``server/discover``: versions, capabilities, identity (in ``_meta``)."""

    __mcp_since__: ClassVar[str] = "2026-07-28"

    supported_versions: list[str]
    capabilities: ServerCapabilities
    instructions: str | None = None
    #: How long the answer may be reused, in milliseconds, and by whom.
    ttl_ms: int | None = None
    cache_scope: Literal["private", "public"] | None = None
    result_type: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class InputRequiredResult(Record):
    """``resultType: "input_required"``: answer ``input_requests`` and retry (MRTR)."""

    __mcp_since__: ClassVar[str] = "2026-07-28"

    #: Key -> ``{"method": ..., "params": ...}`` (elicitation, sampling or roots), raw.
    input_requests: dict[str, Any] | None = None
    #: Opaque to the client: echoed back unchanged on the retry.
    request_state: str | None = None
    result_type: str | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class SubscriptionFilter(Record):
    """Which change notifications a ``subscriptions/listen`` stream opts in to."""

    __mcp_since__: ClassVar[str] = "2026-07-28"

    tools_list_changed: bool | None = None
    prompts_list_changed: bool | None = None
    resources_list_changed: bool | None = None
    resource_subscriptions: list[str] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class SubscriptionsListenRequestParams(Record):
    """Params of ``subscriptions/listen``."""

    __mcp_since__: ClassVar[str] = "2026-07-28"

    notifications: SubscriptionFilter
    meta: dict[str, Any] | None = None
