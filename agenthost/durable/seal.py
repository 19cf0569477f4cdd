"""The deployment's shared key, and what it authenticates in a durable run.

Anyone who reaches the Temporal frontend can start workflows, schedule activities on the
fleet's task queue, answer updates and complete activities by id. A run's history is
readable by all of them, so the workflow can hold no secret: every check that matters
happens in an activity, on a worker that holds the key (read from a file at start, never
in a payload, never logged).

What the key authenticates (HMAC-SHA256, a purpose label first so one MAC never passes
for another):

- **the run's grant**: the submitter signs the run id, the Temporal run id of its first
  execution (known once it is started, then sent as a signal) and a digest of each input
  that decides what the run may do (task, provider, model, system prompt, policy, ...).
  Every activity verifies it against the workflow id Temporal gives the activity and that
  execution's first run id (which continue-as-new keeps), so a workflow nobody with the
  key submitted gets nothing: no listing, no model turn, no tool call, no audit line but a
  refusal; nor does a grant copied from a history into another workflow, or into a new
  workflow started under a finished (or terminated) run's id.
- **an approval**: the approver's CLI signs (run id, call id, verdict, who, server, tool,
  arguments digest); the activity that runs a parked call checks it.
- **a model reply and each tool use in it**, sealed by the ``llm_call`` activity: the
  ``call_tool`` activity runs only a tool use a worker's model turn produced.
- **a tool result**, sealed by the ``call_tool`` activity: the next ``llm_call`` gives the
  model only sealed results (a result completed by hand, ``temporal activity complete``,
  has no valid seal and is replaced by a fixed refusal text).
- **an audit line**: sealed over its content (``run_id`` and ``seq`` included) by the
  sink; "first write wins" counts only lines that verify.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agenthost.errors import AgentHostError

__all__ = [
    "ENV_KEY_FILE",
    "GRANTED",
    "MIN_KEY_BYTES",
    "DurableKey",
    "Refused",
    "approval",
    "check_approval",
    "check_grant",
    "digest",
    "grant",
    "line_verifies",
    "load_key",
    "reply_verifies",
    "result_verifies",
    "seal_line",
    "seal_reply",
    "seal_result",
    "seal_use",
    "use_verifies",
    "verified",
]

#: The environment variable naming the key file (or ``--key-file``).
ENV_KEY_FILE = "AGENTHOST_DURABLE_KEY_FILE"
#: A shorter key is refused: 32 bytes is HMAC-SHA256's own strength.
MIN_KEY_BYTES = 32
#: A key file over this is not a key (and is not read whole into memory).
_MAX_KEY_BYTES = 4096
#: The run inputs the grant covers: everything that decides what the run may do.
GRANTED = (
    "task",
    "provider",
    "model",
    "system_prompt",
    "max_turns",
    "max_tokens",
    "token_budget",
    "policy",
    "options",
)
_DOMAIN = "agenthost-durable-v1"


class Refused(AgentHostError):
    """Work no holder of the deployment's key decided: a run, approval or seal that
    does not verify."""


def canonical(value: Any) -> bytes:
    """One byte string per JSON value, whatever the key order or spacing."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def digest(value: Any) -> str:
    """SHA-256 of ``value``'s canonical JSON, hex."""
    return hashlib.sha256(canonical(value)).hexdigest()


class DurableKey:
    """The deployment's shared secret; shown only as the file it came from."""

    def __init__(self, secret: bytes, *, source: str = "<memory>") -> None:
        if len(secret) < MIN_KEY_BYTES:
            raise AgentHostError(
                f"the durable key {source} is too short ({len(secret)} bytes;"
                f" at least {MIN_KEY_BYTES})"
            )
        self._secret = secret
        self.source = source

    def __repr__(self) -> str:
        return f"DurableKey({self.source!r})"

    def mac(self, purpose: str, *parts: Any) -> str:
        """The MAC of ``parts`` (JSON values) for ``purpose``, hex."""
        message = canonical([_DOMAIN, purpose, *parts])
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def check(self, mac: object, purpose: str, *parts: Any) -> bool:
        """Whether ``mac`` is this key's MAC of ``parts`` for ``purpose``."""
        if not isinstance(mac, str):
            return False
        try:
            expected = self.mac(purpose, *parts)
        except (TypeError, ValueError):  # not JSON: nothing of ours
            return False
        return hmac.compare_digest(mac, expected)


