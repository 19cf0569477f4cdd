"""Helpers shared by the hostile consent tests (test_policy_hostile.py and
test_hostile_approvals.py): the policy peer, a host whose LLM is a billing fake of
Anthropic's API, and the CLI as a subprocess.

Why a module: no test module imports another (tests/test_hygiene.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx2

from agenthost.config.model import ServerConfig
from agenthost.host.host import Host
from agenthost.protocol.types import TextContent
from tests.helpers import host_with_anthropic
from tests.providers.providers_helpers import anthropic_message

__all__ = ["PEER", "FakeAnthropic", "agenthost_cli", "host_with", "peer", "text_of"]

PEER = Path(__file__).with_name("policy_peer.py")


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def peer(name: str = "p", **kwargs: Any) -> ServerConfig:
    # policy_peer.py asks with the SDK's direct ctx.session.* requests, which only the
    # initialize era carries (on 2026-07-28 the SDK refuses them): pin that era.
    kwargs.setdefault("protocol", "legacy")
    return ServerConfig(
        name=name, transport="stdio", command=sys.executable, args=(str(PEER),), **kwargs
    )


class FakeAnthropic:
    """The Messages API: bills ``input_tokens`` plus every token the request allowed."""

    def __init__(self, input_tokens: int = 10) -> None:
        self.input_tokens = input_tokens
        self.billed: list[int] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        output = body["max_tokens"]  # the worst case: the model uses all it was granted
        self.billed.append(self.input_tokens + output)
        return anthropic_message(
            [{"type": "text", "text": "ok"}],
            stop_reason="max_tokens",
            model=body["model"],
            usage={"input_tokens": self.input_tokens, "output_tokens": output},
        )


def host_with(
    servers: list[ServerConfig],
    policy: dict[str, Any],
    *,
    fake: FakeAnthropic | None = None,
    prompter: Any = None,
) -> AbstractAsyncContextManager[Host]:
    return host_with_anthropic(servers, policy, fake or FakeAnthropic(), prompter=prompter)


def agenthost_cli(config: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "agenthost", "--config", str(config), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=config.parent,
    )
