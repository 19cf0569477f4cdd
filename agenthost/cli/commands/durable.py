"""Durable runs on Temporal: ``agenthost worker``, ``agenthost runs ...``, and the
``--temporal`` half of ``agenthost run`` (README "Many machines").

The Temporal SDK is asyncio; the CLI is Trio. A command here runs its Temporal part with
``asyncio.run`` in a thread (:func:`in_asyncio`); the worker's Host stays in the CLI's
own Trio run, which the activities reach through its token.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from agenthost.cli.common import add_command, load_config, open_host, report_failed_servers
from agenthost.cli.exit import (
    EXIT_ERROR,
    EXIT_INCOMPLETE,
    EXIT_OK,
    EXIT_PROVIDER,
    EXIT_USAGE,
    CLIError,
)
from agenthost.cli.render import Console, agent_printer, print_json, say, table
from agenthost.durable.connection import ENV_ADDRESS
from agenthost.errors import AgentHostError
from agenthost.redaction import add_secrets_of_url, redact_url

if TYPE_CHECKING:
    from temporalio.client import Client

    from agenthost.config.model import HostConfig
    from agenthost.durable.connection import TemporalSettings
    from agenthost.durable.seal import DurableKey

__all__ = [
    "add_key_option",
    "add_parser",
    "add_temporal_options",
    "run",
    "run_durable",
    "wants_temporal",
]

T = TypeVar("T")


def add_temporal_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """``--temporal HOST:PORT`` (or AGENTHOST_TEMPORAL), ``--namespace``, ``--task-queue``,
    and how to connect: ``--temporal-tls*``, ``--temporal-api-key-file``."""
    parser.add_argument(
        "--temporal",
        metavar="HOST:PORT",
        help="the Temporal server's frontend address (also AGENTHOST_TEMPORAL)"
        + ("" if required else "; makes the run durable"),
    )
    parser.add_argument("--namespace", help="Temporal namespace (default: default)")
    parser.add_argument("--task-queue", default="agenthost", help="the workers' task queue")
    tls = parser.add_argument_group("connecting to Temporal (also the config's [temporal])")
    tls.add_argument(
        "--temporal-tls", action="store_true", help="connect with TLS (the system's CAs)"
    )
    tls.add_argument("--temporal-tls-ca", metavar="PEM", help="the CA to trust (turns TLS on)")
    tls.add_argument("--temporal-tls-cert", metavar="PEM", help="client certificate (mTLS)")
    tls.add_argument("--temporal-tls-key", metavar="PEM", help="its private key (mTLS)")
    tls.add_argument(
        "--temporal-tls-server-name", metavar="NAME", help="the name the certificate must have"
    )
    tls.add_argument(
        "--temporal-api-key-file",
        metavar="FILE",
        help="the API key, read from FILE (or set TEMPORAL_API_KEY); turns TLS on",
    )


def add_key_option(parser: argparse.ArgumentParser) -> None:
    """``--key-file PATH`` (or AGENTHOST_DURABLE_KEY_FILE): the deployment's shared key."""
    parser.add_argument(
        "--key-file",
        metavar="PATH",
        help="the deployment's durable-run key, mode 0600 (also AGENTHOST_DURABLE_KEY_FILE):"
        " workers do only runs and approvals signed with it",
    )


def _key(args: argparse.Namespace, config: HostConfig | None) -> DurableKey:
    """The key of ``--key-file``, else the variable, else the config's
    ``[temporal] key_file`` (relative to that file); none is a usage error."""
    from agenthost.durable.connection import key_file
    from agenthost.durable.seal import ENV_KEY_FILE, load_key

    path = getattr(args, "key_file", None) or os.environ.get(ENV_KEY_FILE)
    if not path and config is not None:
        path = key_file(config.temporal, config.source)
    if not path:
        raise CLIError(
            "durable runs need the deployment's key: give --key-file PATH (or set"
            f" {ENV_KEY_FILE}, or key_file in the config's [temporal])",
            EXIT_USAGE,
        )
    return load_key(path)


