"""Elicitation forms: every schema kind of the restricted subset, rendered, parsed, validated."""

from __future__ import annotations

import io
from typing import Any

import pytest

from agenthost.errors import InvalidAnswer, JSONRPCError
from agenthost_policies import (
    Elicitation,
    TerminalPrompter,
    inspect_url,
    parse_form,
    validate_content,
)

# The spec's examples (2025-11-25 client/elicitation), one property per schema kind.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "title": "Display Name",
            "description": "Description text",
            "minLength": 3,
            "maxLength": 50,
            "pattern": "^[A-Za-z]+$",
        },
        "email": {"type": "string", "format": "email", "default": "user@example.com"},
        "site": {"type": "string", "format": "uri"},
        "born": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "score": {"type": "number", "minimum": 0, "maximum": 100, "default": 50},
        "agree": {"type": "boolean", "default": False},
        "color": {"type": "string", "enum": ["Red", "Green", "Blue"], "default": "Red"},
        "hex": {
            "type": "string",
            "oneOf": [
                {"const": "#FF0000", "title": "Red"},
                {"const": "#00FF00", "title": "Green"},
                {"const": "#0000FF", "title": "Blue"},
            ],
        },
        "legacy": {"type": "string", "enum": ["a", "b"], "enumNames": ["Alpha", "Beta"]},
        "colors": {
            "type": "array",
            "minItems": 1,
            "maxItems": 2,
            "items": {"type": "string", "enum": ["Red", "Green", "Blue"]},
            "default": ["Red", "Green"],
        },
        "hexes": {
            "type": "array",
            "minItems": 1,
            "maxItems": 2,
            "items": {
                "anyOf": [
                    {"const": "#FF0000", "title": "Red"},
                    {"const": "#00FF00", "title": "Green"},
                    {"const": "#0000FF", "title": "Blue"},
                ]
            },
        },
    },
    "required": ["name", "age", "hex", "hexes"],
}

FIELDS = {field.name: field for field in parse_form(SCHEMA)}

PARSE_TABLE: list[tuple[str, str, Any]] = [
    ("name", "Alice", "Alice"),
    ("email", "", "user@example.com"),  # Enter keeps the default
    ("email", "a@b.co", "a@b.co"),
    ("email", "-", None),  # optional: left out
    ("site", "https://example.com/x", "https://example.com/x"),
    ("born", "2000-02-29", "2000-02-29"),
    ("at", "2025-11-25T10:00:00Z", "2025-11-25T10:00:00Z"),
    ("age", "42", 42),
    ("score", "12.5", 12.5),
    ("score", "7", 7),
    ("score", "", 50),
    ("agree", "y", True),
    ("agree", "No", False),
    ("agree", "", False),
    ("color", "2", "Green"),
    ("color", "blue", "Blue"),
    ("color", "", "Red"),
    ("hex", "1", "#FF0000"),
    ("hex", "Green", "#00FF00"),  # by title
    ("hex", "#0000FF", "#0000FF"),  # by value
    ("legacy", "Beta", "b"),
    ("colors", "1, 3", ["Red", "Blue"]),
    ("colors", "Green,green", ["Green"]),  # duplicates collapse
    ("colors", "", ["Red", "Green"]),
    ("hexes", "Red,3", ["#FF0000", "#0000FF"]),
]


@pytest.mark.parametrize(("name", "text", "expected"), PARSE_TABLE)
def test_parse_every_kind(name: str, text: str, expected: Any) -> None:
    assert FIELDS[name].parse(text) == expected


REJECT_TABLE: list[tuple[str, str, str]] = [
    ("name", "", "required"),
    ("name", "-", "at least 3"),  # '-' skips only optional fields; here it is a value
    ("name", "Al", "at least 3"),
    ("name", "Alice1", "must match"),
    ("name", "A" * 51, "at most 50"),
    ("email", "nope", "not a valid email"),
    ("site", "not a uri", "not a valid uri"),
    ("born", "2001-02-29", "not a valid date"),
    ("at", "2025-11-25", "not a valid date-time"),
    ("at", "2025-11-25T10:00:00", "not a valid date-time"),  # no offset
    ("age", "4.5", "whole number"),
    ("age", "-1", "at least 0"),
    ("age", "131", "at most 130"),
    ("score", "lots", "not a number"),
    ("agree", "perhaps", "not yes or no"),
    ("color", "4", "not one of the choices"),
    ("color", "Purple", "not one of the choices"),
    ("colors", "1,2,3", "at most 2"),
    ("hexes", "", "required"),
]


