"""DPoP (RFC 9449, MCP's SEP-1932) end to end against a real authorization server: the
SDK peer with its ``--dpop`` layer (tests/peers/sdk_auth_server.py), which binds tokens
to the key of the token request's proof and takes them back only with a valid proof.

Every proof that reached the peer is in its log; this file verifies each one itself with
joserfc (signature, header, claims), independently of the peer's own checks.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import stat
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from joserfc import jws
from joserfc.jwk import ECKey

import agenthost
from agenthost.auth import URL_OPENER, parse_oauth_table
from agenthost.auth.dpop import MAX_NONCE, MAX_NONCES, DPoPKey, Nonces, proof
from agenthost.errors import AuthorizationError, ConfigError
from tests.auth.sdk_peer import auth_server, browser, config, peer_log, saved, tokens_of

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path: Path) -> None:
    os.environ["XDG_DATA_HOME"] = str(tmp_path / "data")
    os.environ["AGENTHOST_TOKEN_STORE"] = "file"


@attrs.frozen(kw_only=True)
class Proof:
    """One proof as it reached the peer, verified."""

    path: str
    claims: dict[str, Any]
    thumbprint: str


def verified(jwt: str) -> tuple[dict[str, Any], str]:
    """The claims and key thumbprint of ``jwt``, after checking what RFC 9449 4.2 asks of
    a proof's header and its signature with the public key the header carries."""
    header = jws.extract_compact(jwt.encode()).protected
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    jwk = header["jwk"]
    assert set(jwk) == {"kty", "crv", "x", "y"}, "only the public key"
    key = ECKey.import_key(jwk)
    claims = json.loads(jws.deserialize_compact(jwt, key, algorithms=["ES256"]).payload)
    assert abs(time.time() - claims["iat"]) < 60
    return claims, key.thumbprint()


def proofs(tmp_path: Path) -> list[Proof]:
    found = []
    for line in peer_log(tmp_path):
        if line.startswith("proof "):
            _, path, jwt = line.split(" ")
            claims, thumbprint = verified(jwt)
            found.append(Proof(path=path, claims=claims, thumbprint=thumbprint))
    return found


def ath(token: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()


def refusals(tmp_path: Path) -> list[str]:
    return [line for line in peer_log(tmp_path) if line.startswith("dpop ")]


async def test_a_dpop_login_binds_the_tokens_and_every_request_proves_the_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with auth_server(tmp_path, dpop="on") as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url)) as session:
            await session.list_tools()
            for n in range(3):
                result = await session.call_tool("echo", {"message": f"call {n}"})
                assert not result.is_error
    assert refusals(tmp_path) == []
    state = await saved()
    tokens = tokens_of(state)
    assert state is not None and tokens is not None
    assert tokens["token_type"] == "DPoP"
    key = state["issuers"][state["current"]]["dpop_key"]
    assert key["kty"] == "EC" and key["crv"] == "P-256" and key["d"]
    path = Path(os.environ["XDG_DATA_HOME"]) / "agenthost" / "tokens" / "sdk.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    seen = proofs(tmp_path)
    token_proofs = [p for p in seen if p.path == "/token"]
    mcp_proofs = [p for p in seen if p.path == "/mcp"]
    assert len(token_proofs) == 1 and len(mcp_proofs) >= 5  # initialize, list, 3 calls
    thumbprint = ECKey.import_key(key).thumbprint()
    assert {p.thumbprint for p in seen} == {thumbprint}, "one key, the saved one"
    assert len({p.claims["jti"] for p in seen}) == len(seen), "a fresh proof each time"
    origin = url.removesuffix("/mcp")
    assert token_proofs[0].claims["htm"] == "POST"
    assert token_proofs[0].claims["htu"] == f"{origin}/token"
    assert "ath" not in token_proofs[0].claims and "nonce" not in token_proofs[0].claims
    for seen_proof in mcp_proofs:
        assert seen_proof.claims["htu"] == url and seen_proof.claims["htm"] in ("POST", "GET")
        assert seen_proof.claims["ath"] == ath(tokens["access_token"])
    # The private key is in no log record.
    for record in caplog.records:
        assert key["d"] not in record.getMessage() and key["d"] not in str(record.args)


async def test_the_refresh_and_the_next_run_prove_the_same_saved_key(tmp_path: Path) -> None:
    # Tokens live 2 s, refreshed at half their life; the refresh token is bound too.
    async with auth_server(tmp_path, lifetime=2, dpop="on") as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url)) as session:
            await trio.sleep(1.1)
            assert not (await session.call_tool("echo", {"message": "one"})).is_error
        URL_OPENER.set(None)  # the next run: no person, the saved key and tokens only
        async with agenthost.connect(config(url)) as session:
            await trio.sleep(1.1)
            assert not (await session.call_tool("echo", {"message": "two"})).is_error
        log = peer_log(tmp_path)
    # At least one refresh per run (more on a loaded machine, where a run outlives the
    # 2 s tokens more than once); every one proven with the key of the first login.
    refreshes = log.count("token refresh_token")
    assert log.count("consent") == 1 and refreshes >= 2
    assert refusals(tmp_path) == []
    seen = proofs(tmp_path)
    assert len([p for p in seen if p.path == "/token"]) == 1 + refreshes
    assert len({p.thumbprint for p in seen}) == 1


