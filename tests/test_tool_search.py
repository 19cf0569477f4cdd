"""Tool search (issue 27, section 1): ten real servers with 300 tools, search on and off.

The servers are the official SDK's low-level ``Server`` (tests/peers/many_tools_server.py);
the model is the scripted replay (neutral search), or Anthropic's Messages API or OpenAI's
Responses API answered by a MockTransport (native ``defer_loading``); the host, consent and
the agent run for real.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest

from agenthost.agent.budget import estimate_tokens, tool_tokens
from agenthost.agent.tool_search import SEARCH_TOOL, ToolIndex, search_wanted
from agenthost.config.model import AgentSettings, HostConfig, ServerConfig
from agenthost.host.host import open_host
from agenthost_providers.base import Request, Tool, ToolUseContent
from agenthost_providers.scripted import ScriptedProvider, ScriptedTurn
from tests.forkserver import peer_python
from tests.helpers import ALLOW_ALL, host_with_anthropic, host_with_provider
from tests.peers.many_tools_server import THEMES, tools_of
from tests.providers.providers_helpers import (
    anthropic_message,
    function_call,
    output_text,
    responses_reply,
    tool_search_call,
)

PEER = Path(__file__).parent / "peers" / "many_tools_server.py"

pytestmark = pytest.mark.timeout(60)


def servers(themes: Sequence[str] = tuple(THEMES)) -> list[ServerConfig]:
    return [
        ServerConfig(name=t, transport="stdio", command=peer_python(), args=(str(PEER), t))
        for t in themes
    ]


def config(**agent: Any) -> HostConfig:
    return HostConfig(servers=servers(), policy=ALLOW_ALL, agent=AgentSettings(**agent))


def use(call_id: str, tool: str, /, **args: Any) -> ToolUseContent:
    return ToolUseContent(id=call_id, name=tool, input=args)


def all_tools() -> list[Tool]:
    return [
        Tool(
            name=f"{theme}__{t.name}",
            description=t.description,
            input_schema=t.input_schema,
        )
        for theme in THEMES
        for t in tools_of(theme)
    ]


def request_tokens(request: Request) -> int:
    """The estimated input tokens of one request: what a provider would send."""
    tools = [tool_tokens(t) for t in request.tools]
    messages = [attrs.asdict(m) for m in request.messages]
    return sum(tools) + estimate_tokens(messages) + estimate_tokens(request.system_prompt or "")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("create a meeting event on the team calendar", "calendar__create_event"),
        ("create a pull request", "github__create_pull_request"),
        ("create a refund for a customer", "billing__create_refund"),
        ("delete a kubernetes secret", "k8s__delete_secret"),
        ("weather forecast", "weather__get_forecast"),
        ("list the slack channels", "slack__list_channel"),
        ("k8s__list_pod", "k8s__list_pod"),
    ],
)
def test_bm25_finds_the_right_tool_among_300(query: str, expected: str) -> None:
    found = [t.name for t in ToolIndex(all_tools()).search(query, limit=3)]
    assert expected in found, found


def test_auto_turns_on_above_100_tools_or_a_tenth_of_the_window() -> None:
    tools = all_tools()
    assert search_wanted("auto", tools[:30], 200_000) is False
    assert search_wanted("auto", tools[:101], 10_000_000) is True  # the count alone
    assert search_wanted("auto", tools[:30], 30_000) is True  # the tokens alone
    assert search_wanted(False, tools, 200_000) is False
    assert search_wanted(True, tools[:1], 200_000) is True


async def test_scripted_model_searches_loads_and_calls_the_right_tool() -> None:
    replay = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=(use("s1", SEARCH_TOOL, query="create a calendar event"),)),
            ScriptedTurn(tool_calls=(use("c1", "calendar__create_event", name="standup"),)),
            ScriptedTurn(text="Created the standup event."),
        ],
        name="replay",
    )
    async with open_host(config(), providers={"replay": replay}) as host:
        assert len(host.tools()) == 300
        transcript = await host.run_agent("add a standup", provider="replay", model="r")
    assert transcript.stop == "end_turn"
    first, second, third = replay.requests
    # Searching: only the search tool, which names every server.
    assert [t.name for t in first.tools] == [SEARCH_TOOL]
    assert "300 tools" in (first.tools[0].description or "")
    search, call = transcript.tool_calls
    assert search.output.splitlines()[1].startswith("- calendar__create_event: Create a new")
    # The tools found are offered in full from the next request on, and stay loaded.
    offered = {t.name: t for t in second.tools}
    assert "calendar__create_event" in offered and SEARCH_TOOL in offered
    server_tool = next(t for t in tools_of("calendar") if t.name == "create_event")
    assert dict(offered["calendar__create_event"].input_schema) == server_tool.input_schema
    assert len(second.tools) == 1 + len(transcript.loaded_tools) <= 6
    assert [t.name for t in third.tools] == [t.name for t in second.tools]
    # The call went to the real server, through the policy.
    assert (call.status, call.server) == ("ok", "calendar")
    assert call.output == 'calendar__create_event called with {"name": "standup"}'


async def test_measured_input_tokens_per_request_search_on_vs_off(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The figure the issue asks for: 10 servers, 300 tools, the same task both ways."""
    figures = {}
    for search in (False, True):
        turns = [
            ScriptedTurn(tool_calls=(use("c1", "calendar__create_event", name="standup"),)),
            ScriptedTurn(text="Created."),
        ]
        if search:
            query = use("s1", SEARCH_TOOL, query="create a calendar event")
            turns.insert(0, ScriptedTurn(tool_calls=(query,)))
        replay = ScriptedProvider(turns, name="replay")
        async with open_host(config(tool_search=search), providers={"replay": replay}) as host:
            transcript = await host.run_agent("add a standup", provider="replay", model="r")
        assert transcript.tool_calls[-1].status == "ok"
        figures[search] = [request_tokens(r) for r in replay.requests]
        if not search:  # every tool, and no search tool
            assert {len(r.tools) for r in replay.requests} == {300}
            assert SEARCH_TOOL not in {t.name for t in replay.requests[0].tools}
    off, on = figures[False], figures[True]
    with capsys.disabled():
        print(
            f"\ntool search, 10 servers / 300 tools, estimated input tokens per request:"
            f" off {off} (total {sum(off)}), on {on} (total {sum(on)})"
        )
    assert max(on) * 10 < min(off)  # every request with search costs < a tenth of one without
    assert sum(on) * 5 < sum(off)  # and so does the whole task, one extra turn included


