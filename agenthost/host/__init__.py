"""The host: servers supervised in one nursery, their catalog, roots and sampling."""

from agenthost.host.host import (
    EventSink,
    Host,
    RootsFilter,
    SamplingRoute,
    open_host,
)

__all__ = [
    "EventSink",
    "Host",
    "RootsFilter",
    "SamplingRoute",
    "open_host",
]
