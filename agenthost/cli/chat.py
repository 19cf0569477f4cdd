"""``agenthost chat``: a REPL over the agent, with slash commands for the host.

On a terminal the line editor is prompt_toolkit (line editing, history kept across
sessions in ``$XDG_STATE_HOME/agenthost/chat_history``, Tab completion, Alt-Enter or
Esc Enter for a new line inside a message, Ctrl-C clears the line, Ctrl-D on an empty
line leaves). It runs in a worker thread, so servers keep being served (sampling,
elicitation, list changes) while the prompt waits; completions that need a server
(``completion/complete``) are asked from that thread through the Trio loop, with a
timeout. Without a terminal (a pipe), lines are read plainly. Whatever a server sent is
shown escaped (:func:`agenthost.cli.safe`), prompts and suggestions included. The history
file is private (0600 in a 0700 directory): it holds what the user typed. Slash commands:

  /tools  /servers  /prompts  /resources  /roots  /help  /quit
  /prompt SERVER NAME [key=value ...]   add a server's prompt to the conversation;
                                        missing required arguments are asked for, with
                                        the server's completions (completion/complete,
                                        a few seconds at most; Ctrl-C cancels)
  /call SERVER__TOOL [JSON]             call one tool (through the policy)
  /read URI                             read a resource
  /model [PROVIDER/MODEL]               show or change the model
  /clear                                start a new conversation
Anything else is a message to the agent, which keeps the conversation across turns;
Ctrl-C during a turn cancels it (the servers are told).
After each turn its tokens and estimated cost are shown, and the conversation is saved
(:mod:`agenthost.cli.sessions`): ``chat --resume [NAME]`` goes on with it later.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs
import trio
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from agenthost.cli.common import interruptible
from agenthost.cli.render import (
    Console,
    Stream,
    agent_printer,
    content_text,
    safe,
    say,
    table,
    usage_text,
)
from agenthost.errors import AgentHostError

if TYPE_CHECKING:
    from agenthost.agent.transcript import Transcript
    from agenthost.host.host import Host

__all__ = ["chat", "history_path"]

HELP = __doc__.split("Slash commands:", 1)[1].strip() if __doc__ else ""
#: How long a completion (Tab, or the suggestions for a missing /prompt argument) may wait
#: for a server before showing nothing.
COMPLETION_TIMEOUT = 3.0
#: Lines kept in the history file (older ones are dropped when it is rewritten).
HISTORY_LINES = 1000

T = TypeVar("T")


def history_path(env: dict[str, str] | None = None) -> Path:
    """Where chat history lives: ``$XDG_STATE_HOME/agenthost/chat_history``.

    The XDG base directory spec puts history in the state directory
    (``~/.local/state`` when ``XDG_STATE_HOME`` is unset).
    """
    source = os.environ if env is None else env
    base = source.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "agenthost" / "chat_history"


def _private_history(path: Path) -> None:
    """Make the history file 0600 in a 0700 directory, whatever made them before.

    Why: it holds everything the user typed (arguments, pasted secrets), like the
    approvals file; prompt_toolkit would create it with the umask's 0644.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _discard_terminal_input() -> bool:
    """Drop what was typed on the terminal but not read yet; whether there was any.

    Why: while chat waits for a server, typed lines queue in the terminal; the next
    question must be answered by what is typed after it is shown, not before.
    """
    import termios

    try:
        fd = sys.stdin.fileno()
        if not os.isatty(fd):
            return False
        import fcntl
        import struct

        pending = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        termios.tcflush(fd, termios.TCIFLUSH)
    except (OSError, ValueError):
        return False
    return bool(pending)


class _Reader(Protocol):
    async def read(self, prompt: str) -> str | None:
        """The next line; ``None`` at end of input."""
        ...

    def discard_typeahead(self) -> bool:
        """Drop input typed before now (a terminal only); whether there was any."""
        ...


class _PlainReader:
    """Lines from a pipe or file: no editing, no history."""

    async def read(self, prompt: str) -> str | None:

        sys.stderr.write(safe(prompt))
        sys.stderr.flush()
        line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        return None if line == "" else line.rstrip("\n")

    def discard_typeahead(self) -> bool:
        # A pipe's next line is its answer (scripts write them ahead); a terminal's is not.
        return _discard_terminal_input()


