"""notes_server: the demo's workspace notes server, built on the official MCP Python SDK.

Why it exists: agenthost's demo needs one real server that exercises everything a host
does for its servers, with nothing faked: tools whose annotations the consent policy
believes (read-only, write, destructive), a tool that asks the host for *sampling* with
model preferences, a tool that shows the *roots* it was given, prompts with arguments,
and a static and a templated resource. It is also an example of a *safe* server.

Where the notes live: Markdown files (``<name>.md``) in one directory, chosen per request:

1. the first ``file://`` root the client exposes (``roots/list``, asked on first use and
   again after ``notifications/roots/list_changed``, so a host that changes its roots
   moves the notes without a restart);
2. otherwise (the client declared no ``roots`` capability, or exposes no ``file://``
   root) the ``--notes-dir`` given on the command line;
3. otherwise the request fails and says so.

Safety: a note name is one path component of letters, digits, space, ``_``, ``.`` and
``-`` (an optional ``.md`` suffix is dropped); ``..``, ``/``, ``\\``, absolute names and
hidden names are refused, and so is a note that is a symlink, so nothing outside the notes
directory is ever read, written or deleted. Writes are atomic (temp file + rename).

Usage::

    python examples/servers/notes_server.py [--notes-dir DIR]

It speaks MCP over stdio and exits when stdin closes. Sampling and roots go through the
SDK's ``Resolve`` markers in tools, so they work on every revision (a mid-call request on
the ``initialize`` revisions, an input-required round trip on 2026-07-28); prompts and
resources ask ``roots/list`` directly and fall back to ``--notes-dir`` where the client
cannot be asked.
"""

from __future__ import annotations

import argparse
import contextvars
import os
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

try:
    from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve, Sample, UserMessage
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
    from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
    from mcp_types import (
        INVALID_PARAMS,
        CreateMessageResult,
        ListRootsResult,
        ModelHint,
        ModelPreferences,
        NotificationParams,
        Root,
        SamplingMessage,
        TextContent,
        ToolAnnotations,
    )
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    if (exc.name or "").partition(".")[0] not in ("mcp", "mcp_types"):
        raise
    sys.stderr.write(
        "notes_server: this example server needs the official MCP Python SDK;"
        " install it with: pip install 'mcp==2.3.0'\n"
    )
    raise SystemExit(2) from None

__all__ = [
    "INDEX_URI",
    "NOTE_TEMPLATE",
    "NoteError",
    "NotesStore",
    "build_server",
    "choose_notes_dir",
    "main",
    "note_stem",
    "root_path",
]

INDEX_URI = "notes://index"
NOTE_TEMPLATE = "notes://note/{name}"

#: One path component, starting with a letter or digit (so never hidden, never "..").
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.-]{0,99}\Z")
#: Largest note accepted by ``write_note``, in characters: a demo store, not a database.
MAX_NOTE_CHARS = 100_000
#: How much of a note goes into a sampling request or a prompt.
MAX_EXCERPT_CHARS = 8_000
MAX_SEARCH_HITS = 50

#: The sampling request of ``summarize_note`` says what kind of model it wants: small and
#: fast is enough to summarise a note (hints are advisory; the host maps them to what it
#: has, and says why).
SUMMARY_PREFERENCES = ModelPreferences(
    hints=[ModelHint(name="claude-3-haiku"), ModelHint(name="gpt-4o-mini")],
    cost_priority=0.8,
    speed_priority=0.9,
    intelligence_priority=0.2,
)
SUMMARY_MAX_TOKENS = 300
SUMMARY_SYSTEM_PROMPT = (
    "You summarise Markdown notes in at most three short bullet points. "
    "Reply with the summary only."
)

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

#: The Context of the resources/read being served. The SDK injects no Context into static
#: resources, but ``notes://index`` must ask the client for its roots like everything else.
_READING: contextvars.ContextVar[Context[Any, Any] | None] = contextvars.ContextVar(
    "notes_reading", default=None
)