@pytest.mark.parametrize(("name", "text", "problem"), REJECT_TABLE)
def test_reject_every_kind(name: str, text: str, problem: str) -> None:
    with pytest.raises(InvalidAnswer, match=problem) as info:
        FIELDS[name].parse(text)
    assert info.value.field == name


def test_render_shows_titles_constraints_options_defaults() -> None:
    text = FIELDS["name"].render()
    assert "Display Name (name) [required]" in text
    assert "Description text" in text
    assert "length 3..50" in text and "matching ^[A-Za-z]+$" in text
    hexes = FIELDS["hex"].render()
    assert "1) Red = #FF0000" in hexes and "3) Blue = #0000FF" in hexes
    colors = FIELDS["colors"].render()
    assert "choose any" in colors and "1..2 choices" in colors
    assert "default: Red, Green" in colors and "Enter keeps the default" in colors
    assert "range 0..100" in FIELDS["score"].render()
    assert "default: no" in FIELDS["agree"].render()
    assert "'-' leaves it empty" in FIELDS["email"].render()


def test_render_escapes_terminal_control_characters() -> None:
    (field,) = parse_form(
        {
            "type": "object",
            "properties": {
                "x": {"type": "string", "title": "ok\x1b[2K\rgotcha", "description": "a\u202eb"}
            },
        }
    )
    text = field.render()
    assert "\x1b" not in text and "\u202e" not in text
    assert "\\x1b[2K\\x0dgotcha" in text and "\\u202e" in text


async def test_validate_content_uses_the_servers_schema() -> None:
    good = {"name": "Alice", "age": 30, "hex": "#FF0000", "hexes": ["#00FF00"], "agree": True}
    assert await validate_content(SCHEMA, good) == good
    bad_cases = [
        ({**good, "age": "30"}, "age"),
        ({**good, "hex": "#123456"}, "hex"),
        ({**good, "hexes": []}, "hexes"),
        ({**good, "extra": 1}, "extra"),
        ({k: v for k, v in good.items() if k != "name"}, "name"),
        ({**good, "agree": 1}, "agree"),
    ]
    for content, field in bad_cases:
        with pytest.raises(InvalidAnswer) as info:
            await validate_content(SCHEMA, content)
        assert info.value.field == field, content


BAD_SCHEMAS: list[tuple[Any, str]] = [
    (None, "missing"),
    ({"type": "array", "properties": {}}, "type must be 'object'"),
    ({"type": "object"}, "properties must be an object"),
    ({"type": "object", "properties": {"a": {"type": "object"}}}, "not a primitive"),
    (
        {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}},
        "needs 'enum' or 'anyOf'",
    ),
    ({"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}}, "format"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}, "pattern"),
    ({"type": "object", "properties": {"a": {"type": "string", "enum": []}}}, "non-empty"),
    (
        {"type": "object", "properties": {"a": {"type": "string", "oneOf": [{"title": "x"}]}}},
        "const",
    ),
    ({"type": "object", "properties": {"a": {"type": "integer", "default": "x"}}}, "default"),
    (
        {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "default": "y"}}},
        "default",
    ),
    ({"type": "object", "properties": {}, "required": ["b"]}, "unknown properties"),
]


@pytest.mark.parametrize(("schema", "problem"), BAD_SCHEMAS)
def test_schemas_outside_the_subset_are_invalid_params(schema: Any, problem: str) -> None:
    with pytest.raises(JSONRPCError, match=problem) as info:
        parse_form(schema)
    assert info.value.code == -32602


URL_TABLE = [
    ("https://mcp.example.com/ui/set_api_key", "mcp.example.com", []),
    ("http://localhost:8080/cb", "localhost", ["not HTTPS"]),
    ("http://[::1]/cb", "::1", ["not HTTPS", "bare IP"]),
    ("https://google.com@evil.example/", "evil.example", ["credentials before the host"]),
    ("https://xn--pple-43d.com/", "xn--pple-43d.com", ["punycode"]),
    ("https://\u0430pple.com/", "\u0430pple.com", ["punycode"]),
    ("https://127.0.0.1:8443/x", "127.0.0.1", ["bare IP"]),
]


