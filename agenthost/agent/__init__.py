"""The agent: an LLM loop over every server's tools.

The agent imports neither the host nor the config: it runs over a
:class:`~agenthost.agent.tool_host.ToolHost` and is handed its provider, so the arrow is
host -> agent only (``tests/test_layers.py``)."""

from agenthost.agent.loop import run_agent
from agenthost.agent.tool_host import ToolEntry, ToolHost
from agenthost.agent.transcript import AgentEvent, StopReason, ToolCallRecord, Transcript

__all__ = [
    "AgentEvent",
    "StopReason",
    "ToolCallRecord",
    "ToolEntry",
    "ToolHost",
    "Transcript",
    "run_agent",
]
