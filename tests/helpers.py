"""Shared test helpers: a transport wrapper that records what agenthost sends, a host
whose LLM provider is Anthropic's API answered by an ``httpx2.MockTransport``, the
handlers that answer a server's asks like a user would, and the CLI as a subprocess.

Why here: a helper used by more than one test module lives in this module, so no test
module imports another (tests/test_hygiene.py keeps it so).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import orjson
import trio

from agenthost.asks import ClientHandlers, RequestContext
from agenthost.config.model import HostConfig, ServerConfig, Timeouts
from agenthost.connection import open_remote_transport
from agenthost.host.host import Host, open_host
from agenthost.protocol import jsonrpc
from agenthost.protocol.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ListRootsResult,
    Root,
    TextContent,
)
from agenthost.protocol.types.tasks import Task
from agenthost.session import ClientSession
from agenthost.tool_tasks import call_tool_as_task
from agenthost.transports.base import NO_OPTIONS, SendOptions, Transport
from agenthost.transports.probing import ProbingTransport
from agenthost.transports.stdio import open_stdio_transport
from agenthost.transports.websocket import WebSocketTransport
from agenthost_providers.config import build_provider, parse_providers
from tests.forkserver import peer_python
from tests.peers.http_launch import EVERYTHING, PEERS, PY, bind_localhost_preload, free_port, serve
from tests.providers.providers_helpers import anthropic_message
from tests.schemacheck import validate_outgoing

if TYPE_CHECKING:
    import pexpect

Command = tuple[str, list[str]]
"""``(command, args)``: what a stdio ``ServerConfig`` takes."""

#: The CLI as a subprocess, forked warm by the suite's fork server (tests/forkserver.py).
AGENTHOST = [peer_python(), "-m", "agenthost"]
#: The CLI started cold, for a test that looks at its process tree (its children by
#: parent pid): through the fork server the CLI is not the launcher's child.
AGENTHOST_COLD = [sys.executable, "-m", "agenthost"]
REPO = Path(__file__).resolve().parents[1]


class RecordingTransport(Transport):
    """Wraps a transport; keeps every message sent, and the methods of requests received.

    ``assert_valid()`` then validates everything agenthost sent against the negotiated
    revision's schema.json: the acceptance check that what we send fits the revision.
    """

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.name = inner.name
        self.serialises = inner.serialises
        #: Every message sent, as the JSON the peer reads (a pre-serialised fragment in
        #: one, the 2026-07-28 stamp, decoded like the rest).
        self.sent: list[dict[str, Any]] = []
        #: The options each message was sent with (same order as ``sent``).
        self.options: list[SendOptions] = []
        self.request_methods: dict[Any, str] = {}
        #: Every message received (responses included), as JSON objects.
        self.received: list[dict[str, Any]] = []
        self.revision: str | None = None

    async def send(
        self,
        message: jsonrpc.Message,
        *,
        deadline: float = math.inf,
        options: SendOptions = NO_OPTIONS,
    ) -> None:
        self.sent.append(orjson.loads(jsonrpc.encode(message)))
        self.options.append(options)
        await self.inner.send(message, deadline=deadline, options=options)

    def abort(self, request_id: jsonrpc.RequestId) -> None:
        self.inner.abort(request_id)

    @property
    def exchanges_per_request(self) -> bool:
        return self.inner.exchanges_per_request

    async def receive(self) -> jsonrpc.Message:
        message = await self.inner.receive()
        self.received.append(jsonrpc.to_object(message))
        if isinstance(message, jsonrpc.Request):
            self.request_methods[message.id] = message.method
        return message

    async def aclose(self) -> None:
        await self.inner.aclose()

    def set_protocol_version(self, version: str) -> None:
        self.revision = version
        self.inner.set_protocol_version(version)

    def methods_sent(self) -> list[str]:
        return [m["method"] for m in self.sent if "method" in m]

    def assert_valid(self, revision: str | None = None) -> int:
        """Validate every sent message; returns how many were checked."""
        rev = revision or self.revision
        assert rev is not None, "no revision negotiated"
        for message in self.sent:
            answers = None
            if "result" in message:
                answers = self.request_methods.get(message["id"])
            validate_outgoing(message, rev, answers_method=answers)
        return len(self.sent)


class WireTransport(Transport):
    """Wraps an in-memory transport so that what crosses it is what a pipe would carry:
    each message sent is serialised and decoded again before the peer gets it. Why: the
    client's stdio short paths (the 2026-07-28 stamp spliced as bytes) apply only to a
    transport that serialises, and this one lets a scripted peer with a mock clock
    drive them."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.name = inner.name

    async def send(
        self,
        message: jsonrpc.Message,
        *,
        deadline: float = math.inf,
        options: SendOptions = NO_OPTIONS,
    ) -> None:
        (decoded,) = jsonrpc.decode(jsonrpc.encode(message))
        await self.inner.send(decoded, deadline=deadline, options=options)

    async def receive(self) -> jsonrpc.Message:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def set_protocol_version(self, version: str) -> None:
        self.inner.set_protocol_version(version)


