"""How a server's ``notifications/message`` reach Python logging.

One logger per server (``agenthost.server.NAME``, made by the session): Python never
frees a logger, so a logger per server-chosen name would be a leak (issue 14: 200k
names were 200k loggers, 153 MiB). The server's own logger name goes in the record
(``mcp_logger``) and the text, cut to a bound; the RFC 5424 levels map onto Python's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import orjson

__all__ = ["log_server_message"]

#: The longest server logger name kept in a log record.
_LOGGER_NAME_MAX: Final = 200
#: ``notifications/message`` levels (RFC 5424 names) -> Python logging levels.
_LOG_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def log_server_message(logger: logging.Logger, params: Mapping[str, Any]) -> None:
    """Log one ``notifications/message`` on the server's ``logger``."""
    level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
    if not logger.isEnabledFor(level):
        return
    named = params.get("logger")
    name = str(named)[:_LOGGER_NAME_MAX] if named is not None else None
    logger.log(
        level,
        "%s%s",
        f"[{name}] " if name else "",
        _render(params.get("data")),
        extra={"mcp_logger": name},
    )


def _render(data: Any) -> str:
    if isinstance(data, str):
        return data
    try:
        return orjson.dumps(data).decode()
    except TypeError:
        return repr(data)
