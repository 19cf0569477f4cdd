"""Sessionless (2026-07-28) clients of ``agenthost serve --http`` reach no one else's tasks.

The gateway runs in process (:func:`serve_http` on loopback, in front of the hostile tasks
server, whose tasks never end); the clients are raw HTTP POSTs, so that each attack is the
exact bytes a hostile client would send. A sessionless request has no owner other
requests share: its task is reached by the id it was given and nothing lists it (the
2026-07-28 tasks extension has no ``tasks/list``); a POST may not mix the eras, so a
legacy ``initialize`` cannot turn a sessionless POST into a session that lists tasks.
Positive controls: the client that created a task does read and cancel it by its id, and
a legacy session does list its own.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from agenthost.config.model import HostConfig, ServerConfig
from agenthost.serve import open_gateway
from agenthost.serve.http import serve_http
from agenthost.tool_tasks import TASKS_EXTENSION

SERVER = str(Path(__file__).resolve().parent / "hostile_tasks_server.py")
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _meta(extensions: bool = True) -> dict[str, Any]:
    caps: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}} if extensions else {}
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
    }


def _request(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def _modern(rid: int, method: str, **params: Any) -> dict[str, Any]:
    return _request(rid, method, {**params, "_meta": _meta()})


def _initialize(rid: int = 1) -> dict[str, Any]:
    return _request(
        rid,
        "initialize",
        {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "mallory", "version": "1"},
        },
    )


class Gate:
    """The gateway's URL and a raw HTTP client for it."""

    def __init__(self, url: str, client: httpx.AsyncClient) -> None:
        self.url = url
        self.client = client

    async def post(
        self, body: Any, *, version: str | None = MODERN, session: str | None = None
    ) -> tuple[httpx.Response, list[dict[str, Any]]]:
        """One POST; the response and the JSON-RPC messages it carried (SSE or JSON)."""
        headers = dict(HEADERS)
        if version is not None:
            headers["mcp-protocol-version"] = version
        if session is not None:
            headers["mcp-session-id"] = session
        response = await self.client.post(self.url, content=json.dumps(body), headers=headers)
        text = response.text
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            messages = [
                json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")
            ]
        elif response.headers.get("content-type", "").startswith("application/json"):
            parsed = json.loads(text)
            messages = parsed if isinstance(parsed, list) else [parsed]
        else:
            messages = []
        return response, messages

    async def start_task(self) -> str:
        """A sessionless client's tool call run as a task: its id."""
        _, answer = await self.post(_modern(1, "tools/call", name="slow", arguments={}))
        result = answer[-1]["result"]
        assert result["resultType"] == "task", answer
        task_id: str = result["taskId"]
        return task_id


@asynccontextmanager
async def _gate() -> AsyncIterator[Gate]:
    upstream = ServerConfig(
        name="ht",
        transport="stdio",
        command=sys.executable,
        args=(SERVER, json.dumps({"status": "working"})),
    )
    policy = {"mode": "headless", "preset": "unsafe-allow-everything"}
    config = HostConfig(servers=[upstream], policy=policy)
    async with open_gateway(config) as gateway, trio.open_nursery() as nursery:
        port = await nursery.start(
            functools.partial(serve_http, token=None), gateway, "127.0.0.1", 0
        )
        url = f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient(timeout=20) as client:
            yield Gate(url, client)
        nursery.cancel_scope.cancel()


def _results(messages: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {m["id"]: m for m in messages if "id" in m and ("result" in m or "error" in m)}


@pytest.mark.timeout(60)
async def test_a_legacy_initialize_in_a_sessionless_post_lists_no_ones_tasks() -> None:
    """Cross-tenant tasks/list: ``[initialize(2025-11-25), tasks/list]`` POSTed with the
    2026-07-28 header and no session went the sessionless way, with the legacy revision,
    and listed (then could cancel) every sessionless client's tasks."""
    with trio.fail_after(45):
        async with _gate() as gate:
            victim = await gate.start_task()
            response, messages = await gate.post([_initialize(), _request(2, "tasks/list", {})])
            listed = json.dumps(messages)
            assert victim not in listed, messages
            assert response.status_code == 400, (response.status_code, messages)
            # Positive control: the victim does read its task by its id.
            _, seen = await gate.post(_modern(3, "tasks/get", taskId=victim))
            assert seen[-1]["result"]["status"] == "working", seen


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "attack",
    [
        "legacy-list-in-session",  # an initialize with the modern header: a session's list
        "unstamped-list",  # a legacy tasks/list, no initialize, sessionless header
        "modern-list",  # 2026-07-28 has no tasks/list
        "legacy-get-by-id",  # a legacy session that learned the id
        "non-string-stamp",  # a stamp the session does not take for one: served as legacy
    ],
)
async def test_no_other_way_reaches_a_sessionless_clients_task(attack: str) -> None:
    with trio.fail_after(45):
        async with _gate() as gate:
            victim = await gate.start_task()
            if attack == "legacy-list-in-session":
                response, messages = await gate.post(_initialize(), version=LEGACY)
                sid = response.headers["mcp-session-id"]
                _, messages = await gate.post(
                    _request(2, "tasks/list", {}), version=LEGACY, session=sid
                )
                assert messages[-1]["result"]["tasks"] == [], messages
            elif attack == "unstamped-list":
                _, messages = await gate.post(_request(2, "tasks/list", {}))
            elif attack == "non-string-stamp":
                stamp = {"io.modelcontextprotocol/protocolVersion": 20260728}
                init = _initialize()
                init["params"]["_meta"] = stamp
                response, messages = await gate.post(
                    [init, _request(2, "tasks/list", {"_meta": stamp})]
                )
                assert response.status_code == 400, messages
            elif attack == "modern-list":
                _, messages = await gate.post(_modern(2, "tasks/list"))
                assert messages[-1]["error"]["code"] == -32601, messages
            else:
                response, _ = await gate.post(_initialize(), version=LEGACY)
                sid = response.headers["mcp-session-id"]
                for method in ("tasks/get", "tasks/cancel", "tasks/result"):
                    _, messages = await gate.post(
                        _request(2, method, {"taskId": victim}), version=LEGACY, session=sid
                    )
                    assert "unknown task" in messages[-1]["error"]["message"], messages
                messages = []  # the error quotes back the id the attacker sent: nothing more
            assert victim not in json.dumps(messages), messages
            _, seen = await gate.post(_modern(3, "tasks/get", taskId=victim))
            assert seen[-1]["result"]["status"] == "working", seen


