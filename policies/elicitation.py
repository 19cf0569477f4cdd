"""Elicitation forms and URLs, without I/O: parse the schema, render, parse answers, validate.

Form mode: the server sends a flat ``requestedSchema`` in the spec's restricted subset
(2025-11-25 ``PrimitiveSchemaDefinition``): string (length, pattern, format email / uri /
date / date-time), number and integer (minimum, maximum), boolean, single-select enums
(untitled ``enum``, titled ``oneOf`` of const/title, legacy ``enumNames``) and multi-select
enums (``type: array`` with ``items.enum`` or ``items.anyOf``, min/maxItems). Every kind
may carry a default. :func:`parse_form` turns the schema into :class:`FormField` objects,
each of which renders its question and parses one typed line into a JSON value; the
finished object is checked once more with :mod:`jsonschema` against the server's own
schema before anything is sent (:func:`validate_content`).

The schema comes from the server, so it is untrusted: it is compiled as every server
schema is, by :func:`agenthost_policies.schemas.compile_peer_schema` (a ``$ref`` that is not
local would be a fetch or a file read; Python's backtracking ``re`` can take 3**n steps on
an n-character answer, ``^(.|.|.)*\x00$`` blocks for 10 s at 17 characters). Patterns are
matched with RE2, whose time is linear in the answer, both in our own field checks and in
the whole-schema check. A schema it refuses (a remote ``$ref``, a pattern RE2 cannot run:
look-around, backreferences) is invalid (-32602), as is ``patternProperties``, outside the
subset.

URL mode: :func:`inspect_url` splits out the host to highlight and lists what makes a URL
suspicious (not HTTPS, credentials before the host, punycode or non-ASCII host, IP
literal). It never fetches anything; opening is the prompter's job, after consent.

A schema outside the subset is the server's error: :class:`JSONRPCError` ``-32602``
(invalid params), which the host sends back as the answer to ``elicitation/create``.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import attrs

from agenthost.errors import InvalidAnswer, JSONRPCError, SchemaRefused
from agenthost_policies.schemas import PeerSchema, check_pattern, compile_peer_schema, linear_regex
from agenthost_policies.text import printable

__all__ = [
    "FieldKind",
    "FormField",
    "Option",
    "UrlInfo",
    "inspect_url",
    "parse_form",
    "validate_content",
    "with_defaults",
]

FieldKind = Literal["string", "number", "integer", "boolean", "enum", "multi"]

_INVALID_PARAMS = -32602
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_TRUE = frozenset({"y", "yes", "true", "t", "1", "on"})
_FALSE = frozenset({"n", "no", "false", "f", "0", "off"})
#: Typed to leave an optional field out even when it has a default.
EMPTY = "-"


@attrs.frozen(kw_only=True)
class Option:
    """One choice of an enum: the value sent, and the label shown."""

    value: str
    label: str


@attrs.frozen(kw_only=True)
class FormField:
    """One property of a form-mode request, ready to render and parse."""

    name: str
    kind: FieldKind
    required: bool = False
    title: str | None = None
    description: str | None = None
    default: Any = None
    options: tuple[Option, ...] = ()
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    format: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_items: int | None = None
    max_items: int | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not None

    def render(self) -> str:
        """The question for this field, several lines, safe for a terminal."""
        head = printable(self.title or self.name)
        if self.title:
            head += f" ({printable(self.name)})"
        head += " [required]" if self.required else " [optional]"
        lines = [head]
        if self.description:
            lines.append(f"  {printable(self.description)}")
        lines.append(f"  {self._constraints()}")
        if self.options:
            for number, option in enumerate(self.options, start=1):
                shown = printable(option.label)
                if option.label != option.value:
                    shown += f" = {printable(option.value)}"
                lines.append(f"    {number}) {shown}")
        if self.has_default:
            lines.append(f"  default: {printable(self.format_value(self.default))}")
        hints = []
        if self.kind == "multi":
            hints.append("numbers or values separated by commas")
        elif self.kind == "enum":
            hints.append("a number or a value")
        elif self.kind == "boolean":
            hints.append("y or n")
        if self.has_default:
            hints.append("Enter keeps the default")
        if not self.required:
            hints.append(f"'{EMPTY}' leaves it empty")
        lines.append(f"  ({'; '.join(hints) or 'type a value'})")
        return "\n".join(lines)

    def _constraints(self) -> str:
        parts: list[str] = [{"enum": "choose one", "multi": "choose any"}.get(self.kind, self.kind)]
        if self.format:
            parts.append(f"format {self.format}")
        if self.min_length is not None or self.max_length is not None:
            parts.append(f"length {_range(self.min_length, self.max_length)}")
        if self.pattern:
            parts.append(f"matching {printable(self.pattern)}")
        if self.minimum is not None or self.maximum is not None:
            parts.append(f"range {_range(self.minimum, self.maximum)}")
        if self.min_items is not None or self.max_items is not None:
            parts.append(f"{_range(self.min_items, self.max_items)} choices")
        return ", ".join(parts)

    def format_value(self, value: Any) -> str:
        """How a value of this field is shown back to the user."""
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, list):
            return ", ".join(self._label(str(item)) for item in value)
        if self.kind == "enum":
            return self._label(str(value))
        return str(value)

    def _label(self, value: str) -> str:
        for option in self.options:
            if option.value == value:
                return option.label if option.label == value else f"{option.label} ({value})"
        return value

    def parse(self, text: str) -> Any:
        """Turn one typed line into this field's JSON value.

        Returns:
            The value; :data:`None` means "leave the field out".

        Raises:
            InvalidAnswer: what is wrong, in words for the user.
        """
        text = text.strip()
        if text == "":
            if self.has_default:
                return self.default
            if self.required:
                raise InvalidAnswer("a value is required", field=self.name)
            return None
        if text == EMPTY and not self.required:
            return None
        value = self._convert(text)
        self._check(value)
        return value

    def _convert(self, text: str) -> Any:
        if self.kind == "string":
            return text
        if self.kind == "integer":
            try:
                return int(text)
            except ValueError:
                raise InvalidAnswer(f"{text!r} is not a whole number", field=self.name) from None
        if self.kind == "number":
            try:
                return int(text) if re.fullmatch(r"[-+]?\d+", text) else float(text)
            except ValueError:
                raise InvalidAnswer(f"{text!r} is not a number", field=self.name) from None
        if self.kind == "boolean":
            lowered = text.lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise InvalidAnswer(f"{text!r} is not yes or no", field=self.name)
        if self.kind == "enum":
            return self._choose(text)
        chosen: list[str] = []
        for part in text.split(","):
            if part.strip():
                value = self._choose(part.strip())
                if value not in chosen:
                    chosen.append(value)
        return chosen

    def _choose(self, text: str) -> str:
        if text.isdigit() and 1 <= int(text) <= len(self.options):
            return self.options[int(text) - 1].value
        for option in self.options:
            if text == option.value:
                return option.value
        lowered = text.casefold()
        for option in self.options:
            if lowered in (option.label.casefold(), option.value.casefold()):
                return option.value
        raise InvalidAnswer(f"{text!r} is not one of the choices", field=self.name)

    def _check(self, value: Any) -> None:
        fail = self.name
        if isinstance(value, str) and self.kind == "string":
            if self.min_length is not None and len(value) < self.min_length:
                raise InvalidAnswer(f"at least {self.min_length} characters", field=fail)
            if self.max_length is not None and len(value) > self.max_length:
                raise InvalidAnswer(f"at most {self.max_length} characters", field=fail)
            if self.pattern is not None and not linear_regex(self.pattern).search(value):
                raise InvalidAnswer(f"must match {self.pattern}", field=fail)
            if self.format is not None and not _format_ok(self.format, value):
                raise InvalidAnswer(f"{value!r} is not a valid {self.format}", field=fail)
        if isinstance(value, int | float) and not isinstance(value, bool):
            if self.minimum is not None and value < self.minimum:
                raise InvalidAnswer(f"must be at least {_num(self.minimum)}", field=fail)
            if self.maximum is not None and value > self.maximum:
                raise InvalidAnswer(f"must be at most {_num(self.maximum)}", field=fail)
        if isinstance(value, list):
            if self.min_items is not None and len(value) < self.min_items:
                raise InvalidAnswer(f"choose at least {self.min_items}", field=fail)
            if self.max_items is not None and len(value) > self.max_items:
                raise InvalidAnswer(f"choose at most {self.max_items}", field=fail)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _range(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"{_num(low)}..{_num(high)}"
    if low is not None:
        return f">= {_num(low)}"
    return f"<= {_num(high)}" if high is not None else "any"


def _format_ok(fmt: str, value: str) -> bool:
    if fmt == "email":
        return bool(_EMAIL.match(value))
    if fmt == "uri":
        parts = urllib.parse.urlsplit(value)
        return bool(parts.scheme) and bool(parts.netloc or parts.path)
    try:
        if fmt == "date":
            datetime.date.fromisoformat(value)
        elif fmt == "date-time":
            parsed = datetime.datetime.fromisoformat(value)
            # RFC 3339 date-times carry a time and an offset.
            return "T" in value.upper() and parsed.tzinfo is not None
    except ValueError:
        return False
    return True


def _bad_schema(problem: str) -> JSONRPCError:
    return JSONRPCError(_INVALID_PARAMS, f"requestedSchema: {problem}")


def _compiled(schema: Mapping[str, Any]) -> PeerSchema:
    """The server's whole schema, compiled as every server schema is (:mod:`.schemas`:
    only local references, RE2 patterns, bounded size and work), ``format`` asserted."""
    try:
        return compile_peer_schema(dict(schema), who="requestedSchema", formats=True)
    except SchemaRefused as exc:
        raise JSONRPCError(_INVALID_PARAMS, str(exc)) from None


def _check_pattern(pattern: str, where: str) -> None:
    try:
        check_pattern(pattern, where)
    except SchemaRefused as exc:
        raise _bad_schema(str(exc)) from None


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    """Every ``(key, value)`` of every object nested in ``value``, without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, child in item.items():
                yield str(key), child
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)


