"""Issue 28: hostile authorization servers against the OAuth client (each test seen failing
before its fix; tests/security/hostile_auth.py plays the servers)."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import agenthost
from agenthost.auth import URL_OPENER, OAuthSettings
from agenthost.config.model import ServerConfig, Timeouts
from agenthost.errors import AuthorizationError
from agenthost.redaction import redact
from tests.peers.http_launch import free_port
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

WORKLOAD = "eyJhbGciOiJub25lIn0.workload-identity-jwt.sig"


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path: Path) -> None:
    os.environ["XDG_DATA_HOME"] = str(tmp_path / "data")
    os.environ["AGENTHOST_TOKEN_STORE"] = "file"
    URL_OPENER.set(None)


# --- C1: configured credentials go only to the issuer named in the config --------------


@pytest.mark.parametrize(
    "oauth",
    [
        {"grant": "client_credentials", "client_id": "c", "client_secret": SECRET},
        {
            "grant": "client_credentials",
            "client_id": "c",
            "client_secret": SECRET,
            "token_endpoint_auth_method": "client_secret_post",
        },
        {"grant": "jwt_bearer", "client_id": "c", "assertion": WORKLOAD},
    ],
    ids=["basic", "post", "workload"],
)
async def test_c1_a_secret_without_issuer_is_refused_before_anything_is_sent(
    oauth: dict[str, Any],
) -> None:
    async with hostile_auth("thief") as auth:
        message = await refused(server(auth.url, **oauth))
        assert posts(auth) == []
        assert all(SECRET not in s.text and "workload-identity" not in s.text for s in auth.seen)
    assert f'issuer = "{auth.issuer("thief")}"' in message, message
    assert "[servers.victim.oauth]" in message


async def test_c1_a_secret_goes_only_to_the_pinned_issuer() -> None:
    async with hostile_auth("thief") as auth:
        config = server(
            auth.url,
            grant="client_credentials",
            client_id="c",
            client_secret=SECRET,
            issuer=auth.issuer("legit"),
        )
        message = await refused(config)
        assert posts(auth) == []
        assert auth.to("/thief") == [] == auth.to("/.well-known/oauth-authorization-server")
        assert auth.issuer("thief") in message and auth.issuer("legit") in message
        # The same server naming the pinned issuer gets its token, and the MCP request the
        # access token.
        auth.named = auth.issuer("legit")
        with pytest.raises(agenthost.AgentHostError):
            async with agenthost.connect(config):
                pass
        token_posts = auth.to("/legit/token")
        assert token_posts
        assert all(s.headers["authorization"].startswith("Basic ") for s in token_posts)
        assert any(s.headers.get("authorization") == "Bearer legit-access-1" for s in auth.seen)


async def test_c1_a_server_that_names_another_authorization_server_later_gets_nothing() -> None:
    """A login with the legit issuer (a registered client with a secret, tokens); the
    server then names the thief: no registration secret, no token goes there, and the
    message says to log in again."""
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        config = server(auth.url)
        no_refresh = Answer.json({"access_token": "legit-access", "token_type": "Bearer"})
        auth.route("/legit/token", lambda seen: no_refresh)
        with pytest.raises(agenthost.AgentHostError):  # logged in; /mcp still says no MCP
            async with agenthost.connect(config):
                pass
        assert auth.to("/legit/token") and auth.to("/legit/register")
        auth.named = auth.issuer("thief")
        # The saved token is refused now (and cannot be refreshed); discovery names the thief.
        URL_OPENER.set(None)  # headless (CI): nobody chose the new server
        before = len(auth.seen)
        message = await refused(config)
        later = auth.seen[before:]
        assert [s for s in later if s.path.startswith("/thief/")] == []
        assert all("legit-dcr-secret" not in s.text for s in auth.to("/thief"))
        assert "auth login victim" in message and auth.issuer("thief") in message


async def test_c1_a_registered_client_is_bound_to_its_token_endpoint() -> None:
    """2025-03-26 discovery (no PRM): metadata at the server's origin that claims the
    legit issuer but names the thief's token endpoint never gets the legit client."""
    async with hostile_auth("legit") as auth:
        URL_OPENER.set(browser)
        config = server(auth.url, redirect_port=free_port())
        with pytest.raises(agenthost.AgentHostError):
            async with agenthost.connect(config):
                pass
        registered = auth.to("/legit/register")
        assert registered
        # Now: no PRM, and origin metadata claiming issuer "legit" with thief endpoints.
        auth.route("/.well-known/oauth-protected-resource", lambda seen: Answer(status=404))
        bare = Answer(status=401, headers=(("www-authenticate", "Bearer"),))
        auth.route("/mcp", lambda seen: bare)
        legit = auth.issuer("legit")
        thief = auth.issuer("thief")
        auth.route(
            "/.well-known/oauth-authorization-server",
            lambda seen: Answer.json(
                {
                    "issuer": legit,
                    "authorization_endpoint": f"{thief}/authorize",
                    "token_endpoint": f"{thief}/token",
                    "code_challenge_methods_supported": ["S256"],
                }
            ),
        )
        auth.route("/legit/token", lambda seen: Answer.json({"error": "invalid_grant"}, 400))
        await refused(config)
        assert all("legit-dcr-secret" not in s.text for s in auth.to("/thief"))
        assert all("legit-client" not in s.text for s in auth.to("/thief"))


