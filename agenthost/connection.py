"""ServerConfig -> transport -> session: one server without a host, in either era.

``async with connect(ServerConfig(...)) as session``. Building a transport from a config
entry lives here, not in ``transports/`` (transports know nothing of config or MCP), and
so does the era negotiation of ``protocol = "auto"`` (``basic/versioning.mdx`` of
2026-07-28) and its cache:

* stdio: probe with ``server/discover`` (modern ``_meta``); a result or a modern error
  (-32020..-32022) means 2026-07-28; any other error, or no answer within
  :data:`PROBE_TIMEOUT` (at most half the startup limit), means legacy: ``initialize``
  on the same process. Some servers
  exit on an unexpected first message: then the server is started again and spoken to
  with ``initialize`` (a restart costs one process start, once: the era is cached).
* HTTP: the probe goes to the URL as Streamable HTTP only. A 400 whose body is a modern
  JSON-RPC error is modern; 401/403 are authentication (raised, never era evidence);
  anything else means legacy: a fresh transport (``http`` still falls back to legacy
  SSE) and ``initialize``.
* ``sse`` and ``websocket`` servers are legacy (2026-07-28 defines neither).

``timeouts.startup`` is one deadline for the whole attempt: connecting, the probe and
every fallback after it (a fresh transport, a restarted process) share it, and running
out of it raises :class:`~agenthost.errors.AgentHostTimeout` naming that limit.

The cache (:class:`EraCache`) remembers the revision learned per server, in memory and in
``$XDG_CACHE_HOME/agenthost/eras.json``, so a restart or the next CLI run goes straight to
``initialize`` or ``server/discover``; if the cached era later fails (the server was
upgraded), the entry is dropped and the server probed again.

The module is ``dial``, not ``connect``: a submodule named like the public
``agenthost.connect`` function would replace that attribute of the package when imported.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import orjson
import trio

from agenthost._util import collapse_single_group
from agenthost.asks import ClientHandlers
from agenthost.config.model import ServerConfig
from agenthost.errors import (
    AgentHostTimeout,
    ConfigError,
    JSONRPCError,
    NotModern,
    TransportClosed,
    UnsupportedRevision,
)
from agenthost.mrtr import DEFAULT_MAX_ROUNDS
from agenthost.protocol.lifecycle import (
    EXITED,
    NOT_MODERN,
    REFUSED,
    REFUSED_MODERN,
    Plan,
    falls_back,
    first_plan,
    modern_evidence,
    next_plan,
    probe_refusal,
)
from agenthost.protocol.revisions import (
    LATEST_MODERN,
    LATEST_REVISION,
    Era,
    era_of,
    is_known,
)
from agenthost.session import ClientSession
from agenthost.transports.base import Transport

if TYPE_CHECKING:
    import httpx

    from agenthost.auth.loopback import UrlOpener
    from agenthost.auth.store import TokenStore

__all__ = [
    "PROBE_TIMEOUT",
    "EraCache",
    "connect",
    "default_era_cache",
    "negotiate",
    "open_session",
    "open_transport",
]

log = logging.getLogger("agenthost.connection")


def _limit(seconds: float) -> float | None:
    return None if math.isinf(seconds) else seconds


@asynccontextmanager
async def open_transport(config: ServerConfig) -> AsyncIterator[Transport]:
    """Open the transport ``config`` describes (stdio, or a remote one by URL).

    Remote transports are imported only when used: a stdio-only host never pays for
    httpx or trio-websocket at start-up.
    """
    if config.transport == "stdio":
        from agenthost.transports.stdio import open_stdio_transport

        assert config.command is not None
        async with open_stdio_transport(
            config.command,
            config.args,
            name=config.name,
            cwd=config.cwd,
            env=config.env,
            inherit=config.inherit_env,
            max_message_size=config.max_message_size,
            shutdown_timeout=config.timeouts.shutdown,
        ) as stdio:
            yield stdio
    else:
        async with open_remote_transport(config) as remote:
            yield remote


@asynccontextmanager
async def connect(
    config: ServerConfig,
    *,
    handlers: ClientHandlers | None = None,
    protocol_version: str = LATEST_REVISION,
    era_cache: EraCache | None = None,
    token_store: TokenStore | None = None,
    url_opener: UrlOpener | None = None,
) -> AsyncIterator[ClientSession]:
    """Start (or reach) one server and yield its session, in the era ``config.protocol``
    says (``auto``: negotiated and cached, see the module doc).

    ``protocol_version`` is the legacy revision ``initialize`` offers. ``era_cache``:
    where ``auto`` remembers what it learned (default: :func:`default_era_cache`).
    ``token_store``: where an OAuth login is kept (default: the OS keyring, else files);
    ``url_opener``: ``async (server, url)`` that shows a person the login URL (a browser
    must then reach the loopback redirect in it); default: the context's
    :data:`agenthost.auth.URL_OPENER`, unset: headless (a login that needs a person fails
    with :class:`~agenthost.errors.AuthorizationError`).

    Raises:
        TransportError: the server cannot be started or reached.
        UnsupportedRevision: no MCP revision both sides speak.
        AgentHostTimeout: the server was not reached and spoken to within
            ``timeouts.startup`` (one deadline for connecting, the era probe and every
            fallback; the message names the limit and what was still awaited), or the
            transport's own connect timeout ran out first.

    Resource handling: the server process, or the remote session, is closed when the block
    exits, however it exits (a probe that failed closes its own first).
    """
    if token_store is None and url_opener is None:
        async with _connect(config, handlers, protocol_version, era_cache) as session:
            yield session
        return
    from agenthost.auth.store import auth_context

    with auth_context(token_store, url_opener):
        async with _connect(config, handlers, protocol_version, era_cache) as session:
            yield session


@asynccontextmanager
async def _connect(
    config: ServerConfig,
    handlers: ClientHandlers | None,
    protocol_version: str,
    era_cache: EraCache | None,
) -> AsyncIterator[ClientSession]:
    cache = era_cache if era_cache is not None else default_era_cache()
    mode = config.protocol
    stdio = config.transport == "stdio"
    plan = await _first_plan(config, cache)
    # One deadline for the whole attempt: connecting, the probe, and every fallback
    # after it (a fresh transport, a restarted process, initialize after the probe).
    # Each used to get the whole limit again (issue 22: 10-11 s for startup = 5).
    startup = config.timeouts.startup
    deadline = trio.current_time() + startup
    for _ in range(4):
        attempt = _Attempt(config, plan, handlers, protocol_version, deadline)
        yielded = False
        with trio.CancelScope(deadline=deadline) as limit:
            try:
                async with attempt.open() as session:
                    limit.deadline = math.inf  # started: the limit is spent
                    if mode == "auto" and session.revision is not None:
                        await cache.remember(config, session.revision)
                    yielded = True
                    yield session
                return
            except (NotModern, TransportClosed, JSONRPCError, UnsupportedRevision) as exc:
                if yielded:
                    raise
                following = next_plan(
                    mode,
                    plan,
                    _outcome(exc),
                    stdio=stdio,
                    reason=str(exc).removeprefix(f"{config.name}: "),
                )
                if following is None:
                    raise
                if plan.cached:
                    log.info("%s: the cached protocol era failed; probing again", config.name)
                    await cache.drop(config)
                elif following.learned is not None and "restarted" in following.learned:
                    log.info("%s: the server exited on the probe; restarting it", config.name)
                plan = following
            except AgentHostTimeout:
                if yielded:
                    raise
                if trio.current_time() < deadline:
                    # A limit of its own (the transport's connect timeout) ran out
                    # first: the server is unreachable; another attempt cannot help.
                    raise
                limit.cancel()  # the same error as when the deadline cancels us, below
        if limit.cancel_called and not yielded:
            if plan.cached:
                # No time is left to probe again now: the next attempt will, so a server
                # that changed era is not stuck on the era it had.
                await cache.drop(config)
            raise AgentHostTimeout(
                f"did not start within {startup:g}s (timeouts.startup): {attempt.stage}",
                server=config.name,
                timeout=startup,
            )
    raise AssertionError("unreachable: at most a re-probe, a fallback and a correction")


async def _first_plan(config: ServerConfig, cache: EraCache) -> Plan:
    """The first attempt's plan; the era cache is read only when a probe would be made."""
    cached: tuple[bool, str | None] | None = None
    if config.protocol == "auto" and config.transport not in ("sse", "websocket"):
        await cache.open()
        entry = cache.get(config)
        if entry is not None:
            cached = (entry[0] is Era.MODERN, cache.reason(config))
    return first_plan(config.protocol, config.transport, cached)


