"""Consent end to end: real servers ask for sampling and elicitation; the host's policy,
model selection and a provider (Anthropic's API via MockTransport) answer.

Only the LLM HTTP API is mocked; the servers, the host, the engine and the SDK run for real.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agenthost.errors import ConsentDenied, JSONRPCError
from agenthost.host.sampling import SamplingEvent
from agenthost_policies import (
    Answer,
    CallbackPrompter,
    Elicitation,
    ElicitationResponse,
    TerminalPrompter,
    read_audit,
)
from tests.helpers import (
    FakeAnthropic,
    host_with,
    sampling_policy,
    stdio,
    text_of,
    wait_for_tool,
)

Command = tuple[str, list[str]]


async def test_sdk_server_sampling_allowed_with_cap(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    fake = FakeAnthropic()
    events: list[Any] = []
    policy = sampling_policy(tmp_path, max_tokens=64)
    async with host_with(
        [stdio("sdk", sdk_server_cmd())], policy, fake=fake, events=events
    ) as host:
        result = await host.call_tool("sdk__sample", {"prompt": "Capital of France?"})
        assert text_of(result) == "Paris is the capital of France."
    body = fake.bodies[0]
    assert body["max_tokens"] == 64  # the server asked for 100; the rule caps it
    assert body["messages"][0]["content"][0]["text"] == "Capital of France?"
    selected = [e for e in events if isinstance(e, SamplingEvent) and e.stage == "selected"]
    assert selected
    assert selected[0].provider == "anthropic"
    assert selected[0].message  # the human-readable reason
    audit = read_audit(tmp_path / "audit.jsonl")
    sampling = [r for r in audit if r.get("kind") == "sampling"]
    assert [r["event"] for r in sampling] == ["decision", "review", "outcome"]
    assert sampling[0]["decision"] == "allow"


async def test_everything_sampling_allowed(
    tmp_path: Path, everything_cmd: Callable[..., Command]
) -> None:
    fake = FakeAnthropic("A haiku, as requested.")
    async with host_with(
        [stdio("ev", everything_cmd())], sampling_policy(tmp_path), fake=fake
    ) as host:
        await wait_for_tool(host, "ev__trigger-sampling-request")
        result = await host.call_tool("ev__trigger-sampling-request", {"prompt": "MCP"})
        assert "A haiku, as requested." in text_of(result)
    assert fake.bodies[0]["system"] == "You are a helpful test server."


async def test_sampling_denied_is_error_minus_one(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command], everything_cmd: Callable[..., Command]
) -> None:
    policy = sampling_policy(tmp_path)
    policy["rules"][2] = {
        "kind": "sampling",
        "decision": "deny",
        "server": "*",
        "reason": "no LLM calls for servers",
    }
    fake = FakeAnthropic()
    servers = [stdio("sdk", sdk_server_cmd()), stdio("ev", everything_cmd())]
    async with host_with(servers, policy, fake=fake) as host:
        # The SDK passes our error through as the tools/call error.
        with pytest.raises(JSONRPCError) as info:
            await host.call_tool("sdk__sample", {"prompt": "x"})
        assert info.value.code == -1
        assert info.value.message == "User rejected sampling request"
        await wait_for_tool(host, "ev__trigger-sampling-request")
        result = await host.call_tool("ev__trigger-sampling-request", {"prompt": "x"})
        assert result.is_error
        assert "-1" in text_of(result)
        assert "User rejected sampling request" in text_of(result)
    assert fake.bodies == []
    denials = [r for r in read_audit(tmp_path / "audit.jsonl") if r.get("kind") == "sampling"]
    assert len(denials) == 2
    assert all(r["decision"] == "deny" for r in denials)
    assert all("no LLM calls for servers" in r["reason"] for r in denials)


async def test_sampling_rate_limit(tmp_path: Path, sdk_server_cmd: Callable[..., Command]) -> None:
    policy = sampling_policy(tmp_path, requests_per_minute=1)
    async with host_with([stdio("sdk", sdk_server_cmd())], policy) as host:
        ok = await host.call_tool("sdk__sample", {"prompt": "one"})
        assert "Paris" in text_of(ok)
        with pytest.raises(JSONRPCError) as info:
            await host.call_tool("sdk__sample", {"prompt": "two"})
        assert info.value.code == -32000
        assert "Sampling limit exceeded" in info.value.message


async def test_headless_default_denies_sampling_and_audits(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command]
) -> None:
    policy = {
        "mode": "headless",
        "preset": "headless-readonly",
        "audit": str(tmp_path / "audit.jsonl"),
        "rules": [{"kind": "tool", "decision": "allow", "server": "sdk", "name": "sample"}],
    }
    async with host_with([stdio("sdk", sdk_server_cmd())], policy) as host:
        with pytest.raises(JSONRPCError) as info:
            await host.call_tool("sdk__sample", {"prompt": "x"})
        assert info.value.code == -1
    audit = read_audit(tmp_path / "audit.jsonl")
    sampling = next(r for r in audit if r.get("kind") == "sampling")
    assert sampling["decision"] == "deny"
    assert sampling["reason"]


async def test_elicitation_form_and_url_end_to_end(
    tmp_path: Path, sdk_server_cmd: Callable[..., Command], everything_cmd: Callable[..., Command]
) -> None:
    asked: list[Elicitation] = []

    async def confirm(request: Any) -> Answer:
        return Answer.ALLOW

    async def elicit(action: Elicitation) -> ElicitationResponse:
        asked.append(action)
        if action.mode == "url":
            return ElicitationResponse(action="accept")
        props = (action.requested_schema or {}).get("properties", {})
        content: dict[str, Any] = {"name": "Ada"}
        if "age" in props:
            content["age"] = 36
        return ElicitationResponse(action="accept", content=content)

    prompter = CallbackPrompter(confirm=confirm, elicit=elicit)
    policy = {"mode": "programmatic", "audit": str(tmp_path / "audit.jsonl")}
    # The SDK peer's elicit_url sends its own elicitation/create (ctx.elicit_url), which
    # only the initialize era has: pin that era (the modern path is test_modern_era.py).
    servers = [
        stdio("sdk", sdk_server_cmd(), protocol="legacy"),
        stdio("ev", everything_cmd()),
    ]
    async with host_with(servers, policy, prompter=prompter) as host:
        form = await host.call_tool("sdk__elicit_form", {})
        assert json.loads(text_of(form))["content"]["name"] == "Ada"
        url = await host.call_tool("sdk__elicit_url", {})
        assert json.loads(text_of(url))["action"] == "accept"
        await wait_for_tool(host, "ev__trigger-url-elicitation")
        ev_form = await host.call_tool("ev__trigger-elicitation-request", {})
        assert "Ada" in text_of(ev_form)
        ev_url = await host.call_tool(
            "ev__trigger-url-elicitation", {"url": "https://example.com/login"}
        )
        assert "completed" in text_of(ev_url)
    assert [a.mode for a in asked] == ["form", "url", "form", "url"]
    assert asked[3].url == "https://example.com/login"


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_an_invalid_answer_from_the_callback_is_a_cancel_not_a_client_error(
    tmp_path: Path,
    sdk_server_cmd: Callable[..., Command],
    caplog: pytest.LogCaptureFixture,
    era: str,
) -> None:
    """The embedding app's elicit callback accepts the SDK peer's form with an age that is
    no number. That answer is never sent; it used to reach the server as -32603 "client
    error: InvalidAnswer" with a traceback in the log. Now the server gets the spec's
    cancel, and the log one line naming the field (not the value typed: it may be
    secret). Positive control: a valid answer from the same callback is accepted."""
    answers: list[dict[str, Any]] = [
        {"name": "Ada", "age": "thirty-six"},
        {"name": "Ada", "age": 36},
    ]

    async def elicit(action: Elicitation) -> ElicitationResponse:
        return ElicitationResponse(action="accept", content=answers.pop(0))

    prompter = CallbackPrompter(confirm=_allow, elicit=elicit)
    policy = {"mode": "programmatic", "audit": str(tmp_path / "audit.jsonl")}
    servers = [stdio("sdk", sdk_server_cmd(), protocol=era)]
    async with host_with(servers, policy, prompter=prompter) as host:
        bad = await host.call_tool("sdk__elicit_form", {})
        good = await host.call_tool("sdk__elicit_form", {})
    assert json.loads(text_of(bad)) == {"action": "cancel"}, text_of(bad)
    assert json.loads(text_of(good))["content"]["age"] == 36
    assert not [r for r in caplog.records if r.exc_info], "no traceback logged"
    said = [r.getMessage() for r in caplog.records if "does not fit" in r.getMessage()]
    assert len(said) == 1 and "age" in said[0] and "thirty-six" not in said[0], said
    assert "\n" not in said[0]
    records = read_audit(tmp_path / "audit.jsonl")
    asks = {r["id"] for r in records if r.get("kind") == "elicitation"}
    outcomes = [r for r in records if r["event"] == "outcome" and r["id"] in asks]
    assert [o["result"]["action"] for o in outcomes] == ["cancel", "accept"]


async def _allow(request: Any) -> Answer:
    return Answer.ALLOW


async def test_headless_declines_url_elicitation(
    tmp_path: Path, everything_cmd: Callable[..., Command]
) -> None:
    async with host_with([stdio("ev", everything_cmd())], sampling_policy(tmp_path)) as host:
        await wait_for_tool(host, "ev__trigger-url-elicitation")
        result = await host.call_tool(
            "ev__trigger-url-elicitation", {"url": "https://example.com/login"}
        )
        assert "declined" in text_of(result).lower()


class Lines(io.StringIO):
    """A terminal's input that hands out one scripted line per read."""


