"""The engine: asking, session memory, modes, sampling limits, review, outcomes, audit."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from agenthost.errors import ConsentDenied, JSONRPCError
from agenthost_policies import (
    Answer,
    AuditLog,
    CallbackPrompter,
    ConsentRequest,
    Elicitation,
    ElicitationResponse,
    HeadlessPrompter,
    PolicyEngine,
    PromptGet,
    ResourceRead,
    RootsExposure,
    Sampling,
    SamplingLimiter,
    SamplingLimits,
    TerminalPrompter,
    ToolCall,
    Verdict,
    parse_policy,
    read_audit,
)
from agenthost_policies.limits import estimate_input_tokens


class FakeClock:
    """Monotonic seconds that only move when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Scripted:
    """A programmatic callback that answers from a list and records what it was asked."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.asked: list[ConsentRequest] = []

    async def __call__(self, request: ConsentRequest) -> Answer:
        self.asked.append(request)
        return self.answers.pop(0)


def engine_for(
    raw: dict[str, Any], *, prompter: Any = None, audit: AuditLog | None = None, clock: Any = None
) -> PolicyEngine:
    config = parse_policy(raw, source="test.toml")
    kwargs: dict[str, Any] = {}
    if clock is not None:
        kwargs["clock"] = clock
    return PolicyEngine(
        rules=config.all_rules, mode=config.mode, prompter=prompter, audit=audit, **kwargs
    )


def write_tool(server: str = "fs", name: str = "write_file", **args: Any) -> ToolCall:
    return ToolCall(server=server, tool=name, arguments=args or {"path": "/tmp/x"})


async def test_ask_goes_to_callback_and_always_is_remembered() -> None:
    script = Scripted(Answer.ALWAYS, Answer.DENY)
    engine = engine_for({"mode": "programmatic"}, prompter=CallbackPrompter(confirm=script))
    first = await engine.check(write_tool())
    assert first.verdict is Verdict.ALLOW
    assert first.by == "callback"
    assert first.rule == "preset:interactive:tools"
    # same server and tool: no second question
    second = await engine.check(write_tool(path="/other"))
    assert (second.verdict, second.by) == (Verdict.ALLOW, "session")
    assert "always" in second.reason
    assert len(script.asked) == 1
    # another tool is asked again
    third = await engine.check(write_tool(name="delete_file"))
    assert (third.verdict, third.by) == (Verdict.DENY, "callback")
    assert len(script.asked) == 2


async def test_never_is_remembered_and_memory_never_overrides_rules() -> None:
    script = Scripted(Answer.NEVER)
    engine = engine_for(
        {
            "mode": "programmatic",
            "preset": "none",
            "rules": [
                {"kind": "tool", "name": "safe", "decision": "allow"},
                {"kind": "tool", "decision": "ask"},
            ],
        },
        prompter=CallbackPrompter(confirm=script),
    )
    assert (await engine.check(write_tool(name="x"))).verdict is Verdict.DENY
    again = await engine.check(write_tool(name="x"))
    assert (again.verdict, again.by) == (Verdict.DENY, "session")
    assert len(script.asked) == 1
    assert (await engine.check(write_tool(name="safe"))).by == "rule"


async def test_once_is_not_remembered() -> None:
    script = Scripted(Answer.ALLOW, Answer.ALLOW)
    engine = engine_for({"mode": "programmatic"}, prompter=CallbackPrompter(confirm=script))
    await engine.check(write_tool())
    await engine.check(write_tool())
    assert len(script.asked) == 2


async def test_headless_turns_ask_into_deny_with_reason() -> None:
    engine = engine_for(
        {
            "mode": "headless",
            "preset": "none",
            "rules": [{"kind": "tool", "decision": "ask", "reason": "write tools"}],
        }
    )
    assert isinstance(engine.prompter, HeadlessPrompter)
    decision = await engine.check(write_tool())
    assert decision.verdict is Verdict.DENY
    assert decision.by == "headless"
    assert "headless mode" in decision.reason and "write tools" in decision.reason
    # no rule at all: the headless default is deny
    other = await engine.check(PromptGet(server="fs", prompt="p"))
    assert (other.verdict, other.by, other.rule) == (Verdict.DENY, "default", "default:headless")


async def test_mode_prompter_requirements() -> None:
    with pytest.raises(ValueError, match="headless"):
        PolicyEngine(rules=(), mode="headless", prompter=TerminalPrompter())
    with pytest.raises(ValueError, match="programmatic"):
        PolicyEngine(rules=(), mode="programmatic")


async def test_require_raises_consent_denied() -> None:
    engine = engine_for(
        {
            "mode": "headless",
            "rules": [{"kind": "tool", "name": "rm", "decision": "deny", "reason": "never rm"}],
        }
    )
    with pytest.raises(ConsentDenied) as info:
        await engine.require(write_tool(name="rm"))
    assert info.value.rule == "policy.rules[0]"
    assert "never rm" in str(info.value)


# -- sampling limits, with an injected clock -------------------------------------------------

SAMPLING_RULE = {
    "kind": "sampling",
    "decision": "allow",
    "max_tokens": 500,
    "requests_per_minute": 2,
    "token_budget": 1000,
    "providers": ["anthropic"],
    "models": ["claude-*"],
}


def sample(**kw: Any) -> Sampling:
    base: dict[str, Any] = {
        "server": "s",
        "max_tokens": 800,
        "provider": "anthropic",
        "model": "claude-x",
        "messages": ({"role": "user", "content": {"type": "text", "text": "hi"}},),
    }
    base.update(kw)
    return Sampling(**base)


async def test_sampling_caps_rate_and_budget() -> None:
    clock = FakeClock()
    engine = engine_for(
        {"mode": "headless", "preset": "none", "rules": [SAMPLING_RULE]}, clock=clock
    )
    first = await engine.check(sample())
    assert first.allowed
    assert first.sampling is not None and first.sampling.max_tokens == 500  # capped
    clock.now += 10
    assert (await engine.check(sample(max_tokens=100))).sampling.max_tokens == 100  # type: ignore[union-attr]
    clock.now += 10
    third = await engine.check(sample())
    assert (third.verdict, third.by) == (Verdict.DENY, "limit")
    assert "2 sampling requests in the last minute" in third.reason
    # another server has its own window
    assert (await engine.check(sample(server="t"))).allowed
    # the window slides: 61 s after the first request one slot is free again
    clock.now = 1000.0 + 61
    assert (await engine.check(sample())).allowed
    # Allowed requests hold their tokens until settled with what the provider reported.
    assert engine.limiter.tokens_reserved("s") > 0
    for decision in (first, third):
        engine.settle_sampling(decision, 50)  # denied: nothing held, nothing counted
    assert engine.limiter.tokens_used("s") == 50
    engine.limiter = SamplingLimiter(clock=clock)
    # budget: 1000 tokens; 900 used leaves 100 less the input estimate, lowering maxTokens
    engine.record_sampling_usage("s", 900)
    left = await engine.check(sample())
    estimate = estimate_input_tokens(sample())
    assert left.sampling is not None and left.sampling.max_tokens == 100 - estimate
    assert left.sampling.reserved_tokens == 100
    # While it is in flight nothing is left for another request.
    busy = await engine.check(sample())
    assert busy.by == "limit" and "100 held by requests in flight" in busy.reason
    engine.settle_sampling(left, 60)
    engine.settle_sampling(left, 60)  # idempotent
    assert engine.limiter.tokens_used("s") == 960
    assert engine.limiter.tokens_reserved("s") == 0
    engine.record_sampling_usage("s", 40)
    spent = await engine.check(sample())
    assert spent.by == "limit" and "budget of 1000 tokens" in spent.reason


LIMIT_TABLE = [
    (sample(include_context="thisServer"), "includeContext"),
    (sample(include_context="allServers"), "includeContext"),
    (sample(provider="openai"), "provider 'openai'"),
    (sample(model="gpt-5"), "model 'gpt-5'"),
]


@pytest.mark.parametrize(("action", "text"), LIMIT_TABLE)
async def test_sampling_constraints_deny(action: Sampling, text: str) -> None:
    engine = engine_for({"mode": "headless", "preset": "none", "rules": [SAMPLING_RULE]})
    decision = await engine.check(action)
    assert (decision.verdict, decision.by) == (Verdict.DENY, "limit")
    assert text in decision.reason


async def test_limits_are_checked_before_asking_and_counted_after() -> None:
    script = Scripted(Answer.DENY, Answer.ALLOW, Answer.ALLOW)
    rule = {"kind": "sampling", "decision": "ask", "requests_per_minute": 1}
    engine = engine_for(
        {"mode": "programmatic", "preset": "none", "rules": [rule]},
        prompter=CallbackPrompter(confirm=script),
        clock=FakeClock(),
    )
    assert not (await engine.check(sample(include_context="allServers"))).allowed
    assert script.asked == []  # the limit refused it; nobody was bothered
    assert not (await engine.check(sample())).allowed  # user said no: not counted
    assert (await engine.check(sample())).allowed
    assert len(script.asked) == 2
    assert script.asked[1].grant is not None and script.asked[1].grant.max_tokens == 800
    refused = await engine.check(sample())
    assert refused.by == "limit"
    assert len(script.asked) == 2


def test_limiter_alone() -> None:
    clock = FakeClock()
    limiter = SamplingLimiter(clock=clock)
    limits = SamplingLimits(requests_per_minute=1)
    assert limiter.check(sample(), limits, rule="r").ticket is None  # counts nothing
    grant = limiter.reserve(sample(), limits, rule="r")
    assert grant.max_tokens == 800 and grant.auto_review is False
    with pytest.raises(ConsentDenied, match="retry in 60 s") as info:
        limiter.check(sample(), limits, rule="r")
    assert info.value.rule == "r"
    limiter.release(grant)  # refused after all: the slot is free again
    assert limiter.reserve(sample(), limits, rule="r").max_tokens == 800
    with pytest.raises(ConsentDenied, match="no positive maxTokens"):
        limiter.check(sample(max_tokens=0), SamplingLimits(), rule="r")
    with pytest.raises(ValueError, match="negative"):
        limiter.record_usage("s", -1)
    limiter.record_usage("s", 7)
    assert limiter.tokens_used("s") == 7


async def test_review_sampling() -> None:
    auto = engine_for(
        {"mode": "headless", "preset": "none", "rules": [dict(SAMPLING_RULE, review="auto")]}
    )
    decision = await auto.check(sample())
    assert await auto.review_sampling(sample(), "Paris", decision=decision)
    headless = engine_for({"mode": "headless", "preset": "none", "rules": [SAMPLING_RULE]})
    decision = await headless.check(sample())
    assert decision.allowed
    assert not await headless.review_sampling(sample(), "Paris", decision=decision)

    seen: list[str] = []

    async def review(action: Sampling, answer: str) -> bool:
        seen.append(answer)
        return answer == "ok"

    confirm = Scripted()
    prog = engine_for(
        {"mode": "programmatic", "preset": "none", "rules": [SAMPLING_RULE]},
        prompter=CallbackPrompter(confirm=confirm, review=review),
    )
    assert await prog.review_sampling(sample(), "ok")
    assert not await prog.review_sampling(sample(), "bad")
    assert seen == ["ok", "bad"]
    # without a review callback an embedding application rejects by default
    bare = engine_for(
        {"mode": "programmatic", "preset": "none", "rules": [SAMPLING_RULE]},
        prompter=CallbackPrompter(confirm=confirm),
    )
    assert not await bare.review_sampling(sample(), "ok")


# -- outcomes and audit completeness ---------------------------------------------------------


async def test_audit_completeness(tmp_path: Path) -> None:
    """N actions -> N decision lines, plus one outcome line per allowed action."""
    path = tmp_path / "audit.jsonl"
    script = Scripted(*([Answer.ALLOW, Answer.DENY] * 3))
    with AuditLog(path) as audit:
        engine = engine_for(
            {
                "mode": "programmatic",
                "rules": [
                    {"kind": "tool", "name": "rm", "decision": "deny"},
                    {"kind": "tool", "name": "boom", "decision": "allow"},
                ],
            },
            prompter=CallbackPrompter(confirm=script),
            audit=audit,
        )
        actions: list[Any] = [
            write_tool(name="rm"),
            PromptGet(server="fs", prompt="p", arguments={"topic": "x"}),
            ResourceRead(server="fs", uri="file:///a"),
            RootsExposure(server="fs", roots=("file:///w",)),
            write_tool(name="a", api_key="sk-" + "abcdefghijklmnopqrstuvwx"),
            write_tool(name="b"),
            write_tool(name="c"),
            write_tool(name="d"),
        ]
        allowed = 0
        for action in actions:
            try:
                async with engine.guard(action) as outcome:
                    allowed += 1
                    outcome.result = {"ok": True, "token": "hunter2"}
            except ConsentDenied:
                pass
        with pytest.raises(RuntimeError, match="tool broke"):
            async with engine.guard(write_tool(name="boom")):
                raise RuntimeError("tool broke")
        decision = await engine.check(PromptGet(server="fs", prompt="q"))
        await engine.record_outcome(decision.id, result="text", duration=0.25)
        with pytest.raises(KeyError):
            await engine.record_outcome(decision.id)
    records = read_audit(path)
    decisions = [r for r in records if r["event"] == "decision"]
    outcomes = [r for r in records if r["event"] == "outcome"]
    assert len(decisions) == len(actions) + 2
    assert allowed == 5  # prompt, resource, roots, a (allow), c (allow)
    assert len(outcomes) == allowed + 2
    allowed_ids = {d["id"] for d in decisions if d["decision"] == "allow"}
    assert {o["id"] for o in outcomes} == allowed_ids
    assert len({d["id"] for d in decisions}) == len(decisions)
    for record in decisions:
        assert set(record) >= {
            "ts",
            "id",
            "kind",
            "server",
            "name",
            "args",
            "decision",
            "rule",
            "reason",
            "by",
        }
        assert record["decision"] in ("allow", "deny")
    by_name = {d["name"]: d for d in decisions}
    assert by_name["rm"]["decision"] == "deny" and by_name["rm"]["rule"] == "policy.rules[0]"
    assert by_name["a"]["args"]["api_key"] == "[redacted]"
    assert by_name["b"]["by"] == "callback"
    boom = next(o for o in outcomes if o["name"] == "boom")
    assert boom["error"] == "RuntimeError: tool broke" and boom["result"] is None
    ok = next(o for o in outcomes if o["name"] == "a")
    assert ok["result"] == {"ok": True, "token": "[redacted]"}
    assert ok["error"] is None and ok["duration"] >= 0
    assert "sk-abc" not in path.read_text()
    assert "hunter2" not in path.read_text()


async def test_cancelled_while_asking_is_recorded(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "audit.jsonl"
    read_fd, write_fd = os.pipe()
    reader = open(read_fd, encoding="utf-8")  # noqa: SIM115
    try:
        with AuditLog(path) as audit:
            prompter = TerminalPrompter(input=reader, output=io.StringIO(), timeout=1e6)
            engine = engine_for({"mode": "interactive"}, prompter=prompter, audit=audit)
            with trio.move_on_after(5):
                await engine.check(write_tool())
        (record,) = read_audit(path)
        assert (record["decision"], record["rule"]) == ("deny", "cancelled")
    finally:
        os.write(write_fd, b"\n")  # release the abandoned reader thread
        os.close(write_fd)


async def test_elicitation_is_not_a_plain_check() -> None:
    engine = engine_for({"mode": "headless"})
    with pytest.raises(TypeError, match="elicit"):
        await engine.check(Elicitation(server="s", message="m"))


async def test_from_config_owns_its_audit_file(tmp_path: Path) -> None:
    config = parse_policy(
        {"mode": "headless", "audit": {"path": "a/audit.jsonl"}}, source="t", base_dir=tmp_path
    )
    with PolicyEngine.from_config(config) as engine:
        await engine.check(write_tool())
    assert [r["event"] for r in read_audit(tmp_path / "a" / "audit.jsonl")] == ["decision"]
    # The engine closed the log it opened: a decision after the block cannot be recorded,
    # so it is refused rather than silently unaudited.
    with pytest.raises(RuntimeError, match="closed"):
        await engine.check(write_tool())


async def test_concurrent_checks_each_get_one_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    gate = trio.Event()

    async def slow(request: ConsentRequest) -> Answer:
        await gate.wait()
        return Answer.ALLOW

    with AuditLog(path, fsync=True) as audit:
        engine = engine_for(
            {"mode": "programmatic"}, prompter=CallbackPrompter(confirm=slow), audit=audit
        )
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(engine.check, write_tool(name=f"t{i}"))
            await trio.testing.wait_all_tasks_blocked()
            gate.set()
    records = read_audit(path)
    assert sorted(r["name"] for r in records) == sorted(f"t{i}" for i in range(20))


async def test_elicit_headless_and_callback(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 1}},
        "required": ["ok"],
    }
    form = Elicitation(server="ci", message="Proceed?", requested_schema=schema)
    url = Elicitation(
        server="ci", message="Log in", mode="url", url="https://ex.com/x", elicitation_id="e1"
    )
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as audit:
        headless = engine_for(
            {
                "mode": "headless",
                "rules": [
                    {
                        "kind": "elicitation",
                        "mode": "form",
                        "server": "ci",
                        "answers": {"ok": True},
                        "decision": "allow",
                    },
                    {"kind": "elicitation", "mode": "url", "decision": "allow"},
                ],
            },
            audit=audit,
        )
        assert (await headless.elicit(form)).to_result() == {
            "action": "accept",
            "content": {"ok": True},
        }
        # URL mode never succeeds without a human, whatever the rule says
        assert (await headless.elicit(url)).action == "decline"
        # other servers: the preset declines
        assert (
            await headless.elicit(Elicitation(server="x", message="m", requested_schema=schema))
        ).action == "decline"
        # canned answers that do not fit are never sent
        bad = engine_for(
            {
                "mode": "headless",
                "rules": [
                    {
                        "kind": "elicitation",
                        "mode": "form",
                        "answers": {"ok": "yes"},
                        "decision": "allow",
                    }
                ],
            },
            audit=audit,
        )
        assert (await bad.elicit(form)).action == "decline"

        async def answer(action: Elicitation) -> ElicitationResponse:
            return ElicitationResponse(action="accept", content={"ok": False, "n": 3})

        prog = engine_for(
            {"mode": "programmatic"},
            prompter=CallbackPrompter(confirm=Scripted(), elicit=answer),
            audit=audit,
        )
        assert (await prog.elicit(form)).content == {"ok": False, "n": 3}

        async def invalid(action: Elicitation) -> ElicitationResponse:
            return ElicitationResponse(action="accept", content={"ok": False, "n": 0})

        prog_bad = engine_for(
            {"mode": "programmatic"}, prompter=CallbackPrompter(confirm=Scripted(), elicit=invalid)
        )
        # Never sent: the server gets cancel (tests/test_consent_e2e.py, end to end).
        assert (await prog_bad.elicit(form)).action == "cancel"
    records = read_audit(path)
    decisions = [r for r in records if r["event"] == "decision"]
    outcomes = [r for r in records if r["event"] == "outcome"]
    assert [d["decision"] for d in decisions] == ["allow", "deny", "deny", "deny", "allow"]
    assert [o["result"]["action"] for o in outcomes] == ["accept", "accept"]
    assert "canned answers" in decisions[0]["reason"]
    assert "do not fit" in decisions[3]["reason"]


async def test_canned_answers_keep_the_servers_defaults() -> None:
    """SEP-1034: fields the canned answers leave out go back with the server's default."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "note": {"type": "string"},
        },
    }
    engine = engine_for(
        {
            "mode": "headless",
            "rules": [
                {"kind": "elicitation", "mode": "form", "answers": {"age": 41}, "decision": "allow"}
            ],
        }
    )
    response = await engine.elicit(Elicitation(server="s", message="m", requested_schema=schema))
    assert response.to_result() == {"action": "accept", "content": {"name": "John Doe", "age": 41}}


