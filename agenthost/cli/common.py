"""What the ``agenthost`` commands share: loading the config (and asking whether to
trust a project's), opening the host, reporting servers that did not come up, parsing
arguments, and Ctrl-C handling.

Every command does its work through the library (``open_host``, ``host.call_tool``...);
this module is the glue between argparse and those calls. Imports are deferred to the
function that needs them, so ``agenthost --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextvars
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from agenthost.cli.exit import EXIT_USAGE, CLIError
from agenthost.cli.render import Console, sampling_printer, say

if TYPE_CHECKING:
    from agenthost.auth.loopback import UrlOpener
    from agenthost.config.model import HostConfig
    from agenthost.host.host import Host

__all__ = [
    "AFTER_STARTUP",
    "TRUST_QUESTION_TIMEOUT",
    "add_command",
    "check_prompt",
    "config_paths",
    "interactive_opener",
    "interruptible",
    "key_values",
    "load_config",
    "no_provider_note",
    "offers_resources",
    "one_shot",
    "open_host",
    "parse_json_arguments",
    "progress_callback",
    "report_failed_servers",
    "require_provider",
    "require_ready",
    "split_model",
]

#: Called once the host is up (startup is over): set by the entry point in
#: :mod:`agenthost.cli.app`, which owns the garbage-collector tuning.
AFTER_STARTUP: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "agenthost_cli_after_startup", default=None
)


def add_command(
    sub: Any, common: argparse.ArgumentParser, name: str, text: str
) -> argparse.ArgumentParser:
    """Register one command on the CLI's subparsers, taking the common options; ``text``
    is both its line in ``agenthost --help`` and its own ``--help`` description."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=text, parents=[common], description=text
    )
    return parser


