"""The host: servers supervised in one nursery, their catalog, roots and sampling."""

from agenthost.host.handlers import SERVER_ASK, RootsFilter, SamplingRoute
from agenthost.host.host import EventSink, Host, open_host

__all__ = [
    "SERVER_ASK",
    "EventSink",
    "Host",
    "RootsFilter",
    "SamplingRoute",
    "open_host",
]
