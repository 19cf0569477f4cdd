"""Sans-I/O JSON-RPC 2.0: bytes in, messages out; messages in, bytes out.

Rules this module enforces (JSON-RPC 2.0 as MCP profiles it):

* every message is an object with ``"jsonrpc": "2.0"``;
* a *request* has ``method`` (string) and ``id`` (string or integer, never null or bool);
* a *notification* has ``method`` and no ``id``;
* a *response* has ``id`` and exactly one of ``result`` (an object) or ``error`` (an object
  with an integer ``code`` and a string ``message``); an error response may carry
  ``id: null`` when the peer could not read the id of the request it rejects;
* ``params``, when present, is an object (MCP never uses positional params);
* a batch (a JSON array of messages, allowed by 2025-03-26) is accepted on receive and
  never sent.

One exception to "anything else is an error": a *response* whose ``id`` can be read but
whose body is wrong (``"result": "x"``, no ``result``/``error``, a malformed ``error``)
decodes to :class:`InvalidResponse`. Dropping it would leave the request it answers
waiting forever; as a message, it reaches the session, which fails that request at once.

Anything else is a :class:`~agenthost.errors.ProtocolError` carrying the JSON-RPC error
code that describes it, and the request id when one could be read, so the caller can
answer the peer. No other exception escapes :func:`decode` for any input.

There is no I/O and no Trio here; transports frame bytes, the session correlates ids.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import attrs
import orjson

from agenthost.errors import ProtocolError

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "ErrorObject",
    "ErrorResponse",
    "InvalidResponse",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "decode",
    "decode_object",
    "encode",
    "encode_line",
    "to_object",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

RequestId: TypeAlias = int | str

# The message classes are plain (mutable) slotted classes, not frozen ones: two are built
# per call, and a frozen attrs class costs twice as much to build (bench, "client
# CPU/call"). Treat them as values all the same: nothing here or above changes one.


@attrs.define(slots=True)
class Request:
    """A call that expects exactly one response with the same ``id``."""

    id: RequestId
    method: str
    params: dict[str, Any] | None = None


@attrs.define(slots=True)
class Notification:
    """A one-way message; the receiver never answers it."""

    method: str
    params: dict[str, Any] | None = None


@attrs.define(slots=True)
class Response:
    """A successful answer to the request with the same ``id``."""

    id: RequestId
    result: dict[str, Any]


@attrs.define(slots=True)
class ErrorObject:
    code: int
    message: str
    data: Any = None


@attrs.define(slots=True)
class ErrorResponse:
    """A failed answer; ``id`` is None when the peer could not read the request's id."""

    id: RequestId | None
    error: ErrorObject


@attrs.define(slots=True)
class InvalidResponse:
    """A response to request ``id`` that is not valid JSON-RPC; received, never sent.

    ``problem`` says what was wrong, for the error the waiting request fails with.
    """

    id: RequestId
    problem: str


Message: TypeAlias = Request | Notification | Response | ErrorResponse | InvalidResponse

_dumps = orjson.dumps
_loads = orjson.loads
_APPEND_NEWLINE: Final = orjson.OPT_APPEND_NEWLINE


def to_object(message: Message) -> dict[str, Any]:
    """The JSON-RPC object for ``message`` (what goes on the wire, before serialising)."""
    cls = type(message)
    if cls is Request:
        assert isinstance(message, Request)
        obj: dict[str, Any] = {"jsonrpc": "2.0", "id": message.id, "method": message.method}
        if message.params is not None:
            obj["params"] = message.params
        return obj
    if cls is Response:
        assert isinstance(message, Response)
        return {"jsonrpc": "2.0", "id": message.id, "result": message.result}
    if cls is Notification:
        assert isinstance(message, Notification)
        obj = {"jsonrpc": "2.0", "method": message.method}
        if message.params is not None:
            obj["params"] = message.params
        return obj
    if cls is ErrorResponse:
        assert isinstance(message, ErrorResponse)
        err: dict[str, Any] = {"code": message.error.code, "message": message.error.message}
        if message.error.data is not None:
            err["data"] = message.error.data
        return {"jsonrpc": "2.0", "id": message.id, "error": err}
    # InvalidResponse (and anything else) is never sent.
    raise TypeError(f"not a JSON-RPC message that can be sent: {message!r}")


def encode(message: Message) -> bytes:
    """Serialise one message to UTF-8 JSON bytes (no framing, no trailing newline)."""
    try:
        return _dumps(to_object(message))
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise ProtocolError(
            f"cannot encode {type(message).__name__}: {exc}", code=INTERNAL_ERROR
        ) from None


