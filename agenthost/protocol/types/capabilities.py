"""Capabilities both sides advertise in ``initialize``.

Capability objects are where newer peers put things we have never heard of, and a host
that silently dropped them would misreport what a server can do. Every capability class
therefore has ``extra``: the keys we do not model, kept on input and folded back in on
output. Sub-objects that the spec leaves open (``logging``, ``completions``, ``tasks``,
``sampling.context``...) are raw dicts for the same reason.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from agenthost.protocol.types._base import Record, since

__all__ = [
    "ClientCapabilities",
    "ElicitationCapability",
    "PromptsCapability",
    "ResourcesCapability",
    "RootsCapability",
    "SamplingCapability",
    "ServerCapabilities",
    "ToolsCapability",
]


@attrs.frozen(kw_only=True, eq=False, repr=False)
class RootsCapability(Record):
    """The client can list roots."""

    #: The client sends ``notifications/roots/list_changed``.
    list_changed: bool | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True, eq=False, repr=False)
class SamplingCapability(Record):
    """The client serves ``sampling/createMessage``."""

    #: ``includeContext`` other than ``"none"`` is supported (soft-deprecated).
    context: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    #: ``tools`` / ``toolChoice`` in sampling requests are supported.
    tools: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ElicitationCapability(Record):
    """The client serves ``elicitation/create``; empty means form mode only."""

    __mcp_since__: ClassVar[str] = "2025-06-18"

    form: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    url: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ClientCapabilities(Record):
    """What the client offers the server."""

    experimental: dict[str, dict[str, Any]] | None = None
    roots: RootsCapability | None = None
    sampling: SamplingCapability | None = None
    elicitation: ElicitationCapability | None = attrs.field(
        default=None, metadata=since("2025-06-18")
    )
    #: Task-augmented requests the client accepts (kept raw; see the tasks utility).
    tasks: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True, eq=False, repr=False)
class PromptsCapability(Record):
    """The server offers prompts."""

    list_changed: bool | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ResourcesCapability(Record):
    """The server offers resources."""

    subscribe: bool | None = None
    list_changed: bool | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ToolsCapability(Record):
    """The server offers tools."""

    list_changed: bool | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ServerCapabilities(Record):
    """What the server offers the client."""

    experimental: dict[str, dict[str, Any]] | None = None
    logging: dict[str, Any] | None = None
    completions: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-03-26"))
    prompts: PromptsCapability | None = None
    resources: ResourcesCapability | None = None
    tools: ToolsCapability | None = None
    #: Task-augmented requests the server accepts (kept raw; see the tasks utility).
    tasks: dict[str, Any] | None = attrs.field(default=None, metadata=since("2025-11-25"))
    extra: dict[str, Any] = attrs.field(factory=dict)
