"""A deterministic *replay* provider: canned turns, in order, for offline demos and tests.

This is not a model and never pretends to be one: it does not read the request to decide
what to say, its answers carry the model id ``scripted-replay`` (unless the script names
another) and zero token usage. It records every request it receives, so a test can assert
on exactly what the agent loop or sampling service sent.

Script file (TOML or JSON, same shape)::

    model = "scripted-replay"            # optional

    [[turns]]                            # 1st call: a tool call
    text = "Let me look that up."        # optional text before the calls
    [[turns.tool_calls]]
    id = "call_1"
    name = "get_weather"
    input = { city = "Paris" }

    [[turns]]                            # 2nd call: a plain answer
    text = "It is 18°C in Paris."
    stop_reason = "endTurn"              # optional; default toolUse / endTurn

A call after the last turn fails with ``ProviderError`` ("script exhausted"), so a test
notices an unexpected extra call instead of looping.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from agenthost.errors import ConfigError, ProviderError

from .base import (
    END_TURN,
    TOOL_USE,
    Completed,
    Content,
    Request,
    Result,
    StreamEvent,
    TextContent,
    TextDelta,
    ToolUseContent,
    ToolUseEvent,
    Usage,
)

__all__ = ["REPLAY_MODEL", "ScriptedProvider", "ScriptedTurn"]

REPLAY_MODEL = "scripted-replay"


@attrs.frozen(kw_only=True)
class ScriptedTurn:
    """One canned answer."""

    text: str | None = None
    tool_calls: tuple[ToolUseContent, ...] = ()
    #: Defaults to toolUse when there are tool calls, else endTurn.
    stop_reason: str | None = None

    def result(self, model: str) -> Result:
        """This turn as a :class:`Result` with zero usage (nothing was generated)."""
        content: list[Content] = [TextContent(text=self.text)] if self.text else []
        content.extend(self.tool_calls)
        stop = self.stop_reason or (TOOL_USE if self.tool_calls else END_TURN)
        return Result(content=tuple(content), model=model, stop_reason=stop, usage=Usage())


class ScriptedProvider:
    """Replays :class:`ScriptedTurn` objects in order and records the requests it got.

    Args:
        turns: the answers, one per call.
        name: the configured provider name.
        model: the model id reported in results.
    """

    def __init__(
        self, turns: Sequence[ScriptedTurn], *, name: str = "scripted", model: str = REPLAY_MODEL
    ) -> None:
        self._turns = tuple(turns)
        self._name = name
        self._model = model
        self._next = 0
        self._closed = False
        #: Every request received, in order (including one that exhausted the script).
        self.requests: list[Request] = []

    @classmethod
    def from_file(cls, path: str | Path, *, name: str = "scripted") -> ScriptedProvider:
        """Load a ``.toml`` or ``.json`` script.

        Raises:
            ConfigError: unreadable file or a malformed script (with the key at fault).
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
            data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read replay script: {exc}", path=str(path)) from None
        return cls.from_data(data, source=str(path), name=name)

    @classmethod
    def from_data(
        cls, data: Mapping[str, Any], *, source: str, name: str = "scripted"
    ) -> ScriptedProvider:
        """Build from already-parsed script data (see the module docstring)."""
        model = data.get("model", REPLAY_MODEL)
        if not isinstance(model, str):
            raise ConfigError("must be a string", path=source, key="model")
        raw_turns = data.get("turns")
        if not isinstance(raw_turns, list) or not raw_turns:
            raise ConfigError("must be a non-empty array of tables", path=source, key="turns")
        return cls([_turn(t, source, i) for i, t in enumerate(raw_turns)], name=name, model=model)

    @property
    def name(self) -> str:
        """The configured provider name."""
        return self._name

    @property
    def remaining(self) -> int:
        """Turns not yet replayed."""
        return len(self._turns) - self._next

    def _take(self, request: Request) -> ScriptedTurn:
        if self._closed:
            raise ProviderError("this provider has been closed", provider=self._name)
        self.requests.append(request)
        if self._next >= len(self._turns):
            raise ProviderError(
                f"replay script exhausted after {len(self._turns)} turn(s)", provider=self._name
            )
        turn = self._turns[self._next]
        self._next += 1
        return turn

    async def replay(self, request: Request) -> Result:
        """The turn a fresh replay gives this conversation: turn N for a request holding
        N assistant messages, whatever this provider answered before.

        Why: one provider on a worker serves many durable runs at once, each from its
        first turn, and a run's model call may be retried on another worker; counting
        calls per provider would hand one run another's turn.
        """
        await trio.lowlevel.checkpoint()
        if self._closed:
            raise ProviderError("this provider has been closed", provider=self._name)
        self.requests.append(request)
        index = sum(1 for message in request.messages if message.role == "assistant")
        if index >= len(self._turns):
            raise ProviderError(
                f"replay script exhausted after {len(self._turns)} turn(s)", provider=self._name
            )
        return self._turns[index].result(self._model)

    async def complete(self, request: Request) -> Result:
        """Return the next canned turn."""
        await trio.lowlevel.checkpoint()
        return self._take(request).result(self._model)

    @asynccontextmanager
    async def stream(self, request: Request) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        """Yield the next canned turn as events: its text, its tool calls, then Completed."""
        await trio.lowlevel.checkpoint()
        result = self._take(request).result(self._model)
        events = _events(result)
        try:
            yield events
        finally:
            await events.aclose()

    async def aclose(self) -> None:
        """Mark closed; further calls fail."""
        self._closed = True


async def _events(result: Result) -> AsyncGenerator[StreamEvent, None]:
    if result.text:
        await trio.lowlevel.checkpoint()
        yield TextDelta(text=result.text)
    for tool in result.tool_uses:
        await trio.lowlevel.checkpoint()
        yield ToolUseEvent(tool_use=tool)
    yield Completed(result=result)


def _turn(raw: Any, source: str, index: int) -> ScriptedTurn:
    key = f"turns[{index}]"
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a table", path=source, key=key)
    known = ("text", "tool_calls", "stop_reason")
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError.unknown_key(f"{key}.{unknown[0]}", unknown[0], known, path=source)
    text = raw.get("text")
    stop = raw.get("stop_reason")
    if text is not None and not isinstance(text, str):
        raise ConfigError("must be a string", path=source, key=f"{key}.text")
    if stop is not None and not isinstance(stop, str):
        raise ConfigError("must be a string", path=source, key=f"{key}.stop_reason")
    calls_raw = raw.get("tool_calls", [])
    if not isinstance(calls_raw, list):
        raise ConfigError("must be an array of tables", path=source, key=f"{key}.tool_calls")
    calls = []
    for j, call in enumerate(calls_raw):
        where = f"{key}.tool_calls[{j}]"
        if (
            not isinstance(call, Mapping)
            or not isinstance(call.get("name"), str)
            or not isinstance(call.get("input", {}), Mapping)
        ):
            raise ConfigError("needs a string name and a table input", path=source, key=where)
        call_id = call.get("id", f"replay_{index}_{j}")
        if not isinstance(call_id, str):
            raise ConfigError("must be a string", path=source, key=f"{where}.id")
        calls.append(
            ToolUseContent(id=call_id, name=call["name"], input=dict(call.get("input", {})))
        )
    if text is None and not calls:
        raise ConfigError("a turn needs text or tool_calls", path=source, key=key)
    return ScriptedTurn(text=text, tool_calls=tuple(calls), stop_reason=stop)
