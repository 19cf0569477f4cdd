"""What a tool call is, for consent, and how it reaches its server: plainly or as a task.

:func:`tool_call_action` is what the policy decides on: the call, and the definition of
the tool the user saw (a remembered "always" holds only while all of it is unchanged).
:class:`ToolRouter` sends the call once the policy agreed, choosing between a plain
``tools/call`` and a task (2025-11-25's, or the 2026-07-28 tasks extension), and
remembers the tools that turned out to want a task.
"""

from __future__ import annotations

import math
import os
import urllib.parse
from collections.abc import Mapping
from typing import Any, Final

import trio

from agenthost._util import DEFAULT, Timeout
from agenthost.config.model import PROXY_ENV_VARS, ServerConfig
from agenthost.errors import JSONRPCError
from agenthost.host.catalog import CatalogTool, annotation_hints
from agenthost.protocol.types import CallToolResult, Tool
from agenthost.session import ClientSession, ProgressCallback
from agenthost.tool_tasks import (
    TaskCreatedCallback,
    call_tool_as_task,
    call_tool_via_extension,
    needs_tasks_extension,
    offers_tasks_extension,
    wants_task,
)
from agenthost_policies import ToolCall, ToolDefinition

__all__ = ["ToolRouter", "repeatable", "tool_call_action"]

#: (server, tool) pairs remembered as "run as a task" (a bound: tool names are server text).
MAX_TASK_TOOLS: Final = 4096


def tool_call_action(
    entry: CatalogTool, config: ServerConfig, arguments: Mapping[str, Any] | None
) -> ToolCall:
    """The policy's view of calling ``entry`` with ``arguments`` on the server of ``config``.

    The annotations are the server's (trusted only when the server is); the definition
    names the tool as listed and how its server is reached and run.
    """
    tool = entry.tool
    hints = annotation_hints(tool.annotations)
    return ToolCall(
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


def repeatable(tool: Tool) -> bool:
    """Whether calling ``tool`` twice adds nothing: the server says read-only or idempotent."""
    hints = tool.annotations
    return hints is not None and (hints.read_only_hint is True or hints.idempotent_hint is True)


class ToolRouter:
    """Sends tool calls the policy agreed to, as tasks when they should be.

    Owns the memory of which (server, tool) run as tasks from now on: a call took the
    server's ``timeouts.task_after`` or longer, or a 2026-07-28 server refused it
    undeclared. Bounded at :data:`MAX_TASK_TOOLS`, oldest first out.
    """

    def __init__(self) -> None:
        self._task_tools: dict[tuple[str, str], None] = {}

    async def call(
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
        """One call, as a task or not (see :meth:`Host.call_tool`); the policy already
        agreed. ``meta`` is sent on a plain call only."""
        name = entry.tool.name
        key = (entry.server, name)
        # A tool whose outputSchema agenthost refuses is not run, as a task neither.
        session.refuse_unusable(name)
        task_after = config.timeouts.task_after
        # The caller's limit wins; else timeouts.task; else (session default) request.
        task_limit: Timeout = timeout
        if timeout is DEFAULT and config.timeouts.task is not None:
            task_limit = None if math.isinf(config.timeouts.task) else config.timeouts.task
        chosen = task is True or (task is None and (task_after <= 0 or key in self._task_tools))
        if task is not False and offers_tasks_extension(session):
            # 2026-07-28: the server decides; declaring the extension lets it.
            if chosen:
                result = await call_tool_via_extension(
                    session,
                    name,
                    arguments,
                    progress=progress,
                    timeout=task_limit,
                    on_created=on_task,
                )
                return await session.checked_output(name, result)
        elif task is not False and wants_task(
            entry.tool, session.server_capabilities, optional=chosen
        ):
            # 2025-11-25: a tool whose taskSupport is "required", or "optional" by choice.
            result = await call_tool_as_task(
                session, name, arguments, progress=progress, timeout=task_limit, on_created=on_task
            )
            return await session.checked_output(name, result)
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
            self._remember(key)
            result = await call_tool_via_extension(
                session, name, arguments, progress=progress, timeout=task_limit, on_created=on_task
            )
            return await session.checked_output(name, result)
        finally:
            if task is None and trio.current_time() - started >= task_after:
                self._remember(key)

    def _remember(self, key: tuple[str, str]) -> None:
        self._task_tools[key] = None
        if len(self._task_tools) > MAX_TASK_TOOLS:
            del self._task_tools[next(iter(self._task_tools))]


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
