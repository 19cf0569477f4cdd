"""The terminal prompter: injected streams, a real pseudo-terminal, timeouts, rendering."""

from __future__ import annotations

import io
import os
from typing import Any

import pytest
import trio
import trio.testing

from agenthost_policies import (
    Answer,
    AuditLog,
    ConsentRequest,
    PolicyEngine,
    PromptGet,
    ResourceRead,
    Sampling,
    TerminalPrompter,
    ToolCall,
    Verdict,
    parse_policy,
    read_audit,
    render_action,
)
from agenthost_policies.decision import SamplingGrant

ARGS = {"path": "/etc/hosts", "content": "127.0.0.1 evil\n" * 3, "nested": {"mode": 420}}


def call(name: str = "write_file") -> ToolCall:
    return ToolCall(
        server="fs", tool=name, arguments=ARGS, annotations={"readOnlyHint": True}, trusted=False
    )


def terminal(lines: list[str], **kw: Any) -> tuple[TerminalPrompter, io.StringIO]:
    out = io.StringIO()
    inp = io.StringIO("".join(f"{line}\n" for line in lines))
    return TerminalPrompter(input=inp, output=out, **kw), out


def interactive_engine(prompter: TerminalPrompter, audit: AuditLog | None = None) -> PolicyEngine:
    config = parse_policy({"mode": "interactive"}, source="t")
    return PolicyEngine(rules=config.all_rules, mode="interactive", prompter=prompter, audit=audit)


@pytest.mark.parametrize(
    ("typed", "verdict", "asked_twice"),
    [
        (["y", "y"], Verdict.ALLOW, True),
        (["n", "n"], Verdict.DENY, True),
        (["a"], Verdict.ALLOW, False),
        (["v"], Verdict.DENY, False),
        (["maybe", "YES", "y"], Verdict.ALLOW, True),  # unreadable answer is asked again
        ([""], Verdict.DENY, True),  # Enter alone is not consent
    ],
)
async def test_terminal_confirm(typed: list[str], verdict: Verdict, asked_twice: bool) -> None:
    prompter, out = terminal(typed)
    engine = interactive_engine(prompter)
    first = await engine.check(call())
    assert (first.verdict, first.by) == (verdict, "user")
    second = await engine.check(call())
    assert second.verdict is verdict
    assert second.by == ("user" if asked_twice else "session")
    shown = out.getvalue()
    assert shown.count("Allow? [y]es once") >= (2 if asked_twice else 1)
    # the full arguments, the server, the tool and the rule are all on screen
    assert "Server:      fs (untrusted)" in shown
    assert "Tool:        write_file" in shown
    assert '"content": "127.0.0.1 evil\\n127.0.0.1 evil\\n127.0.0.1 evil\\n"' in shown
    assert '"mode": 420' in shown
    assert "untrusted hints, not used for decisions" in shown
    assert "preset:interactive:tools" in shown


async def test_end_of_input_and_too_many_bad_answers_deny() -> None:
    prompter, _ = terminal([])
    assert (
        await prompter.confirm(ConsentRequest(action=call(), rule="r", reason="x")) is Answer.DENY
    )
    prompter, out = terminal(["?", "??", "???", "y"])
    assert (
        await prompter.confirm(ConsentRequest(action=call(), rule="r", reason="x")) is Answer.DENY
    )
    assert out.getvalue().count("Please answer one of: y, n, a, v") == 3


async def test_no_answer_in_time_denies(autojump_clock: trio.testing.MockClock) -> None:
    read_fd, write_fd = os.pipe()
    reader = open(read_fd, encoding="utf-8")  # noqa: SIM115
    out = io.StringIO()
    try:
        prompter = TerminalPrompter(input=reader, output=out, timeout=30)
        start = trio.current_time()
        answer = await prompter.confirm(ConsentRequest(action=call(), rule="r", reason="x"))
        assert answer is Answer.DENY
        assert trio.current_time() - start == pytest.approx(30)
        assert "(no answer in time)" in out.getvalue()
        review = await prompter.review(Sampling(server="s", max_tokens=1), "text")
        assert review is False
    finally:
        os.write(write_fd, b"\n\n")  # let the abandoned reader threads finish
        os.close(write_fd)


