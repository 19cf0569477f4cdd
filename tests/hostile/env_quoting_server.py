"""A stdio "server" that writes the env values it was given to stderr and exits 3.

Why it exists: a server sees every env value the host gives it and can quote any of them
back where the host will show it (its stderr lines are logged, their tail is the
session's ``last_error``). Usage: ``python env_quoting_server.py NAME...`` (the names of
the variables to quote, one stderr line each).
"""

from __future__ import annotations

import os
import sys

for name in sys.argv[1:]:
    sys.stderr.write(f"{name} is {os.environ.get(name, '')}\n")
sys.stderr.flush()
sys.exit(3)
