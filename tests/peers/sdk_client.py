"""A downstream client for `agenthost serve`: the official Python SDK's `mcp.Client`.

Usage: sdk_client.py SCENARIO MODE -- COMMAND...   (COMMAND starts the server on stdio)
       sdk_client.py SCENARIO MODE -- URL          (Streamable HTTP)

Runs one scenario on asyncio (the SDK's own event loop, as a real client would) and
prints what it saw as one JSON object on stdout. The test asserts on that JSON: this
file only drives and records, it decides nothing.

Scenarios:
  echo     list the tools and call `echo`.
  tour     list every tool (all pages), call echo / fail / slow (with progress), prompts,
           resources and templates, completion, then toggle a tool upstream and wait for
           the tools list_changed.
  sample   call `sample`: the upstream's sampling request reaches this client (it answers
           as model "client-model"), recorded in "samplings".
  roots    call `roots` (the upstream lists its roots); this client's roots are the
           file URIs in $ROOTS (a JSON list).
  consent  call `echo` twice and `fail`, answering agenthost's consent form with $ANSWER
           (allow once / always / deny / decline; "none": the client declares no
           elicitation), then `elicit_form` (the upstream's own form, answered with a
           fixed person); record the forms shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from typing import Any, cast

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ListRootsResult,
    PromptReference,
    Root,
    TextContent,
)
from mcp_types import RequestParamsMeta


def dump(value: Any) -> Any:
    return value.model_dump(by_alias=True, exclude_none=True, mode="json")


async def tour(client: Client, seen: dict[str, Any]) -> None:
    names: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        listed = await client.list_tools(cursor=cursor, cache_mode="bypass")
        pages += 1
        names += [tool.name for tool in listed.tools]
        cursor = listed.next_cursor
        if cursor is None:
            break
    seen["tools"] = names
    seen["pages"] = pages
    seen["echo"] = dump(await client.call_tool("echo", {"message": "hello"}))
    seen["fail"] = dump(await client.call_tool("fail", {"message": "boom"}))
    values: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        values.append(progress)

    seen["slow"] = dump(
        await client.call_tool("slow", {"seconds": 0.2, "steps": 3}, progress_callback=on_progress)
    )
    seen["progress"] = values
    seen["prompts"] = [p.name for p in (await client.list_prompts()).prompts]
    seen["greet"] = dump(await client.get_prompt("greet", {"name": "Ada"}))
    seen["resources"] = [r.uri for r in (await client.list_resources()).resources]
    seen["templates"] = [
        t.uri_template for t in (await client.list_resource_templates()).resource_templates
    ]
    seen["readme"] = dump(await client.read_resource("text://readme"))
    completion = await client.complete(
        PromptReference(type="ref/prompt", name="greet"), {"name": "style", "value": ""}
    )
    seen["completion"] = completion.completion.values
    if client.protocol_version == "2026-07-28":
        # A modern client hears of changes on a subscriptions/listen stream only.
        async with client.listen(tools_list_changed=True) as sub:
            await client.call_tool("toggle_extra_tool", {})
            async with asyncio.timeout(10):
                async for event in sub:
                    seen["notifications"].append(f"listen: {type(event).__name__}")
                    break
    else:
        await client.call_tool("toggle_extra_tool", {})
    for _ in range(100):
        if "notifications/tools/list_changed" in seen["notifications"]:
            break
        await asyncio.sleep(0.05)
    listed = await client.list_tools(cache_mode="bypass")
    seen["tools_after"] = [tool.name for tool in listed.tools]


async def consent(client: Client, seen: dict[str, Any]) -> None:
    seen["echo"] = dump(await client.call_tool("echo", {"message": "hello"}))
    seen["echo_again"] = dump(await client.call_tool("echo", {"message": "again"}))
    seen["fail"] = dump(await client.call_tool("fail", {"message": "boom"}))
    if os.environ.get("ANSWER") != "none":
        seen["elicit"] = dump(await client.call_tool("elicit_form", {}))


async def sample(client: Client, seen: dict[str, Any]) -> None:
    seen["sample"] = dump(await client.call_tool("sample", {"prompt": "Capital of France?"}))


async def roots(client: Client, seen: dict[str, Any]) -> None:
    seen["roots"] = dump(await client.call_tool("roots", {}))


async def echo(client: Client, seen: dict[str, Any]) -> None:
    seen["tools"] = [tool.name for tool in (await client.list_tools()).tools]
    seen["echo"] = dump(await client.call_tool("echo", {"message": "bridged"}))


async def _first(sub: Any, into: list[str], seconds: float) -> None:
    """The stream's first event within ``seconds``, if any."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            async for event in sub:
                into.append(f"{type(event).__name__} {getattr(event, 'uri', '')}".strip())
                return


