"""Credentials bound to where they were minted (the OAuth mix-up class): a hostile MCP
server and hostile authorization servers (tests/security/hostile_auth.py, on loopback)
try to get a token, a refresh token, a client secret, a DPoP key or an authorization code
minted for one (issuer, resource) pair sent to another.

Each negative assertion ("nothing reached the thief") has its positive control in the
same test or next to it: the same listener does log the legitimate request."""

from __future__ import annotations

import base64
import contextlib
import json
import os
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlencode

import attrs
import pytest
import trio

import agenthost
from agenthost.auth import URL_OPENER
from agenthost.config.model import ServerConfig
from tests.security.hostile_auth import (
    SECRET,
    Answer,
    HostileAuth,
    Seen,
    browser,
    hostile_auth,
    pinned,
    posts,
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


def with_secret(url: str, issuer: str) -> ServerConfig:
    """Client credentials with the configured secret, pinned to ``issuer``."""
    return server(
        url, grant="client_credentials", client_id="c", client_secret=SECRET, issuer=issuer
    )


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


async def test_the_origin_root_document_may_not_name_a_parent_path() -> None:
    """The origin's root document may name the origin (tests/security/test_hostile_auth.py
    checks that case), never a path above the server that is not the origin."""
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        doc = {"resource": auth.url, "authorization_servers": [auth.named]}
        auth.route("/.well-known/oauth-protected-resource", lambda seen: Answer.json(doc))
        auth.route("/.well-known/oauth-protected-resource/mcp/a", lambda seen: Answer(status=404))
        bare = Answer(status=401, headers=(("www-authenticate", "Bearer"),))
        auth.route("/mcp/a", lambda seen: bare)
        message = await refused(server(auth.origin + "/mcp/a"))
        assert as_contacted(auth) == []
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
    claims to be the pinned issuer (on another origin) while naming the server's own
    endpoints is refused: the pinned secret never reaches them."""
    async with hostile_auth("thief") as auth, hostile_auth("legit") as honest:
        legit, thief = honest.issuer("legit"), auth.issuer("thief")
        config = with_secret(auth.url, issuer=legit)
        auth.route("/.well-known/oauth-protected-resource", lambda seen: Answer(status=404))
        bare = Answer(status=401, headers=(("www-authenticate", "Bearer"),))
        auth.route("/mcp", lambda seen: bare)
        claimed = {
            "issuer": legit,
            "authorization_endpoint": f"{thief}/authorize",
            "token_endpoint": f"{thief}/token",
            "code_challenge_methods_supported": ["S256"],
        }
        auth.route("/.well-known/oauth-authorization-server", lambda seen: Answer.json(claimed))
        message = await refused(config)
        assert auth.to("/thief") == [] == honest.seen
        assert all(SECRET not in s.text for s in auth.seen)
        assert "not one at the server's origin" in message, message
        # Control: metadata naming an issuer on the server's origin (2025-03-26 servers
        # put it under a path too), pinned so, gets the token request.
        own = dict(claimed, issuer=thief)
        auth.route("/.well-known/oauth-authorization-server", lambda seen: Answer.json(own))
        await connect_once(with_secret(auth.url, issuer=thief))
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


# --- DPoP keys are per authorization server ------------------------------------------------


def jose_header(token: str) -> dict[str, Any]:
    head = token.split(".")[0]
    value: dict[str, Any] = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    return value


def advertise_dpop(auth: HostileAuth, name: str) -> None:
    issuer = auth.issuer(name)
    metadata = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "registration_endpoint": f"{issuer}/register",
        "code_challenge_methods_supported": ["S256"],
        "dpop_signing_alg_values_supported": ["ES256"],
    }
    path = f"/.well-known/oauth-authorization-server/{name}"
    auth.route(path, lambda seen: Answer.json(metadata))


async def test_a_dpop_key_is_never_shown_to_another_authorization_server() -> None:
    """Logged in at legit with DPoP; the server moves to the thief, where a person logs in:
    the thief's proofs are signed with a new key (legit's tokens, the refresh token too,
    are bound to a key the thief never sees a proof of)."""
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        advertise_dpop(auth, "legit")
        advertise_dpop(auth, "thief")
        config = server(auth.url)
        await connect_once(config)
        auth.named = auth.issuer("thief")
        auth.route("/legit/token", lambda seen: Answer.json({"error": "invalid_grant"}, 400))
        await connect_once(config)
        legit_keys = {json.dumps(jose_header(s.headers["dpop"])["jwk"]) for s in auth.to("/legit")
                      if "dpop" in s.headers}  # fmt: skip
        thief_keys = {json.dumps(jose_header(s.headers["dpop"])["jwk"]) for s in auth.to("/thief")
                      if "dpop" in s.headers}  # fmt: skip
    assert len(legit_keys) == 1 and len(thief_keys) == 1, (legit_keys, thief_keys)
    assert legit_keys.isdisjoint(thief_keys)


# --- redirects to another origin carry nothing ---------------------------------------------


def redirect_to(location: str, status: int = 307) -> Answer:
    return Answer(status=status, headers=(("location", location),))


@pytest.mark.parametrize("lean", ["1", "0"], ids=["lean", "httpx"])
@pytest.mark.parametrize("status", [307, 308])
@pytest.mark.parametrize("dpop", [False, True], ids=["bearer", "dpop"])
async def test_an_mcp_redirect_to_another_origin_carries_no_credential(
    dpop: bool, status: int, lean: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a token is held, the MCP endpoint redirects (method kept) to another origin:
    nothing is sent there, not the token, the proof, nor a configured header, on the
    lean HTTP path and through httpx alike."""
    monkeypatch.setenv("AGENTHOST_LEAN_HTTP", lean)
    async with hostile_auth("legit") as auth, hostile_auth("thief") as other:
        if dpop:
            advertise_dpop(auth, "legit")
            bound = {"access_token": "bound-1", "token_type": "DPoP", "expires_in": 3600}
            auth.route("/legit/token", lambda seen: Answer.json(bound))

        def mcp(seen: Seen) -> Answer:
            if "authorization" in seen.headers:
                return redirect_to(other.url, status)
            return auth.default(seen)

        auth.route("/mcp", mcp)
        config = attrs.evolve(pinned(auth), headers={"X-Api-Key": "configured-api-key-9"})
        with trio.fail_after(30):
            await connect_once(config)
        sent = [s for s in auth.to("/mcp") if "authorization" in s.headers]
        # Control: the server itself got the token and the configured header.
        assert sent and all("configured-api-key-9" in s.text for s in sent)
        assert sent[0].headers["authorization"].startswith("DPoP " if dpop else "Bearer ")
        assert ("dpop" in sent[0].headers) is dpop
        assert other.seen == [], [s.text for s in other.seen]


