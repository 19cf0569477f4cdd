"""The per-call short paths give exactly what the general paths give.

A tool call skips three general mechanisms for speed (issue 18): ``call_tool`` builds
its params' JSON directly instead of unstructuring ``CallToolRequestParams``; the
``CallToolResult`` hook has a short path for text-only results; ``jsonrpc.decode`` has
a short path for success responses. Each must be indistinguishable from the path it
skips, for every input: these tests compare them over generated inputs.
"""

from __future__ import annotations

from typing import Any

import hypothesis
import orjson
import pytest
from hypothesis import strategies as st

from agenthost.errors import ProtocolError
from agenthost.protocol import jsonrpc
from agenthost.protocol import types as t
from agenthost.protocol.converter import make_converter, structure, unstructure
from agenthost.protocol.methods import call_tool_params
from agenthost.protocol.revisions import LEGACY_REVISIONS, MODERN_REVISIONS

#: The general hooks only (the detailed converter never takes the short path).
_GENERAL = make_converter(detailed=True)

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=8)}),
    st.fixed_dictionaries(
        {"type": st.just("text"), "text": st.text(max_size=8)},
        optional={"_meta": st.dictionaries(st.text(max_size=3), _json, max_size=2)},
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "bogus"]), "text": _json}),
    _json,
)
_result = st.one_of(
    st.fixed_dictionaries(
        {"content": st.lists(_block, max_size=3)},
        optional={
            "isError": st.one_of(st.booleans(), st.none(), _json),
            "structuredContent": _json,
            "_meta": st.one_of(st.none(), st.dictionaries(st.text(max_size=3), _json)),
        },
    ),
    st.dictionaries(st.sampled_from(["content", "isError", "extra"]), _json, max_size=3),
    _json,
)


def _general(data: Any) -> t.CallToolResult | str:
    """What the general hooks make of ``data``: the result, or 'invalid'."""
    try:
        return _GENERAL.structure(data, t.CallToolResult)
    except Exception:
        return "invalid"


def _fast(data: Any) -> t.CallToolResult | str:
    try:
        return structure(data, t.CallToolResult)
    except ProtocolError:
        return "invalid"


@hypothesis.settings(max_examples=400, deadline=None)
@hypothesis.given(_result)
def test_tool_result_short_path_matches_the_general_hooks(data: Any) -> None:
    assert _fast(data) == _general(data)


def test_tool_result_short_path_is_taken_and_equal() -> None:
    data = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    fast = structure(data, t.CallToolResult)
    assert fast == _GENERAL.structure(data, t.CallToolResult)
    assert [type(b) for b in fast.content] == [t.TextContent, t.TextContent]
    flagged = structure({**data, "isError": True}, t.CallToolResult)
    assert flagged.is_error is True
    with pytest.raises(ProtocolError, match=r"content\[0\]"):
        structure({"content": [{"type": "text", "text": 3}]}, t.CallToolResult)


@pytest.mark.parametrize("revision", [*LEGACY_REVISIONS, *MODERN_REVISIONS])
@pytest.mark.parametrize("meta", [None, {"progressToken": "p1"}, {"x": {"y": [1]}}])
@pytest.mark.parametrize("arguments", [None, {}, {"message": "hi", "n": [1, {"a": None}]}])
def test_call_tool_params_are_the_typed_params_json(
    revision: str, meta: dict[str, Any] | None, arguments: dict[str, Any] | None
) -> None:
    """The JSON session.call_tool builds by hand is what the typed params unstructure to."""
    typed = t.CallToolRequestParams(name="echo", arguments=dict(arguments or {}), meta=meta)
    assert call_tool_params("echo", arguments, meta) == unstructure(typed, revision)


_response_like = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": st.one_of(st.integers(-3, 3), st.text(max_size=2), st.none(), st.booleans()),
        "result": st.one_of(st.dictionaries(st.text(max_size=3), _json, max_size=2), _json),
        "error": st.one_of(
            st.fixed_dictionaries({"code": st.integers(-3, 3), "message": st.text(max_size=3)}),
            _json,
        ),
        "method": st.one_of(st.just("x"), _json),
        "params": st.one_of(st.dictionaries(st.text(max_size=3), _json, max_size=2), _json),
    },
)


def _decoded(data: bytes) -> list[Any] | str:
    try:
        return jsonrpc.decode(data)
    except ProtocolError as exc:
        return f"error {exc.code}"


def _classified(data: bytes) -> list[Any] | str:
    try:
        return [jsonrpc.decode_object(orjson.loads(data))]
    except ProtocolError as exc:
        return f"error {exc.code}"


@hypothesis.settings(max_examples=1000, deadline=None)
@hypothesis.given(_response_like)
@hypothesis.example({"jsonrpc": "2.0", "id": 1, "result": {}, "method": "x"})
@hypothesis.example({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": ""}})
@hypothesis.example({"jsonrpc": "2.0", "id": True, "result": {}})
@hypothesis.example({"jsonrpc": "1.0", "id": 1, "result": {}})
@hypothesis.example({"id": 1, "result": {}})
@hypothesis.example({"jsonrpc": "2.0", "id": None, "result": {}})
def test_decode_short_path_matches_full_classification(obj: dict[str, Any]) -> None:
    data = orjson.dumps(obj)
    assert _decoded(data) == _classified(data)