@pytest.mark.parametrize(("url", "host", "warnings"), URL_TABLE)
def test_inspect_url(url: str, host: str, warnings: list[str]) -> None:
    info = inspect_url(url)
    assert info.host == host
    assert len(info.warnings) == len(warnings)
    for expected, actual in zip(warnings, info.warnings, strict=True):
        assert expected in actual


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "/relative",
        "file:///etc/passwd",
        "https://",
        "data:text/html,x",
        "vbscript:msgbox(1)",
        "http://example.com/",
        "http://127.0.0.1.evil.example/",
    ],
)
def test_inspect_url_refuses_non_web_urls(url: str) -> None:
    with pytest.raises(JSONRPCError) as info:
        inspect_url(url)
    assert info.value.code == -32602


# -- the terminal form, driven through injected streams ---------------------------------------


def form_prompter(lines: list[str], **kw: Any) -> tuple[TerminalPrompter, io.StringIO]:
    out = io.StringIO()
    prompter = TerminalPrompter(
        input=io.StringIO("".join(f"{line}\n" for line in lines)), output=out, **kw
    )
    return prompter, out


async def test_terminal_form_fill_review_send() -> None:
    answers = [
        "f",  # fill in
        "Al",
        "Alice",  # too short, then fine
        "",
        "-",
        "",
        "",
        "200",
        "42",
        "",
        "",
        "",
        "2",
        "",
        "",
        "1,2",
        "s",
    ]  # send
    prompter, out = form_prompter(answers)
    action = Elicitation(server="acct", message="Please fill in", requested_schema=SCHEMA)
    response = await prompter.elicit(action)
    assert response.action == "accept"
    assert response.content == {
        "name": "Alice",
        "email": "user@example.com",
        "age": 42,
        "score": 50,
        "agree": False,
        "color": "Red",
        "hex": "#00FF00",
        "colors": ["Red", "Green"],
        "hexes": ["#FF0000", "#00FF00"],
    }
    shown = out.getvalue()
    assert "acct asks for information" in shown
    assert "Not accepted: name: at least 3 characters" in shown
    assert "Not accepted: age: must be at most 130" in shown
    assert "You are about to send:" in shown and "Display Name: Alice" in shown


async def test_terminal_form_edit_keeps_previous_answers() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "s": {"type": "string"}},
        "required": ["n"],
    }
    prompter, _ = form_prompter(["f", "1", "x", "e", "", "y", "s"])
    response = await prompter.elicit(Elicitation(server="s", message="m", requested_schema=schema))
    assert response.content == {"n": 1, "s": "y"}


@pytest.mark.parametrize(
    ("lines", "action"),
    [
        (["d"], "decline"),
        (["c"], "cancel"),
        ([], "cancel"),  # end of input
        (["f", "x", "x", "x"], "cancel"),  # three bad answers
        (["f", "1", "", "d"], "decline"),  # declined at review
    ],
)
async def test_terminal_form_decline_and_cancel(lines: list[str], action: str) -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "s": {"type": "string"}},
        "required": ["n"],
    }
    prompter, _ = form_prompter(lines)
    response = await prompter.elicit(Elicitation(server="s", message="m", requested_schema=schema))
    assert response.action == action and response.content is None


async def test_terminal_url_mode_needs_consent_to_open() -> None:
    opened: list[str] = []
    url = "https://google.com@evil.example/connect?id=1"
    action = Elicitation(server="s", message="Authorize", mode="url", url=url, elicitation_id="1")
    prompter, out = form_prompter(["d"], open_url=opened.append)
    assert (await prompter.elicit(action)).action == "decline"
    assert opened == []
    shown = out.getvalue()
    assert url in shown and ">>> evil.example <<<" in shown
    assert "credentials before the host" in shown
    prompter, _ = form_prompter(["o"], open_url=opened.append)
    response = await prompter.elicit(action)
    assert response.to_result() == {"action": "accept"}
    assert opened == [url]