def _check_subset(schema: Mapping[str, Any]) -> None:
    """Refuse what the restricted subset leaves out and a whole-schema check would apply."""
    for key, _ in _walk(schema):
        if key == "patternProperties":
            raise _bad_schema("patternProperties is outside the elicitation schema subset")


def _opt_int(prop: Mapping[str, Any], key: str, where: str) -> int | None:
    value = prop.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad_schema(f"{where}.{key} must be a non-negative integer")
    return value


def _opt_num(prop: Mapping[str, Any], key: str, where: str) -> float | None:
    value = prop.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad_schema(f"{where}.{key} must be a number")
    return value


def _opt_str(prop: Mapping[str, Any], key: str, where: str) -> str | None:
    value = prop.get(key)
    if value is not None and not isinstance(value, str):
        raise _bad_schema(f"{where}.{key} must be a string")
    return value


def _options(entries: Any, where: str, *, titled: bool) -> tuple[Option, ...]:
    if not isinstance(entries, list) or not entries:
        raise _bad_schema(f"{where} must be a non-empty list")
    options = []
    for entry in entries:
        if titled:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("const"), str):
                raise _bad_schema(f"{where} entries need a string 'const'")
            title = entry.get("title")
            options.append(
                Option(
                    value=entry["const"], label=title if isinstance(title, str) else entry["const"]
                )
            )
        else:
            if not isinstance(entry, str):
                raise _bad_schema(f"{where} entries must be strings")
            options.append(Option(value=entry, label=entry))
    return tuple(options)