def _anthropic_api(bodies: list[dict[str, Any]]) -> Any:
    answers: list[list[dict[str, Any]]] = [
        [
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": SEARCH_TOOL,
                "input": {"query": "get the weather forecast"},
            }
        ],
        [
            {
                "type": "tool_use",
                "id": "toolu_2",
                "name": "weather__get_forecast",
                "input": {"forecast_id": "paris"},
            }
        ],
        [{"type": "text", "text": "Sunny."}],
    ]

    def api(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        content = answers[len(bodies) - 1]
        stop = "tool_use" if content[0]["type"] == "tool_use" else "end_turn"
        return anthropic_message(content, stop_reason=stop)

    return api


async def test_anthropic_native_defer_loading_and_tool_references() -> None:
    bodies: list[dict[str, Any]] = []
    async with host_with_anthropic(servers(), ALLOW_ALL, _anthropic_api(bodies)) as host:
        transcript = await host.run_agent("weather in Paris?")
    assert transcript.stop == "end_turn", transcript.error
    first, second, _ = bodies
    # Every server tool is sent, marked deferred; the search tool is not deferred.
    tools = {t["name"]: t for t in first["tools"]}
    assert len(tools) == 301
    assert "defer_loading" not in tools[SEARCH_TOOL]
    assert all(t.get("defer_loading") is True for n, t in tools.items() if n != SEARCH_TOOL)
    assert tools["weather__get_forecast"]["input_schema"]["required"] == ["forecast_id"]
    # The search answers with tool_reference blocks (the API expands them)...
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    refs = [block["tool_name"] for block in result["content"]]
    assert refs[0] == "weather__get_forecast"
    assert all(
        block == {"type": "tool_reference", "tool_name": n}
        for block, n in zip(result["content"], refs, strict=True)
    )
    # ... which stay in the conversation; the tool list does not change (the cache holds).
    assert second["tools"] == first["tools"]
    assert transcript.loaded_tools[0] == "weather__get_forecast"
    assert transcript.tool_calls[1].output.startswith("weather__get_forecast called with")


OPENAI_RESPONSES = {"openai": {"kind": "openai", "api": "responses"}}
OPENAI_ENV = {"OPENAI_API_KEY": "test-key"}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB"}


def _responses_api(bodies: list[dict[str, Any]], *, search: bool = True) -> Any:
    """The Responses API: a client-side tool search (when offered), then the tool it
    found, then an answer; each reply shaped as ``POST /v1/responses`` returns it."""
    answers = [
        [REASONING, function_call("call_2", "weather__get_forecast", {"forecast_id": "paris"})],
        [output_text("Sunny.")],
    ]
    if search:
        answers.insert(0, [tool_search_call("call_1", {"query": "get the weather forecast"})])

    def api(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        return responses_reply(answers[len(bodies) - 1])

    return api


def _billed_tokens(body: dict[str, Any]) -> int:
    """Estimated input tokens the model reads from a Responses request: deferred tool
    definitions excluded (the API loads them only when a tool_search_output names them)."""
    shown = [t for t in body.get("tools", []) if not t.get("defer_loading")]
    return estimate_tokens({**body, "tools": shown})


async def test_openai_responses_native_tool_search_end_to_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bodies: list[dict[str, Any]] = []
    api = _responses_api(bodies)
    async with host_with_provider(servers(), ALLOW_ALL, api, OPENAI_RESPONSES, OPENAI_ENV) as host:
        transcript = await host.run_agent("weather in Paris?")
    assert transcript.stop == "end_turn", transcript.error
    first, second, third = bodies
    # Every server tool is sent deferred; the search tool is the API's client tool_search.
    tools = first["tools"]
    assert len(tools) == 301
    assert tools[-1]["type"] == "tool_search" and tools[-1]["execution"] == "client"
    assert all(t["defer_loading"] is True and t["type"] == "function" for t in tools[:-1])
    # The search ran here (BM25) and answered with the found tools' full definitions.
    call, output = second["input"][1:]
    assert call["type"] == "tool_search_call" and call["call_id"] == "call_1"
    assert output["type"] == "tool_search_output" and output["call_id"] == "call_1"
    found = {t["name"]: t for t in output["tools"]}
    assert next(iter(found)) == "weather__get_forecast"
    server_tool = next(t for t in tools_of("weather") if t.name == "get_forecast")
    assert found["weather__get_forecast"]["parameters"] == server_tool.input_schema
    assert "defer_loading" not in found["weather__get_forecast"]
    assert second["tools"] == first["tools"] == third["tools"]
    # The found tool was called on the real server, through the policy; the reasoning item
    # that led to the call went back with it.
    assert transcript.tool_calls[1].server == "weather"
    assert transcript.tool_calls[1].output.startswith("weather__get_forecast called with")
    assert third["input"][3:5] == [
        REASONING,
        {
            "type": "function_call",
            "call_id": "call_2",
            "name": "weather__get_forecast",
            "arguments": '{"forecast_id":"paris"}',
        },
    ]
    assert third["input"][5]["type"] == "function_call_output"
    assert transcript.final_text == "Sunny."

    # The same task with search off: every definition in every request.
    plain: list[dict[str, Any]] = []
    api = _responses_api(plain, search=False)
    async with host_with_provider(
        servers(),
        ALLOW_ALL,
        api,
        OPENAI_RESPONSES,
        OPENAI_ENV,
        agent=AgentSettings(tool_search=False),
    ) as host:
        transcript = await host.run_agent("weather in Paris?")
    assert transcript.stop == "end_turn", transcript.error
    assert {len(b["tools"]) for b in plain} == {300}
    on = [_billed_tokens(b) for b in bodies]
    off = [_billed_tokens(b) for b in plain]
    with capsys.disabled():
        print(
            f"\nOpenAI Responses tool search, 10 servers / 300 tools, estimated input tokens"
            f" per request: off {off} (total {sum(off)}), on {on} (total {sum(on)})"
        )
    assert max(on) * 10 < min(off)
