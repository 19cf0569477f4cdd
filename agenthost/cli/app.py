"""The ``agenthost`` command line: a thin shell over the library.

Everything a command does is a library call (``open_host``, ``host.call_tool``,
``run_agent``...); this module builds the parser from the command modules
(:mod:`agenthost.cli.commands`), sets up logging and output, runs the command under
``trio.run`` and turns its failure into an exit code (:mod:`agenthost.cli.exit`). Human
output goes to stdout, progress and consent prompts to stderr, so ``--json`` output on
stdout is always machine-readable.

Imports are deferred to the command that needs them, so ``agenthost --help`` is fast.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn, Protocol

from agenthost.cli import auth
from agenthost.cli.commands import (
    audit,
    call,
    catalog,
    chat,
    completion,
    durable,
    models,
    schema,
    serve,
    servers,
    skills,
    tasks,
    trust,
)
from agenthost.cli.commands import run as run_command
from agenthost.cli.common import AFTER_STARTUP
from agenthost.cli.exit import failure
from agenthost.cli.render import Console, Redacting, SafeFormatter, print_json

__all__ = ["COMMAND_MODULES", "CommandModule", "build_parser", "main", "run"]

Command = Callable[[argparse.Namespace, Console], Awaitable[int]]


class CommandModule(Protocol):
    """The shape of every module in :mod:`agenthost.cli.commands` (and :mod:`.auth`)."""

    def add_parser(self, sub: Any, common: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, console: Console) -> Awaitable[int]: ...


#: The command modules, in the order ``agenthost --help`` lists their commands.
COMMAND_MODULES: tuple[CommandModule, ...] = (
    servers,
    catalog,
    call,
    models,
    run_command,
    chat,
    durable,
    serve,
    tasks,
    skills,
    audit,
    trust,
    auth,
    completion,
    schema,
)


EPILOG = """\
examples:
  agenthost check                          which config is used; each server's state
  agenthost tools                          every server's tools, named SERVER__TOOL
  agenthost call fs__read_file '{"path": "README.md"}'
  agenthost read notes://index             a resource, from the server that lists it
  agenthost prompt notes review_note name=meeting
  agenthost run "Find TODOs and open an issue for each"
  agenthost chat                           a REPL: /tools, /call, /read, /prompt, /model
  agenthost --config examples/agenthost.toml run "Summarize my notes"
  agenthost COMMAND --help                 one command's arguments and options

shell completion: agenthost completion bash|zsh|fish (see `agenthost completion --help`)

Exit codes: 0 done, 1 tool/agent error, 2 usage/config error, 3 denied by policy,
  4 provider error, 5 server unavailable, 6 agent stopped at a limit, 130 interrupted.