def _parse_field(name: str, prop: Any, required: bool) -> FormField:
    where = f"properties.{name}"
    if not isinstance(prop, Mapping):
        raise _bad_schema(f"{where} must be an object")
    kind = prop.get("type")
    common: dict[str, Any] = {
        "name": name,
        "required": required,
        "title": _opt_str(prop, "title", where),
        "description": _opt_str(prop, "description", where),
        "default": prop.get("default"),
    }
    if kind == "string" and ("enum" in prop or "oneOf" in prop):
        if "oneOf" in prop:
            options = _options(prop["oneOf"], f"{where}.oneOf", titled=True)
        else:
            options = _options(prop["enum"], f"{where}.enum", titled=False)
            names = prop.get("enumNames")
            if names is not None:  # legacy titled enum (LegacyTitledEnumSchema)
                if not isinstance(names, list) or len(names) != len(options):
                    raise _bad_schema(f"{where}.enumNames must match enum in length")
                options = tuple(
                    Option(value=o.value, label=str(label))
                    for o, label in zip(options, names, strict=True)
                )
        field = FormField(kind="enum", options=options, **common)
    elif kind == "string":
        fmt = _opt_str(prop, "format", where)
        if fmt is not None and fmt not in ("email", "uri", "date", "date-time"):
            raise _bad_schema(f"{where}.format {fmt!r} is not email, uri, date or date-time")
        pattern = _opt_str(prop, "pattern", where)
        if pattern is not None:
            _check_pattern(pattern, f"{where}.pattern")
        field = FormField(
            kind="string",
            min_length=_opt_int(prop, "minLength", where),
            max_length=_opt_int(prop, "maxLength", where),
            pattern=pattern,
            format=fmt,
            **common,
        )
    elif kind in ("number", "integer"):
        field = FormField(
            kind=kind,
            minimum=_opt_num(prop, "minimum", where),
            maximum=_opt_num(prop, "maximum", where),
            **common,
        )
    elif kind == "boolean":
        field = FormField(kind="boolean", **common)
    elif kind == "array":
        items = prop.get("items")
        if not isinstance(items, Mapping):
            raise _bad_schema(f"{where}.items must be an object (multi-select enums only)")
        if "anyOf" in items:
            options = _options(items["anyOf"], f"{where}.items.anyOf", titled=True)
        elif "enum" in items:
            options = _options(items["enum"], f"{where}.items.enum", titled=False)
        else:
            raise _bad_schema(f"{where}.items needs 'enum' or 'anyOf' (multi-select enums only)")
        field = FormField(
            kind="multi",
            options=options,
            min_items=_opt_int(prop, "minItems", where),
            max_items=_opt_int(prop, "maxItems", where),
            **common,
        )
    else:
        raise _bad_schema(
            f"{where}.type {kind!r} is not a primitive the spec allows "
            "(string, number, integer, boolean, or an array of enum values)"
        )
    if field.has_default:
        try:
            field._check(field.default)
            _check_type(field, field.default)
        except InvalidAnswer as exc:
            raise _bad_schema(f"{where}.default does not fit its own schema: {exc}") from None
    return field


