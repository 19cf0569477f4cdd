"""agenthost's benchmark suite: ``python -m bench`` prints one table against the targets.

Why a package of its own: every client variant runs in a fresh subprocess per round
(:mod:`bench.workers`), so its imports, RSS and CPU time belong to it alone; the parent
(:mod:`bench.__main__`) only schedules rounds (interleaved A B A B ...), takes medians and
renders the table (:mod:`bench.report`). Nothing here runs in the default test suite;
``tests/test_bench_smoke.py`` runs ``python -m bench --quick`` once and never asserts a
timing.
"""

from __future__ import annotations

__all__: list[str] = []