async def test_interactive_prompt_approve_deny_always(
    crashy_cmd: Callable[..., Command], tmp_path: Path
) -> None:
    answers = Lines("y\nn\na\n")
    shown = io.StringIO()
    prompter = TerminalPrompter(input=answers, output=shown, open_url=None)
    policy = {"mode": "interactive", "preset": "ask-always", "audit": str(tmp_path / "a.jsonl")}
    async with host_with([stdio("c", crashy_cmd())], policy, prompter=prompter) as host:
        first = await host.call_tool("c__echo", {"message": "approved"})
        assert text_of(first) == "approved"
        with pytest.raises(ConsentDenied):
            await host.call_tool("c__echo", {"message": "refused"})
        assert text_of(await host.call_tool("c__echo", {"message": "always"})) == "always"
        assert text_of(await host.call_tool("c__echo", {"message": "no prompt"})) == "no prompt"
    transcript = shown.getvalue()
    assert transcript.count("consent needed (tool)") == 3  # the 4th call was remembered
    assert '"message": "refused"' in transcript or "refused" in transcript
    audit = read_audit(tmp_path / "a.jsonl")
    decisions = [r["decision"] for r in audit if r["event"] == "decision" and r["kind"] == "tool"]
    assert decisions == ["allow", "deny", "allow", "allow"]
