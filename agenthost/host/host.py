"""The host: many servers, each in its own supervised session, behind one API.

``open_host(config)`` starts every configured server concurrently, waits until each is
ready or has failed (bounded by its startup timeout), and yields a :class:`Host`. One
server failing never stops the others unless the config marks it ``required``.

Resource handling: every server process and remote session is closed when the block
exits, normally, by exception or by cancellation (the stdio shutdown is shielded).
"""

from __future__ import annotations

import logging
import math
import os
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import trio

from agenthost._util import DEFAULT, Timeout, collapse_single_group
from agenthost.agent.loop import DEFAULT_SYSTEM_PROMPT, DEFAULT_TASK_GRACE, run_agent
from agenthost.ask_tasks import AskTaskLimits
from agenthost.asks import ClientHandlers, RequestContext
from agenthost.config.model import PROXY_ENV_VARS, HostConfig, ServerConfig, Workspace
from agenthost.errors import (
    AgentHostError,
    AmbiguousResource,
    BackChannelRequired,
    ConfigError,
    JSONRPCError,
    NotFound,
    ServerUnavailable,
    TransportClosed,
    server_data,
)
from agenthost.host.catalog import (
    SEPARATOR,
    Catalog,
    CatalogTool,
    annotation_hints,
    tool_prefix,
)
from agenthost.host.roots import RootsRegistry
from agenthost.host.supervisor import ServerState, ServerStatus, Supervisor
from agenthost.protocol.types import (
    CallToolResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    GetPromptResult,
    ListRootsResult,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Root,
    Tool,
)
from agenthost.session import ClientSession, ProgressCallback
from agenthost.skills import LoadedSkill, SkillEntry, list_skills, load_skill, offers_skills
from agenthost.tool_tasks import (
    TaskCreatedCallback,
    TaskDetached,
    call_tool_as_task,
    call_tool_via_extension,
    needs_tasks_extension,
    offers_tasks_extension,
    wants_task,
)
from policies import (
    Elicitation,
    PolicyEngine,
    PromptGet,
    ResourceRead,
    RootsExposure,
    Rule,
    SkillLoad,
    ToolCall,
    ToolDefinition,
    parse_policy,
    unmatchable,
)
from policies.prompters import Prompter
from providers.base import ModelInfo, Provider
from providers.config import (
    ProvidersConfig,
    available_models,
    default_choice,
    open_providers,
    parse_providers,
)

if TYPE_CHECKING:
    from agenthost.agent.transcript import AgentEvent, Transcript
    from agenthost.auth.loopback import UrlOpener
    from agenthost.auth.store import TokenStore
    from agenthost.host.sampling import SamplingEvent, SamplingService
    from providers.base import Message

__all__ = ["EventSink", "Host", "RootsFilter", "SamplingRoute", "open_host"]

R = TypeVar("R")

log = logging.getLogger("agenthost.host")

#: (server, tool) pairs remembered as "run as a task" (a bound: tool names are server text).
_MAX_TASK_TOOLS = 4096

_LIST_CHANGED = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}


#: Where an upstream's sampling request goes instead of the providers: given the server's
#: name, an ``async (params) -> result`` that hands it on (``agenthost serve`` forwards to
#: its downstream client), or None to answer it with the providers.
SamplingRoute = Callable[
    [str],
    Callable[[CreateMessageRequestParams], Awaitable[CreateMessageResult]] | None,
]