class _Attempt:
    """One attempt at ``plan``: a transport for its era and a session over it. ``stage``
    says what was still awaited, for the timeout message."""

    def __init__(
        self,
        config: ServerConfig,
        plan: Plan,
        handlers: ClientHandlers | None,
        protocol_version: str,
        deadline: float,
    ) -> None:
        self.stage = "still connecting" if config.is_remote else "still starting the server"
        self._config = config
        self._plan = plan
        self._handlers = handlers
        self._protocol_version = protocol_version
        self._deadline = deadline

    @asynccontextmanager
    async def open(self) -> AsyncIterator[ClientSession]:
        config, era = self._config, self._plan.era
        stdio = config.transport == "stdio"
        startup = config.timeouts.startup
        mode = config.protocol
        offer = mode if mode not in ("auto", "legacy") else LATEST_MODERN
        async with open_transport(_for_era(config, era)) as transport:
            self.stage = _waiting_for(era, self._plan.learned, stdio)
            async with open_session(
                transport,
                name=config.name,
                handlers=self._handlers,
                request_timeout=_limit(config.timeouts.request),
                initialize_timeout=max(0.0, self._deadline - trio.current_time()),
                protocol_version=offer if era == "modern" else self._protocol_version,
                era=era,
                # stdio: a server may stay silent on the probe, so the probe gets part
                # of the limit and initialize the rest; HTTP always answers, so the
                # probe may take it all (a slow server is not legacy).
                probe_timeout=min(PROBE_TIMEOUT, startup / 2) if stdio else None,
                fallback_in_place=stdio,
                max_input_rounds=config.max_input_rounds,
                learned=self._plan.learned,
            ) as session:
                yield session


