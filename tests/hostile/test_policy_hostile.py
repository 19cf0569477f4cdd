"""Hostile servers against the consent layer (issue 14 items 4, 8, 9, 10; issue 17 item 9).

Every attack comes from a real server: ``policy_peer.py`` (built on the official ``mcp``
SDK) sends the crafted forms, URLs, tool redefinitions and sampling bursts over stdio. Only
the LLM HTTP API is mocked (``httpx2.MockTransport``, shaped like Anthropic's Messages API).
"""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pexpect
import pytest
import trio

from agenthost.errors import ConsentDenied, JSONRPCError
from agenthost.host.host import Host
from agenthost_policies import (
    Answer,
    CallbackPrompter,
    ConsentRequest,
    Elicitation,
    ElicitationResponse,
    TerminalPrompter,
    read_audit,
    render_action,
    validate_content,
)
from tests.hostile.policy_helpers import (
    PEER,
    FakeAnthropic,
    agenthost_cli,
    host_with,
    peer,
    text_of,
)

NOTES_ENV = "POLICY_PEER_NOTES"  # policy_peer.NOTES_ENV
#: Catastrophic backtracking: three ways to match each character, then a failure at the end.
#: Python's ``re`` needs about 3**n steps for n characters (10.6 s at 17 on this machine).
EVIL_PATTERN = "^(.|.|.)*\x00$"
EVIL_ANSWER = "a" * 16


async def call_error(host: Host, name: str, arguments: dict[str, Any]) -> str:
    """The error a tool call ended with: the SDK passes our JSON-RPC error through as the
    ``tools/call`` error, or wraps it in an ``isError`` result."""
    try:
        result = await host.call_tool(name, arguments)
    except JSONRPCError as exc:
        return f"{exc.code} {exc.message}"
    assert result.is_error, text_of(result)
    return text_of(result)


class LoopWatch:
    """Measures the longest time the Trio event loop went without running this task."""

    def __init__(self) -> None:
        self.worst = 0.0

    async def run(self) -> None:
        while True:
            before = trio.current_time()
            await trio.sleep(0.01)
            self.worst = max(self.worst, trio.current_time() - before - 0.01)


@asynccontextmanager
async def watched() -> AsyncIterator[LoopWatch]:
    watch = LoopWatch()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch.run)
        yield watch
        nursery.cancel_scope.cancel()


ALLOW_TOOLS = {"kind": "tool", "decision": "allow", "server": "*", "name": "*"}


# -- item 4: a form pattern cannot freeze the host ----------------------------------------


async def test_redos_pattern_in_canned_answers_is_bounded(tmp_path: Path) -> None:
    policy = {
        "mode": "headless",
        "audit": str(tmp_path / "audit.jsonl"),
        "rules": [
            ALLOW_TOOLS,
            {
                "kind": "elicitation",
                "mode": "form",
                "decision": "allow",
                "answers": {"code": EVIL_ANSWER},
            },
        ],
    }
    async with host_with([peer()], policy) as host, watched() as watch:
        with trio.fail_after(20):
            result = await host.call_tool("p__form", {"pattern": EVIL_PATTERN})
    # The answer does not match: declined (never sent), and the loop never stalled.
    assert json.loads(text_of(result)) == {"action": "decline"}
    assert watch.worst < 0.25, f"event loop blocked for {watch.worst:.2f} s"
    audit = read_audit(tmp_path / "audit.jsonl")
    reasons = [r["reason"] for r in audit if r["kind"] == "elicitation"]
    assert any("must match" in reason for reason in reasons)


async def test_redos_pattern_in_typed_answers_is_bounded() -> None:
    # The user fills in the form three times with a value the pattern rejects.
    typed = io.StringIO("f\n" + f"{EVIL_ANSWER}\n" * 3)
    shown = io.StringIO()
    prompter = TerminalPrompter(input=typed, output=shown, open_url=None)
    policy = {"mode": "interactive", "preset": "none", "rules": [ALLOW_TOOLS]}
    async with host_with([peer()], policy, prompter=prompter) as host, watched() as watch:
        with trio.fail_after(20):
            result = await host.call_tool("p__form", {"pattern": EVIL_PATTERN})
    assert json.loads(text_of(result)) == {"action": "cancel"}
    assert watch.worst < 0.25, f"event loop blocked for {watch.worst:.2f} s"
    assert shown.getvalue().count("Not accepted: code: must match") == 3


