"""Exit codes of the ``agenthost`` command line, and the failure each one reports.

===  ===============================================================
0    done
1    the tool/agent reported an error (isError result, failed call)
2    usage or configuration error (the message names file, key, problem)
3    denied by policy (consent said no; in headless mode, no rule allowed it)
4    LLM provider error
5    a server could not be started or reached
6    the agent stopped before finishing (--max-turns or --token-budget)
130  interrupted (Ctrl-C)
===  ===============================================================

A name that does not exist (server, tool, prompt, resource) and a missing or malformed
argument are usage errors (2), whichever command meets them. The mapping from the
library's exceptions lives here, in one place, so every command exits the same way for
the same failure.
"""

from __future__ import annotations

__all__ = [
    "EXIT_CODES",
    "EXIT_DENIED",
    "EXIT_ERROR",
    "EXIT_INCOMPLETE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PROVIDER",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "CLIError",
    "failure",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_DENIED = 3
EXIT_PROVIDER = 4
EXIT_UNAVAILABLE = 5
EXIT_INCOMPLETE = 6
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    "done": EXIT_OK,
    "error": EXIT_ERROR,
    "usage": EXIT_USAGE,
    "denied": EXIT_DENIED,
    "provider": EXIT_PROVIDER,
    "unavailable": EXIT_UNAVAILABLE,
    "incomplete": EXIT_INCOMPLETE,
    "interrupted": EXIT_INTERRUPTED,
}


class CLIError(Exception):
    """A failure to report in one line, with the exit code to use."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def failure(exc: BaseException) -> tuple[str, int] | None:
    """The one-line message and exit code for a command's failure.

    Returns:
        ``None`` for an exception that is not a failure to report (a bug, ``SystemExit``):
        the caller re-raises it.
    """
    from agenthost.errors import (
        AgentHostError,
        ConfigError,
        ConsentDenied,
        JSONRPCError,
        NotFound,
        ProviderError,
        ServerUnavailable,
        TransportError,
    )

    if isinstance(exc, CLIError):
        return str(exc), exc.code
    if isinstance(exc, ConfigError):
        return f"config error: {exc}", EXIT_USAGE
    if isinstance(exc, ConsentDenied):
        return f"denied by policy: {exc}", EXIT_DENIED
    if isinstance(exc, ProviderError):
        return f"provider error: {exc}", EXIT_PROVIDER
    if isinstance(exc, ServerUnavailable | TransportError):
        return str(exc), EXIT_UNAVAILABLE
    if isinstance(exc, NotFound):
        return str(exc), EXIT_USAGE
    if isinstance(exc, JSONRPCError):
        return exc.text, EXIT_ERROR
    if isinstance(exc, AgentHostError):
        return str(exc), EXIT_ERROR
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", EXIT_INTERRUPTED
    return None
