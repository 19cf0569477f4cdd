"""agenthost: a Trio-based MCP host.

The public API, importable from here. Names load on first use (PEP 562), so ``import
agenthost`` and ``agenthost --help`` stay fast: nothing pulls in Trio, the LLM SDKs or
httpx until a command needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agenthost._util import lazy_getattr
from agenthost._version import __version__

_EXPORTS: dict[str, str] = {
    # host
    "open_host": "agenthost.host.host",
    "Host": "agenthost.host.host",
    "ServerState": "agenthost.host.supervisor",
    "ServerStatus": "agenthost.host.supervisor",
    "CatalogTool": "agenthost.host.catalog",
    # one server
    "connect": "agenthost.connection",
    "ClientSession": "agenthost.session",
    "ClientHandlers": "agenthost.asks",
    "RequestContext": "agenthost.asks",
    "open_session": "agenthost.connection",
    "AskTaskLimits": "agenthost.ask_tasks",
    # config
    "HostConfig": "agenthost.config.model",
    "ServerConfig": "agenthost.config.model",
    "Workspace": "agenthost.config.model",
    "Timeouts": "agenthost.config.model",
    "RestartPolicy": "agenthost.config.model",
    "load_config": "agenthost.config.loader",
    # agent
    "run_agent": "agenthost.agent.loop",
    "Transcript": "agenthost.agent.transcript",
    "AgentEvent": "agenthost.agent.transcript",
    # sampling
    "SamplingService": "agenthost.host.sampling",
    "SamplingEvent": "agenthost.host.sampling",
    # errors
    "AgentHostError": "agenthost.errors",
    "AgentHostTimeout": "agenthost.errors",
    "AuthorizationError": "agenthost.errors",
    "AmbiguousResource": "agenthost.errors",
    "BackChannelRequired": "agenthost.errors",
    "ConfigError": "agenthost.errors",
    "ConsentDenied": "agenthost.errors",
    "JSONRPCError": "agenthost.errors",
    "NotFound": "agenthost.errors",
    "ProtocolError": "agenthost.errors",
    "ProviderError": "agenthost.errors",
    "RequestUnauthorized": "agenthost.errors",
    "ServerUnavailable": "agenthost.errors",
    "SessionExpired": "agenthost.errors",
    "TransportClosed": "agenthost.errors",
    "TransportError": "agenthost.errors",
    "UnsupportedRevision": "agenthost.errors",
    "UntrustedConfig": "agenthost.errors",
    # revisions
    "SUPPORTED_REVISIONS": "agenthost.protocol.revisions",
    "LATEST_REVISION": "agenthost.protocol.revisions",
}

__all__ = [
    "LATEST_REVISION",
    "SUPPORTED_REVISIONS",
    "AgentEvent",
    "AgentHostError",
    "AgentHostTimeout",
    "AmbiguousResource",
    "AskTaskLimits",
    "AuthorizationError",
    "BackChannelRequired",
    "CatalogTool",
    "ClientHandlers",
    "ClientSession",
    "ConfigError",
    "ConsentDenied",
    "Host",
    "HostConfig",
    "JSONRPCError",
    "NotFound",
    "ProtocolError",
    "ProviderError",
    "RequestContext",
    "RequestUnauthorized",
    "RestartPolicy",
    "SamplingEvent",
    "SamplingService",
    "ServerConfig",
    "ServerState",
    "ServerStatus",
    "ServerUnavailable",
    "SessionExpired",
    "Timeouts",
    "Transcript",
    "TransportClosed",
    "TransportError",
    "UnsupportedRevision",
    "UntrustedConfig",
    "Workspace",
    "__version__",
    "connect",
    "load_config",
    "open_host",
    "open_session",
    "run_agent",
]

if TYPE_CHECKING:
    from agenthost.agent.loop import run_agent
    from agenthost.agent.transcript import AgentEvent, Transcript
    from agenthost.ask_tasks import AskTaskLimits
    from agenthost.asks import ClientHandlers, RequestContext
    from agenthost.config.loader import load_config
    from agenthost.config.model import HostConfig, RestartPolicy, ServerConfig, Timeouts, Workspace
    from agenthost.connection import connect, open_session
    from agenthost.errors import (
        AgentHostError,
        AgentHostTimeout,
        AmbiguousResource,
        AuthorizationError,
        BackChannelRequired,
        ConfigError,
        ConsentDenied,
        JSONRPCError,
        NotFound,
        ProtocolError,
        ProviderError,
        RequestUnauthorized,
        ServerUnavailable,
        SessionExpired,
        TransportClosed,
        TransportError,
        UnsupportedRevision,
        UntrustedConfig,
    )
    from agenthost.host.catalog import CatalogTool
    from agenthost.host.host import Host, open_host
    from agenthost.host.sampling import SamplingEvent, SamplingService
    from agenthost.host.supervisor import ServerState, ServerStatus
    from agenthost.protocol.revisions import LATEST_REVISION, SUPPORTED_REVISIONS
    from agenthost.session import ClientSession


__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(__all__)
