"""What the ``agenthost`` command line shows, and how it is made safe to show.

Human output goes to stdout (:func:`say`), progress and questions to stderr
(:class:`Console`), ``--json`` to stdout (:func:`print_json`). Every sink escapes server
and model text (:func:`safe`): a terminal obeys escape sequences, and everything a server
sends can reach the screen. :class:`Redacting` scrubs configured secrets from whatever
leaves the process. Imports are deferred to the function that needs them, so
``agenthost --help`` stays fast.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    from agenthost.agent.transcript import AgentEvent

__all__ = [
    "Console",
    "Redacting",
    "SafeFormatter",
    "Stream",
    "agent_printer",
    "content_text",
    "first_line",
    "print_json",
    "safe",
    "sampling_printer",
    "say",
    "table",
    "usage_text",
]


def safe(text: str, *, one_line: bool = False) -> str:
    """Server (or model) text made safe for a terminal: control characters shown escaped.

    Everything a server sends can reach the screen (tool descriptions and results,
    prompts, resources, errors), and a terminal obeys escape sequences: ``ESC[2J`` clears
    it, ``ESC[8m`` hides what follows (a consent prompt), OSC 52 writes the clipboard.
    The one escaping function (the consent prompts use it too) is applied at every human
    output sink of the CLI: :func:`say`, :class:`Console`, the log formatter and chat's
    line readers.

    Args:
        one_line: also escape line breaks and tabs: for a field shown within one line
            (a table cell, an audit record's name, a suggestion), where a server's
            ``\\n`` would otherwise print as lines of its own choosing.
    """
    from agenthost_policies.text import printable

    return printable(text, one_line=one_line)


def say(text: str) -> None:
    """Print one piece of human output on stdout, escaped (see :func:`safe`)."""
    sys.stdout.write(safe(text) + "\n")


class SafeFormatter(logging.Formatter):
    """Log lines carry server text too (stderr lines, notifications/message)."""

    def format(self, record: logging.LogRecord) -> str:
        return safe(super().format(record))


class Console:
    """Where human-readable progress goes: stderr, never mixed into --json stdout."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = self.stream.isatty()
        self._bar = False

    def line(self, text: str) -> None:
        if self.quiet:
            return
        self.end_progress()
        self.stream.write(safe(text) + "\n")
        self.stream.flush()

    def progress(
        self, label: str, progress: float, total: float | None, message: str | None
    ) -> None:
        if self.quiet:
            return
        if total:
            frac = max(0.0, min(1.0, progress / total))
            detail = f"{progress:g}/{total:g}"
        else:
            frac, detail = 0.0, f"{progress:g}"
        note = f" {message}" if message else ""
        if self.tty:
            width = 24
            bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
            self.stream.write(f"\r  {safe(label)} [{bar}] {detail}{safe(note)}\x1b[K")
            self.stream.flush()
            self._bar = True
        else:
            self.line(f"  progress {label}: {detail}{note}")

    def end_progress(self) -> None:
        if self._bar:
            self.stream.write("\n")
            self._bar = False


class Redacting:
    """A text stream that writes through :func:`agenthost.redaction.redact`."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    @classmethod
    def wrap(cls, stream: TextIO) -> TextIO:
        return stream if isinstance(stream, cls) else cast(TextIO, cls(stream))

    def write(self, text: str) -> int:
        from agenthost.redaction import redact

        self._inner.write(redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def print_json(data: Any) -> None:
    """JSON on stdout. ``json.dumps`` escapes C0 controls; C1 controls (``\\x9b`` is a
    CSI), DEL and the bidi and line separators are escaped here too, as ``\\uNNNN``
    (the same JSON), so a server's text cannot drive the terminal through ``--json``."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    text = _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    sys.stdout.write(text + "\n")


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """Rows in columns; every cell is one line (its line breaks shown escaped), so a
    server's name or description cannot add rows."""
    cells = [list(header), *[[safe(str(c), one_line=True) for c in r] for r in rows]]
    widths = [max(len(str(row[i])) for row in cells) for i in range(len(header))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def first_line(text: str | None, width: int = 70) -> str:
    """The first line of a description, cut to ``width``: a table cell stays one short line."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def content_text(blocks: Sequence[Any]) -> str:
    """Content blocks as a person reads them (text as is, others summarised)."""
    from agenthost.protocol.types import (
        AudioContent,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
    )

    out = []
    for block in blocks:
        if isinstance(block, TextContent):
            out.append(block.text)
        elif isinstance(block, ImageContent | AudioContent):
            out.append(f"[{block.type} {block.mime_type}, {len(block.data)} bytes]")
        elif isinstance(block, ResourceLink):
            out.append(f"[resource link {block.uri}]")
        elif isinstance(block, EmbeddedResource):
            text = getattr(block.resource, "text", None)
            out.append(text if text is not None else f"[resource {block.resource.uri}]")
        else:
            out.append(f"[{getattr(block, 'type', type(block).__name__)}]")
    return "\n".join(out)


def sampling_printer(console: Console) -> Callable[[Any], None]:
    """What the host's sampling service did, as lines on the console (``on_event``)."""
    from agenthost.host.sampling import SamplingEvent

    def on_event(event: Any) -> None:
        if isinstance(event, SamplingEvent):
            if event.stage == "selected":
                console.line(f"~ sampling for {event.server}: chose {event.message}")
            elif event.stage == "denied":
                console.line(f"~ sampling for {event.server} denied: {event.message}")
            elif event.stage == "answered":
                console.line(f"~ sampling for {event.server}: {event.message}")
            else:
                console.line(f"~ sampling for {event.server} failed: {event.message}")

    return on_event


class Stream:
    """The model's text on stdout as it arrives; other output waits for the line to end."""

    def __init__(self) -> None:
        #: Something was streamed since the last tool call (the turn's text is shown).
        self.shown = False
        self._open = False

    def write(self, text: str) -> None:
        sys.stdout.write(safe(text))
        sys.stdout.flush()
        self.shown = True
        self._open = not text.endswith("\n")

    def end_line(self) -> None:
        if self._open:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._open = False


def agent_printer(console: Console, stream: Stream | None = None) -> Callable[[AgentEvent], None]:
    """The agent's events as the user follows them: text streamed to stdout (with
    ``stream``), tool calls, progress and results as lines on the console."""

    def on_event(event: AgentEvent) -> None:
        record = event.record
        if event.kind == "delta" and stream is not None:
            stream.write(event.text)
            return
        if stream is not None:
            stream.end_line()
            if event.kind == "tool_call":
                stream.shown = False  # the final answer is the text after the last call
        if event.kind == "text" and event.text:
            console.line(f"model: {event.text}")
        elif event.kind == "tool_call" and record is not None:
            # Not "> ...": that is what the user's own lines look like in chat.
            console.line(
                f"  [tool] {record.name} {json.dumps(dict(record.arguments), ensure_ascii=False)}"
            )
        elif event.kind == "progress" and record is not None and event.progress:
            console.progress(record.name, *event.progress)
        elif event.kind == "tool_running" and record is not None:
            console.line(f"  ~ still running (task {record.task_id}); its result will follow")
        elif event.kind == "tool_result" and record is not None:
            if record.status == "denied":
                console.line(f"  x denied: {record.reason}")
            elif record.status == "error":
                console.line(f"  ! error: {first_line(record.reason or record.output, 100)}")
            else:
                lines = record.output.strip().splitlines() or [""]
                shown = [first_line(line, 100) for line in lines[:4]]
                if len(lines) > 4:
                    shown.append(f"... ({len(lines) - 4} more lines)")
                console.line("  = " + "\n    ".join(shown))

    return on_event


def usage_text(input_tokens: int, output_tokens: int, cost: float | None) -> str:
    """Tokens and the estimated cost, as every run and chat turn reports them."""
    price = "cost unknown (model not in the catalog)" if cost is None else f"~${cost:.4f}"
    tokens = f"{input_tokens + output_tokens:,} tokens ({input_tokens:,} in, {output_tokens:,} out)"
    return f"{tokens}, {price}"
