"""The Temporal workflow ``AgentRun``: one durable agent run.

The run is deterministic: it holds the conversation (the :class:`AgentCore` of the local
loop, so the rules are the same), the policy snapshot taken at submit time, the pending
consent questions and the audit sequence counter. Everything that touches the world is an
activity (:mod:`agenthost.durable.activities`): the model call, the tool listing, each
tool call, each audit line. A worker that dies mid-activity loses nothing: the activity
stops heartbeating and Temporal runs it again on another worker.

Consent is decided here with the snapshot: ``allow`` runs the tool, ``deny`` gives the
model the refusal, ``ask`` parks the run (``runs list`` shows it waiting, with the tool,
server and arguments) until an ``answer`` Update approves or denies it, or until the
policy's ``ask_timeout`` applies the headless default (deny). Every decision is audited
with who answered.

History stays bounded: the run continues as new (same run id, a fresh history carrying
the state) when Temporal suggests it or after ``continue_after`` model turns; tool
results over ``result_cap`` characters are cut in the conversation, their full text kept
by the worker under a reference (see README "Many machines").
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import agenthost_providers.base as llm
    from agenthost.agent.core import AgentCore, CallTools, Finished
    from agenthost.agent.transcript import AgentEvent, ToolCallRecord, Transcript
    from agenthost.durable import codec
    from agenthost.durable.limits import LimitError, check_run_id, check_task, check_who, clip, size
    from agenthost.durable.policy import decide
    from agenthost.durable.shrink import (
        CONVERSATION_MAX,
        EVENTS_MAX,
        compact,
        preview,
        trim_records,
    )
    from agenthost_policies.decision import ToolCall, Verdict

__all__ = ["IDEMPOTENCY_KEY", "AgentRun"]

#: The ``_meta`` key of a tool call's idempotency key, ``RUN_ID/CALL_ID``.
IDEMPOTENCY_KEY = "io.agenthost/idempotency-key"

#: The events kept for followers, at most this many and :data:`EVENTS_MAX` bytes; older
#: ones are dropped (a follower that fell this far behind reads the transcript at the end
#: instead).
_MAX_EVENTS = 500
#: Characters of an error's text kept in a record (a server's or a provider's message).
_ERROR_MAX = 2000
#: The patch id of the bounds on a run's input and state (:mod:`agenthost.durable.limits`,
#: :mod:`agenthost.durable.shrink`): new commands only for runs started with them.
_BOUNDED = "bounded-input-and-state"


def _event(event: AgentEvent) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": event.kind, "text": event.text}
    if event.record is not None:
        out["record"] = codec.dump(preview(event.record))
    return out


def _error(tool_use_id: str, text: str) -> llm.ToolResultContent:
    return llm.ToolResultContent(
        tool_use_id=tool_use_id, content=(llm.TextContent(text=text),), is_error=True
    )


@workflow.defn(name="AgentRun")
class AgentRun:
    """One agent run (see the module docstring). Input: the dict built by
    :func:`agenthost.durable.client.run_input`."""

    def __init__(self) -> None:
        self._events: list[dict[str, Any]] = []
        #: Index of ``_events[0]`` among all events of the run.
        self._base = 0
        #: Questions waiting for a person, by call id.
        self._pending: dict[str, dict[str, Any]] = {}
        self._answers: dict[str, dict[str, Any]] = {}
        #: Every call id that has had its decision (a second answer is refused).
        self._decided: set[str] = set()
        self._event_bytes = 0
        self._seq = 0
        #: Histories this run has had (1 + its continue-as-new count).
        self._segment = 1
        self._core: AgentCore | None = None
        self._params: dict[str, Any] = {}
        #: Audit appends started and not yet awaited (the run goes on meanwhile).
        self._writes: list[Any] = []
        self._buffer: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ handlers

    @workflow.query
    def progress(self, since: int) -> dict[str, Any]:
        """Events from index ``since`` on, the index to ask from next, and the state."""
        start = max(since - self._base, 0)
        return {
            "events": self._events[start:],
            "next": self._base + len(self._events),
            "pending": list(self._pending.values()),
        }

    @workflow.query
    def transcript(self) -> dict[str, Any]:
        return self._core.record.to_json() if self._core is not None else {}

    @workflow.update
    def answer(self, call_id: str, verdict: str, who: str) -> str:
        """A person's answer to a parked call: ``allow`` or ``deny``."""
        self._answers[call_id] = {"verdict": verdict, "who": who}
        return f"{verdict} recorded for call {call_id}"

    @answer.validator
    def _check_answer(self, call_id: str, verdict: str, who: str) -> None:
        """Refused before it enters history: a call that is not waiting (unknown, or
        answered already) and an answer that is neither allow nor deny."""
        check_who(who)
        if verdict not in ("allow", "deny"):
            raise ValueError(f"the answer must be allow or deny, not {verdict!r}")
        if call_id in self._decided or call_id in self._answers:
            raise ValueError(f"call {call_id} was answered already")
        if call_id not in self._pending:
            raise ValueError(f"no call {call_id} is waiting for approval in this run")

    # ------------------------------------------------------------------ the run

    @workflow.run
    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        # A run started before these checks replays without them (failing it now would
        # not match its history, and the worker would retry that for ever).
        if workflow.patched(_BOUNDED):
            try:
                # The id names the run's folder on a worker: a path would escape it.
                check_run_id(workflow.info().workflow_id)
                check_task(params["task"])
            except LimitError as exc:
                raise ApplicationError(str(exc), type="LimitError", non_retryable=True) from None
        self._params = params
        state = params.get("state")
        if state is None:
            record = Transcript(
                task=params["task"], provider=params["provider"], model=params["model"]
            )
        else:
            record = codec.load_transcript(state["transcript"])
            self._seq = state["seq"]
            self._base = state["events_base"]
            self._events = state["events"]
            self._event_bytes = sum(size(event) for event in self._events)
            self._decided = set(state["decided"])
            self._segment = state["segment"] + 1
        core = AgentCore(
            record=record,
            model=params["model"],
            max_tokens=params["max_tokens"],
            system_prompt=params["system_prompt"],
            max_turns=params["max_turns"],
            token_budget=params["token_budget"],
            emit=self._emit,
            turns=state["turns"] if state is not None else 0,
        )
        self._core = core
        if state is None:
            core.begin(params["task"])
            self._audit({"type": "run", "event": "start", "task": params["task"]})
        tools = await self._list_tools()
        segment_turns = 0
        while True:
            if core.out_of_turns() is not None:
                break
            if not self._small(core):
                break
            offered = [self._offer(entry) for entry in tools.values() if self._offered(entry)]
            ask = core.request(offered)
            try:
                reply = await self._model(ask.request)
            except ActivityError as exc:
                core.model_failed(clip(str(exc.cause or exc), _ERROR_MAX) or "")
                break
            segment_turns += 1
            step = core.model_replied(reply)
            if isinstance(step, Finished):
                break
            assert isinstance(step, CallTools)
            results = await asyncio.gather(
                *(self._tool(use, record_, tools) for use, record_ in step.calls)
            )
            self._ship()
            if core.tools_answered(results) is not None:
                break
            if self._should_continue(segment_turns):
                await self._flush()
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._carry_over(core))
        trim_records(record.tool_calls)
        self._emit(AgentEvent(kind="stop", text=str(record.stop)))
        self._audit({"type": "run", "event": "stop", "stop": record.stop, "turns": record.turns})
        await self._flush()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return {
            **record.to_json(),
            "run_id": workflow.info().workflow_id,
            "histories": self._segment,
        }

    def _should_continue(self, segment_turns: int) -> bool:
        limit = self._params.get("options", {}).get("continue_after")
        if limit is not None and segment_turns >= int(limit):
            return True
        return workflow.info().is_continue_as_new_suggested()

    def _small(self, core: AgentCore) -> bool:
        """Elide old tool results and trim old records so the conversation stays under
        :data:`CONVERSATION_MAX` (each model request carries it, and a new history);
        False, the run stopped, when even that leaves it over."""
        record = core.record
        trim_records(record.tool_calls)
        total = compact(record.messages)
        if total <= CONVERSATION_MAX or not workflow.patched(_BOUNDED):
            return True
        record.error = (
            f"the conversation is {total} bytes even with earlier tool results elided;"
            f" a durable run carries at most {CONVERSATION_MAX}"
        )
        record.stop = "token_budget"
        return False

    def _carry_over(self, core: AgentCore) -> dict[str, Any]:
        trim_records(core.record.tool_calls)
        compact(core.record.messages)
        return {
            **self._params,
            "state": {
                "transcript": codec.dump(core.record),
                "turns": core.turns,
                "seq": self._seq,
                "events_base": self._base,
                "events": self._events,
                "decided": sorted(self._decided),
                "segment": self._segment,
            },
        }

    def _emit(self, event: AgentEvent) -> None:
        shown = _event(event)
        self._events.append(shown)
        self._event_bytes += size(shown)
        drop = 0
        while drop < len(self._events) - 1 and (
            len(self._events) - drop > _MAX_EVENTS or self._event_bytes > EVENTS_MAX
        ):
            self._event_bytes -= size(self._events[drop])
            drop += 1
        if drop:
            del self._events[:drop]
            self._base += drop

    def _option(self, name: str, default: float) -> float:
        return float(self._params.get("options", {}).get(name, default))

    # ------------------------------------------------------------------ activities

    def _retry(self) -> RetryPolicy:
        return RetryPolicy(
            initial_interval=timedelta(seconds=0.5),
            maximum_interval=timedelta(seconds=10),
            maximum_attempts=int(self._option("max_attempts", 5)),
        )

    async def _list_tools(self) -> dict[str, dict[str, Any]]:
        listed = await workflow.execute_activity(
            "list_tools",
            start_to_close_timeout=timedelta(seconds=self._option("list_timeout", 60)),
            # Every activity heartbeats (or is short): a listing lost with its worker is
            # retried within the heartbeat timeout, not after the minute of its deadline.
            heartbeat_timeout=timedelta(seconds=self._option("heartbeat_timeout", 10)),
            retry_policy=self._retry(),
            result_type=list,
        )
        return {entry["name"]: entry for entry in listed}

    async def _model(self, request: llm.Request) -> llm.Result:
        out = await workflow.execute_activity(
            "llm_call",
            {"provider": self._params["provider"], "request": codec.dump(request)},
            start_to_close_timeout=timedelta(seconds=self._option("llm_timeout", 600)),
            heartbeat_timeout=timedelta(seconds=self._option("heartbeat_timeout", 10)),
            retry_policy=self._retry(),
            result_type=dict,
        )
        return codec.load_result(out)

    def _audit(self, line: Mapping[str, Any]) -> None:
        """One audit line, numbered here: retries of the activity write it once.

        Buffered, then shipped in one activity per step (:meth:`_ship`): after a turn's
        tool calls, before the run parks on a question, before it ends or continues as
        new. The run does not wait for a write; :meth:`_flush` awaits them all before
        the run ends or continues as new, so none is lost. Their order is ``seq``.
        """
        self._seq += 1
        self._buffer.append(
            {
                **line,
                "run_id": workflow.info().workflow_id,
                "seq": self._seq,
                "ts": workflow.now().timestamp(),
            }
        )

    def _ship(self) -> None:
        if not self._buffer:
            return
        lines, self._buffer = self._buffer, []
        self._writes.append(
            workflow.start_activity(
                "audit_append",
                lines,
                # A file append: a worker that died holding it is known within seconds.
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
            )
        )

    async def _flush(self) -> None:
        self._ship()
        writes, self._writes = self._writes, []
        await asyncio.gather(*writes)

    # ------------------------------------------------------------------ tools

    def _action(self, entry: Mapping[str, Any], arguments: Mapping[str, Any]) -> ToolCall:
        return ToolCall(
            server=entry["server"],
            tool=entry["tool"],
            listed=entry["name"],
            arguments=dict(arguments),
            annotations=entry.get("annotations"),
            trusted=bool(entry.get("trusted")),
        )

    def _offered(self, entry: Mapping[str, Any]) -> bool:
        """A tool the policy denies on every call is not offered (as in a local run)."""
        view = decide(self._params["policy"], self._action(entry, {}))
        return view.verdict is not Verdict.DENY

    @staticmethod
    def _offer(entry: Mapping[str, Any]) -> llm.Tool:
        return llm.Tool(
            name=entry["name"],
            description=entry.get("description") or entry["tool"],
            input_schema=entry.get("input_schema") or {"type": "object"},
        )

    async def _tool(
        self, use: llm.ToolUseContent, record: ToolCallRecord, tools: Mapping[str, Any]
    ) -> llm.Content:
        """One tool use: decided, audited, run (or refused); always a result."""
        entry = tools.get(use.name)
        result: llm.Content
        if entry is None:
            record.status, record.reason = "error", f"no tool named {use.name!r}"
            result = _error(use.id, f"No such tool: {use.name}")
        else:
            record.server = entry["server"]
            result = await self._decided_call(use, record, entry)
        self._emit(AgentEvent(kind="tool_result", record=record))
        return result

    async def _decided_call(
        self, use: llm.ToolUseContent, record: ToolCallRecord, entry: Mapping[str, Any]
    ) -> llm.Content:
        run_id = workflow.info().workflow_id
        key = f"{run_id}/{use.id}"
        view = decide(self._params["policy"], self._action(entry, use.input))
        verdict, reason, by, who = view.verdict, view.reason, view.by, None
        if verdict is Verdict.ASK:
            verdict, reason, by, who = await self._ask(use, entry, reason)
        self._decided.add(use.id)
        self._audit(
            {
                "type": "decision",
                "kind": "tool",
                "call_id": use.id,
                "server": entry["server"],
                "name": entry["tool"],
                "args": dict(use.input),
                "decision": verdict.value,
                "rule": view.label,
                "reason": reason,
                "by": by,
                "who": who,
                "idempotency_key": key,
            }
        )
        if verdict is not Verdict.ALLOW:
            record.status, record.reason = "denied", reason
            record.output = f"Denied by policy: {reason}. Do not retry this call."
            return _error(use.id, record.output)
        try:
            out = await workflow.execute_activity(
                "call_tool",
                {
                    "run_id": run_id,
                    "call_id": use.id,
                    "name": use.name,
                    "arguments": dict(use.input),
                    "key": key,
                    "result_cap": int(self._option("result_cap", 16384)),
                },
                start_to_close_timeout=timedelta(seconds=self._option("tool_timeout", 3600)),
                heartbeat_timeout=timedelta(seconds=self._option("heartbeat_timeout", 10)),
                retry_policy=self._retry(),
                result_type=dict,
            )
        except ActivityError as exc:
            cause = exc.cause
            text = cause.message if isinstance(cause, ApplicationError) else str(cause or exc)
            text = clip(text, _ERROR_MAX) or ""
            out = {"status": "error", "reason": text, "attempt": None, "duration": 0.0}
            out["result"] = codec.dump(_error(use.id, f"Tool call failed: {text}"))
        record.status, record.reason = out["status"], out.get("reason")
        record.duration = out.get("duration", 0.0)
        content = codec.load_content(out["result"])
        record.output = out.get("output", "")
        self._audit(
            {
                "type": "outcome",
                "call_id": use.id,
                "status": record.status,
                "attempt": out.get("attempt"),
                "worker": out.get("worker"),
                "ref": out.get("ref"),
                "idempotency_key": key,
            }
        )
        return content

    async def _ask(
        self, use: llm.ToolUseContent, entry: Mapping[str, Any], reason: str
    ) -> tuple[Verdict, str, Any, str | None]:
        """Park until a person answers, or until ``ask_timeout`` (then: deny)."""
        self._pending[use.id] = {
            "call_id": use.id,
            "tool": entry["tool"],
            "server": entry["server"],
            "arguments": dict(use.input),
            "reason": reason,
        }
        self._memo()
        self._ship()  # the decisions so far are in the audit while a person decides
        timeout = float(self._params["policy"].get("ask_timeout", 86400.0))
        try:
            await workflow.wait_condition(lambda: use.id in self._answers, timeout=timeout)
        except TimeoutError:
            del self._pending[use.id]
            self._memo()
            return (
                Verdict.DENY,
                f"nobody answered within ask_timeout ({timeout:g} s): the headless default",
                "timeout",
                None,
            )
        del self._pending[use.id]
        self._memo()
        answer = self._answers.pop(use.id)
        verdict = Verdict.ALLOW if answer["verdict"] == "allow" else Verdict.DENY
        return verdict, f"{answer['who']} answered {answer['verdict']}", "user", answer["who"]

    def _memo(self) -> None:
        """What ``runs list`` shows without asking a worker: waiting, and for what."""
        workflow.upsert_memo(
            {"waiting": list(self._pending.values()), "task": self._params.get("task", "")}
        )