async def test_a_same_origin_redirect_keeps_the_token() -> None:
    """The control of the test above: a redirect within the origin is followed, token and all."""
    async with hostile_auth("legit") as auth:

        def mcp(seen: Seen) -> Answer:
            if "authorization" in seen.headers:
                return redirect_to(auth.origin + "/mcp/moved")
            return auth.default(seen)

        auth.route("/mcp", mcp)
        await connect_once(pinned(auth))
        moved = auth.to("/mcp/moved")
    assert moved and moved[0].headers["authorization"] == "Bearer legit-access-1"


@pytest.mark.parametrize(
    "path",
    ["/legit/token", "/legit/register", "/.well-known/oauth-authorization-server/legit"],
)
async def test_an_authorization_server_redirect_is_not_followed(path: str) -> None:
    """The authorization server's endpoints answer 307 to another origin: not followed,
    so no client secret, code or form reaches it; the error is one line."""
    async with hostile_auth("legit") as auth, hostile_auth("thief") as other:
        auth.route(path, lambda seen: redirect_to(other.origin + "/steal"))
        if path == "/legit/register":
            URL_OPENER.set(browser)
            config = server(auth.url)
        else:
            config = pinned(auth)
        await refused(config)
        assert auth.to(path), "the endpoint was asked"
        assert other.seen == []


