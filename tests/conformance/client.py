"""agenthost's client for the official MCP conformance suite.

The suite (``@modelcontextprotocol/conformance``) starts a test server for one scenario
and runs ``<this script> <server-url>`` with ``MCP_CONFORMANCE_SCENARIO`` (and, for some
scenarios, ``MCP_CONFORMANCE_CONTEXT``, a JSON object) in the environment; it then judges
the traffic it recorded. This script is what the suite tests, so it is written ONLY
against agenthost's public API (``agenthost.connect``, ``ServerConfig``,
``ClientHandlers``, the types in ``agenthost.protocol.types``): a check that passes here passes for
any user of the library, and a check that fails names a bug in agenthost, not here.

Each scenario does what its test server expects a client to do (read from the suite's
own scenario sources): connect, list tools, call the tools the scenario names. It never
works around agenthost: when agenthost cannot do something the scenario needs, the run
fails and the suite says which check.

Exit status: 0 when the scenario's steps completed, 1 with the error on stderr otherwise
(the suite counts a client that exits non-zero as a failure unless the scenario allows
client errors).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx
import trio

import agenthost
from agenthost import skills
from agenthost.auth import URL_OPENER, OAuthSettings
from agenthost.protocol.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ListRootsResult,
    TextContent,
)

log = logging.getLogger("conformance.client")

Scenario = Callable[[str], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}

#: Bound on every step: the harness gives a scenario 120 s (harness.py), and a client that
#: hangs should fail with agenthost's own timeout error, not be killed by the harness. A
#: working scenario takes 1-5 s; the bounds are loose because on a shared 2-core machine
#: (load average 60-120 seen) starting 39 clients at once for --requirements takes 30 s.
REQUEST_TIMEOUT = 45.0
#: Bound on connecting with a login (see auth_scenario).
LOGIN_TIMEOUT = 90.0


def scenario(*names: str) -> Callable[[Scenario], Scenario]:
    """Register a scenario function under one or more scenario names."""

    def register(fn: Scenario) -> Scenario:
        for name in names:
            SCENARIOS[name] = fn
        return fn

    return register


def server_config(url: str) -> agenthost.ServerConfig:
    """The suite's test servers speak Streamable HTTP at the URL they hand us."""
    return agenthost.ServerConfig(
        name="conformance",
        transport="streamable-http",
        url=url,
        timeouts=agenthost.Timeouts(startup=REQUEST_TIMEOUT, request=REQUEST_TIMEOUT),
    )


def context() -> dict[str, Any]:
    """``MCP_CONFORMANCE_CONTEXT`` as a dict (empty when the scenario sends none)."""
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    if not raw:
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("MCP_CONFORMANCE_CONTEXT is not a JSON object")
    return value


async def elicit_with_defaults(
    _ctx: agenthost.RequestContext, params: ElicitRequestParams
) -> ElicitResult:
    """Accept a form, answering every field that has a default with that default (SEP-1034).

    This is what a user who presses "accept" on an untouched form sends.
    """
    properties: Mapping[str, Any] = (params.requested_schema or {}).get("properties", {})
    content = {
        name: field["default"]
        for name, field in properties.items()
        if isinstance(field, dict) and "default" in field
    }
    return ElicitResult(action="accept", content=content)


async def sample_nothing(
    _ctx: agenthost.RequestContext, _params: CreateMessageRequestParams
) -> CreateMessageResult:
    """A fixed sampling answer: the scenarios that declare sampling never judge its text."""
    return CreateMessageResult(
        role="assistant", content=TextContent(text=""), model="conformance-client"
    )


async def no_roots(_ctx: agenthost.RequestContext, _params: Mapping[str, Any]) -> ListRootsResult:
    return ListRootsResult(roots=[])


ALL_HANDLERS = agenthost.ClientHandlers(
    roots=no_roots, sampling=sample_nothing, elicitation=elicit_with_defaults
)


