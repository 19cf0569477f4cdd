"""The ``agenthost`` command line: a thin shell over the library.

Everything a command does is a library call (``open_host``, ``host.call_tool``,
``run_agent``...); this module parses arguments, renders results and maps errors to exit
codes. Human output goes to stdout, progress and consent prompts to stderr, so ``--json``
output on stdout is always machine-readable.

Exit codes:

===  ===============================================================
0    done
1    the tool/agent reported an error (isError result, failed call)
2    usage or configuration error (the message names file, key, problem)
3    denied by policy (consent said no; in headless mode, no rule allowed it)
4    LLM provider error
5    a server could not be started or reached
6    the agent stopped before finishing (--max-turns or --token-budget)
130  interrupted (Ctrl-C)
===  ===============================================================

A name that does not exist (server, tool, prompt, resource) and a missing or malformed
argument are usage errors (2), whichever command meets them.

Imports are deferred to the command that needs them, so ``agenthost --help`` is fast.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    from agenthost.agent.transcript import AgentEvent
    from agenthost.config.model import HostConfig
    from agenthost.errors import AmbiguousResource
    from agenthost.host.host import Host
    from policies import Approval

__all__ = ["EXIT_CODES", "main", "run", "safe", "say"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_DENIED = 3
EXIT_PROVIDER = 4
EXIT_UNAVAILABLE = 5
EXIT_INCOMPLETE = 6
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    "done": EXIT_OK,
    "error": EXIT_ERROR,
    "usage": EXIT_USAGE,
    "denied": EXIT_DENIED,
    "provider": EXIT_PROVIDER,
    "unavailable": EXIT_UNAVAILABLE,
    "incomplete": EXIT_INCOMPLETE,
    "interrupted": EXIT_INTERRUPTED,
}


class CLIError(Exception):
    """A failure to report in one line, with the exit code to use."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- output


def safe(text: str, *, one_line: bool = False) -> str:
    """Server (or model) text made safe for a terminal: control characters shown escaped.

    Everything a server sends can reach the screen (tool descriptions and results,
    prompts, resources, errors), and a terminal obeys escape sequences: ``ESC[2J`` clears
    it, ``ESC[8m`` hides what follows (a consent prompt), OSC 52 writes the clipboard.
    The one escaping function (the consent prompts use it too) is applied at every human
    output sink of the CLI: :func:`say`, :class:`Console`, the log formatter and chat's
    line readers.

    Args:
        one_line: also escape line breaks and tabs: for a field shown within one line
            (a table cell, an audit record's name, a suggestion), where a server's
            ``\\n`` would otherwise print as lines of its own choosing.
    """
    from policies._text import printable

    return printable(text, one_line=one_line)


def say(text: str) -> None:
    """Print one piece of human output on stdout, escaped (see :func:`safe`)."""
    sys.stdout.write(safe(text) + "\n")


class _SafeFormatter(logging.Formatter):
    """Log lines carry server text too (stderr lines, notifications/message)."""

    def format(self, record: logging.LogRecord) -> str:
        return safe(super().format(record))