async def test_resource_metadata_at_another_origin_gets_no_credential() -> None:
    """``WWW-Authenticate resource_metadata`` names another origin: fetched (RFC 9728
    allows it) without the token, a proof or configured headers; its document must still
    name this server as its resource."""
    async with hostile_auth("legit") as auth, hostile_auth("thief") as other:
        where = other.origin + "/.well-known/oauth-protected-resource"
        challenge = Answer(
            status=401, headers=(("www-authenticate", f'Bearer resource_metadata="{where}"'),)
        )
        auth.route("/mcp", lambda seen: challenge)
        doc = {"resource": auth.url, "authorization_servers": [auth.issuer("legit")]}
        other.route("/.well-known/oauth-protected-resource", lambda seen: Answer.json(doc))
        config = attrs.evolve(pinned(auth), headers={"X-Api-Key": "configured-api-key-9"})
        await connect_once(config)
        assert other.seen, "the metadata was fetched there"
        assert all("configured-api-key-9" not in s.text and SECRET not in s.text
                   for s in other.seen)  # fmt: skip
        assert all("authorization" not in s.headers for s in other.seen)
        # Control: the server itself got the configured header and, later, the token.
        assert any("configured-api-key-9" in s.text for s in auth.to("/mcp"))
        assert auth.to("/legit/token")


# --- a PRM listing several authorization servers, the thief first -------------------------


def list_servers(auth: HostileAuth, *names: str) -> None:
    doc = {"resource": auth.url, "authorization_servers": [auth.issuer(n) for n in names]}
    auth.route("/.well-known/oauth-protected-resource", lambda seen: Answer.json(doc))


async def test_a_pinned_issuer_listed_second_is_the_one_used() -> None:
    async with hostile_auth("legit") as auth:
        config = pinned(auth)
        list_servers(auth, "thief", "legit")
        await connect_once(config)
        assert auth.to("/thief") == [] == auth.to("/.well-known/oauth-authorization-server/thief")
        assert auth.to("/legit/token")


async def test_the_saved_issuer_listed_second_is_kept_over_a_new_first() -> None:
    """Logged in at legit; the server then lists [thief, legit] and the saved login must be
    renewed with a person there: the login goes to legit again, and the person is never
    sent to the thief's login page."""
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        config = server(auth.url)
        await connect_once(config)
        list_servers(auth, "thief", "legit")
        auth.route("/legit/token", lambda seen: Answer.json({"error": "invalid_grant"}, 400))
        mark = len(auth.to("/legit/authorize"))
        await refused(config)
        assert auth.to("/thief") == [] == auth.to("/.well-known/oauth-authorization-server/thief")
        assert len(auth.to("/legit/authorize")) == mark + 1


async def test_without_a_pin_or_a_login_the_first_listed_is_used() -> None:
    """The control: nothing known yet, the first authorization server listed is asked."""
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        list_servers(auth, "thief", "legit")
        await connect_once(server(auth.url))
        assert auth.to("/thief/token") and auth.to("/legit") == []


