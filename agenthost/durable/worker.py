"""A durable-run worker: one Host in a Trio thread, a Temporal worker on asyncio.

:func:`host_thread` starts the Host in a long-lived Trio thread and stops it before the
process ends (a Trio run still going at interpreter finalization aborts the process);
:func:`run_worker` serves the ``AgentRun`` workflow and its activities until told to stop,
then drains: no new tasks are taken, activities in flight get ``drain`` seconds to end.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import timedelta
from pathlib import Path
from typing import Any

import trio
from temporalio.client import Client
from temporalio.worker import Worker

from agenthost.config.model import HostConfig
from agenthost.durable.activities import Activities, AuditSink, HostBridge, JsonlAuditSink
from agenthost.durable.connection import TemporalSettings
from agenthost.durable.pgaudit import PostgresAuditSink, is_dsn
from agenthost.durable.seal import DurableKey
from agenthost.durable.workflow import AgentRun
from agenthost.errors import AgentHostError
from agenthost_providers.base import Provider

__all__ = ["DEFAULT_TASK_QUEUE", "connect", "host_thread", "run_worker", "state_dir"]

DEFAULT_TASK_QUEUE = "agenthost"
#: Seconds to connect (TLS handshake and the first call included).
CONNECT_TIMEOUT = 15.0


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/agenthost`` (absolute only), else ``~/.local/state/agenthost``."""
    environ = os.environ if env is None else env
    state = environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "agenthost"


async def connect(target: TemporalSettings | str, namespace: str = "default") -> Client:
    """A Temporal client (``target``: the settings, or a plain address and ``namespace``);
    a server that cannot be reached, or whose certificate fails, is one clear error."""
    settings = target if isinstance(target, TemporalSettings) else None
    settings = settings or TemporalSettings(address=str(target), namespace=namespace)
    address = settings.address
    try:
        return await asyncio.wait_for(
            Client.connect(address, **settings.connect_args()), CONNECT_TIMEOUT
        )
    except (RuntimeError, OSError, TimeoutError) as exc:
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise AgentHostError(f"cannot reach Temporal at {address}: {why}") from None


@contextmanager
def host_thread(
    config: HostConfig,
    *,
    providers: Mapping[str, Provider] | None = None,
    env: Mapping[str, str] | None = None,
    startup: float = 120.0,
) -> Iterator[HostBridge]:
    """The Host of ``config`` in a Trio thread of its own, for as long as the block runs;
    ``providers`` and ``env`` as for :func:`~agenthost.host.open_host`.

    **Resource handling:** the Host (its server processes) is closed and the thread
    joined when the block exits, however it exits.
    """
    from agenthost.host import open_host

    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        stop = trio.Event()
        box["stop"] = stop
        async with open_host(config, providers=providers, env=env) as host:
            box["bridge"] = HostBridge(host, trio.lowlevel.current_trio_token())
            ready.set()
            await stop.wait()

    def target() -> None:
        try:
            trio.run(main)
        except BaseException as exc:  # reported by the caller's thread
            box["error"] = exc
        finally:
            ready.set()

    thread = threading.Thread(target=target, name="agenthost-host", daemon=False)
    thread.start()
    if not ready.wait(startup) or "bridge" not in box:
        error = box.get("error")
        _stop(box, thread)
        if isinstance(error, AgentHostError):
            raise error
        raise AgentHostError(f"the worker's host did not start: {error or 'timed out'}")
    bridge: HostBridge = box["bridge"]
    try:
        yield bridge
    finally:
        bridge.close()
        _stop(box, thread)


def _stop(box: Mapping[str, Any], thread: threading.Thread) -> None:
    bridge = box.get("bridge")
    if bridge is not None:
        with suppress(trio.RunFinishedError):
            trio.from_thread.run_sync(box["stop"].set, trio_token=bridge.token)
    thread.join(60)


async def run_worker(
    client: Client,
    bridge: HostBridge,
    *,
    task_queue: str,
    audit: Path | str,
    results: Path,
    stop: asyncio.Event,
    key: DurableKey,
    drain: float = 30.0,
    on_ready: Any = None,
) -> None:
    """Serve runs on ``task_queue`` until ``stop`` is set, then drain (see module doc).

    ``key`` is the deployment's (:mod:`agenthost.durable.seal`): the activities do only
    work its holders decided, and seal what they return and audit.
    """
    sink: AuditSink
    if isinstance(audit, str) and is_dsn(audit):
        sink = PostgresAuditSink(audit, key=key)
    else:
        sink = JsonlAuditSink(Path(audit), key=key)
    activities = Activities(bridge, audit=sink, results=results, key=key)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentRun],
        activities=activities.all(),
        graceful_shutdown_timeout=timedelta(seconds=drain),
        max_concurrent_activities=200,
    )
    try:
        async with worker:
            if on_ready is not None:
                on_ready()
            await stop.wait()
    finally:
        if isinstance(sink, PostgresAuditSink):
            sink.close()