def _outcome(exc: BaseException) -> str:
    """A failed attempt's error as :func:`~agenthost.protocol.lifecycle.next_plan` reads it."""
    if isinstance(exc, NotModern):
        return NOT_MODERN
    if isinstance(exc, TransportClosed):
        return EXITED
    if isinstance(exc, JSONRPCError | UnsupportedRevision) and _modern_evidence(exc):
        return REFUSED_MODERN
    return REFUSED


def _waiting_for(era: str, learned: str | None, stdio: bool) -> str:
    """What the attempt is waiting for in ``era``, for the startup timeout's message."""
    if era == "legacy":
        what = "no answer to initialize"
    elif era == "modern":
        what = "no answer to server/discover"
    elif stdio:
        what = "no answer to server/discover (the era probe) nor to initialize after it"
    else:
        what = "no answer to server/discover (the era probe)"
    return f"{what} ({learned})" if learned else what


def _modern_evidence(exc: JSONRPCError | UnsupportedRevision) -> bool:
    """The error proves the server speaks 2026-07-28 (:func:`lifecycle.modern_evidence`)."""
    if isinstance(exc, UnsupportedRevision):
        return modern_evidence(None, exc.supported)
    return modern_evidence(exc.code)


def _for_era(config: ServerConfig, era: str) -> ServerConfig:
    """The config to open for ``era``: a modern (or probing) HTTP session goes to the URL
    as Streamable HTTP only (legacy SSE has no modern binding, and the legacy fallback
    opens a transport of its own)."""
    if era != "legacy" and config.transport == "http":
        return attrs.evolve(config, transport="streamable-http")
    return config


# ---------------------------------------------------------------------------- era cache

#: ``ServerConfig.protocol`` values.
PROTOCOLS: Final = ("auto", "legacy", LATEST_MODERN)
_CACHE_MAX_ENTRIES: Final = 256
#: A bigger file is not ours to read (256 entries are ~30 KiB): it is ignored.
_CACHE_MAX_BYTES: Final = 1024 * 1024
#: The first probe of a stdio server waits at most this long for ``server/discover``
#: (a legacy server that ignores unknown requests costs this much, once: the era is
#: cached). Never more than half the startup timeout: initialize needs the rest.
PROBE_TIMEOUT: Final = 5.0


