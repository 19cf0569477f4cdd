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

The parser never grows without bound: a line or an event's data larger than
``max_size`` raises :class:`~agenthost.errors.MessageTooLarge`.
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
        "_buf",
        "_data",
        "_event",
        "_has_data",
        "_max",
        "_size",
        "_skip_lf",
        "_started",
        "last_event_id",
        "retry",
    )

    def __init__(
        self, *, max_size: int = 16 * 1024 * 1024, last_event_id: str = "", retry: int | None = None
    ) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._has_data = False
        self._size = 0
        self._event = ""
        self._max = max_size
        self._skip_lf = False
        self._started = False
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
        if self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        buf = self._buf + data if self._buf else data
        if not self._started:
            if len(buf) < 3 and _BOM.startswith(buf):
                self._buf = buf
                return []
            self._started = True
            if buf.startswith(_BOM):
                buf = buf[3:]
        events: list[ServerSentEvent] = []
        pos = 0
        size = len(buf)
        search = _LINE_END.search
        while True:
            m = search(buf, pos)
            if m is None:
                break
            end = m.end()
            if end == size and buf[m.start()] == 0x0D:  # CR at the very end: LF may follow
                self._skip_lf = True
            event = self._line(buf[pos : m.start()])
            if event is not None:
                events.append(event)
            pos = end
        self._buf = buf[pos:]
        if len(self._buf) > self._max:
            raise MessageTooLarge(f"SSE line larger than the maximum of {self._max} bytes")
        return events

    def _line(self, raw: bytes) -> ServerSentEvent | None:
        if not raw:
            return self._dispatch()
        if raw[0] == 0x3A:  # ":" comment
            return None
        line = raw.decode("utf-8", "replace")
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
            self._size += len(value) + 1
            if self._size > self._max:
                self._data = []
                self._size = 0
                raise MessageTooLarge(f"SSE event larger than the maximum of {self._max} bytes")
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\x00" not in value:
                self.last_event_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._has_data:
            self._event = ""
            return None
        event = ServerSentEvent(
            event=self._event or "message",
            data="\n".join(self._data),
            id=self.last_event_id,
            retry=self.retry,
        )
        self._data = []
        self._size = 0
        self._has_data = False
        self._event = ""
        return event