def encode_line(message: Message) -> bytes:
    """:func:`encode` plus the trailing newline of line-framed transports (stdio).

    orjson appends the newline while serialising, which spares a copy of the whole
    message per send (adding ``b"\\n"`` afterwards copies it).
    """
    try:
        if type(message) is Request:  # the common case, without the to_object() call
            assert isinstance(message, Request)
            if message.params is None:
                obj: dict[str, Any] = {"jsonrpc": "2.0", "id": message.id, "method": message.method}
            else:
                obj = {
                    "jsonrpc": "2.0",
                    "id": message.id,
                    "method": message.method,
                    "params": message.params,
                }
            return _dumps(obj, option=_APPEND_NEWLINE)
        return _dumps(to_object(message), option=_APPEND_NEWLINE)
    except TypeError as exc:
        raise ProtocolError(
            f"cannot encode {type(message).__name__}: {exc}", code=INTERNAL_ERROR
        ) from None


def decode(data: bytes | bytearray | memoryview | str) -> list[Message]:
    """Parse one frame: a single message or a batch.

    Returns:
        The messages in order (one for a plain message).

    Raises:
        ProtocolError: for invalid JSON (code -32700) or anything that is not a JSON-RPC
            2.0 message (code -32600, with ``request_id`` set when it could be read). For a
            batch, the first bad member fails the whole frame: a half-applied batch is
            worse than a rejected one.
    """
    try:
        obj = _loads(data)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"invalid JSON: {exc}", code=PARSE_ERROR) from None
    if type(obj) is dict:
        # The common case first, with the fewest lookups: a well-formed success response
        # (what every call waits for). Anything else takes the full classification.
        result = obj.get("result")
        if (
            type(result) is dict
            and obj.get("jsonrpc") == "2.0"
            and "error" not in obj
            and "method" not in obj
        ):
            rid = obj.get("id")
            if type(rid) is int or type(rid) is str:
                return [Response(rid, result)]
        return [decode_object(obj)]
    if type(obj) is list:
        if not obj:
            raise ProtocolError("empty batch", code=INVALID_REQUEST)
        return [decode_object(item) for item in obj]
    return [decode_object(obj)]


def _read_id(obj: dict[str, Any]) -> RequestId | None:
    rid = obj.get("id")
    if type(rid) is int or type(rid) is str:
        return rid
    return None


def decode_object(obj: Any) -> Message:
    """Classify one already-parsed JSON value as a JSON-RPC message (see module rules)."""
    if type(obj) is not dict:
        raise ProtocolError(
            f"a JSON-RPC message must be an object, got {type(obj).__name__}",
            code=INVALID_REQUEST,
        )
    if obj.get("jsonrpc") != "2.0":
        rid = _read_id(obj)
        if rid is not None and "method" not in obj:
            return InvalidResponse(rid, 'missing or wrong "jsonrpc" member (must be "2.0")')
        raise ProtocolError(
            'missing or wrong "jsonrpc" member (must be "2.0")',
            code=INVALID_REQUEST,
            request_id=_read_id(obj),
        )
    method = obj.get("method")
    has_id = "id" in obj
    if method is not None:
        if type(method) is not str:
            raise ProtocolError(
                '"method" must be a string', code=INVALID_REQUEST, request_id=_read_id(obj)
            )
        params = obj.get("params")
        if params is not None and type(params) is not dict:
            raise ProtocolError(
                '"params" must be an object',
                code=INVALID_REQUEST,
                request_id=_read_id(obj),
            )
        if not has_id:
            return Notification(method, params)
        rid = obj["id"]
        if type(rid) is not int and type(rid) is not str:
            raise ProtocolError(
                f'request "id" must be a string or an integer, got {_kind(rid)}',
                code=INVALID_REQUEST,
            )
        return Request(rid, method, params)
    if not has_id:
        raise ProtocolError(
            'neither "method" nor "id": not a request, notification or response',
            code=INVALID_REQUEST,
        )
    rid = obj["id"]
    problem = _response_problem(obj)
    if problem is None:
        if "result" in obj:
            return Response(rid, obj["result"])
        error = obj["error"]
        return ErrorResponse(rid, ErrorObject(error["code"], error["message"], error.get("data")))
    if type(rid) is int or type(rid) is str:
        return InvalidResponse(rid, problem)
    raise ProtocolError(problem, code=INVALID_REQUEST)


def _response_problem(obj: dict[str, Any]) -> str | None:
    """What is wrong with a response object, or None when it is valid."""
    rid = obj["id"]
    has_result = "result" in obj
    if has_result == ("error" in obj):
        return 'a response must have exactly one of "result" and "error"'
    if has_result:
        if type(rid) is not int and type(rid) is not str:
            return f'response "id" must be a string or an integer, got {_kind(rid)}'
        if type(obj["result"]) is not dict:
            return f'"result" must be an object, got {_kind(obj["result"])}'
        return None
    if rid is not None and type(rid) is not int and type(rid) is not str:
        return f'error response "id" must be a string, an integer or null, got {_kind(rid)}'
    error = obj["error"]
    if type(error) is not dict:
        return f'"error" must be an object, got {_kind(error)}'
    if type(error.get("code")) is not int:
        return '"error.code" must be an integer'
    if type(error.get("message")) is not str:
        return '"error.message" must be a string'
    return None


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
