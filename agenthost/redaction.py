"""One registry of secret values, and one function that scrubs them out of text.

Why one mechanism: a configured secret (a header value, a ``${KEY}`` in a URL query, an
OAuth token obtained at run time) can reach text that leaves the process by many roads:
a server quotes it back in a JSON-RPC error, httpx logs a URL at DEBUG, an exception
message carries it into ``last_error`` and ``--json`` output. Scrubbing at each road
misses the next one, so values are registered once, where they enter (the config, a
transport's headers, a token store), and scrubbed at the few places text leaves:

* every log record, whatever logger made it (ours, httpx's, a server's stderr): a
  :mod:`logging` record factory, installed when the first secret is registered, replaces
  each value in the formatted message and in the traceback text;
* error text built from what a server sent (the session's :class:`~agenthost.errors.JSONRPCError`,
  the HTTP transports' error summaries) goes through :func:`redact` where it is built;
* the CLI writes its stdout and stderr through :func:`redact`.

Rules: a value shorter than :data:`MIN_LENGTH` characters is not registered (hiding
``true`` or ``1`` would garble every line, and protects nothing); each value is replaced
by :data:`REDACTED`, longest first, so a value containing another is hidden whole.

Two kinds of values, kept apart so one cannot push out the other: configured secrets
(:func:`add_secret`, :func:`add_named_secret`: header and env values, URL passwords and
query values; the config bounds them) are never forgotten; run-time secrets
(:func:`add_runtime_secret`: tokens, codes, session ids a server hands us) are registered
whole, never split into words (a server chooses their text: 5,000 "words" in one token
must not become 5,000 entries), and kept to their own bound (:data:`MAX_SECRETS`, oldest
forgotten first): tokens rotate.

Registration errs toward hiding, but not blindly: a registered value becomes ``***``
wherever it appears, so a plain word registered by mistake (``MODE=require``) would
garble unrelated text, and a short word a server chose as its session id would hide
words in consent prompts. Hence :func:`add_named_secret`'s rule and
:data:`RUNTIME_MIN_LENGTH`. Code that *decides* from what a server sent (an error's
``data``) reads it unredacted; redaction is for text that leaves the process.

Thread-safety: registration swaps in a new tuple; readers (log records may be created in
worker threads) take one snapshot and never see a half-updated registry.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterable, Iterator
from typing import Any, Final
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = [
    "MAX_SECRETS",
    "MIN_LENGTH",
    "REDACTED",
    "RUNTIME_MIN_LENGTH",
    "add_named_secret",
    "add_runtime_secret",
    "add_secret",
    "add_secrets_of_url",
    "discard_secret",
    "isolated",
    "redact",
    "redact_json",
    "redact_url",
    "secret_count",
]

#: What a secret value is replaced with.
REDACTED: Final = "***"
#: Values shorter than this are not treated as secrets.
MIN_LENGTH: Final = 6
#: Parts of a value (``Bearer <token>``: the token) are registered from this length.
_MIN_PART: Final = 8
#: At most this many run-time values are kept; registering more forgets the oldest.
MAX_SECRETS: Final = 4096
#: Run-time values shorter than this are not registered. A server chooses them (a session
#: id): a short common word such as ``delete`` or ``require`` would turn into ``***``
#: wherever it appears, in consent prompts and in other servers' text. Real tokens and
#: session ids are longer.
RUNTIME_MIN_LENGTH: Final = 16
#: A setting's name that says its value is a secret (``API_KEY``, ``token``, ``sig``...).
_SECRET_NAME = re.compile(
    r"key|token|secret|pass|pw|pin|api|auth|cred|cookie|session|sig|private|bearer|jwt|dsn|code"
    r"|mnemonic|phrase|seed|salt|otp|recovery",
    re.IGNORECASE,
)
#: A value that is plainly not a secret: lowercase words, paths, MIME types, host names
#: (letters and separators only), or a short number. ``MODE=require`` or
#: ``Accept: application/json`` registered as secrets would garble every text holding them.
_PLAIN_VALUE = re.compile(r"[a-z./~][a-z ./:_@+~-]*|[0-9]{1,10}")

_lock = threading.Lock()
#: Configured values (never forgotten) and run-time values (insertion-ordered for the
#: bound); the sorted snapshot below is what readers use.
_values: dict[str, None] = {}
_runtime: dict[str, None] = {}
#: Longest first, so a secret that contains another is replaced whole.
_snapshot: tuple[str, ...] = ()
_factory_installed = False


def add_secret(value: str | None) -> None:
    """Treat ``value`` (and its whitespace-separated parts) as a secret from now on.

    For configured values: never forgotten. A value obtained at run time (an OAuth
    token, which the server chose) goes to :func:`add_runtime_secret` instead.
    """
    if not value or not isinstance(value, str):
        return
    candidates = [value] if len(value) >= MIN_LENGTH else []
    parts = value.split()
    if len(parts) > 1:
        candidates.extend(part for part in parts if len(part) >= _MIN_PART)
    if candidates:
        _add(candidates, _values)


def add_named_secret(name: str, value: str | None) -> None:
    """Register a configured setting's ``value`` unless it is plainly not a secret.

    For env variables, headers and URL query parameters: most are tokens, but not all
    (``MODE=require``, ``Accept: application/json``, ``?sslmode=require``). A value is
    registered when ``name`` says it is a secret (a recovery phrase is lowercase words),
    or when it has what a secret has and a plain word or path lacks: a capital, a digit,
    or another symbol. A URL's password is registered whatever its letters.
    """
    if not value or not isinstance(value, str):
        return
    if "://" in value:
        # A connection URL (DATABASE_URL): its password is a secret however plain its
        # letters (postgres://app:correcthorse@db/prod); its query values by their names.
        add_secrets_of_url(value)
    if not _SECRET_NAME.search(name) and _PLAIN_VALUE.fullmatch(value):
        return
    add_secret(value)


def add_runtime_secret(value: str | None, *, credential: bool = False) -> None:
    """Treat ``value``, obtained at run time (a token, a code), as a secret from now on.

    Registered whole (a token is one value, not its words), among the bounded run-time
    values; register it before it is first used. Values shorter than
    :data:`RUNTIME_MIN_LENGTH` are not registered (see there), except a ``credential``
    (an OAuth token, code or assertion): one of those leaking matters more than a word
    hidden, and the authorization server the user logged in with chose it.
    """
    least = MIN_LENGTH if credential else RUNTIME_MIN_LENGTH
    if value and isinstance(value, str) and len(value) >= least:
        _add([value], _runtime)


def add_secrets_of_url(url: str | None) -> None:
    """Register the password and the query values of ``url`` (tokens travel in both);
    query values under :func:`add_named_secret`'s rule, the password always."""
    if not url:
        return
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return
    if password:
        add_secret(password)
        add_secret(unquote(password))
    for pair in parts.query.split("&"):
        name, _, value = pair.partition("=")
        if value:
            add_named_secret(unquote(name), value)
            add_named_secret(unquote(name), unquote(value.replace("+", " ")))


