"""Sampling path overhead: what the host adds around the provider call.

Why this shape: the figure that matters is the host's own cost between a server's
``sampling/createMessage`` and the LLM call (decode, session, policy, model selection,
content conversion) and between the answer and the response on the wire (conversion,
review, audit, encode, write). The provider here is the deterministic replay provider
(:class:`agenthost_providers.scripted.ScriptedProvider`) wrapped to timestamp entry and exit, so
the provider itself costs nothing; the server (:mod:`bench.sampling_server`) timestamps
when it wrote each request and when it read the answer. All timestamps are
``perf_counter_ns`` (one ``CLOCK_MONOTONIC`` for every process on Linux).

The two legs therefore include one pipe hop each (the kernel wake-up of the other
process), which is part of what a server waits for.

This runs the whole host (:func:`agenthost.host.open_host` with a headless policy that
allows the server's sampling and tools), not a shortcut around it.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.measure import BENCH_DIR, percentile

__all__ = ["measure_sampling"]


async def measure_sampling(spec: dict[str, Any]) -> dict[str, Any]:
    """Send ``spec["n"]`` sampling requests through a host; p50/p99 of each leg in us."""
    from agenthost.config import config_from_mapping
    from agenthost.host.host import open_host
    from agenthost_providers.base import Request, Result
    from agenthost_providers.scripted import ScriptedProvider, ScriptedTurn

    n: int = spec["n"]
    warmup: int = spec.get("warmup", 20)
    calls: list[tuple[int, int]] = []

    class TimedProvider(ScriptedProvider):
        """The replay provider, timestamped at entry and exit of every call."""

        async def complete(self, request: Request) -> Result:
            entered = time.perf_counter_ns()
            result = await super().complete(request)
            calls.append((entered, time.perf_counter_ns()))
            return result

    provider = TimedProvider([ScriptedTurn(text="ok")] * (n + warmup), name="replay")
    with tempfile.TemporaryDirectory(prefix="agenthost-bench-") as tmp:
        script = Path(tmp, "script.toml")
        script.write_text('[[turns]]\ntext = "ok"\n', encoding="utf-8")
        config = config_from_mapping(
            {
                "servers": {
                    "sampler": {
                        "command": sys.executable,
                        "args": [str(BENCH_DIR / "sampling_server.py")],
                        "trusted": True,
                    }
                },
                "providers": {"replay": {"kind": "scripted", "script": str(script)}},
                "policy": {
                    "mode": "headless",
                    "preset": "none",
                    "rules": [
                        {"kind": "tool", "server": "sampler", "decision": "allow"},
                        {
                            "kind": "sampling",
                            "server": "sampler",
                            "decision": "allow",
                            "review": "auto",
                        },
                    ],
                },
            },
            source=str(Path(tmp, "agenthost.toml")),
        )
        async with open_host(config, providers={"replay": provider}, env={}) as host:
            await host.call_tool("sampler__sample", {"n": warmup})
            calls.clear()
            result = await host.call_tool("sampler__sample", {"n": n})
    block = result.content[0]
    timings = json.loads(getattr(block, "text", "[]"))
    failed = [outcome for _, _, outcome in timings if outcome is not True]
    if len(timings) != n or len(calls) != n or failed:
        raise AssertionError(
            f"sampling run incomplete: {len(timings)} answers, {len(calls)} provider calls,"
            f" errors: {failed[:1]}"
        )
    ingress = [
        (entered - sent) / 1e3 for (sent, _, _), (entered, _) in zip(timings, calls, strict=True)
    ]
    egress = [
        (answered - left) / 1e3 for (_, answered, _), (_, left) in zip(timings, calls, strict=True)
    ]
    return {
        "in_p50_us": percentile(ingress, 50),
        "in_p99_us": percentile(ingress, 99),
        "out_p50_us": percentile(egress, 50),
        "out_p99_us": percentile(egress, 99),
    }
