"""The host: servers supervised in one nursery, their catalog, roots and sampling."""

from agenthost.host.handlers import RootsFilter, SamplingRoute
from agenthost.host.host import EventSink, Host, open_host

__all__ = [
    "EventSink",
    "Host",
    "RootsFilter",
    "SamplingRoute",
    "open_host",
]
