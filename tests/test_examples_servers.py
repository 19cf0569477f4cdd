"""The bundled examples: the notes server over stdio, and the demo's config, policy and script.

Why: the demo is the first thing a new user runs, and the notes server is the example of a
safe server. These tests drive the real server (official SDK, a child process) through
agenthost's own session, load the demo files with the loaders the host uses, and replay
the demo script against a real host, so a change anywhere that breaks the demo fails here.
"""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import agenthost_providers.base as llm
from agenthost.asks import ClientHandlers, RequestContext
from agenthost.config import load_config
from agenthost.config.model import HostConfig, Workspace
from agenthost.connection import connect, open_session
from agenthost.errors import ConsentDenied, JSONRPCError
from agenthost.host.host import open_host
from agenthost.host.roots import workspace_root
from agenthost.host.sampling import SamplingEvent
from agenthost.protocol.converter import unstructure
from agenthost.protocol.revisions import LATEST_REVISION, SUPPORTED_REVISIONS
from agenthost.protocol.types import (
    CallToolResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ListRootsResult,
    Root,
    TextContent,
    TextResourceContents,
)
from agenthost.session import ClientSession
from agenthost.transports.stdio import open_stdio_transport
from agenthost_policies import (
    AuditConfig,
    PolicyConfig,
    PolicyEngine,
    RootsExposure,
    Sampling,
    ToolCall,
    parse_policy,
    read_audit,
)
from agenthost_providers.config import available_models, default_choice, parse_providers
from agenthost_providers.scripted import REPLAY_MODEL, ScriptedProvider
from agenthost_providers.selection import ModelPreferences, select_model
from tests.forkserver import peer_python

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
NOTES_SERVER = EXAMPLES / "servers" / "notes_server.py"
CONFIG = EXAMPLES / "agenthost.toml"
SAMPLE_NOTES = ("ideas", "meeting", "scratch")
TOOLS = (
    "list_notes",
    "read_note",
    "search_notes",
    "write_note",
    "delete_note",
    "summarize_note",
    "show_roots",
)
MISSING_CAPABILITY = -32021  # the SDK's "client did not declare the capability" error
INVALID_PARAMS = -32602


