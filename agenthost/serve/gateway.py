"""The gateway: what each MCP method does when a downstream client asks agenthost.

Every answer comes from the :class:`~agenthost.host.Host` through its public API, so the
gateway is one more user of the host, exactly as the CLI is: ``tools/call`` is
``host.call_tool`` (the policy decides and the audit records, the era fallback and tasks
apply), ``prompts/get`` is ``host.get_prompt``, ``resources/read`` is
``host.read_resource``. The catalog is the host's, under the names of
:mod:`agenthost.serve.names`. A client that asks for a task (either form) gets the
gateway's task over the host's call (:mod:`agenthost.serve.tasks`).

Error mapping (the downstream client never sees a traceback):

* a denied tool call is a tool result with ``isError`` and the policy's reason (the model
  reads it and can adapt); a denied prompt or read is the JSON-RPC error -1 with the
  reason (as a denied sampling request is);
* an upstream's JSON-RPC error is passed on as it came (code, message, data);
* an upstream that is down, slow or gone: a tool error (``tools/call``) or -32603 naming
  the server and the reason;
* an unknown tool or prompt: -32602; an unknown resource: -32002 (``server/resources``).

``list_changed``: one task watches the host's catalog (:meth:`Catalog.wait_for`) and
tells every client whose list changed; the host itself re-lists an upstream on its own
``list_changed``, so a change upstream reaches the client in one hop.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, NoReturn, TypeVar

import attrs
import trio

from agenthost._version import __version__
from agenthost.errors import (
    AgentHostError,
    AmbiguousResource,
    ConsentDenied,
    JSONRPCError,
    NotFound,
    TaskCancelled,
)
from agenthost.host import SERVER_ASK, Host
from agenthost.host.catalog import CatalogTool
from agenthost.protocol import jsonrpc
from agenthost.protocol import methods as m
from agenthost.protocol.revisions import MODERN_REVISIONS, at_least
from agenthost.protocol.types import (
    CallToolRequestParams,
    CallToolResult,
    CompleteRequestParams,
    CompleteResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    GetPromptRequestParams,
    GetPromptResult,
    Implementation,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    PromptReference,
    PromptsCapability,
    ReadResourceRequestParams,
    ReadResourceResult,
    ResourcesCapability,
    Root,
    ServerCapabilities,
    SetLevelRequestParams,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    TextContent,
    Tool,
    ToolExecution,
    ToolsCapability,
    UnsubscribeRequestParams,
)
from agenthost.serve.downstream import (
    CURRENT,
    DownstreamSession,
    Handler,
    RawHandler,
    RequestInfo,
)
from agenthost.serve.modern import META_CLIENT_CAPABILITIES
from agenthost.serve.mrtr import Asker, ExchangeStore
from agenthost.serve.names import CatalogView, page
from agenthost.serve.roots import intersect_roots
from agenthost.serve.routing import (
    CallsInFlight,
    Fallback,
    asker_for,
    asks_ride_their_calls,
    nobody,
)
from agenthost.serve.subscriptions import Subscriber, Subscriptions
from agenthost.serve.tasks import EXTENSION, LEGACY, GatewayTasks, TaskRun
from agenthost.tool_tasks import TaskCreatedCallback, offers_tasks_extension, wants_task
from agenthost.transports.base import Transport

__all__ = ["CONSENT_DENIED", "RESOURCE_NOT_FOUND", "Gateway", "SamplingSender"]

log = logging.getLogger("agenthost.serve")

T = TypeVar("T")

#: The JSON-RPC code of a denied prompt or read (the code the spec gives a rejected
#: sampling request: "the user rejected").
CONSENT_DENIED: Final = -1
#: ``server/resources.mdx``: "Resource not found".
RESOURCE_NOT_FOUND: Final = -32002

#: Hands one upstream sampling request to the downstream client.
SamplingSender = Callable[[CreateMessageRequestParams], Awaitable[CreateMessageResult]]

#: RFC 5424 severities, least severe first (``server/utilities/logging``).
_LOG_LEVELS: Final = {
    name: rank
    for rank, name in enumerate(
        ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
    )
}
#: A 2026-07-28 request's log level (``server/utilities/logging``: per request).
_META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
#: ``subscriptions/listen`` streams open at once, all clients together.
_MAX_LISTENERS: Final = 256
#: How long the client may take to list its roots, and how many of them are kept.
_ROOTS_TIMEOUT: Final = 10.0
_MAX_ROOTS: Final = 256

#: The attribution of the upstream ask the current task answers (see Gateway.asker).
_PINNED: contextvars.ContextVar[tuple[tuple[str, str | None], Asker | None] | None] = (
    contextvars.ContextVar("agenthost_serve_pinned_ask", default=None)
)

_KINDS: Final = {
    "tools": m.NOTIFICATION_TOOLS_LIST_CHANGED,
    "prompts": m.NOTIFICATION_PROMPTS_LIST_CHANGED,
    "resources": m.NOTIFICATION_RESOURCES_LIST_CHANGED,
}


class Gateway:
    """agenthost as an MCP server in front of a running :class:`Host`.

    One gateway serves any number of downstream sessions (:meth:`serve`); run
    :meth:`watch_catalog` alongside them for ``list_changed``.
    """

    def __init__(self, host: Host) -> None:
        self.host = host
        self.view = CatalogView(host)
        self.sessions: set[DownstreamSession] = set()
        #: Who answers an upstream's ask that cannot be attributed to one call
        #: (:mod:`agenthost.serve.routing`): nobody (the policy's headless answer) unless
        #: the gateway serves one client alone (:func:`serve_stdio` sets it).
        self.unattributed: Fallback = nobody
        #: Which downstream request has a tool call running on which upstream.
        self.calls = CallsInFlight()
        self.server_info = Implementation(name="agenthost", version=__version__)
        #: 2026-07-28 requests waiting for the client's input (set by open_gateway).
        self.exchanges: ExchangeStore | None = None
        #: The clients' tasks (set by open_gateway; None: tasks are not offered).
        self.tasks: GatewayTasks | None = None
        #: Each legacy client's roots, as last listed (absent: ask again).
        self._client_roots: weakref.WeakKeyDictionary[DownstreamSession, list[Root]] = (
            weakref.WeakKeyDictionary()
        )
        #: Upstream sessions whose log lines and resource updates are relayed (a session
        #: object per upstream start: a restarted upstream is a new one).
        self._relayed: weakref.WeakSet[Any] = weakref.WeakSet()
        #: 2026-07-28 ``subscriptions/listen`` streams open now: (client, subscription id,
        #: the list kinds it asked for), bounded by :data:`_MAX_LISTENERS`.
        self._listeners: list[tuple[DownstreamSession, Any, frozenset[str]]] = []
        #: Who watches which resource, both eras (:mod:`agenthost.serve.subscriptions`).
        self.subscriptions = Subscriptions(self._subscribe_upstream, self._unsubscribe_upstream)
        #: The level each client asked for (``logging/setLevel``; default: info).
        self._log_levels: weakref.WeakKeyDictionary[DownstreamSession, str] = (
            weakref.WeakKeyDictionary()
        )

    # ------------------------------------------------------------------ sessions

    def capabilities(self) -> ServerCapabilities:
        """What the gateway serves: the lists (with ``listChanged``) and completion."""
        return ServerCapabilities(
            tools=ToolsCapability(list_changed=True),
            prompts=PromptsCapability(list_changed=True),
            resources=ResourcesCapability(subscribe=True, list_changed=True),
            completions={},
            logging={},
            tasks=(
                {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
                if self.tasks is not None
                else None
            ),
        )

    def instructions(self) -> str | None:
        """The upstreams' instructions, each under its server's name (one: as it is)."""
        found: list[tuple[str, str]] = []
        for status in self.host.status():
            try:
                text = self.host.session(status.name).instructions
            except AgentHostError:
                continue
            if text:
                found.append((status.name, text))
        if not found:
            return None
        if self.view.transparent:
            return found[0][1]
        return "\n\n".join(f"[{name}]\n{text}" for name, text in found)

    def handlers(self) -> dict[str, Handler]:
        return {
            m.TOOLS_LIST: self.list_tools,
            m.TOOLS_CALL: self.call_tool,
            m.PROMPTS_LIST: self.list_prompts,
            m.PROMPTS_GET: self.get_prompt,
            m.RESOURCES_LIST: self.list_resources,
            m.RESOURCES_TEMPLATES_LIST: self.list_templates,
            m.RESOURCES_READ: self.read_resource,
            m.COMPLETION_COMPLETE: self.complete,
            m.LOGGING_SET_LEVEL: self.set_level,
            m.RESOURCES_SUBSCRIBE: self.subscribe,
            m.RESOURCES_UNSUBSCRIBE: self.unsubscribe,
            m.SUBSCRIPTIONS_LISTEN: self.listen,
        }

    def session(
        self, transport: Transport, *, name: str = "downstream client"
    ) -> DownstreamSession:
        """A downstream session over ``transport``, answered by this gateway."""
        return DownstreamSession(
            transport,
            handlers=self.handlers(),
            capabilities=self.capabilities,
            server_info=self.server_info,
            instructions=self.instructions,
            on_notification=self._on_notification,
            name=name,
            exchanges=self.exchanges,
            raw_handlers=self._task_handlers() if self.tasks is not None else None,
            extensions={EXTENSION: {}} if self.tasks is not None else None,
        )

    async def serve(
        self,
        session: DownstreamSession,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve one downstream session until its client goes away."""
        self.sessions.add(session)
        try:
            await session.run(task_status=task_status)
        finally:
            self.sessions.discard(session)
            if self.tasks is not None:
                self.tasks.forget(session)
            await self.subscriptions.forget(session)
            await session.aclose()

    def asker(self) -> Asker | None:
        """Who to put a request to now: the client whose request this task serves (a
        2026-07-28 one through that request; an upstream's ask that came on that call's
        own stream); else, for an upstream's ask, the client whose call it serves
        (:class:`CallsInFlight`: by the tool a 2026-07-28 upstream names, or the one call
        in flight on a legacy upstream); else (an ask that cannot be attributed)
        :attr:`unattributed`: nobody on a shared gateway, never another session.

        An upstream's ask is attributed once, the first time it is needed: the consent,
        the form and the review of one ask all go to the same place, even if a call
        starts or ends meanwhile."""
        info = CURRENT.get()
        if info is not None:
            return asker_for(info)
        ask = SERVER_ASK.get()
        if ask is None:
            return self.unattributed()
        pinned = _PINNED.get()
        if pinned is not None and pinned[0] is ask:
            return pinned[1]
        server = ask[0]
        streamed = self._asks_ride_their_calls(server)
        caller = None if streamed else self.calls.caller(*ask)
        found = asker_for(caller) if caller is not None else self.unattributed()
        if found is None:
            log.warning(
                "%s: an ask that cannot be tied to one downstream call (%s): answered as in"
                " headless mode",
                server,
                "not on the stream of a call"
                if streamed
                else "calls of several clients in flight there"
                if self.calls.has_calls(server)
                else "no call in flight there",
            )
        _PINNED.set((ask, found))  # this ask's own task: nobody else's context
        return found

    def _asks_ride_their_calls(self, server: str) -> bool:
        try:
            return asks_ride_their_calls(self.host.session(server))
        except AgentHostError:
            return False  # not running: nothing to tell by

    def sampling_route(self, server: str) -> SamplingSender | None:
        """Where ``server``'s sampling request goes (``[gateway] sampling``): to the client
        whose call it serves (:meth:`asker`) when it declared sampling (``auto``,
        ``client``), else to
        agenthost's providers (None); ``client`` with a client that cannot sample is an
        error for the upstream rather than a silent spend on the providers."""
        mode = self.host.config.gateway.get("sampling", "auto")
        if mode == "providers":
            return None
        client = self.asker()
        if client is not None and not client.closed and client.can("sampling"):

            async def send(params: CreateMessageRequestParams) -> CreateMessageResult:
                return await client.ask(m.SAMPLING_CREATE_MESSAGE_SPEC, params, timeout=None)

            return send
        if mode == "client":

            async def refuse(params: CreateMessageRequestParams) -> CreateMessageResult:
                raise JSONRPCError(
                    jsonrpc.INTERNAL_ERROR,
                    'No model available: [gateway] sampling = "client" and the client'
                    " agenthost serves did not declare sampling",
                )

            return refuse
        return None

    async def _on_notification(
        self, session: DownstreamSession, method: str, params: Mapping[str, Any]
    ) -> None:
        ready_with_roots = method == m.NOTIFICATION_INITIALIZED and session.can("roots")
        if method == m.NOTIFICATION_ROOTS_LIST_CHANGED or ready_with_roots:
            # The upstreams listed the workspaces alone before this client came: they
            # list again, now through its roots.
            self._client_roots.pop(session, None)
            await self.host.roots_changed()

    async def roots_filter(self, server: str, offered: list[Root]) -> list[Root]:
        """``server``'s roots: the workspaces' (``offered``) within the client's roots
        (:func:`intersect_roots`), or the workspaces alone for a client without roots.
        A client that fails to list them leaves nothing (it is not known what it allows).

        An ask no call can be tied to, on a shared gateway (nobody to ask: the upstream
        lists its roots again on ``roots/list_changed``, outside any call), is everyone's:
        the workspaces within the roots of every client that has roots, since the
        upstream serves them all (what it sees, each of them allows)."""
        client = self.asker()
        if client is None:
            return await self._within_every_client(offered)
        if client.closed or not client.can("roots"):
            return offered
        return intersect_roots(offered, await self._roots_of(client))

    async def _within_every_client(self, offered: list[Root]) -> list[Root]:
        clients = [s for s in self.sessions if not s.closed and s.can("roots")]
        listed: list[list[Root]] = []
        async with trio.open_nursery() as nursery:
            for client in clients:

                async def one(client: DownstreamSession = client) -> None:
                    listed.append(await self._roots_of(client))

                nursery.start_soon(one)
        kept = offered
        for roots in listed:
            kept = intersect_roots(kept, roots)
        return kept

    async def _roots_of(self, client: Asker) -> list[Root]:
        """``client``'s roots, as last listed (a legacy session's are kept until it says
        they changed); none when it fails to list them."""
        roots = self._client_roots.get(client) if isinstance(client, DownstreamSession) else None
        if roots is not None:
            return roots
        try:
            answer = await client.ask(m.ROOTS_LIST_SPEC, None, timeout=_ROOTS_TIMEOUT)
        except AgentHostError as exc:
            log.warning("%s: cannot list the client's roots: %s", client.name, exc)
            return []
        roots = list(answer.roots[:_MAX_ROOTS])
        if isinstance(client, DownstreamSession):
            self._client_roots[client] = roots
        return roots

    # ------------------------------------------------------------------ list_changed

    def _snapshot(self) -> dict[str, Any]:
        catalog = self.host.catalog
        return {
            "tools": self.view.listed_tools(),
            "prompts": self.view.listed_prompts(),
            "resources": (catalog.resources(), catalog.templates()),
        }

    def _differs(self, before: dict[str, Any]) -> Callable[[Any], bool]:
        return lambda _: self._snapshot() != before

    async def watch_catalog(self) -> None:
        """Tell every ready client which lists changed, for as long as the gateway runs."""
        before = self._snapshot()
        while True:
            await self.host.catalog.wait_for(self._differs(before))
            now = self._snapshot()
            changed = [kind for kind in _KINDS if now[kind] != before[kind]]
            before = now
            for session in list(self.sessions):
                if session.revision is None or session.closed:
                    continue
                for kind in changed:
                    await session.notify(_KINDS[kind])
            for client, subscription, kinds in list(self._listeners):
                for kind in changed:
                    if kind in kinds and not client.closed:
                        meta = {"io.modelcontextprotocol/subscriptionId": subscription}
                        await client.notify(_KINDS[kind], {"_meta": meta})

    # ------------------------------------------------------------------ tools

    async def list_tools(
        self, info: RequestInfo, params: PaginatedRequestParams
    ) -> ListToolsResult:
        tools, following = page(self._listed_tools(info), params.cursor)
        return ListToolsResult(tools=tools, next_cursor=following)

    def _listed_tools(self, info: RequestInfo) -> list[Tool]:
        """The tools; a 2025-11-25 client sees ``taskSupport: optional`` on every tool the
        gateway can run as a task (:meth:`_task_support`), and no "required": a plain call
        of such a tool is run to its end by the gateway, so the client need not use tasks."""
        if self.tasks is None or info.revision in MODERN_REVISIONS:
            return self.view.listed_tools()
        if not at_least(info.revision, LEGACY):
            return self.view.listed_tools()
        out = []
        for name, entry in self.view.tools():
            tool = attrs.evolve(entry.tool, name=name)
            if self._task_support(entry) is not None:
                tool = attrs.evolve(tool, execution=ToolExecution(task_support="optional"))
            elif tool.execution is not None and tool.execution.task_support is not None:
                tool = attrs.evolve(tool, execution=ToolExecution(task_support="forbidden"))
            out.append(tool)
        return out

    def _task_support(self, entry: CatalogTool) -> str | None:
        """ "optional" when the upstream can run ``entry`` as a task (it offers the
        2026-07-28 extension, or its tool takes a 2025-11-25 task), else None."""
        try:
            session = self.host.session(entry.server)
        except AgentHostError:
            return None
        if offers_tasks_extension(session):
            return "optional"
        return (
            "optional"
            if wants_task(entry.tool, session.server_capabilities, optional=True)
            else None
        )

    async def call_tool(
        self, info: RequestInfo, params: CallToolRequestParams
    ) -> CallToolResult | dict[str, Any]:
        """The call through the host; a client asking for a task gets the gateway's task
        (as JSON: its form's ``CreateTaskResult``) once the upstream created one."""
        entry = self.view.tool(params.name)
        if entry is None:
            raise JSONRPCError(jsonrpc.INVALID_PARAMS, f"unknown tool: {params.name[:200]}")
        await self._relay(entry.server)
        form = self._task_form(info, params)
        if form == LEGACY and self._task_support(entry) is None:
            # 2025-11-25, "Tool-Level Negotiation": a tool listed without task support.
            raise JSONRPCError(
                jsonrpc.METHOD_NOT_FOUND, f"{params.name[:200]} does not run as a task"
            )
        if form is not None and self.tasks is not None:
            ttl = params.task.ttl if params.task is not None else None

            async def run(on_task: TaskCreatedCallback, progress: Any) -> CallToolResult:
                with self.calls.running(entry.server, entry.original_name, info):
                    return await self._call(entry.name, entry.server, params, progress, on_task)

            task_run: TaskRun = run
            return await self.tasks.call(info, form, entry.name, ttl, task_run)
        with self.calls.running(entry.server, entry.original_name, info):
            return await self._call(entry.name, entry.server, params, _progress(info), None)

    async def _call(
        self,
        name: str,
        server: str,
        params: CallToolRequestParams,
        progress: Any,
        on_task: TaskCreatedCallback | None,
    ) -> CallToolResult:
        """``host.call_tool`` with the gateway's error mapping (``on_task``: as a task
        whenever the upstream allows, telling it when the upstream created one)."""
        try:
            if on_task is None:
                return await self.host.call_tool(name, params.arguments, progress=progress)
            return await self.host.call_tool(
                name, params.arguments, progress=progress, on_task=on_task, task=True
            )
        except ConsentDenied as exc:
            return _tool_error(f"denied by agenthost's policy: {exc}")
        except (JSONRPCError, TaskCancelled):
            raise
        except AgentHostError as exc:
            return _tool_error(f"{server}: {_reason(exc)}")

    def _task_form(self, info: RequestInfo, params: CallToolRequestParams) -> str | None:
        """The task form the client asked for in this call, if any: the extension declared
        in a 2026-07-28 request's capabilities, or 2025-11-25's ``params.task``."""
        if info.revision in MODERN_REVISIONS:
            caps = (info.meta or {}).get(META_CLIENT_CAPABILITIES)
            extensions = caps.get("extensions") if isinstance(caps, Mapping) else None
            declared = isinstance(extensions, Mapping) and EXTENSION in extensions
            return EXTENSION if declared else None
        if params.task is not None and at_least(info.revision, LEGACY):
            return LEGACY
        return None

    # ------------------------------------------------------------------ tasks

    def _task_handlers(self) -> dict[str, RawHandler]:
        return {
            m.TASKS_GET: self.get_task,
            m.TASKS_RESULT: self.task_result,
            m.TASKS_LIST: self.list_tasks,
            m.TASKS_CANCEL: self.cancel_task,
            m.TASKS_UPDATE: self.update_task,
        }

    def _task_store(self, info: RequestInfo, *, modern: bool | None) -> GatewayTasks:
        """The store, for a method of the client's form (``modern``: only 2026-07-28's;
        False: only 2025-11-25's; None: both)."""
        is_modern = info.revision in MODERN_REVISIONS
        legacy_ok = not is_modern and at_least(info.revision, LEGACY)
        allowed = is_modern if modern is True else legacy_ok if modern is False else True
        if self.tasks is None or not allowed or not (is_modern or legacy_ok):
            raise JSONRPCError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {info.method}")
        return self.tasks

    async def get_task(self, info: RequestInfo, params: Mapping[str, Any]) -> dict[str, Any]:
        task = self._task_store(info, modern=None).find(info, params)
        return task.wire(info.revision)

    async def task_result(self, info: RequestInfo, params: Mapping[str, Any]) -> dict[str, Any]:
        return await self._task_store(info, modern=False).result(info, params)

    async def list_tasks(self, info: RequestInfo, params: Mapping[str, Any]) -> dict[str, Any]:
        tasks = self._task_store(info, modern=False).listed(info)
        return {"tasks": [task.wire(info.revision) for task in tasks]}

    async def cancel_task(self, info: RequestInfo, params: Mapping[str, Any]) -> dict[str, Any]:
        task = await self._task_store(info, modern=None).cancel(info, params)
        return {} if info.revision in MODERN_REVISIONS else task.wire(info.revision)

    async def update_task(self, info: RequestInfo, params: Mapping[str, Any]) -> dict[str, Any]:
        """``tasks/update``: the gateway's tasks never wait for input (their asks go to
        the client as the host's do), so any answer is for no outstanding key: ignored."""
        self._task_store(info, modern=True).find(info, params)
        return {}

    # ------------------------------------------------------------------ prompts

    async def list_prompts(
        self, info: RequestInfo, params: PaginatedRequestParams
    ) -> ListPromptsResult:
        prompts, following = page(self.view.listed_prompts(), params.cursor)
        return ListPromptsResult(prompts=prompts, next_cursor=following)

    async def get_prompt(
        self, info: RequestInfo, params: GetPromptRequestParams
    ) -> GetPromptResult:
        found = self.view.prompt(params.name)
        if found is None:
            raise JSONRPCError(jsonrpc.INVALID_PARAMS, f"unknown prompt: {params.name[:200]}")
        server, prompt = found
        return await _upstream(
            server, lambda: self.host.get_prompt(server, prompt.name, params.arguments)
        )

    # ------------------------------------------------------------------ resources

    async def list_resources(
        self, info: RequestInfo, params: PaginatedRequestParams
    ) -> ListResourcesResult:
        resources, following = page([r for _, r in self.host.catalog.resources()], params.cursor)
        return ListResourcesResult(resources=resources, next_cursor=following)

    async def list_templates(
        self, info: RequestInfo, params: PaginatedRequestParams
    ) -> ListResourceTemplatesResult:
        templates, following = page([t for _, t in self.host.catalog.templates()], params.cursor)
        return ListResourceTemplatesResult(resource_templates=templates, next_cursor=following)

    async def read_resource(
        self, info: RequestInfo, params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        try:
            return await _upstream(None, lambda: self.host.read_resource(params.uri))
        except (NotFound, AmbiguousResource) as exc:
            raise JSONRPCError(
                RESOURCE_NOT_FOUND, f"resource not found: {exc}", {"uri": params.uri}
            ) from None

    # ------------------------------------------------------------------ completion, logging

    async def complete(self, info: RequestInfo, params: CompleteRequestParams) -> CompleteResult:
        ref = params.ref
        if isinstance(ref, PromptReference):
            found = self.view.prompt(ref.name)
            if found is None:
                raise JSONRPCError(jsonrpc.INVALID_PARAMS, f"unknown prompt: {ref.name[:200]}")
            server, prompt = found
            wire: dict[str, Any] = {"type": "ref/prompt", "name": prompt.name}
        else:
            owners = [
                s for s, t in self.host.catalog.templates() if t.uri_template == ref.uri
            ] or list(self.host.catalog.resource_owners(ref.uri))
            if not owners:
                raise JSONRPCError(jsonrpc.INVALID_PARAMS, f"unknown resource: {ref.uri[:200]}")
            server = owners[0]
            wire = {"type": "ref/resource", "uri": ref.uri}
        context = params.context.arguments if params.context is not None else None
        return await _upstream(
            server,
            lambda: self.host.session(server).complete(
                wire, params.argument.name, params.argument.value, context=context
            ),
        )

    async def set_level(self, info: RequestInfo, params: SetLevelRequestParams) -> dict[str, Any]:
        """The client's own level: the upstreams log everything to the gateway, and each
        client gets the lines at or above its level (one client's level is not another's)."""
        self._log_levels[info.session] = params.level
        return {}

    async def listen(self, info: RequestInfo, params: SubscriptionsListenRequestParams) -> NoReturn:
        """A 2026-07-28 client's change stream: acknowledged with what is honoured (the
        three lists, and of the resources it named those one upstream owns and agreed to
        watch, within the client's bound), then its notifications until the client
        cancels the request or goes away. Its resource updates come on this stream only."""
        wanted = params.notifications
        kinds = frozenset(
            kind
            for kind, asked in (
                ("tools", wanted.tools_list_changed),
                ("prompts", wanted.prompts_list_changed),
                ("resources", wanted.resources_list_changed),
            )
            if asked
        )
        if len(self._listeners) >= _MAX_LISTENERS:
            raise JSONRPCError(jsonrpc.INTERNAL_ERROR, "too many subscriptions/listen streams")
        watched: list[tuple[str, Subscriber]] = []
        try:
            for uri in dict.fromkeys(wanted.resource_subscriptions or ()):
                sub = Subscriber(info.session, info.request_id, ready=False)
                if not self.subscriptions.room_for(info.session):
                    log.info("%s: resource subscriptions over the bound", info.session.name)
                    break
                try:
                    await self.subscriptions.add(uri, sub)
                except AgentHostError as exc:
                    log.info("%s: not watching %s: %s", info.session.name, uri[:200], exc)
                    continue
                watched.append((uri, sub))
            meta = {"io.modelcontextprotocol/subscriptionId": info.request_id}
            honoured: dict[str, Any] = {f"{kind}ListChanged": True for kind in sorted(kinds)}
            if watched:
                honoured["resourceSubscriptions"] = [uri for uri, _ in watched]
            await info.session.notify(
                m.NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED,
                {"_meta": meta, "notifications": honoured},
            )
            for _, sub in watched:
                sub.ready = True
            entry = (info.session, info.request_id, kinds)
            self._listeners.append(entry)
            try:
                await (
                    trio.sleep_forever()
                )  # the stream ends by cancellation (or the client leaving)
            finally:
                self._listeners.remove(entry)
        finally:
            for uri, sub in watched:
                await self.subscriptions.remove(uri, sub)

    # ------------------------------------------------------------------ upstream notifications

    async def _relay(self, server: str) -> None:
        """Relay ``server``'s log lines and resource updates to the clients (once per
        upstream session)."""
        try:
            session = self.host.session(server)
        except AgentHostError:
            return
        if session in self._relayed:
            return
        self._relayed.add(session)
        session.add_listener(m.NOTIFICATION_MESSAGE, functools.partial(self._on_log, server))
        session.add_listener(
            m.NOTIFICATION_RESOURCES_UPDATED, functools.partial(self._on_updated, server)
        )
        try:
            await session.set_logging_level("debug")  # filtered per client (_on_log)
        except AgentHostError as exc:
            log.debug("%s: logging level not set: %s", server, exc)

    async def _on_log(self, server: str, ctx: Any, params: Mapping[str, Any]) -> None:
        """An upstream's log line goes to the clients that asked for log lines
        (``logging/setLevel``), at or above each one's level: to the client whose call
        it came during when that can be told (:class:`CallsInFlight`); with calls of
        several clients in flight there, to the one an unattributed ask goes to
        (:attr:`unattributed`: nobody on a shared gateway), as the line may carry any of
        those calls' data; with no call in flight, to each of them (the upstream's own
        line: its start, its background work). A 2026-07-28 caller gets it only when its
        request's ``_meta`` named a level. Every line is in agenthost's own log anyway."""
        tool = getattr(ctx, "origin_name", None)
        caller = self.calls.caller(server, tool)
        rank = _LOG_LEVELS.get(str(params.get("level")), 7)
        relayed = {k: params[k] for k in ("level", "logger", "data") if k in params}
        if caller is not None and caller.revision in MODERN_REVISIONS:
            # 2026-07-28: request-scoped, only for a request whose _meta asked for a level.
            level = (caller.meta or {}).get(_META_LOG_LEVEL)
            if isinstance(level, str) and rank >= _LOG_LEVELS.get(level, len(_LOG_LEVELS)):
                await caller.session.notify(m.NOTIFICATION_MESSAGE, relayed)
            return
        targets: list[DownstreamSession]
        if caller is not None:
            targets = [caller.session]
        elif self.calls.candidates(server, tool):
            # A client that keeps a call open there must not read everyone else's lines.
            fallback = self.unattributed()
            targets = [fallback] if isinstance(fallback, DownstreamSession) else []
        else:
            targets = list(self._log_levels)
        for client in targets:
            level = self._log_levels.get(client)
            if level is None or client.closed or rank < _LOG_LEVELS.get(level, 1):
                continue
            await client.notify(m.NOTIFICATION_MESSAGE, relayed)

    async def _on_updated(self, server: str, ctx: Any, params: Mapping[str, Any]) -> None:
        await self.subscriptions.updated(str(params.get("uri")), server)

    def _owner(self, uri: str) -> str:
        owners = self.host.catalog.resource_owners(uri)
        if len(owners) != 1:
            raise JSONRPCError(RESOURCE_NOT_FOUND, f"resource not found: {uri[:200]}", {"uri": uri})
        return owners[0]

    async def _subscribe_upstream(self, uri: str) -> str:
        server = self._owner(uri)
        await self._relay(server)
        await _upstream(server, lambda: self.host.session(server).subscribe_resource(uri))
        return server

    async def _unsubscribe_upstream(self, uri: str, server: str) -> None:
        """On the upstream it was subscribed on (its owner may have changed since)."""
        await _upstream(server, lambda: self.host.session(server).unsubscribe_resource(uri))

    async def subscribe(self, info: RequestInfo, params: SubscribeRequestParams) -> dict[str, Any]:
        """A legacy client's ``resources/subscribe`` (plain updates, until it unsubscribes
        or leaves)."""
        if self.subscriptions.find(params.uri, info.session, None) is not None:
            return {}
        if not self.subscriptions.room_for(info.session):
            raise JSONRPCError(jsonrpc.INTERNAL_ERROR, "too many resource subscriptions")
        self._owner(params.uri)
        try:
            await self.subscriptions.add(params.uri, Subscriber(info.session))
        except (JSONRPCError, NotFound, AmbiguousResource):
            raise
        except AgentHostError as exc:
            raise JSONRPCError(jsonrpc.INTERNAL_ERROR, _reason(exc)) from None
        return {}

    async def unsubscribe(
        self, info: RequestInfo, params: UnsubscribeRequestParams
    ) -> dict[str, Any]:
        sub = self.subscriptions.find(params.uri, info.session, None)
        if sub is not None:
            await self.subscriptions.remove(params.uri, sub)
        return {}


def _progress(info: RequestInfo) -> Any:
    """The host's progress callback relaying to the client's token (None: it asked none)."""
    token = info.progress_token
    if token is None:
        return None
    session = info.session

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None and info.revision != "2024-11-05":
            params["message"] = message
        await session.notify(m.NOTIFICATION_PROGRESS, params)

    return relay


async def _upstream(server: str | None, call: Callable[[], Awaitable[T]]) -> T:
    """``await call()`` with the gateway's error mapping for everything but tools."""
    try:
        return await call()
    except ConsentDenied as exc:
        raise JSONRPCError(CONSENT_DENIED, f"denied by agenthost's policy: {exc}") from None
    except (JSONRPCError, NotFound, AmbiguousResource):
        raise
    except AgentHostError as exc:
        where = f"{server}: " if server else ""
        raise JSONRPCError(jsonrpc.INTERNAL_ERROR, f"{where}{_reason(exc)}") from None


def _reason(exc: AgentHostError) -> str:
    text = str(exc)
    return text if len(text) <= 2000 else text[:2000] + "..."


def _tool_error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], is_error=True)
