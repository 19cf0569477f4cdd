"""Task types of 2025-11-25 (the experimental tasks utility).

:mod:`agenthost.tool_tasks` drives tool calls as tasks with them (and speaks the 2026-07-28
tasks extension, whose shapes it reads as raw JSON), and :mod:`agenthost.ask_tasks`
serves a server's task-augmented asks. Task status is an open string so a newer server's
states pass through.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from agenthost.protocol.types._base import Cursor, Record

__all__ = [
    "CreateTaskResult",
    "GetTaskResult",
    "ListTasksResult",
    "Task",
    "TaskMetadata",
    "TaskRequestParams",
    "TaskStatusNotificationParams",
    "UpdateTaskRequestParams",
]


@attrs.frozen(kw_only=True, eq=False, repr=False)
class TaskMetadata(Record):
    """Asks the receiver to run a request as a task (the ``task`` request param)."""

    __mcp_since__: ClassVar[str] = "2025-11-25"

    #: Requested retention after creation, in milliseconds.
    ttl: int | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class Task(Record):
    """The state of one task."""

    __mcp_since__: ClassVar[str] = "2025-11-25"

    task_id: str
    #: ``working``, ``input_required``, ``completed``, ``failed``, ``cancelled``, ...
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    #: Retention in milliseconds; ``None`` means unlimited.
    ttl: int | None = None
    #: Suggested polling interval in milliseconds.
    poll_interval: int | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class CreateTaskResult(Record):
    """The answer to a task-augmented request: the task, not yet its result."""

    __mcp_since__: ClassVar[str] = "2025-11-25"

    task: Task
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class GetTaskResult(Task):
    """The result of ``tasks/get``."""

    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ListTasksResult(Record):
    """The result of ``tasks/list``."""

    __mcp_since__: ClassVar[str] = "2025-11-25"

    tasks: list[Task]
    next_cursor: Cursor | None = None
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class TaskStatusNotificationParams(Task):
    """Params of ``notifications/tasks/status``."""

    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class TaskRequestParams(Record):
    """Params of ``tasks/get``, ``tasks/result`` and ``tasks/cancel`` (both the 2025-11-25
    utility and the 2026-07-28 extension): the task they are about."""

    __mcp_since__: ClassVar[str] = "2025-11-25"

    task_id: str
    meta: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False, repr=False)
class UpdateTaskRequestParams(Record):
    """Params of ``tasks/update`` (2026-07-28 tasks extension): the answers to the asks of
    a task that is ``input_required``, keyed as the server keyed the asks."""

    __mcp_since__: ClassVar[str] = "2026-07-28"

    task_id: str
    input_responses: dict[str, Any]
    meta: dict[str, Any] | None = None