class Client:
    """The host side of the notes server: roots a test can change, sampling it records."""

    def __init__(self, roots: list[Path] | None) -> None:
        #: ``None``: the client declares no roots capability at all.
        self.roots = roots
        self.roots_asked = 0
        self.sampling: list[CreateMessageRequestParams] = []

    async def on_roots(self, ctx: RequestContext, params: Any) -> ListRootsResult:
        self.roots_asked += 1
        return ListRootsResult(roots=[Root(uri=p.as_uri(), name=p.name) for p in self.roots or ()])

    async def on_sampling(
        self, ctx: RequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        self.sampling.append(params)
        return CreateMessageResult(
            role="assistant",
            content=TextContent(text="- one short summary line"),
            model="test-model",
            stop_reason="endTurn",
        )

    def handlers(self, *, sampling: bool) -> ClientHandlers:
        return ClientHandlers(
            roots=self.on_roots if self.roots is not None else None,
            sampling=self.on_sampling if sampling else None,
        )


@asynccontextmanager
async def notes_session(
    client: Client,
    *args: str,
    revision: str = LATEST_REVISION,
    sampling: bool = True,
) -> AsyncIterator[ClientSession]:
    """The notes server as a child process, with an initialized agenthost session."""
    async with (
        open_stdio_transport(peer_python(), [str(NOTES_SERVER), *args], name="notes") as stdio,
        open_session(
            stdio,
            name="notes",
            handlers=client.handlers(sampling=sampling),
            protocol_version=revision,
        ) as session,
    ):
        yield session


def text_of(result: CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


async def call_ok(session: ClientSession, tool: str, args: dict[str, Any] | None = None) -> str:
    result = await session.call_tool(tool, args or {})
    assert not result.is_error, text_of(result)
    return text_of(result)


async def call_error(session: ClientSession, tool: str, args: dict[str, Any]) -> str:
    result = await session.call_tool(tool, args)
    assert result.is_error, f"{tool}({args}) succeeded: {text_of(result)}"
    return text_of(result)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A private copy of examples/workspace, so tests may write and delete."""
    target = tmp_path / "notes"
    shutil.copytree(EXAMPLES / "workspace", target)
    return target


@pytest.fixture
def other_dir(tmp_path: Path) -> Path:
    other = tmp_path / "other"
    other.mkdir()
    (other / "elsewhere.md").write_text("# Elsewhere\n", encoding="utf-8")
    return other


# ------------------------------------------------------------------------- the server


async def test_tools_have_honest_annotations(workspace: Path) -> None:
    async with notes_session(Client([workspace])) as session:
        tools = {t.name: t for t in await session.list_tools()}
    assert set(tools) == set(TOOLS)
    hints = {
        name: (
            t.annotations.read_only_hint,
            t.annotations.destructive_hint,
            t.annotations.idempotent_hint,
            t.annotations.open_world_hint,
        )
        for name, t in tools.items()
        if t.annotations is not None
    }
    read_only = (True, None, None, False)
    assert hints == {
        "list_notes": read_only,
        "read_note": read_only,
        "search_notes": read_only,
        "summarize_note": read_only,
        "show_roots": read_only,
        "write_note": (False, False, True, False),
        "delete_note": (False, True, True, False),
    }
    # What the client resolves (roots, the sampled summary) is not a model-facing argument.
    assert tools["summarize_note"].input_schema["required"] == ["name"]
    assert set(tools["summarize_note"].input_schema["properties"]) == {"name"}
    assert set(tools["show_roots"].input_schema.get("properties", {})) == set()


async def test_tools_work_in_the_first_root(workspace: Path, other_dir: Path) -> None:
    client = Client([workspace, other_dir])
    async with notes_session(client) as session:
        listing = await call_ok(session, "list_notes")
        assert listing.startswith("3 note(s):")
        assert [line.split()[1] for line in listing.splitlines()[1:]] == list(SAMPLE_NOTES)
        assert "elsewhere" not in listing

        meeting = (workspace / "meeting.md").read_text(encoding="utf-8")
        assert await call_ok(session, "read_note", {"name": "meeting"}) == meeting
        assert await call_ok(session, "read_note", {"name": "meeting.md"}) == meeting

        hits = await call_ok(session, "search_notes", {"query": "PROJECTOR"})
        assert hits == "scratch:5: - call the venue about the projector"
        assert "No note mentions" in await call_ok(session, "search_notes", {"query": "zebra"})

        wrote = await call_ok(session, "write_note", {"name": "todo", "text": "# Todo\n- a\n"})
        assert wrote == "Wrote todo (11 characters)."
        assert (workspace / "todo.md").read_text(encoding="utf-8") == "# Todo\n- a\n"
        assert not (other_dir / "todo.md").exists()
        again = await call_ok(session, "write_note", {"name": "todo", "text": "# Todo\n- a\n"})
        assert again == "todo is unchanged."
        assert sorted(p.name for p in workspace.iterdir()) == [
            "ideas.md",
            "meeting.md",
            "scratch.md",
            "todo.md",
        ]  # no temp files left behind

        assert await call_ok(session, "delete_note", {"name": "scratch"}) == "Deleted scratch."
        assert not (workspace / "scratch.md").exists()
        gone = await call_error(session, "delete_note", {"name": "scratch"})
        assert "no note named 'scratch'" in gone
        assert "no note named 'nope'" in await call_error(session, "read_note", {"name": "nope"})
        assert "empty" in await call_error(session, "search_notes", {"query": "  "})
    assert client.roots_asked == 1  # asked once, then remembered until list_changed


async def test_roots_decide_where_notes_live(workspace: Path, other_dir: Path) -> None:
    client = Client([workspace])
    async with notes_session(client) as session:
        assert "meeting" in await call_ok(session, "list_notes")
        shown = await call_ok(session, "show_roots")
        assert f"- notes: {workspace.as_uri()}" in shown
        assert f"Notes are kept in {workspace}: the client's first file root (notes)." in shown

        client.roots = [other_dir, workspace]
        await session.notify_roots_list_changed()
        with trio.fail_after(5):
            while "elsewhere" not in (listing := await call_ok(session, "list_notes")):
                await trio.sleep(0.02)
        assert listing == "1 note(s):\n- elsewhere (12 bytes)"
        await call_ok(session, "write_note", {"name": "moved", "text": "here"})
        assert (other_dir / "moved.md").is_file()
        assert not (workspace / "moved.md").exists()
        shown = await call_ok(session, "show_roots")
        assert shown.startswith("The client exposes 2 root(s):")
        assert f"Notes are kept in {other_dir}" in shown
    assert client.roots_asked == 2


async def test_without_roots_the_notes_dir_is_used(workspace: Path, other_dir: Path) -> None:
    # No roots capability: the server must not ask, and uses --notes-dir.
    async with notes_session(Client(None), "--notes-dir", str(workspace)) as session:
        assert (await call_ok(session, "list_notes")).startswith("3 note(s):")
        shown = await call_ok(session, "show_roots")
        assert shown == (
            "The client exposes no roots.\n"
            f"Notes are kept in {workspace}: --notes-dir (the client exposes no file:// root)."
        )
        prompt = await session.get_prompt("daily_summary", {})
        assert "## meeting.md" in prompt.messages[0].content.text  # type: ignore[union-attr]
    # Roots offered but none is a file:// root: --notes-dir too.
    client = Client([])
    async with notes_session(client, "--notes-dir", str(other_dir)) as session:
        assert "elsewhere" in await call_ok(session, "list_notes")
    assert client.roots_asked == 1


async def test_without_roots_or_notes_dir_requests_fail_clearly(tmp_path: Path) -> None:
    async with notes_session(Client(None)) as session:
        error = await call_error(session, "list_notes", {})
        assert "no notes directory" in error
        with pytest.raises(JSONRPCError) as caught:
            await session.get_prompt("daily_summary", {})
        assert caught.value.code == INVALID_PARAMS
        with pytest.raises(JSONRPCError):
            await session.read_resource("notes://index")
        shown = await call_ok(session, "show_roots")
        assert "Notes are unavailable: no notes directory" in shown


@pytest.mark.parametrize(
    "name",
    [
        "../secret",
        "..",
        "../../etc/passwd",
        "/etc/passwd",
        "a/b",
        "a\\b",
        ".hidden",
        "",
        " ",
        "C:secret",
        "x" * 101,
        "nul\x00byte",
        "line\nbreak",
    ],
)
async def test_note_names_cannot_escape(workspace: Path, name: str) -> None:
    outside = workspace.parent / "secret.md"
    outside.write_text("outside\n", encoding="utf-8")
    before = sorted(p.name for p in workspace.parent.rglob("*"))
    async with notes_session(Client([workspace])) as session:
        for tool, args in (
            ("read_note", {"name": name}),
            ("write_note", {"name": name, "text": "pwned"}),
            ("delete_note", {"name": name}),
        ):
            assert "invalid note name" in await call_error(session, tool, args)
        with pytest.raises(JSONRPCError):
            await session.get_prompt("review_note", {"name": name})
    assert outside.read_text(encoding="utf-8") == "outside\n"
    assert sorted(p.name for p in workspace.parent.rglob("*")) == before


async def test_symlinked_notes_are_refused(workspace: Path) -> None:
    outside = workspace.parent / "outside.md"
    outside.write_text("secret\n", encoding="utf-8")
    (workspace / "link.md").symlink_to(outside)
    async with notes_session(Client([workspace])) as session:
        assert "link" not in await call_ok(session, "list_notes")
        assert "symlink" in await call_error(session, "read_note", {"name": "link"})
        assert "symlink" in await call_error(
            session, "write_note", {"name": "link", "text": "overwritten"}
        )
        assert "symlink" in await call_error(session, "delete_note", {"name": "link"})
        with pytest.raises(JSONRPCError):
            await session.read_resource("notes://note/link")
        with pytest.raises(JSONRPCError):
            await session.read_resource("notes://note/..%2Foutside")
    assert outside.read_text(encoding="utf-8") == "secret\n"
    assert (workspace / "link.md").is_symlink()


@pytest.mark.parametrize("revision", SUPPORTED_REVISIONS)
async def test_summarize_asks_for_sampling_with_preferences(workspace: Path, revision: str) -> None:
    client = Client([workspace])
    async with notes_session(client, revision=revision) as session:
        answer = await call_ok(session, "summarize_note", {"name": "meeting"})
    assert answer == "Summary of meeting (model: test-model):\n- one short summary line"
    [params] = client.sampling
    prefs = params.model_preferences
    assert prefs is not None
    assert [h.name for h in prefs.hints or ()] == ["claude-3-haiku", "gpt-4o-mini"]
    assert (prefs.speed_priority, prefs.cost_priority, prefs.intelligence_priority) == (
        0.9,
        0.8,
        0.2,
    )
    assert params.max_tokens == 300
    assert params.include_context == "none"
    assert params.system_prompt is not None and "summarise" in params.system_prompt
    [message] = params.messages
    assert message.role == "user"
    assert isinstance(message.content, TextContent)
    meeting = (workspace / "meeting.md").read_text(encoding="utf-8")
    assert message.content.text == f"Summarise this note (meeting.md):\n\n{meeting}"


async def test_summarize_needs_the_sampling_capability(workspace: Path) -> None:
    client = Client([workspace])
    async with notes_session(client, sampling=False) as session:
        with pytest.raises(JSONRPCError) as caught:
            await session.call_tool("summarize_note", {"name": "meeting"})
        assert caught.value.code == MISSING_CAPABILITY
        # A missing note fails before anything is sampled.
        async with notes_session(client) as sampling_session:
            error = await call_error(sampling_session, "summarize_note", {"name": "nope"})
        assert "no note named 'nope'" in error
    assert client.sampling == []


async def test_summary_preferences_map_to_the_configured_models(workspace: Path) -> None:
    """The server's real preferences, through selection, for each key a user may set."""
    client = Client([workspace])
    async with notes_session(client) as session:
        await call_ok(session, "summarize_note", {"name": "ideas"})
    raw = unstructure(client.sampling[0].model_preferences, LATEST_REVISION)
    prefs = ModelPreferences.from_mcp(raw)
    config = load_config(CONFIG, env={})
    providers = parse_providers(config.providers, source=str(CONFIG))

    def pick(env: dict[str, str]) -> tuple[str, str, str]:
        chosen = select_model(
            prefs, available_models(providers, env), default=default_choice(providers, env)
        )
        return chosen.provider, chosen.info.tier, chosen.reason

    # Offline: the replay is the only candidate, and the reason says how the hint mapped.
    provider, _tier, reason = pick({})
    assert provider == "demo"
    assert "hint 'claude-3-haiku'" in reason and "demo/scripted-replay" in reason
    # With a real key, the small-model hint lands on that vendor's low tier, never the replay.
    assert pick({"ANTHROPIC_API_KEY": "k"})[:2] == ("anthropic", "low")
    assert pick({"OPENAI_API_KEY": "k"})[:2] == ("openai", "low")


async def test_prompts_with_arguments(workspace: Path) -> None:
    async with notes_session(Client([workspace])) as session:
        prompts = {p.name: p for p in await session.list_prompts()}
        assert set(prompts) == {"review_note", "daily_summary"}
        arguments = [(a.name, a.required) for a in prompts["review_note"].arguments or ()]
        assert arguments == [("name", True), ("focus", False)]
        assert not prompts["daily_summary"].arguments

        meeting = (workspace / "meeting.md").read_text(encoding="utf-8")
        review = await session.get_prompt("review_note", {"name": "meeting", "focus": "tone"})
        [message] = review.messages
        assert message.role == "user"
        text = message.content.text  # type: ignore[union-attr]
        assert text.startswith("Review my note 'meeting' for tone.")
        assert text.endswith(meeting)
        default = await session.get_prompt("review_note", {"name": "meeting"})
        assert "for clarity." in default.messages[0].content.text  # type: ignore[union-attr]

        daily = await session.get_prompt("daily_summary", {})
        text = daily.messages[0].content.text  # type: ignore[union-attr]
        assert [
            line for line in text.splitlines() if line.startswith("## ") and line.endswith(".md")
        ] == [
            "## ideas.md",
            "## meeting.md",
            "## scratch.md",
        ]
        with pytest.raises(JSONRPCError) as caught:
            await session.get_prompt("review_note", {"name": "nope"})
        assert caught.value.code == INVALID_PARAMS


async def test_resources_index_and_template(workspace: Path) -> None:
    async with notes_session(Client([workspace])) as session:
        [index] = await session.list_resources()
        assert (index.uri, index.mime_type) == ("notes://index", "text/markdown")
        [template] = await session.list_resource_templates()
        assert (template.uri_template, template.mime_type) == (
            "notes://note/{name}",
            "text/markdown",
        )

        [contents] = (await session.read_resource("notes://index")).contents
        assert isinstance(contents, TextResourceContents)
        assert contents.text.splitlines() == [
            "# Notes",
            "",
            "- [ideas](notes://note/ideas): Ideas",
            "- [meeting](notes://note/meeting): Weekly sync, 2026-11-18",
            "- [scratch](notes://note/scratch): Scratch",
        ]
        [note] = (await session.read_resource("notes://note/meeting")).contents
        assert isinstance(note, TextResourceContents)
        assert note.text == (workspace / "meeting.md").read_text(encoding="utf-8")
        assert note.mime_type == "text/markdown"
        with pytest.raises(JSONRPCError) as caught:
            await session.read_resource("notes://note/nope")
        assert caught.value.code == INVALID_PARAMS


# ---------------------------------------------------------------------- the demo files


def demo_config(env: dict[str, str] | None = None) -> HostConfig:
    return load_config(CONFIG, env={} if env is None else env)


def demo_policy() -> PolicyConfig:
    config = demo_config()
    return parse_policy(config.policy, source=str(CONFIG), base_dir=EXAMPLES)


def test_demo_config_loads() -> None:
    config = demo_config()
    notes = config.server("notes")
    assert notes.transport == "stdio"
    assert notes.trusted and notes.required
    assert notes.cwd == str(EXAMPLES)
    assert notes.args == ("servers/notes_server.py", "--notes-dir", "workspace")
    assert notes.command == "../.venv/bin/python"
    assert [(w.name, w.path) for w in config.workspaces_for(notes)] == [
        ("demo-notes", str((EXAMPLES / "workspace").resolve()))
    ]
    assert (
        demo_config({"AGENTHOST_PYTHON": "/opt/py/bin/python3"}).server("notes").command
        == "/opt/py/bin/python3"
    )

    providers = parse_providers(config.providers, source=str(CONFIG))
    demo = providers.get("demo")
    assert demo.kind == "scripted"
    assert demo.script is not None and (EXAMPLES / demo.script).is_file()
    # Offline the replay drives the agent; a key switches to that vendor, no edit needed.
    assert default_choice(providers, {}) == ("demo", REPLAY_MODEL)
    assert default_choice(providers, {"ANTHROPIC_API_KEY": "k"}) is not None
    assert default_choice(providers, {"ANTHROPIC_API_KEY": "k"})[0] == "anthropic"  # type: ignore[index]
    assert default_choice(providers, {"OPENAI_API_KEY": "k"})[0] == "openai"  # type: ignore[index]


def test_demo_script_is_a_labelled_replay() -> None:
    script = EXAMPLES / "demo-script.toml"
    replay = ScriptedProvider.from_file(script, name="demo")  # the loader the host uses
    assert replay.remaining == 6
    turns = tomllib.loads(script.read_text(encoding="utf-8"))["turns"]
    assert script.read_text(encoding="utf-8").startswith("# THIS IS A REPLAY SCRIPT, NOT AN LLM.")
    assert all(turn["text"].startswith("[replay") for turn in turns)
    calls = [[c["name"] for c in turn.get("tool_calls", ())] for turn in turns]
    assert calls == [
        ["notes__list_notes"],
        ["notes__summarize_note"],
        [],  # the notes server's sampling request
        ["notes__delete_note"],
        ["notes__show_roots"],
        [],  # the final answer
    ]


async def test_demo_policy_decides_the_live_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = demo_policy()
    assert policy.mode == "headless"
    assert policy.preset == "headless-readonly"
    assert policy.audit is not None
    assert policy.audit.path == EXAMPLES / "audit.jsonl"
    ignored = (EXAMPLES / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "audit*.jsonl" in ignored
    engine = PolicyEngine(rules=policy.all_rules, mode=policy.mode)

    # The server as the demo starts it (its command, from another directory).
    monkeypatch.chdir(tmp_path)
    env = dict(os.environ)
    if not (EXAMPLES / "../.venv/bin/python").exists():  # a venv elsewhere: the override
        env["AGENTHOST_PYTHON"] = sys.executable
    config = demo_config(env)
    notes = config.server("notes")
    roots = [workspace_root(w) for w in config.workspaces_for(notes)]

    async def on_roots(ctx: RequestContext, params: Any) -> ListRootsResult:
        return ListRootsResult(roots=roots)

    async with connect(notes, handlers=ClientHandlers(roots=on_roots)) as session:
        tools = await session.list_tools()
        listing = text_of(await session.call_tool("list_notes", {}))
    assert listing.startswith("3 note(s):")

    verdicts = {}
    for tool in tools:
        assert tool.annotations is not None
        hints = {
            "readOnlyHint": tool.annotations.read_only_hint,
            "destructiveHint": tool.annotations.destructive_hint,
            "idempotentHint": tool.annotations.idempotent_hint,
            "openWorldHint": tool.annotations.open_world_hint,
        }
        annotations = {k: v for k, v in hints.items() if v is not None}
        call = ToolCall(server="notes", tool=tool.name, annotations=annotations, trusted=True)
        decision = await engine.check(call)
        verdicts[tool.name] = (decision.allowed, decision.rule)
        # Untrusted, the same annotations count for nothing: only the preset's deny is left.
        untrusted = await engine.check(attrs.evolve(call, trusted=False))
        if tool.name != "delete_note":
            assert not untrusted.allowed
    assert verdicts == {
        "list_notes": (True, "notes-read-only"),
        "read_note": (True, "notes-read-only"),
        "search_notes": (True, "notes-read-only"),
        "summarize_note": (True, "notes-read-only"),
        "show_roots": (True, "notes-read-only"),
        "write_note": (True, "notes-write"),
        "delete_note": (False, "no-destructive-notes"),
    }

    sampling = await engine.check(
        Sampling(server="notes", max_tokens=4000, provider="demo", model=REPLAY_MODEL)
    )
    assert sampling.allowed and sampling.rule == "notes-sampling"
    assert sampling.sampling is not None
    assert sampling.sampling.max_tokens == 512
    assert sampling.sampling.auto_review
    other = await engine.check(Sampling(server="elsewhere", max_tokens=10))
    assert not other.allowed  # only the notes server may sample
    exposed = await engine.check(
        RootsExposure(server="notes", roots=tuple(r.uri for r in roots), trusted=True)
    )
    assert exposed.allowed and exposed.rule == "notes-roots"


async def test_demo_replay_end_to_end(workspace: Path, tmp_path: Path) -> None:
    """The demo's task, turn by turn, through a real host: what `make demo` shows."""
    config = attrs.evolve(
        demo_config(), workspaces=(Workspace.from_path(workspace, name="demo-notes"),)
    )
    policy = demo_policy()
    audit = tmp_path / "audit.jsonl"
    engine = PolicyEngine.from_config(attrs.evolve(policy, audit=AuditConfig(path=audit)))
    replay = ScriptedProvider.from_file(EXAMPLES / "demo-script.toml", name="demo")
    events: list[Any] = []
    outcomes: list[str] = []
    final = ""
    with engine:
        async with open_host(
            config, policy=engine, providers={"demo": replay}, env={}, on_event=events.append
        ) as host:
            user = llm.Message(role="user", content=(llm.TextContent(text="Tidy up my notes"),))
            # The agent's side of the loop, minimal: ask the replay, run its tool calls.
            while True:
                turn = await replay.complete(
                    llm.Request(model=REPLAY_MODEL, messages=(user,), max_tokens=1024)
                )
                if not turn.tool_uses:
                    final = turn.text
                    break
                for call in turn.tool_uses:
                    try:
                        result = await host.call_tool(call.name, dict(call.input))
                        outcomes.append(f"{call.name}: {text_of(result)}")
                    except ConsentDenied as denied:
                        outcomes.append(f"{call.name}: DENIED by {denied.rule}: {denied}")

    assert replay.remaining == 0
    assert final.startswith("[replay] Done.")
    listed, summarized, deleted, roots = outcomes
    assert listed.startswith("notes__list_notes: 3 note(s):")
    assert summarized.startswith(
        f"notes__summarize_note: Summary of meeting (model: {REPLAY_MODEL}):\n"
        "[replay: canned text, not written by a model]"
    )
    assert deleted == (
        "notes__delete_note: DENIED by no-destructive-notes: destructive note tools are"
        " disabled in the demo; delete notes by hand"
    )
    assert (workspace / "scratch.md").is_file()
    assert f"- demo-notes: {workspace.resolve().as_uri()}" in roots

    selected = [e for e in events if isinstance(e, SamplingEvent) and e.stage == "selected"]
    [selection] = selected
    assert (selection.server, selection.provider, selection.model) == (
        "notes",
        "demo",
        REPLAY_MODEL,
    )
    assert "hint 'claude-3-haiku'" in selection.message

    records = read_audit(audit)
    decisions = [
        (r["kind"], r["name"], r["decision"], r["rule"])
        for r in records
        if r["event"] == "decision"
    ]
    assert decisions == [
        ("tool", "list_notes", "allow", "notes-read-only"),
        ("roots", "", "allow", "notes-roots"),
        ("tool", "summarize_note", "allow", "notes-read-only"),
        ("sampling", "", "allow", "notes-sampling"),
        ("tool", "delete_note", "deny", "no-destructive-notes"),
        ("tool", "show_roots", "allow", "notes-read-only"),
    ]
    [sampled] = [r for r in records if r["event"] == "decision" and r["kind"] == "sampling"]
    assert sampled["max_tokens"] == 300  # under the policy's 512 cap
