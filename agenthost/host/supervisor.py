"""Supervision: one supervisor per server keeps its session up, or says why it cannot.

States (transitions as data, STYLE.md 1)::

    starting --ready--> ready --session ends--> restarting --backoff--> starting
        |                                          |
        +--fails--> restarting / failed            +--too many restarts--> failed
    any --host closing--> stopped

A restart waits ``initial_backoff * multiplier**n`` seconds (capped at ``max_backoff``,
with +/- ``jitter`` so that many servers that died together do not restart in lockstep).
More than ``max_restarts`` restarts within ``window`` seconds is a crash loop: the server
ends ``failed`` with the last error, and stays there; the other servers are unaffected.
"""

from __future__ import annotations

import enum
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final

import attrs
import trio

from agenthost.asks import ClientHandlers
from agenthost.config.model import RestartPolicy, ServerConfig
from agenthost.connection import EraCache, connect, default_era_cache
from agenthost.errors import (
    AgentHostError,
    AuthorizationError,
    BackChannelRequired,
    JSONRPCError,
    ServerUnavailable,
    SessionExpired,
)
from agenthost.protocol.revisions import LATEST_REVISION, Era
from agenthost.redaction import redact
from agenthost.session import ClientSession

__all__ = ["ServerState", "ServerStatus", "Supervisor", "backoff_delay"]

log = logging.getLogger("agenthost.host.supervisor")


