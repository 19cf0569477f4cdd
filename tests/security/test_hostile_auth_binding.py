"""Credentials bound to where they were minted (the OAuth mix-up class): a hostile MCP
server and hostile authorization servers (tests/security/hostile_auth.py, on loopback)
try to get a token, a refresh token, a client secret, a DPoP key or an authorization code
minted for one (issuer, resource) pair sent to another.

Each negative assertion ("nothing reached the thief") has its positive control in the
same test or next to it: the same listener does log the legitimate request."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import attrs
import pytest

import agenthost
from agenthost.auth import URL_OPENER
from tests.security.hostile_auth import (
    SECRET,
    Answer,
    HostileAuth,
    Seen,
    browser,
    hostile_auth,
    pinned,
    refused,
    server,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path: Path) -> None:
    os.environ["XDG_DATA_HOME"] = str(tmp_path / "data")
    os.environ["AGENTHOST_TOKEN_STORE"] = "file"
    URL_OPENER.set(None)


async def connect_once(config: Any) -> None:
    """Connect and give up: the hostile ``/mcp`` never speaks MCP (a login still happens)."""
    with pytest.raises(agenthost.AgentHostError):
        async with agenthost.connect(config):
            pass


def as_contacted(auth: HostileAuth) -> list[Seen]:
    """Every request to an authorization server (metadata, register, token, authorize)."""
    return [
        s
        for s in auth.seen
        if s.path.startswith(("/.well-known/oauth-authorization-server", "/.well-known/openid"))
        or s.path.startswith(("/legit", "/thief"))
    ]


def prm(auth: HostileAuth, resource: str, path: str = "/mcp/a") -> None:
    """The PRM of the server at ``path`` names ``resource``."""
    doc = {"resource": resource, "authorization_servers": [auth.named]}
    auth.route(f"/.well-known/oauth-protected-resource{path}", lambda seen: Answer.json(doc))


# --- the PRM resource must be the server's own URL ------------------------------------------


@pytest.mark.parametrize(
    "resource",
    [
        "{origin}/mcp",  # the parent path: a token valid at every server under /mcp
        "{origin}",  # the origin root
        "{origin}/",
        "{origin}/mcp/b",  # a sibling server
        "{origin}/mcp/A",  # path case matters
        "{origin}/mcp/a/x",  # a child
        "http://localhost:{port}/mcp/a",  # the same machine under another name
    ],
    ids=["parent", "root", "root-slash", "sibling", "path-case", "child", "other-host"],
)
@pytest.mark.parametrize("credentials", [True, False], ids=["secret", "browser"])
async def test_a_prm_naming_another_resource_gets_nothing(resource: str, credentials: bool) -> None:
    async with hostile_auth("legit") as auth:
        port = auth.origin.rsplit(":", 1)[1]
        prm(auth, resource.format(origin=auth.origin, port=port))
        if credentials:
            config = attrs.evolve(pinned(auth), url=auth.origin + "/mcp/a")
        else:
            URL_OPENER.set(browser)
            config = server(auth.origin + "/mcp/a")
        message = await refused(config)
        assert as_contacted(auth) == [], [s.path for s in as_contacted(auth)]
    assert "protected resource metadata is for" in message, message


@pytest.mark.parametrize(
    "resource",
    ["{origin}/mcp/a", "{origin}/mcp/a/", "HTTP://127.0.0.1:{port}/mcp/a"],
    ids=["exact", "trailing-slash", "scheme-host-case"],
)
async def test_a_prm_naming_the_server_itself_is_used(resource: str) -> None:
    """The positive control of the test above: the same listener, the server's own URL
    (a trailing slash, or scheme and host in capitals, are the same resource)."""
    async with hostile_auth("legit") as auth:
        port = auth.origin.rsplit(":", 1)[1]
        prm(auth, resource.format(origin=auth.origin, port=port))
        await connect_once(attrs.evolve(pinned(auth), url=auth.origin + "/mcp/a"))
        (token, *_) = auth.to("/legit/token")
    assert b"resource=" in token.body


# --- the 2025-03-26 fallback: the origin's metadata names its own issuer --------------------


async def test_origin_metadata_claiming_the_pinned_issuer_gets_no_secret() -> None:
    """No PRM: the MCP server's origin is its authorization server. Metadata there that
    claims to be the pinned issuer (with the thief's endpoints) is refused: the pinned
    secret never reaches the thief's token endpoint."""
    async with hostile_auth("legit") as auth:
        config = pinned(auth)
        auth.route("/.well-known/oauth-protected-resource", lambda seen: Answer(status=404))
        auth.route(
            "/mcp", lambda seen: Answer(status=401, headers=(("www-authenticate", "Bearer"),))
        )
        legit, thief = auth.issuer("legit"), auth.issuer("thief")
        claimed = {
            "issuer": legit,
            "authorization_endpoint": f"{thief}/authorize",
            "token_endpoint": f"{thief}/token",
            "code_challenge_methods_supported": ["S256"],
        }
        auth.route("/.well-known/oauth-authorization-server", lambda seen: Answer.json(claimed))
        message = await refused(config)
        assert auth.to("/thief") == []
        assert all(SECRET not in s.text for s in auth.seen)
        assert "issuer" in message, message
        # Control: metadata naming the origin as its issuer, pinned so, gets the token request.
        own = dict(claimed, issuer=auth.origin)
        auth.route("/.well-known/oauth-authorization-server", lambda seen: Answer.json(own))
        await connect_once(
            attrs.evolve(config, oauth=attrs.evolve(config.oauth, issuer=auth.origin))
        )
        assert auth.to("/thief/token")


# --- RFC 9207: the iss of the authorization response ----------------------------------------


def advertise_iss(auth: HostileAuth, supported: bool) -> None:
    issuer = auth.issuer("legit")
    metadata = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "registration_endpoint": f"{issuer}/register",
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": supported,
    }
    auth.route("/.well-known/oauth-authorization-server/legit", lambda seen: Answer.json(metadata))


