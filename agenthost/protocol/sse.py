"""A sans-I/O Server-Sent Events parser: bytes in, events out.

Why our own and not a library: ``httpx-sse`` (the usual choice) wraps an httpx response and
decodes through ``aiter_lines``; it cannot be fed raw bytes, so it cannot be tested with
plain bytes, it does not expose the ``retry``/``Last-Event-ID`` state a resuming client
needs between connections, and it is one more dependency for ~100 lines of a stable spec.

Rules (the WHATWG "event stream interpretation", which MCP's HTTP transports use):

* The stream is UTF-8; a leading BOM is dropped. Lines end in CRLF, LF or CR (a CR at the
  end of one chunk and an LF at the start of the next are one line end).
* A blank line dispatches the pending event; a line starting with ``:`` is a comment.
* ``field: value`` (one space after the colon is dropped; a line without a colon is a field
  with an empty value). Fields: ``event`` sets the type, ``data`` appends a line,
  ``id`` sets the last event id (ignored if it holds NUL; it survives across events),
  ``retry`` sets the reconnection delay when it is all ASCII digits. Others are ignored.
* An event is dispatched only when at least one ``data`` line was seen; its type defaults
  to ``message``. ``id``/``retry`` still take effect without data (how MCP servers prime a
  stream for resumption).
* At end of stream an event without its final blank line is discarded.

The parser never grows without bound: a line, or an event's data lines as they came on
the wire (``data:`` prefixes and line ends included, so a flood of one-byte lines trips
the limit as soon as a real one would), larger than ``max_size`` raises
:class:`~agenthost.errors.MessageTooLarge`.

Cost (issue 14, item 5): linear in the bytes fed, whatever the chunking. An unfinished
line is kept in one ``bytearray`` that chunks are appended to, and only each new chunk is
searched for line ends (never the whole line again); an event's data lines are kept as
raw bytes and decoded once, at dispatch. So a 16 MiB line without a newline is refused
after one pass over it, many tiny ``data:`` lines cost one byte each of memory (not a
Python string each), and memory stays near ``max_size``.
"""

from __future__ import annotations

import re
from typing import Final

import attrs

from agenthost.errors import MessageTooLarge

__all__ = ["SSEParser", "ServerSentEvent"]

_LINE_END: Final = re.compile(rb"\r\n|\r|\n")
_BOM: Final = b"\xef\xbb\xbf"


@attrs.frozen(kw_only=True, slots=True)
class ServerSentEvent:
    """One dispatched event."""

    #: The event type; ``"message"`` unless the server named another.
    event: str = "message"
    data: str = ""
    #: The last event id at dispatch time (``""`` when the stream never set one).
    id: str = ""
    #: The reconnection delay in milliseconds, if the server has set one so far.
    retry: int | None = None


class SSEParser:
    """Feed it the bytes of one event stream; it returns the complete events.

    One parser per connection; :attr:`last_event_id` and :attr:`retry` are what a client
    carries into the next connection when it resumes.
    """

    __slots__ = (
        "_data",
        "_event",
        "_has_data",
        "_line",
        "_max",
        "_size",
        "_skip_lf",
        "_start",
        "last_event_id",
        "retry",
    )

    def __init__(
        self, *, max_size: int = 16 * 1024 * 1024, last_event_id: str = "", retry: int | None = None
    ) -> None:
        #: The unfinished line (bytes after the last line end), grown in place.
        self._line = bytearray()
        #: The pending event's data lines, raw, joined by b"\n"; decoded at dispatch.
        self._data = bytearray()
        #: Wire bytes of the pending event's data lines (what the limit counts).
        self._size = 0
        self._has_data = False
        self._event = ""
        self._max = max_size
        self._skip_lf = False
        #: The first bytes of the stream, while they may still be a split BOM.
        self._start: bytes | None = b""
        #: The id of the last event (or id-only block) seen; sent as ``Last-Event-ID``.
        self.last_event_id = last_event_id
        #: The server's requested reconnection delay in milliseconds, if any.
        self.retry = retry

    def feed(self, data: bytes) -> list[ServerSentEvent]:
        """Consume ``data``; return the events it completed, in order.

        Raises:
            MessageTooLarge: a line or an event is larger than ``max_size`` bytes.
        """
        if not data:
            return []
        if self._start is not None:
            head = self._start + data
            if len(head) < 3 and _BOM.startswith(head):
                self._start = head
                return []
            self._start = None
            data = head[3:] if head.startswith(_BOM) else head
        if self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        if b"\r" in data:
            lines = _LINE_END.split(data)
            if data[-1] == 0x0D:  # CR at the very end: an LF may start the next chunk
                self._skip_lf = True
        else:  # the usual LF-only stream: split at C speed
            lines = data.split(b"\n")
        tail = lines.pop()
        events: list[ServerSentEvent] = []
        if lines:
            if self._line:
                self._line += lines[0]
                self._check_line(len(self._line))
                lines[0] = bytes(self._line)
                self._line = bytearray()
            for line in lines:
                if not line:
                    if self._has_data:
                        events.append(self._dispatch())
                    else:
                        self._event = ""
                elif line[:5] == b"data:":  # the hot path, inlined
                    if self._has_data:
                        self._data += b"\n"
                    self._data += line[6:] if line[5:6] == b" " else line[5:]
                    self._has_data = True
                    self._size += len(line) + 1
                    if self._size > self._max:
                        self._too_large()
                else:
                    self._field(line)
        if tail:
            self._line += tail
            self._check_line(len(self._line))
        return events

    def _check_line(self, size: int) -> None:
        if size > self._max:
            self._line = bytearray()
            raise MessageTooLarge(f"SSE line larger than the maximum of {self._max} bytes")

    def _too_large(self) -> None:
        self._data = bytearray()
        self._size = 0
        self._has_data = False
        raise MessageTooLarge(f"SSE event larger than the maximum of {self._max} bytes")

    def _field(self, raw: bytes) -> None:
        if raw[0] == 0x3A:  # ":" comment
            return
        name, colon, value = raw.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            if self._has_data:
                self._data += b"\n"
            self._data += value
            self._has_data = True
            self._size += len(raw) + 1
            if self._size > self._max:
                self._too_large()
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self.retry = int(value)

    def _dispatch(self) -> ServerSentEvent:
        event = ServerSentEvent(
            event=self._event or "message",
            data=self._data.decode("utf-8", "replace"),
            id=self.last_event_id,
            retry=self.retry,
        )
        self._data = bytearray()
        self._size = 0
        self._has_data = False
        self._event = ""
        return event
