"""The MCP types and method table, checked against the official schema.json files.

The revision facts on the classes (``__mcp_since__``, per-field ``since``) and the method
table are data the converter trusts blindly, so they are re-derived here from the schemas:
for every class and every revision, the wire fields we would send must be exactly the
properties that revision's schema defines.
"""

from __future__ import annotations

import re
from typing import Any

import attrs
import pytest

from agenthost.protocol import methods, revisions
from agenthost.protocol import types as t
from agenthost.protocol.types._base import SINCE, wire_name
from tests.schemacheck import load_schema

STATEFUL = tuple(reversed(revisions.SUPPORTED_REVISIONS))  # oldest first
MODERN = tuple(reversed(revisions.MODERN_REVISIONS))

#: Where each class lives in the schemas: a definition name, or a path
#: ``Definition/property/...`` through ``properties``; the first that exists is used.
LOCATIONS: dict[str, tuple[str, ...]] = {
    "Annotations": ("Annotations", "TextContent/annotations"),
    "InitializeRequestParams": ("InitializeRequestParams", "InitializeRequest/params"),
    "CallToolRequestParams": ("CallToolRequestParams", "CallToolRequest/params"),
    "CompleteRequestParams": ("CompleteRequestParams", "CompleteRequest/params"),
    "CompletionArgument": ("CompleteRequestParams/argument", "CompleteRequest/params/argument"),
    "CompletionContext": ("CompleteRequestParams/context", "CompleteRequest/params/context"),
    "Completion": ("CompleteResult/completion",),
    "GetPromptRequestParams": ("GetPromptRequestParams", "GetPromptRequest/params"),
    "ReadResourceRequestParams": ("ReadResourceRequestParams", "ReadResourceRequest/params"),
    "SubscribeRequestParams": ("SubscribeRequestParams", "SubscribeRequest/params"),
    "UnsubscribeRequestParams": ("UnsubscribeRequestParams", "UnsubscribeRequest/params"),
    "SetLevelRequestParams": ("SetLevelRequestParams", "SetLevelRequest/params"),
    "PaginatedRequestParams": ("PaginatedRequestParams", "PaginatedRequest/params"),
    "TaskRequestParams": ("GetTaskRequest/params",),
    "CreateMessageRequestParams": ("CreateMessageRequestParams", "CreateMessageRequest/params"),
    "ElicitRequestParams": ("ElicitRequestParams", "ElicitRequest/params"),
    "ProgressNotificationParams": ("ProgressNotificationParams", "ProgressNotification/params"),
    "CancelledNotificationParams": (
        "CancelledNotificationParams",
        "CancelledNotification/params",
    ),
    "LoggingMessageNotificationParams": (
        "LoggingMessageNotificationParams",
        "LoggingMessageNotification/params",
    ),
    "ResourceUpdatedNotificationParams": (
        "ResourceUpdatedNotificationParams",
        "ResourceUpdatedNotification/params",
    ),
    "ElicitationCompleteNotificationParams": ("ElicitationCompleteNotification/params",),
    "ResourceTemplateReference": ("ResourceTemplateReference", "ResourceReference"),
    "RootsCapability": ("ClientCapabilities/roots",),
    "SamplingCapability": ("ClientCapabilities/sampling",),
    "ElicitationCapability": ("ClientCapabilities/elicitation",),
    "PromptsCapability": ("ServerCapabilities/prompts",),
    "ResourcesCapability": ("ServerCapabilities/resources",),
    "ToolsCapability": ("ServerCapabilities/tools",),
}

#: Classes with no schema counterpart.
#: No schema counterpart: open content, and the 2026-07-28 tasks extension's own params.
UNMODELLED = {"UnknownContent", "UpdateTaskRequestParams"}


def _public_classes() -> list[type]:
    return [
        obj for name in t.__all__ if isinstance(obj := getattr(t, name), type) and attrs.has(obj)
    ]


def _defs(revision: str) -> dict[str, Any]:
    schema = load_schema(revision)
    defs: dict[str, Any] = schema.get("$defs") or schema["definitions"]
    return defs


