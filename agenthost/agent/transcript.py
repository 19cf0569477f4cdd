"""What a run of the agent leaves behind (:class:`Transcript`, one :class:`ToolCallRecord`
per tool call) and tells a UI as it goes (:class:`AgentEvent`).

Plain data in a module of its own: both the loop (:mod:`agenthost.agent.loop`) and the tool
calls (:mod:`agenthost.agent.calls`) write them, and neither should import the other's
machinery to do so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

import agenthost_providers.base as llm

__all__ = ["AgentEvent", "StopReason", "ToolCallRecord", "Transcript", "TurnUsage"]

StopReason = Literal["end_turn", "max_turns", "token_budget", "interrupted", "provider_error"]


@attrs.define(kw_only=True)
class ToolCallRecord:
    """One tool call the model made, and what became of it."""

    id: str
    name: str
    arguments: Mapping[str, Any]
    server: str | None = None
    #: "ok", "error" (the tool said isError or failed), "denied" (consent), "cancelled",
    #: or "running" (a task whose result the model has not had yet).
    status: Literal["ok", "error", "denied", "cancelled", "running"] = "ok"
    #: The text the model was given back (for a deferred task: its real result, once in).
    output: str = ""
    reason: str | None = None
    duration: float = 0.0
    #: The server's task id, when the tool ran as a task.
    task_id: str | None = None
    #: The model first got an immediate "still running" result; the real one came later.
    deferred: bool = False


@attrs.frozen(kw_only=True)
class TurnUsage:
    """One model call's tokens, as the vendor billed them, and what they cost."""

    model: str
    input_tokens: int
    output_tokens: int
    #: At the catalog's prices for ``model``; None when the catalog does not know it.
    cost_usd: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": _usd(self.cost_usd),
        }


def _usd(value: float | None) -> float | None:
    """Rounded to a millionth of a dollar: finer is noise, coarser hides small turns."""
    return None if value is None else round(value, 6)


@attrs.define(kw_only=True)
class Transcript:
    """Everything a run did; ``to_json()`` is what ``agenthost run --json`` prints."""

    task: str
    provider: str
    model: str
    messages: list[llm.Message] = attrs.field(factory=list)
    tool_calls: list[ToolCallRecord] = attrs.field(factory=list)
    final_text: str = ""
    stop: StopReason | None = None
    error: str | None = None
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: Every model call's usage, in order (a chat's transcript spans its turns).
    usage: list[TurnUsage] = attrs.field(factory=list)
    #: Tools a ``search_tools`` call loaded: offered in full from then on.
    loaded_tools: list[str] = attrs.field(factory=list)

    @property
    def cost_usd(self) -> float | None:
        """The estimated cost of every model call; None if any model's price is unknown."""
        costs = [u.cost_usd for u in self.usage]
        if any(c is None for c in costs):
            return None
        return sum(c for c in costs if c is not None)

    @property
    def denied(self) -> list[ToolCallRecord]:
        return [c for c in self.tool_calls if c.status == "denied"]

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "provider": self.provider,
            "model": self.model,
            "stop": self.stop,
            "error": self.error,
            "turns": self.turns,
            "final_text": self.final_text,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
            "cost_usd": _usd(self.cost_usd),
            "turns_usage": [u.to_json() for u in self.usage],
            "loaded_tools": list(self.loaded_tools),
            "tool_calls": [
                {
                    "id": c.id,
                    "name": c.name,
                    "server": c.server,
                    "arguments": dict(c.arguments),
                    "status": c.status,
                    "output": c.output,
                    "reason": c.reason,
                    "duration": round(c.duration, 4),
                    "task_id": c.task_id,
                    "deferred": c.deferred,
                }
                for c in self.tool_calls
            ],
        }


@attrs.frozen(kw_only=True)
class AgentEvent:
    """Progress of a run, for a UI: ``text`` (the model spoke), ``delta`` (a piece of the
    model's text as it arrives, when streaming), ``tool_call`` (about to call),
    ``progress`` (the server reported progress on it), ``tool_running`` (a task outlived
    the grace period: the model goes on, the result follows), ``tool_result`` (a call
    finished: see ``record``), ``stop``."""

    kind: Literal["text", "delta", "tool_call", "progress", "tool_running", "tool_result", "stop"]
    text: str = ""
    record: ToolCallRecord | None = None
    #: For ``progress``: (progress, total, message) as the server sent them.
    progress: tuple[float, float | None, str | None] | None = None
