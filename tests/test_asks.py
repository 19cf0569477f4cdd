"""The ask router (agenthost.asks) on its own: plain dicts in, plain dicts out, no session.

Every server ask, from a legacy server's own request or from an MRTR round, is looked up
in the method table and answered through the same handlers; these tests pin that
dispatch and the bounds on untrusted input without any transport.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import trio

from agenthost.ask_tasks import AskTaskLimits, AskTaskStore
from agenthost.asks import (
    ASK_METHODS,
    MAX_ASKS_PER_ROUND,
    AskRouter,
    ClientHandlers,
    RequestContext,
    tasks_declared,
)
from agenthost.errors import JSONRPCError, ProtocolError
from agenthost.protocol import methods as m
from agenthost.protocol.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ListRootsResult,
    Root,
    TextContent,
)

LEGACY = "2025-11-25"
MODERN = "2026-07-28"


def router(seen: list[RequestContext] | None = None, **overrides: Any) -> AskRouter:
    log: list[RequestContext] = [] if seen is None else seen

    async def roots(ctx: RequestContext, params: Mapping[str, Any]) -> ListRootsResult:
        log.append(ctx)
        return ListRootsResult(roots=[Root(uri="file:///w", name="w")])

    async def sampling(
        ctx: RequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        log.append(ctx)
        return CreateMessageResult(
            role="assistant", content=TextContent(text=f"{params.max_tokens}"), model="m"
        )

    async def elicitation(ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
        log.append(ctx)
        return ElicitResult(action="decline")

    handlers: dict[str, Any] = {"roots": roots, "sampling": sampling, "elicitation": elicitation}
    handlers.update(overrides)
    return AskRouter(ClientHandlers(**handlers), server="srv")


SAMPLE = {"messages": [], "maxTokens": 7}


def test_the_asks_are_the_server_requests_of_the_table_that_need_a_capability() -> None:
    assert {"roots/list", "sampling/createMessage", "elicitation/create"} == ASK_METHODS
    for method in ASK_METHODS:
        spec = m.SERVER_REQUESTS[method]
        assert spec.capability is not None
        assert hasattr(ClientHandlers(), spec.capability)
    assert m.PING_SPEC.capability is None


def test_declared_follows_the_handlers() -> None:
    assert router().declared == ASK_METHODS
    assert router(sampling=None).declared == {"roots/list", "elicitation/create"}
    assert AskRouter(ClientHandlers(), server="s").declared == frozenset()


async def test_each_ask_reaches_its_handler_typed_and_comes_back_as_json() -> None:
    seen: list[RequestContext] = []
    asks = router(seen)
    answer = await asks.handle_request(
        "sampling/createMessage", SAMPLE, revision=LEGACY, request_id=3
    )
    assert answer == {
        "role": "assistant",
        "content": {"type": "text", "text": "7"},
        "model": "m",
    }
    assert await asks.handle_request("roots/list", {}, revision=LEGACY, request_id=4) == {
        "roots": [{"uri": "file:///w", "name": "w"}]
    }
    assert await asks.handle_request(
        "elicitation/create",
        {"message": "?", "requestedSchema": {"type": "object", "properties": {}}},
        revision=LEGACY,
        request_id=5,
    ) == {"action": "decline"}
    assert [(c.method, c.request_id, c.server, c.round) for c in seen] == [
        ("sampling/createMessage", 3, "srv", None),
        ("roots/list", 4, "srv", None),
        ("elicitation/create", 5, "srv", None),
    ]


async def test_ping_needs_no_handler() -> None:
    asks = AskRouter(ClientHandlers(), server="s")
    assert await asks.handle_request("ping", {}, revision=LEGACY, request_id=1) == {}


@pytest.mark.parametrize("method", ["sampling/createMessage", "tools/call", "tasks/get", "x"])
async def test_an_undeclared_or_unknown_method_is_method_not_found(method: str) -> None:
    asks = router(sampling=None)
    with pytest.raises(JSONRPCError) as info:
        await asks.handle_request(method, SAMPLE, revision=LEGACY, request_id=1)
    assert info.value.code == -32601


async def test_bad_params_are_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        await router().handle_request(
            "sampling/createMessage", {"maxTokens": "x"}, revision=LEGACY, request_id=1
        )


async def test_an_mrtr_round_names_origin_round_and_key_truncated() -> None:
    seen: list[RequestContext] = []
    answers = await router(seen).answer_input_requests(
        {
            "k" * 300: {"method": "roots/list"},
            "s": {"method": "sampling/createMessage", "params": SAMPLE},
        },
        round_no=2,
        revision=MODERN,
        origin="tools/call",
        origin_name="t" * 300,
    )
    assert list(answers) == ["k" * 300, "s"]
    assert answers["s"]["model"] == "m"
    by_method = {c.method: c for c in seen}
    roots = by_method["roots/list"]
    assert (roots.origin, roots.round, roots.revision) == ("tools/call", 2, MODERN)
    assert roots.input_key == "k" * 200 and roots.origin_name == "t" * 200
    assert roots.via() == {
        "request": "tools/call",
        "name": "t" * 200,
        "round": 2,
        "input": "k" * 200,
    }


@pytest.mark.parametrize(
    ("requests", "says"),
    [
        ({"a": {"method": "tools/call"}}, "is not an elicitation"),
        ({"a": "nope"}, "is not an elicitation"),
        ({"a": {"method": "sampling/createMessage", "params": SAMPLE}}, "did not declare"),
        ({"a": {"method": "roots/list", "params": [1]}}, "bad params"),
        ({str(i): {"method": "roots/list"} for i in range(MAX_ASKS_PER_ROUND + 1)}, "at most"),
    ],
)
async def test_a_round_outside_the_bounds_is_refused_before_any_handler_runs(
    requests: dict[str, Any], says: str
) -> None:
    seen: list[RequestContext] = []
    with pytest.raises(ProtocolError, match=says):
        await router(seen, sampling=None).answer_input_requests(
            requests, round_no=1, revision=MODERN, origin="tools/call", origin_name=None
        )
    assert seen == []


async def test_one_refused_ask_fails_the_round_with_its_own_error() -> None:
    async def refuse(ctx: RequestContext, params: Any) -> ListRootsResult:
        raise JSONRPCError(-1, "no")

    with pytest.raises(JSONRPCError, match="no"):
        await router(roots=refuse).answer_input_requests(
            {"a": {"method": "roots/list"}},
            round_no=1,
            revision=MODERN,
            origin="prompts/get",
            origin_name="p",
        )


async def test_an_ask_sent_as_a_task_runs_through_the_same_handler() -> None:
    seen: list[RequestContext] = []
    notes: list[tuple[str, dict[str, Any]]] = []

    async def notify(method: str, params: dict[str, Any]) -> None:
        notes.append((method, params))

    async with trio.open_nursery() as nursery:

        def spawn(work: Any) -> bool:
            nursery.start_soon(work)
            return True

        store = AskTaskStore(AskTaskLimits(), server="srv", spawn=spawn, notify=notify)
        asks = router(seen)
        asks.ask_tasks = store
        created = await asks.handle_request(
            "sampling/createMessage",
            {**SAMPLE, "task": {"ttl": 60_000}},
            revision=LEGACY,
            request_id=9,
        )
        task_id = created["task"]["taskId"]
        result = await asks.handle_request(
            "tasks/result", {"taskId": task_id}, revision=LEGACY, request_id=10
        )
        nursery.cancel_scope.cancel()  # the store keeps a finished task until its ttl
    assert result["model"] == "m"
    assert [(c.method, c.task_id) for c in seen] == [("sampling/createMessage", task_id)]
    assert seen[0].via() == {"task": task_id}


def test_the_tasks_utility_is_declared_in_2025_11_25_only() -> None:
    assert tasks_declared("2025-11-25")
    assert not tasks_declared("2025-06-18")
    assert not tasks_declared(MODERN)
