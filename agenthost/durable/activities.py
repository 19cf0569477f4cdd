"""The activities of a durable run, and the worker's Host they run on.

A worker process holds one :class:`~agenthost.host.Host` (its configured servers,
supervised as in a local run) in a Trio thread; the Temporal worker is asyncio. Each
activity hands its work to that thread (:class:`HostBridge`, through
``trio.from_thread.run(..., trio_token=...)``) and heartbeats while it waits, so a worker
that dies stops heartbeating and its activity is run again on another worker within the
heartbeat timeout. Cancelling the activity cancels the Trio side (the server is told).

Activities are at least once: a tool call may reach a server twice (a worker died after
the server acted, before Temporal heard of it). Every call therefore carries an
idempotency key ``RUN_ID/CALL_ID`` in its ``_meta``
(:data:`~agenthost.durable.workflow.IDEMPOTENCY_KEY`): the same key means the same call,
and a server with effects that must happen once keeps the keys it has acted on and
answers a repeated key with its first result. Audit lines are written once per
``(run_id, seq)`` whatever the retries (:class:`JsonlAuditSink` on one machine,
:class:`~agenthost.durable.pgaudit.PostgresAuditSink` for a fleet).

Anyone on the namespace can schedule these activities, so each one trusts nothing its
input says about who decided it (:mod:`agenthost.durable.seal`): the run's grant must
verify for the workflow id Temporal gives the activity; ``call_tool`` runs only a tool use
a sealed model turn produced, decides it again with the run's signed policy and this
worker's own catalog, and checks a parked call's signed approval; ``llm_call`` sends the
model only the signed task, sealed model turns and sealed tool results (any other result
is replaced by a fixed refusal text), with the tools of this worker's catalog. A refusal
is one audit line (``seq`` 0 of that workflow id) and a non-retryable failure.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import trio
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

import agenthost_providers.base as llm
from agenthost.durable import codec, seal
from agenthost.durable.limits import (
    PAYLOAD_MAX,
    LimitError,
    check_run_id,
    clip,
    confined,
    file_name,
    size,
)
from agenthost.durable.policy import action, decide
from agenthost.durable.seal import DurableKey, Refused
from agenthost.durable.shrink import cut_result, fit_tools, stub, too_large
from agenthost.durable.shrink import result_text as _text
from agenthost.durable.workflow import IDEMPOTENCY_KEY, offer
from agenthost.errors import (
    AgentHostError,
    JSONRPCError,
    NotFound,
    ProviderError,
    ServerUnavailable,
    TransportError,
)
from agenthost.mcp_to_llm import tool_result_to_llm
from agenthost_policies.audit import redact
from agenthost_policies.decision import Verdict
from agenthost_providers.scripted import ScriptedProvider

if TYPE_CHECKING:
    from agenthost.host import Host
    from agenthost.host.catalog import CatalogTool

__all__ = ["Activities", "AuditSink", "HostBridge", "JsonlAuditSink"]

T = TypeVar("T")

#: Seconds between heartbeats while an activity waits on the Trio thread; well under
#: the default heartbeat timeout (10 s), so one late beat does not fail the attempt.
HEARTBEAT_EVERY = 1.0
#: Executions whose first run id a worker remembers (then it forgets them all and asks
#: again): one ``describe`` per execution, not per activity.
_FIRST_RUNS = 10_000

#: What the model is given for a tool result no worker sealed: a call that was denied or
#: failed in the workflow, or a result completed by someone other than the activity.
UNVERIFIED = (
    "Tool call failed: no result that a worker of this deployment vouches for"
    " (the call was not approved, failed, or its result did not come from the worker)."
)


class HostBridge:
    """The worker's Host, reached from asyncio activities.

    ``host`` lives in the Trio thread whose token is ``token``; :meth:`call` runs a
    coroutine function there and waits for it without blocking the asyncio loop.
    """

    def __init__(self, host: Host, token: trio.lowlevel.TrioToken, *, threads: int = 64) -> None:
        self.host = host
        self.token = token
        # Each waiting activity holds one thread: the asyncio default pool (a handful of
        # threads on a 2-core machine) would cap a worker's concurrent tool calls.
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, "agenthost-bridge")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def call(self, fn: Callable[[Host], Awaitable[T]], *, heartbeat: bool = True) -> T:
        """``await fn(host)`` in the Trio thread; heartbeats every second meanwhile.

        **Cancellation:** cancelling the calling task cancels ``fn`` in its Trio scope.
        """
        scope = trio.CancelScope()

        async def body() -> T:
            with scope:
                return await fn(self.host)
            raise AgentHostError("the activity was cancelled")  # only reached then

        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(
            self._pool, lambda: trio.from_thread.run(body, trio_token=self.token)
        )
        try:
            while True:
                done, _ = await asyncio.wait({future}, timeout=HEARTBEAT_EVERY)
                if done:
                    return future.result()
                if heartbeat:
                    activity.heartbeat()
        except asyncio.CancelledError:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(scope.cancel, trio_token=self.token)
            raise


class AuditSink(Protocol):
    """Where a worker's audit lines go: the JSONL file, or a fleet's database
    (:class:`~agenthost.durable.pgaudit.PostgresAuditSink`)."""

    def append(self, lines: Sequence[Mapping[str, Any]]) -> int:
        """Write each line whose ``(run_id, seq)`` was not written yet; how many were."""
        ...


class JsonlAuditSink:
    """Appends audit lines to one JSONL file, once per ``(run_id, seq)``.

    Several worker processes on one machine may share the file: each append takes an
    exclusive ``flock``, reads what others appended since its last look, and writes the
    line only if its key is not there yet. (A fleet shares a database instead.) Each line
    is sealed with ``key``; a line already there counts only if it verifies: a forged one
    written ahead does not take the key, and the real line, written after it, says
    ``"replaced_unverified": true`` (readers keep :func:`~agenthost.durable.seal.verified`
    lines).
    """

    def __init__(self, path: Path, *, key: DurableKey) -> None:
        self.path = path
        self.key = key
        self._seen: set[tuple[str, int]] = set()
        self._forged: set[tuple[str, int]] = set()
        self._offset = 0
        self._lock = threading.Lock()

    def append(self, lines: Sequence[Mapping[str, Any]]) -> int:
        """Write each line whose key was not written yet; returns how many were."""
        with self._lock:
            fresh = [line for line in lines if _key(line) not in self._seen]
            if not fresh:
                return 0
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a+b") as file:
                fcntl.flock(file, fcntl.LOCK_EX)
                file.seek(self._offset)
                for raw in file.read().splitlines():
                    try:
                        stored = json.loads(raw)
                        mark = self._seen if seal.line_verifies(self.key, stored) else self._forged
                        mark.add(_key(stored))
                    except (ValueError, KeyError, TypeError):
                        continue  # a line of another writer's format
                out = b""
                for line in fresh:
                    if _key(line) not in self._seen:
                        self._seen.add(_key(line))
                        out += json.dumps(self._sealed(line), sort_keys=True).encode() + b"\n"
                file.write(out)
                file.flush()
                self._offset = file.tell()
                return out.count(b"\n")

    def _sealed(self, line: Mapping[str, Any]) -> dict[str, Any]:
        stored = redact(dict(line))
        if _key(line) in self._forged:
            stored["replaced_unverified"] = True
        return seal.seal_line(self.key, stored)


def _key(line: Mapping[str, Any]) -> tuple[str, int]:
    return str(line["run_id"]), int(line["seq"])


def _provider_failure(exc: ProviderError) -> ApplicationError:
    """Auth and other 4xx errors will fail the same way again: not retried."""
    status = exc.status
    final = not exc.retryable and (status is None or (400 <= status < 500 and status != 429))
    return ApplicationError(str(exc), type="ProviderError", non_retryable=final)


class Activities:
    """The activities one worker serves, over its Host (see the module docstring)."""

    def __init__(
        self, bridge: HostBridge, *, audit: AuditSink, results: Path, key: DurableKey
    ) -> None:
        self.bridge = bridge
        self.audit = audit
        self.results = results
        self.key = key
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        #: First run id by execution (run id): it never changes, so asked once each.
        self._first_runs: dict[str, str] = {}

    # ------------------------------------------------------------------ refusals

    async def _granted(self, params: object, *fields: str) -> tuple[str, Mapping[str, Any]]:
        """The run id (the workflow's, as Temporal names it) and the run's signed inputs
        ``fields``, once its grant verifies; else a refusal (see :meth:`_refuse`)."""
        run_id = activity.info().workflow_id or ""  # none: an activity of no workflow
        run = params.get("run") if isinstance(params, Mapping) else None
        run = run if isinstance(run, Mapping) else {}
        first_run = await self._first_run()
        given = {f: run.get(f) for f in fields}
        try:
            if first_run is None:
                raise Refused(
                    f"run {run_id} was reset: a reset run is not the one its submitter"
                    " started (submit the task again)"
                )
            seal.check_grant(self.key, run_id, first_run, run.get("grant"), given)
        except Refused as exc:
            raise await self._refuse(run_id, str(exc)) from None
        return run_id, run

    async def _first_run(self) -> str | None:
        """The run id of the first execution of the activity's workflow, from Temporal
        (not from the input); None for an execution whose chain was reset. A failure to
        ask is retried.

        A reset (``temporal workflow reset``, open to anyone on the namespace) keeps the
        first run id, so the grant would verify, and replays the run from any point:
        every model turn and tool call after it again, as often as asked.
        """
        info = activity.info()
        execution = info.workflow_run_id or ""
        known = self._first_runs.get(execution)
        if known is not None:
            return known or None
        handle = activity.client().get_workflow_handle(info.workflow_id or "", run_id=execution)
        try:
            described = await asyncio.wait_for(handle.describe(), 30)
        except (RPCError, TimeoutError) as exc:
            raise ApplicationError(f"cannot describe the run: {exc}", type="Unavailable") from None
        raw = described.raw_description
        first = raw.workflow_execution_info.first_run_id or execution
        if raw.workflow_extended_info.HasField("last_reset_time"):
            first = ""  # cached as such: no grant names an empty first run
        if len(self._first_runs) >= _FIRST_RUNS:
            self._first_runs.clear()
        self._first_runs[execution] = first
        return first or None

    async def _refuse(self, run_id: str, reason: str) -> ApplicationError:
        """The audit line of a refusal, and the failure to raise (not retried: the same
        input is refused again)."""
        line = {
            "type": "refusal",
            "run_id": run_id,
            # 0: never a line of a run (theirs start at 1), so a refused workflow of any
            # id takes no key a real run writes; one refusal line per workflow id.
            "seq": 0,
            "activity": activity.info().activity_type,
            # A rogue's input chooses much of the reason (a call id, say): bounded.
            "reason": clip(reason, 2000),
            "worker": self.worker,
            "ts": time.time(),
        }
        await asyncio.get_running_loop().run_in_executor(None, self.audit.append, [line])
        return ApplicationError(reason, type="Refused", non_retryable=True)

    # ------------------------------------------------------------------ activities

    @activity.defn(name="list_tools")
    async def list_tools(self, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The tools of the worker's servers, with what the policy matches on."""
        await self._granted(params)

        async def listing(host: Host) -> list[dict[str, Any]]:
            return _listing(host, host.tools())

        return await self.bridge.call(listing)

    @activity.defn(name="llm_call")
    async def llm_call(self, params: dict[str, Any]) -> dict[str, Any]:
        """One model turn with the worker's provider of the run's signed name, on the
        conversation as :meth:`_checked` rebuilds it; the reply and its tool uses sealed."""
        fields = ("provider", "model", "system_prompt", "max_tokens", "task", "policy")
        run_id, run = await self._granted(params, *fields)
        name = str(run["provider"])

        withheld: list[str] = []

        async def complete(host: Host) -> llm.Result:
            request = self._checked(run_id, run, params, host, withheld)
            provider = host.providers.get(name)
            if provider is None:
                raise ProviderError(f"provider {name!r} is not configured on this worker")
            if isinstance(provider, ScriptedProvider):
                return await provider.replay(request)
            return await provider.complete(request)

        try:
            result = await self.bridge.call(complete)
        except ProviderError as exc:
            raise _provider_failure(exc) from None
        except Refused as exc:
            raise await self._refuse(run_id, str(exc)) from None
        out: dict[str, Any] = codec.dump(result)
        return {
            "result": out,
            "seal": seal.seal_reply(self.key, run_id, out["content"]),
            "uses": {
                use.id: seal.seal_use(self.key, run_id, use.id, use.name, use.input)
                for use in result.tool_uses
            },
            "withheld": withheld,
        }

    def _checked(
        self,
        run_id: str,
        run: Mapping[str, Any],
        params: Mapping[str, Any],
        host: Host,
        withheld: list[str],
    ) -> llm.Request:
        """The model request of ``params``, rebuilt from what a worker can vouch for: the
        signed task, model, system prompt and token cap; model turns this deployment's
        workers sealed; tool results they sealed (any other: a fixed text, its call id
        added to ``withheld``); the offered tools as this worker lists them, less those
        the signed policy denies.

        Raises:
            Refused: the conversation holds anything else (a turn no worker produced).
        """
        request = codec.load_request(params["request"])
        policy = run["policy"]
        replies = params.get("replies") or []
        results = params.get("results") or {}
        messages = request.messages
        task = llm.Message.user(str(run["task"]))
        if not messages or codec.dump(messages[0]) != codec.dump(task):
            raise Refused(f"run {run_id}: its conversation does not open with its signed task")
        out = [task]
        uses: dict[str, llm.ToolUseContent] = {}
        turn = 0
        for message in messages[1:]:
            if message.role == "assistant":
                mac = replies[turn] if turn < len(replies) else None
                turn += 1
                if not seal.reply_verifies(self.key, mac, run_id, codec.dump(message)["content"]):
                    raise Refused(f"run {run_id}: model turn {turn} is not one a worker sealed")
                uses = {b.id: b for b in message.content if isinstance(b, llm.ToolUseContent)}
                out.append(message)
                continue
            blocks: list[llm.Content] = []
            for block in message.content:
                use = uses.get(block.tool_use_id) if block.type == "tool_result" else None
                if use is None or not isinstance(block, llm.ToolResultContent):
                    raise Refused(f"run {run_id}: its conversation holds a turn no worker made")
                mac = results.get(block.tool_use_id) if isinstance(results, Mapping) else None
                if seal.result_verifies(self.key, mac, run_id, use.id, codec.dump(block)):
                    blocks.append(block)
                else:
                    withheld.append(use.id)
                    blocks.append(_error(use.id, _unverified(host, policy, use)))
            out.append(llm.Message(role="user", content=tuple(blocks)))
        listed = [host.catalog.tool(offered.name) for offered in request.tools]
        tools = [
            offer(entry)
            for entry in _listing(host, [tool for tool in listed if tool is not None])
            if decide(policy, action(entry, {})).verdict is not Verdict.DENY
        ]
        return llm.Request(
            model=str(run["model"]),
            messages=tuple(out),
            max_tokens=int(run["max_tokens"]),
            system_prompt=run["system_prompt"],
            tools=tuple(tools),
        )

    @activity.defn(name="call_tool")
    async def call_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        """One tool call of a sealed model turn, decided again here with the run's signed
        policy (a parked call: with its signed approval); every tool failure is a result,
        sealed for the model."""
        info = activity.info()
        run_id, run = await self._granted(params, "policy")
        call_id, name, arguments = params["call_id"], params["name"], params["arguments"]
        if not seal.use_verifies(
            self.key, params.get("use_seal"), run_id, call_id, name, arguments
        ):
            raise await self._refuse(
                run_id,
                f"run {run_id}: call {call_id} is not a tool use of a model turn a worker made",
            )
        key = f"{run_id}/{call_id}"
        started = time.monotonic()
        box: dict[str, str] = {}

        async def call(host: Host) -> llm.ToolResultContent:
            tool = host.catalog.tool(name)
            if tool is not None:
                refusal = self._refusal(run_id, call_id, run["policy"], _entry(host, tool), params)
                if refusal is not None:
                    box["denied"] = refusal
                    return _error(call_id, f"Denied by policy: {refusal}. Do not retry this call.")
            result = await host.call_tool_decided(
                name,
                arguments,
                meta={IDEMPOTENCY_KEY: key},
                audit={"run_id": run_id, "call_id": call_id},
            )
            return tool_result_to_llm(call_id, result)

        status: str = "ok"
        reason: str | None = None
        try:
            content = await self.bridge.call(call)
            status = "error" if content.is_error else "ok"
        except (ServerUnavailable, TransportError) as exc:
            # The server may come back (restarted by its supervisor), or another worker
            # may have it: retried.
            raise ApplicationError(str(exc), type=type(exc).__name__) from None
        except AgentHostError as exc:
            status = "error"
            reason = clip(exc.text if isinstance(exc, JSONRPCError) else str(exc), 2000)
            text = f"No such tool: {name}" if isinstance(exc, NotFound) else reason
            content = _error(call_id, f"Tool call failed: {text}")
        if "denied" in box:
            status, reason = "denied", box["denied"]
            await self._refuse(run_id, f"call {call_id} of {name}: {reason}")
        content, ref = self._cut(run_id, params, content)
        return {
            "status": status,
            "reason": reason,
            "result": codec.dump(content),
            "seal": seal.seal_result(self.key, run_id, call_id, codec.dump(content)),
            # What the run's conversation holds once this result is elided from it.
            "stub_seal": seal.seal_result(self.key, run_id, call_id, codec.dump(stub(content))),
            "output": _text(content),
            "attempt": info.attempt,
            "worker": self.worker,
            "duration": round(time.monotonic() - started, 4),
            "ref": ref,
        }

    def _refusal(
        self,
        run_id: str,
        call_id: str,
        policy: Mapping[str, Any],
        entry: Mapping[str, Any],
        params: Mapping[str, Any],
    ) -> str | None:
        """Why this worker will not run the call (None: it runs): the signed policy
        denies it, or asks and the call has no approval signed for exactly it."""
        arguments = params["arguments"]
        view = decide(policy, action(entry, arguments))
        if view.verdict is Verdict.ALLOW:
            return None
        if view.verdict is Verdict.DENY:
            return str(view.reason)
        answer = params.get("approval")
        if not isinstance(answer, Mapping) or answer.get("verdict") != "allow":
            return "it waits for a person's approval and has none"
        signed = seal.check_approval(
            self.key,
            answer,
            run_id=run_id,
            call_id=call_id,
            server=entry["server"],
            tool=entry["tool"],
            arguments=arguments,
        )
        return None if signed else "its approval is not signed with this deployment's key"

    def _cut(
        self, run_id: str, params: Mapping[str, Any], content: llm.ToolResultContent
    ) -> tuple[llm.ToolResultContent, str | None]:
        """A result over ``result_cap`` characters, or too large for the run's history
        (images, audio, structuredContent: :func:`~agenthost.durable.shrink.cut_result`):
        cut, its whole kept on this worker under the returned reference.

        Raises:
            ApplicationError: not retried (the tool ran): even cut, the result is over
                the payload bound.
        """
        cap = int(params["result_cap"])
        if not too_large(content, cap):
            return content, None
        ref = self._keep(run_id, str(params["call_id"]), content)
        cut = cut_result(content, cap, ref)
        if 2 * size(codec.dump(cut)) > PAYLOAD_MAX:  # the result and its text, both sent
            raise ApplicationError(
                "the tool's result is too large for the run's history, even cut",
                type="LimitError",
                non_retryable=True,
            )
        return cut, ref

    def _keep(self, run_id: str, call_id: str, content: llm.ToolResultContent) -> str | None:
        """The full result in ``results/RUN_ID/CALL_ID.json`` (each name as
        :func:`~agenthost.durable.limits.file_name` gives it), a path confined to the
        results folder; its reference, or None when it cannot be kept there (the run
        goes on with the cut result: failing would run the tool again)."""
        try:
            run = file_name(check_run_id(run_id))  # the workflow's id, as Temporal names it
            name = file_name(call_id) + ".json"
            path = confined(self.results, run, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(codec.dump(content)), encoding="utf-8")
        except (LimitError, OSError) as exc:
            activity.logger.warning("a cut tool result was not kept: %s", exc)
            return None
        return f"{self.worker}:{path}"

    @activity.defn(name="audit_append")
    async def audit_append(self, params: dict[str, Any]) -> int:
        """The run's audit lines; a retry writes none already written. Returns how many
        were new. Each line is the run's own (its ``run_id`` is the workflow's, its
        ``seq`` positive), whatever the input says."""
        run_id, _ = await self._granted(params)
        given = params.get("lines")
        lines = [
            {**line, "run_id": run_id}
            for line in (given if isinstance(given, list) else [])
            if isinstance(line, Mapping)
            and type(line.get("seq")) is int  # a bool is no seq
            and line["seq"] > 0
        ]
        return await asyncio.get_running_loop().run_in_executor(None, self.audit.append, lines)

    def all(self) -> list[Callable[..., Any]]:
        return [self.list_tools, self.llm_call, self.call_tool, self.audit_append]


def _entry(host: Host, tool: CatalogTool) -> dict[str, Any]:
    """A tool of the worker's catalog as ``list_tools`` lists it."""
    from agenthost.host.catalog import annotation_hints

    trusted = {server.name: server.trusted for server in host.config.servers}
    return {
        "name": tool.name,
        "server": tool.server,
        "tool": tool.tool.name,
        "description": tool.tool.description or tool.tool.title,
        "input_schema": dict(tool.tool.input_schema or {"type": "object"}),
        "annotations": annotation_hints(tool.tool.annotations),
        "trusted": trusted.get(tool.server, False),
    }


def _listing(host: Host, tools: Iterable[CatalogTool]) -> list[dict[str, Any]]:
    """``tools`` as ``list_tools`` lists them: long descriptions clipped, and those
    still too large for the listing's bound left out (it is an activity's result and
    part of every model request)."""
    entries = [_entry(host, tool) for tool in tools]
    for name in fit_tools(entries):
        activity.logger.warning("tool %s is not offered: the listing is too large", name)
    return entries


def _unverified(host: Host, policy: Mapping[str, Any], use: llm.ToolUseContent) -> str:
    """The model's text for a result no worker sealed, from what this worker knows: no
    such tool, the signed policy's denial, or :data:`UNVERIFIED`."""
    tool = host.catalog.tool(use.name)
    if tool is None:
        return f"No such tool: {use.name}"
    view = decide(policy, action(_entry(host, tool), use.input))
    if view.verdict is Verdict.DENY:
        return f"Denied by policy: {view.reason}. Do not retry this call."
    return UNVERIFIED


def _error(tool_use_id: str, text: str) -> llm.ToolResultContent:
    return llm.ToolResultContent(
        tool_use_id=tool_use_id, content=(llm.TextContent(text=text),), is_error=True
    )
