"""Submitting, following, listing and answering durable runs (the CLI's library half)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from agenthost.durable import seal
from agenthost.durable.limits import check_run_id
from agenthost.durable.policy import snapshot
from agenthost.durable.seal import DurableKey
from agenthost.errors import AgentHostError, NotFound
from agenthost_policies.config import PolicyConfig

__all__ = [
    "RunRejected",
    "answer",
    "cancel",
    "follow",
    "list_runs",
    "new_run_id",
    "run_input",
    "show",
    "submit",
]


class RunRejected(AgentHostError):
    """The run refused an answer (not waiting for it, or answered already)."""


def new_run_id() -> str:
    return f"run-{uuid.uuid4().hex[:12]}"


def run_input(
    task: str,
    *,
    provider: str,
    model: str,
    policy: PolicyConfig,
    system_prompt: str | None,
    max_turns: int = 20,
    max_tokens: int = 4096,
    token_budget: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The workflow's input: the task, the model, and the policy as it is now.

    ``options`` (all optional): ``heartbeat_timeout`` (s, default 10), ``tool_timeout``,
    ``llm_timeout``, ``max_attempts`` (5), ``result_cap`` (characters, 16384),
    ``continue_after`` (model turns per history; default: when Temporal suggests).
    """
    return {
        "task": task,
        "provider": provider,
        "model": model,
        "system_prompt": system_prompt,
        "max_turns": max_turns,
        "max_tokens": max_tokens,
        "token_budget": token_budget,
        "policy": snapshot(policy),
        "options": dict(options or {}),
        "state": None,
    }


async def submit(
    client: Client,
    params: Mapping[str, Any],
    *,
    task_queue: str,
    key: DurableKey,
    run_id: str | None = None,
) -> str:
    """Start the run, then send it its grant signed by ``key`` (the workers refuse a run
    without one); returns its id (the workflow id).

    Raises:
        LimitError: ``run_id`` is not a valid run id (see :mod:`agenthost.durable.limits`).
    """
    run_id = check_run_id(run_id or new_run_id())
    handle = await client.start_workflow(
        "AgentRun",
        {**params, "grant": None},
        id=run_id,
        task_queue=task_queue,
        memo={"task": params["task"], "waiting": []},
    )
    # The grant names the execution Temporal just started: a copy of it is worth nothing
    # to a workflow started later under the same id (once this one has ended).
    first_run = handle.first_execution_run_id or ""
    await handle.signal("grant", seal.grant(key, run_id, first_run, params))
    return run_id


def _status(status: WorkflowExecutionStatus | None) -> str:
    """Temporal's status in our words (``cancelled``, as the transcript spells it)."""
    if status is None:
        return "unknown"
    name = status.name.lower()
    return "cancelled" if name == "canceled" else name


def _handle(client: Client, run_id: str) -> WorkflowHandle[Any, Any]:
    return client.get_workflow_handle(run_id)


async def follow(
    client: Client, run_id: str, *, poll: float = 0.2
) -> AsyncIterator[dict[str, Any]]:
    """The run's events as they happen (``kind``, ``text``, ``record``), until it ends;
    while it waits for approval, a ``waiting`` event per question at each poll."""
    handle = _handle(client, run_id)
    since = 0
    while True:
        description = await handle.describe()
        done = description.status != WorkflowExecutionStatus.RUNNING
        try:
            progress = await handle.query("progress", since)
        except RPCError:
            progress = None  # no worker has the run right now: ask again
        if progress is not None:
            for event in progress["events"]:
                yield event
            since = progress["next"]
            for waiting in progress["pending"]:
                yield {"kind": "waiting", **waiting}
        if done:
            return
        await asyncio.sleep(poll)


