"""Transports: small channels of JSON-RPC messages that know nothing of MCP sessions."""

from agenthost.transports.base import Transport

__all__ = ["Transport"]