#: A policy for tests that exercise something other than consent: headless, and the
#: preset whose name says it allows everything.
ALLOW_ALL: dict[str, Any] = {"mode": "headless", "preset": "unsafe-allow-everything"}


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as dead: it has exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


#: The environment of a host with a mocked Anthropic API: a key, so the provider is set up.
ANTHROPIC_ENV = {"ANTHROPIC_API_KEY": "test-key"}


@asynccontextmanager
async def host_with_anthropic(
    servers: list[ServerConfig],
    policy: dict[str, Any],
    api: Callable[[httpx2.Request], httpx2.Response],
    *,
    prompter: Any = None,
    events: list[Any] | None = None,
) -> AsyncIterator[Host]:
    """A host whose one provider is Anthropic's, the Messages API answered by ``api``.

    Only the LLM's HTTP API is mocked (``httpx2.MockTransport``): the servers, the host, the
    consent engine, model selection and the Anthropic SDK run for real. ``events`` collects
    the host's events (``on_event``).
    """
    table = {"anthropic": {"kind": "anthropic"}}
    async with host_with_provider(
        servers, policy, api, table, ANTHROPIC_ENV, prompter=prompter, events=events
    ) as host:
        yield host


@asynccontextmanager
async def host_with_provider(
    servers: list[ServerConfig],
    policy: dict[str, Any],
    api: Callable[[httpx2.Request], httpx2.Response],
    table: dict[str, Any],
    env: dict[str, str],
    *,
    prompter: Any = None,
    events: list[Any] | None = None,
    **config: Any,
) -> AsyncIterator[Host]:
    """A host whose one provider is ``table``'s (``{name: {...}}``, as ``[providers]``
    holds it), its HTTP API answered by ``api``; see :func:`host_with_anthropic`.
    ``config``: more :class:`HostConfig` fields (``agent=...``)."""
    (name,) = table
    providers_config = parse_providers(table, source="<test>")
    provider = build_provider(
        providers_config.providers[0],
        env,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api)),
    )
    host_config = HostConfig(servers=servers, providers=table, policy=policy, **config)
    try:
        async with open_host(
            host_config,
            providers={name: provider},
            env=env,
            prompter=prompter,
            on_event=events.append if events is not None else None,
        ) as host:
            yield host
    finally:
        await provider.aclose()


async def wait_for_tool(host: Host, name: str, timeout: float = 5) -> None:
    """Wait (at most ``timeout``) until ``name`` is in the host's catalog: a server's
    tools arrive in the background; the catalog says when, no polling timer."""
    with trio.fail_after(timeout):
        await host.catalog.wait_for(lambda catalog: catalog.tool(name) is not None)


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


class FakeAnthropic:
    """The Messages API as MockTransport: answers with real-shaped payloads, records bodies."""

    def __init__(self, answer: str = "Paris is the capital of France.") -> None:
        self.answer = answer
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        return anthropic_message(
            [{"type": "text", "text": self.answer}],
            model=body["model"],
            usage={"input_tokens": 21, "output_tokens": 9},
        )