def _resolve(defs: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
    return node


def _locate(defs: dict[str, Any], name: str) -> dict[str, Any] | None:
    for path in LOCATIONS.get(name, (name,)):
        head, *rest = path.split("/")
        node: dict[str, Any] | None = defs.get(head)
        for prop in rest:
            if node is None:
                break
            node = _properties(defs, node).get(prop)
        if node is not None:
            return _resolve(defs, node)
    return None


def _properties(defs: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """All properties of a schema node, merging allOf/anyOf members (e.g. the form and
    URL variants of ElicitRequestParams)."""
    node = _resolve(defs, node)
    props = dict(node.get("properties", {}))
    for key in ("allOf", "anyOf"):
        for member in node.get(key, []):
            member = _resolve(defs, member)
            if member.get("type", "object") == "object":
                props.update(_properties(defs, member))
    return props


def _wire_fields(cls: type, revision: str) -> set[str]:
    return {
        wire_name(f)
        for f in attrs.fields(cls)
        if f.name != "extra" and f.metadata.get(SINCE, STATEFUL[0]) <= revision
    }


@pytest.mark.parametrize("cls", _public_classes(), ids=lambda c: c.__name__)
def test_revision_facts_match_the_schemas(cls: type) -> None:
    if cls.__name__ in UNMODELLED:
        pytest.skip("no schema counterpart")
    first_seen = None
    since = getattr(cls, "__mcp_since__", STATEFUL[0])
    # A modern-only class (2026-07-28 on) is checked against the modern schemas.
    checked = MODERN if revisions.is_modern(since) else STATEFUL
    for revision in checked:
        defs = _defs(revision)
        node = _locate(defs, cls.__name__)
        if node is None:
            continue
        first_seen = first_seen or revision
        expected = set(_properties(defs, node))
        if cls.__name__.endswith("Params"):
            # Every request/notification params object may carry _meta (base Request).
            expected.add("_meta")
        assert _wire_fields(cls, revision) == expected, revision
    assert first_seen is not None, f"{cls.__name__} is in no schema"
    assert since == first_seen


@pytest.mark.parametrize("cls", _public_classes(), ids=lambda c: c.__name__)
def test_classes_are_frozen_keyword_only_snake_case(cls: type) -> None:
    assert attrs.has(cls)
    params = attrs.fields(cls)
    assert all(f.kw_only for f in params)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", f.name) for f in params)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        instance = object.__new__(cls)
        instance.__setattr__(params[0].name, None)
    if cls.__name__.endswith(("Params", "Result")):
        assert "meta" in attrs.fields_dict(cls), "params/results carry _meta"


def test_optional_fields_default_to_none() -> None:
    tool = t.Tool(name="echo", input_schema={"type": "object"})
    assert tool.title is None
    assert tool.annotations is None
    assert tool.meta is None
    assert t.ClientCapabilities().extra == {}


def test_revisions() -> None:
    assert revisions.SUPPORTED_REVISIONS == ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    assert revisions.LATEST_REVISION == "2025-11-25"
    assert revisions.is_supported("2025-03-26")
    assert not revisions.is_supported("2026-07-28")
    assert not revisions.is_supported("2025-01-01")
    assert revisions.at_least("2025-06-18", "2025-03-26")
    assert revisions.at_least("2025-06-18", "2025-06-18")
    assert not revisions.at_least("2024-11-05", "2025-03-26")
    assert sorted(revisions.SUPPORTED_REVISIONS, reverse=True) == list(
        revisions.SUPPORTED_REVISIONS
    )


def _schema_methods(revision: str, union: str) -> set[str]:
    defs = _defs(revision)
    out = set()
    for member in defs[union]["anyOf"]:
        node = _resolve(defs, member)
        out.add(node["properties"]["method"]["const"])
    return out


@pytest.mark.parametrize("revision", STATEFUL)
@pytest.mark.parametrize(
    ("table", "union"),
    [
        (methods.CLIENT_REQUESTS, "ClientRequest"),
        (methods.SERVER_REQUESTS, "ServerRequest"),
        (methods.CLIENT_NOTIFICATIONS, "ClientNotification"),
        (methods.SERVER_NOTIFICATIONS, "ServerNotification"),
    ],
)
def test_method_table_matches_the_schema(revision: str, table: dict[str, Any], union: str) -> None:
    ours = {name for name, spec in table.items() if spec.since <= revision}
    theirs = _schema_methods(revision, union)
    assert ours <= theirs
    # Everything the schema has that we do not model is a task method (2025-11-25).
    assert all("tasks" in name for name in theirs - ours), theirs - ours


@pytest.mark.parametrize("revision", STATEFUL)
def test_method_specs_name_the_schema_definitions(revision: str) -> None:
    defs = _defs(revision)
    for table in (methods.CLIENT_REQUESTS, methods.SERVER_REQUESTS):
        for spec in table.values():
            if spec.since <= revision:
                assert spec.result.__name__ in defs, spec.method


def test_method_lookup() -> None:
    spec = methods.request_spec(methods.TOOLS_CALL)
    assert spec is methods.TOOLS_CALL_SPEC
    assert spec is not None
    assert spec.params is t.CallToolRequestParams
    assert spec.result is t.CallToolResult
    assert methods.request_spec(methods.SAMPLING_CREATE_MESSAGE) is None
    assert methods.request_spec(methods.SAMPLING_CREATE_MESSAGE, from_server=True) is (
        methods.SAMPLING_CREATE_MESSAGE_SPEC
    )
    assert methods.ELICITATION_CREATE_SPEC.since == "2025-06-18"
    note = methods.notification_spec(methods.NOTIFICATION_MESSAGE)
    assert note is not None
    assert note.params is t.LoggingMessageNotificationParams
    assert methods.notification_spec(methods.NOTIFICATION_INITIALIZED) is None
    assert methods.notification_spec(methods.NOTIFICATION_INITIALIZED, from_server=False)


def test_types_have_value_equality_hashing_and_repr() -> None:
    """Record's hand-written methods mean what attrs' generated ones would."""
    from agenthost.protocol.types import ImageContent, TextContent, Tool

    a, b = TextContent(text="hi"), TextContent(text="hi")
    assert a == b and hash(a) == hash(b)
    assert a != TextContent(text="ho")
    assert a != ImageContent(data=b"hi", mime_type="image/png")
    assert (a == "hi") is False
    assert {a, b} == {a}
    assert repr(a).startswith("TextContent(") and "text='hi'" in repr(a)
    tool = Tool(name="t", input_schema={"type": "object"})
    with pytest.raises(TypeError, match="unhashable"):
        hash(tool)  # a dict field: unhashable, as with attrs
