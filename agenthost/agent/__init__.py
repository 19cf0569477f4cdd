"""The agent: an LLM loop over every server's tools."""

from agenthost.agent.loop import (
    AgentEvent,
    StopReason,
    ToolCallRecord,
    Transcript,
    run_agent,
)

__all__ = [
    "AgentEvent",
    "StopReason",
    "ToolCallRecord",
    "Transcript",
    "run_agent",
]
