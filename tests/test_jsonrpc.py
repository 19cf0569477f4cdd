"""The sans-I/O JSON-RPC layer: plain bytes in, messages out; nothing but ProtocolError."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.errors import ProtocolError
from agenthost.protocol import jsonrpc
from agenthost.protocol.jsonrpc import ErrorObject, ErrorResponse, Notification, Request, Response


@pytest.mark.parametrize(
    "message",
    [
        Request(1, "tools/list"),
        Request("abc", "tools/call", {"name": "echo", "arguments": {"x": [1, 2]}}),
        Notification("notifications/initialized"),
        Notification("notifications/progress", {"progressToken": "t", "progress": 0.5}),
        Response(7, {}),
        Response("r", {"tools": []}),
        ErrorResponse(3, ErrorObject(-32601, "Method not found")),
        ErrorResponse(None, ErrorObject(-32700, "Parse error", {"detail": 1})),
    ],
)
def test_round_trip(message: jsonrpc.Message) -> None:
    assert jsonrpc.decode(jsonrpc.encode(message)) == [message]


def test_encode_omits_absent_params_and_data() -> None:
    assert orjson.loads(jsonrpc.encode(Request(1, "ping"))) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "ping",
    }
    assert orjson.loads(jsonrpc.encode(ErrorResponse(1, ErrorObject(-1, "no")))) == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -1, "message": "no"},
    }


def test_batch_is_accepted_on_receive() -> None:
    frame = b'[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"n"}]'
    assert jsonrpc.decode(frame) == [Response(1, {}), Notification("n")]


def test_str_input_is_accepted() -> None:
    assert jsonrpc.decode('{"jsonrpc":"2.0","method":"x"}') == [Notification("x")]


@pytest.mark.parametrize(
    ("frame", "code", "fragment", "request_id"),
    [
        (b"{not json", -32700, "invalid JSON", None),
        (b"\xff\xfe", -32700, "invalid JSON", None),
        (b"[]", -32600, "empty batch", None),
        (b"42", -32600, "must be an object", None),
        (b'{"id":1,"method":"x"}', -32600, '"jsonrpc"', 1),
        (b'{"jsonrpc":"1.0","id":1,"method":"x"}', -32600, '"jsonrpc"', 1),
        (b'{"jsonrpc":"2.0","id":1,"method":5}', -32600, '"method" must be a string', 1),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}', -32600, '"params"', 1),
        (b'{"jsonrpc":"2.0","id":null,"method":"x"}', -32600, 'request "id"', None),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', -32600, "got bool", None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"x"}', -32600, "got float", None),
        (b'{"jsonrpc":"2.0"}', -32600, 'neither "method" nor "id"', None),
        (b'{"jsonrpc":"2.0","id":[1],"error":{"code":1,"message":"m"}}', -32600, "got list", None),
        (b'[{"jsonrpc":"2.0","method":"ok"}, 3]', -32600, "must be an object", None),
    ],
)
def test_malformed_input_is_a_protocol_error(
    frame: bytes, code: int, fragment: str, request_id: int | None
) -> None:
    with pytest.raises(ProtocolError) as info:
        jsonrpc.decode(frame)
    assert info.value.code == code
    assert fragment in str(info.value)
    assert info.value.request_id == request_id


@pytest.mark.parametrize(
    ("frame", "fragment"),
    [
        (b'{"jsonrpc":"2.0","id":1}', "exactly one"),
        (b'{"jsonrpc":"2.0","id":1,"result":{},"error":{}}', "exactly one"),
        (b'{"jsonrpc":"2.0","id":1,"result":[]}', '"result" must be an object'),
        (b'{"jsonrpc":"2.0","id":1,"error":"x"}', '"error" must be an object'),
        (b'{"jsonrpc":"2.0","id":1,"error":{"message":"m"}}', "error.code"),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":1}}', "error.message"),
    ],
)
def test_a_malformed_response_with_a_readable_id_is_an_invalid_response(
    frame: bytes, fragment: str
) -> None:
    # Not an error: the session must fail the request it answers, not drop it (issue 12).
    [message] = jsonrpc.decode(frame)
    assert isinstance(message, jsonrpc.InvalidResponse)
    assert message.id == 1
    assert fragment in message.problem


def test_an_invalid_response_is_never_sent() -> None:
    with pytest.raises(ProtocolError, match="cannot encode InvalidResponse"):
        jsonrpc.encode(jsonrpc.InvalidResponse(1, "bad"))


def test_encode_failure_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="cannot encode"):
        jsonrpc.encode(Request(1, "x", {"bad": object()}))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=512))
def test_arbitrary_bytes_raise_only_protocol_error(data: bytes) -> None:
    try:
        messages = jsonrpc.decode(data)
    except ProtocolError:
        return
    assert messages
    assert all(
        isinstance(m, Request | Notification | Response | ErrorResponse | jsonrpc.InvalidResponse)
        for m in messages
    )


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
_keys = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "code"])


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(_keys, _json | st.just("2.0"), max_size=6) | _json)
def test_arbitrary_json_values_raise_only_protocol_error(value: object) -> None:
    """Structurally plausible JSON reaches the deeper checks that random bytes rarely do."""
    try:
        messages = jsonrpc.decode(orjson.dumps(value))
    except ProtocolError:
        return
    for message in messages:
        if isinstance(message, jsonrpc.InvalidResponse):
            # Received only, to fail the request it answers: it must name that request.
            assert type(message.id) is int or type(message.id) is str
            continue
        assert jsonrpc.decode(jsonrpc.encode(message)) == [message]


def _drain_batch(data: bytes, group: int = 1) -> list[jsonrpc.Message]:
    """Every member, through a BatchReader that tries a cut at every ``},`` (group=1)."""
    reader = jsonrpc.BatchReader(data, group=group)
    messages: list[jsonrpc.Message] = []
    while not reader.done:
        messages += reader.read() or []
    return messages


@settings(max_examples=500, deadline=None)
@given(st.lists(st.dictionaries(_keys, _json | st.just("2.0"), max_size=6) | _json, max_size=5))
def test_a_batch_read_member_by_member_matches_the_whole_batch(members: list[object]) -> None:
    """A batch read group by group (large batches) gives what decode returns whole, and
    fails only with ProtocolError, wherever the cuts are tried."""
    data = orjson.dumps(members)
    assert jsonrpc.is_batch(b" \n" + data)
    try:
        whole = jsonrpc.decode(data)
    except ProtocolError:
        with pytest.raises(ProtocolError):
            _drain_batch(data)
        return
    assert _drain_batch(data) == whole


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=512))
def test_arbitrary_bytes_as_a_batch_raise_only_protocol_error(data: bytes) -> None:
    try:
        messages = _drain_batch(b"[" + data)
    except ProtocolError:
        return
    assert messages == jsonrpc.decode(b"[" + data)


def test_a_bad_member_ends_a_batch_after_the_members_before_it() -> None:
    frame = b'[{"jsonrpc":"2.0","method":"a"}, 3, {"jsonrpc":"2.0","method":"b"}]'
    reader = jsonrpc.BatchReader(frame)
    assert reader.read() == [Notification("a")]
    done_after_first = reader.done  # a local: mypy would keep reader.done narrowed to False
    assert not done_after_first
    with pytest.raises(ProtocolError, match="must be an object"):
        reader.read()
    assert reader.done
    for frame, fragment in [(b"[]", "empty batch"), (b'[{"jsonrpc":"2.0"', "invalid JSON")]:
        with pytest.raises(ProtocolError, match=fragment):
            _drain_batch(frame)
    assert not jsonrpc.is_batch(b'  {"jsonrpc":"2.0","method":"a"}')


def test_cuts_inside_strings_and_members_are_never_taken() -> None:
    """Text full of ``},`` inside strings and nested objects: every member comes out
    whole, in order, and a group past ``limit`` is left for the caller to run elsewhere."""
    tricky = [
        {"jsonrpc": "2.0", "method": "m", "params": {"s": "},{" * 50, "o": [{"a": 1}, {"b": 2}]}}
        for _ in range(40)
    ]
    data = orjson.dumps(tricky)
    assert _drain_batch(data) == jsonrpc.decode(data)
    assert _drain_batch(data, group=300) == jsonrpc.decode(data)
    big = orjson.dumps([{"jsonrpc": "2.0", "method": "big", "params": {"s": "x" * 10_000}}])
    reader = jsonrpc.BatchReader(big, group=100)
    assert reader.read(limit=1000) is None  # one member of 10 kB: not within the limit
    assert reader.read() == [Notification("big", {"s": "x" * 10_000})]
    assert reader.done