@pytest.mark.parametrize("name", ["iss", "state", "code"])
async def test_an_authorization_response_repeating_a_parameter_is_discarded(name: str) -> None:
    """RFC 6749 section 3.1: a parameter appears once. ``iss=thief&iss=legit`` must not
    pass as legit's answer because one of the two values is the expected one."""
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        advertise_iss(auth, True)
        legit = auth.issuer("legit")

        def authorize(seen: Seen) -> Answer:
            query = parse_qs(seen.query)
            first = {"iss": auth.issuer("thief"), "state": "forged", "code": "thief-code"}
            pairs = [
                ("code", "legit-code"),
                ("state", query["state"][0]),
                ("iss", legit),
            ]
            pairs.insert(0, (name, first[name]))
            location = f"{query['redirect_uri'][0]}?{urlencode(pairs)}"
            return Answer(status=302, headers=(("location", location),))

        auth.route("/legit/authorize", authorize)
        message = await refused(server(auth.url))
        assert auth.to("/legit/authorize") and auth.to("/legit/token") == []
    assert "discarded" in message and name in message, message


# --- variants: token types, nonces, issuer spellings, refresh ------------------------------


@pytest.mark.parametrize("token_type", ["mac", "N_A", "", None, "DPoP"])
async def test_a_token_of_another_type_is_never_sent(token_type: str | None) -> None:
    """A token answer of a type we did not ask for (DPoP without a proof of ours, too)
    is refused, and the token never reaches the MCP server."""
    async with hostile_auth("legit") as auth:
        body: dict[str, Any] = {"access_token": "odd-token-1", "expires_in": 3600}
        if token_type is not None:
            body["token_type"] = token_type
        auth.route("/legit/token", lambda seen: Answer.json(body))
        message = await refused(pinned(auth))
        assert auth.to("/legit/token")
        assert all("odd-token-1" not in s.text for s in auth.to("/mcp"))
    assert "odd-token-1" not in message and "token of type" in message, message


async def test_a_dpop_nonce_stays_with_the_url_that_gave_it() -> None:
    """The MCP server and the token endpoint each give a nonce: a proof to one never
    carries the other's (a server cannot make us sign its nonce for another)."""
    async with hostile_auth("legit") as auth:
        advertise_dpop(auth, "legit")
        count = iter(range(100))

        def token(seen: Seen) -> Answer:
            if next(count) == 0:
                refusal = Answer.json({"error": "use_dpop_nonce"}, status=400)
                return attrs.evolve(refusal, headers=(*refusal.headers, ("dpop-nonce", "as-n")))
            bound = {"access_token": "bound-1", "token_type": "DPoP", "expires_in": 0}
            return Answer.json(bound)

        def mcp(seen: Seen) -> Answer | None:
            if "dpop" not in seen.headers:
                return None
            challenge = 'DPoP error="use_dpop_nonce"'
            headers = (("www-authenticate", challenge), ("dpop-nonce", "mcp-n"))
            return Answer(status=401, headers=headers)

        auth.route("/legit/token", token)
        auth.route("/mcp", mcp)
        await connect_once(pinned(auth))
        to_token = [jose_claims(s.headers["dpop"]).get("nonce") for s in auth.to("/legit/token")]
        to_mcp = [jose_claims(s.headers["dpop"]).get("nonce") for s in auth.to("/mcp")
                  if "dpop" in s.headers]  # fmt: skip
    assert to_token[:2] == [None, "as-n"] and "mcp-n" not in to_token, to_token
    assert "mcp-n" in to_mcp and "as-n" not in to_mcp, to_mcp


def jose_claims(token: str) -> dict[str, Any]:
    body = token.split(".")[1]
    value: dict[str, Any] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    return value