class Console:
    """Where human-readable progress goes: stderr, never mixed into --json stdout."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = self.stream.isatty()
        self._bar = False

    def line(self, text: str) -> None:
        if self.quiet:
            return
        self.end_progress()
        self.stream.write(safe(text) + "\n")
        self.stream.flush()

    def progress(
        self, label: str, progress: float, total: float | None, message: str | None
    ) -> None:
        if self.quiet:
            return
        if total:
            frac = max(0.0, min(1.0, progress / total))
            detail = f"{progress:g}/{total:g}"
        else:
            frac, detail = 0.0, f"{progress:g}"
        note = f" {message}" if message else ""
        if self.tty:
            width = 24
            bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
            self.stream.write(f"\r  {safe(label)} [{bar}] {detail}{safe(note)}\x1b[K")
            self.stream.flush()
            self._bar = True
        else:
            self.line(f"  progress {label}: {detail}{note}")

    def end_progress(self) -> None:
        if self._bar:
            self.stream.write("\n")
            self._bar = False


class _Redacting:
    """A text stream that writes through :func:`agenthost.redaction.redact`."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    @classmethod
    def wrap(cls, stream: TextIO) -> TextIO:
        return stream if isinstance(stream, cls) else cast(TextIO, cls(stream))

    def write(self, text: str) -> int:
        from agenthost.redaction import redact

        self._inner.write(redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _print_json(data: Any) -> None:
    """JSON on stdout. ``json.dumps`` escapes C0 controls; C1 controls (``\\x9b`` is a
    CSI), DEL and the bidi and line separators are escaped here too, as ``\\uNNNN``
    (the same JSON), so a server's text cannot drive the terminal through ``--json``."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    text = _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    sys.stdout.write(text + "\n")


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """Rows in columns; every cell is one line (its line breaks shown escaped), so a
    server's name or description cannot add rows."""
    cells = [list(header), *[[safe(str(c), one_line=True) for c in r] for r in rows]]
    widths = [max(len(str(row[i])) for row in cells) for i in range(len(header))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _first_line(text: str | None, width: int = 70) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _content_text(blocks: Sequence[Any]) -> str:
    """Content blocks as a person reads them (text as is, others summarised)."""
    from agenthost.protocol.types import (
        AudioContent,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
    )

    out = []
    for block in blocks:
        if isinstance(block, TextContent):
            out.append(block.text)
        elif isinstance(block, ImageContent | AudioContent):
            out.append(f"[{block.type} {block.mime_type}, {len(block.data)} bytes]")
        elif isinstance(block, ResourceLink):
            out.append(f"[resource link {block.uri}]")
        elif isinstance(block, EmbeddedResource):
            text = getattr(block.resource, "text", None)
            out.append(text if text is not None else f"[resource {block.resource.uri}]")
        else:
            out.append(f"[{getattr(block, 'type', type(block).__name__)}]")
    return "\n".join(out)


# --------------------------------------------------------------------------- setup


def _one_shot(config: HostConfig) -> HostConfig:
    """A command that starts servers once reports how that went: no restarts to hide it."""
    import attrs

    return attrs.evolve(
        config,
        servers=[
            attrs.evolve(s, restart=attrs.evolve(s.restart, enabled=False)) for s in config.servers
        ],
    )


def _trust_once(args: argparse.Namespace) -> bool:
    """``--trust-project`` or ``AGENTHOST_TRUST_PROJECT=1``: for this run, recorded nowhere."""
    return bool(getattr(args, "trust_project", False)) or (
        os.environ.get("AGENTHOST_TRUST_PROJECT", "") == "1"
    )


def _can_ask() -> bool:
    """A person is there to answer: stdin and stderr are both a terminal."""
    return sys.stdin.isatty() and sys.stderr.isatty()


#: How long the trust question waits for an answer before it counts as "not now".
TRUST_QUESTION_TIMEOUT = 300.0


def _ask_trust(console: Console) -> str:
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


def _untrusted_message(project: str, changes: Sequence[str]) -> str:
    changed = ""
    if changes:
        changed = f" It changed since you trusted it: {'; '.join(changes)}."
    return (
        f"{project}: this project's config is not trusted, so nothing in it was loaded, run"
        f" or contacted.{changed} Review it with `agenthost check`, then trust it with"
        " `agenthost trust` (or `--trust-project` / AGENTHOST_TRUST_PROJECT=1 for one run)"
    )


def _project_digest(args: argparse.Namespace, project: Any) -> str:
    """The digest of the project file the user trusts, asking on a terminal if need be.

    Raises:
        CLIError: (exit 2) untrusted and nobody to ask, the answer was not "trust", or the
            user once answered "never".
        ConfigError: the file cannot be read, or sets a user-only key.
    """
    from agenthost.config.trust import TrustStore, check_user_only, describe, inspect_project

    found = inspect_project(project)
    check_user_only(found)
    if _trust_once(args):
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
    elif _can_ask():
        for line in lines:
            console.line(line)
        answer = _ask_trust(console)
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
    raise CLIError(_untrusted_message(str(project), verdict.changes), EXIT_USAGE)


def _config_paths(args: argparse.Namespace) -> tuple[Any, Any]:
    """``(user file, project file)``: ``--config`` is the user's choice and nothing else is
    looked for; otherwise ``$XDG_CONFIG_HOME/agenthost/agenthost.toml`` and the project file
    discovered in the current directory."""
    from agenthost.config.model import find_project_config, user_config_path

    if args.config:
        return args.config, None
    return user_config_path(), find_project_config()


def _load_config(args: argparse.Namespace, *, only: str | None = None) -> HostConfig:
    import logging

    import attrs

    from agenthost.config import load_scoped
    from agenthost.config.model import PROJECT_CONFIGS
    from agenthost.errors import NotFound

    user, project = _config_paths(args)
    if user is None and project is None:
        raise CLIError(
            "no config: pass --config FILE, or create agenthost.toml (see docs/config.md);"
            f" looked for {', '.join(PROJECT_CONFIGS)} here and"
            " $XDG_CONFIG_HOME/agenthost/agenthost.toml",
            EXIT_USAGE,
        )
    digest = None
    if project is not None:
        digest = _project_digest(args, project)
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


def _sampling_printer(console: Console) -> Callable[[Any], None]:
    from agenthost.host.sampling import SamplingEvent

    def on_event(event: Any) -> None:
        if isinstance(event, SamplingEvent):
            if event.stage == "selected":
                console.line(f"~ sampling for {event.server}: chose {event.message}")
            elif event.stage == "denied":
                console.line(f"~ sampling for {event.server} denied: {event.message}")
            elif event.stage == "answered":
                console.line(f"~ sampling for {event.server}: {event.message}")
            else:
                console.line(f"~ sampling for {event.server} failed: {event.message}")

    return on_event


@asynccontextmanager
async def _open_host(
    args: argparse.Namespace, config: HostConfig, console: Console
) -> AsyncIterator[Host]:
    from agenthost.auth.loopback import URL_OPENER
    from agenthost.cli.auth import interactive_opener
    from agenthost.host.host import open_host

    # A server that needs a login starts the browser flow only with a person at the
    # terminal; otherwise it fails naming `agenthost auth login SERVER`.
    URL_OPENER.set(interactive_opener())
    async with open_host(config, on_event=_sampling_printer(console)) as host:
        gc.enable()  # startup is over (see main); a long chat or serve needs the collector
        yield host


def _require_ready(host: Host, server: str) -> None:
    """A command aimed at one server: if it did not come up, say why (exit 5)."""
    from agenthost.errors import ServerUnavailable
    from agenthost.host.supervisor import ServerState

    status = host.supervisor(server).status()
    if status.state is not ServerState.READY:
        raise ServerUnavailable(
            f"server is {status.state.value}: {status.last_error or 'no reason given'}",
            server=server,
        )


def _report_failed_servers(host: Host, console: Console) -> bool:
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


# --------------------------------------------------------------------------- commands


async def cmd_servers(args: argparse.Namespace, console: Console) -> int:
    from agenthost.host.supervisor import ServerState

    config = _one_shot(_load_config(args))
    if args.command == "check":
        console.line(f"config: {config.source}")
        projects = sorted({s.scope[8:] for s in config.servers if s.scope.startswith("project:")})
        for project in projects:
            console.line(f"project config: {project} (trusted)")
    async with _open_host(args, config, console) as host:
        statuses = host.status()
        counts = {name: len(entries.tools) for name, entries in host.catalog.servers.items()}
        roots = {s.name: [r.uri for r in host.roots_for(s.name)] for s in statuses}
    rows: list[dict[str, Any]] = [
        {
            "name": s.name,
            "state": s.state.value,
            "transport": s.transport,
            "revision": s.revision,
            "era": s.era,
            "learned": s.learned,
            "server_info": s.server_info,
            "tools": counts.get(s.name, 0),
            "roots": roots.get(s.name, []),
            "restarts": s.restarts,
            "last_error": s.last_error,
        }
        for s in statuses
    ]
    if args.json:
        _print_json(rows)
    else:
        say(
            _table(
                [
                    [
                        r["name"],
                        r["state"],
                        r["transport"] or "-",
                        r["era"] or "-",
                        r["revision"] or "-",
                        _first_line(r["learned"] or "", 50) or "-",
                        str(r["tools"]),
                        " ".join(r["roots"]) or "(none)",
                    ]
                    for r in rows
                ],
                ["server", "state", "transport", "era", "revision", "learned", "tools", "roots"],
            )
        )
        for r in rows:
            if r["last_error"]:
                # The whole error: for a stdio server it ends with its last stderr lines.
                say(f"\n{r['name']}: {r['last_error']}".replace(" | ", "\n    | "))
    failed = any(s.state is not ServerState.READY for s in statuses)
    if args.command == "check" and not args.json:
        say("all servers ready" if not failed else "some servers are not ready")
    return EXIT_UNAVAILABLE if failed else EXIT_OK


async def cmd_tools(args: argparse.Namespace, console: Console) -> int:
    config = _one_shot(_load_config(args))
    async with _open_host(args, config, console) as host:
        failed = _report_failed_servers(host, console)
        tools = await host.list_tools()
    trusted = {s.name for s in config.servers if s.trusted}
    if args.json:
        _print_json(
            [
                {
                    "name": t.name,
                    "server": t.server,
                    "tool": t.tool.name,
                    "description": t.tool.description,
                    "input_schema": t.tool.input_schema,
                    "annotations": _annotations(t.tool.annotations),
                    "trusted": t.server in trusted,
                }
                for t in tools
            ]
        )
    else:
        say(
            _table(
                [
                    [
                        t.name,
                        _flags(t.tool.annotations, trusted=t.server in trusted),
                        _first_line(t.tool.description),
                    ]
                    for t in tools
                ],
                ["tool", "hints", "description"],
            )
        )
    return EXIT_UNAVAILABLE if failed else EXIT_OK


def _annotations(annotations: Any) -> dict[str, Any] | None:
    from agenthost.host.host import _annotation_dict

    return _annotation_dict(annotations)


def _flags(annotations: Any, *, trusted: bool) -> str:
    """The hints the policy acts on: an untrusted server's annotations count for nothing."""
    data = _annotations(annotations) or {}
    flags = []
    if data.get("readOnlyHint"):
        flags.append("read-only")
    if data.get("destructiveHint"):
        flags.append("destructive")
    if flags and not trusted:
        return f"untrusted (says {','.join(flags)})"
    return ",".join(flags) or "-"


async def cmd_prompts(args: argparse.Namespace, console: Console) -> int:
    config = _one_shot(_load_config(args))
    async with _open_host(args, config, console) as host:
        failed = _report_failed_servers(host, console)
        prompts = await host.list_prompts()
    if args.json:
        _print_json(
            [
                {
                    "server": server,
                    "name": p.name,
                    "description": p.description,
                    "arguments": [
                        {"name": a.name, "required": bool(a.required), "description": a.description}
                        for a in p.arguments or []
                    ],
                }
                for server, p in prompts
            ]
        )
    else:
        say(
            _table(
                [
                    [
                        server,
                        p.name,
                        " ".join(
                            (a.name if a.required else f"[{a.name}]") for a in p.arguments or []
                        ),
                        _first_line(p.description, 50),
                    ]
                    for server, p in prompts
                ],
                ["server", "prompt", "arguments", "description"],
            )
        )
    return EXIT_UNAVAILABLE if failed else EXIT_OK


async def cmd_resources(args: argparse.Namespace, console: Console) -> int:
    config = _one_shot(_load_config(args))
    async with _open_host(args, config, console) as host:
        failed = _report_failed_servers(host, console)
        resources = await host.list_resources()
        templates = await host.list_resource_templates()
    if args.json:
        _print_json(
            {
                "resources": [
                    {"server": s, "uri": r.uri, "name": r.name, "mime_type": r.mime_type}
                    for s, r in resources
                ],
                "templates": [
                    {"server": s, "uri_template": t.uri_template, "name": t.name}
                    for s, t in templates
                ],
            }
        )
    else:
        rows = [[s, r.uri, r.mime_type or "-", r.name] for s, r in resources]
        rows += [
            [s, t.uri_template, t.mime_type or "-", f"{t.name} (template)"] for s, t in templates
        ]
        say(_table(rows, ["server", "uri", "type", "name"]))
    return EXIT_UNAVAILABLE if failed else EXIT_OK


def _parse_json_arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CLIError(f"arguments are not valid JSON: {exc}", EXIT_USAGE) from None
    if not isinstance(value, dict):
        raise CLIError(
            'arguments must be a JSON object, e.g. \'{"path": "README.md"}\'', EXIT_USAGE
        )
    return value


def _progress_callback(console: Console, label: str) -> Any:
    async def progress(value: float, total: float | None, message: str | None) -> None:
        console.progress(label, value, total, message)

    return progress


async def cmd_call(args: argparse.Namespace, console: Console) -> int:
    import attrs

    from agenthost.host.catalog import SEPARATOR, tool_prefix
    from agenthost.protocol.converter import unstructure

    arguments = _parse_json_arguments(args.arguments)
    prefix, sep, _ = args.tool.partition(SEPARATOR)
    if not sep:
        raise CLIError(f"tool names look like server{SEPARATOR}tool, got {args.tool!r}", EXIT_USAGE)
    config = _one_shot(_load_config(args))
    # Only the servers the name can belong to are started: the one named so, or those
    # whose tool prefix it is (a server "e.x" lists e_x__echo).
    owners = [s for s in config.servers if s.name == prefix or tool_prefix(s.name) == prefix]
    if owners:
        config = attrs.evolve(config, servers=owners)
    async with _open_host(args, config, console) as host:
        if len(owners) == 1:
            _require_ready(host, owners[0].name)
        server = host.resolve_tool(args.tool).server
        # Ctrl-C cancels the call (the server gets notifications/cancelled), then exits 130.
        async with interruptible() as scope:
            result = await host.call_tool(
                args.tool, arguments, progress=_progress_callback(console, args.tool)
            )
        console.end_progress()
        if scope.cancelled_caught:
            raise CLIError(f"interrupted: {args.tool} was cancelled", EXIT_INTERRUPTED)
        revision = host.session(server).revision or "2025-11-25"
    if args.json:
        _print_json(unstructure(result, revision))
    else:
        text = _content_text(result.content)
        if text:
            say(text)
        if result.structured_content is not None and not text:
            say(json.dumps(result.structured_content, indent=2))
    return EXIT_ERROR if result.is_error else EXIT_OK


async def cmd_read(args: argparse.Namespace, console: Console) -> int:
    from agenthost.errors import AmbiguousResource
    from agenthost.protocol.converter import unstructure
    from agenthost.protocol.types import TextResourceContents

    config = _one_shot(_load_config(args, only=args.server) if args.server else _load_config(args))
    async with _open_host(args, config, console) as host:
        if args.server:
            _require_ready(host, args.server)
        else:
            _report_failed_servers(host, console)
        offering = [
            s.name
            for s in host.status()
            if s.state.value == "ready" and _offers_resources(host, s.name)
        ]
        if args.server and args.server not in offering:
            raise CLIError(
                f"{args.server}: the server offers no resources (it did not declare the"
                " resources capability)",
                EXIT_USAGE,
            )
        if not args.server and not offering:
            raise CLIError("none of the configured servers offers resources", EXIT_USAGE)
        try:
            result = await host.read_resource(args.uri, server=args.server)
        except AmbiguousResource as exc:
            chosen = await _ask_which_server(exc)
            if chosen is None:
                raise CLIError(str(exc), EXIT_USAGE) from None
            result = await host.read_resource(args.uri, server=chosen)
    if args.json:
        _print_json(unstructure(result, "2025-11-25"))
    else:
        for contents in result.contents:
            if isinstance(contents, TextResourceContents):
                say(contents.text)
            else:
                say(f"[binary {contents.mime_type or 'data'}, {len(contents.blob)} bytes]")
    return EXIT_OK


#: Seconds a person has to pick the server of an ambiguous resource URI.
_PICK_TIMEOUT = 300.0


async def _ask_which_server(exc: AmbiguousResource) -> str | None:
    """The server a person at the terminal picks for ``exc.uri``; ``None`` without a
    terminal (nobody to ask: the read is refused), on no answer, or on an answer that
    names none of them.

    **Cancellation:** the read of stdin runs in a worker thread abandoned on cancel
    (Ctrl-C returns at once); it is bounded by :data:`_PICK_TIMEOUT`.
    """
    import trio

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    choices = "\n".join(f"  {i}. {name}" for i, name in enumerate(exc.servers, 1))
    sys.stderr.write(
        f"agenthost: several servers could serve {exc.uri!r}:\n{choices}\n"
        f"read it from which one? [1-{len(exc.servers)}, or Enter for none] "
    )
    sys.stderr.flush()
    with trio.move_on_after(_PICK_TIMEOUT):
        line: str = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        answer = line.strip()
        if answer.isdigit() and 1 <= int(answer) <= len(exc.servers):
            return exc.servers[int(answer) - 1]
        return answer if answer in exc.servers else None
    sys.stderr.write("\n(no answer in time)\n")
    return None


def _offers_resources(host: Host, server: str) -> bool:
    caps = host.session(server).server_capabilities
    return caps is not None and getattr(caps, "resources", None) is not None


def _key_values(items: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CLIError(f"prompt arguments are key=value, got {item!r}", EXIT_USAGE)
        out[key] = value
    return out


def _check_prompt(host: Host, server: str, name: str, arguments: dict[str, str]) -> None:
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


async def cmd_prompt(args: argparse.Namespace, console: Console) -> int:
    from agenthost.protocol.converter import unstructure

    config = _one_shot(_load_config(args, only=args.server))
    arguments = _key_values(args.arguments)
    async with _open_host(args, config, console) as host:
        _require_ready(host, args.server)
        _check_prompt(host, args.server, args.name, arguments)
        result = await host.get_prompt(args.server, args.name, arguments)
        revision = host.session(args.server).revision or "2025-11-25"
    if args.json:
        _print_json(unstructure(result, revision))
    else:
        if result.description:
            say(f"# {result.description}")
        for message in result.messages:
            say(f"[{message.role}] {_content_text([message.content])}")
    return EXIT_OK


async def cmd_models(args: argparse.Namespace, console: Console) -> int:
    from providers.cli import (
        explain,
        list_models,
        provider_rows,
        render_models,
        render_selection,
        selection_data,
    )
    from providers.config import parse_providers

    raw: dict[str, Any] = {}
    source = "<defaults>"
    base_dir = None
    if any(p is not None for p in _config_paths(args)):
        config = _load_config(args)
        raw = dict(config.providers)
        source = config.source or "<config>"
        base_dir = os.path.dirname(os.path.abspath(source)) if config.source else None
    providers_config = parse_providers(raw, source=source, base_dir=base_dir)
    env = os.environ
    if args.explain is not None:
        selection = explain(args.explain, providers_config, env)
        if args.json:
            _print_json(selection_data(selection))
        else:
            say(render_selection(selection))
        return EXIT_OK
    rows = list_models(providers_config, env)
    if args.json:
        _print_json({"providers": provider_rows(providers_config, env), "models": rows})
    else:
        say(render_models(rows, provider_rows(providers_config, env)))
    return EXIT_OK


class _Stream:
    """The model's text on stdout as it arrives; other output waits for the line to end."""

    def __init__(self) -> None:
        #: Something was streamed since the last tool call (the turn's text is shown).
        self.shown = False
        self._open = False

    def write(self, text: str) -> None:
        sys.stdout.write(safe(text))
        sys.stdout.flush()
        self.shown = True
        self._open = not text.endswith("\n")

    def end_line(self) -> None:
        if self._open:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._open = False


def _agent_printer(console: Console, stream: _Stream | None = None) -> Callable[[AgentEvent], None]:
    def on_event(event: AgentEvent) -> None:
        record = event.record
        if event.kind == "delta" and stream is not None:
            stream.write(event.text)
            return
        if stream is not None:
            stream.end_line()
            if event.kind == "tool_call":
                stream.shown = False  # the final answer is the text after the last call
        if event.kind == "text" and event.text:
            console.line(f"model: {event.text}")
        elif event.kind == "tool_call" and record is not None:
            # Not "> ...": that is what the user's own lines look like in chat.
            console.line(
                f"  [tool] {record.name} {json.dumps(dict(record.arguments), ensure_ascii=False)}"
            )
        elif event.kind == "progress" and record is not None and event.progress:
            console.progress(record.name, *event.progress)
        elif event.kind == "tool_running" and record is not None:
            console.line(f"  ~ still running (task {record.task_id}); its result will follow")
        elif event.kind == "tool_result" and record is not None:
            if record.status == "denied":
                console.line(f"  x denied: {record.reason}")
            elif record.status == "error":
                console.line(f"  ! error: {_first_line(record.reason or record.output, 100)}")
            else:
                lines = record.output.strip().splitlines() or [""]
                shown = [_first_line(line, 100) for line in lines[:4]]
                if len(lines) > 4:
                    shown.append(f"... ({len(lines) - 4} more lines)")
                console.line("  = " + "\n    ".join(shown))

    return on_event


async def cmd_run(args: argparse.Namespace, console: Console) -> int:

    from agenthost.agent.transcript import Transcript
    from agenthost.mcp_to_llm import prompt_messages_to_llm

    if not args.task_grace >= 0:
        raise CLIError("--task-grace takes a number of seconds, 0 or more", EXIT_USAGE)
    config = _load_config(args)
    provider, model = _split_model(args.model)
    async with _open_host(args, config, console) as host:
        _report_failed_servers(host, console)
        prompt_messages = []
        if args.prompt:
            server, _, name = args.prompt.partition("/")
            prompt_args = _key_values(args.prompt_arg or [])
            host.supervisor(server)  # NotFound names the configured servers
            _require_ready(host, server)
            _check_prompt(host, server, name, prompt_args)
            got = await host.get_prompt(server, name, prompt_args)
            prompt_messages = prompt_messages_to_llm(got.messages)
        transcript = Transcript(task=args.task, provider=provider or "", model=model or "")
        # The answer streams to stdout as it arrives; --json prints the transcript at the end.
        stream = None if args.json else _Stream()
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
                on_event=_agent_printer(console, stream),
                stream=stream is not None,
            )
        if stream is not None:
            stream.end_line()
        if scope.cancelled_caught:
            transcript.stop = "interrupted"
    if args.json:
        _print_json(transcript.to_json())
    else:
        if transcript.final_text and not (stream is not None and stream.shown):
            say(transcript.final_text)
        console.line(
            f"-- stopped: {transcript.stop}; {transcript.turns} model turns,"
            f" {len(transcript.tool_calls)} tool calls ({len(transcript.denied)} denied),"
            f" {transcript.input_tokens + transcript.output_tokens} tokens"
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


def _split_model(value: str | None) -> tuple[str | None, str | None]:
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

    # The receiver is installed before the block runs, so no Ctrl-C slips through.
    with trio.open_signal_receiver(signal.SIGINT) as signals, trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                async for _ in signals:
                    scope.cancel()
                    return

            nursery.start_soon(watch)
            try:
                yield scope
            finally:
                nursery.cancel_scope.cancel()


async def cmd_serve(args: argparse.Namespace, console: Console) -> int:
    import math

    import trio

    config = _load_config(args)
    async with _open_host(args, config, console) as host:
        for status in host.status():
            console.line(
                f"{status.name}: {status.state.value} ({status.era or '-'},"
                f" {status.revision or '-'})"
            )
        async with interruptible():
            console.line("serving sampling and elicitation; Ctrl-C to stop")
            await trio.sleep(math.inf)  # until Ctrl-C
    return EXIT_OK


async def cmd_audit(args: argparse.Namespace, console: Console) -> int:
    from policies import parse_policy, read_audit

    config = _load_config(args)
    source = config.source or "<config>"
    base = os.path.dirname(os.path.abspath(source)) if config.source else None
    policy = parse_policy(config.policy, source=source, base_dir=base)
    if policy.audit is None:
        raise CLIError("the policy has no audit log configured ([policy] audit = ...)", EXIT_USAGE)
    path = policy.audit.path
    records = read_audit(path) if os.path.exists(path) else []
    if args.tail:
        records = records[-args.tail :]
    if args.json:
        _print_json(records)
        return EXIT_OK
    console.line(f"audit log {path} ({len(records)} lines shown)")
    for r in records:
        say(_audit_line(r))
    return EXIT_OK


def _audit_line(record: dict[str, Any]) -> str:
    """One audit record as one line: every field escaped to stay on it.

    Why: names, reasons and results come from servers (a tool named ``x\\n12:00:00
    decision ...``), and a line break in one would print as records that never were.
    """

    def field(key: str) -> str:
        value = record.get(key)
        return safe("" if value is None else str(value), one_line=True)

    def head(label: str) -> str:
        time_of_day = field("ts")[11:19]
        return f"{time_of_day} {label} {field('kind')} {field('server')} {field('name')} ->"

    event = record.get("event")
    if event == "review":
        return f"{head('review  ')} {field('decision')}: {field('reason')}"
    if event == "suppressed":
        return f"{head('folded  ')} {field('reason')}"
    if event == "decision":
        return f"{head('decision')} {field('decision')} by {field('rule')}: {field('reason')}"
    what = record.get("error") or record.get("result")
    return f"{head('outcome ')} {_first_line(json.dumps(what, default=str), 80)}"


async def cmd_chat(args: argparse.Namespace, console: Console) -> int:
    from agenthost.cli.chat import chat

    config = _load_config(args)
    provider, model = _split_model(args.model)
    async with _open_host(args, config, console) as host:
        return await chat(host, console, provider=provider, model=model)


async def cmd_tasks(args: argparse.Namespace, console: Console) -> int:
    """``tasks list|get|result|cancel SERVER [ID]``: tasks a server keeps for us.

    Over stdio a server's tasks end with its process (each CLI run starts a new one); over
    HTTP a server may keep them across runs, which is what this command is for.
    """
    from agenthost.protocol.converter import unstructure
    from agenthost.tool_tasks import (
        cancel_task,
        get_task,
        list_tasks,
        offers_tasks_extension,
        task_result,
    )

    if args.action != "list" and not args.task_id:
        raise CLIError(
            f"tasks {args.action} needs a task id: tasks {args.action} SERVER ID", EXIT_USAGE
        )
    config = _load_config(args, only=args.server)
    async with _open_host(args, config, console) as host:
        _require_ready(host, args.server)
        session = host.session(args.server)
        revision = session.revision or "2025-11-25"
        output: Any
        if args.action == "list" and offers_tasks_extension(session):
            raise CLIError(
                f"{args.server} uses the 2026-07-28 tasks extension, which has no tasks/list:"
                f" name the task (tasks get|result|cancel {args.server} ID)",
                EXIT_USAGE,
            )
        if args.action == "list":
            tasks = await list_tasks(session)
            output = [unstructure(task, revision) for task in tasks]
            lines = [f"{t.task_id}  {t.status}  {t.status_message or ''}".rstrip() for t in tasks]
        elif args.action == "get":
            task = await get_task(session, args.task_id)
            output = unstructure(task, revision)
            lines = [f"{task.task_id}  {task.status}  {task.status_message or ''}".rstrip()]
        elif args.action == "cancel":
            task = await cancel_task(session, args.task_id)
            output = unstructure(task, revision)
            lines = [f"{task.task_id}  {task.status}"]
        else:
            async with interruptible() as scope:
                result = await task_result(session, args.task_id, timeout=None)
            if scope.cancelled_caught:
                raise CLIError("interrupted", EXIT_INTERRUPTED)
            output = unstructure(result, revision)
            lines = [_content_text(result.content)]
    if args.json:
        _print_json(output)
    else:
        for line in lines:
            say(line)
    return EXIT_OK


async def cmd_skills(args: argparse.Namespace, console: Console) -> int:
    """``skills [SERVER]`` lists skills (names and descriptions only, nothing is fetched);
    ``skills show SERVER NAME`` loads one, through the policy (kind ``skill``), verified."""
    words = list(args.words)
    show = bool(words) and words[0] == "show"
    if show and len(words) != 3:
        raise CLIError("usage: skills show SERVER NAME", EXIT_USAGE)
    if not show and len(words) > 1:
        raise CLIError("usage: skills [SERVER] | skills show SERVER NAME", EXIT_USAGE)
    server = words[1] if show else (words[0] if words else None)
    config = _load_config(args, only=server) if server else _load_config(args)
    async with _open_host(args, config, console) as host:
        if server:
            _require_ready(host, server)
        else:
            _report_failed_servers(host, console)
        if show:
            loaded = await host.load_skill(server or "", words[2])
            if args.json:
                _print_json({"server": server, "uri": loaded.entry.uri, "text": loaded.text})
            else:
                say(loaded.text)
            return EXIT_OK
        found = await host.list_skills(server)
    if args.json:
        _print_json(
            [
                {"server": name, "name": e.name, "description": e.description, "uri": e.uri}
                for name, e in found
            ]
        )
    else:
        for name, entry in found:
            say(f"{name}/{entry.name}  {entry.description}")
        if not found:
            console.line("no skills")
    return EXIT_OK


async def cmd_approvals(args: argparse.Namespace, console: Console) -> int:
    """List or revoke the remembered "always"/"never" answers for tools."""
    import trio

    from policies import ApprovalStore, default_approvals_path, parse_policy

    path = default_approvals_path()
    if any(p is not None for p in _config_paths(args)):  # its [policy] may name another file
        config = _load_config(args)
        source = config.source or "<config>"
        base = os.path.dirname(os.path.abspath(source)) if config.source else None
        path = parse_policy(config.policy, source=source, base_dir=base).approvals or path
    store = ApprovalStore(path)
    if args.action == "revoke":
        if not args.all and args.server is None:
            raise CLIError("revoke needs SERVER [TOOL], or --all", EXIT_USAGE)
        server = None if args.all else args.server
        gone = await trio.to_thread.run_sync(store.revoke, server, args.tool)
        if not gone and not args.all:
            what = f"{args.server}/{args.tool}" if args.tool else f"server {args.server}"
            raise CLIError(f"no remembered answer for {what} in {path}", EXIT_USAGE)
        if args.json:
            _print_json({"file": str(path), "revoked": [a.to_json() for a in gone]})
        else:
            console.line(f"revoked {len(gone)} remembered answer(s) in {path}")
        return EXIT_OK
    entries = await trio.to_thread.run_sync(store.load)
    if args.json:
        _print_json({"file": str(path), "approvals": [a.to_json() for a in entries]})
        return EXIT_OK
    console.line(f"approvals file {path} ({len(entries)} remembered)")
    rows = [
        [
            a.server,
            a.name,
            "always" if a.decision == "allow" else "never",
            a.at,
            _approval_place(a),
        ]
        for a in entries
    ]
    if rows:
        say(_table(rows, ["server", "tool", "answer", "since", "where"]))
    return EXIT_OK


def _approval_place(approval: Approval) -> str:
    """Where an answer holds (config scope and directory): the same tool may have one
    answer per place."""
    from policies._text import printable

    if approval.binding is None:
        return "(not recorded: asked again)" if approval.decision == "allow" else "(not recorded)"
    place = approval.scope or "user"
    return printable(f"{place} in {approval.cwd}" if approval.cwd else place)


def _trust_target(path: str | None) -> Any:
    """The project config ``trust`` means: PATH (a file, or a folder to look in), or here."""
    from pathlib import Path

    from agenthost.config.model import PROJECT_CONFIGS, find_project_config

    where = Path(path) if path else Path.cwd()
    if path and not where.is_dir():
        return where
    found = find_project_config(where)
    if found is None:
        raise CLIError(
            f"no project config in {where} (looked for {', '.join(PROJECT_CONFIGS)})", EXIT_USAGE
        )
    return found


async def cmd_trust(args: argparse.Namespace, console: Console) -> int:
    """``trust [PATH]``: the command is the consent; ``--list``; ``--revoke [PATH]``."""
    from agenthost.config.trust import TrustStore, check_user_only, describe, inspect_project

    store = TrustStore()
    if args.list:
        records = store.records()
        if args.json:
            _print_json({"file": str(store.path), "projects": [r.to_json() for r in records]})
            return EXIT_OK
        console.line(f"trust store {store.path} ({len(records)} recorded)")
        rows = [[r.decision, str(r.path), r.at] for r in records]
        if rows:
            say(_table(rows, ["answer", "config", "since"]))
        return EXIT_OK
    if args.revoke:
        target = args.path or _trust_target(None)
        gone = store.revoke(target)
        if not gone:
            raise CLIError(f"no recorded answer for {target} in {store.path}", EXIT_USAGE)
        if args.json:
            _print_json({"file": str(store.path), "revoked": [r.to_json() for r in gone]})
        else:
            for r in gone:
                console.line(f"forgot {r.decision} for {safe(r.path)}")
        return EXIT_OK
    found = inspect_project(_trust_target(args.path))
    check_user_only(found)
    verdict = store.verdict(found)
    record = store.record(found, "trust")
    if args.json:
        _print_json({"trusted": record.to_json(), "changes": list(verdict.changes)})
        return EXIT_OK
    for line in describe(found.summary):
        say(line)
    if verdict.changes:
        say("changed since you last trusted it:")
        for change in verdict.changes:
            say(f"  {change}")
    console.line(f"trusted {found.path} as it is now (`agenthost trust --revoke` to undo)")
    return EXIT_OK


async def cmd_auth(args: argparse.Namespace, console: Console) -> int:
    from agenthost.cli import auth as cli_auth

    return await cli_auth.cmd_auth(args, console)


COMMANDS: dict[str, Callable[[argparse.Namespace, Console], Any]] = {
    "servers": cmd_servers,
    "check": cmd_servers,
    "tools": cmd_tools,
    "prompts": cmd_prompts,
    "resources": cmd_resources,
    "call": cmd_call,
    "read": cmd_read,
    "prompt": cmd_prompt,
    "models": cmd_models,
    "run": cmd_run,
    "serve": cmd_serve,
    "audit": cmd_audit,
    "chat": cmd_chat,
    "tasks": cmd_tasks,
    "skills": cmd_skills,
    "approvals": cmd_approvals,
    "auth": cmd_auth,
    "trust": cmd_trust,
}


def build_parser() -> argparse.ArgumentParser:
    def options(*, top: bool) -> argparse.ArgumentParser:
        # The same options before or after the command; after it they must not reset
        # what was given before it, hence SUPPRESS defaults on the subcommand copies.
        common = argparse.ArgumentParser(add_help=False)
        keep: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
        common.add_argument(
            "--config", "-c", help="config file (default: ./agenthost.toml)", **keep
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
        common.add_argument(
            "-q", "--quiet", action="store_true", help="no progress on stderr", **keep
        )
        common.add_argument(
            "--trust-project",
            action="store_true",
            help="trust the project's config file for this run only (records nothing);"
            " also AGENTHOST_TRUST_PROJECT=1",
            **keep,
        )
        return common

    common = options(top=False)
    parser = argparse.ArgumentParser(
        prog="agenthost",
        description="A Trio-based MCP host: servers, sampling, consent, agents.",
        parents=[options(top=True)],
        epilog="Exit codes: 0 done, 1 tool/agent error, 2 usage/config error, 3 denied by"
        " policy, 4 provider error, 5 server unavailable, 6 agent stopped at a limit,"
        " 130 interrupted.",
    )
    from agenthost._version import __version__
    from agenthost.protocol.revisions import SUPPORTED_REVISIONS

    parser.add_argument(
        "--version",
        action="version",
        version=f"agenthost {__version__} (MCP revisions {', '.join(SUPPORTED_REVISIONS)})",
    )
    sub = parser.add_subparsers(dest="command", metavar="command")
    sub.required = True

    def add(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, parents=[common], description=help)

    add("servers", "start every server and show its state and negotiated revision")
    add("check", "validate the config, start each server, report status (exit 5 if any failed)")
    add("tools", "list every server's tools, namespaced server__tool")
    add("prompts", "list every server's prompts")
    add("resources", "list every server's resources and resource templates")
    call = add("call", "call one tool: call server__tool '{\"arg\": 1}'")
    call.add_argument("tool")
    call.add_argument("arguments", nargs="?", default="{}")
    read = add("read", "read a resource by URI")
    read.add_argument("uri")
    read.add_argument("--server", help="the server to ask (default: the one that lists it)")
    prompt = add("prompt", "get a prompt: prompt SERVER NAME [key=value ...]")
    prompt.add_argument("server")
    prompt.add_argument("name")
    prompt.add_argument("arguments", nargs="*")
    models = add("models", "list the models sampling and agents can use")
    models.add_argument(
        "--explain", metavar="JSON", help="explain the choice for a modelPreferences JSON"
    )
    run = add("run", "run the agent on a task over every server's tools")
    run.add_argument("task")
    run.add_argument("--model", help="provider/model (default: the configured default)")
    run.add_argument("--max-turns", type=int, default=20)
    run.add_argument("--token-budget", type=int, default=None)
    run.add_argument(
        "--task-grace",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="a tool running as a task longer than this lets the model go on; its result"
        " follows in a later turn (default 2; 0 = at once)",
    )
    run.add_argument("--prompt", help="open with a server's prompt: SERVER/NAME")
    run.add_argument("--prompt-arg", action="append", help="key=value for --prompt")
    run.add_argument(
        "--strict-denials",
        action="store_true",
        help="exit 3 if the policy denied any tool call (for CI)",
    )
    chat = add("chat", "an interactive session with slash commands (/tools, /prompts, ...)")
    chat.add_argument("--model", help="provider/model")
    add("serve", "keep every session up and serve sampling/elicitation until Ctrl-C")
    tasks = add("tasks", "a server's tasks: tasks list|get|result|cancel SERVER [ID]")
    tasks.add_argument("action", choices=("list", "get", "result", "cancel"))
    tasks.add_argument("server")
    tasks.add_argument("task_id", nargs="?")
    skills = add("skills", "servers' skills: skills [SERVER] | skills show SERVER NAME")
    skills.add_argument("words", nargs="*", metavar="SERVER | show SERVER NAME")
    audit = add("audit", "show the policy's audit log")
    audit.add_argument("--tail", type=int, default=0, help="only the last N lines")
    approvals = add("approvals", "list or revoke remembered always/never answers for tools")
    approvals.add_argument("action", nargs="?", choices=["list", "revoke"], default="list")
    approvals.add_argument("server", nargs="?", help="revoke: the server's answers")
    approvals.add_argument("tool", nargs="?", help="revoke: only this tool (its MCP name)")
    approvals.add_argument("--all", action="store_true", help="revoke: every answer")
    trust = add("trust", "trust the project's config file as it is now (shows what it runs)")
    trust.add_argument("path", nargs="?", help="the config file, or a project folder (default: .)")
    trust.add_argument("--list", action="store_true", help="every recorded answer")
    trust.add_argument("--revoke", action="store_true", help="forget the answer for PATH")
    from agenthost.cli.auth import add_parser as add_auth

    add_auth(sub, common)
    return parser


def _setup_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_SafeFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    if verbosity < 3:
        for noisy in ("httpx", "httpcore", "httpx2", "httpcore2", "anthropic", "openai"):
            logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``agenthost`` command line; returns the exit code.

    The cyclic garbage collector is off until the host is up: startup creates a few
    hundred modules' worth of long-lived objects and no garbage, and the collector would
    scan them over and over for nothing (about 13 ms of a one-shot command, measured).
    """
    gc.disable()
    stdout, stderr = sys.stdout, sys.stderr
    # Everything the CLI writes (results, --json, errors, log lines) leaves the process
    # here: scrub the configured secrets a server may have echoed back (issue 14).
    sys.stdout = _Redacting.wrap(stdout)
    sys.stderr = _Redacting.wrap(stderr)
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        _setup_logging(args.verbose)
        console = Console(quiet=args.quiet)
        command = COMMANDS[args.command]
        return _run(command, args, console)
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        gc.enable()


def run() -> int:
    """The console script: :func:`main`, then exit without a final collection.

    ``gc.freeze()`` hides every live object from the collector, so the interpreter's
    last collection at exit has nothing to walk (about 25 ms saved per command). Only
    for a process that is about to end: in-process callers use :func:`main`.
    """
    code = main()
    sys.stdout.flush()
    gc.freeze()
    return code


def _run(
    command: Callable[[argparse.Namespace, Console], Any],
    args: argparse.Namespace,
    console: Console,
) -> int:
    import trio

    from agenthost.errors import (
        AgentHostError,
        AgentHostTimeout,
        ConfigError,
        ConsentDenied,
        JSONRPCError,
        NotFound,
        ProviderError,
        ServerUnavailable,
        TransportError,
    )

    def fail(message: str, code: int) -> int:
        console.quiet = False
        console.line(f"agenthost: {message}")
        if args.json:
            _print_json({"error": message, "exit_code": code})
        return code

    try:
        result: int = trio.run(command, args, console)
        return result
    except CLIError as exc:
        return fail(str(exc), exc.code)
    except ConfigError as exc:
        return fail(f"config error: {exc}", EXIT_USAGE)
    except ConsentDenied as exc:
        return fail(f"denied by policy: {exc}", EXIT_DENIED)
    except ProviderError as exc:
        return fail(f"provider error: {exc}", EXIT_PROVIDER)
    except (ServerUnavailable, TransportError) as exc:
        return fail(exc.text if isinstance(exc, JSONRPCError) else str(exc), EXIT_UNAVAILABLE)
    except NotFound as exc:
        return fail(str(exc), EXIT_USAGE)
    except JSONRPCError as exc:
        return fail(exc.text, EXIT_ERROR)
    except (AgentHostTimeout, AgentHostError) as exc:
        return fail(str(exc), EXIT_ERROR)
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_INTERRUPTED)