def wants_temporal(args: argparse.Namespace) -> bool:
    """Whether this command line talks to Temporal (``--temporal`` or the variable)."""
    return bool(getattr(args, "temporal", None) or os.environ.get(ENV_ADDRESS))


def _settings(args: argparse.Namespace, config: HostConfig | None) -> TemporalSettings:
    """How to reach Temporal: the flags over the environment over ``[temporal]``."""
    from agenthost.durable.connection import resolve

    flags = {
        "address": args.temporal,
        "namespace": args.namespace,
        "tls": args.temporal_tls,
        "tls_ca": args.temporal_tls_ca,
        "tls_cert": args.temporal_tls_cert,
        "tls_key": args.temporal_tls_key,
        "tls_server_name": args.temporal_tls_server_name,
        "api_key_file": args.temporal_api_key_file,
    }
    table = config.temporal if config is not None else {}
    return resolve(flags, table, source=config.source if config is not None else None)


def _temporal() -> None:
    try:
        import temporalio  # noqa: F401
    except ImportError:
        raise CLIError(
            "durable runs need the temporal extra: pip install 'agenthost[temporal]'", EXIT_USAGE
        ) from None


async def in_asyncio(body: Callable[[], Awaitable[T]]) -> T:
    """Run ``body`` on asyncio in a thread; Temporal's errors become one-line errors."""
    _temporal()
    from temporalio.exceptions import TemporalError
    from temporalio.service import RPCError

    async def guarded() -> T:
        try:
            return await body()
        except (RPCError, TemporalError) as exc:
            raise AgentHostError(f"Temporal: {exc}") from None

    return await trio.to_thread.run_sync(lambda: asyncio.run(guarded()))


async def _client(settings: TemporalSettings) -> Client:
    from agenthost.durable.worker import connect

    return await connect(settings)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``worker`` and ``runs`` on the CLI's subparsers."""
    worker = add_command(
        sub, common, "worker", "serve durable agent runs from Temporal (README: Many machines)"
    )
    add_temporal_options(worker, required=True)
    add_key_option(worker)
    worker.add_argument(
        "--audit",
        help="the audit JSONL, or a postgresql:// URI for a fleet (default: the config's"
        " [policy] audit_database, else its audit, else state dir)",
    )
    worker.add_argument("--results", help="where cut tool results are kept (default: state dir)")
    worker.add_argument(
        "--drain", type=float, default=30.0, help="seconds in-flight activities get on SIGTERM"
    )

    runs = add_command(sub, common, "runs", "list, show, cancel or answer durable runs")
    actions = runs.add_subparsers(dest="runs_action", metavar="action")
    actions.required = True
    texts = {
        "list": "recent runs and what each waits for",
        "show": "a run's status and transcript",
        "cancel": "cancel a run",
        "approve": "approve a call the run waits on",
        "deny": "deny a call the run waits on",
    }
    for name, text in texts.items():
        action = actions.add_parser(name, help=text, description=text, parents=[common])
        add_temporal_options(action, required=True)
        if name != "list":
            action.add_argument("run_id")
        if name in ("approve", "deny"):
            add_key_option(action)
            action.add_argument("call_id")
            action.add_argument("--by", default=None, help="who answers (default: your user)")


async def run(args: argparse.Namespace, console: Console) -> int:
    if args.command == "worker":
        return await _worker(args, console)
    return await _runs(args, console)


# ---------------------------------------------------------------------------- worker


def _audit_path(args: argparse.Namespace, config: HostConfig) -> Path | str:
    """The JSONL file, or a PostgreSQL URI (registered as a secret: it may hold a
    password)."""
    from agenthost.durable.pgaudit import is_dsn
    from agenthost.durable.worker import state_dir
    from agenthost_policies.config import parse_policy

    if args.audit:
        if is_dsn(args.audit):
            add_secrets_of_url(args.audit)
            return str(args.audit)
        return Path(args.audit)
    source = config.source or "<config>"
    base = os.path.dirname(os.path.abspath(config.source)) if config.source else None
    policy = parse_policy(config.policy, source=source, base_dir=base)
    if policy.audit_database is not None:
        add_secrets_of_url(policy.audit_database)
        return policy.audit_database
    if policy.audit is not None:
        return policy.audit.path
    return state_dir() / "durable-audit.jsonl"