@pytest.mark.parametrize(
    ("named", "document", "pin"),
    [
        ("{legit}/", "{legit}", None),  # the PRM's issuer with a slash, the document's without
        ("{legit}", "{legit}/", None),
        ("{legit}", "{legit}", "{legit}/"),  # the pin with a slash
        ("{legit}", "{upper}", None),  # case
    ],
    ids=["prm-slash", "doc-slash", "pin-slash", "case"],
)
async def test_an_issuer_spelled_otherwise_is_another_issuer(
    named: str, document: str, pin: str | None
) -> None:
    """RFC 8414 section 3.3: the metadata's issuer is identical to the issuer the URL was
    built from (no normalisation); a pin compares the same way. Nothing is sent."""
    async with hostile_auth("legit") as auth:
        legit = auth.issuer("legit")
        spell = {"legit": legit, "upper": legit.replace("legit", "LEGIT")}
        auth.named = named.format(**spell)
        issuer = document.format(**spell)
        metadata = {
            "issuer": issuer,
            "authorization_endpoint": f"{legit}/authorize",
            "token_endpoint": f"{legit}/token",
            "code_challenge_methods_supported": ["S256"],
        }
        auth.route(
            "/.well-known/oauth-authorization-server/legit", lambda seen: Answer.json(metadata)
        )
        config = with_secret(auth.url, issuer=(pin or named).format(**spell))
        message = await refused(config)
        assert posts(auth) == []
    assert "not the expected" in message or "not the issuer" in message, message


async def test_a_refresh_names_the_resource_and_goes_to_the_minting_issuer() -> None:
    """A refresh carries the resource its token was minted for, at the token endpoint
    of the issuer that minted it, with that issuer's client."""
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        short = {"access_token": "short-1", "token_type": "Bearer", "expires_in": 0,
                 "refresh_token": "legit-refresh-x"}  # fmt: skip
        auth.route("/legit/token", lambda seen: Answer.json(short))
        config = server(auth.url)
        await connect_once(config)
        URL_OPENER.set(None)
        await connect_once(config)
        refreshes = [s for s in auth.seen if b"legit-refresh-x" in s.body]
    assert refreshes and all(s.path == "/legit/token" for s in refreshes)
    form = refresh_form(refreshes[0])
    assert form["grant_type"] == ["refresh_token"] and form["resource"] == [auth.url]


async def test_resource_metadata_on_plain_http_elsewhere_is_not_fetched() -> None:
    """A challenge pointing at plain http on a host that is not this machine (a cloud
    metadata address, say) is refused before any request."""
    async with hostile_auth("legit") as auth:
        where = "http://169.254.169.254/latest/meta-data/"
        challenge = Answer(
            status=401, headers=(("www-authenticate", f'Bearer resource_metadata="{where}"'),)
        )
        auth.route("/mcp", lambda seen: challenge)
        with trio.fail_after(20):
            message = await refused(pinned(auth))
        assert as_contacted(auth) == []
    assert "https is required" in message, message


# --- a secret added to the config later goes nowhere the config does not name ---------------


@pytest.mark.parametrize("pin", [None, "thief-of-config"], ids=["no-issuer", "other-issuer"])
async def test_a_secret_added_later_is_not_sent_with_the_saved_logins_refresh(
    pin: str | None,
) -> None:
    """A browser login with a public client at the authorization server the server
    named (no pin); the user then adds a client secret (without an issuer, or with
    another one). The saved login's refresh must not carry the secret to the saved
    authorization server: secrets go only to the configured issuer."""
    async with hostile_auth("thief") as auth:
        URL_OPENER.set(browser)
        short = {"access_token": "short-1", "token_type": "Bearer", "expires_in": 0,
                 "refresh_token": "thief-refresh-x"}  # fmt: skip
        auth.route("/thief/token", lambda seen: Answer.json(short))
        await connect_once(server(auth.url, client_id="public-app"))
        assert auth.to("/thief/token")
        URL_OPENER.set(None)
        issuer = auth.issuer("legit") if pin else None
        later = server(auth.url, client_id="public-app", client_secret=SECRET, issuer=issuer)
        mark = len(auth.seen)
        message = await refused(later)
        assert all(SECRET not in s.text for s in auth.seen[mark:]), "the secret left"
        assert all("Basic " not in s.headers.get("authorization", "") for s in auth.seen[mark:])
    assert "issuer" in message and "[servers.victim.oauth]" in message, message


