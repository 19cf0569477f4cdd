"""The 2026-07-28 short call path sends exactly what the general path sends.

``ClientSession.call_tool`` on a modern stdio session takes the era's short path (issue
26): round 1 stamped and sent inline, no ``SendOptions``, no MRTR set-up. The general
path is the era's MRTR exchange, which :meth:`ClientSession.exchange` takes. Over a real
stdio server (``bench/minimal_server.py --modern``), both are driven with the same
generated arguments, caller ``_meta`` (keys that collide with the stamp's included), log
level and capabilities (with and without ask handlers), and their wire messages must be
equal, id aside, as must the results. (Not schema-checked: a generated caller ``_meta``
may hold what the schema forbids, which both paths pass on alike.)

The stamp itself is spliced in as bytes serialised once (``Stamp.spliced``): on generated
params, stamps and levels, the request line it gives decodes to the one ``Stamp.params``
gives.
"""

from __future__ import annotations

import sys
from typing import Any

import hypothesis
import orjson
import trio
from hypothesis import strategies as st

from agenthost.connection import open_session
from agenthost.protocol import methods as m
from agenthost.protocol.converter import structure
from agenthost.protocol.jsonrpc import Request, encode_line
from agenthost.protocol.lifecycle import (
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    Stamp,
)
from agenthost.protocol.types import CallToolResult
from agenthost.transports.stdio import open_stdio_transport
from tests.conftest import REPO_ROOT
from tests.helpers import ContextRecorder, RecordingTransport

SERVER = [str(REPO_ROOT / "bench" / "minimal_server.py"), "--modern"]
_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
_meta_key = st.sampled_from(
    [META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_LOG_LEVEL, "progressToken"]
) | st.text(max_size=6)
_call = st.tuples(
    st.text(max_size=12),
    st.dictionaries(st.text(max_size=4), _json, max_size=3),
    st.none() | st.dictionaries(_meta_key, _json, max_size=3),
    st.none() | st.sampled_from(_LEVELS),
)


def _without_id(message: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in message.items() if key != "id"}


async def _compare(data: st.DataObject, with_handlers: bool, calls: int) -> None:
    handlers = ContextRecorder().handlers() if with_handlers else None
    async with open_stdio_transport(sys.executable, SERVER, name="minimal") as stdio:
        recording = RecordingTransport(stdio)
        async with open_session(recording, name="minimal", handlers=handlers, era="modern") as s:
            for _ in range(calls):
                message, arguments, meta, level = data.draw(_call)
                if level is not None:
                    await s.set_logging_level(level)
                arguments = {**arguments, "message": message}
                before = len(recording.sent)
                short = await s.call_tool("echo", arguments, meta=meta)
                params = m.call_tool_params("echo", arguments, meta)
                general = await s.exchange(m.TOOLS_CALL_SPEC, params)
                # (a subscriptions/listen may go out meanwhile: the handlers listen)
                sent = [x for x in recording.sent[before:] if x.get("method") == m.TOOLS_CALL]
                assert len(sent) == 2, sent
                assert _without_id(sent[0]) == _without_id(sent[1])
                assert short == structure(general, CallToolResult)
                assert short.content[0].text == message  # type: ignore[union-attr]


@hypothesis.settings(max_examples=4, deadline=None)
@hypothesis.given(data=st.data(), with_handlers=st.booleans())
def test_short_modern_call_sends_what_the_general_path_sends(
    data: st.DataObject, with_handlers: bool
) -> None:
    trio.run(_compare, data, with_handlers, 10)


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(
    params=st.none() | st.dictionaries(st.text(max_size=4), _json, max_size=4),
    meta=st.none() | st.dictionaries(_meta_key, _json, max_size=3),
    capabilities=st.dictionaries(st.text(max_size=6), st.dictionaries(st.text(max_size=4), _json)),
    info=st.fixed_dictionaries({"name": st.text(max_size=8), "version": st.text(max_size=4)}),
    level=st.none() | st.sampled_from(_LEVELS),
)
def test_the_spliced_stamp_decodes_to_the_merged_one(
    params: dict[str, Any] | None,
    meta: dict[str, Any] | None,
    capabilities: dict[str, Any],
    info: dict[str, Any],
    level: str | None,
) -> None:
    if params is not None and meta is not None:
        params["_meta"] = meta  # a caller's own _meta (progressToken...): merged, not spliced
    stamp = Stamp("2026-07-28", capabilities, info, level)
    before = orjson.dumps(params)
    spliced = encode_line(Request(7, m.TOOLS_CALL, stamp.spliced(params)))
    general = encode_line(Request(7, m.TOOLS_CALL, stamp.params(params)))
    assert spliced.endswith(b"\n") and spliced.count(b"\n") == 1
    assert orjson.loads(spliced) == orjson.loads(general)
    assert orjson.dumps(params) == before  # the caller's params are left as they were
