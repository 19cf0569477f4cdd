"""The converter: spec examples round-trip, the revision decides what we send, input is
lenient where the spec allows and strict where data does not fit, and what we send fits
each revision's schema.json (checked with tests/schemacheck.py, itself tested here)."""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import attrs
import cattrs
import hypothesis
import pytest
from hypothesis import strategies as st

from agenthost.errors import ProtocolError, UnsupportedRevision
from agenthost.protocol import methods, revisions
from agenthost.protocol import types as t
from agenthost.protocol.converter import make_converter, structure, unstructure
from tests.schemacheck import SPEC_DIR, validate_outgoing

STATEFUL = tuple(reversed(revisions.SUPPORTED_REVISIONS))  # oldest first
STRICT = make_converter(forbid_extra_keys=True)

# --- examples from the spec pages ----------------------------------------------------------


@attrs.frozen
class Example:
    revision: str
    where: str
    data: dict[str, Any]
    #: For a response, the method of the request with the same id earlier on the page.
    answers: str | None = None
    #: The request it answers asked for a task (so the result is a CreateTaskResult).
    answers_task: bool = False


def _placeholder_base64(node: Any) -> Any:
    """The pages write ``"base64-encoded-data"``; swap in real base64 for binary fields."""
    if isinstance(node, list):
        return [_placeholder_base64(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _placeholder_base64(v) for k, v in node.items()}
    binary = "mimeType" in node or "uri" in node or node.get("type") in ("image", "audio")
    for key in ("data", "blob"):
        value = out.get(key)
        if binary and isinstance(value, str):
            try:
                base64.b64decode(value, validate=True)
            except binascii.Error:
                out[key] = base64.b64encode(value.encode()).decode()
    return out


def _examples() -> Iterator[Example]:
    for revision in STATEFUL:
        for page in sorted((SPEC_DIR / revision).rglob("*.mdx")):
            requests: dict[Any, dict[str, Any]] = {}
            for block in re.findall(r"```json[^\n]*\n(.*?)```", page.read_text(), re.S):
                text = re.sub(r"(?m)\s//[^\n]*$", "", block)  # trailing // comments
                try:
                    data = json.loads(text)
                except ValueError:
                    continue  # "[...]" elisions and the like
                if not isinstance(data, dict):
                    continue
                data = _placeholder_base64(data)
                where = f"{page.relative_to(SPEC_DIR)}"
                if "method" in data and "id" in data:
                    requests[data["id"]] = data
                request = requests.get(data.get("id")) if "result" in data else None
                if request is None:
                    yield Example(revision, where, data)
                else:
                    task = "task" in (request.get("params") or {})
                    yield Example(revision, where, data, request["method"], task)


EXAMPLES = list(_examples())


def _example_id(example: Example) -> str:
    key = example.data.get("method") or example.answers or ",".join(sorted(example.data)[:3])
    return f"{example.where}:{key}"


def _spec_for(example: Example) -> tuple[type | None, dict[str, Any] | None, str] | None:
    """(class, JSON to structure, who sends it) for the examples we know how to read."""
    data = example.data
    if "jsonrpc" in data:
        method = data.get("method")
        if method is not None and "id" in data:
            for table, sender in (
                (methods.CLIENT_REQUESTS, "client"),
                (methods.SERVER_REQUESTS, "server"),
            ):
                if method in table:
                    return table[method].params, data.get("params"), sender
            return None
        if method is not None:
            for notes, sender in (
                (methods.CLIENT_NOTIFICATIONS, "client"),
                (methods.SERVER_NOTIFICATIONS, "server"),
            ):
                if method in notes:
                    return notes[method].params, data.get("params"), sender
            return None
        if "result" in data and example.answers_task:
            return t.CreateTaskResult, data["result"], "any"
        if "result" in data and example.answers is not None:
            for table, sender in (
                (methods.CLIENT_REQUESTS, "server"),
                (methods.SERVER_REQUESTS, "client"),
            ):
                if example.answers in table:
                    return table[example.answers].result, data["result"], sender
        return None
    fragments: list[tuple[set[str], type]] = [
        ({"inputSchema"}, t.Tool),
        ({"uriTemplate"}, t.ResourceTemplate),
        ({"hints"}, t.ModelPreferences),
    ]
    keys = set(data)
    for required, cls in fragments:
        if required <= keys:
            return cls, data, "any"
    if keys == {"capabilities"}:
        server = {"tools", "prompts", "resources", "logging", "completions"}
        caps = data["capabilities"]
        cls = t.ServerCapabilities if set(caps) & server else t.ClientCapabilities
        return cls, caps, "any"
    if data.get("type") in ("text", "image", "audio", "resource", "resource_link"):
        return None, data, "content"
    return None


#: Examples on the spec pages that contradict the schema; received leniently, not
#: round-tripped (the fields the schema does not have are dropped).
PAGE_DEVIATIONS = {
    # "annotations" inside the embedded resource's contents (the schema has them on
    # the EmbeddedResource itself).
    ("2025-06-18/server/tools.mdx", "resource"),
    ("2025-11-25/server/tools.mdx", "resource"),
}

READABLE = [(ex, spec) for ex in EXAMPLES if (spec := _spec_for(ex)) is not None]


def test_the_spec_pages_provide_enough_examples() -> None:
    classes = {spec[0] for _, spec in READABLE if spec[0] is not None}
    assert len(READABLE) > 200
    must = {
        t.InitializeRequestParams,
        t.InitializeResult,
        t.ListToolsResult,
        t.CallToolRequestParams,
        t.CallToolResult,
        t.ListResourcesResult,
        t.ReadResourceResult,
        t.ListResourceTemplatesResult,
        t.ListPromptsResult,
        t.GetPromptResult,
        t.CompleteRequestParams,
        t.CompleteResult,
        t.CreateMessageRequestParams,
        t.CreateMessageResult,
        t.ElicitRequestParams,
        t.ElicitResult,
        t.ListRootsResult,
        t.ProgressNotificationParams,
        t.CancelledNotificationParams,
        t.LoggingMessageNotificationParams,
        t.SetLevelRequestParams,
        t.Tool,
        t.ServerCapabilities,
        t.ClientCapabilities,
    }
    assert must <= classes, must - classes


@pytest.mark.parametrize(("example", "spec"), READABLE, ids=[_example_id(e) for e, _ in READABLE])
def test_spec_example_round_trips(example: Example, spec: tuple[Any, Any, str]) -> None:
    cls, data, sender = spec
    if data is None:
        assert cls is None or all(f.default is not attrs.NOTHING for f in attrs.fields(cls))
        return
    original = copy.deepcopy(data)
    target: Any = t.ContentBlock if sender == "content" else cls
    obj = structure(data, target)
    if (example.where, data.get("type")) in PAGE_DEVIATIONS:
        with pytest.raises(cattrs.BaseValidationError):
            STRICT.structure(data, target)
        return
    # The strict converter refuses unknown keys: our classes cover every field shown.
    STRICT.structure(data, target)
    assert unstructure(obj, example.revision) == original
    assert data == original, "structuring must not modify its input"
    if "jsonrpc" in example.data and sender in ("client", "server"):
        key = "result" if "result" in example.data else "params"
        message = {**example.data, key: unstructure(obj, example.revision)}
        direction: Literal["client", "server"] = "client" if sender == "client" else "server"
        validate_outgoing(
            message, example.revision, direction=direction, answers_method=example.answers
        )


# --- what we send depends on the revision --------------------------------------------------

ICON = t.Icon(src="https://example.com/icon.png", mime_type="image/png", sizes=["48x48"])


def _full_tool() -> t.Tool:
    return t.Tool(
        name="get_weather",
        title="Weather",
        description="Get the weather",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        output_schema={"type": "object"},
        annotations=t.ToolAnnotations(read_only_hint=True),
        execution=t.ToolExecution(task_support="optional"),
        icons=[ICON],
        meta={"vendor/x": 1},
    )


@pytest.mark.parametrize(
    ("revision", "keys"),
    [
        ("2024-11-05", {"name", "description", "inputSchema"}),
        ("2025-03-26", {"name", "description", "inputSchema", "annotations"}),
        (
            "2025-06-18",
            {"name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta"},
        ),
        (
            "2025-11-25",
            {
                "name",
                "title",
                "description",
                "inputSchema",
                "outputSchema",
                "annotations",
                "execution",
                "icons",
                "_meta",
            },
        ),
    ],
)
def test_fields_newer_than_the_revision_are_omitted(revision: str, keys: set[str]) -> None:
    assert set(unstructure(_full_tool(), revision)) == keys


def _every_capability() -> t.ClientCapabilities:
    return t.ClientCapabilities(
        experimental={"vendor.feature": {"on": True}},
        roots=t.RootsCapability(list_changed=True),
        sampling=t.SamplingCapability(context={}, tools={}),
        elicitation=t.ElicitationCapability(form={}, url={}),
        tasks={"list": {}, "cancel": {}, "requests": {"sampling": {"createMessage": {}}}},
    )


@pytest.mark.parametrize("revision", STATEFUL)
def test_initialize_with_every_capability_fits_each_schema(revision: str) -> None:
    params = t.InitializeRequestParams(
        protocol_version=revision,
        capabilities=_every_capability(),
        client_info=t.Implementation(
            name="agenthost",
            version="0.1.0",
            title="agenthost",
            description="An MCP host",
            icons=[ICON],
            website_url="https://example.com",
        ),
    )
    wire = unstructure(params, revision)
    validate_outgoing(
        {"jsonrpc": "2.0", "id": 1, "method": methods.INITIALIZE, "params": wire}, revision
    )
    caps = wire["capabilities"]
    assert caps["roots"] == {"listChanged": True}
    assert ("elicitation" in caps) == (revision >= "2025-06-18")
    assert ("tasks" in caps) == (revision >= "2025-11-25")
    assert caps["sampling"] == ({"context": {}, "tools": {}} if revision >= "2025-11-25" else {})
    info = wire["clientInfo"]
    assert ("title" in info) == (revision >= "2025-06-18")
    assert ("icons" in info) == ("websiteUrl" in info) == (revision >= "2025-11-25")


@pytest.mark.parametrize("revision", STATEFUL)
def test_messages_a_client_sends_fit_each_schema(revision: str) -> None:
    def send(method: str, params: Any, **kwargs: Any) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if "answers_method" in kwargs:
            message = {"jsonrpc": "2.0", "id": "r1", "result": unstructure(params, revision)}
        else:
            message["id"] = 7
            if params is not None:
                message["params"] = unstructure(params, revision)
            if kwargs.pop("notification", False):
                del message["id"]
        validate_outgoing(message, revision, **kwargs)

    send(
        methods.TOOLS_CALL,
        t.CallToolRequestParams(name="x", arguments={"a": [1]}, meta={"progressToken": 3}),
    )
    send(methods.TOOLS_LIST, t.PaginatedRequestParams(cursor="c2"))
    send(methods.PING, None)
    send(methods.PROMPTS_GET, t.GetPromptRequestParams(name="p", arguments={"k": "v"}))
    send(methods.RESOURCES_READ, t.ReadResourceRequestParams(uri="file:///a"))
    send(methods.RESOURCES_SUBSCRIBE, t.SubscribeRequestParams(uri="file:///a"))
    send(methods.LOGGING_SET_LEVEL, t.SetLevelRequestParams(level="warning"))
    send(
        methods.COMPLETION_COMPLETE,
        t.CompleteRequestParams(
            ref=t.ResourceTemplateReference(uri="file:///{path}"),
            argument=t.CompletionArgument(name="path", value="sr"),
            context=t.CompletionContext(arguments={"root": "/"}),
        ),
    )
    send(
        methods.NOTIFICATION_CANCELLED,
        t.CancelledNotificationParams(request_id=7, reason="user"),
        notification=True,
    )
    send(
        methods.NOTIFICATION_PROGRESS,
        t.ProgressNotificationParams(progress_token="tok", progress=1, total=2, message="half"),
        notification=True,
    )
    send(methods.NOTIFICATION_INITIALIZED, None, notification=True)
    send(
        methods.ROOTS_LIST,
        t.ListRootsResult(roots=[t.Root(uri="file:///w", name="w", meta={"k": 1})]),
        answers_method=methods.ROOTS_LIST,
    )
    send(methods.PING, t.EmptyResult(), answers_method=methods.PING)
    send(
        methods.SAMPLING_CREATE_MESSAGE,
        t.CreateMessageResult(
            role="assistant",
            content=t.TextContent(
                text="hi",
                annotations=t.Annotations(audience=["user"], last_modified="2025-01-01T00:00:00Z"),
            ),
            model="claude",
            stop_reason="endTurn",
        ),
        answers_method=methods.SAMPLING_CREATE_MESSAGE,
    )
    if revision >= "2025-06-18":
        send(
            methods.ELICITATION_CREATE,
            t.ElicitResult(action="accept", content={"name": "x", "n": 3, "ok": True}),
            answers_method=methods.ELICITATION_CREATE,
        )


@pytest.mark.parametrize(
    ("obj", "newest_refusing"),
    [
        (t.AudioContent(data=b"RIFF", mime_type="audio/wav"), "2024-11-05"),
        (t.ResourceLink(uri="file:///a", name="a"), "2025-03-26"),
        (t.ToolUseContent(id="u1", name="echo", input={}), "2025-06-18"),
        (t.ToolResultContent(tool_use_id="u1", content=[t.TextContent(text="ok")]), "2025-06-18"),
        (t.ElicitResult(action="decline"), "2025-03-26"),
        (t.CallToolRequestParams(name="x", task=t.TaskMetadata(ttl=1000)), "2025-06-18"),
        (
            t.ElicitRequestParams(mode="url", message="m", url="https://x", elicitation_id="e"),
            "2025-06-18",
        ),
        (
            t.CreateMessageRequestParams(
                messages=[], max_tokens=10, tools=[t.Tool(name="x", input_schema={})]
            ),
            "2025-06-18",
        ),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else v,
)
def test_objects_a_revision_cannot_express_are_refused(obj: Any, newest_refusing: str) -> None:
    for revision in STATEFUL:
        if revision <= newest_refusing:
            with pytest.raises(ProtocolError, match=re.escape(revision)) as info:
                unstructure(obj, revision)
            assert type(obj).__name__ in str(info.value)
        else:
            assert isinstance(unstructure(obj, revision), dict)


def test_refusal_reaches_nested_content() -> None:
    result = t.CallToolResult(
        content=[t.TextContent(text="a"), t.AudioContent(data=b"x", mime_type="audio/wav")]
    )
    with pytest.raises(ProtocolError, match=r"AudioContent.*2024-11-05"):
        unstructure(result, "2024-11-05")
    assert unstructure(result, "2025-03-26")["content"][1] == {
        "type": "audio",
        "data": "eA==",
        "mimeType": "audio/wav",
    }


def test_sampling_content_lists_before_2025_11_25() -> None:
    one = t.CreateMessageResult(role="assistant", content=[t.TextContent(text="hi")], model="m")
    assert unstructure(one, "2025-06-18")["content"] == {"type": "text", "text": "hi"}
    assert unstructure(one, "2025-11-25")["content"] == [{"type": "text", "text": "hi"}]
    two = attrs.evolve(one, content=[t.TextContent(text="a"), t.TextContent(text="b")])
    with pytest.raises(ProtocolError, match="2 blocks"):
        unstructure(two, "2025-06-18")


def test_unknown_revision_is_refused() -> None:
    with pytest.raises(UnsupportedRevision):
        unstructure(t.EmptyResult(), "2023-01-01")


def test_stateless_revision_is_reserved_not_refused() -> None:
    assert unstructure(t.Tool(name="x", input_schema={}, title="X"), "2026-07-28") == {
        "name": "x",
        "title": "X",
        "inputSchema": {},
    }


# --- receiving is lenient where it may be -------------------------------------------------


def test_unknown_fields_and_result_type_are_tolerated() -> None:
    result = structure(
        {
            "content": [{"type": "text", "text": "hi", "futureField": 1}],
            "resultType": "complete",
            "somethingNew": {"x": 1},
        },
        t.CallToolResult,
    )
    assert result == t.CallToolResult(content=[t.TextContent(text="hi")])


def test_unknown_content_type_is_kept_whole() -> None:
    raw = {"type": "hologram", "frames": [1, 2], "_meta": {"a": 1}}
    result = structure(
        {"content": [{"type": "text", "text": "a"}, raw], "isError": False}, t.CallToolResult
    )
    assert result.content[0] == t.TextContent(text="a")
    assert result.content[1] == t.UnknownContent(type="hologram", raw=raw)
    assert unstructure(result, "2025-11-25")["content"][1] == raw


def test_unknown_content_without_a_string_type_is_an_error() -> None:
    with pytest.raises(ProtocolError, match=r"\$\.content\[0\]"):
        structure({"content": [{"type": 3}]}, t.CallToolResult)


def test_capability_extras_are_kept_and_sent_back() -> None:
    wire = {
        "tools": {"listChanged": True, "streaming": {"v": 2}},
        "extensions": {"io.example/ui": {}},
        "logging": {"levels": ["debug"]},
    }
    caps = structure(wire, t.ServerCapabilities)
    assert caps.tools == t.ToolsCapability(list_changed=True, extra={"streaming": {"v": 2}})
    assert caps.extra == {"extensions": {"io.example/ui": {}}}
    assert caps.logging == {"levels": ["debug"]}
    assert unstructure(caps, "2025-11-25") == wire


def test_meta_is_kept_both_ways() -> None:
    meta = {"progressToken": "p1", "io.example/trace": {"id": 9}}
    params = structure({"name": "echo", "_meta": meta}, t.CallToolRequestParams)
    assert params.meta == meta
    assert unstructure(params, "2024-11-05") == {"name": "echo", "_meta": meta}


def test_bytes_are_base64_on_the_wire() -> None:
    payload = bytes(range(256))
    encoded = base64.b64encode(payload).decode()
    image = structure({"type": "image", "data": encoded, "mimeType": "image/png"}, t.ImageContent)
    assert image.data == payload
    assert unstructure(image, "2025-06-18")["data"] == encoded
    blob = structure({"uri": "file:///b", "blob": encoded}, t.BlobResourceContents)
    assert unstructure(blob, "2024-11-05") == {"uri": "file:///b", "blob": encoded}


def test_resource_contents_pick_text_or_blob() -> None:
    result = structure(
        {"contents": [{"uri": "a", "text": "t"}, {"uri": "b", "blob": "AA==", "mimeType": "x/y"}]},
        t.ReadResourceResult,
    )
    assert result.contents == [
        t.TextResourceContents(uri="a", text="t"),
        t.BlobResourceContents(uri="b", blob=b"\0", mime_type="x/y"),
    ]


def test_completion_reference_is_tagged_on_type() -> None:
    params = structure(
        {
            "ref": {"type": "ref/resource", "uri": "file:///{p}"},
            "argument": {"name": "p", "value": ""},
        },
        t.CompleteRequestParams,
    )
    assert params.ref == t.ResourceTemplateReference(uri="file:///{p}")
    with pytest.raises(ProtocolError, match="ref/tool"):
        structure(
            {"ref": {"type": "ref/tool"}, "argument": {"name": "p", "value": ""}},
            t.CompleteRequestParams,
        )


def test_sampling_content_single_or_list() -> None:
    single = structure(
        {"role": "user", "content": {"type": "text", "text": "q"}}, t.SamplingMessage
    )
    assert single.content == t.TextContent(text="q")
    many = structure(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "u1", "name": "w", "input": {"c": "P"}},
                {
                    "type": "tool_result",
                    "toolUseId": "u1",
                    "content": [{"type": "text", "text": "r"}],
                },
            ],
        },
        t.SamplingMessage,
    )
    assert many.content == [
        t.ToolUseContent(id="u1", name="w", input={"c": "P"}),
        t.ToolResultContent(tool_use_id="u1", content=[t.TextContent(text="r")]),
    ]