@pytest.mark.parametrize("transport", ["sse", "http"])
async def test_a_redirect_to_another_origin_carries_nothing_on_the_other_transports(
    transport: Literal["sse", "http"],
) -> None:
    """The legacy SSE transport (a GET stream) and the probing one: same rule."""
    async with hostile_auth("legit") as auth, hostile_auth("thief") as other:

        def mcp(seen: Seen) -> Answer:
            if "authorization" in seen.headers:
                return redirect_to(other.url)
            return auth.default(seen)

        auth.route("/mcp", mcp)
        config = attrs.evolve(
            pinned(auth), transport=transport, headers={"X-Api-Key": "configured-api-key-9"}
        )
        with trio.fail_after(30):
            await connect_once(config)
        sent = [s for s in auth.to("/mcp") if "authorization" in s.headers]
        assert sent and all("configured-api-key-9" in s.text for s in sent)
        assert other.seen == [], [s.text for s in other.seen]


# --- a remote server's discovery may not aim our requests at this machine --------------------


async def test_a_remote_servers_challenge_may_not_aim_at_this_machine() -> None:
    """SSRF via resource_metadata: a server elsewhere (``mcp.remote.test``, reached
    through the hostile listener acting as an HTTP proxy: only the name's resolution is
    stood in for) names a URL on this machine; nothing is fetched there. The control:
    a server on this machine naming the same URL gets it fetched."""
    import httpx

    from agenthost.auth import OAuth
    from agenthost.errors import AuthorizationError

    async with hostile_auth("legit") as auth, hostile_auth("legit") as local:
        where = local.origin + "/.well-known/oauth-protected-resource"
        challenge = Answer(
            status=401, headers=(("www-authenticate", f'Bearer resource_metadata="{where}"'),)
        )
        auth.route("/mcp", lambda seen: challenge)
        mounts = {"http://mcp.remote.test": httpx.AsyncHTTPTransport(proxy=auth.origin)}
        async with httpx.AsyncClient(mounts=mounts) as http:
            flow = OAuth(server="victim", url="http://mcp.remote.test/mcp", http=http)
            with pytest.raises(AuthorizationError) as caught:
                await flow.login()
            assert auth.to("/mcp"), "the remote server was asked, through the proxy"
            assert local.seen == []
            # Control: the server on this machine may point there.
            near = OAuth(server="near", url=auth.url, http=http)
            with pytest.raises(AuthorizationError):
                await near.login()
            assert local.to("/.well-known/oauth-protected-resource")
    message = str(caught.value)
    assert "points at this machine" in message and "\n" not in message, message


# --- the loopback redirect: another local program's callback -------------------------------


async def test_a_forged_callback_before_the_browsers_neither_wins_nor_ends_the_login() -> None:
    """Another program on this machine (or a web page the user has open) finds the
    loopback port and calls ``/callback`` first, with a code of its own and a state it
    had to guess. Its code must never be redeemed, and it must not end the login either
    (it used to: the first callback was the only one read, so any local program could
    break every login). The person's own answer, which comes next, is redeemed."""
    import httpx

    async def forger_then_person(name: str, url: str) -> None:
        redirect = parse_qs(url.split("?", 1)[1])["redirect_uri"][0]
        async with httpx.AsyncClient(timeout=10) as client:
            forged = {"code": "forged-code", "state": "guessed", "iss": auth.issuer("legit")}
            answer = await client.get(redirect, params=forged)
            assert answer.status_code == 200 and "not for" in answer.text
            no_state = await client.get(redirect, params={"code": "forged-code-2"})
            assert no_state.status_code == 200
        await browser(name, url)

    async with hostile_auth("legit") as auth:
        URL_OPENER.set(forger_then_person)
        with trio.fail_after(30):
            await connect_once(server(auth.url))
        redeemed = auth.to("/legit/token")
    assert redeemed, "the person's code was redeemed"
    assert all(b"forged-code" not in s.body for s in auth.seen)
    assert b"code=legit-code" in redeemed[0].body