def discard_secret(value: str) -> None:
    """Stop treating ``value`` as a secret (a revoked token that no longer matters)."""
    global _snapshot
    with _lock:
        if _values.pop(value, 0) is None or _runtime.pop(value, 0) is None:
            _snapshot = _sorted()


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """Forget, on leaving the block, every value registered inside it.

    For a process that opens many hosts one after another with different configs (a
    test suite): what one config registered must not scrub another's text. The
    registry is process-wide, so this is not for concurrent use by threads that
    register while another block is open.
    """
    global _snapshot
    with _lock:
        saved = dict(_values), dict(_runtime), _snapshot
    try:
        yield
    finally:
        with _lock:
            _values.clear()
            _values.update(saved[0])
            _runtime.clear()
            _runtime.update(saved[1])
            _snapshot = saved[2]


def secret_count() -> int:
    """How many values are registered."""
    return len(_snapshot)


def _sorted() -> tuple[str, ...]:
    return tuple(sorted(_values.keys() | _runtime.keys(), key=len, reverse=True))


def _add(candidates: Iterable[str], into: dict[str, None]) -> None:
    global _snapshot
    with _lock:
        changed = False
        for value in candidates:
            if value not in into:
                into[value] = None
                changed = True
        if not changed:
            return
        while len(_runtime) > MAX_SECRETS:
            del _runtime[next(iter(_runtime))]
        _snapshot = _sorted()
    _install_log_factory()


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by :data:`REDACTED`.

    Cost: one substring search per registered value (C speed; no copy unless found).
    """
    for secret in _snapshot:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_json(value: Any) -> Any:
    """A JSON value (as parsed: dicts, lists, strings...) with every secret redacted.

    Strings are redacted wherever they are, keys included; the value is returned as is
    (not copied) when it holds no secret.
    """
    if not _snapshot or value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return redact(value)
    import orjson

    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        return redact(repr(value))
    clean = redact(text)
    if clean == text:
        return value
    try:
        return orjson.loads(clean)
    except orjson.JSONDecodeError:  # a secret spanning JSON syntax: keep the text
        return clean


# -- logging ---------------------------------------------------------------------------


def _install_log_factory() -> None:
    """Wrap the log record factory (once) so every record is scrubbed as it is made.

    A factory rather than a handler filter: a filter sees only the records of the
    handlers it is attached to, and an application (or httpx's DEBUG logging, or
    ``logging.lastResort``) has handlers we do not know of.
    """
    global _factory_installed
    with _lock:
        if _factory_installed:
            return
        _factory_installed = True
        previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if _snapshot:
            _scrub(record)
        return record

    logging.setLogRecordFactory(factory)


def _scrub(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a bad format: logging reports it when the record is emitted
        return
    clean = redact(message)
    if clean != message:
        record.msg = clean
        record.args = None
    if record.exc_info and not record.exc_text:
        text = logging.Formatter().formatException(record.exc_info)
        # Formatters use exc_text when set: the traceback is rendered (and scrubbed) once.
        record.exc_text = redact(text)


def redact_url(url: str) -> str:
    """``url`` without a literal password or query values, safe to log and show.

    Tokens travel in both (``https://user:TOKEN@host``, ``?api_key=...``); the path stays,
    because it is what tells one endpoint from another in a message. The one place that
    rule lives: config reprs, the transports and the OAuth flow all call it.
    """
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:{REDACTED}@{hostport}" if ":" in userinfo else f"{user}@{hostport}"
    return urlunsplit((parts.scheme, netloc, parts.path, REDACTED if parts.query else "", ""))