# --- H1: a huge token response does not flush the configured secrets ----------------------


async def test_h1_a_token_of_many_words_does_not_evict_a_configured_secret() -> None:
    api_key = "test-key-of-the-other-server"
    other = ServerConfig(
        name="other", transport="streamable-http", url="http://127.0.0.1:1/mcp",
        headers={"X-Api-Key": api_key},
    )  # fmt: skip
    assert other.headers and redact(f"key {api_key}") == "key ***"
    words = " ".join(f"word{n:06d}" for n in range(5000))
    async with hostile_auth("legit") as auth:
        auth.named = auth.issuer("legit")
        auth.route(
            "/legit/token",
            lambda seen: Answer.json({"access_token": words, "token_type": "Bearer"}),
        )
        config = server(
            auth.url,
            grant="client_credentials",
            client_id="c",
            client_secret=SECRET,
            issuer=auth.issuer("legit"),
        )
        with pytest.raises(agenthost.AgentHostError):
            async with agenthost.connect(config):
                pass
        assert auth.to("/legit/token")
    assert redact(f"key {api_key}") == "key ***"
    assert redact(f"the token: {words}") == "the token: ***"
    assert redact("word000017 alone is not a secret") == "word000017 alone is not a secret"


# --- H2 / H7: answers read up to 256 KiB; one deadline for the whole exchange ------------


async def test_h2_a_huge_token_answer_is_not_read_past_the_limit() -> None:
    async with hostile_auth("legit") as auth:
        auth.route("/legit/token", lambda seen: Answer(status=200, huge=64 * 2**20))
        with trio.fail_after(30):
            message = await refused(pinned(auth))
        assert "more than 256 KiB" in message
        # The client hung up: far less than the 64 MiB left the server.
        assert auth.sent["/legit/token"] < 16 * 2**20, auth.sent


@pytest.mark.parametrize("path", ["/legit/token", "/.well-known/oauth-authorization-server/legit"])
async def test_h7_a_dripping_endpoint_meets_one_deadline(path: str) -> None:
    body = b'{"access_token": "' + b"x" * 200 + b'", "token_type": "Bearer"}'
    async with hostile_auth("legit") as auth:
        config = pinned(auth, exchange_timeout=1.5)
        drip = Answer(status=200, headers=(("content-type", "application/json"),), body=body)
        auth.route(path, lambda seen: attrs.evolve(drip, drip=0.2))
        start = trio.current_time()
        with trio.fail_after(20):
            message = await refused(config)
        assert trio.current_time() - start < 8
        assert "did not finish the login within 1.5 s" in message
        assert "exchange_timeout" in message


# --- M4: the first POST failing at the HTTP level -----------------------------------------


