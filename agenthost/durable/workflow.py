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
from functools import partial
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
    from agenthost.durable.policy import action, decide
    from agenthost.durable.shrink import (
        CONVERSATION_MAX,
        EVENTS_MAX,
        compact,
        preview,
        trim_records,
    )
    from agenthost_policies.decision import Verdict

__all__ = ["IDEMPOTENCY_KEY", "AgentRun", "offer"]

#: The ``_meta`` key of a tool call's idempotency key, ``RUN_ID/CALL_ID``.
IDEMPOTENCY_KEY = "io.agenthost/idempotency-key"

#: Seconds a new run waits for its grant (sent by the submitter right after the start);
#: a run whose submitter died in between fails then.
GRANT_WAIT = 600.0

#: The events kept for followers, at most this many and :data:`EVENTS_MAX` bytes; older
#: ones are dropped (a follower that fell this far behind reads the transcript at the end
#: instead).
_MAX_EVENTS = 500
#: Characters of an error's text kept in a record (a server's or a provider's message).
_ERROR_MAX = 2000
#: Bytes of the grant signal kept (a real one is about 1 KB: nine digests and a MAC).
_GRANT_MAX = 4096
#: Grants a new run tries, in the order they came, until one verifies: anyone may signal
#: one, and a rogue's sent between the submitter's start and its grant must not sink the
#: run; more than this, and the run fails (one listing activity tries each).
_GRANTS_TRIED = 16
#: Seconds a run whose grant was refused waits for another (the submitter's comes one
#: round trip after the start) before it fails with that refusal.
_REGRANT_WAIT = 10.0
#: Characters of an approval's signature kept (a real one is 64 hex digits).
_SEAL_MAX = 128


def _event(event: AgentEvent) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": event.kind, "text": event.text}
    if event.record is not None:
        out["record"] = codec.dump(preview(event.record))
    return out


