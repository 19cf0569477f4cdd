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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import trio
from temporalio import activity
from temporalio.exceptions import ApplicationError

import agenthost_providers.base as llm
from agenthost.durable import codec
from agenthost.durable.limits import (
    PAYLOAD_MAX,
    LimitError,
    check_run_id,
    clip,
    confined,
    file_name,
    size,
)
from agenthost.durable.shrink import cut_result, fit_tools, too_large
from agenthost.durable.shrink import result_text as _text
from agenthost.durable.workflow import IDEMPOTENCY_KEY
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
from agenthost_providers.scripted import ScriptedProvider

if TYPE_CHECKING:
    from agenthost.host import Host

__all__ = ["Activities", "AuditSink", "HostBridge", "JsonlAuditSink"]

T = TypeVar("T")

#: Seconds between heartbeats while an activity waits on the Trio thread; well under
#: the default heartbeat timeout (10 s), so one late beat does not fail the attempt.
HEARTBEAT_EVERY = 1.0


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
    line only if its key is not there yet. (A fleet shares a database instead.)
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: set[tuple[str, int]] = set()
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
                        self._seen.add(_key(json.loads(raw)))
                    except (ValueError, KeyError, TypeError):
                        continue  # a line of another writer's format
                out = b""
                for line in fresh:
                    if _key(line) not in self._seen:
                        self._seen.add(_key(line))
                        out += json.dumps(redact(dict(line)), sort_keys=True).encode() + b"\n"
                file.write(out)
                file.flush()
                self._offset = file.tell()
                return out.count(b"\n")


def _key(line: Mapping[str, Any]) -> tuple[str, int]:
    return str(line["run_id"]), int(line["seq"])


def _provider_failure(exc: ProviderError) -> ApplicationError:
    """Auth and other 4xx errors will fail the same way again: not retried."""
    status = exc.status
    final = not exc.retryable and (status is None or (400 <= status < 500 and status != 429))
    return ApplicationError(str(exc), type="ProviderError", non_retryable=final)


class Activities:
    """The activities one worker serves, over its Host (see the module docstring)."""

    def __init__(self, bridge: HostBridge, *, audit: AuditSink, results: Path) -> None:
        self.bridge = bridge
        self.audit = audit
        self.results = results
        self.worker = f"{socket.gethostname()}:{os.getpid()}"

    @activity.defn(name="list_tools")
    async def list_tools(self) -> list[dict[str, Any]]:
        """The tools of the worker's servers, with what the policy matches on."""
        from agenthost.host.catalog import annotation_hints

        async def listing(host: Host) -> list[dict[str, Any]]:
            trusted = {server.name: server.trusted for server in host.config.servers}
            entries = [
                {
                    "name": entry.name,
                    "server": entry.server,
                    "tool": entry.tool.name,
                    "description": entry.tool.description or entry.tool.title,
                    "input_schema": dict(entry.tool.input_schema or {"type": "object"}),
                    "annotations": annotation_hints(entry.tool.annotations),
                    "trusted": trusted.get(entry.server, False),
                }
                for entry in host.tools()
            ]
            # The listing is this activity's result and part of every model request.
            for name in fit_tools(entries):
                activity.logger.warning("tool %s is not offered: the listing is too large", name)
            return entries

        return await self.bridge.call(listing)

    @activity.defn(name="llm_call")
    async def llm_call(self, params: dict[str, Any]) -> dict[str, Any]:
        """One model turn with the worker's provider of that name."""
        request = codec.load_request(params["request"])
        name = params["provider"]

        async def complete(host: Host) -> llm.Result:
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
        return codec.dump(result)  # type: ignore[no-any-return]

    @activity.defn(name="call_tool")
    async def call_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        """One tool call, consent already decided; every tool failure is a result."""
        info = activity.info()
        call_id, key = params["call_id"], params["key"]
        started = time.monotonic()

        async def call(host: Host) -> llm.ToolResultContent:
            result = await host.call_tool_decided(
                params["name"],
                params["arguments"],
                meta={IDEMPOTENCY_KEY: key},
                audit={"run_id": params["run_id"], "call_id": call_id},
            )
            return tool_result_to_llm(call_id, result)

        status, reason = "ok", None
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
            text = f"No such tool: {params['name']}" if isinstance(exc, NotFound) else reason
            content = llm.ToolResultContent(
                tool_use_id=call_id,
                content=(llm.TextContent(text=f"Tool call failed: {text}"),),
                is_error=True,
            )
        content, ref = self._cut(params, content)
        return {
            "status": status,
            "reason": reason,
            "result": codec.dump(content),
            "output": _text(content),
            "attempt": info.attempt,
            "worker": self.worker,
            "duration": round(time.monotonic() - started, 4),
            "ref": ref,
        }

    def _cut(
        self, params: Mapping[str, Any], content: llm.ToolResultContent
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
        ref = self._keep(params, content)
        cut = cut_result(content, cap, ref)
        if 2 * size(codec.dump(cut)) > PAYLOAD_MAX:  # the result and its text, both sent
            raise ApplicationError(
                "the tool's result is too large for the run's history, even cut",
                type="LimitError",
                non_retryable=True,
            )
        return cut, ref

    def _keep(self, params: Mapping[str, Any], content: llm.ToolResultContent) -> str | None:
        """The full result in ``results/RUN_ID/CALL_ID.json``, a path confined to the
        results folder; its reference, or None when it cannot be kept there (the run
        goes on with the cut result: failing would run the tool again)."""
        try:
            run = check_run_id(params["run_id"])
            name = file_name(str(params["call_id"])) + ".json"
            path = confined(self.results, run, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(codec.dump(content)), encoding="utf-8")
        except (LimitError, OSError) as exc:
            activity.logger.warning("a cut tool result was not kept: %s", exc)
            return None
        return f"{self.worker}:{path}"

    @activity.defn(name="audit_append")
    async def audit_append(self, lines: list[dict[str, Any]]) -> int:
        """Audit lines; a retry writes none already written. Returns how many were new."""

        return await asyncio.get_running_loop().run_in_executor(None, self.audit.append, lines)

    def all(self) -> list[Callable[..., Any]]:
        return [self.list_tools, self.llm_call, self.call_tool, self.audit_append]
