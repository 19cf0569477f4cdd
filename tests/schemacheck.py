"""Validate JSON-RPC messages against the official MCP schema.json of a revision.

Test helper: what agenthost sends must fit the revision it negotiated, and the spec's own
schema is the judge. A message is checked against the envelope (``JSONRPCRequest`` /
``JSONRPCNotification`` / the response definitions) *and* the definition of its method
(``CallToolRequest``, ``CreateMessageResult``...), picked by the ``method`` const in the
schema's ``ClientRequest``/``ServerRequest``/... unions; checking only the anyOf union
would report every member's mismatch and hide the one that matters.

2024-11-05..2025-06-18 schemas are draft-07 with ``definitions``; 2025-11-25 and later are
2020-12 with ``$defs``. Validators are compiled once per (revision, definition).

Note: the schemas never set ``additionalProperties: false``, so a field that a revision
does not define passes here; omission of newer fields is tested directly.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal

import jsonschema
import orjson

__all__ = [
    "SPEC_DIR",
    "load_schema",
    "validate_definition",
    "validate_envelope",
    "validate_outgoing",
]

#: The official schemas, copied into the repository (tests/data/spec/README.md says from where).
SPEC_DIR = Path(__file__).resolve().parent / "data" / "spec"


@functools.cache
def load_schema(revision: str) -> dict[str, Any]:
    """The parsed schema.json of ``revision``."""
    path = SPEC_DIR / revision / "schema.json"
    if not path.is_file():
        raise AssertionError(f"no schema for MCP revision {revision!r} at {path}")
    schema: dict[str, Any] = orjson.loads(path.read_bytes())
    return schema


def _defs_key(schema: dict[str, Any]) -> str:
    return "$defs" if "$defs" in schema else "definitions"


def _defs(revision: str) -> dict[str, Any]:
    schema = load_schema(revision)
    defs: dict[str, Any] = schema[_defs_key(schema)]
    return defs


@functools.cache
def _validator(revision: str, names: tuple[str, ...]) -> Any:
    """A compiled validator for the conjunction of the named definitions."""
    schema = load_schema(revision)
    key = _defs_key(schema)
    missing = [name for name in names if name not in schema[key]]
    if missing:
        raise AssertionError(f"revision {revision} has no definition {missing}")
    root = {
        "$schema": schema["$schema"],
        key: schema[key],
        "allOf": [{"$ref": f"#/{key}/{name}"} for name in names],
    }
    cls = jsonschema.validators.validator_for(root)
    _check_schema(revision)
    return cls(root)


@functools.cache
def _check_schema(revision: str) -> None:
    """The revision's schema against its metaschema, once: every validator above shares its
    definitions and differs only in a small ``allOf``, and checking the whole schema again
    for each (about 0.2 s of CPU each, 19 in one interop test) dominated the tests that
    validate their traffic."""
    schema = load_schema(revision)
    jsonschema.validators.validator_for(schema).check_schema(schema)


@functools.cache
def _by_method(revision: str, union: str) -> dict[str, str]:
    """Map each method of a union (``ClientRequest``...) to its definition name."""
    defs = _defs(revision)
    out: dict[str, str] = {}
    if "anyOf" not in defs[union]:
        # A "union" of one (2026-07-28's ClientNotification is CancelledNotification
        # written out in place): the definition is its own member.
        method = defs[union]["properties"]["method"].get("const")
        return {method: union} if method is not None else {}
    for member in defs[union]["anyOf"]:
        name = member["$ref"].rsplit("/", 1)[-1]
        method = defs[name]["properties"]["method"].get("const")
        if method is not None:
            out[method] = name
    return out


def _envelope(revision: str, kind: str) -> str:
    defs = _defs(revision)
    names = {
        "request": ("JSONRPCRequest",),
        "notification": ("JSONRPCNotification",),
        "result": ("JSONRPCResultResponse", "JSONRPCResponse"),
        "error": ("JSONRPCErrorResponse", "JSONRPCError"),
    }[kind]
    for name in names:
        if name in defs:
            return name
    raise AssertionError(f"revision {revision} has no envelope for {kind}")


def _result_definition(revision: str, method: str, sender: str) -> str:
    """The result definition answering ``method`` (the receiver of a request sends it)."""
    from agenthost.protocol import methods

    table = methods.SERVER_REQUESTS if sender == "client" else methods.CLIENT_REQUESTS
    spec = table.get(method)
    if spec is None:
        raise AssertionError(f"a {sender} never answers {method!r}")
    name = spec.result.__name__
    if name not in _defs(revision):
        raise AssertionError(f"revision {revision} has no result {name} (for {method!r})")
    return name


def _check(message: dict[str, Any], revision: str, names: tuple[str, ...]) -> None:
    validator = _validator(revision, names)
    error = jsonschema.exceptions.best_match(validator.iter_errors(message))
    if error is not None:
        path = "$" + "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path
        )
        raise AssertionError(
            f"MCP {revision} {'+'.join(names)}: {error.message} at {path} "
            f"(schema path {'/'.join(str(p) for p in error.absolute_schema_path)})"
        )


def validate_outgoing(
    message: dict[str, Any],
    revision: str,
    *,
    direction: Literal["client", "server"] = "client",
    answers_method: str | None = None,
) -> None:
    """Assert that ``message``, sent by a client (or server), fits ``revision``'s schema.

    Args:
        message: one whole JSON-RPC message as a dict.
        revision: the MCP revision, e.g. ``"2025-06-18"``.
        direction: who sends it: ``"client"`` (agenthost) or ``"server"``.
        answers_method: for a result response, the method of the request it answers;
            without it the result is checked against the ``ClientResult`` (or
            ``ServerResult``) union.

    Raises:
        AssertionError: with the failing JSON path and schema path.
    """
    sender = "Client" if direction == "client" else "Server"
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise AssertionError(f"not a JSON-RPC 2.0 message object: {message!r}")
    if "method" in message:
        kind = "request" if "id" in message else "notification"
        union = f"{sender}{'Request' if kind == 'request' else 'Notification'}"
        definition = _by_method(revision, union).get(message["method"])
        if definition is None:
            raise AssertionError(f"{message['method']!r} is not a {union} in MCP {revision}")
        _check(message, revision, (_envelope(revision, kind), definition))
    elif "error" in message:
        _check(message, revision, (_envelope(revision, "error"),))
    elif "result" in message:
        _check(message, revision, (_envelope(revision, "result"),))
        if answers_method is None:
            _check(message["result"], revision, (f"{sender}Result",))
        else:
            name = _result_definition(revision, answers_method, direction)
            _check(message["result"], revision, (name,))
    else:
        raise AssertionError(f"neither request, notification nor response: {message!r}")


def validate_definition(value: Any, revision: str, definition: str) -> None:
    """Assert that ``value`` fits one named definition of ``revision``'s schema (for a
    result whose type the method alone does not say: a ``CreateTaskResult`` answering a
    task-augmented request, say)."""
    _check(value, revision, (definition,))


def validate_envelope(message: dict[str, Any], revision: str) -> None:
    """Assert that ``message`` is a JSON-RPC request or notification as ``revision``
    frames one, whatever its method: for an extension's methods, which the core schema
    does not define (the tasks extension's ``tasks/get`` ...)."""
    kind = "request" if "id" in message else "notification"
    _check(message, revision, (_envelope(revision, kind),))