def load_key(path: str | os.PathLike[str]) -> DurableKey:
    """The key in ``path``: its bytes, trailing whitespace stripped.

    Raises:
        AgentHostError: missing, not a regular file, readable by group or others, or
            shorter than :data:`MIN_KEY_BYTES`; one line naming the file, never the key.
    """
    where = Path(path)
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise AgentHostError(f"cannot read the durable key {where}: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise AgentHostError(f"the durable key {where} is not a regular file")
    with os.fdopen(fd, "rb") as file:
        if info.st_mode & 0o077:
            raise AgentHostError(
                f"the durable key {where} is readable by others"
                f" (mode {stat.S_IMODE(info.st_mode):04o}): chmod 600 it"
            )
        secret = file.read(_MAX_KEY_BYTES + 1)
    if len(secret) > _MAX_KEY_BYTES:
        raise AgentHostError(f"the durable key {where} is over {_MAX_KEY_BYTES} bytes")
    return DurableKey(secret.rstrip(), source=str(where))


# ---------------------------------------------------------------------------- the run


def grant(
    key: DurableKey, run_id: str, first_run: str, params: Mapping[str, Any]
) -> dict[str, Any]:
    """The submitter's grant for run ``run_id`` (whose first execution is ``first_run``)
    with inputs ``params``."""
    fields = {name: digest(params.get(name)) for name in GRANTED}
    return {"fields": fields, "mac": key.mac("run", run_id, first_run, fields)}


def check_grant(
    key: DurableKey, run_id: str, first_run: str, granted: object, given: Mapping[str, Any]
) -> None:
    """That ``granted`` is the key's grant for ``run_id`` started as ``first_run``, and
    that each input in ``given`` is the one it covers.

    Raises:
        Refused: it is not (a run nobody with the key submitted, or altered since).
    """
    if not isinstance(granted, Mapping) or not isinstance(granted.get("fields"), Mapping):
        raise Refused(f"run {run_id} carries no grant of this deployment's key")
    fields = dict(granted["fields"])
    if not key.check(granted.get("mac"), "run", run_id, first_run, fields):
        raise Refused(f"run {run_id}: its grant does not verify with this deployment's key")
    for name, value in given.items():
        if name not in GRANTED or fields.get(name) != digest(value):
            raise Refused(f"run {run_id}: its {name} is not the one its submitter signed")


# ---------------------------------------------------------------------------- approvals


def approval(
    key: DurableKey,
    *,
    run_id: str,
    call_id: str,
    verdict: str,
    who: str,
    server: str,
    tool: str,
    arguments: Mapping[str, Any],
) -> str:
    """The approver's signature over one answer to one parked call."""
    return key.mac("approval", run_id, call_id, verdict, who, server, tool, digest(arguments))


def check_approval(
    key: DurableKey,
    answer: object,
    *,
    run_id: str,
    call_id: str,
    server: str,
    tool: str,
    arguments: Mapping[str, Any],
) -> bool:
    """Whether ``answer`` (``{"verdict", "who", "seal"}``) is signed for this call."""
    if not isinstance(answer, Mapping):
        return False
    verdict, who = answer.get("verdict"), answer.get("who")
    if not isinstance(verdict, str) or not isinstance(who, str):
        return False
    mac = answer.get("seal")
    return key.check(
        mac, "approval", run_id, call_id, verdict, who, server, tool, digest(arguments)
    )


# ---------------------------------------------------------------------------- turns


def seal_reply(key: DurableKey, run_id: str, content: Any) -> str:
    """A model reply's seal: ``content`` is the assistant message's content as JSON."""
    return key.mac("reply", run_id, digest(content))


def seal_use(
    key: DurableKey, run_id: str, use_id: str, name: str, arguments: Mapping[str, Any]
) -> str:
    """One tool use of a sealed model reply: what ``call_tool`` may run."""
    return key.mac("use", run_id, use_id, name, digest(arguments))


def seal_result(key: DurableKey, run_id: str, call_id: str, content: Any) -> str:
    """A tool result's seal: ``content`` is the result block as JSON."""
    return key.mac("result", run_id, call_id, digest(content))


def reply_verifies(key: DurableKey, mac: object, run_id: str, content: Any) -> bool:
    return key.check(mac, "reply", run_id, digest(content))


def use_verifies(
    key: DurableKey,
    mac: object,
    run_id: str,
    use_id: str,
    name: str,
    arguments: Mapping[str, Any],
) -> bool:
    return key.check(mac, "use", run_id, use_id, name, digest(arguments))


def result_verifies(key: DurableKey, mac: object, run_id: str, call_id: str, content: Any) -> bool:
    return key.check(mac, "result", run_id, call_id, digest(content))


# ---------------------------------------------------------------------------- audit lines


def seal_line(key: DurableKey, line: Mapping[str, Any]) -> dict[str, Any]:
    """``line`` with its ``mac`` (over everything else in it, run_id and seq too)."""
    body = {k: v for k, v in line.items() if k != "mac"}
    return {**body, "mac": key.mac("audit", body)}


def line_verifies(key: DurableKey, line: object) -> bool:
    """Whether ``line`` (a stored audit line) was sealed by ``key``."""
    if not isinstance(line, Mapping):
        return False
    body = {k: v for k, v in line.items() if k != "mac"}
    return key.check(line.get("mac"), "audit", body)


def verified(key: DurableKey, lines: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The lines of ``lines`` that ``key`` sealed (a forged or altered one is dropped)."""
    return [dict(line) for line in lines if line_verifies(key, line)]