def interactive_opener() -> UrlOpener | None:
    """The terminal opener when a person is at the terminal (stdin and stderr), else None."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    from agenthost.auth.loopback import terminal_opener

    return terminal_opener()


def one_shot(config: HostConfig) -> HostConfig:
    """A command that starts servers once reports how that went: no restarts to hide it."""
    import attrs

    return attrs.evolve(
        config,
        servers=[
            attrs.evolve(s, restart=attrs.evolve(s.restart, enabled=False)) for s in config.servers
        ],
    )


def trust_once(args: argparse.Namespace) -> bool:
    """``--trust-project`` or ``AGENTHOST_TRUST_PROJECT=1``: for this run, recorded nowhere."""
    return bool(getattr(args, "trust_project", False)) or (
        os.environ.get("AGENTHOST_TRUST_PROJECT", "") == "1"
    )


def can_ask() -> bool:
    """A person is there to answer: stdin and stderr are both a terminal."""
    return sys.stdin.isatty() and sys.stderr.isatty()


#: How long the trust question waits for an answer before it counts as "not now".
TRUST_QUESTION_TIMEOUT = 300.0


def ask_trust(console: Console) -> str:
    """Ask trust / not now / never on the terminal; bounded, and Ctrl-C interrupts it."""
    import select

    sys.stderr.write(
        "Trust this project config and let it run the above? [t]rust / [n]ot now / ne[v]er: "
    )
    sys.stderr.flush()
    ready, _, _ = select.select([sys.stdin], [], [], TRUST_QUESTION_TIMEOUT)
    if not ready:
        console.line("")
        return "not now"
    answer = sys.stdin.readline().strip().lower()
    if answer in ("t", "trust", "y", "yes"):
        return "trust"
    if answer in ("v", "never"):
        return "never"
    return "not now"


def untrusted_message(project: str, changes: Sequence[str]) -> str:
    changed = ""
    if changes:
        changed = f" It changed since you trusted it: {'; '.join(changes)}."
    return (
        f"{project}: this project's config is not trusted, so nothing in it was loaded, run"
        f" or contacted.{changed} Review it with `agenthost check`, then trust it with"
        " `agenthost trust` (or `--trust-project` / AGENTHOST_TRUST_PROJECT=1 for one run)"
    )


def project_digest(args: argparse.Namespace, project: Any) -> str:
    """The digest of the project file the user trusts, asking on a terminal if need be.

    Raises:
        CLIError: (exit 2) untrusted and nobody to ask, the answer was not "trust", or the
            user once answered "never".
        ConfigError: the file cannot be read, or sets a user-only key.
    """
    from agenthost.config.trust import TrustStore, describe, inspect_project
    from agenthost.config.user_only import check_user_only

    found = inspect_project(project)
    check_user_only(found)
    if trust_once(args):
        return found.digest
    store = TrustStore()
    verdict = store.verdict(found)
    console = Console()  # the question is shown even with --quiet
    if verdict.state == "trusted":
        return found.digest
    if verdict.state == "never":
        raise CLIError(
            f"{project}: you chose never to trust this project's config; nothing in it was"
            f" loaded (`agenthost trust --revoke {project}` forgets that answer)",
            EXIT_USAGE,
        )
    lines = describe(found.summary)
    if verdict.changes:
        lines += ["it changed since you trusted it:", *(f"  {c}" for c in verdict.changes)]
    if args.command == "check":
        for line in lines:
            say(line)
        say("untrusted: nothing was started")
    elif can_ask():
        for line in lines:
            console.line(line)
        answer = ask_trust(console)
        if answer == "trust":
            store.record(found, "trust")
            console.line(f"trusted {found.path} (`agenthost trust --revoke` to undo)")
            return found.digest
        if answer == "never":
            store.record(found, "never")
            raise CLIError(
                f"{project}: never trusted; nothing in it was loaded"
                f" (`agenthost trust --revoke {project}` forgets that answer)",
                EXIT_USAGE,
            )
    raise CLIError(untrusted_message(str(project), verdict.changes), EXIT_USAGE)


def config_paths(args: argparse.Namespace) -> tuple[Any, Any]:
    """``(user file, project file)``: ``--config`` is the user's choice and nothing else is
    looked for; otherwise ``$XDG_CONFIG_HOME/agenthost/agenthost.toml`` and the project file
    discovered in the current directory."""
    from agenthost.config.model import find_project_config, user_config_path

    if args.config:
        return args.config, None
    return user_config_path(), find_project_config()


def load_config(args: argparse.Namespace, *, only: str | None = None) -> HostConfig:
    """The config this command line means (``--config``, or the user's file plus a trusted
    project file), with ``--policy`` applied; ``only``: start just that server.

    Raises:
        CLIError: (exit 2) no config, or an untrusted project config.
        NotFound: ``only`` names no configured server.
    """
    import logging

    import attrs

    from agenthost.config import load_scoped
    from agenthost.config.model import PROJECT_CONFIGS
    from agenthost.errors import NotFound

    user, project = config_paths(args)
    if user is None and project is None:
        raise CLIError(
            "no config: pass --config FILE, or create agenthost.toml (see docs/config.md);"
            f" looked for {', '.join(PROJECT_CONFIGS)} here and"
            " $XDG_CONFIG_HOME/agenthost/agenthost.toml",
            EXIT_USAGE,
        )
    from agenthost.cli.lineage import depth_refusal
    from agenthost.config.selfstart import chain_refusal, extend_chain

    files = [os.fspath(p) for p in (user, project) if p is not None]
    looped = chain_refusal(files, os.environ) or depth_refusal()
    if looped is not None:
        raise CLIError(looped, EXIT_USAGE)
    # The servers started from here inherit the chain (the stdio transport passes it on).
    extend_chain(files, os.environ)
    digest = None
    if project is not None:
        digest = project_digest(args, project)
    used = " + ".join(str(p) for p in (user, project) if p is not None)
    logging.getLogger("agenthost.cli").info("using config %s", used)
    config = load_scoped(user=user, project=project, trusted_digest=digest, default_workspace=True)
    if args.policy:
        config = attrs.evolve(config, policy={"file": os.path.abspath(args.policy)})
    if only is not None:
        if not any(s.name == only for s in config.servers):
            known = ", ".join(repr(s.name) for s in config.servers) or "none"
            where = config.source or project
            raise NotFound(f"no server named {only!r} in {where} (configured: {known})")
        # The others stay configured, only not started: policy rules naming them still
        # name a configured server.
        servers = [s if s.name == only else attrs.evolve(s, enabled=False) for s in config.servers]
        config = attrs.evolve(config, servers=servers)
    return config


@asynccontextmanager
async def open_host(
    args: argparse.Namespace, config: HostConfig, console: Console
) -> AsyncIterator[Host]:
    """The host for one command, its sampling shown on ``console``; the terminal opener
    for OAuth logins only with a person at the terminal."""
    from agenthost.auth.loopback import URL_OPENER
    from agenthost.host.host import open_host as open_library_host

    # A server that needs a login starts the browser flow only with a person at the
    # terminal; otherwise it fails naming `agenthost auth login SERVER`.
    URL_OPENER.set(interactive_opener())
    async with open_library_host(config, on_event=sampling_printer(console)) as host:
        # Startup is over: a long chat or serve needs the collector back (cli/app.py).
        after_startup = AFTER_STARTUP.get()
        if after_startup is not None:
            after_startup()
        yield host


#: What to do when no LLM provider is configured (the agent and servers' sampling need one).
NO_PROVIDER = (
    "no LLM provider is configured: set ANTHROPIC_API_KEY or OPENAI_API_KEY, or add a"
    ' [providers.NAME] section (e.g. kind = "openai-compatible" with a base_url for a local'
    " model; see docs/config.md#providers)"
)


def require_provider(config: HostConfig, provider: str | None) -> None:
    """``run`` needs a model: fail before any server starts if there is none to use.

    Why here: starting every server (seconds, and possibly a browser login) only to learn
    that the agent has no model wastes the user's time and hides the one thing to fix.

    Raises:
        ConfigError: (exit 2) no provider is configured, or ``provider`` names one that
            is not (unknown, or its API key is not set).
    """
    from agenthost.errors import ConfigError
    from agenthost_providers import default_choice, parse_providers, provider_status

    source = config.source or "<config>"
    base = os.path.dirname(os.path.abspath(config.source)) if config.source else None
    parsed = parse_providers(config.providers, source=source, base_dir=base)
    if provider is not None:
        status = provider_status(parsed.get(provider), os.environ)
        if not status.configured:
            raise ConfigError(
                f"provider {provider!r} is not usable: {status.reason}", key="providers"
            )
    elif default_choice(parsed, os.environ) is None:
        raise ConfigError(NO_PROVIDER, key="providers")


def no_provider_note(host: Host) -> str | None:
    """For ``tools`` and ``check``: why servers' sampling tools are missing or will fail."""
    if host.providers:
        return None
    return (
        f"note: {NO_PROVIDER}. Without one the host offers servers no sampling, so a"
        " server's tools that ask for a model are hidden by the server or will fail"
    )