async def _worker(args: argparse.Namespace, console: Console) -> int:
    """One Host here (this Trio run), a Temporal worker on asyncio in a thread; SIGTERM
    or Ctrl-C drains it, then the Host closes."""
    _temporal()
    from agenthost.durable.activities import HostBridge
    from agenthost.durable.worker import run_worker, state_dir

    config = load_config(args)
    key = _key(args, config)  # before anything starts: a worker without the key does nothing
    settings = _settings(args, config)
    address = settings.address
    audit = _audit_path(args, config)
    results = Path(args.results) if args.results else state_dir() / "results"
    async with open_host(args, config, console) as host:
        report_failed_servers(host, console)
        bridge = HostBridge(host, trio.lowlevel.current_trio_token())
        box: dict[str, Any] = {}

        def ready() -> None:
            console.line(
                f"worker ready: task queue {args.task_queue} on {address}"
                f" (namespace {settings.namespace}{', TLS' if settings.tls else ''});"
                f" audit {redact_url(audit) if isinstance(audit, str) else audit}"
            )

        async def serve() -> None:
            box["loop"], box["stop"] = asyncio.get_running_loop(), asyncio.Event()
            client = await _client(settings)
            await run_worker(
                client,
                bridge,
                task_queue=args.task_queue,
                audit=audit,
                results=results,
                stop=box["stop"],
                key=key,
                drain=args.drain,
                on_ready=ready,
            )

        async def on_signals() -> None:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    console.line("worker: draining (in-flight activities finish first)")
                    if "loop" in box:
                        box["loop"].call_soon_threadsafe(box["stop"].set)
                    return

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(on_signals)
                await in_asyncio(serve)
                nursery.cancel_scope.cancel()
        finally:
            bridge.close()
    console.line("worker stopped")
    return EXIT_OK


# ---------------------------------------------------------------------------- run


def _run_params(args: argparse.Namespace, config: HostConfig) -> dict[str, Any]:
    """The run's input from the command line and the config (its provider, model and
    policy); a task over the bound is a usage error."""
    from agenthost.agent.loop import DEFAULT_SYSTEM_PROMPT
    from agenthost.cli.common import split_model
    from agenthost.durable.client import run_input
    from agenthost.durable.limits import LimitError, check_task
    from agenthost_policies.config import parse_policy
    from agenthost_providers.config import default_choice, parse_providers

    source = config.source or "<config>"
    base = os.path.dirname(os.path.abspath(config.source)) if config.source else None
    provider, model = split_model(args.model)
    if provider is None or model is None:
        choice = default_choice(
            parse_providers(config.providers, source=source, base_dir=base), os.environ
        )
        if choice is None:
            raise CLIError("no LLM provider is configured", EXIT_USAGE)
        provider, model = provider or choice[0], model or choice[1]
    try:
        check_task(args.task)
    except LimitError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None
    return run_input(
        args.task,
        provider=provider,
        model=model,
        policy=parse_policy(config.policy, source=source, base_dir=base),
        system_prompt=DEFAULT_SYSTEM_PROMPT,
        max_turns=args.max_turns,
        token_budget=args.token_budget,
    )


