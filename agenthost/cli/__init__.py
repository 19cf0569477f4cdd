"""The ``agenthost`` command line."""

from agenthost.cli.app import main, run
from agenthost.cli.exit import EXIT_CODES
from agenthost.cli.render import safe, say

__all__ = [
    "EXIT_CODES",
    "main",
    "run",
    "safe",
    "say",
]
