"""The benchmark's one table: each figure, what it is compared with, its target, PASS/MISS.

Why separate: the table is the benchmark's product (printed, and written as markdown to
``bench/RESULTS.md`` for the README), and its rows are data the parent fills in; keeping
the rendering apart keeps :mod:`bench.__main__` about scheduling and measuring.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

__all__ = ["TITLE", "Row", "render_markdown", "render_text", "row_names"]

TITLE = "agenthost benchmark"


def row_names(
    fanout: Sequence[int] = (1, 10, 50),
    large: Sequence[float] = (1, 8, 32),
    soak: int = 1_000_000,
) -> list[str]:
    """Every row's name, in table order, for the given fan-out sizes, large-result sizes
    (MiB) and soak length (the smoke test checks that each is printed)."""
    sizes = "/".join(f"{mb:g}" for mb in large)
    mid = f"{sorted(large)[len(large) // 2]:g}"
    return [
        "stdio calls/s sequential",
        "stdio calls/s 64 in flight",
        "stdio calls/s sequential, MCP 2026-07-28",
        "stdio calls/s 64 in flight, MCP 2026-07-28",
        "stdio calls/s sequential, SDK",
        "stdio calls/s 64 in flight, SDK",
        "stdio calls/s sequential, one CPU",
        "stdio latency p50 sequential",
        "stdio latency p99 sequential",
        "stdio client CPU/call sequential",
        "stdio client CPU/call 64 in flight",
        "stdio wake-ups/call client/server (server CPU), 64 in flight",
        *(
            f"HTTP {mode} calls/s, {n} in flight, {ref}"
            for mode in ("JSON", "SSE")
            for n in (1, 64)
            for ref in ("SDK", "TS", "floor", "client CPU/call")
        ),
        *(
            name
            for transport in ("stdio", "SSE")
            for name in (
                f"{transport} result {sizes} MiB: time",
                f"{transport} result {sizes} MiB: peak RSS",
                f"{transport} result {mid} MiB: client CPU",
            )
        ),
        "1 MiB argument: time",
        "1 MiB argument: peak RSS",
        "stdio session close",
        'era probe on a legacy server: connect, "auto" vs "legacy"',
        "one-call process wall time",
        "one-call process peak RSS",
        "tools process wall time",
        "tools process peak RSS",
        *(f"fan-out ready, {n} server{'s' if n > 1 else ''}" for n in fanout),
        f"fan-out client RSS per session, {max(fanout)}",
        "sampling overhead in (p50/p99)",
        "sampling overhead out (p50/p99)",
        *(
            f"gateway calls/s, {n} in flight, {route}"
            for route in ("serve (stdio)", "serve --http")
            for n in (1, 64)
        ),
        "gateway CPU/call, serve (stdio)",
        "gateway CPU/call, serve --http",
        f"soak {soak:,} calls: RSS after warm-up",
    ]


@attrs.frozen(kw_only=True)
class Row:
    """One figure of the table."""

    name: str
    #: agenthost's figure, formatted.
    ours: str
    #: What it is compared with, formatted ("SDK trio 7,900/s"), or "".
    reference: str = ""
    #: The comparison ("8.2x"), or "".
    ratio: str = ""
    #: The target as text ("SDK >= 8x"), or "" for an informational row.
    target: str = ""
    #: True / False against the target; None when there is no target or no figure.
    passed: bool | None = None
    #: agenthost's figure over the same figure of a ``--baseline`` version ("1.08x"), or "".
    baseline: str = ""

    @property
    def result(self) -> str:
        if self.passed is None:
            return "-" if not self.target else "n/a"
        return "PASS" if self.passed else "MISS"


_HEADER = ("Figure", "agenthost", "compared with", "ratio", "target", "result")
#: The extra column of a ``--baseline`` run (only then: the table's shape is otherwise fixed).
_BASELINE = "vs baseline"


def _header(rows: Sequence[Row]) -> tuple[str, ...]:
    return (*_HEADER, _BASELINE) if any(row.baseline for row in rows) else _HEADER


def _cells(row: Row, columns: int = len(_HEADER)) -> tuple[str, ...]:
    cells = (row.name, row.ours, row.reference, row.ratio, row.target, row.result)
    return cells if columns == len(_HEADER) else (*cells, row.baseline)


def _render(rows: Sequence[Row], line: Callable[[Sequence[str]], str], rule: str) -> list[str]:
    header = _header(rows)
    return [line(header), rule, *(line(_cells(row, len(header))) for row in rows)]


def render_text(rows: Sequence[Row]) -> str:
    """A fixed-width table for the terminal."""
    header = _header(rows)
    table = [header, *(_cells(row, len(header)) for row in rows)]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(width) for cell, width in zip(cells, widths, strict=True)
        ).rstrip()

    return "\n".join(_render(rows, line, "  ".join("-" * width for width in widths)))


def render_markdown(rows: Sequence[Row]) -> str:
    """A GitHub markdown table."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return "\n".join(_render(rows, line, "|" + "---|" * len(_header(rows))))
