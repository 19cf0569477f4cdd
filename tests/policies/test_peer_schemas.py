"""agenthost_policies.schemas without a server: the semantics its replacements must keep.

The attacks themselves come from real servers (tests/hostile/test_hostile_schemas.py);
here, what a replaced keyword must still mean (uniqueItems' equality, additionalProperties
next to patternProperties), and the bounds a server cannot reach on a quiet machine (the
CPU bound), checked directly.
"""

from __future__ import annotations

from typing import Any

import pytest

from agenthost.errors import SchemaRefused
from agenthost_policies import schemas
from agenthost_policies.schemas import compile_peer_schema


def _fits(schema: Any, instance: Any, **kwargs: Any) -> bool:
    return compile_peer_schema(schema, who="t", **kwargs).first_error(instance) is None


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),  # JSON Schema: equal numbers
        ([1, True], True),  # a boolean is not a number
        ([0, False], True),
        ([{"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]}], False),
        ([{"a": 1, "b": 2}, {"b": 2, "a": 1}], False),  # key order does not matter
        ([[1, 2], [2, 1]], True),  # item order does
        (["1", 1], True),
        ([None, None], False),
    ],
)
def test_unique_items_keeps_json_schema_equality(items: list[Any], unique: bool) -> None:
    assert _fits({"uniqueItems": True}, items) is unique


def test_additional_properties_next_to_pattern_properties() -> None:
    schema = {
        "properties": {"id": {}},
        "patternProperties": {"^x-": {"type": "string"}},
        "additionalProperties": False,
    }
    assert _fits(schema, {"id": 1, "x-a": "s"})
    assert not _fits(schema, {"id": 1, "x-a": 1})  # the pattern's schema applies
    assert not _fits(schema, {"id": 1, "other": 1})  # neither named nor matched


def test_a_subschema_naming_a_dialect_keeps_the_safe_keywords() -> None:
    """jsonschema's evolve switches to its plain class for a subschema naming a dialect
    (Python ``re``, quadratic uniqueItems). RE2's ``\\d`` is ASCII, ``re``'s is Unicode: an
    Arabic-Indic number tells which engine ran."""
    draft7 = "http://json-schema.org/draft-07/schema#"
    digits = {"pattern": "^\\d+$"}
    arabic = "\u0661\u0662"
    assert not _fits(digits, arabic)  # RE2
    assert not _fits({"properties": {"s": {"$schema": draft7, **digits}}}, {"s": arabic})
    assert not _fits(
        {"$schema": draft7, "items": {"$ref": "#/definitions/d"}, "definitions": {"d": digits}},
        [arabic],
    )
    assert _fits({"properties": {"s": {"$schema": draft7, **digits}}}, {"s": "12"})


def test_the_regex_format_is_compiled_by_re2_when_formats_are_asserted() -> None:
    schema = {"format": "regex"}
    assert _fits(schema, "(a|a)*$", formats=True)
    assert not _fits(schema, "(?=a)", formats=True)  # not RE2: not a regex agenthost runs
    assert _fits(schema, "(?=a)")  # format is an annotation by default


def test_the_cpu_bound_stops_a_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound behind the budget: a check still running after DEADLINE of its
    thread's CPU time is stopped (at 5 s here it would take that long)."""
    monkeypatch.setattr(schemas, "DEADLINE", 0.05)
    monkeypatch.setattr(schemas, "BUDGET_BASE", 10**9)
    checker = compile_peer_schema({"items": {"allOf": [{}] * 2_000}}, who="t")
    with pytest.raises(SchemaRefused, match=r"longer than 0\.05 s of CPU"):
        checker.first_error(list(range(2_000)))


def test_refusals_name_what_was_refused() -> None:
    with pytest.raises(SchemaRefused) as info:
        compile_peer_schema({"$ref": "https://example.com/" + "x" * 500}, who="tool 'a'")
    message = str(info.value)
    assert message.startswith("tool 'a': $ref 'https://example.com/")
    assert len(message) < 300  # the server's value is cut, not quoted whole
