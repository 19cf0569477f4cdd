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
  never sent. A large one can be read a group of members at a time (:class:`BatchReader`),
  so decoding it never holds the interpreter for long.

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

import re
from typing import Any, Final, TypeAlias

import attrs
import orjson

from agenthost.errors import AgentHostError, ProtocolError

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "BatchReader",
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
    "is_batch",
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

    A transport also uses it to fail one request locally with a typed ``error`` (an
    :class:`~agenthost.errors.RequestUnauthorized` from the OAuth flow), raised to that
    caller as is: the connection goes on. Why this class and not a new message kind: the
    session's reader already takes this rare branch, so normal responses pay nothing.
    """

    id: RequestId
    problem: str
    error: AgentHostError | None = None


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


def is_batch(data: bytes | bytearray | memoryview) -> bool:
    """Whether a frame is a batch: its first byte that is not JSON whitespace is ``[``."""
    first = _NOT_WHITESPACE.search(data)
    return first is not None and first.group() == b"["


class BatchReader:
    """Decode a batch frame a group of members at a time, each group parsed by orjson.

    Why: ``orjson.loads`` of a whole 14 MB batch (300k pings) holds the GIL for 0.2-0.4 s
    in one C call, so no thread can hand the event loop a turn meanwhile, and 300k
    messages built at once make the collector's passes slow too. Here the frame is cut
    into groups of about ``group`` bytes, each parsed and classified on its own, so the
    caller can checkpoint between groups and free the members it handled.

    Where to cut without a second JSON parser: at a ``}`` followed by a comma (preferably
    one followed by a member starting with ``{"jsonrpc"``, as serialisers write them), and
    the cut is checked by parsing the group (``[`` + group + ``]``). Since a group starts
    at a member's start, the group parses only if the cut is a member boundary: a cut
    inside a string leaves it unterminated, a cut inside an object or array leaves it
    open. When the candidate fails (a member larger than the group, ``},`` inside
    members), the next one is looked for twice as far, so the attempts cost at most twice
    the group that succeeds: linear in the frame, never worse than one whole parse (which
    is what a batch whose members hide their boundaries gets).

    Values are exactly what :func:`decode` returns (the same parser), but a bad member
    cannot undo the members before it (they have been returned): the batch ends there.
    """

    def __init__(self, data: bytes, *, group: int = 64 * 1024) -> None:
        first = _NOT_WHITESPACE.search(data)
        if first is None or first.group() != b"[":
            raise ValueError("not a batch frame")
        self._data = data
        #: Where the next group starts (just after ``[`` or a member's comma).
        self._start = first.end()
        self._group = group
        self._target = group
        self._error: ProtocolError | None = None
        self._first = True
        self.done = False

    def read(self, limit: int | None = None) -> list[Message] | None:
        """The next group's members, in order (at least one unless the batch is over).

        Args:
            limit: parse at most this many bytes; ``None`` when the group needs more (a
                large member), so the caller can run the rest elsewhere (a thread).

        Raises:
            ProtocolError: invalid JSON (-32700), an empty batch, or a member that is not
                a JSON-RPC message; the members before it were returned first.
        """
        if self._error is not None:
            self.done = True
            error, self._error = self._error, None
            raise error
        data, start = self._data, self._start
        while True:
            at = start + self._target - 1
            # Where the next member starts with "jsonrpc" (as serialisers write it) is
            # almost surely a boundary; failing that, any "}," may be.
            cut = _NEXT_MEMBER.search(data, at, at + 4 * self._target) or _MEMBER_END.search(
                data, at
            )
            end = len(data) if cut is None else cut.start() + 1
            if limit is not None and end - start > limit:
                return None
            # The last group runs to the end, the batch's own "]" included.
            chunk = b"[" + data[start:] if cut is None else b"[" + data[start:end] + b"]"
            try:
                values = _loads(chunk)
            except orjson.JSONDecodeError as exc:
                if cut is None:
                    self.done = True
                    raise ProtocolError(f"invalid JSON: {exc}", code=PARSE_ERROR) from None
                self._target = max(self._target * 2, end - start + 1)
                continue
            break
        self._target = self._group
        if cut is None:
            self.done = True
        else:
            self._start = cut.end()
        if self._first and not values:
            self.done = True
            raise ProtocolError("empty batch", code=INVALID_REQUEST)
        self._first = False
        messages: list[Message] = []
        for value in values:
            try:
                messages.append(decode_object(value))
            except ProtocolError as exc:
                if not messages:
                    self.done = True
                    raise
                self._error = exc  # raised by the next read, after these are handled
                self.done = False
                break
        return messages


#: A ``}`` followed by a comma: a candidate end of a batch member.
_MEMBER_END: Final = re.compile(rb"\}[ \t\r\n]*,")
#: The same, followed by a member that starts with its "jsonrpc" key: the likely one.
_NEXT_MEMBER: Final = re.compile(rb'\}[ \t\r\n]*,(?=[ \t\r\n]*\{[ \t\r\n]*"jsonrpc")')
_NOT_WHITESPACE: Final = re.compile(rb"[^ \t\r\n]")


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
