"""The client the official conformance suite runs for its auth scenarios.

``conformance client --command "python conformance_client.py" --scenario auth/...`` starts
a test MCP server and authorization server and runs this with the server URL; the scenario
name (and, for some, credentials as JSON) come in the environment. The "browser" here is an
httpx client that follows the authorization URL: the suite's authorization server approves
at once and redirects to our loopback, as a browser would.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import httpx
import trio

from agenthost.auth import URL_OPENER, OAuthSettings
from agenthost.client import connect
from agenthost.config import ServerConfig

CIMD_URL = "https://conformance-test.local/client-metadata.json"


async def browser(server: str, url: str) -> None:
    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as client:
        await client.get(url)


def settings_for(scenario: str) -> OAuthSettings:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if scenario == "auth/client-credentials-basic":
        return OAuthSettings(
            grant="client_credentials",
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            token_endpoint_auth_method="client_secret_basic",
        )
    if scenario == "auth/client-credentials-jwt":
        return OAuthSettings(
            grant="client_credentials",
            client_id=context["client_id"],
            private_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm"),
        )
    if scenario == "auth/pre-registration":
        return OAuthSettings(client_id=context["client_id"], client_secret=context["client_secret"])
    if scenario in ("auth/cross-app-access-complete-flow", "auth/enterprise-managed-authorization"):
        return OAuthSettings(
            grant="enterprise",
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            idp_token_endpoint=context["idp_token_endpoint"],
            idp_client_id=context["idp_client_id"],
            id_token=context["idp_id_token"],
        )
    return OAuthSettings(client_metadata_url=CIMD_URL)


async def main(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    config = ServerConfig(
        name="conformance",
        transport="streamable-http",
        url=url,
        oauth=settings_for(scenario),
    )
    URL_OPENER.set(browser)
    async with connect(config) as session:
        await session.list_tools()
        await session.call_tool("test-tool", {})


if __name__ == "__main__":
    os.environ.setdefault("AGENTHOST_TOKEN_STORE", "file")
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="agenthost-conformance-")
    trio.run(main, sys.argv[1])
