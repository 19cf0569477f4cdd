"""``agenthost run TASK``: the agent on one task over every server's tools.

The answer streams to stdout; ``--json`` prints the transcript at the end.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import attrs

from agenthost.cli.commands.durable import (
    add_key_option,
    add_temporal_options,
    run_durable,
    wants_temporal,
)
from agenthost.cli.common import (
    add_command,
    check_prompt,
    interruptible,
    key_values,
    load_config,
    open_host,
    report_failed_servers,
    require_provider,
    require_ready,
    split_model,
)
from agenthost.cli.exit import (
    EXIT_DENIED,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PROVIDER,
    EXIT_USAGE,
    CLIError,
)
from agenthost.cli.render import Console, Stream, agent_printer, print_json, say, usage_text
from agenthost.cli.sessions import load_session, save_session

if TYPE_CHECKING:
    from agenthost.agent.transcript import Transcript

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``run`` on the CLI's subparsers."""
    run_parser = add_command(
        sub, common, "run", "run the agent on a task over every server's tools"
    )
    run_parser.add_argument("task", help="what the agent should do, in plain words (quote it)")
    run_parser.add_argument("--model", help="provider/model (default: the configured default)")
    run_parser.add_argument("--max-turns", type=int, default=20)
    run_parser.add_argument("--token-budget", type=int, default=None)
    run_parser.add_argument(
        "--task-grace",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="a tool running as a task longer than this lets the model go on; its result"
        " follows in a later turn (default 2; 0 = at once)",
    )
    run_parser.add_argument("--prompt", help="open with a server's prompt: SERVER/NAME")
    run_parser.add_argument("--prompt-arg", action="append", help="key=value for --prompt")
    add_temporal_options(run_parser, required=False)
    add_key_option(run_parser)
    run_parser.add_argument(
        "--detach",
        action="store_true",
        help="with --temporal: print the run id and return (follow with `runs show`)",
    )
    run_parser.add_argument(
        "--session",
        metavar="NAME",
        help="continue the saved conversation NAME (if any) and save it after the run"
        " ($XDG_STATE_HOME/agenthost/sessions/NAME.json)",
    )
    run_parser.add_argument(
        "--strict-denials",
        action="store_true",
        help="exit 3 if the policy denied any tool call (for CI)",
    )


async def run(args: argparse.Namespace, console: Console) -> int:
    """Run ``agenthost run``; returns the exit code."""

    from agenthost.agent.transcript import Transcript
    from agenthost.mcp_to_llm import prompt_messages_to_llm

    if wants_temporal(args):
        return await run_durable(args, console)
    if args.detach:
        raise CLIError("--detach needs --temporal HOST:PORT (a durable run)", EXIT_USAGE)
    if not args.task_grace >= 0:
        raise CLIError("--task-grace takes a number of seconds, 0 or more", EXIT_USAGE)
    config = load_config(args)
    provider, model = split_model(args.model)
    require_provider(config, provider)
    previous = load_session(args.session) if args.session else None
    async with open_host(args, config, console) as host:
        report_failed_servers(host, console)
        prompt_messages = []
        if args.prompt:
            server, _, name = args.prompt.partition("/")
            prompt_args = key_values(args.prompt_arg or [])
            host.supervisor(server)  # NotFound names the configured servers
            require_ready(host, server)
            check_prompt(host, server, name, prompt_args)
            got = await host.get_prompt(server, name, prompt_args)
            prompt_messages = prompt_messages_to_llm(got.messages)
        transcript = Transcript(task=args.task, provider=provider or "", model=model or "")
        if previous is not None:  # the conversation goes on; this run's figures start at 0
            transcript.messages = previous.messages
            transcript.loaded_tools = previous.loaded_tools
        # The answer streams to stdout as it arrives; --json prints the transcript at the end.
        stream = None if args.json else Stream()
        async with interruptible() as scope:
            await host.run_agent(
                args.task,
                provider=provider,
                model=model,
                prompt_messages=prompt_messages,
                max_turns=args.max_turns,
                token_budget=args.token_budget,
                task_grace=args.task_grace,
                transcript=transcript,
                on_event=agent_printer(console, stream),
                stream=stream is not None,
            )
        if stream is not None:
            stream.end_line()
        if scope.cancelled_caught:
            transcript.stop = "interrupted"
    if args.session:
        _save(args.session, transcript, previous, console)
    if args.json:
        print_json(transcript.to_json())
    else:
        if transcript.final_text and not (stream is not None and stream.shown):
            say(transcript.final_text)
        console.line(
            f"-- stopped: {transcript.stop}; {transcript.turns} model turns,"
            f" {len(transcript.tool_calls)} tool calls ({len(transcript.denied)} denied),"
            f" {usage_text(transcript.input_tokens, transcript.output_tokens, transcript.cost_usd)}"
            f" [{transcript.provider}/{transcript.model}]"
        )
    if transcript.stop == "interrupted":
        return EXIT_INTERRUPTED
    if transcript.stop == "provider_error":
        console.line(f"! provider error: {transcript.error}")
        return EXIT_PROVIDER
    if transcript.denied and args.strict_denials:
        return EXIT_DENIED
    if transcript.stop in ("max_turns", "token_budget"):
        return EXIT_INCOMPLETE
    return EXIT_OK


def _save(name: str, transcript: Transcript, previous: Transcript | None, console: Console) -> None:
    """Save the session unless the run was interrupted mid-turn (a tool call without its
    result would make the conversation invalid for the next request)."""
    if transcript.stop == "interrupted":
        console.line(f"-- interrupted: session {name} was not updated")
        return
    whole = attrs.evolve(
        transcript, usage=[*(previous.usage if previous else ()), *transcript.usage]
    )
    save_session(name, whole)