class _EditorReader:
    """prompt_toolkit in a worker thread: editing, history, completion."""

    def __init__(self, host: Host, token: trio.lowlevel.TrioToken) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.completion import ThreadedCompleter
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.key_binding import KeyBindings

        path = history_path()
        _private_history(path)
        _trim_history(path)
        bindings = KeyBindings()

        @bindings.add("escape", "enter")
        def _newline(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        self._session: PromptSession[str] = PromptSession(
            history=FileHistory(str(path)),
            completer=ThreadedCompleter(_Completer(host, token)),
            complete_while_typing=False,
            key_bindings=bindings,
            multiline=False,
        )

    def _prompt(self, prompt: str) -> str | None:
        while True:
            try:
                return self._session.prompt(prompt)
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt clears the line, as in a shell
            except EOFError:
                return None

    async def read(self, prompt: str) -> str | None:

        return await trio.to_thread.run_sync(self._prompt, safe(prompt), abandon_on_cancel=True)

    def discard_typeahead(self) -> bool:
        from prompt_toolkit.input.typeahead import clear_typeahead

        # Keys prompt_toolkit read past the end of the last line, then the terminal's own.
        had = False
        with contextlib.suppress(Exception):  # no input object yet: nothing read ahead
            from prompt_toolkit.input.typeahead import get_typeahead

            had = bool(get_typeahead(self._session.input))
            clear_typeahead(self._session.input)
        return _discard_terminal_input() or had


def _trim_history(path: Path) -> None:
    """Keep the history file bounded: drop the oldest entries beyond HISTORY_LINES."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return
    entries = text.split("\n\n# ")
    if len(entries) > HISTORY_LINES:
        kept = entries[-HISTORY_LINES:]
        path.write_text("# " + "\n\n# ".join(kept).removeprefix("# "), encoding="utf-8")


class _Completer(Completer):
    """Tab completion of slash commands, servers, prompts, arguments and their values.

    Called by prompt_toolkit in its own thread; every look at the host goes through the
    Trio loop (``trio.from_thread``), and a server's completion has a timeout.
    """

    def __init__(self, host: Host, token: trio.lowlevel.TrioToken) -> None:
        self._host = host
        self._token = token

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        try:
            words = shlex.split(text[1:]) + ([""] if text.endswith(" ") else [])
        except ValueError:  # an open quote
            return
        if not words:
            words = [""]
        partial = words[-1]

        for option in self._options(words[:-1], partial):
            yield Completion(
                option, start_position=-len(partial), display=safe(option, one_line=True)
            )

    def _run(self, fn: Callable[[], Awaitable[T]]) -> T:
        return trio.from_thread.run(fn, trio_token=self._token)

    def _options(self, done: list[str], partial: str) -> Iterable[str]:
        host = self._host
        if not done:
            return [c for c in COMMANDS if c.startswith(partial)]
        command = done[0]

        async def servers_with_prompts() -> list[str]:
            return sorted({s for s, _ in await host.list_prompts()})

        if command == "prompt" and len(done) == 1:
            return [
                shlex.quote(s) for s in self._run(servers_with_prompts) if s.startswith(partial)
            ]
        if command == "prompt" and len(done) == 2:

            async def prompt_names() -> list[str]:
                return [p.name for s, p in await host.list_prompts() if s == done[1]]

            return [n for n in self._run(prompt_names) if n.startswith(partial)]
        if command == "prompt":
            return self._prompt_arguments(done[1], done[2], done[3:], partial)
        if command == "call" and len(done) == 1:

            async def tools() -> list[str]:
                return [t.name for t in await host.list_tools()]

            return [t for t in self._run(tools) if t.startswith(partial)]
        if command == "read" and len(done) == 1:

            async def uris() -> list[str]:
                return [r.uri for _, r in await host.list_resources()]

            return [u for u in self._run(uris) if u.startswith(partial)]
        if command == "model" and len(done) == 1:

            async def models() -> list[str]:
                from agenthost_providers.config import available_models

                return [
                    f"{m.provider}/{m.id}"
                    for m in available_models(host.providers_config, host.env)
                    if m.provider in host.providers
                ]

            return [m for m in self._run(models) if m.startswith(partial)]
        return []

    def _prompt_arguments(
        self, server: str, name: str, given: list[str], partial: str
    ) -> Iterable[str]:
        host = self._host
        earlier = dict(p.split("=", 1) for p in given if "=" in p)

        async def argument_names() -> list[str]:
            for s, p in await host.list_prompts():
                if s == server and p.name == name:
                    return [a.name for a in p.arguments or []]
            return []

        if "=" not in partial:
            names = self._run(argument_names)
            return [f"{n}=" for n in names if n.startswith(partial) and n not in earlier]
        argument, _, value = partial.partition("=")

        async def values() -> list[str]:
            with trio.move_on_after(COMPLETION_TIMEOUT):
                return await _complete(host, server, name, argument, value, earlier)
            return []

        return [f"{argument}={shlex.quote(v)}" for v in self._run(values)]


async def _complete(
    host: Host,
    server: str,
    prompt: str,
    argument: str,
    value: str,
    context: dict[str, str] | None = None,
) -> list[str]:
    """The server's suggestions for an argument, given the arguments chosen before it."""
    session = host.session(server)
    caps = session.server_capabilities
    if caps is None or getattr(caps, "completions", None) is None:
        return []
    try:
        result = await session.complete(
            {"type": "ref/prompt", "name": prompt}, argument, value, context=context or None
        )
    except AgentHostError:
        return []
    return list(result.completion.values)


async def _prompt_command(
    host: Host, console: Console, reader: _Reader, words: list[str]
) -> list[Any]:
    from agenthost.mcp_to_llm import prompt_messages_to_llm

    if len(words) < 2:
        console.line("usage: /prompt SERVER NAME [key=value ...]")
        return []
    server, name, *pairs = words
    arguments = dict(p.split("=", 1) for p in pairs if "=" in p)
    listed = {p.name: p for s, p in await host.list_prompts() if s == server}
    prompt = listed.get(name)
    if prompt is None:
        have = ", ".join(safe(n, one_line=True) for n in listed) or "none"
        console.line(f"no prompt {name!r} on {server} (have: {have})")
        return []
    for arg in prompt.arguments or []:
        if arg.name in arguments or not arg.required:
            continue
        options: list[str] = []
        # Bounded, and Ctrl-C ends the wait (and the command), not the chat.
        async with interruptible() as scope:
            with trio.move_on_after(COMPLETION_TIMEOUT):
                options = await _complete(host, server, name, arg.name, "", arguments)
        if scope.cancelled_caught:
            console.line("(cancelled)")
            return []
        shown = ", ".join(safe(o, one_line=True) for o in options[:10])
        hint = f" (suggestions: {shown})" if options else ""
        if reader.discard_typeahead():
            console.line("(ignored what was typed before the question)")
        value = await reader.read(f"{safe(arg.name, one_line=True)}{hint}: ")
        if value is None:
            return []
        arguments[arg.name] = value
    async with interruptible() as scope:
        result = await host.get_prompt(server, name, arguments)
    if scope.cancelled_caught:
        console.line("(cancelled)")
        return []
    console.line(f"added prompt {server}/{name} ({len(result.messages)} messages)")
    return list(prompt_messages_to_llm(result.messages))


def _reader_for(host: Host) -> _Reader:
    if sys.stdin.isatty() and sys.stdout.isatty():
        return _EditorReader(host, trio.lowlevel.current_trio_token())
    return _PlainReader()


@attrs.define(kw_only=True)
class _Chat:
    """What one chat session remembers between lines."""

    host: Host
    console: Console
    reader: _Reader
    provider: str | None
    model: str | None
    #: The conversation so far; ``None`` until the first message (and after ``/clear``).
    transcript: Transcript | None = None
    #: Prompt messages added with ``/prompt``, sent with the next message.
    pending_prompt: list[Any] = attrs.Factory(list)
    #: The saved conversation's name (``chat --resume NAME``); set at the first save.
    session: str | None = None


async def chat(
    host: Host,
    console: Console,
    *,
    provider: str | None,
    model: str | None,
    session: str | None = None,
    resumed: Transcript | None = None,
) -> int:
    """Read lines until ``/quit`` or end of input: slash commands run at once, anything
    else is a turn of the agent in the ongoing conversation. Returns the exit code (0).

    Every turn is saved as the session ``session`` (a new name at the first turn when
    None); ``resumed`` is the saved conversation ``chat --resume`` goes on with.
    """
    state = _Chat(
        host=host,
        console=console,
        reader=_reader_for(host),
        provider=provider,
        model=model,
        transcript=resumed,
        session=session,
    )
    console.line("agenthost chat: /help for commands, /quit or Ctrl-D to leave")
    if resumed is not None:
        console.line(f"(resumed {session}: {len(resumed.messages)} messages)")
    try:
        await _lines(state)
    finally:
        if state.session is not None:
            console.line(f"(saved; go on later with: agenthost chat --resume {state.session})")
    return 0


async def _lines(session: _Chat) -> None:
    """The read loop: until ``/quit``, ``/exit`` or the end of input."""
    while True:
        line = await session.reader.read("> ")
        if line is None or line.strip() in ("/quit", "/exit"):
            return
        line = line.strip()
        if line.startswith("/"):
            await _slash(session, line)
        elif line:
            await _turn(session, line)


async def _slash(session: _Chat, line: str) -> None:
    """Run one slash command; its failure is a line on the console, never the end of chat."""
    raw = line[1:]
    if raw.split(None, 1)[:1] == ["call"]:
        # /call SERVER__TOOL {"json": "as typed"}: JSON has its own quoting, so the
        # arguments are taken verbatim, not through shell-style word splitting; a JSON
        # object never starts with a quote, so '{"quoted": "too"}' still works.
        words = raw.split(None, 2)
        if len(words) == 3 and words[2][:1] in ("'", '"'):
            with contextlib.suppress(ValueError):
                quoted = shlex.split(words[2])
                if len(quoted) == 1:
                    words[2] = quoted[0]
    else:
        try:
            words = shlex.split(raw)
        except ValueError as exc:
            session.console.line(f"! {exc}")
            return
    command = words[0] if words else ""
    handler = SLASH_COMMANDS.get(command)
    try:
        if handler is None:
            session.console.line(f"unknown command /{command}; /help lists them")
        else:
            await handler(session, words)
    except json.JSONDecodeError as exc:
        session.console.line(f"! the arguments are not valid JSON: {exc}")
    except AgentHostError as exc:
        session.console.line(f"! {exc}")


async def _turn(session: _Chat, line: str) -> None:
    """One message to the agent; Ctrl-C cancels the turn (the servers are told)."""
    from agenthost.agent.transcript import Transcript

    console = session.console
    if session.transcript is None:
        session.transcript = Transcript(
            task=line, provider=session.provider or "", model=session.model or ""
        )
    transcript = session.transcript
    calls_before = len(transcript.usage)
    interrupted = False
    stream = Stream()
    try:
        async with interruptible() as scope:
            await session.host.run_agent(
                line,
                provider=session.provider,
                model=session.model,
                prompt_messages=session.pending_prompt,
                transcript=transcript,
                on_event=agent_printer(console, stream),
                stream=True,
            )
        interrupted = scope.cancelled_caught
        stream.end_line()
    except AgentHostError as exc:
        stream.end_line()
        console.line(f"! {exc}")
        return
    finally:
        session.pending_prompt = []
    if interrupted:
        console.line("(interrupted)")
    elif transcript.stop != "end_turn":
        console.line(
            f"(stopped: {transcript.stop}{': ' + transcript.error if transcript.error else ''})"
        )
    if transcript.final_text and not stream.shown:
        say(transcript.final_text)
    console.line(_turn_usage(transcript, calls_before))
    if not interrupted:  # mid-turn, a tool call may lack its result: not a conversation
        _save(session, transcript)


def _save(session: _Chat, transcript: Transcript) -> None:
    from agenthost.cli.sessions import new_session_name, save_session

    if session.session is None:
        session.session = new_session_name()
    try:
        save_session(session.session, transcript)
    except OSError as exc:
        session.console.line(f"! could not save the conversation: {exc}")


def _turn_usage(transcript: Transcript, calls_before: int) -> str:
    """This turn's tokens and cost, then the conversation's: what the user pays as it goes."""
    turn = transcript.usage[calls_before:]
    costs = [u.cost_usd for u in turn]
    cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
    this = usage_text(sum(u.input_tokens for u in turn), sum(u.output_tokens for u in turn), cost)
    total = usage_text(transcript.input_tokens, transcript.output_tokens, transcript.cost_usd)
    return f"({this}; conversation: {total})"


# ----------------------------------------------------------------- slash commands


async def _tools(session: _Chat, words: list[str]) -> None:
    tools = await session.host.list_tools()
    say(table([[t.name, (t.tool.description or "")[:60]] for t in tools], ["tool", "description"]))


async def _servers(session: _Chat, words: list[str]) -> None:
    say(
        table(
            [[s.name, s.state.value, s.revision or "-"] for s in session.host.status()],
            ["server", "state", "revision"],
        )
    )


async def _prompts(session: _Chat, words: list[str]) -> None:
    say(
        table(
            [
                [s, p.name, " ".join(a.name for a in p.arguments or [])]
                for s, p in await session.host.list_prompts()
            ],
            ["server", "prompt", "arguments"],
        )
    )


async def _resources(session: _Chat, words: list[str]) -> None:
    say(
        table(
            [[s, r.uri, r.name] for s, r in await session.host.list_resources()],
            ["server", "uri", "name"],
        )
    )


async def _roots(session: _Chat, words: list[str]) -> None:
    for status in session.host.status():
        uris = [r.uri for r in session.host.roots_for(status.name)]
        say(f"{status.name}: {', '.join(uris) or '(none)'}")


async def _prompt(session: _Chat, words: list[str]) -> None:
    session.pending_prompt.extend(
        await _prompt_command(session.host, session.console, session.reader, words[1:])
    )


async def _call(session: _Chat, words: list[str]) -> None:
    if len(words) < 2:
        session.console.line("usage: /call SERVER__TOOL [JSON arguments]")
        return
    arguments = json.loads(" ".join(words[2:]) or "{}")
    if not isinstance(arguments, dict):
        session.console.line("the arguments must be a JSON object")
        return
    async with interruptible():
        result = await session.host.call_tool(words[1], arguments)
    say(content_text(result.content) or json.dumps(result.structured_content))


async def _read(session: _Chat, words: list[str]) -> None:
    if len(words) != 2:
        session.console.line("usage: /read URI")
        return
    read = await session.host.read_resource(words[1])
    for contents in read.contents:
        text = getattr(contents, "text", None)
        say(text if text is not None else f"[binary {contents.mime_type}]")


async def _model(session: _Chat, words: list[str]) -> None:
    if len(words) == 1:
        provider, model = session.provider, session.model
        shown = f"{provider}/{model}" if provider and model else "the default"
        say(f"model: {shown}")
        return
    chosen, sep, name = words[1].partition("/")
    if not sep or chosen not in session.host.providers:
        have = ", ".join(session.host.providers) or "none"
        session.console.line(f"use /model PROVIDER/MODEL (configured providers: {have})")
        return
    session.provider, session.model = chosen, name
    if session.transcript is not None:
        session.transcript.provider, session.transcript.model = chosen, name
    say(f"model: {chosen}/{name}")


async def _clear(session: _Chat, words: list[str]) -> None:
    # The conversation so far stays saved under its name; the next one gets a new name.
    session.transcript, session.pending_prompt, session.session = None, [], None
    say("(new conversation)")


async def _help(session: _Chat, words: list[str]) -> None:
    session.console.line(HELP)


#: Slash command -> handler, called with the session and the line's words (the command
#: first). ``/quit`` and ``/exit`` are not here: the loop in :func:`chat` ends on them.
SLASH_COMMANDS: dict[str, Callable[[_Chat, list[str]], Awaitable[None]]] = {
    "call": _call,
    "clear": _clear,
    "help": _help,
    "model": _model,
    "prompt": _prompt,
    "prompts": _prompts,
    "read": _read,
    "resources": _resources,
    "roots": _roots,
    "servers": _servers,
    "tools": _tools,
}

#: What Tab completes after ``/``.
COMMANDS = tuple(sorted([*SLASH_COMMANDS, "quit"]))