def initialize_request(
    name: str = "raw", *, request_id: int = 1, revision: str = "2025-06-18"
) -> dict[str, Any]:
    """A raw ``initialize`` request, as a test client that speaks JSON-RPC by hand writes it."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": revision,
            "capabilities": {},
            "clientInfo": {"name": name, "version": "1"},
        },
    }


#: The ``Accept`` header a Streamable HTTP client sends with every POST.
ACCEPT: dict[str, str] = {"accept": "application/json, text/event-stream"}


def check_ts_progress(seen: dict[str, Any], expected: list[int]) -> None:
    """The TypeScript SDK client's record (tests/peers/ts_client.mjs) of a call's progress.

    The gateway's promise is the wire: every notification, in order, before the answer
    (``seen["wire"]``). What the SDK passed to ``onprogress`` (``seen["progress"]``) may
    lack the last ones: it runs a notification's handler a microtask after reading it
    but settles the response at once, dropping the call's progress handler, so progress
    read in the same chunk as the answer is dropped by the SDK itself. What it did see
    is still the first of them, in order.
    """
    assert seen["wire"] == expected, seen
    given = seen["progress"]
    assert given and given == expected[: len(given)], seen


def host_with(
    servers: list[ServerConfig],
    policy: dict[str, Any],
    *,
    fake: FakeAnthropic | None = None,
    prompter: Any = None,
    events: list[Any] | None = None,
) -> AbstractAsyncContextManager[Host]:
    api = fake or FakeAnthropic()
    return host_with_anthropic(servers, policy, api, prompter=prompter, events=events)


def stdio(name: str, cmd: Command, **kwargs: Any) -> ServerConfig:
    return ServerConfig(name=name, transport="stdio", command=cmd[0], args=tuple(cmd[1]), **kwargs)


def sampling_policy(tmp_path: Path, **limits: Any) -> dict[str, Any]:
    return {
        "mode": "headless",
        "audit": str(tmp_path / "audit.jsonl"),
        "rules": [
            {"kind": "tool", "decision": "allow", "server": "*", "name": "*"},
            {"kind": "roots", "decision": "allow", "server": "*"},
            {"kind": "sampling", "decision": "allow", "server": "*", "review": "auto", **limits},
        ],
    }


class Recorder:
    """Handlers that answer like a user/LLM would, and remember what they were asked."""

    def __init__(self) -> None:
        self.sampling: list[CreateMessageRequestParams] = []
        self.elicitations: list[ElicitRequestParams] = []
        self.updated: list[str] = []
        self.tools_changed = 0

    async def on_sampling(
        self, ctx: RequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        self.sampling.append(params)
        first = params.messages[0].content
        assert isinstance(first, TextContent)
        return CreateMessageResult(
            role="assistant",
            content=TextContent(text=f"sampled: {first.text}"),
            model="test-model",
            stop_reason="endTurn",
        )

    async def on_roots(self, ctx: RequestContext, params: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri="file:///srv/work%20space", name="work")])

    async def on_elicit(self, ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.elicitations.append(params)
        if params.mode == "url":
            return ElicitResult(action="accept")
        return ElicitResult(action="accept", content={"name": "Ada", "age": 36})

    async def on_updated(self, ctx: RequestContext, params: Any) -> None:
        self.updated.append(params["uri"])

    async def on_tools_changed(self, ctx: RequestContext, params: Any) -> None:
        self.tools_changed += 1

    def handlers(self) -> ClientHandlers:
        return ClientHandlers(
            roots=self.on_roots,
            sampling=self.on_sampling,
            elicitation=self.on_elicit,
            notifications={
                "notifications/resources/updated": self.on_updated,
                "notifications/tools/list_changed": self.on_tools_changed,
            },
        )


class ContextRecorder(Recorder):
    """A Recorder that also keeps the RequestContext of every ask."""

    def __init__(self) -> None:
        super().__init__()
        self.contexts: list[Any] = []

    async def on_sampling(self, ctx: Any, params: Any) -> Any:
        self.contexts.append(ctx)
        return await super().on_sampling(ctx, params)

    async def on_roots(self, ctx: Any, params: Any) -> Any:
        self.contexts.append(ctx)
        return await super().on_roots(ctx, params)

    async def on_elicit(self, ctx: Any, params: Any) -> Any:
        self.contexts.append(ctx)
        return await super().on_elicit(ctx, params)


def comparable_audit(record: dict[str, Any]) -> dict[str, Any]:
    """An audit line without what differs between two runs (time, ids, durations) and
    without ``via`` (which only an MRTR ask has: it is checked separately)."""
    drop = {"ts", "id", "duration", "via"}
    return {key: value for key, value in record.items() if key not in drop}


def run_cli(config: Path, *args: str, timeout: float = 60) -> tuple[int, Any, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.run(
        [*AGENTHOST, "--config", str(config), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )
    data = json.loads(proc.stdout) if proc.stdout.strip() else None
    return proc.returncode, data, proc.stderr


async def cancel_once_running(session: ClientSession, tool: str, limit: float) -> None:
    """Call ``tool`` as a task and cancel the call once the task has a first status."""
    started = trio.Event()

    async def on_status(task: Task) -> None:
        started.set()

    async with trio.open_nursery() as nursery:

        async def call() -> None:
            await call_tool_as_task(session, tool, {"topic": "x"}, on_status=on_status)

        nursery.start_soon(call)
        with trio.fail_after(limit):
            await started.wait()
        nursery.cancel_scope.cancel()


#: The transports the interop suites run their peers over (their ``transport`` parameter).
PEER_TRANSPORTS = ("stdio", "streamable-http", "sse", "websocket")


def _remote(kind: str, url: str) -> AbstractAsyncContextManager[Transport]:
    config = ServerConfig(
        name="remote",
        transport=kind,  # type: ignore[arg-type]
        url=url,
        timeouts=Timeouts(connect=5.0, shutdown=2.0),
    )
    return open_remote_transport(config)


@asynccontextmanager
async def open_sdk_peer(
    transport: str, cmd: Command, env: dict[str, str] | None = None
) -> AsyncIterator[Transport]:
    """The official-SDK peer (tests/peers/sdk_server.py) reached over ``transport``.

    stdio runs ``cmd``; the HTTP transports run the peer in that mode on a free port and
    connect from a plain URL (transport "http"), so the probe must pick the transport the
    peer speaks; "websocket" runs the stdio peer behind tests/peers/ws_bridge.py.
    """
    if transport == "stdio":
        async with open_stdio_transport(cmd[0], cmd[1], name="sdk", env=env) as stdio:
            yield stdio
        return
    port = free_port()
    if transport == "websocket":
        argv = [PY, str(PEERS / "ws_bridge.py"), "--port", str(port), "--", peer_python()]
        argv.append(str(PEERS / "sdk_server.py"))
        argv.append("stdio")
        config = ServerConfig(name="sdk", transport="websocket", url=f"ws://127.0.0.1:{port}/")
        async with serve(argv, port, env=env), open_remote_transport(config) as ws:
            assert isinstance(ws, WebSocketTransport)
            assert ws.subprotocol == "mcp"
            yield ws
        return
    path = {"streamable-http": "/mcp", "sse": "/sse"}[transport]
    argv = [peer_python(), str(PEERS / "sdk_server.py"), transport, "--port", str(port)]
    url = f"http://127.0.0.1:{port}{path}"
    async with serve(argv, port, env=env), _remote("http", url) as probing:
        assert isinstance(probing, ProbingTransport)
        yield probing
        assert probing.kind == transport


@asynccontextmanager
async def open_everything_peer(
    transport: str, cmd: Command, preload_dir: Path
) -> AsyncIterator[Transport]:
    """``@modelcontextprotocol/server-everything`` over stdio (``cmd``) or HTTP.

    Over HTTP it runs in that mode on a free port, bound to 127.0.0.1 by a preload
    (node takes no host setting), and is reached from a plain URL through the probe.
    """
    if transport == "stdio":
        async with open_stdio_transport(cmd[0], cmd[1], name="everything") as stdio:
            yield stdio
        return
    port = free_port()
    mode, path = {"streamable-http": ("streamableHttp", "/mcp"), "sse": ("sse", "/sse")}[transport]
    preload = bind_localhost_preload(preload_dir)
    argv = ["node", "--require", str(preload), str(EVERYTHING / "index.js"), mode]
    url = f"http://127.0.0.1:{port}{path}"
    async with serve(argv, port, env={"PORT": str(port)}), _remote("http", url) as probing:
        assert isinstance(probing, ProbingTransport)
        yield probing
        assert probing.kind == transport


#: Seconds a chat on a pseudo-terminal may take for each expected output.
CHAT_TIMEOUT = 30
#: prompt_toolkit turns bracketed paste on when the prompt is ready for input.
CHAT_READY = "\x1b[?2004h"


def spawn_chat(config: Path, *, env: dict[str, str], cwd: Path) -> pexpect.spawn[str]:
    """``agenthost --config CONFIG chat`` on a pseudo-terminal, returned once it reads input.

    The child is closed if it never gets there, so a failing test leaves no chat behind.
    """
    import pexpect

    child = pexpect.spawn(
        sys.executable,
        ["-m", "agenthost", "--config", str(config), "chat"],
        env=env,
        cwd=str(cwd),
        encoding="utf-8",
        timeout=CHAT_TIMEOUT,
        dimensions=(40, 200),
    )
    try:
        child.expect("agenthost chat: /help")
        child.expect_exact(CHAT_READY)
    except BaseException:
        child.close(force=True)
        raise
    return child


def _messages_sse(message: dict[str, Any]) -> bytes:
    """A Messages API answer as the stream of events the API sends for ``stream: true``."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": usage["input_tokens"], "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start})]
    for index, block in enumerate(message["content"]):
        first: dict[str, Any]
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            first = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(("content_block_start", {"index": index, "content_block": first}))
        events.append(("content_block_delta", {"index": index, "delta": delta}))
        events.append(("content_block_stop", {"index": index}))
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append(
        ("message_delta", {"delta": stop, "usage": {"output_tokens": usage["output_tokens"]}})
    )
    events.append(("message_stop", {}))
    return b"".join(
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()
        for name, data in events
    )