class NoteError(ValueError):
    """A request the store refuses: a bad name, a missing note, no notes directory."""


def note_stem(name: str) -> str:
    """The file stem of note ``name``, or NoteError if the name could leave the directory.

    ``"meeting"`` and ``"meeting.md"`` are the same note. Refused: empty names, path
    separators, ``..``, absolute paths, hidden names, control characters, over 100 chars.
    """
    stem = name.strip().removesuffix(".md")
    if not _NAME.match(stem) or ".." in stem:
        raise NoteError(
            f"invalid note name {name!r}: use one name of letters, digits, space, '_', '.'"
            " and '-' (no '/', '\\', '..' or leading '.'), e.g. 'meeting'"
        )
    return stem


def root_path(uri: str) -> Path | None:
    """The local directory a ``file://`` root URI names; ``None`` for any other URI."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return Path(url2pathname(parts.path))


def choose_notes_dir(roots: Sequence[Root], fallback: Path | None) -> tuple[Path, str]:
    """Where the notes live for this request, and a phrase saying why.

    Raises:
        NoteError: the chosen root is not a directory here, or there is nowhere at all.
    """
    for root in roots:
        path = root_path(str(root.uri))
        if path is None:
            continue
        if not path.is_dir():
            raise NoteError(f"the client's first file root {root.uri} is not a directory here")
        return path, f"the client's first file root ({root.name or root.uri})"
    if fallback is not None:
        return fallback, "--notes-dir (the client exposes no file:// root)"
    raise NoteError(
        "no notes directory: the client exposes no file:// root and no --notes-dir was given"
    )


class NotesStore:
    """The notes in one directory: Markdown files, one per note, names checked."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, name: str) -> Path:
        """The file of note ``name`` (which may not exist yet), inside the directory."""
        path = self.directory / f"{note_stem(name)}.md"
        if path.is_symlink():
            raise NoteError(f"note {name!r} is a symlink; notes must be regular files")
        return path

    def names(self) -> list[str]:
        """Every note, sorted; files that are not plain, safely named notes are skipped."""
        found = []
        with os.scandir(self.directory) as entries:
            for entry in entries:
                stem = entry.name.removesuffix(".md")
                if (
                    entry.name.endswith(".md")
                    and entry.is_file(follow_symlinks=False)
                    and _NAME.match(stem)
                    and ".." not in stem
                ):
                    found.append(stem)
        return sorted(found)

    def read(self, name: str) -> str:
        path = self.path(name)
        try:
            # O_NOFOLLOW: a symlink swapped in after the check above still is not followed.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            raise NoteError(f"no note named {note_stem(name)!r}") from None
        except OSError as exc:
            raise NoteError(f"cannot read note {note_stem(name)!r}: {exc.strerror}") from None
        with open(fd, encoding="utf-8") as file:
            return file.read()

    def write(self, name: str, text: str) -> bool:
        """Create or replace a note atomically; False when it already held ``text``."""
        if len(text) > MAX_NOTE_CHARS:
            raise NoteError(f"a note holds at most {MAX_NOTE_CHARS} characters")
        path = self.path(name)
        try:
            if path.read_text(encoding="utf-8") == text:
                return False
        except FileNotFoundError:
            pass
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            temp.write_text(text, encoding="utf-8")
            os.replace(temp, path)
        finally:
            temp.unlink(missing_ok=True)
        return True

    def delete(self, name: str) -> None:
        try:
            self.path(name).unlink()
        except FileNotFoundError:
            raise NoteError(f"no note named {note_stem(name)!r}") from None

    def search(self, query: str) -> list[tuple[str, int, str]]:
        """``(note, line number, line)`` for lines containing ``query`` (any case)."""
        needle = query.strip().casefold()
        if not needle:
            raise NoteError("the search query is empty")
        hits: list[tuple[str, int, str]] = []
        for name in self.names():
            for number, line in enumerate(self.read(name).splitlines(), start=1):
                if needle in line.casefold():
                    hits.append((name, number, line.strip()))
                    if len(hits) >= MAX_SEARCH_HITS:
                        return hits
        return hits