def _check_type(field: FormField, value: Any) -> None:
    ok = {
        "string": isinstance(value, str),
        "enum": isinstance(value, str) and any(o.value == value for o in field.options),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "multi": isinstance(value, list)
        and all(any(o.value == v for o in field.options) for v in value),
    }[field.kind]
    if not ok:
        raise InvalidAnswer(f"{value!r} is not a valid {field.kind}", field=field.name)


def parse_form(schema: Mapping[str, Any] | None) -> tuple[FormField, ...]:
    """The fields of a form-mode ``requestedSchema``, in the server's order.

    Raises:
        JSONRPCError: -32602, when the schema is outside the spec's restricted subset.
    """
    if not isinstance(schema, Mapping):
        raise _bad_schema("missing (form mode needs an object schema)")
    if schema.get("type") != "object":
        raise _bad_schema("type must be 'object'")
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        raise _bad_schema("properties must be an object")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise _bad_schema("required must be a list of property names")
    missing = [r for r in required if r not in properties]
    if missing:
        raise _bad_schema(f"required names unknown properties {missing}")
    _check_subset(schema)
    fields = tuple(
        _parse_field(str(name), prop, name in required) for name, prop in properties.items()
    )
    _compiled(schema)  # refused here, before anyone is asked, if it is to be refused
    return fields