@pytest.mark.parametrize("transport", ["streamable-http", "http"])
async def test_m4_a_first_post_whose_connection_closes_is_a_clean_error(transport: str) -> None:
    async with hostile_auth("legit") as auth:
        auth.route("/mcp", lambda seen: Answer(hang_up=True))
        config = ServerConfig(
            name="victim",
            transport=transport,  # type: ignore[arg-type]
            url=auth.url,
            oauth=OAuthSettings(enabled=False),
            timeouts=Timeouts(startup=10, request=10),
        )
        with pytest.raises(agenthost.AgentHostError) as caught, trio.fail_after(20):
            async with agenthost.connect(config):
                pass
    message = str(caught.value)
    assert "UnboundLocalError" not in message and "internal error" not in message, message
    assert message.startswith("victim:"), message


# --- M5: two processes refreshing one login ------------------------------------------------


async def test_m5_two_refreshing_at_once_share_the_rotation_and_stay_logged_in() -> None:
    """Two flows (as two processes: separate locks and memory, one store) find the saved
    token expiring and refresh at once; the server rotates refresh tokens (the second use
    of one is invalid_grant). Both requests succeed and the store keeps a good login."""
    import httpx

    from agenthost.auth import FileTokenStore, OAuth

    async with hostile_auth("legit") as auth:
        auth.named = auth.issuer("legit")
        live = {"refresh": ""}
        valid: set[str] = set()
        count = [0]

        async def token(seen: Seen) -> Answer:
            form = dict(p.split("=", 1) for p in seen.body.decode().split("&"))
            if form["grant_type"] == "refresh_token":
                if form["refresh_token"] != live["refresh"]:
                    return Answer.json({"error": "invalid_grant"}, status=400)
                live["refresh"] = ""
                await trio.sleep(0.3)  # both flows are in flight now
            count[0] += 1
            access, refresh = f"access-{count[0]:04d}", f"refresh-{count[0]:04d}"
            live["refresh"] = refresh
            valid.add(access)
            lifetime = 0 if count[0] == 1 else 3600  # the first has expired at once
            return Answer.json(
                {"access_token": access, "token_type": "Bearer", "refresh_token": refresh,
                 "expires_in": lifetime}
            )  # fmt: skip

        def mcp(seen: Seen) -> Answer:
            sent = seen.headers.get("authorization", "").removeprefix("Bearer ")
            return Answer(status=200) if sent in valid else auth.default(seen)

        auth.route("/legit/token", token)
        auth.route("/mcp", mcp)
        async with httpx.AsyncClient() as http:
            first = OAuth(server="victim", url=auth.url, http=http, opener=browser)
            await first.login()
            results: list[int] = []

            async def one_process() -> None:
                async with httpx.AsyncClient() as as_http:
                    flow = OAuth(server="victim", url=auth.url, http=as_http, opener=None)
                    async with httpx.AsyncClient(auth=flow) as client:
                        results.append((await client.post(auth.url)).status_code)

            with trio.fail_after(20):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(one_process)
                    nursery.start_soon(one_process)
        assert results == [200, 200]
        status = await OAuth(server="victim", url=auth.url, http=http).status()
        assert status.logged_in and status.refreshable
        assert await FileTokenStore().load("victim")
        refreshes = [s for s in auth.to("/legit/token") if b"refresh_token" in s.body]
        assert len(refreshes) == 1  # the second flow took the first one's tokens


# --- Low: the 401 hint while OAuth is active ------------------------------------------------


async def test_low_the_401_hint_does_not_suggest_headers_while_oauth_is_active() -> None:
    async with hostile_auth("legit") as auth:
        # Tokens are issued, and the server refuses every one of them.
        with pytest.raises(agenthost.AgentHostError) as caught:
            async with agenthost.connect(pinned(auth)):
                pass
        assert auth.to("/legit/token")
    message = str(caught.value)
    assert "HTTP 401" in message and "headers =" not in message, message
    assert "log in again" in message


# --- Low: a resource that is the origin root --------------------------------------------------


