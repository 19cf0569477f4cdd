"""A resource server on the official Python SDK (``mcp`` 2.x) whose URIs the test chooses.

Why it exists: routing a ``resources/read`` to the right server (issue 22) depends only on
what each server lists. A hostile server lists a template with a short literal prefix
(``f{x}``) to catch reads meant for another server; a test starts several of these with
different listings and sees which one a read reaches: every read, of any URI, answers
``<name> read <uri>`` (the handlers are the SDK's low-level ones, so the SDK's own
template matching does not hide a read that reached the wrong server).

Usage::

    python tests/peers/resource_peer.py NAME [--resource URI ...] [--template TEMPLATE ...]
"""

from __future__ import annotations

import argparse
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import (
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextResourceContents,
)

__all__ = ["build_server"]


def build_server(name: str, resources: list[str], templates: list[str]) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(name=f"resource-peer-{name}", version="1.0.0")
    lowlevel = server._lowlevel_server  # no MCPServer API to list a template as given

    async def list_resources(_ctx: Any, _params: PaginatedRequestParams | None) -> Any:
        listed = [Resource(uri=uri, name=f"r{i}") for i, uri in enumerate(resources)]
        return ListResourcesResult(resources=listed)

    async def list_templates(_ctx: Any, _params: PaginatedRequestParams | None) -> Any:
        listed = [ResourceTemplate(uri_template=t, name=f"t{i}") for i, t in enumerate(templates)]
        return ListResourceTemplatesResult(resource_templates=listed)

    async def read(_ctx: Any, params: ReadResourceRequestParams) -> Any:
        text = f"{name} read {params.uri}"
        return ReadResourceResult(contents=[TextResourceContents(uri=params.uri, text=text)])

    lowlevel.add_request_handler("resources/list", PaginatedRequestParams, list_resources)
    lowlevel.add_request_handler("resources/templates/list", PaginatedRequestParams, list_templates)
    lowlevel.add_request_handler("resources/read", ReadResourceRequestParams, read)
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--resource", action="append", default=[])
    parser.add_argument("--template", action="append", default=[])
    args = parser.parse_args()
    build_server(args.name, args.resource, args.template).run("stdio")


if __name__ == "__main__":
    main()