def _excerpt(text: str) -> str:
    if len(text) <= MAX_EXCERPT_CHARS:
        return text
    return text[:MAX_EXCERPT_CHARS] + "\n[... note truncated ...]"


class _NotesServer(MCPServer[Any]):
    """MCPServer plus the notes state: the fallback directory and the client's roots."""

    #: Where notes live when the client exposes no file root; ``None``: nowhere.
    notes_dir: Path | None = None
    #: The client's roots as last listed; ``None`` until asked, and again after
    #: ``notifications/roots/list_changed``. One process serves one client over stdio, so
    #: this is per connection: roots are asked once, not on every call (which the spec's
    #: list_changed notification exists to make unnecessary).
    known_roots: list[Root] | None = None

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        token = _READING.set(context)
        try:
            return await super().read_resource(uri, context)
        finally:
            _READING.reset(token)


def _server_of(ctx: Context[Any, Any]) -> _NotesServer:
    server = ctx.mcp_server
    assert isinstance(server, _NotesServer)
    return server


def _has_roots(ctx: Context[Any, Any]) -> bool:
    caps = ctx.client_capabilities
    return caps is not None and caps.roots is not None


# -- resolvers: what a tool needs from the client, asked through the SDK's Resolve ----------


async def ask_roots(ctx: Context[Any, Any]) -> ListRoots | ListRootsResult:
    """The client's roots: remembered ones, a ``roots/list`` request, or none.

    A client that did not declare ``roots`` is not asked (that would be a protocol
    error); "no roots" is a real answer here: it selects ``--notes-dir``.
    """
    if not _has_roots(ctx):
        return ListRootsResult(roots=[])
    known = _server_of(ctx).known_roots
    return ListRoots() if known is None else ListRootsResult(roots=known)


Roots = Annotated[ListRootsResult, Resolve(ask_roots)]


async def _roots_now(ctx: Context[Any, Any]) -> list[Root]:
    """The client's roots for prompts and resources, which the SDK gives no Resolve."""
    server = _server_of(ctx)
    if not _has_roots(ctx) or not ctx.session.can_send_request:
        return []
    if server.known_roots is None:
        server.known_roots = list((await ctx.session.list_roots()).roots)
    return server.known_roots


def _tool_store(ctx: Context[Any, Any], roots: ListRootsResult) -> NotesStore:
    """The store for a tool call (remembering the roots); errors become the tool's result."""
    server = _server_of(ctx)
    if _has_roots(ctx):
        server.known_roots = list(roots.roots)
    try:
        directory, _why = choose_notes_dir(roots.roots, server.notes_dir)
    except NoteError as exc:
        raise ToolError(str(exc)) from None
    return NotesStore(directory)


async def _request_store(ctx: Context[Any, Any]) -> NotesStore:
    """The store for a prompt or resource read; errors become JSON-RPC errors."""
    try:
        directory, _why = choose_notes_dir(await _roots_now(ctx), _server_of(ctx).notes_dir)
    except NoteError as exc:
        raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
    return NotesStore(directory)


def ask_summary(name: str, roots: Roots, ctx: Context[Any, Any]) -> Sample:
    """The sampling request of ``summarize_note``: the note, and a small-model hint."""
    try:
        text = _tool_store(ctx, roots).read(name)
    except NoteError as exc:
        raise ToolError(str(exc)) from None
    prompt = f"Summarise this note ({note_stem(name)}.md):\n\n{_excerpt(text)}"
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=SUMMARY_MAX_TOKENS,
        system_prompt=SUMMARY_SYSTEM_PROMPT,
        include_context="none",
        model_preferences=SUMMARY_PREFERENCES,
    )