"""


def _options(*, top: bool) -> argparse.ArgumentParser:
    """The options every command takes, before or after the command name.

    After it they must not reset what was given before it, hence SUPPRESS defaults on the
    subcommand copy (``top=False``).
    """
    common = argparse.ArgumentParser(add_help=False)
    keep: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
    common.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        help="the config file: agenthost.toml, or another host's JSON (default: your"
        " $XDG_CONFIG_HOME/agenthost/agenthost.toml plus the project's ./agenthost.toml,"
        " .mcp.json, .vscode/mcp.json or .cursor/mcp.json once trusted)",
        **keep,
    )
    common.add_argument("--policy", help="policy file, replacing the config's [policy]", **keep)
    common.add_argument(
        "--json", action="store_true", help="machine-readable output on stdout", **keep
    )
    common.add_argument(
        "-v",
        "--verbose",
        action="count",
        help="-v info, -vv debug",
        **({"default": 0} if top else keep),
    )
    common.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr", **keep)
    common.add_argument(
        "--trust-project",
        action="store_true",
        help="trust the project's config file for this run only (records nothing);"
        " also AGENTHOST_TRUST_PROJECT=1",
        **keep,
    )
    return common


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """The parser, and the function that runs each command name it accepts."""
    from agenthost._version import __version__
    from agenthost.protocol.revisions import LEGACY_REVISIONS, MODERN_REVISIONS

    parser = argparse.ArgumentParser(
        prog="agenthost",
        description="A Trio-based MCP host: servers, sampling, consent, agents.",
        parents=[_options(top=True)],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"agenthost {__version__} (MCP revisions"
        f" {', '.join(f'{r} (handshake-free)' for r in MODERN_REVISIONS)},"
        f" {', '.join(LEGACY_REVISIONS)})",
    )
    sub = parser.add_subparsers(dest="command", metavar="command")
    sub.required = True
    common = _options(top=False)
    runners: dict[str, Command] = {}
    for module in COMMAND_MODULES:
        before = set(sub.choices)
        module.add_parser(sub, common)
        runners.update(dict.fromkeys(set(sub.choices) - before, module.run))
    return parser, runners


def _setup_logging(verbosity: int, *, quiet: bool = False) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    if quiet and verbosity == 0:
        level = logging.ERROR  # -q: no warnings either, only what stops the command
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    if verbosity < 3:
        for noisy in ("httpx", "httpcore", "httpx2", "httpcore2", "anthropic", "openai"):
            logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


@contextmanager
def _collector_tuned(*, process_ends: bool) -> Iterator[None]:
    """The cyclic garbage collector off until the host is up, and no final collection.

    Startup creates a few hundred modules' worth of long-lived objects and no garbage,
    and the collector would scan them over and over for nothing; it comes back on when
    :func:`agenthost.cli.common.open_host` has the host up (a long chat or serve needs
    it). When the process is about to end, ``gc.freeze()`` hides every live object, so
    the interpreter's last collection at exit has nothing to walk. Together these are
    part of bench/RESULTS.md's "one-call process wall time" (measured: about 13 ms for
    the startup, 25 ms for the exit, of a one-shot command). Only the console script
    freezes: in-process callers of :func:`main` go on running.
    """
    gc.disable()
    token = AFTER_STARTUP.set(gc.enable)
    try:
        yield
    finally:
        AFTER_STARTUP.reset(token)
        gc.enable()
        if process_ends:
            gc.freeze()


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``agenthost`` command line; returns the exit code."""
    with _collector_tuned(process_ends=False):
        return _main(argv)


def run() -> int:
    """The console script: :func:`main`, then exit without a final collection."""
    from agenthost.cli.lineage import name_process

    name_process()  # for the agenthosts this one starts, through any wrapper, to count
    with _collector_tuned(process_ends=True):
        code = _main(None)
        sys.stdout.flush()
    if "temporalio" in sys.modules:
        _exit_before_finalizing(code)
    return code


def _exit_before_finalizing(code: int) -> NoReturn:
    """End the process without interpreter finalization, once Temporal's SDK was loaded.

    The Temporal client's Rust runtime keeps threads that call back into Python; one that
    releases its thread state while the main thread finalizes aborts the process
    ("Fatal Python error: PyGILState_Release ... finalizing", exit -6), after the command
    had printed its answer: `runs show run-nosuchrun` did so 4 times in 25 under load.
    Everything the command writes is flushed here, and agenthost registers no atexit
    work, so skipping finalization loses nothing.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _main(argv: Sequence[str] | None) -> int:
    stdout, stderr = sys.stdout, sys.stderr
    # Everything the CLI writes (results, --json, errors, log lines) leaves the process
    # here: scrub the configured secrets a server may have echoed back (issue 14).
    sys.stdout = Redacting.wrap(stdout)
    sys.stderr = Redacting.wrap(stderr)
    try:
        parser, runners = build_parser()
        if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (see `completion`)
            import argcomplete

            argcomplete.autocomplete(parser)  # answers and exits
        if not (sys.argv[1:] if argv is None else argv):
            parser.print_help()  # bare `agenthost`: what it can do, not a usage error
            return 0
        args = parser.parse_args(argv)
        _setup_logging(args.verbose, quiet=args.quiet)
        console = Console(quiet=args.quiet)
        return _run(runners[args.command], args, console)
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def _run(command: Command, args: argparse.Namespace, console: Console) -> int:
    """``trio.run`` the command; a failure is one line on stderr (and JSON with --json)."""
    import trio

    try:
        result: int = trio.run(command, args, console)
        return result
    except (Exception, KeyboardInterrupt) as exc:
        reported = failure(exc)
        if reported is None:
            raise
        message, code = reported
        console.quiet = False
        console.line(f"agenthost: {message}")
        if args.json:
            print_json({"error": message, "exit_code": code})
        return code