async def run_durable(args: argparse.Namespace, console: Console) -> int:
    """``agenthost run --temporal ... TASK [--detach]``: submit, then follow (or not)."""
    _temporal()
    from agenthost.agent.transcript import AgentEvent
    from agenthost.durable import client as runs
    from agenthost.durable.codec import load_call

    config = load_config(args)
    settings = _settings(args, config)
    params = _run_params(args, config)
    key = _key(args, config)
    printer = agent_printer(console)

    async def body() -> tuple[str, dict[str, Any] | None]:
        client = await _client(settings)
        run_id = await runs.submit(client, params, task_queue=args.task_queue, key=key)
        if args.detach:
            return run_id, None
        console.line(f"run {run_id} submitted; following it (Ctrl-C stops following only)")
        asked: set[str] = set()
        async for event in runs.follow(client, run_id):
            if event["kind"] == "waiting":
                if event["call_id"] not in asked:
                    asked.add(event["call_id"])
                    console.line(
                        f"  ? waiting for approval: {event['server']}/{event['tool']}"
                        f" {json.dumps(event['arguments'])}: agenthost runs approve|deny"
                        f" {run_id} {event['call_id']}"
                    )
                continue
            record = load_call(event["record"]) if event.get("record") else None
            printer(AgentEvent(kind=event["kind"], text=event["text"], record=record))
        return run_id, (await runs.show(client, run_id))["transcript"]

    run_id, transcript = await in_asyncio(body)
    if transcript is None:
        if args.json:
            print_json({"run_id": run_id})
        else:
            say(run_id)
        return EXIT_OK
    if args.json:
        print_json(transcript)
    else:
        if transcript.get("final_text"):
            say(transcript["final_text"])
        calls = transcript.get("tool_calls", [])
        denied = sum(1 for call in calls if call["status"] == "denied")
        console.line(
            f"-- stopped: {transcript.get('stop')}; {transcript.get('turns')} model turns,"
            f" {len(calls)} tool calls ({denied} denied) [run {run_id}]"
        )
    stop = transcript.get("stop")
    if stop == "provider_error":
        console.line(f"! provider error: {transcript.get('error')}")
        return EXIT_PROVIDER
    if stop in ("max_turns", "token_budget"):
        return EXIT_INCOMPLETE
    return EXIT_OK if stop == "end_turn" else EXIT_ERROR


# ---------------------------------------------------------------------------- runs


def _config_if_any(args: argparse.Namespace) -> HostConfig | None:
    """The config, for its ``[temporal]`` table, when there is one (``runs`` needs none)."""
    from agenthost.cli.common import config_paths

    return load_config(args) if any(config_paths(args)) else None


async def _runs(args: argparse.Namespace, console: Console) -> int:
    from agenthost.durable import client as runs
    from agenthost.durable.limits import LimitError, check_run_id, check_who

    action = args.runs_action
    try:
        if action != "list":
            check_run_id(args.run_id)
        if action in ("approve", "deny") and args.by is not None:
            check_who(args.by)
    except LimitError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None

    config = _config_if_any(args)
    settings = _settings(args, config)
    key = _key(args, config) if action in ("approve", "deny") else None

    async def body() -> Any:
        client = await _client(settings)
        if action == "list":
            return await runs.list_runs(client)
        if action == "show":
            return await runs.show(client, args.run_id)
        if action == "cancel":
            status = await runs.cancel(client, args.run_id)
            return {"run_id": args.run_id, "status": status}
        who = args.by or getpass.getuser()
        verdict = "allow" if action == "approve" else "deny"
        assert key is not None
        message = await runs.answer(client, args.run_id, args.call_id, verdict, who, key=key)
        return {
            "run_id": args.run_id,
            "call_id": args.call_id,
            "answer": verdict,
            "by": who,
            "message": message,
        }

    out = await in_asyncio(body)
    if args.json:
        print_json(out)
    elif action == "list":
        rows = [
            [
                run["run_id"],
                run["status"],
                "; ".join(
                    f"{w['call_id']}: {w['server']}/{w['tool']} {json.dumps(w['arguments'])}"
                    for w in run["waiting"]
                ),
                run["task"][:60],
            ]
            for run in out
        ]
        say(table(rows, ["RUN", "STATUS", "WAITING FOR", "TASK"]))
    elif action == "show":
        say(f"{out['run_id']}  {out['status']}")
        for waiting in out["waiting"]:
            say(
                f"  waiting: {waiting['call_id']} {waiting['server']}/{waiting['tool']}"
                f" {json.dumps(waiting['arguments'])}"
            )
        transcript = out["transcript"]
        for call in transcript.get("tool_calls", []):
            say(f"  [{call['status']}] {call['name']} {json.dumps(call['arguments'])}")
        if transcript.get("final_text"):
            say(transcript["final_text"])
    elif action == "cancel":
        say(f"{args.run_id} {out['status']}")
        if out["status"] == "running":
            raise CLIError("the run has not ended yet (no worker took the cancel)", EXIT_ERROR)
    else:
        say(out["message"])
    return EXIT_OK
