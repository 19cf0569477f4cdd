"""Transports: small channels of JSON-RPC messages that know nothing of MCP sessions."""

from agenthost.transports.base import Transport
from agenthost.transports.http import StreamableHTTPTransport, open_streamable_http_transport
from agenthost.transports.legacy_sse import LegacySSETransport, open_legacy_sse_transport
from agenthost.transports.remote import ProbingTransport, open_http_transport, open_remote_transport
from agenthost.transports.sse import ServerSentEvent, SSEParser
from agenthost.transports.websocket import WebSocketTransport, open_websocket_transport

__all__ = [
    "LegacySSETransport",
    "ProbingTransport",
    "SSEParser",
    "ServerSentEvent",
    "StreamableHTTPTransport",
    "Transport",
    "WebSocketTransport",
    "open_http_transport",
    "open_legacy_sse_transport",
    "open_remote_transport",
    "open_streamable_http_transport",
    "open_websocket_transport",
]