async def test_nonces_are_taken_once_and_remembered(tmp_path: Path) -> None:
    """The token endpoint and the MCP endpoint each demand a nonce of their own: one
    refused request each, then every proof carries it."""
    async with auth_server(tmp_path, dpop="nonce") as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url)) as session:
            for n in range(3):
                assert not (await session.call_tool("echo", {"message": f"{n}"})).is_error
    assert refusals(tmp_path) == ["dpop 400 /token use_dpop_nonce", "dpop 401 /mcp use_dpop_nonce"]
    seen = proofs(tmp_path)
    assert [p.claims.get("nonce") for p in seen if p.path == "/token"] == [None, "as-nonce.1"]
    mcp = [p.claims.get("nonce") for p in seen if p.path == "/mcp"]
    assert mcp[0] is None and set(mcp[1:]) == {"rs-nonce.1"} and len(mcp) >= 5


async def test_a_bearer_token_where_dpop_was_asked(tmp_path: Path) -> None:
    """RFC 9449 section 5: the server may ignore the proof and issue a Bearer token. With
    ``dpop = "auto"`` it is used as one; with ``dpop = true`` it is refused."""
    async with auth_server(tmp_path, dpop="bearer") as url:
        URL_OPENER.set(browser)
        with pytest.raises(AuthorizationError) as caught:
            async with agenthost.connect(config(url, dpop=True)):
                pass
        message = str(caught.value)
        assert "issued a Bearer token, not a DPoP-bound one" in message and "\n" not in message
        assert await saved() is None
        async with agenthost.connect(config(url)) as session:
            assert not (await session.call_tool("echo", {"message": "x"})).is_error
    tokens = tokens_of(await saved())
    assert tokens is not None and tokens["token_type"] == "Bearer"
    assert {p.path for p in proofs(tmp_path)} == {"/token"}, "no proof with a Bearer token"


async def test_dpop_false_asks_for_bearer_tokens(tmp_path: Path) -> None:
    async with auth_server(tmp_path, dpop="on") as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url, dpop=False)) as session:
            assert not (await session.call_tool("echo", {"message": "x"})).is_error
    assert proofs(tmp_path) == []
    state = await saved()
    assert state is not None and state["issuers"][state["current"]]["dpop_key"] is None
    tokens = tokens_of(state)
    assert tokens is not None and tokens["token_type"] == "Bearer"


async def test_legacy_sse_proves_its_get_stream_and_its_posts(tmp_path: Path) -> None:
    async with auth_server(tmp_path, transport="sse", dpop="on") as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url, "sse")) as session:
            assert not (await session.call_tool("echo", {"message": "x"})).is_error
    assert refusals(tmp_path) == []
    seen = proofs(tmp_path)
    origin = url.removesuffix("/sse")
    stream = [p for p in seen if p.path == "/sse"]
    posts = [p for p in seen if p.path == "/messages/"]
    assert stream and {p.claims["htm"] for p in stream} == {"GET"}
    assert posts and {p.claims["htu"] for p in posts} == {f"{origin}/messages/"}, "no query"


async def test_the_lean_path_leaves_dpop_requests_to_httpx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The opt-in lean HTTP path attaches cached Bearer header lines; a DPoP-bound token
    needs a proof per request, so those requests go through httpx and the auth flow."""
    monkeypatch.setenv("AGENTHOST_LEAN_HTTP", "1")
    async with auth_server(tmp_path, dpop="on") as url:
        URL_OPENER.set(browser)
        async with agenthost.connect(config(url)) as session:
            for n in range(3):
                assert not (await session.call_tool("echo", {"message": f"{n}"})).is_error
    assert refusals(tmp_path) == []
    assert len([p for p in proofs(tmp_path) if p.path == "/mcp"]) >= 4
    assert "bearer /mcp" not in peer_log(tmp_path), "no request with the token as Bearer"


def test_nonces_are_bounded_per_server() -> None:
    nonces = Nonces()
    for n in range(100):
        assert nonces.update(f"https://as.example/{n}?q=1", f"nonce-{n}")
    assert len(nonces) == MAX_NONCES
    assert nonces.get("https://as.example/99") == "nonce-99"
    assert nonces.get("https://as.example/0") is None
    assert not nonces.update("https://as.example/99", "nonce-99"), "not new: no retry"
    assert not nonces.update("https://as.example/1", "x" * (MAX_NONCE + 1))


def test_a_proof_signs_our_url_without_query_or_fragment() -> None:
    key = DPoPKey.generate()
    claims, thumbprint = verified(proof(key, "post", "https://mcp.example/a/mcp?t=1#f"))
    assert claims["htu"] == "https://mcp.example/a/mcp" and claims["htm"] == "POST"
    assert thumbprint == key.thumbprint
    assert key.secret not in repr(key) and DPoPKey.from_saved(key.saved()).matches(key.saved())
    with pytest.raises(ValueError, match="not a private P-256 key"):
        DPoPKey.from_saved({"kty": "EC", "crv": "P-256", "x": "a", "y": "b"})


@pytest.mark.parametrize("value", [True, False, "auto"])
def test_the_dpop_key_loads(value: object) -> None:
    assert parse_oauth_table({"dpop": value}).dpop == value


@pytest.mark.parametrize("value", [1, "yes", None])
def test_a_bad_dpop_value_names_the_key(value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_oauth_table({"dpop": value})
    assert caught.value.key == "dpop"