class EraCache:
    """What ``auto`` learned about each server, so it probes once, not at every start.

    Kept in memory for the process and, when ``path`` is set, in a small JSON file so the
    next CLI run does not probe again (default ``$XDG_CACHE_HOME/agenthost/eras.json``,
    else ``~/.cache/agenthost/eras.json``). A server is keyed by a digest of what
    identifies it (transport, command, args, cwd or URL; never env or headers, which may
    hold secrets). The file is bounded (:data:`_CACHE_MAX_ENTRIES`, oldest dropped), a
    corrupt file is ignored, and a write failure only costs the next run a probe.

    The methods are plain and blocking (the file is small); async code uses
    :meth:`open`, :meth:`remember` and :meth:`drop`, which do the file I/O in a worker
    thread so a slow disk never stalls the event loop. A lock keeps several servers
    starting at once from interleaving their writes.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._entries: dict[str, dict[str, Any]] | None = None
        self._lock = threading.RLock()

    async def open(self) -> None:
        """Read the file (once), in a worker thread."""
        if self._entries is None:
            await trio.to_thread.run_sync(self._load)

    async def remember(
        self, config: ServerConfig, revision: str, *, reason: str | None = None
    ) -> None:
        """:meth:`put`, its file write in a worker thread."""
        await trio.to_thread.run_sync(lambda: self.put(config, revision, reason=reason))

    async def drop(self, config: ServerConfig) -> None:
        """:meth:`forget`, its file write in a worker thread."""
        await trio.to_thread.run_sync(self.forget, config)

    @classmethod
    def default(cls) -> EraCache:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return cls(Path(base) / "agenthost" / "eras.json")

    @staticmethod
    def key(config: ServerConfig) -> str:
        """A digest of what identifies the server: the same command with another ``env``
        (``MODE=legacy``) may be another server. Only the digest is stored, so env
        values (which may be secrets) never reach the file."""
        identity = [
            config.transport,
            config.command,
            list(config.args),
            config.cwd,
            config.url,
            sorted(config.env.items()),
        ]
        return hashlib.sha256(orjson.dumps(identity)).hexdigest()[:32]

    def _load(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return self._load_locked()

    def _load_locked(self) -> dict[str, dict[str, Any]]:
        if self._entries is None:
            self._entries = {}
            if self.path is not None:
                with suppress(OSError, orjson.JSONDecodeError, ValueError):
                    with self.path.open("rb") as file:
                        raw = file.read(_CACHE_MAX_BYTES + 1)
                    if len(raw) > _CACHE_MAX_BYTES:
                        raise ValueError("era cache file too large: ignored")
                    data = orjson.loads(raw)
                    if isinstance(data, dict):
                        kept = [(k, v) for k, v in data.items() if isinstance(v, dict)]
                        # The newest entries are last: one slice, never a pop per entry.
                        self._entries = dict(kept[-_CACHE_MAX_ENTRIES:])
        return self._entries

    def get(self, config: ServerConfig) -> tuple[Era, str] | None:
        """The era and revision learned for ``config``, if any."""
        entry = self._load().get(self.key(config))
        if entry is None:
            return None
        revision = entry.get("revision")
        if not isinstance(revision, str) or not is_known(revision):
            return None
        return era_of(revision), revision

    def reason(self, config: ServerConfig) -> str | None:
        """Why the entry for ``config`` holds its era, when more than a probe decided it
        (the fallback of :meth:`agenthost.host.supervisor.Supervisor.fall_back_to_legacy`)."""
        reason = self._load().get(self.key(config), {}).get("reason")
        return reason[:300] if isinstance(reason, str) else None

    def put(self, config: ServerConfig, revision: str, *, reason: str | None = None) -> None:
        """Remember ``revision`` for ``config``; ``reason`` says why, when a probe did not
        decide it (kept while the era stays the same)."""
        with self._lock:
            self._put(config, revision, reason)

    def _put(self, config: ServerConfig, revision: str, reason: str | None) -> None:
        entries = self._load()
        key = self.key(config)
        old = entries.get(key, {})
        if old.get("revision") == revision and (reason is None or old.get("reason") == reason):
            return
        before = old.get("revision")
        if (
            reason is None
            and isinstance(before, str)
            and is_known(before)
            and era_of(before) is era_of(revision)
        ):
            reason = old.get("reason")
        entries.pop(key, None)
        entries[key] = {"revision": revision, "at": int(time.time())}
        if reason is not None:
            entries[key]["reason"] = reason[:300]
        while len(entries) > _CACHE_MAX_ENTRIES:
            entries.pop(next(iter(entries)))
        self._save(entries)

    def forget(self, config: ServerConfig) -> None:
        with self._lock:
            if self._load().pop(self.key(config), None) is not None:
                self._save(self._load())

    def _save(self, entries: dict[str, dict[str, Any]]) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_bytes(orjson.dumps(entries))
            tmp.replace(self.path)
        except OSError as exc:
            log.debug("era cache not saved to %s: %s", self.path, exc)


_default_cache: EraCache | None = None


def default_era_cache() -> EraCache:
    """The process-wide cache (the file is read once)."""
    global _default_cache
    if _default_cache is None:
        _default_cache = EraCache.default()
    return _default_cache


# -- remote transports from a config entry (transports/ know nothing of config or OAuth)


def open_remote_transport(
    config: ServerConfig, *, client: httpx.AsyncClient | None = None
) -> AbstractAsyncContextManager[Transport]:
    """The transport context manager for a remote server's config entry.

    ``config.transport`` picks it: ``"http"`` (probe), ``"streamable-http"``, ``"sse"``
    or ``"websocket"``. ``config.headers`` are already expanded (``${VAR}``) by the config
    loader; they are sent on every request and never logged. ``client`` is used for the
    HTTP kinds and never closed here.

    Returns:
        An async context manager yielding a :class:`~agenthost.transports.base.Transport`.

    Raises:
        ConfigError: a stdio entry, or one without a URL.
    """
    from agenthost.transports.http import open_streamable_http_transport
    from agenthost.transports.legacy_sse import open_legacy_sse_transport
    from agenthost.transports.probing import open_http_transport

    url = config.url
    if not config.is_remote or url is None:
        raise ConfigError("not a remote server (no url)", key=f"servers.{config.name}")
    timeouts = config.timeouts
    ack = timeouts.request if math.isfinite(timeouts.request) else 60.0
    common: dict[str, Any] = {
        "name": config.name,
        "headers": config.headers,
        "connect_timeout": timeouts.connect,
        "shutdown_timeout": timeouts.shutdown,
        "max_message_size": config.max_message_size,
    }
    kind = config.transport
    if kind == "websocket":
        # Imported here only: trio-websocket's wsproto builds a 64 Ki-entry table at import
        # (~0.1 s of CPU), which no HTTP or stdio user should pay for.
        from agenthost.transports.websocket import open_websocket_transport

        return open_websocket_transport(url, **common)
    common.update(client=client, ack_timeout=ack)
    if client is None and _wants_oauth(config):
        return _with_oauth(config, url, common)
    if kind == "streamable-http":
        return open_streamable_http_transport(url, **common)
    if kind == "sse":
        return open_legacy_sse_transport(url, **common)
    return open_http_transport(url, **common)


def _wants_oauth(config: ServerConfig) -> bool:
    """OAuth unless turned off or a static ``Authorization`` header is configured."""
    if config.oauth is not None and not config.oauth.enabled:
        return False
    return not any(name.lower() == "authorization" for name in config.headers)


@asynccontextmanager
async def _with_oauth(
    config: ServerConfig, url: str, common: dict[str, Any]
) -> AsyncIterator[Transport]:
    """The HTTP transport on a client whose ``auth`` is the server's OAuth flow.

    The authorization server is reached through a second client without that ``auth``
    (the flow must not recurse into itself). Both clients are ours and closed on exit.
    """
    import httpx

    from agenthost.auth.flow import OAuth
    from agenthost.transports._httpx import new_client, ssl_context
    from agenthost.transports.http import open_streamable_http_transport
    from agenthost.transports.legacy_sse import open_legacy_sse_transport
    from agenthost.transports.probing import open_http_transport

    timeouts = config.timeouts
    timeout = httpx.Timeout(timeouts.connect, read=None)
    shutdown = timeouts.shutdown
    as_client = httpx.AsyncClient(
        timeout=httpx.Timeout(timeouts.connect, read=30.0), verify=ssl_context()
    )
    auth = OAuth(server=config.name, url=url, settings=config.oauth, http=as_client)
    mcp_client = new_client(timeout=timeout, follow_redirects=True, auth=auth)
    options = dict(common, client=mcp_client)
    try:
        kind = config.transport
        opener = (
            open_streamable_http_transport
            if kind == "streamable-http"
            else open_legacy_sse_transport
            if kind == "sse"
            else open_http_transport
        )
        async with opener(url, **options) as transport:
            yield transport
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(shutdown):
            await mcp_client.aclose()
            await as_client.aclose()


async def negotiate(
    session: ClientSession,
    mode: str = "auto",
    *,
    timeout: float | None = 30.0,
    probe_timeout: float | None = 10.0,
    fallback_in_place: bool = True,
) -> None:
    """Settle the era: ``"legacy"`` (initialize), ``"modern"`` (discover) or ``"auto"``.

    ``auto`` follows ``basic/versioning.mdx``: probe with ``server/discover``; a
    result or a recognised modern error means modern; any other error, or no answer
    within ``probe_timeout``, means legacy: ``initialize`` on the same connection
    (or, with ``fallback_in_place=False``, raise :class:`NotModern` so the caller
    falls back on a fresh one, as HTTP does). Never keyed to one error code.

    ``timeout`` bounds the whole negotiation, the probe and every request after it:
    one deadline, so a silent server costs the caller's limit and not a multiple of
    it (issue 22: the probe and the fallback each got the whole limit).

    Raises:
        NotModern: auto found a legacy server and ``fallback_in_place`` is False.
        TransportClosed: the server went away (some exit on an unexpected first
            message; the caller may restart it and use ``"legacy"``).
        UnsupportedRevision, AgentHostTimeout, JSONRPCError: as initialize/discover.
    """
    if mode == "legacy":
        await session.initialize(timeout=timeout)
        session.learned = session.learned or "initialize"
        return
    if mode != "auto":
        await session.discover(timeout=timeout)
        session.learned = session.learned or "server/discover"
        return
    late = False
    deadline = math.inf if timeout is None else trio.current_time() + timeout
    probe = timeout if probe_timeout is None else min(probe_timeout, timeout or math.inf)
    try:
        await session.discover(timeout=probe)
    except JSONRPCError as exc:
        reason = probe_refusal(exc.code, exc.raw_data)
        if reason is None:
            raise  # a modern server refusing us, or authentication: never legacy
    except AgentHostTimeout:
        reason = "server/discover unanswered"
        late = True
    except NotModern as exc:
        reason = str(exc).removeprefix(f"{session.name}: ")
    except UnsupportedRevision as exc:
        # Modern, but no modern revision in common: fall back only if the server
        # also names a legacy one (a dual-era server with other modern versions).
        if not falls_back(exc.supported):
            raise
        reason = "server/discover: no modern revision in common"
    else:
        session.learned = "probe: server/discover answered"
        return
    if not fallback_in_place:
        raise NotModern(reason, server=session.name)
    try:
        try:
            await session.initialize(timeout=_left(deadline))
        except (JSONRPCError, UnsupportedRevision):
            if not late:
                raise
            # The probe was only late (a slow start on a loaded machine): the server
            # read it and now serves 2026-07-28 on this connection, so it refuses
            # initialize. Ask again, with what is left of the limit: it is up by now.
            await session.discover(timeout=_left(deadline))
            session.learned = "probe: server/discover answered late"
            return
    except AgentHostTimeout:
        # Named by the caller's limit, not by the few seconds the probe left over.
        raise AgentHostTimeout(
            f"no answer within {timeout:g}s: {reason}, then no answer to initialize",
            server=session.name,
            timeout=timeout,
        ) from None
    session.learned = f"probe: {reason}; initialize"


@asynccontextmanager
async def open_session(
    transport: Transport,
    *,
    name: str,
    handlers: ClientHandlers | None = None,
    request_timeout: float | None = 60.0,
    initialize_timeout: float | None = 30.0,
    protocol_version: str = LATEST_REVISION,
    client_info: Mapping[str, Any] | None = None,
    era: str = "legacy",
    probe_timeout: float | None = 10.0,
    fallback_in_place: bool = True,
    max_input_rounds: int = DEFAULT_MAX_ROUNDS,
    learned: str | None = None,
) -> AsyncIterator[ClientSession]:
    """Run a session over ``transport`` and settle its era (:func:`negotiate`).

    ``era``: ``"legacy"`` (``initialize``, the default here), ``"modern"``
    (``server/discover``) or ``"auto"``. A modern session also keeps a
    ``subscriptions/listen`` open for the change notifications its handlers listen to.

    Resource handling: the session's tasks stop when the block exits; the transport is
    closed too (it belongs to the caller's ``async with``, which still tears it down).

    Raises:
        UnsupportedRevision: no common revision.
        AgentHostTimeout: the server did not answer ``initialize`` in time.
    """
    session = ClientSession(
        transport,
        name=name,
        handlers=handlers,
        request_timeout=request_timeout,
        protocol_version=protocol_version,
        client_info=client_info,
        max_input_rounds=max_input_rounds,
    )
    session.learned = learned
    with collapse_single_group():
        async with trio.open_nursery() as nursery:
            await nursery.start(session.run)
            try:
                await negotiate(
                    session,
                    era,
                    timeout=initialize_timeout,
                    probe_timeout=probe_timeout,
                    fallback_in_place=fallback_in_place,
                )
                session.listen_if_wanted()
                yield session
            finally:
                nursery.cancel_scope.cancel()
                session.closed_by_client()


def _left(deadline: float) -> float | None:
    """Seconds until ``deadline`` (None: no limit), never negative."""
    return None if math.isinf(deadline) else max(0.0, deadline - trio.current_time())