async def test_slow_callbacks_time_out_as_no(autojump_clock: trio.testing.MockClock) -> None:
    async def never(*_: Any) -> Any:
        await trio.sleep_forever()

    prompter = CallbackPrompter(confirm=never, review=never, elicit=never, timeout=30)
    engine = engine_for({"mode": "programmatic"}, prompter=prompter)
    start = trio.current_time()
    decision = await engine.check(write_tool())
    assert (decision.verdict, decision.by) == (Verdict.DENY, "callback")
    assert trio.current_time() - start == pytest.approx(30)
    assert not await engine.review_sampling(sample(), "x")
    form = Elicitation(
        server="s", message="m", requested_schema={"type": "object", "properties": {}}
    )
    assert (await engine.elicit(form)).action == "cancel"


async def test_canned_answers_for_an_invalid_schema_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as audit:
        engine = engine_for(
            {
                "mode": "headless",
                "rules": [
                    {
                        "kind": "elicitation",
                        "mode": "form",
                        "answers": {"a": 1},
                        "decision": "allow",
                    }
                ],
            },
            audit=audit,
        )
        bad = Elicitation(
            server="s",
            message="m",
            requested_schema={"type": "object", "properties": {"a": {"type": "object"}}},
        )
        with pytest.raises(JSONRPCError) as info:
            await engine.elicit(bad)
        assert info.value.code == -32602
    (record,) = read_audit(path)
    assert record["decision"] == "deny" and "not a primitive" in record["reason"]


async def test_the_audit_flusher_writes_a_stopped_floods_count(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Identical denials are folded; within a second the host's flusher writes their
    count without waiting for another line, the window's end or the close (issue 22: a
    crash loses at most that second)."""
    path = tmp_path / "a.jsonl"
    with AuditLog(path, clock=trio.current_time, fold_window=60) as log:
        rules = [{"kind": "tool", "decision": "deny", "server": "*", "name": "*"}]
        engine = engine_for({"mode": "headless", "rules": rules}, audit=log)
        for _ in range(5):
            await engine.check(write_tool())
        assert [r["event"] for r in read_audit(path)] == ["decision"]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(engine.run_audit_flusher)
            await trio.sleep(0.5)
            assert [r["event"] for r in read_audit(path)] == ["decision"]
            await trio.sleep(0.5)
            nursery.cancel_scope.cancel()
        folded = read_audit(path)[1]
        assert (folded["event"], folded["of"], folded["count"]) == ("suppressed", "decision", 4)
