"""The host: many servers, each in its own supervised session, behind one API.

``open_host(config)`` starts every configured server concurrently, waits until each is
ready or has failed (bounded by its startup timeout), and yields a :class:`Host`. One
server failing never stops the others unless the config marks it ``required``.

The :class:`Host` is the API; each job behind it lives in its own module, as a part the
host owns or a plain function it calls: :mod:`~agenthost.host.handlers` (what servers
ask of the host), :mod:`~agenthost.host.refresh` (the catalog kept in step),
:mod:`~agenthost.host.tool_calls` (consent's view of a call, and its route to the
server), :mod:`~agenthost.host.era_fallback`, :mod:`~agenthost.host.reads` (prompts,
resources, skills), :mod:`~agenthost.host.models` (the agent's LLM) and
:mod:`~agenthost.host.startup` (the config sections read before servers start).

Resource handling: every server process and remote session is closed when the block
exits, normally, by exception or by cancellation (the stdio shutdown is shielded).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from agenthost._util import DEFAULT, Timeout, collapse_single_group
from agenthost.agent.loop import DEFAULT_SYSTEM_PROMPT, DEFAULT_TASK_GRACE, run_agent
from agenthost.config.model import HostConfig, Workspace
from agenthost.config.selfstart import files_read, listed_in, self_start_refusal
from agenthost.errors import AgentHostError, NotFound, ServerUnavailable
from agenthost.host import models, reads
from agenthost.host.catalog import Catalog, CatalogTool, annotation_hints
from agenthost.host.era_fallback import with_era_fallback
from agenthost.host.handlers import DecidedCalls, RootsFilter, SamplingRoute, ServerAsks
from agenthost.host.refresh import CatalogRefresher
from agenthost.host.roots import RootsRegistry
from agenthost.host.startup import read_sections
from agenthost.host.supervisor import ServerState, ServerStatus, Supervisor
from agenthost.host.tool_calls import ToolRouter, repeatable, tool_call_action
from agenthost.protocol.types import (
    CallToolResult,
    GetPromptResult,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Root,
)
from agenthost.session import ClientSession, ProgressCallback
from agenthost.skills import LoadedSkill, SkillEntry
from agenthost.tool_tasks import TaskCreatedCallback, TaskDetached
from agenthost_policies import PolicyEngine, ToolCall
from agenthost_policies.prompters import Prompter
from agenthost_providers.base import ModelInfo, Provider
from agenthost_providers.config import (
    ProvidersConfig,
    available_models,
    default_choice,
    open_providers,
)

if TYPE_CHECKING:
    from agenthost.agent.transcript import AgentEvent, Transcript
    from agenthost.auth.loopback import UrlOpener
    from agenthost.auth.store import TokenStore
    from agenthost.host.sampling import SamplingEvent, SamplingService
    from agenthost_providers.base import Message

__all__ = ["EventSink", "Host", "open_host"]

log = logging.getLogger("agenthost.host")

#: Where the host's own events go (for a UI): today only sampling's, one
#: :class:`~agenthost.host.sampling.SamplingEvent` per stage of a ``sampling/createMessage``.
EventSink = Callable[["SamplingEvent"], None]


class Host:
    """The running host. Get one from :func:`open_host`.

    Every action the host takes for someone goes through :attr:`policy`: tool calls,
    prompts, resource reads, the roots a server sees, sampling and elicitation.
    """

    def __init__(
        self,
        config: HostConfig,
        nursery: trio.Nursery,
        *,
        policy: PolicyEngine,
        providers: Mapping[str, Provider],
        providers_config: ProvidersConfig,
        env: Mapping[str, str],
        on_event: EventSink | None = None,
        sampling_route: SamplingRoute | None = None,
        roots_filter: RootsFilter | None = None,
    ) -> None:
        self.config = config
        self.catalog = Catalog()
        self.policy = policy
        self.providers = providers
        self.providers_config = providers_config
        self.env = env
        self._on_event = on_event
        self._sampling: SamplingService | None = None
        self._nursery = nursery
        self._servers = {s.name: s for s in config.servers if s.enabled}
        self.roots = RootsRegistry(
            config.workspaces, {name: s.workspaces for name, s in self._servers.items()}
        )
        self._tool_router = ToolRouter()
        #: Writes the counts of folded audit lines while the host runs.
        self._audit_flusher = trio.CancelScope()
        refresher = CatalogRefresher(
            self.catalog, self._servers, nursery, lambda name: self._supervisors[name].session
        )
        self._decided = DecidedCalls()
        asks = ServerAsks(
            decided=self._decided,
            policy=policy,
            roots=self.roots,
            providers=providers,
            sampling=lambda: self.sampling,
            refresher=refresher,
            sampling_route=sampling_route,
            roots_filter=roots_filter,
        )
        reads = files_read(config.servers, config.source)
        self._supervisors: dict[str, Supervisor] = {
            name: Supervisor(
                server,
                handlers=asks.for_server(server),
                on_ready=refresher.on_ready,
                on_state=refresher.on_state,
                refused=self_start_refusal(server, listed_in(server, config.source), reads),
            )
            for name, server in self._servers.items()
        }

    # ------------------------------------------------------------------ wiring

    @property
    def sampling(self) -> SamplingService:
        """The sampling service (built on first use: a host whose servers never sample
        does not pay for model selection)."""
        if self._sampling is None:
            from agenthost.host.sampling import SamplingService

            self._sampling = SamplingService(
                providers=self.providers,
                available=available_models(self.providers_config, self.env),
                engine=self.policy,
                default=default_choice(self.providers_config, self.env),
                on_event=self._emit,
            )
        return self._sampling

    def _emit(self, event: SamplingEvent) -> None:
        if self._on_event is not None:
            self._on_event(event)

    # ------------------------------------------------------------------ status

    def status(self) -> list[ServerStatus]:
        """Per-server state, negotiated revision, last error and restart count."""
        return [sup.status() for sup in self._supervisors.values()]

    def supervisor(self, server: str) -> Supervisor:
        try:
            return self._supervisors[server]
        except KeyError:
            known = ", ".join(self._supervisors) or "none"
            raise NotFound(f"no server named {server!r} (configured: {known})") from None

    def session(self, server: str) -> ClientSession:
        """The live session of ``server``.

        Raises:
            NotFound: no such server. ServerUnavailable: it is not ready right now.
        """
        return self.supervisor(server).require_session()

    async def wait_ready(self, server: str, *, timeout: float = 30.0) -> None:
        """Wait until ``server`` is ready (after a restart, say); raise if it failed."""
        sup = self.supervisor(server)
        with trio.fail_after(timeout):
            state = await sup.wait_usable()
        if state is not ServerState.READY:
            raise ServerUnavailable(f"server failed: {sup.last_error}", server=server)

    # ------------------------------------------------------------------ tools

    async def list_tools(self) -> list[CatalogTool]:
        """Every ready server's tools, namespaced ``server__tool``."""
        return self.catalog.tools()

    def tools(self) -> list[CatalogTool]:
        """Every tool of every ready server, as the model would see it (the catalog's)."""
        return self.catalog.tools()

    def resolve_tool(self, name: str) -> CatalogTool:
        entry = self.catalog.tool(name)
        if entry is None:
            import difflib

            known = [t.name for t in self.catalog.tools()]
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise NotFound(f"no tool named {name!r}{hint}")
        return entry

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: Timeout = DEFAULT,
        progress: ProgressCallback | None = None,
        on_task: TaskCreatedCallback | None = None,
        task: bool | None = None,
    ) -> CallToolResult:
        """Call a namespaced tool on the server that owns it, with consent.

        Every call passes the policy (kind ``tool``), which sees the tool's annotations
        (trusted only when the server is) and the full arguments; the outcome is audited.
        A tool that must run as a task does; ``on_task`` is told when the server has
        created it (the call still returns the task's result).

        ``task``: ``None`` (the default) runs the call as a task when it must be one (the
        tool requires it) or when the server's ``timeouts.task_after`` says so; ``True``
        whenever the server allows; ``False`` never. The task's form follows the server:
        the 2026-07-28 tasks extension when it offers it, else 2025-11-25's. Either way the
        consent and the audit line are those of a plain call, and every status change
        reaches ``progress``.

        ``timeout``: seconds; ``None`` for no limit; :data:`~agenthost._util.DEFAULT` for
        the server's ``timeouts.request`` (a task: ``timeouts.task``, else
        ``timeouts.request``; never the server's ttl). A task at its limit is cancelled.

        Raises:
            NotFound: no such tool. ServerUnavailable: its server is not ready.
            ConsentDenied: the policy or the user said no.
            Errors of :meth:`ClientSession.call_tool`.
        """
        entry = self.resolve_tool(name)
        session = self.session(entry.server)
        config = self._servers[entry.server]
        tool = entry.tool
        detached: TaskDetached | None = None
        async with self.policy.guard(tool_call_action(entry, config, arguments)) as outcome:
            # Same consent, same audit line: a repeat after an era switch is this one call.
            try:
                result = await with_era_fallback(
                    self.supervisor(entry.server),
                    session,
                    f"tool {tool.name}",
                    lambda on: self._tool_router.call(
                        entry,
                        on,
                        config,
                        arguments,
                        timeout=timeout,
                        progress=progress,
                        task=task,
                        on_task=on_task,
                    ),
                    repeatable=repeatable(tool),
                )
            except TaskDetached as exc:  # on_task left the task running: not a failure
                detached = exc
                outcome.result = {"detached_task": exc.task_id}
            else:
                outcome.result = {"is_error": bool(result.is_error), "blocks": len(result.content)}
        if detached is not None:
            raise detached
        return result

    async def call_tool_decided(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        audit: Mapping[str, Any] | None = None,
        timeout: Timeout = DEFAULT,
    ) -> CallToolResult:
        """Call a namespaced tool whose consent was decided, and audited, elsewhere.

        A durable run (:mod:`agenthost.durable`) decides each call in its workflow, with
        the policy snapshot of its submission, possibly hours before a worker runs it:
        this host's own policy is not asked again. ``meta`` goes to the server in the
        request's ``_meta`` (the run's idempotency key). The call is never made a task, so
        that the key reaches the server and the call is the activity's to retry.
        ``audit`` (the run's ``run_id`` and ``call_id``) goes into the audit lines of what
        the server asks during the call (sampling, elicitation, roots: ``via.during``,
        :class:`~agenthost.host.handlers.DecidedCalls`), which this host answers.

        Raises:
            NotFound, ServerUnavailable, and the errors of :meth:`ClientSession.call_tool`.
        """
        entry = self.resolve_tool(name)
        config = self._servers[entry.server]
        session = self.session(entry.server)
        running = (
            self._decided.running(entry.server, entry.tool.name, audit)
            if audit
            else contextlib.nullcontext()
        )
        with running:
            return await with_era_fallback(
                self.supervisor(entry.server),
                session,
                f"tool {entry.tool.name}",
                lambda on: self._tool_router.call(
                    entry,
                    on,
                    config,
                    arguments,
                    timeout=timeout,
                    progress=None,
                    task=False,
                    meta=meta,
                ),
                repeatable=repeatable(entry.tool),
            )

    def always_denied(self, entry: CatalogTool) -> str | None:
        """Why the policy denies every call of ``entry``, or None (see
        :meth:`PolicyEngine.always_denies`); such tools are not offered to a model."""
        return self.policy.always_denies(
            ToolCall(
                server=entry.server,
                tool=entry.tool.name,
                listed=entry.name,
                arguments={},
                annotations=annotation_hints(entry.tool.annotations),
                trusted=self._servers[entry.server].trusted,
            )
        )

    # ------------------------------------------------------------------ prompts, resources

    async def list_prompts(self) -> list[tuple[str, Prompt]]:
        return self.catalog.prompts()

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> GetPromptResult:
        """Fetch a user-picked prompt, with consent (kind ``prompt``)."""
        sup = self.supervisor(server)
        return await reads.get_prompt(self.policy, sup, self._servers[server], name, arguments)

    async def list_resources(self) -> list[tuple[str, Resource]]:
        return self.catalog.resources()

    async def list_resource_templates(self) -> list[tuple[str, ResourceTemplate]]:
        return self.catalog.templates()

    async def read_resource(self, uri: str, *, server: str | None = None) -> ReadResourceResult:
        """Read ``uri`` from ``server``, or from the server that serves it.

        Without ``server`` the read goes to the server that listed ``uri``, else to the
        one whose resource template has the longest literal prefix of it (at least
        ``scheme://``): see :meth:`Catalog.resource_owners`.

        Raises:
            NotFound: no server lists or templates ``uri``.
            AmbiguousResource: several servers could serve it equally well; nothing was
                sent to any of them.
        """
        owner = server if server is not None else reads.resource_owner(self.catalog, uri)
        sup = self.supervisor(owner)
        return await reads.read_resource(self.policy, sup, self._servers[owner], uri)

    # ------------------------------------------------------------------ skills

    async def list_skills(self, server: str | None = None) -> list[tuple[str, SkillEntry]]:
        """Every skill of every ready server that offers the skills extension (or of one).

        Listing reads names and descriptions only: no skill content is fetched here
        (SEP-2640: never ahead of need). A server whose listing fails is logged and left
        out, so one broken server does not hide the others' skills.
        """
        if server is not None:
            return await reads.list_server_skills([self.supervisor(server)], named=True)
        return await reads.list_server_skills(list(self._supervisors.values()), named=False)

    async def load_skill(self, server: str, name: str) -> LoadedSkill:
        """Load one skill for use, with consent (kind ``skill``), verified against its listing.

        Raises:
            NotFound: no such skill. ConsentDenied: the policy or the user said no.
            SkillVerificationError: the content is not what the server listed.
        """
        entries = [entry for _, entry in await self.list_skills(server) if entry.name == name]
        if not entries:
            raise NotFound(f"server {server!r} has no skill {name!r}")
        sup = self.supervisor(server)
        return await reads.load_listed_skill(self.policy, sup, self._servers[server], entries[0])

    # ------------------------------------------------------------------ agent

    async def run_agent(
        self,
        task: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        prompt_messages: Sequence[Message] = (),
        max_turns: int = 20,
        max_tokens: int = 4096,
        token_budget: int | None = None,
        transcript: Transcript | None = None,
        on_event: Callable[[AgentEvent], None] | None = None,
        stream: bool = False,
        task_grace: float | None = DEFAULT_TASK_GRACE,
    ) -> Transcript:
        """Run the agent loop over this host's tools (:func:`agenthost.agent.run_agent`).

        The host picks the LLM, not the agent: ``provider`` and ``model`` default to the
        configured default (``[providers] default``, else the first configured provider),
        and the agent is handed the provider itself, so it needs no configuration.
        The other arguments are the agent's, passed on.

        Raises:
            ConfigError: no provider is configured, or ``provider`` is not one of them.
        """
        name, model = models.agent_model(
            self.providers_config, self.env, self.providers, provider, model
        )
        settings = self.config.agent
        return await run_agent(
            self,
            task,
            provider=self.providers[name],
            model=model,
            system_prompt=system_prompt,
            prompt_messages=prompt_messages,
            max_turns=max_turns,
            max_tokens=max_tokens,
            token_budget=token_budget,
            transcript=transcript,
            on_event=on_event,
            stream=stream,
            task_grace=task_grace,
            model_info=self.model_info(name, model),
            tool_search=settings.tool_search,
            max_result_tokens=settings.max_result_tokens,
        )

    def model_info(self, provider: str, model: str) -> ModelInfo | None:
        """The catalog entry (with config overrides) of ``model`` on ``provider``, by id or
        alias; None when neither knows it (its cost is then unknown, not zero)."""
        return models.model_info(self.providers_config, self.env, provider, model)

    # ------------------------------------------------------------------ roots

    def roots_for(self, server: str) -> list[Root]:
        return self.roots.roots_for(server)

    async def add_workspace(
        self,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        servers: Iterable[str] | None = None,
    ) -> Workspace:
        """Expose a directory as a root, and tell exactly the servers that now see it.

        Raises:
            ConfigError: the path does not exist or is not a directory.
            ValueError: the name or path is already a workspace.
        """
        workspace = Workspace.from_path(path, name=name)
        changed = self.roots.add(workspace, servers)
        await self._announce_roots(changed)
        return workspace

    async def remove_workspace(self, name: str) -> None:
        """Stop exposing a workspace; the servers that saw it are told."""
        try:
            changed = self.roots.remove(name)
        except KeyError:
            raise NotFound(f"no workspace named {name!r}") from None
        await self._announce_roots(changed)

    async def roots_changed(self) -> None:
        """Tell every running server its roots may have changed (a :data:`RootsFilter`'s
        answer did): each lists them again."""
        await self._announce_roots(self._supervisors)

    async def _announce_roots(self, servers: Iterable[str]) -> None:
        for server in sorted(servers):
            sup = self._supervisors.get(server)
            session = sup.session if sup is not None else None
            if session is None or session.closed:
                continue  # it will list roots afresh when it (re)starts
            try:
                await session.notify_roots_list_changed()
            except AgentHostError as exc:
                log.warning("%s: could not announce roots change: %s", server, exc)

    # ------------------------------------------------------------------ lifecycle

    async def _start(self) -> None:
        self._nursery.start_soon(self._flush_audit)
        for sup in self._supervisors.values():
            self._nursery.start_soon(sup.run)
        limit = max((sup.attempt_limit for sup in self._supervisors.values()), default=0.0)
        with trio.move_on_after(limit + 1.0 if math.isfinite(limit) else math.inf):
            async with trio.open_nursery() as waiters:
                for sup in self._supervisors.values():
                    waiters.start_soon(sup.wait_first_attempt)
        for name, sup in self._supervisors.items():
            if self._servers[name].required and sup.state is not ServerState.READY:
                raise ServerUnavailable(
                    f"required server did not start: {sup.last_error or sup.state.value}",
                    server=name,
                )

    def _stop(self) -> None:
        self._audit_flusher.cancel()
        for sup in self._supervisors.values():
            sup.stop()

    async def _flush_audit(self) -> None:
        with self._audit_flusher:
            await self.policy.run_audit_flusher()


