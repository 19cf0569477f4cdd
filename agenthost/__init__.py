"""agenthost: a Trio-based MCP host.

The public API, importable from here. Names load on first use (PEP 562), so ``import
agenthost`` and ``agenthost --help`` stay fast: nothing pulls in Trio, the LLM SDKs or
httpx until a command needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agenthost._util import lazy_getattr

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # host
    "open_host": "agenthost.host",
    "Host": "agenthost.host",
    "ServerState": "agenthost.supervisor",
    "ServerStatus": "agenthost.supervisor",
    "CatalogTool": "agenthost.catalog",
    # one server
    "connect": "agenthost.dial",
    "ClientSession": "agenthost.session",
    "ClientHandlers": "agenthost.session",
    "RequestContext": "agenthost.session",
    "open_session": "agenthost.session",
    "AskTaskLimits": "agenthost.ask_tasks",
    # config
    "HostConfig": "agenthost.config",
    "ServerConfig": "agenthost.config",
    "Workspace": "agenthost.config",
    "Timeouts": "agenthost.config",
    "RestartPolicy": "agenthost.config",
    # agent
    "run_agent": "agenthost.agent",
    "Transcript": "agenthost.agent",
    "AgentEvent": "agenthost.agent",
    # sampling
    "SamplingService": "agenthost.sampling",
    "SamplingEvent": "agenthost.sampling",
    # errors
    "AgentHostError": "agenthost.errors",
    "AgentHostTimeout": "agenthost.errors",
    "AmbiguousResource": "agenthost.errors",
    "BackChannelRequired": "agenthost.errors",
    "ConfigError": "agenthost.errors",
    "ConsentDenied": "agenthost.errors",
    "JSONRPCError": "agenthost.errors",
    "NotFound": "agenthost.errors",
    "ProtocolError": "agenthost.errors",
    "ProviderError": "agenthost.errors",
    "ServerUnavailable": "agenthost.errors",
    "SessionExpired": "agenthost.errors",
    "TransportClosed": "agenthost.errors",
    "TransportError": "agenthost.errors",
    "UnsupportedRevision": "agenthost.errors",
    "UntrustedConfig": "agenthost.errors",
    # revisions
    "SUPPORTED_REVISIONS": "agenthost.revisions",
    "LATEST_REVISION": "agenthost.revisions",
}

__all__ = [
    "LATEST_REVISION",
    "SUPPORTED_REVISIONS",
    "AgentEvent",
    "AgentHostError",
    "AgentHostTimeout",
    "AmbiguousResource",
    "AskTaskLimits",
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
    "open_host",
    "open_session",
    "run_agent",
]

if TYPE_CHECKING:
    from agenthost.agent import AgentEvent, Transcript, run_agent
    from agenthost.ask_tasks import AskTaskLimits
    from agenthost.catalog import CatalogTool
    from agenthost.config import HostConfig, RestartPolicy, ServerConfig, Timeouts, Workspace
    from agenthost.dial import connect
    from agenthost.errors import (
        AgentHostError,
        AgentHostTimeout,
        AmbiguousResource,
        BackChannelRequired,
        ConfigError,
        ConsentDenied,
        JSONRPCError,
        NotFound,
        ProtocolError,
        ProviderError,
        ServerUnavailable,
        SessionExpired,
        TransportClosed,
        TransportError,
        UnsupportedRevision,
        UntrustedConfig,
    )
    from agenthost.host import Host, open_host
    from agenthost.revisions import LATEST_REVISION, SUPPORTED_REVISIONS
    from agenthost.sampling import SamplingEvent, SamplingService
    from agenthost.session import ClientHandlers, ClientSession, RequestContext, open_session
    from agenthost.supervisor import ServerState, ServerStatus


__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(__all__)
