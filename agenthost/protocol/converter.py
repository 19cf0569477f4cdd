"""The one converter between plain JSON values and :mod:`agenthost.protocol.types` objects.

Receive (:func:`structure`) is lenient, because servers are often newer than we are:
unknown keys are ignored (kept in ``extra`` on capability objects), a content block of an
unknown ``type`` becomes :class:`~agenthost.protocol.types.UnknownContent`, and a result's
``resultType`` (2026-07-28) is simply not read. Data that does not fit (a missing required
field, a string where a number belongs, bad base64) raises
:class:`~agenthost.errors.ProtocolError` with code -32602 and a readable path.

Send (:func:`unstructure`) is exact: the negotiated revision decides what goes out. A
field newer than the revision is left out (``title`` before 2025-06-18); an object the
revision cannot express (``AudioContent`` before 2025-03-26) is refused with
``ProtocolError``. The revision facts are metadata on the classes
(:mod:`agenthost.protocol.types._base`); each revision gets its own cattrs converter, built once
and cached, whose generated hooks already omit or refuse, so sending costs what a plain
cattrs unstructure costs.

Wire conventions: camelCase keys, ``meta`` <-> ``_meta``, ``None`` never sent, ``bytes``
as standard base64, content blocks a union tagged on ``"type"`` resolved with one dict
lookup. Raw JSON members (``dict[str, Any]``, ``Any``) pass through without copying:
the dicts inside a structured object are the ones that were decoded, so treat them as
read-only.

Structuring runs a converter without detailed validation (fast); only when that fails is
the input structured again with detailed validation, to render the error with
``cattrs.transform_error``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping, Sequence
from types import UnionType
from typing import Any, Final, Literal, TypeVar, Union, get_args, get_origin, overload

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.orjson import make_converter as _make_orjson_converter
from cattrs.v import format_exception

from agenthost.errors import ProtocolError, UnsupportedRevision
from agenthost.protocol import types as t
from agenthost.protocol.revisions import REVISIONS, at_least
from agenthost.protocol.types._base import SINCE, STRICT, Record, wire_name

__all__ = ["INVALID_PARAMS", "make_converter", "structure", "unstructure"]

T = TypeVar("T")

#: JSON-RPC "invalid params": what the peer sent does not fit the method's types.
INVALID_PARAMS: Final = -32602

_KNOWN_REVISIONS: Final = frozenset(REVISIONS)
_MAX_ERROR_LINES: Final = 8

_CONTENT_BLOCK_MEMBERS: Final = (
    t.TextContent,
    t.ImageContent,
    t.AudioContent,
    t.ResourceLink,
    t.EmbeddedResource,
)
_SAMPLING_MEMBERS: Final = (
    t.TextContent,
    t.ImageContent,
    t.AudioContent,
    t.ToolUseContent,
    t.ToolResultContent,
)
_REFERENCE_MEMBERS: Final = (t.PromptReference, t.ResourceTemplateReference)


# --- primitives: strict types (cattrs would otherwise coerce 42 into "42") ----------------


class _Invalid(ValueError):
    """A value of the wrong JSON type or form; its message is shown as is."""


def _format_error(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, _Invalid):
        return str(exc)
    return format_exception(exc, type_)


def _json_type(value: Any) -> str:
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


_JSON_TYPE_NAMES: Final[dict[type, str]] = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def _structure_str(value: Any, _: Any) -> str:
    if type(value) is str:
        return value
    raise _Invalid(f"expected a string, got {_json_type(value)}")


def _structure_int(value: Any, _: Any) -> int:
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    raise _Invalid(f"expected an integer, got {_json_type(value)}")


def _structure_float(value: Any, _: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise _Invalid(f"expected a number, got {_json_type(value)}")


def _structure_bool(value: Any, _: Any) -> bool:
    if type(value) is bool:
        return value
    raise _Invalid(f"expected a boolean, got {_json_type(value)}")


def _structure_bytes(value: Any, _: Any) -> bytes:
    if type(value) is not str:
        raise _Invalid(f"expected a base64 string, got {_json_type(value)}")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        raise _Invalid(f"not valid base64 ({exc})") from None


def _unstructure_bytes(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _structure_raw_object(value: Any, _: Any) -> dict[str, Any]:
    if type(value) is dict:
        return value
    raise _Invalid(f"expected an object, got {_json_type(value)}")


def _strict_list(tp: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """cattrs accepts any iterable as a list (a string, a dict); JSON wants an array.

    Without detailed validation the element hook is called directly (one function per
    list, not cattrs' two): every tool result's ``content`` passes through here.
    """
    if conv.detailed_validation:
        items = list_structure_factory(tp, conv)

        def structure_detailed(value: Any, cl: Any) -> Any:
            if type(value) is not list:
                raise _Invalid(f"expected an array, got {_json_type(value)}")
            return items(value, cl)

        return structure_detailed
    args = get_args(tp)
    elem: Any = args[0] if args else Any
    try:
        handler = conv.get_structure_hook(elem)
    except RecursionError:  # a recursive type: bind late
        handler = conv.structure

    def structure_list(value: Any, _: Any) -> Any:
        if type(value) is not list:
            raise _Invalid(f"expected an array, got {_json_type(value)}")
        return [handler(item, elem) for item in value]

    return structure_list


def _is_optional(tp: Any) -> bool:
    origin = get_origin(tp)
    return (origin is Union or origin is UnionType) and type(None) in get_args(tp)


def _optional(tp: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """``T | None`` with T's hook looked up once, not per value (cattrs' own Optional
    hook dispatches on every call: a third of the cost of structuring a tool result)."""
    rest = tuple(a for a in get_args(tp) if a is not type(None))
    inner: Any = rest[0] if len(rest) == 1 else Union[rest]  # noqa: UP007
    try:
        hook = conv.get_structure_hook(inner)
    except RecursionError:  # a recursive type: bind late
        hook = conv.structure

    def structure_optional(value: Any, _: Any) -> Any:
        return None if value is None else hook(value, inner)

    return structure_optional


def _literal(tp: Any) -> Callable[[Any, Any], Any]:
    allowed = frozenset(get_args(tp))
    shown = ", ".join(repr(v) for v in get_args(tp))

    def structure_literal(value: Any, _: Any) -> Any:
        if type(value) is str and value in allowed:
            return value
        raise _Invalid(f"expected one of {shown}, got {value!r}")

    return structure_literal


def _is_str_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal and all(type(v) is str for v in get_args(tp))


def _identity(value: Any, _: Any = None) -> Any:
    return value


# --- hook factories ------------------------------------------------------------------------


def _class_since(cls: type) -> str | None:
    since: str | None = getattr(cls, "__mcp_since__", None)
    return since


def _refuse(what: str, revision: str, since: str) -> Callable[[Any], Any]:
    def refuse(_: Any) -> Any:
        raise ProtocolError(
            f"{what} cannot be sent in MCP revision {revision} (it exists since {since})",
            code=INVALID_PARAMS,
        )

    return refuse


def _renames(cls: type) -> dict[str, Any]:
    return {f.name: override(rename=wire_name(f)) for f in attrs.fields(cls)}


def _is(alias: Any) -> Callable[[Any], bool]:
    """A predicate matching one type alias (a union) wherever it is used."""
    return lambda tp: bool(tp == alias)


def _is_list(tp: Any) -> bool:
    origin: Any = get_origin(tp)
    return origin is list


def _has_extra(cls: type) -> bool:
    return any(f.name == "extra" for f in attrs.fields(cls))


def _structure_factory(conv: cattrs.Converter) -> Callable[[type], Any]:
    def factory(cls: type) -> Any:
        overrides = _renames(cls)
        if not _has_extra(cls):
            return make_dict_structure_fn(cls, conv, **overrides)
        overrides["extra"] = override(omit=True)
        base: Callable[[Any, Any], Any] = make_dict_structure_fn(
            cls, conv, _cattrs_forbid_extra_keys=False, **overrides
        )
        known = frozenset(wire_name(f) for f in attrs.fields(cls) if f.name != "extra")

        def structure_keeping_extra(data: Mapping[str, Any], cl: Any) -> Any:
            obj = base(data, cl)
            extra = {k: v for k, v in data.items() if k not in known}
            return attrs.evolve(obj, extra=extra) if extra else obj

        return structure_keeping_extra

    return factory


def _unstructure_factory(conv: cattrs.Converter, revision: str | None) -> Callable[[type], Any]:
    def factory(cls: type) -> Any:
        cls_since = _class_since(cls)
        if revision is not None and cls_since is not None and not at_least(revision, cls_since):
            return _refuse(cls.__name__, revision, cls_since)
        overrides: dict[str, Any] = {}
        for f in attrs.fields(cls):
            if f.name == "extra":
                overrides[f.name] = override(omit=True)
                continue
            field_since = f.metadata.get(SINCE)
            if (
                revision is not None
                and field_since is not None
                and not at_least(revision, field_since)
            ):
                if f.metadata.get(STRICT):
                    # Sent only if set, and then refused: dropping it would change meaning.
                    what = f"{cls.__name__}.{f.name}"
                    overrides[f.name] = override(
                        omit_if_default=True, unstruct_hook=_refuse(what, revision, field_since)
                    )
                else:
                    overrides[f.name] = override(omit=True)
            else:
                overrides[f.name] = override(rename=wire_name(f), omit_if_default=f.default is None)
        base: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(cls, conv, **overrides)
        if not _has_extra(cls):
            return base

        def unstructure_with_extra(obj: Any) -> dict[str, Any]:
            out = base(obj)
            return {**obj.extra, **out} if obj.extra else out

        return unstructure_with_extra

    return factory


def _tagged_union(
    conv: cattrs.Converter, members: tuple[type, ...], *, unknown_ok: bool
) -> tuple[Callable[[Any, Any], Any], Callable[[Any], Any]]:
    """Structure/unstructure hooks for a union tagged on ``"type"`` (one dict lookup)."""
    by_tag: dict[Any, tuple[Callable[[Any, Any], Any], type]] = {}
    for cls in members:
        if conv.forbid_extra_keys:
            hook = conv.get_structure_hook(cls)
        else:
            # The tag was just matched, so this hook skips re-validating it.
            renames = _renames(cls)
            renames["type"] = override(omit=True)
            hook = make_dict_structure_fn(cls, conv, **renames)
        by_tag[attrs.fields_dict(cls)["type"].default] = (hook, cls)
    by_class: dict[type, Callable[[Any], Any]] = {
        cls: conv.get_unstructure_hook(cls) for cls in members
    }
    if unknown_ok:
        by_class[t.UnknownContent] = _unstructure_unknown

    def structure_union(value: Any, _: Any) -> Any:
        if type(value) is not dict:
            raise _Invalid(f"expected an object, got {_json_type(value)}")
        tag = value.get("type")
        entry = by_tag.get(tag)
        if entry is not None:
            return entry[0](value, entry[1])
        if unknown_ok and type(tag) is str:
            return t.UnknownContent(type=tag, raw=value)
        raise _Invalid(f"unknown type {tag!r}; expected one of {sorted(by_tag)}")

    def unstructure_union(obj: Any) -> Any:
        return by_class[obj.__class__](obj)

    return structure_union, unstructure_union


def _structure_unknown(value: Any, _: Any) -> t.UnknownContent:
    if type(value) is not dict or type(value.get("type")) is not str:
        raise _Invalid("expected an object with a string 'type'")
    return t.UnknownContent(type=value["type"], raw=value)


def _unstructure_unknown(obj: t.UnknownContent) -> dict[str, Any]:
    return obj.raw


def _text_only_tool_result(conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """The ``CallToolResult`` hook, with a short path for the shape nearly every tool
    call returns: ``{"content": [{"type": "text", "text": ...}, ...], "isError": bool}``.

    Why: a tool result is the one message a host structures per call, and the generic
    hooks (a union dispatch, three optional fields and a keyword call per block) were the
    largest single cost of a call (bench, "client CPU/call"). Anything else, or anything
    invalid, goes to the generic hook, so the outcome and the errors are the same.
    """
    generic = _structure_factory(conv)(t.CallToolResult)
    new = object.__new__
    text_cls = t.TextContent
    result_cls = t.CallToolResult
    # The classes are frozen: their slots are set through the slot descriptors, as
    # attrs' own __init__ does through object.__setattr__ (one lookup less per field).
    set_type, set_text, set_annotations, set_block_meta = (
        _slot_setter(text_cls, name) for name in ("type", "text", "annotations", "meta")
    )
    set_content, set_structured, set_is_error, set_meta = (
        _slot_setter(result_cls, name)
        for name in ("content", "structured_content", "is_error", "meta")
    )

    def structure(data: Any, cl: Any) -> Any:
        if type(data) is not dict:
            return generic(data, cl)
        content = data.get("content")
        is_error = data.get("isError")
        size = len(data)
        if (
            type(content) is not list
            or size > 2
            or (size == 2 and (is_error is None or type(is_error) is not bool))
        ):
            return generic(data, cl)
        blocks = []
        for block in content:
            if type(block) is not dict or len(block) != 2 or block.get("type") != "text":
                return generic(data, cl)
            text = block.get("text")
            if type(text) is not str:
                return generic(data, cl)
            item = new(text_cls)
            set_type(item, "text")
            set_text(item, text)
            set_annotations(item, None)
            set_block_meta(item, None)
            blocks.append(item)
        result = new(result_cls)
        set_content(result, blocks)
        set_structured(result, None)
        set_is_error(result, is_error)
        set_meta(result, None)
        return result

    return structure


def _slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    setter: Callable[[Any, Any], None] = cls.__dict__[name].__set__
    return setter


def _register_unions(conv: cattrs.Converter, revision: str | None) -> None:
    def union_factory(
        members: tuple[type, ...], unknown_ok: bool, pick: int
    ) -> Callable[[Any], Any]:
        return lambda _: _tagged_union(conv, members, unknown_ok=unknown_ok)[pick]

    for alias, members in (
        (t.ContentBlock, _CONTENT_BLOCK_MEMBERS),
        (t.SamplingContent, _SAMPLING_MEMBERS),
    ):
        conv.register_structure_hook_factory(_is(alias), union_factory(members, True, 0))
        conv.register_unstructure_hook_factory(_is(alias), union_factory(members, True, 1))
    conv.register_structure_hook_factory(
        _is(t.CompletionReference), union_factory(_REFERENCE_MEMBERS, False, 0)
    )
    conv.register_unstructure_hook_factory(
        _is(t.CompletionReference), union_factory(_REFERENCE_MEMBERS, False, 1)
    )

    def resource_contents_structure(_: Any) -> Callable[[Any, Any], Any]:
        text = conv.get_structure_hook(t.TextResourceContents)
        blob = conv.get_structure_hook(t.BlobResourceContents)

        def structure(value: Any, _: Any) -> Any:
            if type(value) is dict and "blob" in value:
                return blob(value, t.BlobResourceContents)
            return text(value, t.TextResourceContents)

        return structure

    conv.register_structure_hook_factory(_is(t.ResourceContents), resource_contents_structure)
    conv.register_unstructure_hook_factory(
        _is(t.ResourceContents),
        lambda _: lambda obj: conv.get_unstructure_hook(obj.__class__)(obj),
    )

    def sampling_message_structure(_: Any) -> Callable[[Any, Any], Any]:
        one = conv.get_structure_hook(t.SamplingContent)

        def structure(value: Any, _: Any) -> Any:
            if type(value) is list:
                return [one(item, t.SamplingContent) for item in value]
            return one(value, t.SamplingContent)

        return structure

    def sampling_message_unstructure(_: Any) -> Callable[[Any], Any]:
        one = conv.get_unstructure_hook(t.SamplingContent)
        lists_ok = revision is None or at_least(revision, "2025-11-25")

        def unstructure(obj: Any) -> Any:
            if type(obj) is not list:
                return one(obj)
            if lists_ok:
                return [one(item) for item in obj]
            if len(obj) == 1:
                return one(obj[0])
            raise ProtocolError(
                f"sampling content with {len(obj)} blocks cannot be sent in MCP revision "
                f"{revision} (lists of blocks exist since 2025-11-25)",
                code=INVALID_PARAMS,
            )

        return unstructure

    conv.register_structure_hook_factory(_is(t.SamplingMessageContent), sampling_message_structure)
    conv.register_unstructure_hook_factory(
        _is(t.SamplingMessageContent), sampling_message_unstructure
    )


def make_converter(
    revision: str | None = None, *, detailed: bool = True, forbid_extra_keys: bool = False
) -> cattrs.Converter:
    """Build a converter for the MCP types (normally use :func:`structure`/:func:`unstructure`).

    Args:
        revision: the revision whose rules apply when unstructuring (omission and
            refusal); ``None`` sends every field we know.
        detailed: cattrs detailed validation (slower; needed for ``transform_error``).
        forbid_extra_keys: refuse unknown keys on input (capability ``extra`` excepted);
            for tests that check the classes cover the spec's examples.
    """
    conv = _make_orjson_converter(detailed_validation=detailed, forbid_extra_keys=forbid_extra_keys)
    conv.register_structure_hook(str, _structure_str)
    conv.register_structure_hook(int, _structure_int)
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(bool, _structure_bool)
    conv.register_structure_hook(bytes, _structure_bytes)
    conv.register_unstructure_hook(bytes, _unstructure_bytes)
    conv.register_structure_hook_func(lambda tp: tp is Any, _identity)
    conv.register_unstructure_hook_func(lambda tp: tp is Any, _identity)
    conv.register_structure_hook_func(lambda tp: tp == dict[str, Any], _structure_raw_object)
    conv.register_unstructure_hook_func(lambda tp: tp == dict[str, Any], _identity)
    conv.register_structure_hook_factory(_is_list, lambda tp: _strict_list(tp, conv))
    conv.register_structure_hook_factory(_is_optional, lambda tp: _optional(tp, conv))
    conv.register_structure_hook_factory(_is_str_literal, _literal)
    conv.register_structure_hook_factory(attrs.has, _structure_factory(conv))
    conv.register_unstructure_hook_factory(attrs.has, _unstructure_factory(conv, revision))
    conv.register_structure_hook(t.UnknownContent, _structure_unknown)
    conv.register_unstructure_hook(t.UnknownContent, _unstructure_unknown)
    _register_unions(conv, revision)
    if not detailed:
        conv.register_structure_hook(t.CallToolResult, _text_only_tool_result(conv))
    return conv


# --- the public API: cached converters, cached hooks ---------------------------------------

_FAST: Final = make_converter(detailed=False)
_DETAILED: Final = make_converter(detailed=True)
_structure_hooks: dict[Any, Callable[[Any, Any], Any]] = {}
_unstructure_hooks: dict[str, dict[type, Callable[[Any], Any]]] = {}
_send_converters: dict[str, cattrs.Converter] = {}
_STRUCTURE_ERRORS: Final = (
    cattrs.errors.CattrsError,
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
)


def structure(data: Any, cls: type[T]) -> T:
    """Turn received JSON (decoded dicts/lists/...) into an instance of ``cls``.

    Args:
        data: the decoded JSON, e.g. a request's ``params`` or a response's ``result``.
        cls: an :mod:`agenthost.protocol.types` class.

    Returns:
        The typed object. Raw JSON members share structure with ``data``.

    Raises:
        ProtocolError: (code -32602) ``data`` does not fit ``cls``; the message names
            each offending path, e.g. ``$.content[0].text``.
    """
    hook = _structure_hooks.get(cls)
    if hook is None:
        hook = _structure_hooks[cls] = _FAST.get_structure_hook(cls)
    try:
        return hook(data, cls)  # type: ignore[no-any-return]
    except _STRUCTURE_ERRORS:
        pass
    raise _structure_error(data, cls) from None


_PATH_SEGMENT: Final = re.compile(r"\.([a-z][a-z0-9_]*)")


def _wire_path(line: str) -> str:
    """cattrs reports Python attribute names in paths; the peer knows the JSON keys."""
    message, sep, path = line.rpartition(" @ ")
    if not sep:
        return line
    return message + sep + _PATH_SEGMENT.sub(_camel_segment, path)


def _camel_segment(match: re.Match[str]) -> str:
    name = match.group(1)
    if name == "meta":
        return "._meta"
    head, *rest = name.split("_")
    return "." + head + "".join(part[:1].upper() + part[1:] for part in rest)


def _structure_error(data: Any, cls: Any) -> ProtocolError:
    """Re-run with detailed validation to say exactly what did not fit."""
    name = getattr(cls, "__name__", repr(cls))
    if attrs.has(cls) and type(data) is not dict:
        return ProtocolError(
            f"invalid {name}: expected an object, got {_json_type(data)}", code=INVALID_PARAMS
        )
    try:
        _DETAILED.structure(data, cls)
    except _STRUCTURE_ERRORS as exc:
        lines = [
            _wire_path(line)
            for line in cattrs.transform_error(exc, path="$", format_exception=_format_error)
        ]
        more = len(lines) - _MAX_ERROR_LINES
        text = "; ".join(lines[:_MAX_ERROR_LINES]) + (f"; and {more} more" if more > 0 else "")
        return ProtocolError(f"invalid {name}: {text}", code=INVALID_PARAMS)
    return ProtocolError(f"invalid {name}", code=INVALID_PARAMS)


def _send_converter(revision: str) -> cattrs.Converter:
    conv = _send_converters.get(revision)
    if conv is None:
        if revision not in _KNOWN_REVISIONS:
            raise UnsupportedRevision(f"unknown MCP revision {revision!r}", code=INVALID_PARAMS)
        conv = _send_converters[revision] = make_converter(revision, detailed=False)
        _unstructure_hooks[revision] = {}
    return conv


@overload
def unstructure(obj: Record, revision: str) -> dict[str, Any]: ...
@overload
def unstructure(obj: Sequence[Record], revision: str) -> list[dict[str, Any]]: ...
@overload
def unstructure(obj: None, revision: str) -> None: ...
def unstructure(
    obj: Record | Sequence[Record] | None, revision: str
) -> dict[str, Any] | list[dict[str, Any]] | None:
    """Turn an object we are about to send into JSON that fits ``revision``.

    Args:
        obj: an :mod:`agenthost.protocol.types` object (or a list of them, or ``None``).
        revision: the negotiated MCP revision.

    Returns:
        Plain JSON values (dicts, lists, str, ...), ready for orjson.

    Raises:
        ProtocolError: ``obj`` (or something inside it) cannot be expressed in
            ``revision``; the message names the type and the revision.
        UnsupportedRevision: ``revision`` is not one agenthost knows.
    """
    hooks = _unstructure_hooks.get(revision)
    if hooks is None:
        _send_converter(revision)
        hooks = _unstructure_hooks[revision]
    cls = obj.__class__
    hook = hooks.get(cls)
    if hook is None:
        hook = hooks[cls] = _send_converters[revision].get_unstructure_hook(cls)
    out: dict[str, Any] | list[dict[str, Any]] | None = hook(obj)
    return out
