"""``python -m agenthost``: the same as the ``agenthost`` command."""

import sys

from agenthost.cli import main

sys.exit(main())
