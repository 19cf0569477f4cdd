"""``python -m agenthost``: the same as the ``agenthost`` command."""

import sys

from agenthost.cli import run

sys.exit(run())
