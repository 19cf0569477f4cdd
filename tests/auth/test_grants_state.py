"""The pure half of OAuth, with plain values: the saved state's format and the token
request forms (no server, no httpx.Auth driver)."""

from __future__ import annotations

import base64
from urllib.parse import parse_qsl

import orjson
import pytest

from agenthost.auth.grants import JWT_BEARER, client_auth, token_form
from agenthost.auth.state import (
    STATE_VERSION,
    Client,
    IssuerState,
    SavedState,
    Tokens,
    dump_state,
    parse_state,
)

URL = "https://mcp.example/mcp"


def _saved() -> SavedState:
    return SavedState(
        issuers={
            "https://as.example": IssuerState(
                token_endpoint="https://as.example/token",
                client=Client(client_id="abc", client_secret="s3cret", source="dcr"),
                tokens=Tokens(access_token="at", refresh_token="rt", expires_at=10.0),
                scopes=("read",),
                auth_methods=("client_secret_basic",),
            ),
            "https://other.example": IssuerState(
                token_endpoint="https://other.example/token",
                client=Client(client_id="from-config"),
            ),
        },
        current="https://as.example",
        resource=URL,
    )


def test_state_round_trips_and_keeps_only_registered_clients() -> None:
    back = parse_state(dump_state(URL, _saved()), URL)
    assert back is not None
    assert back.current == "https://as.example" and back.resource == URL
    first = back.issuers["https://as.example"]
    assert first.client is not None
    assert (first.client.client_id, first.client.client_secret) == ("abc", "s3cret")
    assert first.client.source == "dcr"
    assert first.tokens == Tokens(access_token="at", refresh_token="rt", expires_at=10.0)
    assert first.scopes == ("read",) and first.auth_methods == ("client_secret_basic",)
    # A configured client comes from the config every time: never saved.
    assert back.issuers["https://other.example"].client is None


def test_state_of_another_url_or_version_is_not_used() -> None:
    text = dump_state(URL, _saved())
    assert parse_state(text, "https://elsewhere.example/mcp") is None
    data = orjson.loads(text)
    data["version"] = STATE_VERSION + 1
    assert parse_state(orjson.dumps(data).decode(), URL) is None


def test_a_current_issuer_that_is_not_saved_is_dropped() -> None:
    data = {"version": STATE_VERSION, "url": URL, "current": "https://gone", "issuers": {}}
    back = parse_state(orjson.dumps(data).decode(), URL)
    assert back is not None and back.current is None


def test_damaged_state_raises_for_the_caller_to_ignore() -> None:
    data = {"version": STATE_VERSION, "url": URL, "issuers": {"https://as": {}}}
    with pytest.raises(KeyError):
        parse_state(orjson.dumps(data).decode(), URL)


def test_token_form_drops_empty_values_joins_scopes_and_adds_the_resource() -> None:
    grant, body = token_form(
        {"grant_type": JWT_BEARER, "assertion": "x", "scope": ("a", "b"), "empty": None},
        URL,
    )
    assert grant == JWT_BEARER
    assert dict(parse_qsl(body)) == {
        "grant_type": JWT_BEARER,
        "assertion": "x",
        "scope": "a b",
        "resource": URL,
    }


def test_client_secret_basic_encodes_both_parts_and_names_the_client_in_the_body() -> None:
    client = Client(client_id="id:1", client_secret="p@ss", method="client_secret_basic")
    body, headers, assertion = client_auth(
        client, "https://as.example/token", "grant_type=x", {}, issuer="https://as.example"
    )
    assert assertion is None
    encoded = headers["Authorization"].removeprefix("Basic ")
    assert base64.b64decode(encoded).decode() == "id%3A1:p%40ss"
    assert dict(parse_qsl(body)) == {"grant_type": "x", "client_id": "id:1"}


def test_public_client_sends_only_its_id() -> None:
    body, headers, assertion = client_auth(
        Client(client_id="pub"), "https://as.example/token", "grant_type=x", {}, issuer=""
    )
    assert assertion is None and "Authorization" not in headers
    assert dict(parse_qsl(body)) == {"grant_type": "x", "client_id": "pub"}