class ServerState(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    STOPPED = "stopped"


_TRANSITIONS: Final = {
    ServerState.STARTING: {ServerState.READY, ServerState.RESTARTING, ServerState.FAILED},
    ServerState.READY: {ServerState.RESTARTING, ServerState.FAILED, ServerState.STOPPED},
    ServerState.RESTARTING: {ServerState.STARTING, ServerState.FAILED, ServerState.STOPPED},
    ServerState.FAILED: {ServerState.STOPPED},
    ServerState.STOPPED: set(),
}


@attrs.frozen(kw_only=True)
class ServerStatus:
    """A snapshot of one server, for ``host.status()`` and ``agenthost check``."""

    name: str
    state: ServerState
    revision: str | None
    last_error: str | None
    restarts: int
    server_info: dict[str, str] | None = None
    #: OS process id of a stdio server while it runs.
    pid: int | None = None
    #: ``"legacy"`` (initialize) or ``"modern"`` (2026-07-28), and how it was learned
    #: (``"probe: ..."``, ``"cached"``, ``"config: protocol = ..."``).
    era: str | None = None
    learned: str | None = None
    #: The transport in use: the configured one, or for ``http`` what the probe chose
    #: (``"http: streamable-http"`` / ``"http: sse"``; plain ``"http"`` before it decided).
    transport: str | None = None


def backoff_delay(policy: RestartPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before restart number ``attempt`` (0-based)."""
    base = min(policy.max_backoff, policy.initial_backoff * policy.multiplier**attempt)
    spread = base * policy.jitter
    return max(0.0, base + (rng or random).uniform(-spread, spread))


#: Called with each new session once it is initialized (catalog refresh, subscriptions).
OnReady = Callable[[ClientSession], Awaitable[None]]


class Supervisor:
    """Keeps one server's session alive. Run with ``await nursery.start(sup.run)``."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        handlers: ClientHandlers | None = None,
        on_ready: OnReady | None = None,
        on_state: Callable[[Supervisor], None] | None = None,
        rng: random.Random | None = None,
        era_cache: EraCache | None = None,
        refused: str | None = None,
    ) -> None:
        self.config = config
        #: Why this server is never started (it would start agenthost itself), or None.
        self.refused = refused
        self.name = config.name
        self.handlers = handlers
        self._on_ready = on_ready
        self._on_state = on_state
        self._rng = rng or random.Random()
        self.state = ServerState.STARTING
        self.session: ClientSession | None = None
        self.last_error: str | None = None
        self.restarts = 0
        #: trio clock times of the latest start attempt and of its becoming ready.
        self.started_at: float | None = None
        self.ready_at: float | None = None
        self._restart_times: deque[float] = deque()
        self._first_attempt = trio.Event()
        self._state_changed = trio.Event()
        self._stop = trio.Event()
        self._expired = False
        self._unauthorized = False
        self._life: trio.CancelScope | None = None
        self._era_cache = era_cache
        #: The session being replaced by an initialize-era one (fall_back_to_legacy).
        self._switching: ClientSession | None = None
        self._switched_from: ClientSession | None = None
        #: Why the initialize era cannot help this server (it refused it), once known.
        self._no_fallback: str | None = None
        self._fallback_warned = False
        #: Whether a session ever became ready. Until then a failure is the caller's to
        #: report (``status()``, ``ServerUnavailable``; the CLI prints it once), so it is
        #: logged at INFO: warning about it as well said the same thing 3-4 times.
        self._was_ready = False

    # ------------------------------------------------------------------ state

    def _set(self, state: ServerState) -> None:
        if state is self.state:
            return
        if state not in _TRANSITIONS[self.state]:  # pragma: no cover - a bug, not input
            raise RuntimeError(f"{self.name}: bad transition {self.state} -> {state}")
        log.info("%s: %s -> %s", self.name, self.state.value, state.value)
        self.state = state
        self._state_changed.set()
        self._state_changed = trio.Event()
        if self._on_state is not None:
            self._on_state(self)

    def status(self) -> ServerStatus:
        session = self.session
        info = None
        reported = session.server_info if session is not None else None
        if reported is not None:
            info = {"name": str(reported.get("name")), "version": str(reported.get("version"))}
        wire = getattr(session, "_transport", None) if session else None
        pid = getattr(wire, "pid", None)
        transport: str = self.config.transport
        # The prober, or the transport it chose (each names itself: ``kind``).
        chosen = getattr(wire, "kind", None)
        if transport == "http" and isinstance(chosen, str):
            transport = f"http: {chosen}"
        return ServerStatus(
            name=self.name,
            state=self.state,
            revision=session.revision if session is not None else None,
            last_error=self.last_error,
            restarts=self.restarts,
            server_info=info,
            pid=pid if self.state is ServerState.READY else None,
            era=session.era.value if session is not None and session.era is not None else None,
            learned=session.learned if session is not None else None,
            transport=transport,
        )

    async def wait_first_attempt(self) -> None:
        """Until the first start succeeded or failed (its outcome is in ``state``)."""
        await self._first_attempt.wait()

    async def wait_usable(self) -> ServerState:
        """Until the server is READY with a live session, or FAILED/STOPPED.

        READY alone is not enough: right after a crash the session is already closed while
        the supervisor has not yet woken to move to RESTARTING.
        """
        while True:
            session = self.session
            if self.state is ServerState.READY and session is not None and not session.closed:
                return self.state
            if self.state in (ServerState.FAILED, ServerState.STOPPED):
                return self.state
            await self._state_changed.wait()

    async def wait_state(self, *states: ServerState) -> ServerState:
        while self.state not in states:
            await self._state_changed.wait()
        return self.state

    def require_session(self) -> ClientSession:
        """The live session, or a fast, explanatory failure.

        Raises:
            ServerUnavailable: the server is starting, restarting, failed or stopped.
        """
        session = self.session
        if self.state is ServerState.READY and session is not None:
            if not session.closed:
                return session
            # The session just ended and the supervisor has not moved on yet: "ready"
            # would be a lie; the session's own reason is the real state.
            reason = str(session.close_reason).removeprefix(f"{self.name}: ")
            raise ServerUnavailable(f"server connection lost: {reason}", server=self.name)
        detail = f"; last error: {self.last_error}" if self.last_error else ""
        raise ServerUnavailable(f"server is {self.state.value}{detail}", server=self.name)

    async def fall_back_to_legacy(
        self, session: ClientSession, error: BackChannelRequired
    ) -> ClientSession:
        """Reconnect this server in the ``initialize`` era after ``error``; the new session.

        ``auto`` picked 2026-07-28, but the server's code asks the client the pre-2026
        way (its own ``sampling/createMessage`` ...), which only the initialize era
        carries: the official SDK serves both eras and says so only by failing the tool.
        The era cache records "legacy" with the reason (so the next start, and the next
        CLI run, go straight to ``initialize``), one WARNING names the server and the
        setting that skips all this (``protocol = "legacy"``), and the session is
        restarted at once (no backoff, not counted as a crash). Calls in flight on the
        old session are cut off with it (:meth:`left_for_legacy` tells the caller so it
        may repeat them). Several calls failing together share one switch.

        A server that refuses ``initialize`` (modern-only) is probed again by
        :func:`~agenthost.connection.connect`, which finds 2026-07-28 again; then, and for
        the rest of this supervisor's life, the fallback is not tried again.

        Raises:
            BackChannelRequired: ``error`` itself (reworded) when no fallback applies:
                the era is pinned by config, or the server speaks only 2026-07-28.
            ServerUnavailable: the server did not come back.
        """
        if self.config.protocol != "auto":
            raise error  # pinned: the message already names protocol = "legacy"
        while True:
            if self._no_fallback is not None:
                raise self._unfixable(error)
            if self.session is session and session.era is Era.MODERN and self._switching is None:
                # The cache learns "legacy" first (in a worker thread), so the restart
                # below reads it; a call that failed meanwhile may have switched already.
                await self._remember_legacy(error)
                if self.session is session and self._switching is None:
                    self._switch(session, error)
            current = await self.replacement(session)
            if current.era is not Era.MODERN:
                return current
            if self._switched_from is session:
                # initialize was refused and the probe found 2026-07-28 again.
                self._no_fallback = "it refused the initialize era"
                raise self._unfixable(error)
            session = current  # restarted for another reason, still modern: switch it

    @staticmethod
    def _fallback_reason(error: BackChannelRequired) -> str:
        what = f"{error.request} {error.name!r}" if error.name else error.request
        return f"{what} sent {error.ask} as a server request"

    async def _remember_legacy(self, error: BackChannelRequired) -> None:
        cache = self._era_cache or default_era_cache()
        await cache.remember(self.config, LATEST_REVISION, reason=self._fallback_reason(error))

    def _switch(self, session: ClientSession, error: BackChannelRequired) -> None:
        reason = self._fallback_reason(error)
        if not self._fallback_warned:
            self._fallback_warned = True
            log.warning(
                "%s: the server speaks MCP 2026-07-28, but %s, which only the initialize"
                ' era carries; reconnecting it in that era (set protocol = "legacy" for'
                " this server to skip the 2026-07-28 attempt)",
                self.name,
                reason,
            )
        self._switching = self._switched_from = session
        if self._life is not None:
            self._life.cancel()

    def left_for_legacy(self, session: ClientSession) -> bool:
        """Whether ``session`` was closed to reconnect in the initialize era (a call cut
        off with it may be repeated on :meth:`replacement`)."""
        return session is self._switched_from

    @property
    def attempt_limit(self) -> float:
        """The longest one start attempt takes: the startup deadline (connecting, the era
        probe and any fallback share it) plus stopping the process of a session that
        ended (two shutdown phases)."""
        timeouts = self.config.timeouts
        return timeouts.startup + 2 * timeouts.shutdown

    async def replacement(self, old: ClientSession) -> ClientSession:
        """Until a live session other than ``old`` is READY (within :attr:`attempt_limit`
        and a second).

        Raises:
            ServerUnavailable: the server failed, stopped or did not come back in time.
        """
        limit = self.attempt_limit + 1.0
        with trio.move_on_after(limit):
            return await self._wait_next_session(old)
        raise ServerUnavailable(f"server did not come back within {limit:g}s", server=self.name)

    async def _wait_next_session(self, old: ClientSession) -> ClientSession:
        while True:
            current = self.session
            if (
                self.state is ServerState.READY
                and current is not None
                and current is not old
                and not current.closed
            ):
                return current
            if self.state in (ServerState.FAILED, ServerState.STOPPED):
                raise ServerUnavailable(
                    f"server did not come back in the initialize era: {self.last_error}",
                    server=self.name,
                )
            await self._state_changed.wait()

    def _unfixable(self, error: BackChannelRequired) -> BackChannelRequired:
        what = f"{error.request} {error.name!r}" if error.name else error.request
        return BackChannelRequired(
            error.code,
            f"{what} failed: the server's code sent {error.ask} as its own request, which"
            " MCP 2026-07-28 does not carry, and the server speaks only 2026-07-28"
            f" ({self._no_fallback}): the server must ask through MRTR (the SDK's Resolve"
            " markers); report this to its author",
            error.data,
            server=self.name,
            ask=error.ask,
            request=error.request,
            name=error.name,
        )

    def stop(self) -> None:
        """Stop the server, whatever it is doing (starting, initializing, serving)."""
        self._stop.set()
        if self._life is not None:
            self._life.cancel()

    # ------------------------------------------------------------------ the loop

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start, watch and restart the server until stopped or failed for good."""
        task_status.started()
        policy = self.config.restart
        attempt = 0
        try:
            if self.refused is not None:
                self.last_error = self.refused
                log.info("%s: %s", self.name, self.refused)
                self._set(ServerState.FAILED)
                return
            while not self._stop.is_set():
                self._set(ServerState.STARTING)
                error = await self._run_once()
                self._first_attempt.set()
                if self._stop.is_set():
                    break
                if self._switching is not None:
                    # An era switch, not a crash: start again at once, count nothing.
                    self._switching = None
                    self._set(ServerState.RESTARTING)
                    continue
                self.last_error = error
                news = logging.WARNING if self._was_ready else logging.INFO
                log.log(news, "%s: session ended: %s", self.name, error)
                gave_up = logging.ERROR if self._was_ready else logging.INFO
                if self._unauthorized:
                    # A restart cannot log anyone in: the message says how to.
                    log.log(gave_up, "%s: failed: %s", self.name, error)
                    self._set(ServerState.FAILED)
                    return
                if not policy.enabled or not self._may_restart(policy):
                    reason = (
                        "restarts disabled"
                        if not policy.enabled
                        else f"crashed {policy.max_restarts + 1} times within {policy.window:g}s"
                    )
                    self.last_error = f"{error} ({reason})"
                    log.log(gave_up, "%s: failed: %s", self.name, self.last_error)
                    self._set(ServerState.FAILED)
                    return
                self._set(ServerState.RESTARTING)
                if self._expired:
                    delay = 0.0
                else:
                    delay = backoff_delay(policy, attempt, self._rng)
                    attempt += 1
                self.restarts += 1
                log.info("%s: restarting in %.2fs (restart %d)", self.name, delay, self.restarts)
                with trio.move_on_after(delay):
                    await self._stop.wait()
        finally:
            self._first_attempt.set()
            self.session = None
            if self.state is not ServerState.STOPPED and (
                self._stop.is_set() or self.state is not ServerState.FAILED
            ):
                self.state = ServerState.STOPPED
                self._state_changed.set()
                if self._on_state is not None:
                    self._on_state(self)

    def _may_restart(self, policy: RestartPolicy) -> bool:
        now = trio.current_time()
        times = self._restart_times
        times.append(now)
        while times and now - times[0] > policy.window:
            times.popleft()
        return len(times) <= policy.max_restarts

    async def _run_once(self) -> str:
        """One session's life; returns why it ended.

        Sets ``_expired`` when the server forgot the session (HTTP 404): the server is
        healthy, so the restart that follows needs no backoff.

        Error handling: any failure ends this server's session only. An unexpected
        exception (a bug, ours or a library's) is logged with its traceback and treated
        like a crash of this one server: it must never take the other servers down.
        """
        self._expired = False
        self._unauthorized = False
        self.started_at = trio.current_time()
        self.ready_at = None
        reason: object = "stopped"
        with trio.CancelScope() as self._life:
            if self._stop.is_set():
                self._life.cancel()
            try:
                async with connect(
                    self.config, handlers=self.handlers, era_cache=self._era_cache
                ) as session:
                    self.session = session
                    if self._on_ready is not None:
                        await self._on_ready(session)
                    self.ready_at = trio.current_time()
                    self._set(ServerState.READY)
                    self._was_ready = True
                    self._first_attempt.set()
                    reason = await session.wait_closed()
                    self._expired = isinstance(reason, SessionExpired)
                    self._unauthorized = isinstance(reason, AuthorizationError)
            except AgentHostError as exc:
                self._unauthorized = isinstance(exc, AuthorizationError)
                reason = exc.text if isinstance(exc, JSONRPCError) else str(exc)
            except OSError as exc:
                reason = f"{self.name}: {exc}"
            except Exception as exc:
                log.exception("%s: unexpected error in the session", self.name)
                reason = f"{self.name}: internal error: {type(exc).__name__}: {exc}"
            finally:
                self.session = None
        self._life = None
        # Every line that shows this text names the server first: drop the errors' own
        # "name: " prefix, so no one reads "fs: fs: command not found".
        return redact(str(reason).removeprefix(f"{self.name}: "))
