"""The sampling service: a server's ``sampling/createMessage``, end to end.

    request -> model selection (hints, priorities, policy constraints)
            -> consent (policies: allow/deny/ask, caps, rate limits, budgets)
            -> provider call (maxTokens as the policy granted)
            -> review of the answer (interactive, or as the rule says)
            -> result, and an audit line for the outcome

Errors the server receives (JSON-RPC error objects, never a hang):

==========================================  =======  ==================================
situation                                   code     message
==========================================  =======  ==================================
denied by policy or by the user             -1       ``User rejected sampling request``
answer rejected at review                   -1       ``User rejected sampling response``
rate limit or token budget exceeded         -32000   ``Sampling limit exceeded: ...``
content no model can take / unknown type    -32602   what was refused
no configured model fits the request        -32603   ``No model available: ...``
the provider failed                         -32603   ``Provider <name> failed: ...``
==========================================  =======  ==================================

Isolation: a request is answered from its own messages only. ``includeContext``
(``thisServer``/``allServers``, soft-deprecated) is subject to policy, and even when
allowed no other conversation is added: one server never sees another's data.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import orjson
import trio

import agenthost_providers.base as llm
from agenthost.errors import JSONRPCError, NoModelAvailable, ProviderError, UnsupportedContent
from agenthost.mcp_to_llm import sampling_messages_to_llm
from agenthost.protocol.converter import unstructure
from agenthost.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS
from agenthost.protocol.revisions import at_least
from agenthost.protocol.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    TextContent,
    ToolUseContent,
)
from agenthost_policies import Decision, PolicyEngine, Sampling
from agenthost_providers.base import ModelInfo, Provider
from agenthost_providers.selection import Constraints, ModelPreferences, Selection, select_model

__all__ = ["SamplingEvent", "SamplingService"]

log = logging.getLogger("agenthost.host.sampling")

USER_REJECTED = -1
LIMIT_EXCEEDED = -32000


@attrs.frozen(kw_only=True)
class SamplingEvent:
    """What the service did, for a UI to show (the CLI prints the selection's reason)."""

    server: str
    stage: str  # "selected" | "denied" | "answered" | "failed"
    message: str
    provider: str | None = None
    model: str | None = None


class SamplingService:
    """Serves sampling for every server of a host, through one policy engine."""

    def __init__(
        self,
        *,
        providers: Mapping[str, Provider],
        available: Sequence[ModelInfo],
        engine: PolicyEngine,
        default: tuple[str, str] | None = None,
        on_event: Callable[[SamplingEvent], None] | None = None,
    ) -> None:
        self._providers = providers
        self._available = list(available)
        self._engine = engine
        self._default = default
        self._on_event = on_event

    def _emit(self, event: SamplingEvent) -> None:
        log.info("%s: sampling %s: %s", event.server, event.stage, event.message)
        if self._on_event is not None:
            self._on_event(event)

    def select(
        self, server: str, params: CreateMessageRequestParams, request: llm.Request
    ) -> Selection:
        """Pick the model: hints and priorities, within what policy allows this server.

        Raises:
            JSONRPCError: -32603 when nothing configured fits.
        """
        rule = self._engine.match(_action(server, params, None, trusted=False))
        limits = rule.sampling if rule is not None else None
        constraints = Constraints(
            providers=frozenset(limits.providers) if limits and limits.providers else None,
            models=frozenset(limits.models) if limits and limits.models else None,
            required=llm.required_capabilities(request),
        )
        prefs = params.model_preferences
        raw = unstructure(prefs, "2025-11-25") if prefs is not None else None
        try:
            return select_model(
                ModelPreferences.from_mcp(raw),
                [m for m in self._available if m.provider in self._providers],
                constraints,
                default=self._default,
            )
        except NoModelAvailable as exc:
            raise JSONRPCError(INTERNAL_ERROR, f"No model available: {exc}") from None

    async def create_message(
        self,
        server: str,
        params: CreateMessageRequestParams,
        *,
        revision: str,
        trusted: bool = False,
        via: Mapping[str, Any] | None = None,
    ) -> CreateMessageResult:
        """Answer one sampling request (see the module docstring for the errors).

        Select a model, ask the policy, call the provider, let the policy review the
        answer, audit the outcome: each step is a method below.

        ``via``: for an MRTR ask (2026-07-28), the request and round it belongs to; the
        audit records it.
        """
        draft = _draft(params)
        selection = self.select(server, params, draft)
        self._emit(
            SamplingEvent(
                server=server,
                stage="selected",
                message=f"{selection.provider}/{selection.model}: {selection.reason}",
                provider=selection.provider,
                model=selection.model,
            )
        )
        action = _action(server, params, selection, trusted=trusted, via=via)
        decision = await self._admit(server, action)
        max_tokens = decision.sampling.max_tokens if decision.sampling else params.max_tokens
        request = attrs.evolve(draft, model=selection.model, max_tokens=max_tokens)
        started = time.monotonic()
        result, tokens = await self._complete(server, selection, request, action, decision)
        await self._engine.record_outcome(
            decision.id,
            result={"model": result.model, "stop_reason": result.stop_reason, "tokens": tokens},
            duration=time.monotonic() - started,
        )
        self._emit(
            SamplingEvent(
                server=server,
                stage="answered",
                message=f"{result.model} answered ({tokens} tokens, {result.stop_reason})",
                provider=selection.provider,
                model=result.model,
            )
        )
        return _to_mcp(result, revision)

    async def forward(
        self,
        server: str,
        params: CreateMessageRequestParams,
        *,
        send: Callable[[CreateMessageRequestParams], Awaitable[CreateMessageResult]],
        reason: str,
        trusted: bool = False,
        via: Mapping[str, Any] | None = None,
    ) -> CreateMessageResult:
        """Answer one sampling request by handing it to another client (``agenthost
        serve``'s downstream client), after the same policy check as :meth:`create_message`.

        The model is the other client's choice: the decision line names the destination
        and ``reason``, the outcome line the model that answered. No provider is called
        and the answer is not reviewed here (the other client's own person does that);
        a token budget counts the whole grant, since the client's usage is not known.
        """
        action = attrs.evolve(
            _action(server, params, None, trusted=trusted, via=via),
            provider="client",
            model_reason=reason,
        )
        self._emit(SamplingEvent(server=server, stage="selected", message=f"client: {reason}"))
        decision = await self._admit(server, action)
        started = time.monotonic()
        try:
            result = await send(params)
        except BaseException as exc:
            self._engine.settle_sampling(decision, None)
            with trio.CancelScope(shield=True):
                await self._engine.record_outcome(
                    decision.id, error=exc, duration=time.monotonic() - started
                )
            raise
        self._engine.settle_sampling(decision, None)
        await self._engine.record_outcome(
            decision.id,
            result={"model": result.model, "stop_reason": result.stop_reason, "via": "client"},
            duration=time.monotonic() - started,
        )
        self._emit(
            SamplingEvent(
                server=server,
                stage="answered",
                message=f"the client's {result.model} answered",
                provider="client",
                model=result.model,
            )
        )
        return result

    async def _admit(self, server: str, action: Sampling) -> Decision:
        """The policy's decision, or the JSON-RPC error a refusal is (limit or rejection)."""
        decision = await self._engine.check(action)
        if decision.allowed:
            return decision
        self._emit(SamplingEvent(server=server, stage="denied", message=decision.reason))
        if decision.by == "limit":
            raise JSONRPCError(
                LIMIT_EXCEEDED,
                f"Sampling limit exceeded: {decision.reason}",
                {"rule": decision.rule},
            )
        raise JSONRPCError(
            USER_REJECTED,
            "User rejected sampling request",
            {"reason": decision.reason, "rule": decision.rule},
        )

    async def _complete(
        self,
        server: str,
        selection: Selection,
        request: llm.Request,
        action: Sampling,
        decision: Decision,
    ) -> tuple[llm.Result, int]:
        """The provider's answer, its tokens settled and the answer reviewed; on any
        failure (cancellation included) the reservation is settled and the outcome audited."""
        started = time.monotonic()
        try:
            try:
                result = await self._providers[selection.provider].complete(request)
            except UnsupportedContent as exc:
                self._engine.release_sampling(decision)
                raise JSONRPCError(INVALID_PARAMS, str(exc)) from None
            except ProviderError as exc:
                self._engine.release_sampling(decision)
                raise JSONRPCError(
                    INTERNAL_ERROR, f"Provider {selection.provider} failed: {exc}"
                ) from None
            tokens = result.usage.input_tokens + result.usage.output_tokens
            self._engine.settle_sampling(decision, tokens)
            # The reviewer sees everything that would go back: text *and* tool calls.
            if not await self._engine.review_sampling(
                action, _reviewable(result), decision=decision
            ):
                raise JSONRPCError(USER_REJECTED, "User rejected sampling response")
        except BaseException as exc:
            # Cancelled while the provider may have been working: the whole reservation
            # counts (a no-op when already settled or released above).
            self._engine.settle_sampling(decision, None)
            # Every allowed request gets its outcome line, cancellation included.
            self._emit(
                SamplingEvent(server=server, stage="failed", message=str(exc) or "cancelled")
            )
            with trio.CancelScope(shield=True):
                await self._engine.record_outcome(
                    decision.id, error=exc, duration=time.monotonic() - started
                )
            raise
        return result, tokens


def _draft(params: CreateMessageRequestParams) -> llm.Request:
    """The provider request a sampling request asks for, before a model is chosen."""
    return llm.Request(
        model="",
        messages=sampling_messages_to_llm(params.messages),
        max_tokens=params.max_tokens,
        system_prompt=params.system_prompt,
        temperature=params.temperature,
        stop_sequences=tuple(params.stop_sequences or ()),
        metadata=params.metadata,
        tools=tuple(
            llm.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
            for t in params.tools or ()
        ),
        tool_choice=params.tool_choice.mode if params.tool_choice else None,
    )


def _action(
    server: str,
    params: CreateMessageRequestParams,
    selection: Selection | None,
    *,
    trusted: bool,
    via: Mapping[str, Any] | None = None,
) -> Sampling:
    wire = unstructure(params, "2025-11-25")
    return Sampling(
        server=server,
        messages=tuple(wire.get("messages", ())),
        system_prompt=params.system_prompt,
        max_tokens=params.max_tokens,
        include_context=params.include_context or "none",
        tools=tuple(t.name for t in params.tools or ()),
        provider=selection.provider if selection else None,
        model=selection.model if selection else None,
        model_reason=selection.reason if selection else None,
        trusted=trusted,
        via=via,
    )


def _reviewable(result: llm.Result) -> str:
    """The whole answer as a person reviews it: text, and each tool call with its input."""
    parts = []
    for part in result.content:
        if isinstance(part, llm.TextContent):
            parts.append(part.text)
        elif isinstance(part, llm.ToolUseContent):
            arguments = orjson.dumps(dict(part.input)).decode()
            parts.append(f"[tool call] {part.name} {arguments}")
    return "\n".join(parts)


def _to_mcp(result: llm.Result, revision: str) -> CreateMessageResult:
    blocks: list[Any] = []
    for part in result.content:
        if isinstance(part, llm.TextContent):
            blocks.append(TextContent(text=part.text))
        elif isinstance(part, llm.ToolUseContent):
            blocks.append(ToolUseContent(id=part.id, name=part.name, input=dict(part.input)))
    if not blocks:
        blocks.append(TextContent(text=""))
    content: Any = blocks[0] if len(blocks) == 1 else blocks
    if len(blocks) > 1 and not at_least(revision, "2025-11-25"):
        # Before 2025-11-25 a sampling answer is one block: keep the text.
        content = TextContent(text=result.text)
    return CreateMessageResult(
        role="assistant", content=content, model=result.model, stop_reason=result.stop_reason
    )