# --- receiving refuses data that does not fit ---------------------------------------------


@pytest.mark.parametrize(
    ("data", "cls", "fragment"),
    [
        ({"content": [{"type": "text", "text": 3}]}, t.CallToolResult, r"\$\.content\[0\]\.text"),
        ({"content": [{"type": "text"}]}, t.CallToolResult, "required field missing"),
        ({"content": "text"}, t.CallToolResult, "expected an array"),
        (
            {"content": [{"type": "image", "data": "***", "mimeType": "i/p"}]},
            t.CallToolResult,
            "base64",
        ),
        ({"tools": [{"name": "x"}]}, t.ListToolsResult, r"inputSchema"),
        ({"tools": [{"name": "x", "inputSchema": []}]}, t.ListToolsResult, "expected an object"),
        ({"progressToken": "t", "progress": "50%"}, t.ProgressNotificationParams, "number"),
        ({"progressToken": "t", "progress": True}, t.ProgressNotificationParams, "number"),
        ({"completion": {"values": ["a"], "total": "9"}}, t.CompleteResult, "integer"),
        ({"level": "loud", "data": 1}, t.LoggingMessageNotificationParams, "level"),
        ({"role": "robot", "content": {"type": "text", "text": ""}}, t.PromptMessage, "role"),
        ({"isError": "yes"}, t.CallToolResult, "boolean"),
        (None, t.EmptyResult, "expected an object, got null"),
        ([1], t.InitializeResult, "expected an object, got an array"),
        ({"protocolVersion": "2025-06-18", "capabilities": {}}, t.InitializeResult, "serverInfo"),
    ],
)
def test_data_that_does_not_fit_is_a_protocol_error(data: Any, cls: type, fragment: str) -> None:
    with pytest.raises(ProtocolError) as info:
        structure(data, cls)
    assert info.value.code == -32602
    assert re.search(fragment, str(info.value)), str(info.value)
    assert str(info.value).startswith(f"invalid {cls.__name__}")