async def test_sampling_prompt_and_review() -> None:
    action = Sampling(
        server="research",
        messages=(
            {"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": "France"}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "toolUseId": "c1",
                        "content": [{"type": "text", "text": "Paris"}],
                    }
                ],
            },
            {"role": "user", "content": {"type": "image", "mimeType": "image/png", "data": "AAAA"}},
        ),
        system_prompt="You are terse.",
        max_tokens=4000,
        include_context="thisServer",
        tools=("lookup",),
        provider="anthropic",
        model="claude-sonnet",
        model_reason="highest intelligence score within the cost hint",
    )
    prompter, out = terminal(["y", "n"])
    request = ConsentRequest(
        action=action,
        rule="policy.rules[1]",
        reason="sampling asks",
        grant=SamplingGrant(max_tokens=1000),
    )
    assert await prompter.confirm(request) is Answer.ALLOW
    assert await prompter.review(action, "The capital is Paris.") is False
    shown = out.getvalue()
    for expected in [
        "Model:       anthropic/claude-sonnet",
        "Chosen because: highest intelligence score within the cost hint",
        "maxTokens:   4000 (capped to 1000)",
        "includeContext: thisServer",
        "Tools offered: lookup",
        "You are terse.",
        "[user] What is the capital of France?",
        "[assistant] <tool call lookup>",
        '"q": "France"',
        "<tool result for c1>",
        "Paris",
        "<image image/png, ~3 bytes>",
        "review the answer for research (model anthropic/claude-sonnet)",
        "The capital is Paris.",
        "Send this answer to the server? [y]es / [n]o:",
    ]:
        assert expected in shown, expected


def test_render_escapes_what_servers_send() -> None:
    action = ToolCall(
        server="evil\x1b]0;title\x07", tool="rm\u202e", arguments={"x": "\x1b[2Kinvisible"}
    )
    text = render_action(ConsentRequest(action=action, rule="r", reason="\x1b[31mred"))
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\\x1b]0;title\\x07" in text


async def test_prompts_do_not_interleave() -> None:
    """Two tasks asking at once get two complete, consecutive prompts."""
    prompter, out = terminal(["y", "n"])
    results: dict[str, Answer] = {}

    async def ask(name: str) -> None:
        results[name] = await prompter.confirm(
            ConsentRequest(action=call(name), rule="r", reason="x")
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "first")
        nursery.start_soon(ask, "second")
    assert sorted(results.values(), key=lambda a: a.value) == [Answer.ALLOW, Answer.DENY]
    shown = out.getvalue()
    blocks = shown.split("== agenthost: consent needed (tool) ==")[1:]
    assert len(blocks) == 2
    for block in blocks:
        assert block.count("Tool:") == 1 and block.count("Allow?") == 1


# -- a real pseudo-terminal ----------------------------------------------------------------------


async def _read_until(fd: int, marker: bytes, seen: bytearray) -> None:
    with trio.fail_after(10):
        while marker not in seen:
            await trio.lowlevel.wait_readable(fd)
            seen.extend(os.read(fd, 65536))


async def test_through_a_real_pty(tmp_path: Any) -> None:
    """approve, deny and always, typed into a pseudo-terminal the prompter reads and writes."""
    master, slave = os.openpty()
    os.set_blocking(master, False)
    tty_in = open(slave, encoding="utf-8", closefd=False)  # noqa: SIM115
    tty_out = open(os.dup(slave), "w", encoding="utf-8")  # noqa: SIM115
    assert tty_in.isatty()
    path = tmp_path / "audit.jsonl"
    seen = bytearray()
    try:
        with AuditLog(path) as audit:
            engine = interactive_engine(
                TerminalPrompter(input=tty_in, output=tty_out, timeout=10), audit
            )
            decisions = []
            for tool_name, key in [("one", b"y"), ("two", b"n"), ("three", b"a"), ("three", None)]:
                async with trio.open_nursery() as nursery:
                    result: list[Any] = []

                    async def run(name: str = tool_name, out: list[Any] = result) -> None:
                        out.append(await engine.check(call(name)))

                    nursery.start_soon(run)
                    if key is not None:
                        await _read_until(master, b"ne[v]er: ", seen)
                        seen.clear()
                        os.write(master, key + b"\n")
                decisions.append(result[0])
        assert [(d.verdict, d.by) for d in decisions] == [
            (Verdict.ALLOW, "user"),
            (Verdict.DENY, "user"),
            (Verdict.ALLOW, "user"),
            (Verdict.ALLOW, "session"),
        ]
        assert [r["decision"] for r in read_audit(path) if r["event"] == "decision"] == [
            "allow",
            "deny",
            "allow",
            "allow",
        ]
    finally:
        tty_in.close()
        tty_out.close()
        os.close(slave)
        os.close(master)


@pytest.mark.parametrize(
    "action",
    [
        ToolCall(server="fs", tool="x\nArguments:\n{}\nTreated as:  readOnlyHint", arguments={}),
        PromptGet(server="fs", prompt="p\nArguments:\n{}", arguments={}),
        ResourceRead(server="fs", uri="file:///a\nRead:        file:///b"),
    ],
    ids=["tool", "prompt", "resource"],
)
def test_render_keeps_a_servers_name_on_its_line(action: Any) -> None:
    """Issue 22: a name with line breaks cannot print lines of the consent prompt."""
    text = render_action(ConsentRequest(action=action, rule="r", reason="because"))
    label = text.splitlines()[1]
    assert label.split(":", 1)[0] in ("Tool", "Prompt", "Read"), text
    assert "\\n" in label, text
    lines = text.splitlines()
    assert lines.count("Arguments:") <= 1 and "Read:        file:///b" not in lines, text
