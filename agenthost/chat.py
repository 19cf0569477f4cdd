"""``agenthost chat``: a REPL over the agent, with slash commands for the host.

Lines are read in a worker thread (cancellable), so servers keep being served (sampling,
elicitation, list changes) while the prompt waits. Slash commands:

  /tools  /servers  /prompts  /roots  /help  /quit
  /prompt SERVER NAME [key=value ...]   add a server's prompt to the conversation;
                                        missing required arguments are asked for, with
                                        the server's completions (completion/complete)
Anything else is a message to the agent, which keeps the conversation across turns.
"""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING, Any

import trio

from agenthost.errors import AgentHostError

if TYPE_CHECKING:
    from agenthost.cli import Console
    from agenthost.host import Host

__all__ = ["chat"]

HELP = __doc__.split("Slash commands:", 1)[1].strip() if __doc__ else ""


async def _readline(prompt: str) -> str | None:
    sys.stderr.write(prompt)
    sys.stderr.flush()
    line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    return None if line == "" else line.rstrip("\n")


async def _complete(host: Host, server: str, prompt: str, argument: str, value: str) -> list[str]:
    session = host.session(server)
    caps = session.server_capabilities
    if caps is None or getattr(caps, "completions", None) is None:
        return []
    try:
        result = await session.complete({"type": "ref/prompt", "name": prompt}, argument, value)
    except AgentHostError:
        return []
    return list(result.completion.values)


async def _prompt_command(host: Host, console: Console, words: list[str]) -> list[Any]:
    from agenthost.llmcontent import prompt_messages_to_llm

    if len(words) < 2:
        console.line("usage: /prompt SERVER NAME [key=value ...]")
        return []
    server, name, *pairs = words
    arguments = dict(p.split("=", 1) for p in pairs if "=" in p)
    listed = {p.name: p for s, p in await host.list_prompts() if s == server}
    prompt = listed.get(name)
    if prompt is None:
        console.line(f"no prompt {name!r} on {server} (have: {', '.join(listed) or 'none'})")
        return []
    for arg in prompt.arguments or []:
        if arg.name in arguments or not arg.required:
            continue
        options = await _complete(host, server, name, arg.name, "")
        hint = f" (suggestions: {', '.join(options[:10])})" if options else ""
        value = await _readline(f"{arg.name}{hint}: ")
        if value is None:
            return []
        arguments[arg.name] = value
    result = await host.get_prompt(server, name, arguments)
    console.line(f"added prompt {server}/{name} ({len(result.messages)} messages)")
    return list(prompt_messages_to_llm(result.messages))


async def chat(host: Host, console: Console, *, provider: str | None, model: str | None) -> int:
    from agenthost.agent import Transcript, run_agent
    from agenthost.cli import _agent_printer, _Stream, _table, interruptible, say

    transcript: Transcript | None = None
    pending_prompt: list[Any] = []
    console.line("agenthost chat: /help for commands, /quit to leave")
    while True:
        line = await _readline("> ")
        if line is None or line.strip() in ("/quit", "/exit"):
            return 0
        line = line.strip()
        if not line:
            continue
        if line.startswith("/"):
            words = shlex.split(line[1:])
            command = words[0] if words else ""
            try:
                if command == "tools":
                    say(
                        _table(
                            [
                                [t.name, (t.tool.description or "")[:60]]
                                for t in await host.list_tools()
                            ],
                            ["tool", "description"],
                        )
                    )
                elif command == "servers":
                    say(
                        _table(
                            [[s.name, s.state.value, s.revision or "-"] for s in host.status()],
                            ["server", "state", "revision"],
                        )
                    )
                elif command == "prompts":
                    say(
                        _table(
                            [
                                [s, p.name, " ".join(a.name for a in p.arguments or [])]
                                for s, p in await host.list_prompts()
                            ],
                            ["server", "prompt", "arguments"],
                        )
                    )
                elif command == "roots":
                    for status in host.status():
                        uris = [r.uri for r in host.roots_for(status.name)]
                        say(f"{status.name}: {', '.join(uris) or '(none)'}")
                elif command == "prompt":
                    pending_prompt.extend(await _prompt_command(host, console, words[1:]))
                else:
                    console.line(HELP)
            except AgentHostError as exc:
                console.line(f"! {exc}")
            continue
        if transcript is None:
            transcript = Transcript(task=line, provider=provider or "", model=model or "")
        interrupted = False
        stream = _Stream()
        try:
            async with interruptible() as scope:
                await run_agent(
                    host,
                    line,
                    provider=provider,
                    model=model,
                    prompt_messages=pending_prompt,
                    transcript=transcript,
                    on_event=_agent_printer(console, stream),
                    stream=True,
                )
            interrupted = scope.cancelled_caught
            stream.end_line()
        except AgentHostError as exc:
            console.line(f"! {exc}")
            continue
        finally:
            pending_prompt = []
        if interrupted:
            console.line("(interrupted)")
        elif transcript.stop != "end_turn":
            console.line(
                f"(stopped: {transcript.stop}{': ' + transcript.error if transcript.error else ''})"
            )
        if transcript.final_text and not stream.shown:
            say(transcript.final_text)