@asynccontextmanager
async def open_host(
    config: HostConfig,
    *,
    policy: PolicyEngine | None = None,
    prompter: Prompter | None = None,
    providers: Mapping[str, Provider] | None = None,
    env: Mapping[str, str] | None = None,
    on_event: EventSink | None = None,
    token_store: TokenStore | None = None,
    url_opener: UrlOpener | None = None,
    sampling_route: SamplingRoute | None = None,
    roots_filter: RootsFilter | None = None,
) -> AsyncIterator[Host]:
    """Start every enabled server of ``config`` concurrently; yield the running host.

    Returns once each server is ready or has failed its first start (in about the time
    of the slowest, not the sum).

    Args:
        config: the host configuration.
        policy: a ready policy engine; default: built from ``config.policy`` (audit file
            included), with ``prompter`` for its "ask" answers.
        providers: live LLM providers by name; default: built from ``config.providers``
            and ``env`` (and closed on exit).
        env: where API keys are read (default ``os.environ``).
        on_event: called with the host's events (sampling selections, ...) for a UI.
        token_store: where the servers' OAuth logins are kept (default: the OS keyring,
            else files); see :func:`agenthost.connect`.
        url_opener: ``async (server, url)`` showing a person a login URL; default: the
            context's :data:`agenthost.auth.URL_OPENER` (unset: headless).
        sampling_route: where sampling requests go instead of the providers (see
            :data:`SamplingRoute`); with one, sampling is declared to every server.
        roots_filter: narrows every server's roots (see :data:`RootsFilter`).

    Raises:
        ConfigError: the ``[policy]`` or ``[providers]`` section is invalid.
        ServerUnavailable: a server marked ``required`` did not start.
    """
    environ = os.environ if env is None else env
    providers_config, engine = read_sections(config, policy=policy, prompter=prompter)
    try:
        async with AsyncExitStack() as stack:
            if token_store is not None or url_opener is not None:
                from agenthost.auth.store import auth_context

                # Before any server starts: their tasks inherit it.
                stack.enter_context(auth_context(token_store, url_opener))
            live = providers
            if live is None:
                live = await stack.enter_async_context(open_providers(providers_config, environ))
            with collapse_single_group():
                async with trio.open_nursery() as nursery:
                    host = Host(
                        config,
                        nursery,
                        policy=engine,
                        providers=live,
                        providers_config=providers_config,
                        env=environ,
                        on_event=on_event,
                        sampling_route=sampling_route,
                        roots_filter=roots_filter,
                    )
                    try:
                        await host._start()
                        yield host
                    finally:
                        host._stop()
    finally:
        if policy is None:
            engine.close()