@pytest.mark.timeout(60)
async def test_a_legacy_sessions_task_is_no_sessionless_clients() -> None:
    """The other way round: a 2025-11-25 session's task id, sent by a sessionless request
    (or another session), is an unknown task; its own session lists and reads it."""
    with trio.fail_after(45):
        async with _gate() as gate:
            response, _ = await gate.post(_initialize(), version=LEGACY)
            sid = response.headers["mcp-session-id"]
            call = _request(2, "tools/call", {"name": "slow", "arguments": {}, "task": {}})
            _, created = await gate.post(call, version=LEGACY, session=sid)
            task_id = created[-1]["result"]["task"]["taskId"]
            for method in ("tasks/get", "tasks/cancel"):
                _, seen = await gate.post(_modern(3, method, taskId=task_id))
                assert "unknown task" in seen[-1]["error"]["message"], seen
            response, _ = await gate.post(_initialize(), version=LEGACY)
            other = response.headers["mcp-session-id"]
            _, seen = await gate.post(_request(4, "tasks/list", {}), version=LEGACY, session=other)
            assert seen[-1]["result"]["tasks"] == [], seen
            # Positive control: its own session lists it, still working.
            _, seen = await gate.post(_request(5, "tasks/list", {}), version=LEGACY, session=sid)
            assert [t["taskId"] for t in seen[-1]["result"]["tasks"]] == [task_id], seen
            assert seen[-1]["result"]["tasks"][0]["status"] == "working", seen


@pytest.mark.timeout(60)
async def test_a_post_may_not_mix_the_eras() -> None:
    """A modern request beside a legacy one (with or without a session) is refused as a
    whole with a one-line reason: the POST is neither a session's nor sessionless."""
    with trio.fail_after(45):
        async with _gate() as gate:
            response, _ = await gate.post(_initialize(), version=LEGACY)
            sid = response.headers["mcp-session-id"]
            mixed = [_request(2, "tools/list", {}), _modern(3, "tools/list")]
            for session, version in ((sid, LEGACY), (None, MODERN), (None, None)):
                response, messages = await gate.post(mixed, version=version, session=session)
                assert response.status_code == 400, (session, version, messages)
                error = messages[0]["error"]
                assert error["code"] == -32600 and "mix" in error["message"], messages
            # Positive control: each era alone is served.
            _, alone = await gate.post(_modern(4, "tools/list"))
            assert "slow" in json.dumps(alone), alone
            _, legacy = await gate.post(_request(5, "tools/list", {}), version=LEGACY, session=sid)
            assert "slow" in json.dumps(legacy), legacy


@pytest.mark.timeout(60)
async def test_a_sessionless_task_is_reached_by_its_id_alone() -> None:
    """The id is the capability: another sessionless POST with the id reads and cancels
    the task (as the 2026-07-28 extension allows); a made-up id is an unknown task."""
    with trio.fail_after(45):
        async with _gate() as gate:
            first, second = await gate.start_task(), await gate.start_task()
            _, seen = await gate.post(_modern(2, "tasks/cancel", taskId=first))
            assert "error" not in seen[-1], seen
            _, seen = await gate.post(_modern(3, "tasks/get", taskId=first))
            assert seen[-1]["result"]["status"] == "cancelled", seen
            _, seen = await gate.post(_modern(4, "tasks/get", taskId=second))
            assert seen[-1]["result"]["status"] == "working", seen
            _, seen = await gate.post(_modern(5, "tasks/get", taskId=first[:-2] + "xx"))
            assert "unknown task" in seen[-1]["error"]["message"], seen