def offer(entry: Mapping[str, Any]) -> llm.Tool:
    """A listed tool as the model is offered it."""
    return llm.Tool(
        name=entry["name"],
        description=entry.get("description") or entry["tool"],
        input_schema=entry.get("input_schema") or {"type": "object"},
    )


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
        #: What the activities sealed (:mod:`agenthost.durable.seal`), handed back to
        #: them: a seal per model reply in order, per tool use of the last turn, per
        #: result (of the result as it is in the conversation: once
        #: :func:`~agenthost.durable.shrink.compact` elides it, the seal of its stub,
        #: kept aside in ``_stub_seals`` until then). One seal per turn and per call, so
        #: they are bounded with the conversation and counted in its bound.
        self._replies: list[str | None] = []
        self._uses: dict[str, str] = {}
        self._results: dict[str, str | None] = {}
        self._stub_seals: dict[str, str | None] = {}
        #: Grants signalled while the run waits for its submitter's
        #: (:func:`agenthost.durable.seal.grant`), distinct, at most :data:`_GRANTS_TRIED`.
        self._grants: list[dict[str, Any]] = []
        self._granted = False

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

    @workflow.signal
    def grant(self, grant: dict[str, Any]) -> None:
        """The submitter's grant; only a worker can tell a real one (it holds the key),
        so each is tried in turn (:meth:`_admitted`). Anyone may signal: one that is not
        a small object is dropped, so no signal makes every later activity input large;
        so is one after the run has its grant, or past :data:`_GRANTS_TRIED`."""
        if (
            not self._granted
            and isinstance(grant, dict)
            and size(grant) <= _GRANT_MAX
            and grant not in self._grants
            and len(self._grants) < _GRANTS_TRIED
        ):
            self._grants.append(grant)

    @workflow.update
    def answer(self, call_id: str, verdict: str, who: str, seal: str = "") -> str:
        """A person's answer to a parked call: ``allow`` or ``deny``, with the approver's
        signature (checked by the worker that runs the call, which holds the key)."""
        self._answers[call_id] = {"verdict": verdict, "who": who, "seal": seal}
        return f"{verdict} recorded for call {call_id}"

    @answer.validator
    def _check_answer(self, call_id: str, verdict: str, who: str, seal: str = "") -> None:
        """Refused before it enters history: a call that is not waiting (unknown, or
        answered already) and an answer that is neither allow nor deny."""
        check_who(who)
        if not isinstance(seal, str) or len(seal) > _SEAL_MAX:
            raise ValueError(f"an approval's signature is at most {_SEAL_MAX} characters")
        if verdict not in ("allow", "deny"):
            raise ValueError(f"the answer must be allow or deny, not {verdict!r}")
        if call_id in self._decided or call_id in self._answers:
            raise ValueError(f"call {call_id} was answered already")
        if call_id not in self._pending:
            raise ValueError(f"no call {call_id} is waiting for approval in this run")

    # ------------------------------------------------------------------ the run

    @workflow.run
    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        tools = await self._admitted(params)
        params = self._params
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
            seals = state.get("seals") or {}
            self._replies = list(seals.get("replies", ()))
            self._results = dict(seals.get("results", {}))
            self._stub_seals = dict(seals.get("stubs", {}))
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
        segment_turns = 0
        while True:
            if core.out_of_turns() is not None:
                break
            if not self._small(core):
                break
            offered = [offer(entry) for entry in tools.values() if self._offered(entry)]
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

    async def _admitted(self, params: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The tools the run's grant gets listed, once its id and task are within bounds
        and, for a new run, a grant that a worker verifies has come (a failure
        otherwise); ``self._params`` is ``params`` with that grant."""
        # No workflow.patched here: a run started before grants and seals cannot go on
        # under this code whatever it does (its history holds no grant, and activity
        # results of another shape), so there is no older run to stay compatible with.
        try:
            # The id names the run's folder on a worker: a path would escape it.
            check_run_id(workflow.info().workflow_id)
            check_task(params["task"])
        except LimitError as exc:
            raise ApplicationError(str(exc), type="LimitError", non_retryable=True) from None
        self._params = params
        if params.get("grant") is not None:  # a run continued as new: granted already
            self._granted = True
            return await self._list_tools()
        # A new run: its submitter sends the grant next. The listing is the first
        # activity; a worker refuses it for a grant that does not verify.
        deadline = workflow.now() + timedelta(seconds=GRANT_WAIT)
        refused: ActivityError | None = None
        for tried in range(_GRANTS_TRIED):
            left = (deadline - workflow.now()).total_seconds()
            if refused is not None:
                left = min(left, _REGRANT_WAIT)
            if left <= 0:
                break
            try:
                await workflow.wait_condition(partial(self._more_grants, tried), timeout=left)
            except TimeoutError:
                break
            self._params = {**params, "grant": self._grants[tried]}
            try:
                tools = await self._list_tools()
            except ActivityError as exc:
                cause = exc.cause
                if isinstance(cause, ApplicationError) and cause.type == "Refused":
                    refused = exc  # not the submitter's grant: the next one may be
                    continue
                raise
            self._granted = True
            self._grants = []
            return tools
        if refused is not None:
            raise refused
        raise ApplicationError(
            f"no grant that verifies came within {GRANT_WAIT:g} s"
            f" ({len(self._grants)} came; at most {_GRANTS_TRIED} are tried)",
            non_retryable=True,
        )

    def _more_grants(self, tried: int) -> bool:
        return len(self._grants) > tried

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
        total = self._compact(record.messages)
        if total <= CONVERSATION_MAX:
            return True
        record.error = (
            f"the conversation is {total} bytes (with its seals) even with earlier tool"
            f" results elided; a durable run carries at most {CONVERSATION_MAX}"
        )
        record.stop = "token_budget"
        return False

    def _compact(self, messages: list[llm.Message]) -> int:
        """:func:`~agenthost.durable.shrink.compact` with the seals counted in the bound
        (each model request carries them): an elided result's seal becomes its stub's.
        The size of the conversation and its seals."""
        sealed = self._seal_bytes()
        stubbed: list[str] = []
        total = compact(messages, CONVERSATION_MAX - sealed, stubbed=stubbed)
        for call_id in stubbed:
            self._results[call_id] = self._stub_seals.pop(call_id, None)
        return total + self._seal_bytes()

    def _seal_bytes(self) -> int:
        return size([self._replies, self._results, self._stub_seals])

    def _carry_over(self, core: AgentCore) -> dict[str, Any]:
        trim_records(core.record.tool_calls)
        self._compact(core.record.messages)
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
                "seals": {
                    "replies": self._replies,
                    "results": self._results,
                    "stubs": self._stub_seals,
                },
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

    def _run(self, *fields: str) -> dict[str, Any]:
        """The submitter's grant and the inputs it covers that an activity needs."""
        return {"grant": self._params.get("grant"), **{f: self._params.get(f) for f in fields}}

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
            {"run": self._run()},
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
            {
                "provider": self._params["provider"],
                "request": codec.dump(request),
                "run": self._run(
                    "provider", "model", "system_prompt", "max_tokens", "task", "policy"
                ),
                "replies": self._replies,
                "results": self._results,
            },
            start_to_close_timeout=timedelta(seconds=self._option("llm_timeout", 600)),
            heartbeat_timeout=timedelta(seconds=self._option("heartbeat_timeout", 10)),
            retry_policy=self._retry(),
            result_type=dict,
        )
        self._replies.append(out.get("seal"))
        # The uses of this turn only: every one is called (or refused) before the next.
        self._uses = dict(out.get("uses") or {})
        self._withheld(out.get("withheld") or [])
        return codec.load_result(out["result"])

    def _withheld(self, call_ids: list[str]) -> None:
        """Calls whose "ok" result the model was not given (no worker sealed it: it was
        completed by someone else) are not "ok" in the transcript either."""
        if self._core is None or not call_ids:
            return
        for call in self._core.record.tool_calls:
            if call.id in call_ids and call.status == "ok":
                call.status = "error"
                call.reason = "its result did not come from a worker; the model was not given it"
                call.output = ""

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
                {"run": self._run(), "lines": lines},
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

    def _offered(self, entry: Mapping[str, Any]) -> bool:
        """A tool the policy denies on every call is not offered (as in a local run)."""
        view = decide(self._params["policy"], action(entry, {}))
        return view.verdict is not Verdict.DENY

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
        view = decide(self._params["policy"], action(entry, use.input))
        verdict, reason, by, who = view.verdict, view.reason, view.by, None
        answer: dict[str, Any] | None = None
        if verdict is Verdict.ASK:
            verdict, reason, by, who, answer = await self._ask(use, entry, reason)
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
                    "run": self._run("policy"),
                    "use_seal": self._uses.pop(use.id, None),
                    "approval": answer,
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
        self._results[use.id] = out.get("seal")
        self._stub_seals[use.id] = out.get("stub_seal")
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
    ) -> tuple[Verdict, str, Any, str | None, dict[str, Any] | None]:
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
                None,
            )
        del self._pending[use.id]
        self._memo()
        answer = self._answers.pop(use.id)
        verdict = Verdict.ALLOW if answer["verdict"] == "allow" else Verdict.DENY
        reason = f"{answer['who']} answered {answer['verdict']}"
        return verdict, reason, "user", answer["who"], answer

    def _memo(self) -> None:
        """What ``runs list`` shows without asking a worker: waiting, and for what."""
        workflow.upsert_memo(
            {"waiting": list(self._pending.values()), "task": self._params.get("task", "")}
        )