async def test_low_a_resource_at_the_origin_root_is_refused_for_secrets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with hostile_auth("legit") as auth:
        config = pinned(auth)
        prm = {"resource": auth.origin + "/", "authorization_servers": [auth.issuer("legit")]}
        auth.route("/.well-known/oauth-protected-resource", lambda seen: Answer.json(prm))
        message = await refused(config)
        assert posts(auth) == []
        assert "whole origin" in message
        # Without configured credentials: a warning, and the login goes on.
        URL_OPENER.set(browser)
        with pytest.raises(agenthost.AgentHostError):
            async with agenthost.connect(server(auth.url)):
                pass
        assert auth.to("/legit/token")
    assert any("whole origin" in r.getMessage() for r in caplog.records)


# --- the library API: private_key_file ------------------------------------------------------


async def test_private_key_file_signs_the_client_assertion(tmp_path: Path) -> None:
    from joserfc import jwt
    from joserfc.jwk import ECKey

    key = ECKey.generate_key("P-256")
    pem = tmp_path / "client.pem"
    pem.write_bytes(key.as_pem(private=True))
    settings = OAuthSettings(
        grant="client_credentials",
        client_id="c",
        private_key_file=str(pem),
        issuer="https://a.test",
    )
    assert settings.auth_method == "private_key_jwt" and "BEGIN" not in repr(settings)
    async with hostile_auth("legit") as auth:
        auth.named = auth.issuer("legit")
        config = ServerConfig(
            name="victim",
            transport="streamable-http",
            url=auth.url,
            oauth=attrs.evolve(settings, issuer=auth.issuer("legit"), private_key=None),
            timeouts=Timeouts(startup=20, request=20),
        )
        with pytest.raises(agenthost.AgentHostError):
            async with agenthost.connect(config):
                pass
        (first, *_) = auth.to("/legit/token")
    form = dict(p.split("=", 1) for p in first.body.decode().split("&"))
    token = jwt.decode(form["client_assertion"], key)
    assert token.claims["aud"] == auth.issuer("legit") and token.claims["sub"] == "c"


# --- Low: expires_in <= 0 and short lifetimes -------------------------------------------------


@pytest.mark.parametrize(("expires_in", "refreshes"), [(30, 0), (0, 2), (-5, 2)])
async def test_low_token_lifetimes(expires_in: int, refreshes: int) -> None:
    """Three requests in a row: a 30 s token is not refreshed before each (it was, with a
    60 s margin); a token that expires at once (0 or negative) is refreshed before each
    next one (it was kept forever)."""
    import httpx

    from agenthost.auth import OAuth

    async with hostile_auth("legit") as auth:
        auth.named = auth.issuer("legit")
        valid: set[str] = set()
        count = [0]

        def token(seen: Seen) -> Answer:
            count[0] += 1
            access = f"access-{count[0]:04d}"
            valid.add(access)
            return Answer.json(
                {"access_token": access, "token_type": "Bearer", "refresh_token": f"r-{count[0]}",
                 "expires_in": expires_in}
            )  # fmt: skip

        def mcp(seen: Seen) -> Answer:
            sent = seen.headers.get("authorization", "").removeprefix("Bearer ")
            return Answer(status=200) if sent in valid else auth.default(seen)

        auth.route("/legit/token", token)
        auth.route("/mcp", mcp)
        async with httpx.AsyncClient() as http:
            flow = OAuth(server="victim", url=auth.url, http=http, opener=browser)
            async with httpx.AsyncClient(auth=flow) as client:
                for _ in range(3):
                    assert (await client.post(auth.url)).status_code == 200
        grants = [s.body for s in auth.to("/legit/token")]
        assert sum(b"grant_type=refresh_token" in body for body in grants) == refreshes


# --- Then: a server that refuses every fresh token costs one token request ------------


async def test_a_server_refusing_fresh_tokens_gets_one_token_request_per_mcp_request() -> None:
    async with hostile_auth("legit") as auth:
        # Client credentials are renewable without a person: every 401 could buy another
        # token. The request fails after the first fresh one, with the login command.
        for attempt in (1, 2):
            with pytest.raises(AuthorizationError) as caught:
                async with agenthost.connect(pinned(auth)):
                    pass
            assert len(auth.to("/legit/token")) == attempt
            message = str(caught.value)
            assert "\n" not in message and "HTTP 401" in message
            assert "agenthost auth login victim" in message