def authorize_with(auth: HostileAuth, iss: str | None, **extra: str) -> None:
    def authorize(seen: Seen) -> Answer:
        query = parse_qs(seen.query)
        back = {"code": "legit-code", "state": query["state"][0], **extra}
        if iss is not None:
            back["iss"] = iss
        location = f"{query['redirect_uri'][0]}?{urlencode(back)}"
        return Answer(status=302, headers=(("location", location),))

    auth.route("/legit/authorize", authorize)


@pytest.mark.parametrize(
    ("supported", "iss"),
    [
        (True, None),  # promised, missing
        (True, "{thief}"),
        (False, "{thief}"),  # not promised, present: still compared
        (True, "{legit}/"),  # no normalisation: a trailing slash is another issuer
        (False, "{legit_upper}"),  # nor case folding
    ],
    ids=["missing", "other", "other-unadvertised", "trailing-slash", "case"],
)
async def test_an_authorization_response_from_another_issuer_is_discarded(
    supported: bool, iss: str | None
) -> None:
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        advertise_iss(auth, supported)
        legit = auth.issuer("legit")
        named = {"thief": auth.issuer("thief"), "legit": legit, "legit_upper": legit.upper()}
        authorize_with(auth, iss.format(**named) if iss else None)
        message = await refused(server(auth.url))
        assert auth.to("/legit/authorize")
        # The code was never redeemed anywhere.
        assert auth.to("/legit/token") == [] == auth.to("/thief")
    assert "discarded" in message and "auth login victim" in message, message


@pytest.mark.parametrize(("supported", "iss"), [(True, True), (False, True), (False, False)])
async def test_an_authorization_response_with_the_right_iss_is_redeemed(
    supported: bool, iss: bool
) -> None:
    """The positive control: the same server's answer with its own iss (or none, when
    it promises none) is redeemed at its token endpoint."""
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        advertise_iss(auth, supported)
        authorize_with(auth, auth.issuer("legit") if iss else None)
        await connect_once(server(auth.url))
        assert len(auth.to("/legit/token")) == 1


async def test_an_error_response_from_another_issuer_is_not_shown() -> None:
    """RFC 9207 applies to error responses too: on a mismatch, its error text is not
    shown (a thief's phishing text would otherwise reach the user as ours)."""
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        advertise_iss(auth, True)
        authorize_with(
            auth, auth.issuer("thief"), error="access_denied", error_description="call 555-0100"
        )
        message = await refused(server(auth.url))
    assert "555-0100" not in message and "discarded" in message, message


# --- tokens, refresh tokens, clients and DPoP keys stay with their (issuer, resource) --------


def refresh_form(seen: Seen) -> dict[str, list[str]]:
    return parse_qs(seen.body.decode())


async def test_a_second_server_at_the_same_authorization_server_gets_nothing_of_the_first() -> None:
    """Two servers (two resources) on one authorization server: the second registers its
    own client and gets its own tokens; the first's access token, refresh token, client
    id and secret never appear in the second's requests, and each token request names
    its own resource."""
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        first = server(auth.origin + "/mcp/a", name="first")
        second = server(auth.origin + "/mcp/b", name="second")
        await connect_once(first)
        mark = len(auth.seen)
        await connect_once(second)
        later = auth.seen[mark:]
    first_secrets = ("legit-access-2", "legit-refresh-2", "legit-client-1", "legit-dcr-secret-1")
    # Control: the first server's requests did carry its own client and token.
    assert any("legit-client-1" in s.text for s in auth.seen[:mark])
    assert any("Bearer legit-access-2" in s.text for s in auth.seen[:mark])
    for seen in later:
        assert not any(value in seen.text for value in first_secrets), seen.text
    registered = [s for s in later if s.path == "/legit/register"]
    assert len(registered) == 1
    (token,) = [s for s in later if s.path == "/legit/token"]
    assert refresh_form(token)["resource"] == [auth.origin + "/mcp/b"]


async def test_refresh_tokens_go_only_to_the_issuer_that_minted_them() -> None:
    """Logged in at legit (with a refresh token); the server then names the thief and a
    person logs in there: legit's refresh token is spent at legit alone, and the thief
    sees none of legit's tokens, client or secret."""
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        config = server(auth.url)
        await connect_once(config)
        legit_refresh = refresh_form(auth.to("/legit/token")[0])
        assert legit_refresh["grant_type"] == ["authorization_code"]
        auth.named = auth.issuer("thief")
        auth.route("/legit/token", lambda seen: Answer.json({"error": "invalid_grant"}, 400))
        await connect_once(config)
        to_thief = auth.to("/thief")
        assert auth.to("/thief/token"), "the person's login at the thief went through"
        assert all("legit-" not in s.text for s in to_thief), [s.text for s in to_thief]
        refreshes = [s for s in auth.seen if b"grant_type=refresh_token" in s.body]
        assert refreshes and all(s.path == "/legit/token" for s in refreshes)
