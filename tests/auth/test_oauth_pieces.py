"""The pieces of agenthost.auth on their own: challenge parsing, discovery URL orders,
metadata checks, the token stores, the loopback redirect, and the config (every example in
the docs loads)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import httpx
import pytest
import trio
from joserfc.jwk import ECKey

from agenthost.auth import FileTokenStore, KeyringTokenStore, MemoryTokenStore, OAuthSettings
from agenthost.auth.discovery import (
    AuthServerMetadata,
    DiscoveryError,
    ResourceMetadata,
    as_metadata_urls,
    canonical_resource,
    check_outward,
    parse_www_authenticate,
    prm_urls,
    resource_allowed,
)
from agenthost.auth.loopback import open_loopback
from agenthost.config import load_config
from agenthost.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_bearer_challenge_among_others() -> None:
    header = (
        'Basic realm="x", Bearer error="insufficient_scope", scope="files:read files:write",'
        ' resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource",'
        ' error_description="need \\"write\\""'
    )
    challenge = parse_www_authenticate([header])
    assert challenge is not None
    assert challenge.error == "insufficient_scope"
    assert challenge.scopes == ("files:read", "files:write")
    assert challenge.resource_metadata == (
        "https://mcp.example.com/.well-known/oauth-protected-resource"
    )
    assert challenge.params["error_description"] == 'need "write"'
    assert parse_www_authenticate(['Basic realm="x"']) is None
    bare = parse_www_authenticate(["Bearer"])
    assert bare is not None and bare.scopes is None


def test_discovery_urls_in_the_spec_order() -> None:
    assert prm_urls("https://example.com/public/mcp", None) == [
        "https://example.com/.well-known/oauth-protected-resource/public/mcp",
        "https://example.com/.well-known/oauth-protected-resource",
    ]
    challenge = parse_www_authenticate(['Bearer resource_metadata="https://x.test/prm"'])
    assert prm_urls("https://example.com/mcp", challenge) == ["https://x.test/prm"]
    assert as_metadata_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert as_metadata_urls("https://auth.example.com") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


def test_resource_must_identify_the_server() -> None:
    assert canonical_resource("HTTPS://MCP.Example.com/mcp#frag") == "https://mcp.example.com/mcp"
    assert canonical_resource("https://mcp.example.com:443/") == "https://mcp.example.com"
    assert canonical_resource("http://[::1]:8080/mcp/") == "http://[::1]:8080/mcp"
    assert resource_allowed("https://mcp.example.com/mcp", "https://mcp.example.com/mcp")
    # The same resource in RFC 3986's other spellings: case, default port, trailing slash.
    assert resource_allowed("https://mcp.example.com/mcp", "HTTPS://MCP.EXAMPLE.COM/mcp")
    assert resource_allowed("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp/")
    assert resource_allowed("https://mcp.example.com", "https://mcp.example.com/")
    # A query on the server's URL only, or the same one on both.
    assert resource_allowed("https://mcp.example.com/mcp?t=a", "https://mcp.example.com/mcp")
    assert resource_allowed("https://mcp.example.com/mcp?t=a", "https://mcp.example.com/mcp?t=a")
    assert not resource_allowed(
        "https://mcp.example.com/mcp?t=a", "https://mcp.example.com/mcp?t=b"
    )
    # The origin's root document may name the origin (RFC 9728 builds its URL from it);
    # any other document (a path's, a challenge's) only the server's own URL.
    root = "https://mcp.example.com/.well-known/oauth-protected-resource"
    assert resource_allowed(
        "https://mcp.example.com/mcp", "https://mcp.example.com/", fetched_from=root
    )
    assert not resource_allowed(
        "https://mcp.example.com/a/mcp", "https://mcp.example.com/a", fetched_from=root
    )
    assert not resource_allowed(
        "https://mcp.example.com/mcp", "https://mcp.example.com", fetched_from=root + "/mcp"
    )
    assert not resource_allowed(
        "https://mcp.example.com/mcp", "https://evil.example.com", fetched_from=root
    )
    # Another origin's root document (a challenge may point anywhere) is not the origin's.
    elsewhere = "https://other.example.com/.well-known/oauth-protected-resource"
    assert not resource_allowed(
        "https://mcp.example.com/mcp", "https://mcp.example.com", fetched_from=elsewhere
    )
    assert resource_allowed(
        "https://mcp.example.com/mcp", "https://mcp.example.com/mcp", fetched_from=elsewhere
    )
    # Another resource: a parent (the origin), a child, another port, path case.
    assert not resource_allowed("https://mcp.example.com/mcp", "https://mcp.example.com")
    assert not resource_allowed("https://mcp.example.com/a/mcp", "https://mcp.example.com/a")
    assert not resource_allowed("https://mcp.example.com/mcp", "https://mcp.example.com/mcp/x")
    assert not resource_allowed("https://mcp.example.com/mcp", "https://mcp.example.com:8443/mcp")
    assert not resource_allowed("https://mcp.example.com/mcp", "https://mcp.example.com/MCP")
    assert not resource_allowed("https://mcp.example.com/mcp", "http://mcp.example.com/mcp")
    assert not resource_allowed("https://mcp.example.com/mcp", "https://mcp.example.com/other")
    assert not resource_allowed("https://mcp.example.com/mcp", "https://evil.example.com/mcp")
    assert not resource_allowed("https://mcp.example.com/mcpx", "https://mcp.example.com/mcp")


def test_metadata_checks() -> None:
    doc = {
        "issuer": "https://as.example.com",
        "authorization_endpoint": "https://as.example.com/authorize",
        "token_endpoint": "https://as.example.com/token",
        "code_challenge_methods_supported": ["S256"],
    }
    meta = AuthServerMetadata.from_json(doc, expected_issuer="https://as.example.com")
    assert meta.token_endpoint == "https://as.example.com/token"
    with pytest.raises(DiscoveryError, match="is not the expected"):
        AuthServerMetadata.from_json(doc, expected_issuer="https://as.example.com/")
    with pytest.raises(DiscoveryError, match="token_endpoint"):
        bad = {**doc, "token_endpoint": "javascript:x"}
        AuthServerMetadata.from_json(bad, expected_issuer="https://as.example.com")
    with pytest.raises(DiscoveryError, match="no authorization_servers"):
        ResourceMetadata.from_json({"resource": "https://x.test", "authorization_servers": []})
    legacy = AuthServerMetadata.legacy_defaults("https://mcp.example.com/v1/mcp")
    assert legacy.authorization_endpoint == "https://mcp.example.com/authorize"
    assert legacy.registration_endpoint == "https://mcp.example.com/register"


async def test_file_store_is_private_and_atomic(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path / "tokens")
    assert await store.load("srv") is None
    await store.save("srv", '{"a": 1}')
    await store.save("srv", '{"a": 2}')
    path = tmp_path / "tokens" / "srv.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert await store.load("srv") == '{"a": 2}'
    assert [p.name for p in path.parent.iterdir()] == ["srv.json"]
    assert await store.delete("srv") and not await store.delete("srv")
    # Any server name is a key, kept inside the directory and apart from the others.
    for key in ("../escape", "my server", "..", "a/b", "my%20server", "é"):
        await store.save(key, key)
    for key in ("../escape", "my server", "..", "a/b", "my%20server", "é"):
        assert await store.load(key) == key
    assert {p.parent for p in (tmp_path / "tokens").iterdir()} == {tmp_path / "tokens"}
    assert not (tmp_path / "escape.json").exists()


async def test_keyring_store_with_a_real_backend(tmp_path: Path) -> None:
    import keyring
    from keyrings.alt.file import PlaintextKeyring  # type: ignore[import-untyped]

    backend = PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring.cfg")
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        store = KeyringTokenStore()
        await store.save("srv", "value-1")
        assert await store.load("srv") == "value-1"
        assert backend.get_password("agenthost", "srv") == "value-1"
        assert await store.delete("srv")
        assert await store.load("srv") is None
        assert not await store.delete("srv")
    finally:
        keyring.set_keyring(previous)


async def test_memory_store_roundtrip() -> None:
    store = MemoryTokenStore()
    await store.save("a", "1")
    assert await store.load("a") == "1" and "1" not in repr(store)


async def test_loopback_takes_the_first_callback_with_its_state_only() -> None:
    async with open_loopback(state="s") as loopback, httpx.AsyncClient() as client:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/callback", loopback.redirect_uri)
        missing = await client.get(loopback.redirect_uri.replace("/callback", "/other"))
        assert missing.status_code == 404
        other = await client.get(loopback.redirect_uri, params={"code": "c0", "state": "x"})
        assert other.status_code == 200 and "not for the login" in other.text
        assert loopback.ignored == 1
        first = await client.get(loopback.redirect_uri, params={"code": "c1", "state": "s"})
        assert first.status_code == 200 and "c1" not in first.text
        await client.get(loopback.redirect_uri, params={"code": "c2", "state": "s"})
        with trio.fail_after(5):
            assert await loopback.wait() == {"code": "c1", "state": "s"}


def test_settings_hide_secrets_and_check_grants() -> None:
    settings = OAuthSettings(client_id="c", client_secret="hunter2-secret")
    assert "hunter2" not in repr(settings)
    with pytest.raises(ConfigError, match="client_credentials grant needs"):
        OAuthSettings(grant="client_credentials", client_id="c")
    with pytest.raises(ConfigError, match="https"):
        OAuthSettings(client_metadata_url="http://insecure.example.com/c.json")


def _toml_blocks(path: Path, heading: str) -> list[str]:
    text = path.read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    section = text[start : end if end != -1 else len(text)]
    return re.findall(r"```toml\n(.*?)```", section, re.S)


@pytest.mark.parametrize(
    ("doc", "heading"),
    [("docs/config.md", "## OAuth (`[servers.NAME.oauth]`)"), ("README.md", "## Auth")],
)
def test_every_oauth_example_in_the_docs_loads(tmp_path: Path, doc: str, heading: str) -> None:
    blocks = _toml_blocks(REPO / doc, heading)
    assert blocks
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "ci-bot.pem").write_text(
        ECKey.generate_key("P-256").as_pem(private=True).decode()
    )
    env = {
        **os.environ,
        "TICKETS_CLIENT_SECRET": "s1",
        "CI_CLIENT_SECRET": "s2",
        "CORP_CLIENT_SECRET": "s3",
        "CORP_ID_TOKEN": "t",
    }
    for n, block in enumerate(blocks):
        path = tmp_path / f"example{n}.toml"
        path.write_text(block)
        config = load_config(path, env=env)
        assert config.servers
    if doc == "docs/config.md":
        servers = {s.name: s for s in config.servers}
        assert servers["ci"].oauth is not None and servers["ci"].oauth.grant == "client_credentials"
        signed = servers["signed"].oauth
        assert signed is not None and signed.auth_method == "private_key_jwt"
        assert servers["static"].oauth is not None and not servers["static"].oauth.enabled
        for server in config.servers:
            if server.oauth is not None and server.oauth.holds_secret:
                assert server.oauth.issuer, server.name  # an example that would be refused
        assert servers["docs"].oauth is None
        workload = servers["workload"].oauth
        assert workload is not None and workload.grant == "jwt_bearer"
        assert workload.assertion_file == "/var/run/secrets/tokens/mcp-token"
        bound = servers["bound"].oauth
        assert bound is not None and bound.dpop is True
        assert servers["ci"].oauth.dpop == "auto"


@pytest.mark.parametrize(
    ("table", "key", "problem"),
    [
        ('[servers.a]\ncommand = "x"\noauth = { client_id = "c" }\n', "servers.a.oauth", "stdio"),
        ('[servers.a]\nurl = "wss://x.test/ws"\noauth = {}\n', "servers.a.oauth", "websocket"),
        ('[servers.a]\nurl = "https://x.test"\noauth = { clientid = "c" }\n',
         "servers.a.oauth.clientid", "did you mean 'client_id'"),
        ('[servers.a]\nurl = "https://x.test"\noauth = { grant = "password" }\n',
         "servers.a.oauth.grant", "must be one of"),
        ('[servers.a]\nurl = "https://x.test"\noauth = { redirect_port = 70000 }\n',
         "servers.a.oauth.redirect_port", "port"),
        ('[servers.a]\nurl = "https://x.test"\noauth = { private_key_file = "nope.pem" }\n',
         "servers.a.oauth.private_key_file", "cannot read"),
        ('[servers.a]\nurl = "https://x.test"\noauth = 3\n', "servers.a.oauth", "table"),
    ],
)  # fmt: skip
def test_oauth_config_errors_name_the_key(
    tmp_path: Path, table: str, key: str, problem: str
) -> None:
    path = tmp_path / "agenthost.toml"
    path.write_text(table)
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert caught.value.key == key
    assert problem in caught.value.problem


def test_issuer_key_is_checked() -> None:
    from agenthost.auth.settings import parse_oauth_table

    assert (
        parse_oauth_table({"issuer": "https://as.example.com"}).issuer == "https://as.example.com"
    )
    assert parse_oauth_table({"issuer": "http://127.0.0.1:9000/as"}).issuer
    for bad in ("http://as.example.com", "https://as.example.com/?q=1", "https://[::1", "ftp://x"):
        with pytest.raises(ConfigError, match="https://"):
            parse_oauth_table({"issuer": bad})
    assert OAuthSettings(client_id="c", client_secret="s3cret").holds_secret
    assert not OAuthSettings(client_id="c").holds_secret


def test_a_plaintext_keyring_is_not_taken_for_an_os_keyring(tmp_path: Path) -> None:
    import keyring
    from keyrings.alt.file import PlaintextKeyring

    from agenthost.auth.store import default_token_store

    backend = PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring.cfg")
    previous = keyring.get_keyring()
    saved = os.environ.pop("AGENTHOST_TOKEN_STORE", None)
    keyring.set_keyring(backend)
    try:
        assert isinstance(default_token_store(), FileTokenStore)
    finally:
        keyring.set_keyring(previous)
        if saved is not None:
            os.environ["AGENTHOST_TOKEN_STORE"] = saved


def test_a_remote_servers_discovery_may_not_aim_at_this_machine() -> None:
    """SSRF via discovery: a server elsewhere naming a loopback or link-local URL (its
    resource_metadata, an authorization server, an endpoint) is refused; a server on
    this machine may name one (a local gateway, the tests)."""
    remote = "https://mcp.example.com/mcp"
    for inward in (
        "http://127.0.0.1:8080/admin",
        "http://localhost:631/",
        "http://[::1]:9000/x",
        "https://169.254.169.254/latest/meta-data/",
        "https://[fe80::1]/x",
    ):
        with pytest.raises(DiscoveryError, match="points at this machine"):
            check_outward(remote, inward, "the challenge's resource_metadata")
        check_outward("http://127.0.0.1:3000/mcp", inward, "x")  # local to local: fine
    for outward in ("https://auth.example.com/", "https://10.0.0.5/as", "https://[2001:db8::1]/"):
        check_outward(remote, outward, "x")
