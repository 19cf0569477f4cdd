"""What the agent loop needs from whoever owns the tools: :class:`ToolHost`.

The agent imports no host. :class:`agenthost.host.Host` satisfies this protocol (the
type checker proves it where ``Host.run_agent`` passes itself), and so can anything else
that offers tools behind consent: a durable runtime, a test double, a gateway. Keeping the
agent on a protocol is what makes the arrow one-way (host -> agent) instead of a circle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from agenthost.protocol.types import CallToolResult, Tool
    from agenthost.session import ProgressCallback
    from agenthost.skills import LoadedSkill, SkillEntry
    from agenthost.tool_tasks import TaskCreatedCallback

__all__ = ["EntryT", "ToolEntry", "ToolHost"]


class ToolEntry(Protocol):
    """One tool as the model sees it: its namespaced ``name``, its ``server``, the MCP
    ``tool`` (description and input schema are offered to the model)."""

    @property
    def name(self) -> str: ...

    @property
    def server(self) -> str: ...

    @property
    def tool(self) -> Tool: ...


#: The host's own entry type: the entries it lists are the ones it is asked about.
EntryT = TypeVar("EntryT", bound=ToolEntry)


class ToolHost(Protocol[EntryT]):
    """The tools, skills and consent the agent loop runs over.

    Every call that reaches a server goes through the host, so through its policy: the
    agent never talks to a session itself.
    """

    def tools(self) -> Sequence[EntryT]:
        """Every tool currently offered by a ready server."""
        ...

    def always_denied(self, entry: EntryT) -> str | None:
        """Why every call of ``entry`` would be denied, or None; such tools are not offered."""
        ...

    def resolve_tool(self, name: str) -> EntryT:
        """The entry for a namespaced tool name. Raises NotFound."""
        ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: ProgressCallback | None = None,
        on_task: TaskCreatedCallback | None = None,
    ) -> CallToolResult:
        """Call a namespaced tool with consent. Raises ConsentDenied, NotFound, ..."""
        ...

    async def list_skills(self) -> list[tuple[str, SkillEntry]]:
        """Every skill on offer, as (server, entry); names and descriptions only."""
        ...

    async def load_skill(self, server: str, name: str) -> LoadedSkill:
        """One skill's content, with consent, verified against its listing."""
        ...