# --- DPoP: a hostile server cannot make us loop, grow, or sign what it chooses -------------


def dpop_server(auth: HostileAuth, nonce: Any = None) -> None:
    """``legit`` advertises DPoP and binds its tokens; the MCP endpoint refuses every DPoP
    request for want of a nonce, with ``nonce(n)`` (a new one each time by default)."""
    issuer = auth.issuer("legit")
    metadata = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "dpop_signing_alg_values_supported": ["ES256"],
    }
    auth.route("/.well-known/oauth-authorization-server/legit", lambda seen: Answer.json(metadata))
    make = nonce or (lambda n: f"nonce-{n}")
    count = iter(range(10**6))

    def token(seen: Seen) -> Answer:
        body = {"access_token": "bound-1", "token_type": "DPoP", "expires_in": 3600}
        return Answer.json(body)

    def resource(seen: Seen) -> Answer | None:
        if "dpop" not in seen.headers:
            return None  # the default 401 Bearer challenge
        challenge = 'DPoP error="use_dpop_nonce", algs="ES256"'
        headers = (("www-authenticate", challenge), ("dpop-nonce", make(next(count))))
        return Answer(status=401, headers=headers)

    auth.route("/legit/token", token)
    auth.route("/mcp", resource)


def proof_claims(seen: Seen) -> dict[str, Any]:
    payload = seen.headers["dpop"].split(".")[1]
    claims: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return claims


async def test_dpop_a_resource_asking_for_ever_new_nonces_gets_one_retry_per_token() -> None:
    async with hostile_auth("legit") as auth:
        dpop_server(auth)
        config = attrs.evolve(pinned(auth), url=auth.url + "?tenant=a")
        with trio.fail_after(30):
            with pytest.raises(agenthost.AgentHostError) as caught:
                async with agenthost.connect(config):
                    pass
        proven = [s for s in auth.to("/mcp") if "dpop" in s.headers]
        tokens = auth.to("/legit/token")
    assert "\n" not in str(caught.value)
    # The fresh token, then one retry with the nonce: never a loop.
    assert len(tokens) == 1 and len(proven) == 2, (len(tokens), len(proven))
    nonces = [proof_claims(s).get("nonce") for s in proven]
    assert nonces == [None, "nonce-0"]
    # htu is our own URL, without its query, whatever the server says.
    assert {proof_claims(s)["htu"] for s in proven} == {auth.url}
    assert all(s.headers["authorization"] == "DPoP bound-1" for s in proven)


@pytest.mark.parametrize(
    "nonce", ["n" * 300, "two words", 'q"uote', "back\\slash"], ids=["long", "space", "quote", "bs"]
)
async def test_dpop_a_nonce_we_may_not_sign_is_ignored(nonce: str) -> None:
    async with hostile_auth("legit") as auth:
        dpop_server(auth, nonce=lambda n: nonce)
        with trio.fail_after(30), pytest.raises(agenthost.AgentHostError):
            async with agenthost.connect(pinned(auth)):
                pass
        proven = [s for s in auth.to("/mcp") if "dpop" in s.headers]
    assert len(proven) == 1, "no retry for a nonce we do not take"
    assert "nonce" not in proof_claims(proven[0])


async def test_dpop_a_token_endpoint_asking_for_ever_new_nonces_is_retried_once() -> None:
    async with hostile_auth("legit") as auth:
        dpop_server(auth)
        count = iter(range(10**6))

        def token(seen: Seen) -> Answer:
            refusal = Answer.json({"error": "use_dpop_nonce"}, status=400)
            nonce = ("dpop-nonce", f"as-{next(count)}")
            return attrs.evolve(refusal, headers=(*refusal.headers, nonce))

        auth.route("/legit/token", token)
        message = await refused(pinned(auth))
        tokens = auth.to("/legit/token")
    assert len(tokens) == 2
    assert [proof_claims(s).get("nonce") for s in tokens] == [None, "as-0"]
    assert "use_dpop_nonce" in message
    # Each try is signed afresh: two proofs, two client authentications.
    assert tokens[0].headers["dpop"] != tokens[1].headers["dpop"]