#: Narrows the roots a server is offered: ``async (server, the workspaces' roots) ->
#: roots`` (``agenthost serve`` keeps what its downstream client's roots also cover).
RootsFilter = Callable[[str, list[Root]], Awaitable[list[Root]]]

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
        self._sampling_route = sampling_route
        self._roots_filter = roots_filter
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
        self._refresh_locks: dict[str, trio.Lock] = {}
        #: (server, kind) with a refresh queued that has not started listing yet.
        self._refresh_due: set[tuple[str, str]] = set()
        #: (server, tool) that run as tasks from now on: a call took ``task_after`` or
        #: longer, or a 2026-07-28 server refused it undeclared (bounded, oldest first out).
        self._task_tools: dict[tuple[str, str], None] = {}
        #: Writes the counts of folded audit lines while the host runs.
        self._audit_flusher = trio.CancelScope()
        self._supervisors: dict[str, Supervisor] = {
            name: Supervisor(
                server,
                handlers=self._handlers_for(server),
                on_ready=self._on_ready,
                on_state=self._on_state,
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

    def _handlers_for(self, server: ServerConfig) -> ClientHandlers:
        """What the host does for ``server``: roots, sampling, elicitation, all via policy.

        Sampling is declared only when a provider is configured: a server should not be
        told it may ask for something that can only fail.
        """

        async def roots(ctx: RequestContext, params: Mapping[str, Any]) -> ListRootsResult:
            # Re-resolved at every listing: a workspace whose path changed since it was
            # configured (replaced by a symlink to /etc, say) is withheld and audited.
            offered = self.roots.roots_for(server.name)
            if self._roots_filter is not None:
                offered = await self._roots_filter(server.name, offered)
            withheld = [
                {"workspace": w.name, "problem": problem}
                for w, problem in self.roots.withheld_for(server.name)
            ]
            for item in withheld:
                log.warning(
                    "%s: root %s withheld: %s", server.name, item["workspace"], item["problem"]
                )
            action = RootsExposure(
                server=server.name,
                roots=tuple(r.uri for r in offered),
                trusted=server.trusted,
                via=ctx.via(),
            )
            decision = await self.policy.check(action)
            if not decision.allowed:
                log.info("%s: roots withheld: %s", server.name, decision.reason)
                return ListRootsResult(roots=[])
            shown: Any = [r.uri for r in offered]
            if withheld:
                shown = {"roots": shown, "withheld": withheld}
            await self.policy.record_outcome(decision.id, result=shown)
            return ListRootsResult(roots=offered)

        async def sampling(
            ctx: RequestContext, params: CreateMessageRequestParams
        ) -> CreateMessageResult:
            return await self._sample(server, ctx, params)

        async def elicitation(ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
            response = await self.policy.elicit(
                Elicitation(
                    server=server.name,
                    message=params.message,
                    mode=params.mode or ("url" if params.url else "form"),
                    requested_schema=params.requested_schema,
                    url=params.url,
                    elicitation_id=params.elicitation_id,
                    trusted=server.trusted,
                    via=ctx.via(),
                )
            )
            return ElicitResult(
                action=response.action,
                content=dict(response.content) if response.content is not None else None,
            )

        async def list_changed(ctx: RequestContext, params: Mapping[str, Any]) -> None:
            # Refresh in the host's nursery: the session's dispatcher must not wait on a
            # request to the same session. One pending refresh per server and kind: the
            # notifications that arrive before it starts listing fold into it (issue 14:
            # 100k list_changed were 100k tasks).
            # The server's current session (a context names the server, not the session).
            kind = _LIST_CHANGED[ctx.method]
            session = self._supervisors[server.name].session
            if session is not None and (server.name, kind) not in self._refresh_due:
                self._refresh_due.add((server.name, kind))
                self._nursery.start_soon(self._refresh, session, kind)

        return ClientHandlers(
            roots=roots,
            sampling=sampling if self.providers or self._sampling_route else None,
            sampling_tools=bool(self.providers),
            elicitation=elicitation,
            ask_tasks=AskTaskLimits() if server.client_tasks else None,
            notifications=dict.fromkeys(_LIST_CHANGED, list_changed),
        )

    async def _sample(
        self, server: ServerConfig, ctx: RequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        """One sampling request: where the :data:`SamplingRoute` sends it, else the providers."""
        send = self._sampling_route(server.name) if self._sampling_route else None
        if send is not None:
            return await self.sampling.forward(
                server.name,
                params,
                send=send,
                reason="forwarded to the client agenthost serves",
                trusted=server.trusted,
                via=ctx.via(),
            )
        if not self.providers:
            raise JSONRPCError(
                -32603, "No model available: no LLM provider is configured in agenthost"
            )
        return await self.sampling.create_message(
            server.name, params, revision=ctx.revision, trusted=server.trusted, via=ctx.via()
        )

    def _on_state(self, supervisor: Supervisor) -> None:
        # A server that is gone for good offers nothing: its tools leave the catalog (a
        # restarting one keeps its entries; calls fail fast until it is back).
        if supervisor.state in (ServerState.FAILED, ServerState.STOPPED):
            self.catalog.remove(supervisor.name)

    async def _on_ready(self, session: ClientSession) -> None:
        await self._refresh(session, "tools", "prompts", "resources")

    async def _refresh(self, session: ClientSession, *what: str) -> None:
        """Re-list what changed for one server and update the catalog.

        A server that fails a list (or lacks the capability) contributes nothing for it;
        that is logged, and never stops the server from being used.
        """
        lock = self._refresh_locks.setdefault(session.name, trio.Lock())
        async with lock:
            self._refresh_due.difference_update((session.name, kind) for kind in what)
            caps = session.server_capabilities
            current = self.catalog.entries(session.name)
            updates: dict[str, Any] = {}
            config = self._servers[session.name]
            try:
                if "tools" in what and caps is not None and caps.tools is not None:
                    tools = await session.list_tools()
                    updates["tools"] = tuple(t for t in tools if config.tool_allowed(t.name))
                if "prompts" in what and caps is not None and caps.prompts is not None:
                    updates["prompts"] = tuple(await session.list_prompts())
                if "resources" in what and caps is not None and caps.resources is not None:
                    updates["resources"] = tuple(await session.list_resources())
                    updates["templates"] = tuple(await session.list_resource_templates())
            except JSONRPCError as exc:
                log.warning("%s: listing failed: %s", session.name, exc)
            except AgentHostError as exc:
                log.debug("%s: refresh abandoned: %s", session.name, exc)
                return
            self.catalog.update(session.name, attrs.evolve(current, **updates))

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
        hints = annotation_hints(tool.annotations)
        action = ToolCall(
            server=entry.server,
            tool=tool.name,
            listed=entry.name,
            arguments=dict(arguments or {}),
            annotations=hints,
            trusted=config.trusted,
            # A remembered "always" holds only while all of this is what the user saw.
            definition=ToolDefinition(
                name=tool.name,
                title=tool.title,
                description=tool.description,
                input_schema=tool.input_schema,
                output_schema=tool.output_schema,
                annotations=_with_title(hints, tool.annotations),
                server=_origin(config),
                cwd=_run_dir(config),
                env=_run_env(config),
                scope=config.scope,
            ),
        )
        detached: TaskDetached | None = None
        async with self.policy.guard(action) as outcome:
            # Same consent, same audit line: a repeat after an era switch is this one call.
            try:
                result = await self._with_era_fallback(
                    entry.server,
                    session,
                    f"tool {tool.name}",
                    lambda on: self._route_call(
                        entry,
                        on,
                        config,
                        arguments,
                        timeout=timeout,
                        progress=progress,
                        task=task,
                        on_task=on_task,
                    ),
                    repeatable=_repeatable(tool),
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
        timeout: Timeout = DEFAULT,
    ) -> CallToolResult:
        """Call a namespaced tool whose consent was decided, and audited, elsewhere.

        A durable run (:mod:`agenthost.durable`) decides each call in its workflow, with
        the policy snapshot of its submission, possibly hours before a worker runs it:
        this host's own policy is not asked again. ``meta`` goes to the server in the
        request's ``_meta`` (the run's idempotency key). The call is never made a task, so
        that the key reaches the server and the call is the activity's to retry.

        Raises:
            NotFound, ServerUnavailable, and the errors of :meth:`ClientSession.call_tool`.
        """
        entry = self.resolve_tool(name)
        config = self._servers[entry.server]
        return await self._with_era_fallback(
            entry.server,
            self.session(entry.server),
            f"tool {entry.tool.name}",
            lambda on: self._route_call(
                entry, on, config, arguments, timeout=timeout, progress=None, task=False, meta=meta
            ),
            repeatable=_repeatable(entry.tool),
        )

    async def _with_era_fallback(
        self,
        server: str,
        session: ClientSession,
        what: str,
        call: Callable[[ClientSession], Awaitable[R]],
        *,
        repeatable: bool,
    ) -> R:
        """``call(session)``; after a "no back-channel" failure, the server is reconnected
        in the initialize era (:meth:`Supervisor.fall_back_to_legacy`) and the call made
        again on the new session when that is safe.

        The safety rule: the SDK refuses the back-channel request *while the tool runs*,
        so whatever the tool did before it asked has been done. The call is repeated only
        when doing it again cannot add an effect: a tool the server declares
        ``readOnlyHint`` or ``idempotentHint`` (``repeatable``), or a ``prompts/get`` /
        ``resources/read`` (retrievals by the spec). Trusting the server's hints is sound
        here whether or not the server is trusted: a server that lies about them can only
        repeat its own effect, which it could do within one call anyway. Any other call
        is not repeated: the error says the server was switched and to call again. A call
        that was still running on the old session when another call's failure switched
        it is cut off with that session, and follows the same rule.

        Whatever handling the server's answer raises is that server's error, about
        ``what`` (:func:`~agenthost.errors.server_data`).

        Raises:
            BackChannelRequired: no fallback applies, or the call must not be repeated.
            ServerUnavailable: the server did not come back, or a cut-off call must not
                be repeated.
        """
        try:
            with server_data(server, what):
                return await call(session)
        except BackChannelRequired as exc:
            error: BackChannelRequired | None = exc
            sup = self.supervisor(server)
            new = await sup.fall_back_to_legacy(session, exc)
        except TransportClosed:
            sup = self.supervisor(server)
            if not sup.left_for_legacy(session):
                raise
            error = None
            new = await sup.replacement(session)
        if repeatable:
            with server_data(server, what):
                return await call(new)
        if error is None:
            raise ServerUnavailable(
                "the call was cut off: the server was reconnected in the initialize era"
                " while it ran (another call needed that era); it was not repeated because"
                " the tool is not declared read-only or idempotent: call it again",
                server=server,
            )
        what = f"{error.request} {error.name!r}" if error.name else error.request
        raise BackChannelRequired(
            error.code,
            f"{what} did not complete: the server's code sent {error.ask} as its own request,"
            " which MCP 2026-07-28 does not carry, so agenthost reconnected the server in the"
            " initialize era; the call was not repeated because the tool is not declared"
            " read-only or idempotent and may have acted before it asked: call it again"
            ' (protocol = "legacy" for this server avoids this)',
            error.data,
            server=server,
            ask=error.ask,
            request=error.request,
            name=error.name,
        )

    async def _route_call(
        self,
        entry: CatalogTool,
        session: ClientSession,
        config: ServerConfig,
        arguments: Mapping[str, Any] | None,
        *,
        timeout: Timeout,
        progress: ProgressCallback | None,
        task: bool | None,
        on_task: TaskCreatedCallback | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> CallToolResult:
        """One call, as a task or not (see :meth:`call_tool`); the policy already agreed.
        ``meta`` is sent on a plain call only."""
        name = entry.tool.name
        key = (entry.server, name)
        task_after = config.timeouts.task_after
        # The caller's limit wins; else timeouts.task; else (session default) request.
        task_limit: Timeout = timeout
        if timeout is DEFAULT and config.timeouts.task is not None:
            task_limit = None if math.isinf(config.timeouts.task) else config.timeouts.task
        chosen = task is True or (task is None and (task_after <= 0 or key in self._task_tools))
        if task is not False and offers_tasks_extension(session):
            # 2026-07-28: the server decides; declaring the extension lets it.
            if chosen:
                return await call_tool_via_extension(
                    session,
                    name,
                    arguments,
                    progress=progress,
                    timeout=task_limit,
                    on_created=on_task,
                )
        elif task is not False and wants_task(
            entry.tool, session.server_capabilities, optional=chosen
        ):
            # 2025-11-25: a tool whose taskSupport is "required", or "optional" by choice.
            return await call_tool_as_task(
                session, name, arguments, progress=progress, timeout=task_limit, on_created=on_task
            )
        started = trio.current_time()
        try:
            if timeout is DEFAULT:
                return await session.call_tool(name, arguments, progress=progress, meta=meta)
            return await session.call_tool(
                name, arguments, progress=progress, timeout=timeout, meta=meta
            )
        except JSONRPCError as exc:
            if task is False or not needs_tasks_extension(exc):
                raise
            if not offers_tasks_extension(session):
                raise  # a legacy session cannot declare it: the server's words stand
            # A 2026-07-28 tool that runs only as a task refused the undeclared call
            # before running it: declare the extension, now and for its later calls.
            self._remember_task_tool(key)
            return await call_tool_via_extension(
                session, name, arguments, progress=progress, timeout=task_limit, on_created=on_task
            )
        finally:
            if task is None and trio.current_time() - started >= task_after:
                self._remember_task_tool(key)

    def _remember_task_tool(self, key: tuple[str, str]) -> None:
        self._task_tools[key] = None
        if len(self._task_tools) > _MAX_TASK_TOOLS:
            del self._task_tools[next(iter(self._task_tools))]

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
        session = self.session(server)
        action = PromptGet(
            server=server,
            prompt=name,
            arguments=dict(arguments or {}),
            trusted=self._servers[server].trusted,
        )
        async with self.policy.guard(action) as outcome:
            result = await self._with_era_fallback(
                server,
                session,
                f"prompt {name}",
                lambda on: on.get_prompt(name, arguments),
                repeatable=True,
            )
            outcome.result = {"messages": len(result.messages)}
        return result

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
        owner = server
        if owner is None:
            owners = self.catalog.resource_owners(uri)
            if len(owners) > 1:
                raise AmbiguousResource(
                    f"several servers could serve resource {uri!r} ({', '.join(owners)});"
                    " name one with --server",
                    uri=uri,
                    servers=owners,
                )
            if not owners:
                raise NotFound(f"no server lists resource {uri!r}; name the server")
            owner = owners[0]
        session = self.session(owner)
        action = ResourceRead(server=owner, uri=uri, trusted=self._servers[owner].trusted)
        async with self.policy.guard(action) as outcome:
            result = await self._with_era_fallback(
                owner, session, "resources/read", lambda on: on.read_resource(uri), repeatable=True
            )
            outcome.result = {"contents": len(result.contents)}
        return result

    # ------------------------------------------------------------------ skills

    async def list_skills(self, server: str | None = None) -> list[tuple[str, SkillEntry]]:
        """Every skill of every ready server that offers the skills extension (or of one).

        Listing reads names and descriptions only: no skill content is fetched here
        (SEP-2640: never ahead of need). A server whose listing fails is logged and left
        out, so one broken server does not hide the others' skills.
        """
        names = [server] if server is not None else [s.name for s in self.status()]
        found: list[tuple[str, SkillEntry]] = []
        for name in names:
            sup = self.supervisor(name)
            if server is None and sup.state is not ServerState.READY:
                continue
            session = self.session(name)
            if not offers_skills(session.server_capabilities):
                if server is not None:
                    raise NotFound(f"server {name!r} does not offer skills")
                continue
            try:
                with server_data(name, "skills/list"):
                    found.extend((name, entry) for entry in await list_skills(session))
            except AgentHostError as exc:
                if server is not None:
                    raise
                log.warning("%s: cannot list skills: %s", name, exc)
        return found

    async def load_skill(self, server: str, name: str) -> LoadedSkill:
        """Load one skill for use, with consent (kind ``skill``), verified against its listing.

        Raises:
            NotFound: no such skill. ConsentDenied: the policy or the user said no.
            SkillVerificationError: the content is not what the server listed.
        """
        entries = [entry for _, entry in await self.list_skills(server) if entry.name == name]
        if not entries:
            raise NotFound(f"server {server!r} has no skill {name!r}")
        entry = entries[0]
        session = self.session(server)
        action = SkillLoad(
            server=server,
            skill=entry.name,
            uri=entry.uri,
            description=entry.description,
            trusted=self._servers[server].trusted,
        )
        async with self.policy.guard(action) as outcome:
            with server_data(server, f"skill {entry.name}"):
                loaded = await load_skill(session, entry)
            outcome.result = {"bytes": len(loaded.text)}
        return loaded

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
        name, model = self._agent_model(provider, model)
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
        for info in available_models(self.providers_config, self.env):
            if info.provider == provider and (info.id == model or model in info.aliases):
                return info
        return None

    def _agent_model(self, provider: str | None, model: str | None) -> tuple[str, str]:
        """The (provider name, model) a run uses: the caller's, else the configured default."""
        if provider is None or model is None:
            choice = default_choice(self.providers_config, self.env)
            if choice is None:
                raise ConfigError(
                    "no LLM provider is configured: set ANTHROPIC_API_KEY or OPENAI_API_KEY,"
                    " or add a [providers.<name>] section",
                    key="providers",
                )
            provider = provider or choice[0]
            model = model or choice[1]
        if provider not in self.providers:
            raise ConfigError(
                f"provider {provider!r} is not configured (have: {', '.join(self.providers)})",
                key="providers",
            )
        return provider, model

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


def _repeatable(tool: Tool) -> bool:
    """Whether calling ``tool`` twice adds nothing: the server says read-only or idempotent."""
    hints = tool.annotations
    return hints is not None and (hints.read_only_hint is True or hints.idempotent_hint is True)


def _with_title(hints: dict[str, Any] | None, annotations: Any) -> dict[str, Any] | None:
    title = getattr(annotations, "title", None)
    if title is None:
        return hints
    return {**(hints or {}), "title": title}


def _origin(config: ServerConfig) -> str:
    """How the server is reached, as part of a tool's definition: a remembered answer does
    not carry over to another program or site under the same server name. A URL's query
    and credentials are left out (they may hold secrets, and rotate)."""
    if config.url is not None:
        parts = urllib.parse.urlsplit(config.url)
        return f"{config.transport} {parts.scheme}://{parts.hostname}:{parts.port}{parts.path}"
    return " ".join([config.transport, config.command or "", *config.args])


def _run_dir(config: ServerConfig) -> str | None:
    """The directory a stdio server runs in, resolved (symlinks too): the host's own when
    the config names none, as the child inherits it. ``None`` for a remote server."""
    if config.transport != "stdio":
        return None
    return os.path.realpath(config.cwd or os.getcwd())


def _run_env(config: ServerConfig) -> dict[str, Any] | None:
    """What a stdio server's environment holds beyond the fixed allowlist: ``env`` (with
    ``env_file`` merged in by the loader) and the host's values of the variables
    ``inherit_env`` names, proxies aside (they change where traffic goes, not the
    program). The approvals file keeps only its digest. ``None`` for a remote server."""
    if config.transport != "stdio":
        return None
    inherited = {
        name: os.environ.get(name) for name in config.inherit_env if name not in PROXY_ENV_VARS
    }
    return {"env": dict(config.env), "inherited": inherited}


def _source(config: HostConfig) -> tuple[str, str | None]:
    if config.source is None:
        return "<config>", None
    return config.source, os.path.dirname(os.path.abspath(config.source))


def _warn_unmatchable(rules: Sequence[Rule], config: HostConfig) -> None:
    """One warning line per rule that can match nothing (it names the rule and its file).

    Why: such a rule is accepted and then never fires, and nothing else would say so.
    Every configured server counts, enabled or not: a rule for a disabled server is fine.
    """
    servers = {s.name: tool_prefix(s.name) + SEPARATOR for s in config.servers}
    for rule in rules:
        why = unmatchable(rule, servers)
        if why is not None:
            where = rule.source or _source(config)[0]
            log.warning("%s: policy rule %s can match nothing: %s", where, rule.label, why)


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
    source, base_dir = _source(config)
    providers_config = parse_providers(config.providers, source=source, base_dir=base_dir)
    engine = policy
    if engine is None:
        policy_config = parse_policy(config.policy, source=source, base_dir=base_dir)
        _warn_unmatchable(policy_config.rules, config)
        engine = PolicyEngine.from_config(policy_config, prompter=prompter)
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