async def test_pattern_outside_the_linear_subset_is_refused() -> None:
    # Look-around and backreferences need backtracking: the form is refused (-32602), and
    # a pattern in the linear subset still works as before.
    answers = iter([{"code": "ab12"}])

    async def elicit(action: Elicitation) -> ElicitationResponse:
        return ElicitationResponse(action="accept", content=next(answers))

    async def confirm(request: Any) -> Any:
        raise AssertionError("nothing should be asked")

    prompter = CallbackPrompter(confirm=confirm, elicit=elicit)
    policy = {"mode": "programmatic", "preset": "none", "rules": [ALLOW_TOOLS]}
    async with host_with([peer()], policy, prompter=prompter) as host:
        with trio.fail_after(20):
            refused = await call_error(host, "p__form", {"pattern": "^(?=a)(.)\\1$"})
            accepted = await host.call_tool("p__form", {"pattern": "^[a-z]+[0-9]{2}$"})
    assert "-32602" in refused and "linear time" in refused
    assert json.loads(text_of(accepted)) == {"action": "accept", "content": {"code": "ab12"}}


# -- item 10: dangerous URL schemes never reach a prompter -------------------------------

DANGEROUS_URLS = [
    "javascript:alert(document.cookie)",
    "file:///etc/passwd",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "http://example.com/login",  # plain http, not loopback
    "ftp://example.com/x",
]


async def test_url_elicitation_schemes_checked_before_any_prompter(tmp_path: Path) -> None:
    seen: list[str] = []

    async def elicit(action: Elicitation) -> ElicitationResponse:
        seen.append(action.url or "")
        return ElicitationResponse(action="accept")

    async def confirm(request: Any) -> Any:
        raise AssertionError("nothing should be asked")

    prompter = CallbackPrompter(confirm=confirm, elicit=elicit)
    policy = {
        "mode": "programmatic",
        "preset": "none",
        "audit": str(tmp_path / "audit.jsonl"),
        "rules": [ALLOW_TOOLS, {"kind": "elicitation", "decision": "ask"}],
    }
    async with host_with([peer()], policy, prompter=prompter) as host:
        with trio.fail_after(30):
            for url in DANGEROUS_URLS:
                error = await call_error(host, "p__open_url", {"url": url})
                assert "-32602" in error and "https" in error, error
            for url in ("https://example.com/login", "http://127.0.0.1:8765/cb", "http://[::1]/x"):
                ok = await host.call_tool("p__open_url", {"url": url})
                assert text_of(ok) == "accept", (url, text_of(ok))
    assert seen == ["https://example.com/login", "http://127.0.0.1:8765/cb", "http://[::1]/x"]
    denied = [
        r
        for r in read_audit(tmp_path / "audit.jsonl")
        if r["kind"] == "elicitation" and r["event"] == "decision" and r["decision"] == "deny"
    ]
    assert len(denied) == len(DANGEROUS_URLS)


async def test_jsonschema_pass_matches_patterns_in_linear_time() -> None:
    # RE2 finds the second alternative at once; Python's re would first try 2**26 ways
    # through the first one. Both our field check and jsonschema's `pattern` must use RE2.
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^(a|a)*b|^a*$"}},
    }
    start = time.perf_counter()
    assert await validate_content(schema, {"code": "a" * 26}) == {"code": "a" * 26}
    assert time.perf_counter() - start < 1.0


async def test_pattern_properties_are_refused() -> None:
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string"}},
        "patternProperties": {EVIL_PATTERN: {"type": "string"}},
    }
    with pytest.raises(JSONRPCError, match="patternProperties") as info:
        await validate_content(schema, {"code": "x"})
    assert info.value.code == -32602


# -- item 8: limits hold under concurrency --------------------------------------------------


async def sample_outcome(host: Host, max_tokens: int) -> str:
    """``ok`` or the error a ``p__sample`` call ended with."""
    try:
        result = await host.call_tool("p__sample", {"prompt": "Say hi", "max_tokens": max_tokens})
    except JSONRPCError as exc:
        return f"{exc.code} {exc.message}"
    return text_of(result) if result.is_error else "ok"


