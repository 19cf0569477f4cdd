"""``agenthost serve``: agenthost as an MCP server (a gateway) in front of its upstreams.

Layers (``docs/architecture.md``): this package sits beside the CLI, on the host's public
API: it never reaches into a session or a connection (tests/test_layers.py holds it to
that), and the host never imports it.

* :mod:`~agenthost.serve.downstream`: the server side of one session (lifecycle, the
  method table, the converter), over :class:`agenthost.rpc.RPC` like the client side;
* :mod:`~agenthost.serve.gateway`: what each method does, through the host;
* :mod:`~agenthost.serve.names`: the one catalog and its names, pagination;
* :mod:`~agenthost.serve.consent`: a rule's "ask" answered through the client;
* :mod:`~agenthost.serve.tasks`: a client's tool call as a task, in either task form;
* :mod:`~agenthost.serve.stdio`: our own stdin/stdout as a transport.

Two API levels (STYLE.md 3): :func:`open_gateway` (an async context manager: the host
and its policy, up) and :func:`serve_stdio` (serve one client until it leaves).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from agenthost._util import collapse_single_group
from agenthost.config.model import HostConfig
from agenthost.host import EventSink, open_host
from agenthost.protocol.types import Root
from agenthost.serve.consent import DownstreamPrompter
from agenthost.serve.downstream import DownstreamSession
from agenthost.serve.gateway import Gateway, SamplingSender
from agenthost.serve.mrtr import Asker, ExchangeStore
from agenthost.serve.routing import sole_client
from agenthost.serve.stdio import StdioServerTransport, serve_until_cut
from agenthost.serve.tasks import GatewayTasks
from agenthost_policies import PolicyConfig, PolicyEngine, parse_policy

__all__ = [
    "DownstreamPrompter",
    "DownstreamSession",
    "Gateway",
    "StdioServerTransport",
    "open_gateway",
    "serve_stdio",
]

log = logging.getLogger("agenthost.serve")


@asynccontextmanager
async def open_gateway(
    config: HostConfig, *, on_event: EventSink | None = None
) -> AsyncIterator[Gateway]:
    """Start the host for ``config`` with the gateway's consent; yield the gateway.

    The policy is the configured one (rules, audit file, approvals), as in the CLI; its
    "ask" goes to the downstream client (:class:`DownstreamPrompter`) unless the policy's
    mode is ``headless``, which asks nobody. An upstream's sampling request goes where
    ``[gateway] sampling`` says (:meth:`Gateway.sampling_route`).

    Resource handling: the upstreams, the audit file and the catalog watcher end with the
    block.
    """
    policy_config = _policy_config(config)
    holder: list[Gateway] = []

    def pick() -> Asker | None:
        return holder[0].asker() if holder else None

    def route(server: str) -> SamplingSender | None:
        return holder[0].sampling_route(server) if holder else None

    async def roots(server: str, offered: list[Root]) -> list[Root]:
        return await holder[0].roots_filter(server, offered) if holder else offered

    prompter = None if policy_config.mode == "headless" else DownstreamPrompter(pick)
    with PolicyEngine.from_config(policy_config, prompter=prompter) as engine:
        async with open_host(
            config, policy=engine, on_event=on_event, sampling_route=route, roots_filter=roots
        ) as host:
            gateway = Gateway(host)
            holder.append(gateway)
            with collapse_single_group():
                async with trio.open_nursery() as nursery:
                    gateway.exchanges = ExchangeStore(nursery)
                    gateway.tasks = GatewayTasks(nursery)
                    nursery.start_soon(gateway.watch_catalog)
                    try:
                        yield gateway
                    finally:
                        nursery.cancel_scope.cancel()


def _policy_config(config: HostConfig) -> PolicyConfig:
    """The ``[policy]`` section, read as :func:`agenthost.host.open_host` reads it."""
    source = config.source or "<config>"
    base_dir = os.path.dirname(os.path.abspath(config.source)) if config.source else None
    return parse_policy(config.policy, source=source, base_dir=base_dir)


async def serve_stdio(gateway: Gateway, *, stdin: int = 0, stdout: int = 1) -> None:
    """Serve the client at the other end of ``stdin``/``stdout`` until it closes them."""
    transport = StdioServerTransport(stdin=stdin, stdout=stdout)
    session = gateway.session(transport)
    # One client: an upstream's ask no call can be tied to can only be its.
    gateway.unattributed = sole_client(session, gateway.exchanges)
    await serve_until_cut(transport, functools.partial(gateway.serve, session))
