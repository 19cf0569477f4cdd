"""The host: servers supervised in one nursery, their catalog, roots and sampling."""

from agenthost.host.host import (
    EventSink,
    Host,
    SamplingRoute,
    open_host,
)

__all__ = [
    "EventSink",
    "Host",
    "SamplingRoute",
    "open_host",
]