async def test_token_budget_holds_for_concurrent_sampling(tmp_path: Path) -> None:
    fake = FakeAnthropic(input_tokens=10)
    policy = {
        "mode": "headless",
        "audit": str(tmp_path / "audit.jsonl"),
        "rules": [
            ALLOW_TOOLS,
            {"kind": "sampling", "decision": "allow", "token_budget": 1000, "review": "auto"},
        ],
    }
    outcomes: list[str] = []
    async with host_with([peer()], policy, fake=fake) as host:

        async def one() -> None:
            outcomes.append(await sample_outcome(host, 500))

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for _ in range(20):
                    nursery.start_soon(one)
        used = host.policy.limiter.tokens_used("p")
    # Before: all 20 allowed, 10,200 tokens billed against a budget of 1,000.
    assert sum(fake.billed) <= 1000, fake.billed
    assert used == sum(fake.billed)  # settled with what the API reported
    assert 1 <= outcomes.count("ok") < 20
    refused = [o for o in outcomes if o != "ok"]
    assert refused and all("Sampling limit exceeded" in o for o in refused), refused


async def test_rate_limit_is_checked_before_the_user_is_asked() -> None:
    fake = FakeAnthropic()
    asked = 0

    async def confirm(request: Any) -> Answer:
        nonlocal asked
        asked += 1
        await trio.sleep(0.5)  # a person takes a moment; the other requests arrive meanwhile
        return Answer.ALLOW

    policy = {
        "mode": "programmatic",
        "preset": "none",
        "rules": [
            ALLOW_TOOLS,
            {
                "kind": "sampling",
                "decision": "ask",
                "requests_per_minute": 20,
                "review": "auto",
            },
        ],
    }
    outcomes: list[str] = []
    prompter = CallbackPrompter(confirm=confirm)
    async with host_with([peer()], policy, fake=fake, prompter=prompter) as host:

        async def one() -> None:
            outcomes.append(await sample_outcome(host, 100))

        # 30 at once: under the server-ask cap (32 in progress per session), so every
        # refusal must come from the rate limit (50 made some hit the cap: a flaky test).
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for _ in range(30):
                    nursery.start_soon(one)
    # Before: asked 30 times, and 10 "yes" answers were then refused by the limit.
    assert asked == 20
    assert outcomes.count("ok") == 20 == len(fake.billed)
    refused = [o for o in outcomes if o != "ok"]
    assert len(refused) == 10 and all("in the last minute" in o for o in refused), refused[:1]


# -- item 9: a remembered "always" is bound to the tool's definition ----------------------


async def test_rug_pull_is_asked_again_and_the_prompt_says_what_changed(tmp_path: Path) -> None:
    asked: list[ConsentRequest] = []

    async def confirm(request: ConsentRequest) -> Answer:
        asked.append(request)
        if request.action.name == "rug_pull":
            return Answer.ALLOW
        return Answer.DENY if request.changes else Answer.ALWAYS

    policy = {"mode": "programmatic", "preset": "ask-always", "audit": str(tmp_path / "a.jsonl")}
    prompter = CallbackPrompter(confirm=confirm)
    async with host_with([peer(trusted=True)], policy, prompter=prompter) as host:
        with trio.fail_after(20):
            assert text_of(await host.call_tool("p__notes", {})) == "note 1: buy milk"
            assert text_of(await host.call_tool("p__notes", {})) == "note 1: buy milk"
            assert [r.action.name for r in asked] == ["notes"]  # "always" remembered
            await host.call_tool("p__rug_pull", {})
            while host.resolve_tool("p__notes").tool.description != (
                "Delete every file under `path`."
            ):
                await trio.sleep(0.02)
            # Before: it ran with no new prompt, even under the ask-always preset.
            with pytest.raises(ConsentDenied):
                await host.call_tool("p__notes", {"path": "/home"})
    assert [r.action.name for r in asked] == ["notes", "rug_pull", "notes"]
    changes = asked[-1].changes
    assert "description" in changes and "input schema" in changes
    assert "annotations (readOnlyHint true -> false, destructiveHint unset -> true)" in changes
    shown = render_action(asked[-1])
    assert "CHANGED" in shown and "Description now: Delete every file under `path`." in shown
    last = [r for r in read_audit(tmp_path / "a.jsonl") if r["event"] == "decision"][-1]
    assert last["decision"] == "deny" and "the tool changed since 'always'" in last["reason"]


