"""The exit code each failure of a command maps to (agenthost.cli.exit.failure).

Pure: exceptions in, ``(message, code)`` out, no process or event loop.
"""

from __future__ import annotations

import pytest

from agenthost.cli.exit import (
    EXIT_CODES,
    EXIT_DENIED,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_PROVIDER,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    CLIError,
    failure,
)
from agenthost.errors import (
    AgentHostError,
    AgentHostTimeout,
    AmbiguousResource,
    ConfigError,
    ConsentDenied,
    JSONRPCError,
    NotFound,
    ProviderError,
    ServerUnavailable,
    TransportClosed,
    TransportError,
)


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            CLIError("usage: skills show SERVER NAME", EXIT_USAGE),
            ("usage: skills show SERVER NAME", 2),
        ),
        (CLIError("interrupted", EXIT_INTERRUPTED), ("interrupted", 130)),
        (ConfigError("bad key"), ("config error: bad key", EXIT_USAGE)),
        (
            ConsentDenied("no rule allowed it"),
            ("denied by policy: no rule allowed it", EXIT_DENIED),
        ),
        (ProviderError("rate limited"), ("provider error: rate limited", EXIT_PROVIDER)),
        (TransportError("broken pipe"), ("broken pipe", EXIT_UNAVAILABLE)),
        (TransportClosed("closed"), ("closed", EXIT_UNAVAILABLE)),
        (NotFound("no server named 'x'"), ("no server named 'x'", EXIT_USAGE)),
        (
            AmbiguousResource("two servers", uri="a://b", servers=("s1", "s2")),
            ("two servers", EXIT_USAGE),
        ),
        (JSONRPCError(-32602, "bad params", server="fs"), ("fs: bad params", EXIT_ERROR)),
        (AgentHostTimeout("timed out", server="fs"), ("fs: timed out", EXIT_ERROR)),
        (AgentHostError("something"), ("something", EXIT_ERROR)),
        (KeyboardInterrupt(), ("interrupted", EXIT_INTERRUPTED)),
    ],
)
def test_each_failure_has_one_line_and_one_code(
    exc: BaseException, expected: tuple[str, int]
) -> None:
    assert failure(exc) == expected


def test_a_server_that_went_away_is_unavailable_not_a_tool_error() -> None:
    """ServerUnavailable is a JSONRPCError (code -32000), yet no peer answered: exit 5,
    and the message is the server's words without the code."""
    exc = ServerUnavailable("process exited", server="fs")
    assert failure(exc) == ("fs: process exited", EXIT_UNAVAILABLE)


@pytest.mark.parametrize("exc", [ValueError("a bug"), SystemExit(2), RuntimeError()])
def test_anything_else_is_not_ours_to_report(exc: BaseException) -> None:
    assert failure(exc) is None


def test_exit_codes_are_the_documented_table() -> None:
    assert EXIT_CODES == {
        "done": 0,
        "error": 1,
        "usage": 2,
        "denied": 3,
        "provider": 4,
        "unavailable": 5,
        "incomplete": 6,
        "interrupted": 130,
    }