async def watch(client: Client, seen: dict[str, Any]) -> None:
    """Resource updates: a 2026-07-28 client on two listen streams (the readme on one, the
    pixel on the other); a legacy one through resources/subscribe."""
    if client.protocol_version != "2026-07-28":
        await client.subscribe_resource("text://readme")
        seen["touch"] = dump(await client.call_tool("touch_readme", {}))
        for _ in range(100):
            if "notifications/resources/updated" in seen["notifications"]:
                break
            await asyncio.sleep(0.05)
        await client.unsubscribe_resource("text://readme")
        return
    readme: list[str] = []
    pixel: list[str] = []
    async with (
        client.listen(resource_subscriptions=["text://readme", "text://nothing-here"]) as one,
        client.listen(resource_subscriptions=["bin://pixel"]) as two,
    ):
        seen["honoured_one"] = dump(one.honored) if one.honored else None
        seen["honoured_two"] = dump(two.honored) if two.honored else None
        seen["touch"] = dump(await client.call_tool("touch_readme", {}))
        await _first(one, readme, 10)
        await _first(two, pixel, 1)  # the pixel did not change: nothing comes
    seen["stream_readme"] = readme
    seen["stream_pixel"] = pixel


async def logs(client: Client, seen: dict[str, Any]) -> None:
    """Log lines during a call: a 2026-07-28 client gets them for the request whose _meta
    names a level, at or above it; a legacy one after logging/setLevel."""
    level: RequestParamsMeta | None = cast(
        RequestParamsMeta, {"io.modelcontextprotocol/logLevel": "info"}
    )
    if client.protocol_version != "2026-07-28":
        await client.call_tool("log", {"level": "warning", "message": "before setLevel"})
        await client.set_logging_level("info")
        level = None
    await client.call_tool("log", {"level": "debug", "message": "below"}, meta=level)
    await client.call_tool("log", {"level": "warning", "message": "asked"}, meta=level)
    if level is not None:
        await client.call_tool("log", {"level": "warning", "message": "unasked"})


SCENARIOS = {
    "logs": logs,
    "echo": echo,
    "tour": tour,
    "consent": consent,
    "sample": sample,
    "roots": roots,
    "watch": watch,
}


async def main(scenario: str, mode: str, command: list[str]) -> None:
    seen: dict[str, Any] = {"notifications": [], "forms": [], "samplings": []}
    answer = os.environ.get("ANSWER", "allow once")

    async def on_elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        schema = getattr(params, "requested_schema", None) or {}
        seen["forms"].append({"message": params.message, "schema": schema})
        if "decision" in schema.get("properties", {}):
            if answer == "decline":
                return ElicitResult(action="decline")
            return ElicitResult(action="accept", content={"decision": answer})
        return ElicitResult(action="accept", content={"name": "Ada", "age": 36, "subscribe": True})

    async def on_sampling(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        seen["samplings"].append(dump(params))
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text="Paris, said the client."),
            model="client-model",
        )

    async def on_roots(context: Any) -> ListRootsResult:
        uris = json.loads(os.environ["ROOTS"])
        return ListRootsResult(roots=[Root(uri=uri, name=f"root{i}") for i, uri in enumerate(uris)])

    async def on_log(params: Any) -> None:
        seen.setdefault("logs", []).append(str(params.data))

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None)
        if method is not None:
            seen["notifications"].append(method)

    server: str | StdioServerParameters = command[0]
    if not command[0].startswith("http"):
        server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with Client(
        server,
        mode=mode,
        elicitation_callback=None if answer == "none" else on_elicit,
        sampling_callback=on_sampling if scenario == "sample" else None,
        list_roots_callback=on_roots if "ROOTS" in os.environ else None,
        message_handler=on_message,
        logging_callback=on_log,
        read_timeout_seconds=60,
    ) as client:
        seen["protocol_version"] = client.protocol_version
        seen["server_info"] = dump(client.server_info) if client.server_info else None
        await SCENARIOS[scenario](client, seen)
    print(json.dumps(seen))


if __name__ == "__main__":
    split = sys.argv.index("--")
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[split + 1 :]))