def build_server(notes_dir: Path | None = None) -> MCPServer[Any]:
    """The notes server; ``notes_dir`` is used only when the client exposes no file root."""
    server = _NotesServer(
        name="agenthost-notes",
        version="1.0.0",
        instructions=(
            "Workspace notes (Markdown). Read-only tools: list_notes, read_note,"
            " search_notes, summarize_note, show_roots. write_note creates or replaces a"
            " note; delete_note removes one for good."
        ),
        log_level="WARNING",
    )
    server.notes_dir = notes_dir

    async def roots_changed(_ctx: Any, _params: NotificationParams) -> None:
        server.known_roots = None  # ask again on the next request

    # MCPServer has no API for client notifications; the low-level server has (NOTES.md).
    server._lowlevel_server.add_notification_handler(
        "notifications/roots/list_changed", NotificationParams, roots_changed
    )

    # -- tools -------------------------------------------------------------------------

    @server.tool(
        description="List the notes in the workspace (names without .md, with sizes).",
        annotations=_READ_ONLY,
        structured_output=False,
    )
    def list_notes(roots: Roots, ctx: Context[Any, Any]) -> str:
        store = _tool_store(ctx, roots)
        names = store.names()
        if not names:
            return "No notes yet."
        lines = [f"- {n} ({store.path(n).stat().st_size} bytes)" for n in names]
        return f"{len(names)} note(s):\n" + "\n".join(lines)

    @server.tool(
        description="Read one note (Markdown). `name` is e.g. 'meeting' or 'meeting.md'.",
        annotations=_READ_ONLY,
        structured_output=False,
    )
    def read_note(name: str, roots: Roots, ctx: Context[Any, Any]) -> str:
        try:
            return _tool_store(ctx, roots).read(name)
        except NoteError as exc:
            raise ToolError(str(exc)) from None

    @server.tool(
        description="Find lines containing `query` (case-insensitive) in every note.",
        annotations=_READ_ONLY,
        structured_output=False,
    )
    def search_notes(query: str, roots: Roots, ctx: Context[Any, Any]) -> str:
        try:
            hits = _tool_store(ctx, roots).search(query)
        except NoteError as exc:
            raise ToolError(str(exc)) from None
        if not hits:
            return f"No note mentions {query.strip()!r}."
        return "\n".join(f"{name}:{number}: {line}" for name, number, line in hits)

    @server.tool(
        description="Create a note or replace its whole text (idempotent; never deletes).",
        annotations=_WRITE,
        structured_output=False,
    )
    def write_note(name: str, text: str, roots: Roots, ctx: Context[Any, Any]) -> str:
        try:
            changed = _tool_store(ctx, roots).write(name, text)
        except NoteError as exc:
            raise ToolError(str(exc)) from None
        stem = note_stem(name)
        return f"Wrote {stem} ({len(text)} characters)." if changed else f"{stem} is unchanged."

    @server.tool(
        description="Delete a note permanently. This cannot be undone.",
        annotations=_DESTRUCTIVE,
        structured_output=False,
    )
    def delete_note(name: str, roots: Roots, ctx: Context[Any, Any]) -> str:
        try:
            _tool_store(ctx, roots).delete(name)
        except NoteError as exc:
            raise ToolError(str(exc)) from None
        return f"Deleted {note_stem(name)}."

    @server.tool(
        description=(
            "Summarise a note by asking the client's LLM (MCP sampling; the server prefers"
            " a small, fast model). Returns the summary and the model that wrote it."
        ),
        annotations=_READ_ONLY,
        structured_output=False,
    )
    def summarize_note(
        name: str, summary: Annotated[CreateMessageResult, Resolve(ask_summary)]
    ) -> str:
        content = summary.content
        text = content.text if isinstance(content, TextContent) else "(no text in the answer)"
        return f"Summary of {note_stem(name)} (model: {summary.model}):\n{text}"

    @server.tool(
        description="Show the roots this server sees (roots/list) and where notes are kept.",
        annotations=_READ_ONLY,
        structured_output=False,
    )
    def show_roots(roots: Roots, ctx: Context[Any, Any]) -> str:
        listing = roots.roots
        if _has_roots(ctx):
            server.known_roots = list(listing)
        if listing:
            lines = [f"The client exposes {len(listing)} root(s):"]
            lines += [f"- {r.name or '(unnamed)'}: {r.uri}" for r in listing]
        else:
            lines = ["The client exposes no roots."]
        try:
            directory, why = choose_notes_dir(listing, notes_dir)
            lines.append(f"Notes are kept in {directory}: {why}.")
        except NoteError as exc:
            lines.append(f"Notes are unavailable: {exc}.")
        return "\n".join(lines)

    # -- prompts -----------------------------------------------------------------------

    @server.prompt(description="Ask for a review of one note, with a focus (default clarity).")
    async def review_note(name: str, ctx: Context[Any, Any], focus: str = "clarity") -> list[Any]:
        focus = focus.strip()
        if not focus or len(focus) > 80:
            raise MCPError(code=INVALID_PARAMS, message="focus must be 1-80 characters")
        store = await _request_store(ctx)
        try:
            text = store.read(name)
        except NoteError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        return [
            UserMessage(
                f"Review my note '{note_stem(name)}' for {focus}. Suggest concrete edits,"
                f" quoting the lines they change.\n\n---\n{_excerpt(text)}"
            )
        ]

    @server.prompt(description="Ask for today's summary across all notes.")
    async def daily_summary(ctx: Context[Any, Any]) -> list[Any]:
        store = await _request_store(ctx)
        names = store.names()
        if not names:
            return [UserMessage("I have no notes today. Suggest three things worth noting.")]
        parts = [f"## {n}.md\n\n{_excerpt(store.read(n))}" for n in names]
        return [
            UserMessage(
                "Here are my notes. Write a short daily summary: what was decided, what is"
                " still open, and the next actions with owners.\n\n" + "\n\n".join(parts)
            )
        ]

    # -- resources ---------------------------------------------------------------------

    @server.resource(
        INDEX_URI,
        name="index",
        title="Notes index",
        description="Every note with its first line, as Markdown links to notes://note/{name}.",
        mime_type="text/markdown",
    )
    async def index() -> str:
        ctx = _READING.get()
        assert ctx is not None, "read through resources/read only"
        store = await _request_store(ctx)
        lines = ["# Notes", ""]
        for name in store.names():
            first = next((ln.strip() for ln in store.read(name).splitlines() if ln.strip()), "")
            lines.append(f"- [{name}](notes://note/{name}): {first.lstrip('# ')}")
        if len(lines) == 2:
            lines.append("(no notes yet)")
        return "\n".join(lines) + "\n"

    @server.resource(
        NOTE_TEMPLATE,
        name="note",
        title="A note",
        description="One note's Markdown text.",
        mime_type="text/markdown",
    )
    async def note(name: str, ctx: Context[Any, Any]) -> str:
        store = await _request_store(ctx)
        try:
            return store.read(name)
        except NoteError as exc:
            if exc.args[0].startswith("no note"):
                raise ResourceNotFoundError(str(exc)) from None
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None

    return server


def main(argv: list[str] | None = None) -> None:
    """Parse argv and serve over stdio until stdin closes."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--notes-dir",
        type=Path,
        help="where notes live when the client exposes no file:// root",
    )
    args = parser.parse_args(argv)
    notes_dir: Path | None = args.notes_dir
    if notes_dir is not None:
        notes_dir = notes_dir.expanduser().resolve()
        if not notes_dir.is_dir():
            parser.error(f"--notes-dir {args.notes_dir} is not a directory")
    # roots/list and sampling are deprecated at 2026-07-28 (the SDK warns on every use),
    # but they are what this server demonstrates on the revisions hosts speak today.
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    build_server(notes_dir).run("stdio")


if __name__ == "__main__":
    main()