async def test_never_stands_and_unchanged_tools_stay_remembered() -> None:
    asked: list[str] = []

    async def confirm(request: ConsentRequest) -> Answer:
        asked.append(request.action.name)
        return Answer.NEVER if request.action.name == "notes" else Answer.ALWAYS

    prompter = CallbackPrompter(confirm=confirm)
    policy = {"mode": "programmatic", "preset": "ask-always"}
    async with host_with([peer()], policy, prompter=prompter) as host:
        with trio.fail_after(20):
            for _ in range(2):
                with pytest.raises(ConsentDenied):
                    await host.call_tool("p__notes", {})
            await host.call_tool("p__rug_pull", {})
            while host.resolve_tool("p__notes").tool.annotations.read_only_hint:  # type: ignore[union-attr]
                await trio.sleep(0.02)
            with pytest.raises(ConsentDenied):  # refusing is safe: "never" is not re-asked
                await host.call_tool("p__notes", {})
    assert asked == ["notes", "rug_pull"]


# -- issue 17 item 9: "always" lasts across sessions, bound to the definition ------------


def agenthost_tty(config: Path, *args: str, answer: str) -> tuple[int, str]:
    """``agenthost`` on a pseudo-terminal, typing ``answer`` at the consent question.

    Only a terminal is asked (a pipe on stdin is nobody: denied, never asked), so the
    answers that test "always" are typed where a person would type them.
    Returns the exit status and everything shown (stdout and stderr share the terminal).
    """
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "agenthost", "--config", str(config), *args],
        env=env,
        cwd=str(config.parent),
        encoding="utf-8",
        timeout=60,
    )
    try:
        child.expect_exact("ne[v]er: ")
        shown = f"{child.before}{child.after}"
        child.sendline(answer)
        child.expect(pexpect.EOF)
        shown += f"{child.before}"
    finally:
        child.close()
    assert child.exitstatus is not None, child.signalstatus
    return child.exitstatus, shown


def peer_config(tmp_path: Path, notes: str) -> Path:
    path = tmp_path / f"agenthost-{notes}.toml"
    path.write_text(
        f"""
[servers.p]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(PEER))}]
env = {{ {NOTES_ENV} = "{notes}" }}

[policy]
mode = "interactive"
preset = "ask-always"
""",
        encoding="utf-8",
    )
    return path


def test_always_persists_across_sessions_until_the_tool_changes_or_is_revoked(
    tmp_path: Path,
) -> None:
    v1, v2 = peer_config(tmp_path, "v1"), peer_config(tmp_path, "v2")
    state = Path(os.environ["XDG_STATE_HOME"]) / "agenthost"
    code, shown = agenthost_tty(v1, "call", "p__notes", "{}", answer="a")
    assert code == 0, shown
    file = state / "approvals.json"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    kept = file.read_text(encoding="utf-8")
    assert "List your notes" not in kept and "buy milk" not in kept  # digests only
    # A new session: no question (before: asked again, and with no answer, denied).
    second = agenthost_cli(v1, "call", "p__notes", "{}")
    assert second.returncode == 0, second.stderr
    assert "consent needed" not in second.stderr
    # The server now defines `notes` differently: asked again, told what changed.
    code, shown = agenthost_tty(v2, "call", "p__notes", '{"path": "/home"}', answer="n")
    assert code == 3, shown
    assert "CHANGED" in shown
    assert "readOnlyHint true -> false" in shown
    assert "Description now: Delete every file under `path`." in shown
    listed = agenthost_cli(v1, "approvals", "list", "--json")
    entries = json.loads(listed.stdout)["approvals"]
    assert [(e["server"], e["name"], e["decision"]) for e in entries] == [("p", "notes", "allow")]
    human = agenthost_cli(v1, "approvals")
    assert human.returncode == 0 and "always" in human.stdout and "notes" in human.stdout
    revoked = agenthost_cli(v1, "approvals", "revoke", "p", "notes")
    assert revoked.returncode == 0, revoked.stderr
    again = agenthost_cli(v1, "approvals", "revoke", "p", "notes")
    assert again.returncode == 2 and "no remembered answer" in again.stderr
    asked = agenthost_cli(v1, "call", "p__notes", "{}")  # asked again, but no terminal
    assert asked.returncode == 3
    assert "no terminal to ask: denied" in asked.stderr
