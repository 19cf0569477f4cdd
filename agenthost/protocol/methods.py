"""The typed MCP method table: each method's params and result types, and since when.

One table, read by the session both ways: ``session.request(TOOLS_CALL, params)`` looks
up the result type here, and handlers for the server's requests (roots, sampling,
elicitation) register by the same names. Methods are grouped by who sends them, because
a client must never answer a method that only clients send.

``params is None`` means the method takes no params (or only ``_meta``). The specs are
generic in their params and result types, so ``request(spec: RequestSpec[P, R], params: P)
-> R`` type-checks each call (one ``*_SPEC`` constant per request method).

Each spec also says which revisions have the method (``since`` .. ``until``, compared by
position in :data:`agenthost.protocol.revisions.REVISIONS`), which param names it on the wire in
2026-07-28 (``name_param``, mirrored into the ``Mcp-Name`` HTTP header) and whether the
server may answer it with an ``InputRequiredResult`` (``mrtr``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Any, Final, Generic, TypeVar

import attrs

from agenthost.protocol import types as t
from agenthost.protocol.revisions import at_least

__all__ = [
    "CLIENT_NOTIFICATIONS",
    "CLIENT_REQUESTS",
    "COMPLETION_COMPLETE",
    "COMPLETION_COMPLETE_SPEC",
    "ELICITATION_CREATE",
    "ELICITATION_CREATE_SPEC",
    "EXTENSION_REQUESTS",
    "INITIALIZE",
    "INITIALIZE_SPEC",
    "LOGGING_SET_LEVEL",
    "LOGGING_SET_LEVEL_SPEC",
    "NOTIFICATION_CANCELLED",
    "NOTIFICATION_ELICITATION_COMPLETE",
    "NOTIFICATION_INITIALIZED",
    "NOTIFICATION_MESSAGE",
    "NOTIFICATION_PROGRESS",
    "NOTIFICATION_PROMPTS_LIST_CHANGED",
    "NOTIFICATION_RESOURCES_LIST_CHANGED",
    "NOTIFICATION_RESOURCES_UPDATED",
    "NOTIFICATION_ROOTS_LIST_CHANGED",
    "NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED",
    "NOTIFICATION_TASKS_STATUS",
    "NOTIFICATION_TOOLS_LIST_CHANGED",
    "PING",
    "PING_SPEC",
    "PROMPTS_GET",
    "PROMPTS_GET_SPEC",
    "PROMPTS_LIST",
    "PROMPTS_LIST_SPEC",
    "RESOURCES_LIST",
    "RESOURCES_LIST_SPEC",
    "RESOURCES_READ",
    "RESOURCES_READ_SPEC",
    "RESOURCES_SUBSCRIBE",
    "RESOURCES_SUBSCRIBE_SPEC",
    "RESOURCES_TEMPLATES_LIST",
    "RESOURCES_TEMPLATES_LIST_SPEC",
    "RESOURCES_UNSUBSCRIBE",
    "RESOURCES_UNSUBSCRIBE_SPEC",
    "ROOTS_LIST",
    "ROOTS_LIST_SPEC",
    "SAMPLING_CREATE_MESSAGE",
    "SAMPLING_CREATE_MESSAGE_SPEC",
    "SERVER_DISCOVER",
    "SERVER_DISCOVER_SPEC",
    "SERVER_NOTIFICATIONS",
    "SERVER_REQUESTS",
    "SKILLS_EXTENSION",
    "SKILLS_GET",
    "SKILLS_GET_SPEC",
    "SKILLS_LIST",
    "SKILLS_LIST_SPEC",
    "SUBSCRIPTIONS_LISTEN",
    "SUBSCRIPTIONS_LISTEN_SPEC",
    "TASKS_CANCEL",
    "TASKS_CANCEL_SPEC",
    "TASKS_EXTENSION",
    "TASKS_EXT_CANCEL_SPEC",
    "TASKS_EXT_GET_SPEC",
    "TASKS_EXT_UPDATE_SPEC",
    "TASKS_GET",
    "TASKS_GET_SPEC",
    "TASKS_LIST",
    "TASKS_LIST_SPEC",
    "TASKS_RESULT",
    "TASKS_RESULT_SPEC",
    "TASKS_UPDATE",
    "TOOLS_CALL",
    "TOOLS_CALL_SPEC",
    "TOOLS_CALL_TASK_SPEC",
    "TOOLS_LIST",
    "TOOLS_LIST_SPEC",
    "NotificationSpec",
    "RequestSpec",
    "available",
    "call_tool_params",
    "declared_extensions",
    "notification_spec",
    "request_spec",
]

# --- method names ------------------------------------------------------------------------

INITIALIZE: Final = "initialize"
PING: Final = "ping"
TOOLS_LIST: Final = "tools/list"
TOOLS_CALL: Final = "tools/call"
PROMPTS_LIST: Final = "prompts/list"
PROMPTS_GET: Final = "prompts/get"
RESOURCES_LIST: Final = "resources/list"
RESOURCES_TEMPLATES_LIST: Final = "resources/templates/list"
RESOURCES_READ: Final = "resources/read"
RESOURCES_SUBSCRIBE: Final = "resources/subscribe"
RESOURCES_UNSUBSCRIBE: Final = "resources/unsubscribe"
COMPLETION_COMPLETE: Final = "completion/complete"
LOGGING_SET_LEVEL: Final = "logging/setLevel"
ROOTS_LIST: Final = "roots/list"
SAMPLING_CREATE_MESSAGE: Final = "sampling/createMessage"
ELICITATION_CREATE: Final = "elicitation/create"
SERVER_DISCOVER: Final = "server/discover"
SUBSCRIPTIONS_LISTEN: Final = "subscriptions/listen"
NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
TASKS_GET: Final = "tasks/get"
TASKS_RESULT: Final = "tasks/result"
TASKS_LIST: Final = "tasks/list"
TASKS_CANCEL: Final = "tasks/cancel"
TASKS_UPDATE: Final = "tasks/update"
SKILLS_LIST: Final = "skills/list"
SKILLS_GET: Final = "skills/get"

#: Extension identifiers (``capabilities.extensions`` keys).
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"

NOTIFICATION_INITIALIZED: Final = "notifications/initialized"
NOTIFICATION_CANCELLED: Final = "notifications/cancelled"
NOTIFICATION_PROGRESS: Final = "notifications/progress"
NOTIFICATION_MESSAGE: Final = "notifications/message"
NOTIFICATION_ROOTS_LIST_CHANGED: Final = "notifications/roots/list_changed"
NOTIFICATION_TOOLS_LIST_CHANGED: Final = "notifications/tools/list_changed"
NOTIFICATION_PROMPTS_LIST_CHANGED: Final = "notifications/prompts/list_changed"
NOTIFICATION_RESOURCES_LIST_CHANGED: Final = "notifications/resources/list_changed"
NOTIFICATION_RESOURCES_UPDATED: Final = "notifications/resources/updated"
NOTIFICATION_ELICITATION_COMPLETE: Final = "notifications/elicitation/complete"
NOTIFICATION_TASKS_STATUS: Final = "notifications/tasks/status"

_FIRST: Final = "2024-11-05"
#: The last legacy revision: methods the 2026-07-28 revision removed end here.
_LAST_LEGACY: Final = "2025-11-25"
_MODERN: Final = "2026-07-28"
#: The revision that brought the tasks utility.
_TASKS: Final = "2025-11-25"

P = TypeVar("P")
R = TypeVar("R")


@attrs.frozen(kw_only=True)
class RequestSpec(Generic[P, R]):
    """What a request method carries."""

    method: str
    #: The params class, or None when the method has no params of its own.
    params: type[P] | None
    result: type[R]
    #: The first revision that has this method.
    since: str = _FIRST
    #: The last revision that has it (None: still there).
    until: str | None = None
    #: The param that names the target (``Mcp-Name`` on 2026-07-28 HTTP), if any.
    name_param: str | None = None
    #: The server may answer with an ``InputRequiredResult`` (2026-07-28).
    mrtr: bool = False
    #: For a request the server sends: the client capability it needs, which is also the
    #: :class:`~agenthost.asks.ClientHandlers` attribute that answers it (None: any client
    #: answers it, e.g. ``ping``).
    capability: str | None = None
    #: The extension that defines the method (``capabilities.extensions`` key): the
    #: server must have declared it, and on 2026-07-28 the request declares it too.
    extension: str | None = None


@attrs.frozen(kw_only=True)
class NotificationSpec(Generic[P]):
    """What a notification method carries."""

    method: str
    params: type[P] | None
    since: str = _FIRST
    until: str | None = None


# --- request specs (typed) ----------------------------------------------------------------

INITIALIZE_SPEC: Final[RequestSpec[t.InitializeRequestParams, t.InitializeResult]] = RequestSpec(
    method=INITIALIZE,
    params=t.InitializeRequestParams,
    result=t.InitializeResult,
    until=_LAST_LEGACY,
)
PING_SPEC: Final[RequestSpec[None, t.EmptyResult]] = RequestSpec(
    method=PING, params=None, result=t.EmptyResult, until=_LAST_LEGACY
)
SERVER_DISCOVER_SPEC: Final[RequestSpec[None, t.DiscoverResult]] = RequestSpec(
    method=SERVER_DISCOVER, params=None, result=t.DiscoverResult, since=_MODERN
)
SUBSCRIPTIONS_LISTEN_SPEC: Final[RequestSpec[t.SubscriptionsListenRequestParams, t.EmptyResult]] = (
    RequestSpec(
        method=SUBSCRIPTIONS_LISTEN,
        params=t.SubscriptionsListenRequestParams,
        result=t.EmptyResult,
        since=_MODERN,
    )
)
TOOLS_LIST_SPEC: Final[RequestSpec[t.PaginatedRequestParams, t.ListToolsResult]] = RequestSpec(
    method=TOOLS_LIST, params=t.PaginatedRequestParams, result=t.ListToolsResult
)
TOOLS_CALL_SPEC: Final[RequestSpec[t.CallToolRequestParams, t.CallToolResult]] = RequestSpec(
    method=TOOLS_CALL,
    params=t.CallToolRequestParams,
    result=t.CallToolResult,
    name_param="name",
    mrtr=True,
)
PROMPTS_LIST_SPEC: Final[RequestSpec[t.PaginatedRequestParams, t.ListPromptsResult]] = RequestSpec(
    method=PROMPTS_LIST, params=t.PaginatedRequestParams, result=t.ListPromptsResult
)
PROMPTS_GET_SPEC: Final[RequestSpec[t.GetPromptRequestParams, t.GetPromptResult]] = RequestSpec(
    method=PROMPTS_GET,
    params=t.GetPromptRequestParams,
    result=t.GetPromptResult,
    name_param="name",
    mrtr=True,
)
RESOURCES_LIST_SPEC: Final[RequestSpec[t.PaginatedRequestParams, t.ListResourcesResult]] = (
    RequestSpec(
        method=RESOURCES_LIST, params=t.PaginatedRequestParams, result=t.ListResourcesResult
    )
)
RESOURCES_TEMPLATES_LIST_SPEC: Final[
    RequestSpec[t.PaginatedRequestParams, t.ListResourceTemplatesResult]
] = RequestSpec(
    method=RESOURCES_TEMPLATES_LIST,
    params=t.PaginatedRequestParams,
    result=t.ListResourceTemplatesResult,
)
RESOURCES_READ_SPEC: Final[RequestSpec[t.ReadResourceRequestParams, t.ReadResourceResult]] = (
    RequestSpec(
        method=RESOURCES_READ,
        params=t.ReadResourceRequestParams,
        result=t.ReadResourceResult,
        name_param="uri",
        mrtr=True,
    )
)
RESOURCES_SUBSCRIBE_SPEC: Final[RequestSpec[t.SubscribeRequestParams, t.EmptyResult]] = RequestSpec(
    method=RESOURCES_SUBSCRIBE,
    params=t.SubscribeRequestParams,
    result=t.EmptyResult,
    until=_LAST_LEGACY,
)
RESOURCES_UNSUBSCRIBE_SPEC: Final[RequestSpec[t.UnsubscribeRequestParams, t.EmptyResult]] = (
    RequestSpec(
        method=RESOURCES_UNSUBSCRIBE,
        params=t.UnsubscribeRequestParams,
        result=t.EmptyResult,
        until=_LAST_LEGACY,
    )
)
COMPLETION_COMPLETE_SPEC: Final[RequestSpec[t.CompleteRequestParams, t.CompleteResult]] = (
    RequestSpec(method=COMPLETION_COMPLETE, params=t.CompleteRequestParams, result=t.CompleteResult)
)
LOGGING_SET_LEVEL_SPEC: Final[RequestSpec[t.SetLevelRequestParams, t.EmptyResult]] = RequestSpec(
    method=LOGGING_SET_LEVEL,
    params=t.SetLevelRequestParams,
    result=t.EmptyResult,
    until=_LAST_LEGACY,
)
ROOTS_LIST_SPEC: Final[RequestSpec[None, t.ListRootsResult]] = RequestSpec(
    method=ROOTS_LIST, params=None, result=t.ListRootsResult, capability="roots"
)
SAMPLING_CREATE_MESSAGE_SPEC: Final[
    RequestSpec[t.CreateMessageRequestParams, t.CreateMessageResult]
] = RequestSpec(
    method=SAMPLING_CREATE_MESSAGE,
    params=t.CreateMessageRequestParams,
    result=t.CreateMessageResult,
    capability="sampling",
)
ELICITATION_CREATE_SPEC: Final[RequestSpec[t.ElicitRequestParams, t.ElicitResult]] = RequestSpec(
    method=ELICITATION_CREATE,
    params=t.ElicitRequestParams,
    result=t.ElicitResult,
    since="2025-06-18",
    capability="elicitation",
)


#: The 2025-11-25 tasks utility's requests, sent by the client about its tool-call tasks.
TASKS_GET_SPEC: Final[RequestSpec[t.TaskRequestParams, t.GetTaskResult]] = RequestSpec(
    method=TASKS_GET,
    name_param="taskId",
    params=t.TaskRequestParams,
    result=t.GetTaskResult,
    since=_TASKS,
    until=_LAST_LEGACY,
)
TASKS_RESULT_SPEC: Final[RequestSpec[t.TaskRequestParams, t.CallToolResult]] = RequestSpec(
    method=TASKS_RESULT,
    name_param="taskId",
    params=t.TaskRequestParams,
    result=t.CallToolResult,
    since=_TASKS,
    until=_LAST_LEGACY,
)
TASKS_LIST_SPEC: Final[RequestSpec[t.PaginatedRequestParams, t.ListTasksResult]] = RequestSpec(
    method=TASKS_LIST,
    params=t.PaginatedRequestParams,
    result=t.ListTasksResult,
    since=_TASKS,
    until=_LAST_LEGACY,
)
TASKS_CANCEL_SPEC: Final[RequestSpec[t.TaskRequestParams, t.GetTaskResult]] = RequestSpec(
    method=TASKS_CANCEL,
    name_param="taskId",
    params=t.TaskRequestParams,
    result=t.GetTaskResult,
    since=_TASKS,
    until=_LAST_LEGACY,
)

#: ``tools/call`` augmented with a task (2025-11-25): the server answers a
#: ``CreateTaskResult`` or, for an ``optional`` tool, a plain ``CallToolResult``; the raw
#: result, told apart by :func:`agenthost.tool_tasks.call_tool_as_task`.
TOOLS_CALL_TASK_SPEC: Final[RequestSpec[t.CallToolRequestParams, dict[str, Any]]] = RequestSpec(
    method=TOOLS_CALL,
    params=t.CallToolRequestParams,
    result=dict,
    since=_TASKS,
    until=_LAST_LEGACY,
    name_param="name",
)

#: The 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``): the same method
#: names in another shape (``ttlMs``, ``pollIntervalMs``, ``inputRequests``), hence their
#: own specs. Results are the raw task object, read by :mod:`agenthost.tool_tasks`.
TASKS_EXT_GET_SPEC: Final[RequestSpec[t.TaskRequestParams, dict[str, Any]]] = RequestSpec(
    method=TASKS_GET,
    name_param="taskId",
    params=t.TaskRequestParams,
    result=dict,
    since=_MODERN,
    extension=TASKS_EXTENSION,
)
TASKS_EXT_UPDATE_SPEC: Final[RequestSpec[t.UpdateTaskRequestParams, dict[str, Any]]] = RequestSpec(
    method=TASKS_UPDATE,
    name_param="taskId",
    params=t.UpdateTaskRequestParams,
    result=dict,
    since=_MODERN,
    extension=TASKS_EXTENSION,
)
TASKS_EXT_CANCEL_SPEC: Final[RequestSpec[t.TaskRequestParams, dict[str, Any]]] = RequestSpec(
    method=TASKS_CANCEL,
    name_param="taskId",
    params=t.TaskRequestParams,
    result=dict,
    since=_MODERN,
    extension=TASKS_EXTENSION,
)

#: The skills extension (``io.modelcontextprotocol/skills``), in either era. Results are
#: raw: :mod:`agenthost.skills` checks each entry against the SEP's rules one by one.
SKILLS_LIST_SPEC: Final[RequestSpec[t.PaginatedRequestParams, dict[str, Any]]] = RequestSpec(
    method=SKILLS_LIST, params=t.PaginatedRequestParams, result=dict, extension=SKILLS_EXTENSION
)
SKILLS_GET_SPEC: Final[RequestSpec[t.ReadResourceRequestParams, dict[str, Any]]] = RequestSpec(
    method=SKILLS_GET,
    params=t.ReadResourceRequestParams,
    result=dict,
    extension=SKILLS_EXTENSION,
)

#: Requests of the extensions we speak (they are client requests too, but only to a
#: server that declared the extension).
EXTENSION_REQUESTS: Final[tuple[RequestSpec[Any, Any], ...]] = (
    TASKS_EXT_GET_SPEC,
    TASKS_EXT_UPDATE_SPEC,
    TASKS_EXT_CANCEL_SPEC,
    SKILLS_LIST_SPEC,
    SKILLS_GET_SPEC,
)


def _table(*specs: Any) -> Mapping[str, Any]:
    return MappingProxyType({spec.method: spec for spec in specs})


#: Requests a client sends and a server answers.
CLIENT_REQUESTS: Final[Mapping[str, RequestSpec[Any, Any]]] = _table(
    INITIALIZE_SPEC,
    PING_SPEC,
    TOOLS_LIST_SPEC,
    TOOLS_CALL_SPEC,
    PROMPTS_LIST_SPEC,
    PROMPTS_GET_SPEC,
    RESOURCES_LIST_SPEC,
    RESOURCES_TEMPLATES_LIST_SPEC,
    RESOURCES_READ_SPEC,
    RESOURCES_SUBSCRIBE_SPEC,
    RESOURCES_UNSUBSCRIBE_SPEC,
    COMPLETION_COMPLETE_SPEC,
    LOGGING_SET_LEVEL_SPEC,
    SERVER_DISCOVER_SPEC,
    SUBSCRIPTIONS_LISTEN_SPEC,
    TASKS_GET_SPEC,
    # Not TASKS_RESULT_SPEC: tasks/result answers whatever the task's request answers
    # (its spec here is the tool-call one), so the method alone does not give its type.
    TASKS_LIST_SPEC,
    TASKS_CANCEL_SPEC,
)

#: Requests a server sends and the client (agenthost) answers.
SERVER_REQUESTS: Final[Mapping[str, RequestSpec[Any, Any]]] = _table(
    PING_SPEC,
    ROOTS_LIST_SPEC,
    SAMPLING_CREATE_MESSAGE_SPEC,
    ELICITATION_CREATE_SPEC,
)

#: Notifications a client sends.
CLIENT_NOTIFICATIONS: Final[Mapping[str, NotificationSpec[Any]]] = _table(
    NotificationSpec(method=NOTIFICATION_INITIALIZED, params=None, until=_LAST_LEGACY),
    NotificationSpec(method=NOTIFICATION_CANCELLED, params=t.CancelledNotificationParams),
    NotificationSpec(method=NOTIFICATION_PROGRESS, params=t.ProgressNotificationParams),
    NotificationSpec(method=NOTIFICATION_ROOTS_LIST_CHANGED, params=None, until=_LAST_LEGACY),
)

#: Notifications a server sends.
SERVER_NOTIFICATIONS: Final[Mapping[str, NotificationSpec[Any]]] = _table(
    NotificationSpec(method=NOTIFICATION_CANCELLED, params=t.CancelledNotificationParams),
    NotificationSpec(method=NOTIFICATION_PROGRESS, params=t.ProgressNotificationParams),
    NotificationSpec(method=NOTIFICATION_MESSAGE, params=t.LoggingMessageNotificationParams),
    NotificationSpec(method=NOTIFICATION_TOOLS_LIST_CHANGED, params=None),
    NotificationSpec(method=NOTIFICATION_PROMPTS_LIST_CHANGED, params=None),
    NotificationSpec(method=NOTIFICATION_RESOURCES_LIST_CHANGED, params=None),
    NotificationSpec(
        method=NOTIFICATION_RESOURCES_UPDATED, params=t.ResourceUpdatedNotificationParams
    ),
    NotificationSpec(
        method=NOTIFICATION_ELICITATION_COMPLETE,
        params=t.ElicitationCompleteNotificationParams,
        since="2025-11-25",
    ),
    NotificationSpec(
        method=NOTIFICATION_TASKS_STATUS,
        params=t.TaskStatusNotificationParams,
        since="2025-11-25",
    ),
)


def available(
    spec: RequestSpec[Any, Any] | NotificationSpec[Any],
    revision: str,
    extensions: Collection[str] = (),
) -> bool:
    """Return whether ``revision`` has the method of ``spec`` (by position, not by text)
    and, for an extension's method, whether its extension is among ``extensions`` (those
    the server declared)."""
    if not at_least(revision, spec.since):
        return False
    if spec.until is not None and not at_least(spec.until, revision):
        return False
    extension = getattr(spec, "extension", None)
    return extension is None or extension in extensions


def declared_extensions(capabilities: object) -> frozenset[str]:
    """The extensions a server declared (``capabilities.extensions`` keys; kept in the
    capabilities' ``extra`` when the type does not model them)."""
    extensions = getattr(capabilities, "extensions", None)
    if extensions is None:
        extra = getattr(capabilities, "extra", None)
        extensions = extra.get("extensions") if isinstance(extra, Mapping) else None
    if not isinstance(extensions, Mapping):
        return frozenset()
    return frozenset(key for key in extensions if isinstance(key, str))


def request_spec(method: str, *, from_server: bool = False) -> RequestSpec[Any, Any] | None:
    """The spec of a request ``method`` sent by the client (or, with ``from_server``, by
    the server); ``None`` for a method that side does not send."""
    return (SERVER_REQUESTS if from_server else CLIENT_REQUESTS).get(method)


def notification_spec(method: str, *, from_server: bool = True) -> NotificationSpec[Any] | None:
    """The spec of a notification ``method`` sent by the server (or, with
    ``from_server=False``, by the client); ``None`` for one that side does not send."""
    return (SERVER_NOTIFICATIONS if from_server else CLIENT_NOTIFICATIONS).get(method)


def call_tool_params(
    name: str, arguments: Mapping[str, Any] | None, meta: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The JSON of :class:`~agenthost.protocol.types.CallToolRequestParams` without a task, built
    directly.

    Why: it is the same in every revision, and building the typed params and
    unstructuring them was a tenth of a tool call's client CPU (bench, "client CPU/call").
    ``tests/test_hot_path.py`` checks it equals the typed path for every revision.
    """
    params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
    if meta is not None:
        params["_meta"] = dict(meta)
    return params