def test_error_messages_list_every_problem() -> None:
    with pytest.raises(ProtocolError) as info:
        structure({"content": [{"type": "text"}, {"type": "image"}]}, t.CallToolResult)
    text = str(info.value)
    assert "$.content[0].text" in text
    assert "$.content[1].data" in text


# --- schemacheck itself --------------------------------------------------------------------


@pytest.mark.parametrize("revision", STATEFUL)
def test_schemacheck_accepts_good_client_messages(revision: str) -> None:
    validate_outgoing({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, revision)
    validate_outgoing({"jsonrpc": "2.0", "id": "a", "method": "ping"}, revision)
    validate_outgoing({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}, revision)
    validate_outgoing({"jsonrpc": "2.0", "id": 1, "result": {}}, revision, answers_method="ping")
    validate_outgoing({"jsonrpc": "2.0", "id": 1, "result": {"roots": []}}, revision)
    validate_outgoing(
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}}, revision
    )
    validate_outgoing(
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        revision,
        direction="server",
    )


@pytest.mark.parametrize("revision", STATEFUL)
@pytest.mark.parametrize(
    ("message", "answers", "fragment"),
    [
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}},
            None,
            "'name' is a required",
        ),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}, None, "'params' is a required"),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None, r"\$\.id"),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage", "params": {}},
            None,
            "not a ClientRequest",
        ),
        (
            {"jsonrpc": "2.0", "method": "notifications/message", "params": {}},
            None,
            "not a ClientNotification",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "result": {"roots": [{"name": "x"}]}},
            "roots/list",
            "'uri' is a required",
        ),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {"role": "bot", "content": {"type": "text", "text": ""}, "model": "m"},
            },
            "sampling/createMessage",
            r"\$\.role",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}},
            None,
            r"\$\.error\.code",
        ),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, None, "JSON-RPC 2.0"),
        ({"jsonrpc": "2.0", "id": 1}, None, "neither"),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, "tools/call", "never answers"),
    ],
)
def test_schemacheck_rejects_bad_client_messages(
    revision: str, message: dict[str, Any], answers: str | None, fragment: str
) -> None:
    with pytest.raises(AssertionError, match=fragment):
        validate_outgoing(message, revision, answers_method=answers)


