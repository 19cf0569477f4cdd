"""Two official-SDK clients on one ``agenthost serve --http`` at once (issue 24, routing).

Client A calls ``gated_elicit`` (tests/peers/sdk_server.py), whose upstream waits for a
gate file, then logs, reports progress and asks for a form; while it waits, client B
speaks (it lists the tools) and so becomes the client that spoke last. Each client
records what reached it; the test asserts each saw only its own.

Usage: ``python tests/peers/two_clients.py URL GATE_PATH [A_MODE]`` (A_MODE: ``legacy``,
the default, or ``2026-07-28``; B is legacy; prints one JSON object).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, cast

from mcp import Client
from mcp.types import ElicitRequestParams, ElicitResult
from mcp_types import RequestParamsMeta


def _client(url: str, name: str, seen: dict[str, Any], mode: str = "legacy") -> Client:
    mine: dict[str, Any] = {"forms": [], "notifications": [], "logs": []}
    seen[name] = mine

    async def on_elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        mine["forms"].append(params.message)
        return ElicitResult(action="accept", content={"name": name, "age": 1})

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None)
        if method is not None:
            mine["notifications"].append(method)

    async def on_log(params: Any) -> None:
        mine["logs"].append(str(params.data))

    return Client(
        url,
        mode=mode,
        elicitation_callback=on_elicit,
        message_handler=on_message,
        logging_callback=on_log,
        read_timeout_seconds=60,
    )


async def main(url: str, gate: Path, mode: str) -> None:
    seen: dict[str, Any] = {}
    async with _client(url, "A", seen, mode) as a, _client(url, "B", seen) as b:
        meta: RequestParamsMeta | None = None
        if mode == "legacy":
            await a.set_logging_level("debug")
        else:  # 2026-07-28: the level goes with the request
            meta = cast(RequestParamsMeta, {"io.modelcontextprotocol/logLevel": "debug"})
        seen_progress: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen_progress.append(progress)

        async with asyncio.timeout(60), asyncio.TaskGroup() as group:
            call = group.create_task(
                a.call_tool(
                    "gated_elicit",
                    {"gate": str(gate)},
                    progress_callback=on_progress,
                    meta=meta,
                )
            )
            started = gate.with_name(gate.name + ".started")
            while not started.exists():
                await asyncio.sleep(0.02)
            await b.list_tools(cache_mode="bypass")  # B is now the client that spoke last
            gate.write_text("open")
        seen["A"]["result"] = call.result().model_dump(mode="json", by_alias=True)
        seen["A"]["progress"] = seen_progress
        await b.list_tools(cache_mode="bypass")  # anything misrouted to B has arrived by now
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), (sys.argv[3:] or ["legacy"])[0]))
