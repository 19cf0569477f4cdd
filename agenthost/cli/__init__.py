"""The ``agenthost`` command line."""

from agenthost.cli.app import (
    EXIT_CODES,
    main,
    run,
    safe,
    say,
)

__all__ = [
    "EXIT_CODES",
    "main",
    "run",
    "safe",
    "say",
]