def test_schemacheck_knows_what_each_revision_has() -> None:
    elicit = {"jsonrpc": "2.0", "id": 1, "result": {"action": "accept", "content": {}}}
    validate_outgoing(elicit, "2025-06-18", answers_method="elicitation/create")
    with pytest.raises(AssertionError, match="no result ElicitResult"):
        validate_outgoing(elicit, "2025-03-26", answers_method="elicitation/create")
    with pytest.raises(AssertionError, match="no schema"):
        validate_outgoing({"jsonrpc": "2.0", "id": 1, "method": "ping"}, "2023-01-01")
    assert Path(SPEC_DIR, "2024-11-05", "schema.json").is_file()


# --- property: what we send, we read back as the same object ------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_blocks = st.one_of(
    st.builds(t.TextContent, text=st.text()),
    st.builds(t.ImageContent, data=st.binary(), mime_type=st.just("image/png")),
    st.builds(
        t.EmbeddedResource,
        resource=st.builds(t.BlobResourceContents, uri=st.just("file:///b"), blob=st.binary()),
    ),
)


@hypothesis.given(
    content=st.lists(_blocks, max_size=4),
    is_error=st.none() | st.booleans(),
    meta=st.none() | st.dictionaries(st.text(max_size=5), _json, max_size=3),
    structured=st.none() | st.dictionaries(st.text(max_size=5), _json, max_size=3),
)
def test_call_tool_result_round_trips(
    content: list[Any], is_error: bool | None, meta: Any, structured: Any
) -> None:
    result = t.CallToolResult(
        content=content, is_error=is_error, meta=meta, structured_content=structured
    )
    wire = json.loads(json.dumps(unstructure(result, "2025-11-25")))
    assert structure(wire, t.CallToolResult) == result
