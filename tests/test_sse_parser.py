"""The sans-I/O SSE parser against the WHATWG event-stream rules, with plain bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenthost.errors import MessageTooLarge
from agenthost.protocol.sse import ServerSentEvent, SSEParser


def parse(*chunks: bytes) -> list[ServerSentEvent]:
    parser = SSEParser()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    return events


def test_simple_message() -> None:
    assert parse(b'data: {"a":1}\n\n') == [ServerSentEvent(data='{"a":1}')]


def test_multiline_data_event_type_and_id() -> None:
    events = parse(b"event: endpoint\nid: 7\ndata: one\ndata:two\n\n")
    assert events == [ServerSentEvent(event="endpoint", data="one\ntwo", id="7")]


def test_only_one_leading_space_is_stripped_and_colonless_field() -> None:
    assert parse(b"data:  x\n\n")[0].data == " x"
    # "data" without a colon is a data field with an empty value.
    assert parse(b"data\n\n") == [ServerSentEvent(data="")]


def test_comments_and_unknown_fields_are_ignored() -> None:
    assert parse(b": keepalive\nfoo: bar\ndata: x\n\n") == [ServerSentEvent(data="x")]


def test_line_endings_crlf_cr_lf_mixed() -> None:
    assert parse(b"data: a\r\ndata: b\rdata: c\n\r\n") == [ServerSentEvent(data="a\nb\nc")]


def test_cr_lf_split_across_chunks_is_one_line_end() -> None:
    # If the CR and LF were two line ends, the blank line would dispatch "a" early and
    # "b" would be a second event.
    assert parse(b"data: a\r", b"\ndata: b\n\n") == [ServerSentEvent(data="a\nb")]


def test_bom_is_dropped_even_when_split() -> None:
    assert parse(b"\xef\xbb", b"\xbfdata: x\n\n") == [ServerSentEvent(data="x")]
    # Only at the start of the stream: later, "\ufeffdata" is just an unknown field.
    assert parse(b"data: x\n\n\xef\xbb\xbfdata: y\n\n") == [ServerSentEvent(data="x")]


def test_utf8_character_split_across_chunks() -> None:
    raw = "data: héllo ✓\n\n".encode()
    cut = raw.index(b"\xc3") + 1
    assert parse(raw[:cut], raw[cut:]) == [ServerSentEvent(data="héllo ✓")]


def test_id_persists_and_id_only_block_dispatches_nothing() -> None:
    parser = SSEParser()
    assert parser.feed(b"id: 1\ndata: a\n\n")[0].id == "1"
    # A priming block: an id and retry without data sets state but no event.
    assert parser.feed(b"id: 2\nretry: 1500\n\n") == []
    assert parser.last_event_id == "2"
    assert parser.retry == 1500
    event = parser.feed(b"data: b\n\n")[0]
    assert (event.id, event.retry) == ("2", 1500)


def test_empty_data_field_dispatches_an_empty_event() -> None:
    # What MCP servers send to prime a stream: an id and an empty data line.
    assert parse(b"id: abc\ndata:\n\n") == [ServerSentEvent(data="", id="abc")]


def test_id_with_nul_is_ignored_and_bad_retry_ignored() -> None:
    parser = SSEParser(last_event_id="keep", retry=10)
    parser.feed(b"id: a\x00b\nretry: 12x\nretry: -1\ndata: z\n\n")
    assert (parser.last_event_id, parser.retry) == ("keep", 10)


def test_event_type_resets_after_dispatch() -> None:
    events = parse(b"event: ping\ndata: 1\n\ndata: 2\n\n")
    assert [e.event for e in events] == ["ping", "message"]


def test_incomplete_event_is_not_dispatched() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: partial\n") == []
    assert parser.feed(b"") == []


def test_oversized_line_and_event_raise() -> None:
    with pytest.raises(MessageTooLarge):
        SSEParser(max_size=16).feed(b"data: " + b"x" * 32)
    parser = SSEParser(max_size=16)
    with pytest.raises(MessageTooLarge):
        for _ in range(10):
            parser.feed(b"data: xxxx\n")


_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r\n\x00"),
    max_size=20,
)


@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(["", "message", "endpoint"]), st.lists(_text, min_size=1, max_size=3)
        ),
        max_size=5,
    ),
    eol=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_chunking_gives_the_same_events(
    events: list[tuple[str, list[str]]], eol: bytes, cuts: list[int]
) -> None:
    raw = b""
    expected = []
    for kind, lines in events:
        if kind:
            raw += b"event: " + kind.encode() + eol
        for line in lines:
            raw += b"data: " + line.encode() + eol
        raw += eol
        expected.append(ServerSentEvent(event=kind or "message", data="\n".join(lines)))
    points = sorted({min(c, len(raw)) for c in cuts})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    assert parse(*chunks) == expected
