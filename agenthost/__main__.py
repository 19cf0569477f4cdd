"""``python -m agenthost``: the same as the ``agenthost`` command."""

import sys

from agenthost.cli.app import run

sys.exit(run())