def with_defaults(schema: Mapping[str, Any], answers: Mapping[str, Any]) -> dict[str, Any]:
    """``answers`` as a pre-filled form submits them: fields they leave out keep their default.

    Clients pre-populate form fields with the server's defaults (2025-11-25, SEP-1034), so
    a rule's canned answers act like a person who typed only those fields and accepted.

    Raises:
        JSONRPCError: -32602, when the schema is outside the restricted subset.
    """
    filled = {field.name: field.default for field in parse_form(schema) if field.has_default}
    filled.update(answers)
    return filled


async def validate_content(
    schema: Mapping[str, Any],
    content: Mapping[str, Any],
    fields: tuple[FormField, ...] | None = None,
    *,
    server: str = "",
) -> dict[str, Any]:
    """Check a whole answer before it is sent: each field's rules, then the server's schema.

    Used for typed answers and for a rule's canned ``answers`` alike; ``server`` (who
    asked) shares its thread for large checks with its other checks. Fields the schema does
    not declare are refused (a form answer carries exactly what was asked).

    Returns:
        The content as a plain dict.

    Raises:
        InvalidAnswer: the first problem found.
        JSONRPCError: -32602, when the schema itself is outside the restricted subset.
    """
    if fields is None:
        fields = parse_form(schema)
    by_name = {field.name: field for field in fields}
    for name in content:
        if name not in by_name:
            raise InvalidAnswer("the form has no such field", field=str(name))
    for field in fields:
        if field.name in content:
            value = content[field.name]
            _check_type(field, value)
            field._check(value)
        elif field.required:
            raise InvalidAnswer("a value is required", field=field.name)
    _check_subset(schema)
    try:
        # The content holds the server's defaults and option values (megabytes, maybe):
        # checked in a worker thread unless it is small.
        error = await _compiled(schema).check(dict(content), server=server, best=True)
    except SchemaRefused as exc:
        raise JSONRPCError(_INVALID_PARAMS, str(exc)) from None
    if error is not None:
        where = ".".join(str(p) for p in error.path) or None
        raise InvalidAnswer(error.message, field=where)
    return dict(content)


@attrs.frozen(kw_only=True)
class UrlInfo:
    """What a user must see before consenting to open a URL-mode elicitation."""

    url: str
    scheme: str
    #: The host to highlight (lower-cased, without credentials or port).
    host: str
    #: Reasons for suspicion, each a sentence; empty when none.
    warnings: tuple[str, ...] = ()


def inspect_url(url: str) -> UrlInfo:
    """Split out the host of ``url`` and list what is suspicious about it. Never fetches.

    Only ``https`` URLs are accepted, and ``http`` for a loopback host (``localhost``,
    ``127.0.0.0/8``, ``::1``: a local development server): the spec's security best
    practices require rejecting ``javascript:``, ``data:``, ``file:``, ``vbscript:`` and
    every other scheme with an allowlist, and plain HTTP elsewhere can be read and altered
    on the way.

    Raises:
        JSONRPCError: -32602, when ``url`` is not such a URL.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
    except ValueError as exc:
        raise JSONRPCError(_INVALID_PARAMS, f"url is not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        raise JSONRPCError(
            _INVALID_PARAMS,
            "url must be an absolute https URL (http only for a loopback host); "
            f"refused scheme {printable(scheme[:20])!r}",
        )
    if scheme == "http" and not _is_loopback(host):
        raise JSONRPCError(
            _INVALID_PARAMS,
            "url must be an https URL: plain http is accepted only for a loopback host "
            "(localhost, 127.0.0.0/8, ::1)",
        )
    warnings = []
    if scheme != "https":
        warnings.append("not HTTPS: a local server on this machine, not encrypted")
    if "@" in parts.netloc:
        warnings.append(
            "the URL has credentials before the host; the real host is the part after '@'"
        )
    if any(label.startswith("xn--") for label in host.split(".")) or not host.isascii():
        warnings.append(
            "the host uses international characters (punycode), which can imitate another name"
        )
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        warnings.append("the host is a bare IP address, not a name")
    if _UNSAFE_IN_URL.search(url):
        warnings.append("the URL contains control or invisible characters")
    return UrlInfo(url=url, scheme=scheme, host=host, warnings=tuple(warnings))


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_UNSAFE_IN_URL = re.compile(r"[\x00-\x20\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