async def list_runs(client: Client, *, limit: int = 100) -> list[dict[str, Any]]:
    """Recent runs, newest first, with what each waits for (from its memo: no worker
    needs to be up)."""
    runs = []
    async for execution in client.list_workflows('WorkflowType="AgentRun"', limit=limit):
        memo = await execution.memo()
        status = _status(execution.status)
        waiting = memo.get("waiting") or []
        runs.append(
            {
                "run_id": execution.id,
                "status": "waiting_approval" if status == "running" and waiting else status,
                "task": memo.get("task", ""),
                "started": execution.start_time.isoformat(),
                "waiting": waiting,
            }
        )
    return runs


async def show(client: Client, run_id: str) -> dict[str, Any]:
    """The run's status, and its transcript (the result once done, else as it stands)."""
    handle = _handle(client, run_id)
    try:
        description = await handle.describe()
    except RPCError as exc:
        raise NotFound(f"no run {run_id!r}: {exc.message}") from None
    status = _status(description.status)
    transcript: dict[str, Any] = {}
    if description.status == WorkflowExecutionStatus.COMPLETED:
        transcript = await handle.result()
    elif description.status == WorkflowExecutionStatus.RUNNING:
        try:
            transcript = await handle.query("transcript")
        except RPCError:
            transcript = {}
    memo = await description.memo()
    return {
        "run_id": run_id,
        "status": status,
        "waiting": memo.get("waiting") or [],
        "transcript": transcript,
    }


async def cancel(client: Client, run_id: str, *, wait: float = 30.0) -> str:
    """Ask the run to stop and wait (at most ``wait`` seconds) until it has; returns its
    status then (``running`` when it has not ended yet: a worker must take the request).
    """
    handle = _handle(client, run_id)
    try:
        await handle.cancel()
    except RPCError as exc:
        raise NotFound(f"no run {run_id!r} to cancel: {exc.message}") from None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        description = await handle.describe()
        if description.status != WorkflowExecutionStatus.RUNNING or loop.time() >= deadline:
            return _status(description.status)
        await asyncio.sleep(0.1)


async def answer(
    client: Client, run_id: str, call_id: str, verdict: str, who: str, *, key: DurableKey
) -> str:
    """Approve (``allow``) or deny a parked call, signed by ``key`` over the call as the
    run shows it waiting (server, tool, arguments): the worker runs the call only with
    that signature.

    Raises:
        RunRejected: the call is not waiting (unknown, or answered already).
    """
    handle = _handle(client, run_id)
    try:
        waiting = await _waiting(handle, call_id)
        signature = seal.approval(
            key,
            run_id=run_id,
            call_id=call_id,
            verdict=verdict,
            who=who,
            server=str(waiting.get("server")),
            tool=str(waiting.get("tool")),
            arguments=waiting.get("arguments") or {},
        )
        result: str = await handle.execute_update("answer", args=[call_id, verdict, who, signature])
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        message = getattr(cause, "message", None) or str(cause or exc)
        raise RunRejected(message) from None
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND and "completed" not in exc.message:
            raise NotFound(f"no run {run_id!r}: {exc.message}") from None
        raise RunRejected(f"run {run_id} takes no answer: {exc.message}") from None
    # What was signed, as the run showed it when asked now: the approver sees it too.
    signed = json.dumps(waiting.get("arguments") or {}, sort_keys=True)
    signed = signed if len(signed) <= 200 else signed[:200] + "..."
    return f"{result} ({waiting.get('server')}/{waiting.get('tool')} {signed})"


async def _waiting(handle: WorkflowHandle[Any, Any], call_id: str) -> Mapping[str, Any]:
    """The question ``call_id`` as the run shows it (its memo when no worker answers the
    query); none: the run's own refusal is the one to show, so an empty one."""
    try:
        pending = (await handle.query("progress", 0))["pending"]
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise
        pending = (await (await handle.describe()).memo()).get("waiting") or []
    for waiting in pending:
        if isinstance(waiting, Mapping) and waiting.get("call_id") == call_id:
            return waiting
    return {}