def require_ready(host: Host, server: str) -> None:
    """A command aimed at one server: if it did not come up, say why (exit 5)."""
    from agenthost.errors import ServerUnavailable
    from agenthost.host.supervisor import ServerState

    status = host.supervisor(server).status()
    if status.state is not ServerState.READY:
        raise ServerUnavailable(
            f"server is {status.state.value}: {status.last_error or 'no reason given'}",
            server=server,
        )


def report_failed_servers(host: Host, console: Console) -> bool:
    """Say which servers did not come up; True if any did not (the command exits 5)."""
    from agenthost.host.supervisor import ServerState

    failed = False
    for status in host.status():
        if status.state is not ServerState.READY:
            failed = True
            console.line(
                f"! server {status.name} is {status.state.value}:"
                f" {status.last_error or 'no reason given'}"
            )
    return failed


def parse_json_arguments(text: str) -> dict[str, Any]:
    """A tool's arguments from the command line: a JSON object, else a usage error (exit 2)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CLIError(f"arguments are not valid JSON: {exc}", EXIT_USAGE) from None
    if not isinstance(value, dict):
        raise CLIError(
            'arguments must be a JSON object, e.g. \'{"path": "README.md"}\'', EXIT_USAGE
        )
    return value


def progress_callback(console: Console, label: str) -> Any:
    """A tool call's progress notifications, shown as a progress line labelled ``label``."""

    async def progress(value: float, total: float | None, message: str | None) -> None:
        console.progress(label, value, total, message)

    return progress


def offers_resources(host: Host, server: str) -> bool:
    """Whether ``server`` declared the resources capability (``read`` asks only those)."""
    caps = host.session(server).server_capabilities
    return caps is not None and getattr(caps, "resources", None) is not None


def key_values(items: Sequence[str]) -> dict[str, str]:
    """Prompt arguments given as ``key=value`` words; anything else is a usage error."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CLIError(f"prompt arguments are key=value, got {item!r}", EXIT_USAGE)
        out[key] = value
    return out


def check_prompt(host: Host, server: str, name: str, arguments: dict[str, str]) -> None:
    """Unknown prompt or missing argument: a usage error here, not the server's -32602."""
    from agenthost.errors import NotFound

    listed = {p.name: p for s, p in host.catalog.prompts() if s == server}
    prompt = listed.get(name)
    if prompt is None:
        have = ", ".join(sorted(listed)) or "none"
        raise NotFound(f"{server}: no prompt named {name!r} (it has: {have})")
    missing = [a.name for a in prompt.arguments or [] if a.required and a.name not in arguments]
    if missing:
        usage = " ".join(f"{m}=VALUE" for m in missing)
        raise CLIError(
            f"{server}: prompt {name!r} needs {', '.join(missing)}: add {usage}", EXIT_USAGE
        )


def split_model(value: str | None) -> tuple[str | None, str | None]:
    """``--model provider/model`` as ``(provider, model)``; ``(None, None)`` for the default."""
    if not value:
        return None, None
    provider, sep, model = value.partition("/")
    if not sep:
        raise CLIError("--model takes provider/model, e.g. anthropic/claude-haiku-4-5", EXIT_USAGE)
    return provider, model


@asynccontextmanager
async def interruptible() -> AsyncIterator[Any]:
    """A cancel scope that Ctrl-C cancels, for the duration of the block only.

    Inside, SIGINT cancels the work cleanly (in-flight calls are cancelled and their
    servers told) instead of tearing everything down with KeyboardInterrupt; outside the
    block Ctrl-C behaves as usual again.
    """
    import signal

    import trio

    from agenthost._util import collapse_single_group

    # The receiver is installed before the block runs, so no Ctrl-C slips through; the
    # block's own failure comes out as itself, not in a group (callers catch it by type).
    with (
        trio.open_signal_receiver(signal.SIGINT) as signals,
        trio.CancelScope() as scope,
        collapse_single_group(),
    ):
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                async for _ in signals:
                    scope.cancel(reason="cancelled by the user")  # the audit's words
                    return

            nursery.start_soon(watch)
            try:
                yield scope
            finally:
                nursery.cancel_scope.cancel()
