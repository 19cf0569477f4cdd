"""ServerConfig -> transport -> session: one server without a host.

``async with connect(ServerConfig(...)) as session``. Building a transport from a config
entry lives here, not in ``transports/`` (transports know nothing of config or MCP).
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from agenthost.config import ServerConfig
from agenthost.revisions import LATEST_REVISION
from agenthost.session import ClientHandlers, ClientSession, open_session
from agenthost.transports.base import Transport

__all__ = ["connect", "open_transport"]


def _limit(seconds: float) -> float | None:
    return None if math.isinf(seconds) else seconds


@asynccontextmanager
async def open_transport(config: ServerConfig) -> AsyncIterator[Transport]:
    """Open the transport ``config`` describes (stdio, or a remote one by URL).

    Remote transports are imported only when used: a stdio-only host never pays for
    httpx or trio-websocket at start-up.
    """
    if config.transport == "stdio":
        from agenthost.transports.stdio import open_stdio_transport

        assert config.command is not None
        async with open_stdio_transport(
            config.command,
            config.args,
            name=config.name,
            cwd=config.cwd,
            env=config.env,
            max_message_size=config.max_message_size,
            shutdown_timeout=config.timeouts.shutdown,
        ) as stdio:
            yield stdio
    else:
        from agenthost.transports.remote import open_remote_transport

        async with open_remote_transport(config) as remote:
            yield remote


@asynccontextmanager
async def connect(
    config: ServerConfig,
    *,
    handlers: ClientHandlers | None = None,
    protocol_version: str = LATEST_REVISION,
) -> AsyncIterator[ClientSession]:
    """Start (or reach) one server and yield its initialized session.

    Raises:
        TransportError: the server cannot be started or reached.
        UnsupportedRevision: no MCP revision both sides speak.
        AgentHostTimeout: ``initialize`` took longer than ``timeouts.startup``.

    Resource handling: the server process, or the remote session, is closed when the block
    exits, however it exits.
    """
    async with (
        open_transport(config) as transport,
        open_session(
            transport,
            name=config.name,
            handlers=handlers,
            request_timeout=_limit(config.timeouts.request),
            initialize_timeout=_limit(config.timeouts.startup),
            protocol_version=protocol_version,
        ) as session,
    ):
        yield session


class _ConnectModule(types.ModuleType):
    """This module, callable as :func:`connect`.

    ``agenthost.connect`` is public API as a function, and this module shares its name:
    importing ``agenthost.connect`` binds the module to that attribute of the package.
    Making the module call through keeps ``agenthost.connect(config)`` working whichever
    was imported first.
    """

    def __call__(
        self,
        config: ServerConfig,
        *,
        handlers: ClientHandlers | None = None,
        protocol_version: str = LATEST_REVISION,
    ) -> AbstractAsyncContextManager[ClientSession]:
        return connect(config, handlers=handlers, protocol_version=protocol_version)


sys.modules[__name__].__class__ = _ConnectModule
