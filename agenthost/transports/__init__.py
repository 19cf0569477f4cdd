"""Transports: small channels of JSON-RPC messages that know nothing of MCP sessions.

Names load on first use: a stdio-only host never imports httpx or trio-websocket.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agenthost._util import lazy_getattr
from agenthost.transports.base import Transport

_LAZY = {
    "StreamableHTTPTransport": "agenthost.transports.http",
    "open_streamable_http_transport": "agenthost.transports.http",
    "LegacySSETransport": "agenthost.transports.legacy_sse",
    "open_legacy_sse_transport": "agenthost.transports.legacy_sse",
    "ProbingTransport": "agenthost.transports.probing",
    "open_http_transport": "agenthost.transports.probing",
    "ServerSentEvent": "agenthost.protocol.sse",
    "SSEParser": "agenthost.protocol.sse",
    "WebSocketTransport": "agenthost.transports.websocket",
    "open_websocket_transport": "agenthost.transports.websocket",
    "MemoryTransport": "agenthost.transports.memory",
    "memory_transport_pair": "agenthost.transports.memory",
    "StdioTransport": "agenthost.transports.stdio",
    "open_stdio_transport": "agenthost.transports.stdio",
}

if TYPE_CHECKING:
    from agenthost.protocol.sse import ServerSentEvent, SSEParser
    from agenthost.transports.http import StreamableHTTPTransport, open_streamable_http_transport
    from agenthost.transports.legacy_sse import LegacySSETransport, open_legacy_sse_transport
    from agenthost.transports.memory import MemoryTransport, memory_transport_pair
    from agenthost.transports.probing import ProbingTransport, open_http_transport
    from agenthost.transports.stdio import StdioTransport, open_stdio_transport
    from agenthost.transports.websocket import WebSocketTransport, open_websocket_transport

__all__ = [
    "LegacySSETransport",
    "MemoryTransport",
    "ProbingTransport",
    "SSEParser",
    "ServerSentEvent",
    "StdioTransport",
    "StreamableHTTPTransport",
    "Transport",
    "WebSocketTransport",
    "memory_transport_pair",
    "open_http_transport",
    "open_legacy_sse_transport",
    "open_stdio_transport",
    "open_streamable_http_transport",
    "open_websocket_transport",
]


__getattr__ = lazy_getattr(__name__, _LAZY)