def _placeholder_arguments(input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The smallest arguments that satisfy a schema's ``required`` list, by type."""
    by_type = {"string": "x", "integer": 0, "number": 0, "boolean": False, "object": {}}
    properties: Mapping[str, Any] = input_schema.get("properties", {})
    return {
        name: by_type.get(properties.get(name, {}).get("type"), "x")
        for name in input_schema.get("required", [])
    }


@scenario("initialize", "json-schema-ref-no-deref")
async def list_tools(url: str) -> None:
    """Initialize and list tools (ref-no-deref: the client must not fetch a ``$ref``)."""
    async with agenthost.connect(server_config(url)) as session:
        await session.list_tools()


@scenario("tools_call", "request-metadata", "http-standard-headers")
async def add_numbers(url: str) -> None:
    """List tools and call ``add_numbers(a=5, b=3)``, with every client capability declared."""
    async with agenthost.connect(server_config(url), handlers=ALL_HANDLERS) as session:
        await session.list_tools()
        result = await session.call_tool("add_numbers", {"a": 5, "b": 3})
        log.info("add_numbers: %s", result)


@scenario("elicitation-sep1034-client-defaults")
async def elicitation_defaults(url: str) -> None:
    """Elicitation answered by agenthost's policy, not by this script (SEP-1034).

    The host's consent layer is what answers a server's form in agenthost, so this runs the
    whole path: a headless host whose policy allows the tool and answers the form with
    canned answers that name no field. The suite checks that every field with a default
    came back with it.
    """
    policy = {
        "mode": "headless",
        "rules": [
            {"kind": "tool", "name": "test_client_elicitation_defaults", "decision": "allow"},
            {"kind": "elicitation", "mode": "form", "answers": {}, "decision": "allow"},
        ],
    }
    config = agenthost.HostConfig(servers=[server_config(url)], policy=policy)
    async with agenthost.open_host(config) as host:
        await host.list_tools()
        result = await host.call_tool("conformance__test_client_elicitation_defaults", {})
        log.info("test_client_elicitation_defaults: %s", result)


@scenario("sse-retry")
async def sse_retry(url: str) -> None:
    """The server closes the call's SSE stream early and answers on the resumed stream."""
    async with agenthost.connect(server_config(url)) as session:
        await session.list_tools()
        result = await session.call_tool("test_reconnection", {})
        log.info("test_reconnection: %s", result)


@scenario("json-schema-2020-12-preservation")
async def echo_schema(url: str) -> None:
    """Echo the focal tool's ``inputSchema`` back as agenthost parsed it (SEP-1613)."""
    async with agenthost.connect(server_config(url)) as session:
        tools = {tool.name: tool for tool in await session.list_tools()}
        focal = tools["json_schema_2020_12_tool"]
        await session.call_tool("json_schema_echo", {"schema": focal.input_schema})


@scenario("http-invalid-tool-headers")
async def call_every_tool(url: str) -> None:
    """Call every tool agenthost surfaces; tools with invalid header annotations must not be."""
    async with agenthost.connect(server_config(url)) as session:
        for tool in await session.list_tools():
            try:
                await session.call_tool(tool.name, _placeholder_arguments(tool.input_schema))
            except agenthost.AgentHostError as exc:
                log.warning("call %s failed: %s", tool.name, exc)


@scenario("http-custom-headers")
async def replay_tool_calls(url: str) -> None:
    """Replay the context's ``toolCalls`` verbatim (their arguments drive the header checks)."""
    calls: list[dict[str, Any]] = context().get("toolCalls", [])
    async with agenthost.connect(server_config(url)) as session:
        surfaced = {tool.name for tool in await session.list_tools()}
        for call in calls:
            if call["name"] not in surfaced:
                log.info("skipping %s: not surfaced by list_tools", call["name"])
                continue
            try:
                await session.call_tool(call["name"], call.get("arguments") or {})
            except agenthost.AgentHostError as exc:
                log.warning("call %s failed: %s", call["name"], exc)


@scenario("sep-2322-client-request-state")
async def request_state(url: str) -> None:
    """Multi round-trip requests: the server asks for a confirmation through ``inputRequests``."""

    async def confirm(_ctx: agenthost.RequestContext, _params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"confirmed": True})

    handlers = agenthost.ClientHandlers(elicitation=confirm)
    async with agenthost.connect(server_config(url), handlers=handlers) as session:
        await session.list_tools()
        for tool in (
            "test_mrtr_echo_state",
            "test_mrtr_unrelated",
            "test_mrtr_no_state",
            "test_mrtr_no_result_type",
        ):
            await session.call_tool(tool, {})


@scenario("sep-2640-client-no-prefetch")
async def skills_listed_not_fetched(url: str) -> None:
    """List skills as a host does at start; nothing of a skill is read before it is used."""
    async with agenthost.connect(server_config(url)) as session:
        if not skills.offers_skills(session.server_capabilities):
            raise agenthost.ProtocolError("the server does not offer the skills extension")
        entries = await skills.list_skills(session)
        log.info("skills: %s", [(entry.name, entry.description) for entry in entries])


@scenario(
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
)
async def skills_loaded_verified(url: str) -> None:
    """The model asks for the listed skill: load it (verified), then its other files.

    A tampered SKILL.md must be refused, and after a refusal nothing else of the skill is
    read; the suite checks both.
    """
    async with agenthost.connect(server_config(url)) as session:
        [entry] = await skills.list_skills(session)
        loaded = await skills.load_skill(session, entry)
        log.info("loaded %s (%d bytes)", entry.name, len(loaded.text))
        for listed in entry.files or ():
            if listed.uri != entry.uri:
                await skills.load_skill_file(session, entry, listed.uri)


#: The Client ID Metadata Document URL the suite's CIMD-capable servers expect.
CIMD_URL = "https://conformance-test.local/client-metadata.json"


