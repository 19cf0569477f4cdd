"""A hostile tasks server over stdio (MCP 2025-11-25 tasks, or the 2026-07-28 tasks
extension), for issue 28's findings.

Why it exists: the real task servers (tests/peers/tasks_server.py, the TS SDK) finish
their tasks; this one keeps a task ``working`` for ever, asks for the same input again
and again, never answers ``tasks/result``, floods status notifications, lists tasks by
the million and uses ids of a megabyte, so the host's own limits are what end each
exchange. Stdlib only; newline-delimited JSON-RPC.

Usage::

    python tests/hostile/hostile_tasks_server.py '{"era": "legacy", ...}'

Config keys (all optional):

- ``era``: ``"legacy"`` (``initialize``, 2025-11-25 tasks; the default) or ``"modern"``
  (``server/discover``, the ``io.modelcontextprotocol/tasks`` extension).
- ``status``: the status every ``tasks/get`` reports (``"working"``; ``"input_required"``,
  modern: with the same ``inputRequests`` key each time, a ``roots/list`` ask).
- ``complete_after``: after this many ``tasks/get`` the task is ``completed`` (and
  ``tasks/result`` answers); absent: never.
- ``result_hangs``: ``tasks/result`` is never answered.
- ``ttl``, ``poll``: the task's ttl and poll interval in ms (``null`` leaves one out).
- ``task_id``: the task's id (default ``"t1"``); ``task_id_bytes``: an id of that length.
- ``flood``: seconds during which ``notifications/tasks/status`` for the task is written
  without pause, from the moment the task is created.
- ``list``: ``{"per_page": N, "pages": P}`` for ``tasks/list`` (``P`` 0: without end).
- ``record``: a path; the method of every message received is appended, one a line.
- ``result_bytes``: the completed task's result text is this many bytes (default ``done``).
- ``output_schema``: the tool's ``outputSchema``; ``structured``: the completed task's
  ``structuredContent``.
- ``fail_quoting``: the name of an environment variable: the task ends ``failed``, its
  error (message and data) quoting that variable's value back (a secret the host gave it).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
NOW = "2026-01-01T00:00:00Z"


class Server:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.modern = config.get("era") == "modern"
        self.task_id = str(config.get("task_id", "t1"))
        if "task_id_bytes" in config:
            self.task_id = "x" * int(config["task_id_bytes"])
        self.gets = 0
        self.lock = threading.Lock()

    def write(self, message: dict[str, Any]) -> None:
        with self.lock:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
            sys.stdout.flush()

    def result_text(self) -> str:
        size = self.config.get("result_bytes")
        return "done" if size is None else "r" * int(size)

    def result(self) -> dict[str, Any]:
        result: dict[str, Any] = {"content": [{"type": "text", "text": self.result_text()}]}
        if "structured" in self.config:
            result["structuredContent"] = self.config["structured"]
        return result

    def error(self) -> dict[str, Any]:
        quoted = os.environ.get(str(self.config.get("fail_quoting")), "")
        return {"code": -32603, "message": f"bad key {quoted}", "data": {"key": quoted}}

    def status(self) -> str:
        if "fail_quoting" in self.config:
            return "failed"
        after = self.config.get("complete_after")
        if after is not None and self.gets >= int(after):
            return "completed"
        return str(self.config.get("status", "working"))

    def task(self) -> dict[str, Any]:
        ttl, poll = self.config.get("ttl", 60_000), self.config.get("poll", 50)
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status(),
            "createdAt": NOW,
            "lastUpdatedAt": NOW,
        }
        if self.modern:
            task |= {"ttlMs": ttl, "pollIntervalMs": poll}
            if task["status"] == "input_required":
                ask = {"method": "roots/list", "params": {}}
                task["inputRequests"] = {"again": ask}
            elif task["status"] == "completed":
                task["result"] = self.result()
            elif task["status"] == "failed":
                task["error"] = self.error()
        else:
            task |= {"ttl": ttl, "pollInterval": poll}
        return {k: v for k, v in task.items() if v is not None}

    def flood(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        note = {
            "method": "notifications/tasks/status",
            "params": {k: v for k, v in self.task().items() if k != "resultType"},
        }
        while time.monotonic() < end:
            self.write(note)

    def tasks_page(self, cursor: str | None) -> dict[str, Any]:
        spec = self.config.get("list", {"per_page": 1, "pages": 1})
        number = int(cursor or 0)
        tasks = [
            {
                "taskId": f"t{number}-{k}",
                "status": "working",
                "createdAt": NOW,
                "lastUpdatedAt": NOW,
            }
            for k in range(int(spec["per_page"]))
        ]
        page: dict[str, Any] = {"tasks": tasks}
        if spec["pages"] == 0 or number + 1 < spec["pages"]:
            page["nextCursor"] = str(number + 1)
        return page

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The result for ``method``, or None to leave it unanswered."""
        tool = {"name": "slow", "description": "Runs for ever.", "inputSchema": {"type": "object"}}
        if not self.modern:
            tool["execution"] = {"taskSupport": "required"}
        if "output_schema" in self.config:
            tool["outputSchema"] = self.config["output_schema"]
        if method == "initialize":
            tasks: dict[str, Any] = {"requests": {"tools": {"call": {}}}, "list": {}, "cancel": {}}
            return {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "tasks": tasks},
                "serverInfo": {"name": "hostile-tasks", "version": "1.0.0"},
            }
        if method == "server/discover":
            if not self.modern:
                raise LookupError(method)
            return {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "extensions": {TASKS_EXTENSION: {}}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "h", "version": "1"}},
            }
        if method == "tools/list":
            return {"tools": [tool]}
        if method == "tools/call":
            if "flood" in self.config:
                threading.Thread(target=self.flood, args=(self.config["flood"],)).start()
            return self.task() | {"resultType": "task"} if self.modern else {"task": self.task()}
        if method == "tasks/get":
            self.gets += 1
            return self.task()
        if method == "tasks/result":
            if self.config.get("result_hangs") or self.status() != "completed":
                return None
            return self.result()
        if method == "tasks/cancel":
            return {} if self.modern else self.task() | {"status": "cancelled"}
        if method == "tasks/list":
            return self.tasks_page(params.get("cursor"))
        if method in ("tasks/update", "ping"):
            return {}
        raise LookupError(method)

    def serve(self) -> None:
        record = self.config.get("record")
        for line in sys.stdin:
            if not line.strip():
                continue
            message = json.loads(line)
            method = message.get("method")
            if record and method:
                with open(record, "a", encoding="utf-8") as log:
                    log.write(method + "\n")
            if "id" not in message or method is None:
                continue
            try:
                result = self.answer(method, message.get("params") or {})
            except LookupError:
                error = {"code": -32601, "message": f"Method not found: {method}"}
                self.write({"id": message["id"], "error": error})
                continue
            if result is None and method == "tasks/result" and self.status() == "failed":
                self.write({"id": message["id"], "error": self.error()})
            elif result is not None:
                self.write({"id": message["id"], "result": result})


if __name__ == "__main__":
    Server(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}).serve()