async def test_dpop_true_refuses_a_bearer_token() -> None:
    async with hostile_auth("legit") as auth:
        dpop_server(auth)
        bearer = {"access_token": "plain-1", "token_type": "Bearer", "expires_in": 3600}
        auth.route("/legit/token", lambda seen: Answer.json(bearer))
        message = await refused(pinned(auth, dpop=True))
        assert "dpop" in auth.to("/legit/token")[0].headers
        assert not any(s.headers.get("authorization") == "Bearer plain-1" for s in auth.seen)
    assert "issued a Bearer token, not a DPoP-bound one" in message


async def test_dpop_concurrent_requests_each_take_the_nonce_they_were_refused_for() -> None:
    """Five requests sent without a nonce are refused at once with the same one: each
    retries with it (the first answer stored it; the other four must not take "already
    known" for "already tried"), and no token is fetched again."""
    import httpx

    from agenthost.auth import OAuth

    async with hostile_auth("legit") as auth:
        dpop_server(auth)
        config = pinned(auth)
        gate = trio.Event()

        async def resource(seen: Seen) -> Answer | None:
            if "dpop" not in seen.headers:
                return None
            if proof_claims(seen).get("nonce") == "n1":
                return Answer(status=200)
            if seen.path == "/mcp2":
                await gate.wait()  # hold the five refusals until all five are here
            challenge = 'DPoP error="use_dpop_nonce"'
            return Answer(
                status=401, headers=(("www-authenticate", challenge), ("dpop-nonce", "n1"))
            )

        def count_in(seen: Seen) -> Awaitable[Answer | None]:
            if (
                seen.path == "/mcp2"
                and len([s for s in auth.to("/mcp2") if "dpop" in s.headers]) >= 5
            ):
                gate.set()
            return resource(seen)

        auth.route("/mcp", count_in)
        auth.route("/mcp2", count_in)
        async with httpx.AsyncClient() as http:
            flow = OAuth(server="victim", url=auth.url, settings=config.oauth, http=http)
            async with httpx.AsyncClient(auth=flow) as client:
                assert (await client.post(auth.url)).status_code == 200
                statuses: list[int] = []

                async def one() -> None:
                    statuses.append((await client.post(auth.url + "2")).status_code)

                with trio.fail_after(20):
                    async with trio.open_nursery() as nursery:
                        for _ in range(5):
                            nursery.start_soon(one)
        assert statuses == [200] * 5
        assert len(auth.to("/legit/token")) == 1


# --- the lean HTTP path hands a refusal to the flow, once (issue 28) ----------------------


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refusal_on_the_lean_path_is_sent_once(
    status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first POST goes out without a token (401: log in), the second with the fresh
    token; that refusal is final (a 401 to a fresh token; a 403 that asks for no scope)
    and its body is quoted. Nothing is sent twice to reach the auth flow (it was 3 and
    4 POSTs: each refusal on the lean path went again through httpx)."""
    monkeypatch.delenv("AGENTHOST_LEAN_HTTP", raising=False)
    async with hostile_auth("legit") as auth:

        def mcp(seen: Seen) -> Answer:
            if "authorization" not in seen.headers:
                return auth.default(seen)
            body = b"tenant suspended"
            return Answer(status=status, headers=(("content-type", "text/plain"),), body=body)

        auth.route("/mcp", mcp)
        with trio.fail_after(30), pytest.raises(agenthost.AgentHostError) as caught:
            async with agenthost.connect(pinned(auth)):
                pass
        sent = auth.to("/mcp")
    assert [s.headers.get("authorization") for s in sent] == [None, "Bearer legit-access-1"]
    assert "\n" not in str(caught.value)
    if status == 403:
        assert "tenant suspended" in str(caught.value), caught.value
    else:
        assert "refused the access token its authorization server just issued" in str(caught.value)