async def browser(_server: str, url: str) -> None:
    """The user's browser: the suite's authorization servers approve at once and redirect
    to agenthost's loopback, so following the redirects is what a person's click does."""
    async with httpx.AsyncClient(follow_redirects=True, timeout=REQUEST_TIMEOUT) as client:
        await client.get(url)


async def named_issuer(url: str) -> str | None:
    """The issuer the server's Protected Resource Metadata names: what a user configuring
    a client secret sets as ``issuer`` (agenthost's refusal message shows it too)."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    candidates = [f"{origin}/.well-known/oauth-protected-resource{parts.path.rstrip('/')}"]
    candidates.append(f"{origin}/.well-known/oauth-protected-resource")
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT) as client:
        for candidate in candidates:
            response = await client.get(candidate)
            if response.status_code == 200:
                servers = response.json().get("authorization_servers") or [None]
                return servers[0]  # type: ignore[no-any-return]
    return None


def oauth_settings(name: str, issuer: str | None = None) -> OAuthSettings:
    """``[servers.X.oauth]`` as a user would write it for the scenario's authorization server
    (``issuer``: the one the server names, pinned wherever a secret is configured)."""
    ctx = context()
    issuer = ctx.get("issuer") or issuer
    if name == "auth/client-credentials-basic":
        return OAuthSettings(
            grant="client_credentials",
            client_id=ctx["client_id"],
            client_secret=ctx["client_secret"],
            token_endpoint_auth_method="client_secret_basic",
            issuer=issuer,
        )
    if name == "auth/client-credentials-jwt":
        return OAuthSettings(
            grant="client_credentials",
            client_id=ctx["client_id"],
            private_key=ctx["private_key_pem"],
            signing_algorithm=ctx.get("signing_algorithm"),
            issuer=issuer,
        )
    if name == "auth/pre-registration":
        return OAuthSettings(
            client_id=ctx["client_id"], client_secret=ctx["client_secret"], issuer=issuer
        )
    if name in ("auth/cross-app-access-complete-flow", "auth/enterprise-managed-authorization"):
        return OAuthSettings(
            grant="enterprise",
            client_id=ctx["client_id"],
            client_secret=ctx["client_secret"],
            idp_token_endpoint=ctx["idp_token_endpoint"],
            idp_client_id=ctx["idp_client_id"],
            id_token=ctx["idp_id_token"],
            issuer=issuer,
        )
    if name == "auth/wif-jwt-bearer":
        return OAuthSettings(
            grant="jwt_bearer",
            client_id=ctx["client_id"],
            assertion=ctx["valid_jwt"],
            issuer=issuer,
        )
    return OAuthSettings(client_metadata_url=CIMD_URL)


async def auth_scenario(url: str) -> None:
    """Log in as the scenario's authorization server wants, list tools, call ``test-tool``.

    Tokens go to a fresh temporary directory (the file store), never the user's keyring.
    """
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    # The login runs inside the first request (the 401 comes to the first request): discovery,
    # registration, the browser and the token exchange all count against the startup
    # timeout. `--requirements` starts every scenario's client at once, so allow the whole
    # flow the time the harness gives a scenario.
    config = attrs.evolve(
        server_config(url),
        oauth=oauth_settings(name, await named_issuer(url)),
        timeouts=agenthost.Timeouts(startup=LOGIN_TIMEOUT, request=REQUEST_TIMEOUT),
    )
    URL_OPENER.set(browser)
    with tempfile.TemporaryDirectory(prefix="agenthost-conformance-") as data:
        os.environ["AGENTHOST_TOKEN_STORE"] = "file"
        os.environ["XDG_DATA_HOME"] = data
        # A fresh era cache too: a --requirements run starts one test server after another
        # on recycled ports, and an era learnt from an earlier server is wrong for this one.
        os.environ["XDG_CACHE_HOME"] = data
        async with agenthost.connect(config, handlers=ALL_HANDLERS) as session:
            tools = {tool.name for tool in await session.list_tools()}
            if "test-tool" in tools:
                await session.call_tool("test-tool", {})


async def default_scenario(url: str) -> None:
    """Any new scenario: connect and list tools, as a user's first command."""
    async with agenthost.connect(server_config(url), handlers=ALL_HANDLERS) as session:
        await session.list_tools()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} <server-url>", file=sys.stderr)
        return 2
    # agenthost's own DEBUG lines say what it sent; httpcore's would drown them.
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    logging.getLogger("agenthost").setLevel(logging.DEBUG)
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    run = SCENARIOS.get(name, auth_scenario if name.startswith("auth/") else default_scenario)
    log.info("scenario %r against %s", name, argv[1])
    try:
        trio.run(run, argv[1])
    except agenthost.AgentHostError as exc:
        print(f"conformance client: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