class MessagesServer:
    """Anthropic's Messages API on a real local port, for the CLI as a subprocess.

    ``answers`` are Messages API response bodies' ``content`` lists, given in order; every
    request body is kept in ``bodies``. Each answer bills ``usage`` (as the API reports
    it), so a test can check the cost the CLI computes from the catalog's prices. Use as a
    context manager; ``base_url`` goes in ``[providers.NAME] base_url``.
    """

    def __init__(
        self, answers: list[list[dict[str, Any]]], *, usage: dict[str, int] | None = None
    ) -> None:
        import http.server
        import threading

        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []
        self.usage = usage or {"input_tokens": 1000, "output_tokens": 200}
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                owner.bodies.append(body)
                content = owner.answers.pop(0) if owner.answers else [{"type": "text", "text": "?"}]
                uses = any(block["type"] == "tool_use" for block in content)
                payload = {
                    "id": f"msg_{len(owner.bodies):04d}",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": content,
                    "stop_reason": "tool_use" if uses else "end_turn",
                    "stop_sequence": None,
                    "usage": owner.usage,
                }
                if body.get("stream"):
                    data = _messages_sse(payload)
                    kind = "text/event-stream"
                else:
                    data, kind = json.dumps(payload).encode(), "application/json"
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> MessagesServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def cli_with_anthropic_key(
    tmp_path: Path, config: Path, *args: str, stdin: str | None = None
) -> Any:
    """The CLI as a subprocess with a fake Anthropic key and ``tmp_path`` as its home and
    XDG dirs (the runs talk to a local Messages API: :class:`MessagesServer`)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        ANTHROPIC_API_KEY="test-key",
        HOME=str(tmp_path),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
    )
    return subprocess.run(
        [*AGENTHOST, "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=100,
        env=env,
        cwd=REPO,
        input=stdin,
    )


class ServedHttp:
    """A running ``agenthost serve --http``: its URL, the process, the stderr lines read
    up to "serving MCP at" (the next one says how clients authenticate)."""

    def __init__(self, url: str, proc: subprocess.Popen[str], lines: list[str]) -> None:
        self.url = url
        self.proc = proc
        self.lines = lines

    def next_line(self) -> str:
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        self.lines.append(line)
        return line


@contextmanager
def serving_http(
    config: Path, *args: str, bind: str = "127.0.0.1:0", env: dict[str, str] | None = None
) -> Iterator[ServedHttp]:
    """``agenthost --config CONFIG serve --http BIND ARGS`` (started cold: the test may look
    at its children), until the block ends (then killed)."""
    import re
    import time

    proc = subprocess.Popen(
        [*AGENTHOST_COLD, "--config", str(config), "serve", "--http", bind, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        lines: list[str] = []
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            found = re.search(r"serving MCP at (http://\S+/mcp)", line)
            if found:
                yield ServedHttp(found.group(1), proc, lines)
                break
            if not line and proc.poll() is not None:
                raise AssertionError(f"serve exited: {''.join(lines)}")
        else:
            raise AssertionError(f"serve did not start: {''.join(lines)}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