@pytest.mark.parametrize(
    "opening", [b"", b"GET /callback?code=x&state="], ids=["silent", "partial"]
)
async def test_idle_connections_to_the_loopback_do_not_pile_up_nor_block_the_login(
    opening: bytes,
) -> None:
    """Another local program opens 64 connections to the loopback port and sends nothing,
    or half a request line (each used to be held 10 s, with no bound on how many at
    once). At most
    ``MAX_CONNECTIONS`` stay open: the oldest idle ones are closed as new ones come, and
    the browser's callback, which comes after them, still completes the login. Positive
    control: the newest idle connections are held (up to the bound), not all dropped."""
    from agenthost.auth.loopback import MAX_CONNECTIONS

    held = 64
    closed: list[int] = []
    kept: list[int] = []

    async def watch(n: int, stream: trio.SocketStream) -> None:
        with trio.move_on_after(2):
            with contextlib.suppress(trio.BrokenResourceError):
                await stream.receive_some(1)
            closed.append(n)
            return
        kept.append(n)

    async def idle_then_person(name: str, url: str) -> None:
        redirect = parse_qs(url.split("?", 1)[1])["redirect_uri"][0]
        port = int(redirect.split(":")[2].split("/")[0])
        streams = []
        for _ in range(held):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            if opening:
                await stream.send_all(opening)
            streams.append(stream)
            await trio.sleep(0.01)  # accepted in this order
        async with trio.open_nursery() as nursery:
            for n, stream in enumerate(streams):
                nursery.start_soon(watch, n, stream)
        await browser(name, url)
        for stream in streams:
            await stream.aclose()

    async with hostile_auth("legit") as auth:
        URL_OPENER.set(idle_then_person)
        with trio.fail_after(30):
            await connect_once(server(auth.url))
        redeemed = auth.to("/legit/token")
    assert redeemed and b"code=legit-code" in redeemed[0].body, "the login completed"
    assert len(closed) >= held - MAX_CONNECTIONS, (len(closed), len(kept))
    assert kept and len(kept) <= MAX_CONNECTIONS
    assert min(kept) > max(closed), "the oldest idle ones went first"


@pytest.mark.parametrize("host", ["127.1", "0.0.0.0", "2130706433", "0x7f.1", "[::ffff:127.0.0.1]"])
async def test_this_machine_spelled_otherwise_is_this_machine(host: str) -> None:
    """SSRF via another spelling of this machine: the short, decimal and hex IPv4 forms
    the resolver takes (``127.1``), the unspecified address (Linux connects it to
    loopback) and IPv4-mapped IPv6 all reach a port here. Over https (http off this
    machine is refused anyway) a remote server could still make us connect to any local
    port, which tells it what listens here. The control: a server on this machine naming
    the same URL does get a connection to the listener, so each spelling does reach it."""
    import httpx

    from agenthost.auth import OAuth
    from agenthost.errors import AuthorizationError

    async with hostile_auth("legit") as auth, hostile_auth("legit") as local:
        port = local.origin.rsplit(":", 1)[1]
        where = f"https://{host}:{port}/.well-known/oauth-protected-resource"
        challenge = Answer(
            status=401, headers=(("www-authenticate", f'Bearer resource_metadata="{where}"'),)
        )
        auth.route("/mcp", lambda seen: challenge)
        mounts = {"http://mcp.remote.test": httpx.AsyncHTTPTransport(proxy=auth.origin)}
        async with httpx.AsyncClient(mounts=mounts, timeout=10) as http:
            flow = OAuth(server="victim", url="http://mcp.remote.test/mcp", http=http)
            with pytest.raises(AuthorizationError) as caught:
                await flow.login()
            assert auth.to("/mcp"), "the remote server was asked, through the proxy"
            assert local.connections == 0, "a connection reached this machine"
            near = OAuth(server="near", url=auth.url, http=http)
            with pytest.raises(AuthorizationError):
                await near.login()
            assert local.connections >= 1, "the control: this spelling reaches the listener"
    message = str(caught.value)
    assert "points at this machine" in message and "\n" not in message, message


# --- variants that hold: step-up elsewhere, an assertion's audience ---------------------------


async def test_a_step_up_naming_another_authorization_server_gets_nothing_headless() -> None:
    """Mid-session, the server answers 403 ``insufficient_scope`` whose
    ``resource_metadata`` is a document of its own (for this very resource) listing the
    thief: a step-up is a new grant, and nobody chose that authorization server. Nothing
    reaches the thief, not the refresh token nor the registered client's secret, and only
    that request fails. The control: the first login, at legit, did go through."""
    import httpx

    from agenthost.auth import OAuth
    from agenthost.errors import RequestUnauthorized

    async with hostile_auth("legit") as auth:
        where = f"{auth.origin}/.well-known/oauth-protected-resource/step-up"
        doc = {"resource": auth.url, "authorization_servers": [auth.issuer("thief")]}
        auth.route("/.well-known/oauth-protected-resource/step-up", lambda s: Answer.json(doc))
        step_up = f'Bearer error="insufficient_scope", scope="admin", resource_metadata="{where}"'

        def mcp(seen: Seen) -> Answer:
            if seen.headers.get("authorization", "").startswith("Bearer legit-access"):
                return Answer(status=403, headers=(("www-authenticate", step_up),))
            return auth.default(seen)

        auth.route("/mcp", mcp)
        async with httpx.AsyncClient(timeout=10) as http:
            person = OAuth(server="victim", url=auth.url, http=http, opener=browser)
            assert (await person.login()).logged_in
            assert auth.to("/legit/token"), "the control: the login at legit went through"
            headless = OAuth(server="victim", url=auth.url, http=http)
            mark = len(auth.seen)
            with pytest.raises(RequestUnauthorized) as caught:
                await http.post(auth.url, content=b"{}", auth=headless)
        later = auth.seen[mark:]
        assert any(s.path == "/mcp" for s in later), "the saved token was used"
        assert [s for s in later if s.path.startswith(("/thief", "/legit/token"))] == []
        assert all("legit-refresh" not in s.text and "legit-dcr" not in s.text for s in later)
    message = str(caught.value)
    assert auth.issuer("thief") in message and "\n" not in message, message


async def test_a_client_assertion_names_the_issuer_when_its_token_endpoint_is_elsewhere(
    tmp_path: Path,
) -> None:
    """Audience injection (RFC 7523bis): the pinned issuer's metadata puts its token
    endpoint on another host. The signed assertion's ``aud`` is the issuer, never that
    endpoint (an assertion whose audience the metadata picks could be replayed at
    whatever that names)."""
    from joserfc import jwt
    from joserfc.jwk import ECKey

    key = ECKey.generate_key("P-256")
    pem = tmp_path / "client.pem"
    pem.write_bytes(key.as_pem(private=True))
    async with hostile_auth("legit") as auth, hostile_auth("legit") as elsewhere:
        auth.named = legit = auth.issuer("legit")
        metadata = {
            "issuer": legit,
            "token_endpoint": f"{elsewhere.origin}/legit/token",
            "token_endpoint_auth_methods_supported": ["private_key_jwt"],
        }
        auth.route("/.well-known/oauth-authorization-server/legit", lambda s: Answer.json(metadata))
        config = server(
            auth.url,
            grant="client_credentials",
            client_id="c",
            private_key_file=str(pem),
            issuer=legit,
        )
        await connect_once(config)
        (first, *_) = elsewhere.to("/legit/token")
        assert auth.to("/legit/token") == []
    form = parse_qs(first.body.decode())
    claims = jwt.decode(form["client_assertion"][0], key).claims
    assert claims["aud"] == legit and claims["aud"] != metadata["token_endpoint"]
