"""agenthost's one error hierarchy.

Every error agenthost raises is an :class:`AgentHostError`; errors of the libraries below
us (trio, httpx, the provider SDKs, cattrs) are mapped at the boundary where they happen,
never leaked::

    AgentHostError
    ├── ConfigError                 a config file, key path and problem
    │   └── UntrustedConfig         a project config the user has not trusted (as it is now)
    ├── NotFound                    no such server, tool, prompt or resource in the host
    │   └── AmbiguousResource       several servers could serve a resource URI: name one
    ├── ProtocolError               malformed JSON-RPC / MCP (local: we could not parse it)
    │   ├── UnsupportedRevision     no MCP revision both sides speak
    │   ├── TaskCancelled           the server reports a task ``cancelled`` (not by us)
    │   ├── NotModern               auto found a legacy server (no modern server/discover)
    │   ├── MRTRLimitExceeded       a 2026-07-28 server still asked for input after the cap
    │   └── SchemaRefused           a server's JSON Schema agenthost will not apply
    ├── TransportError
    │   ├── TransportClosed         the peer closed or the process exited
    │   │   └── SessionExpired      the server forgot our session (HTTP 404): re-initialize
    │   ├── MessageTooLarge         a frame over the configured maximum
    │   └── AuthorizationError      OAuth failed or is needed (names the server and the fix)
    │       └── RequestUnauthorized one request refused after re-authorization
    ├── AgentHostTimeout            a request or operation exceeded its timeout
    ├── ServerUnavailable           the server is gone/restarting; the request never ran
    ├── JSONRPCError                the peer answered with an error (code, message, data)
    │   └── BackChannelRequired     a 2026-07-28 server's tool asked the pre-2026 way
    ├── OutputValidationError       structuredContent does not fit the tool's outputSchema
    ├── ConsentDenied               the consent policy denied an action
    ├── InvalidAnswer               a user's answer does not fit the elicitation schema
    └── ProviderError               an LLM provider failed (carries the provider's message)
        ├── UnsupportedContent      the request carries content/features the model cannot take
        └── NoModelAvailable        model selection found no candidate for a request

Errors are raised, never passed around as values; each carries the server name where it
has one, because a host talks to many servers and "connection closed" alone is useless.

One server's data is processed inside :func:`server_data`: whatever our code (or a library
under it: YAML, cattrs, regular expressions) raises while handling it leaves as that
server's :class:`ProtocolError`, never as a RecursionError or a KeyError with a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "AgentHostError",
    "AgentHostTimeout",
    "AmbiguousResource",
    "AuthorizationError",
    "BackChannelRequired",
    "ConfigError",
    "ConsentDenied",
    "InvalidAnswer",
    "JSONRPCError",
    "MRTRLimitExceeded",
    "MessageTooLarge",
    "NoModelAvailable",
    "NotFound",
    "NotModern",
    "OutputValidationError",
    "ProtocolError",
    "ProviderError",
    "RequestUnauthorized",
    "SchemaRefused",
    "ServerUnavailable",
    "SessionExpired",
    "TaskCancelled",
    "TransportClosed",
    "TransportError",
    "UnsupportedContent",
    "UnsupportedRevision",
    "UntrustedConfig",
    "server_data",
]


class AgentHostError(Exception):
    """Base class of every error agenthost raises."""


class ConfigError(AgentHostError):
    """A configuration problem: which file, which key path, and why."""

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None):
        self.path = path
        self.key = key
        where = ""
        if path and key:
            where = f"{path}: {key}: "
        elif path:
            where = f"{path}: "
        elif key:
            where = f"{key}: "
        super().__init__(f"{where}{message}")
        self.problem = message

    @classmethod
    def unknown_key(
        cls, key: str, got: str, allowed: Iterable[str], *, path: str | None = None
    ) -> ConfigError:
        """The one wording of "this key is not a setting", for every config file.

        Unknown keys are errors wherever we read settings (the host's file, OAuth,
        providers, policies, rules, scripts): a typo must not silently drop a setting, and
        one wording means a user learns it once. A close match is suggested.

        Args:
            key: the key path of the unknown key (``servers.x.comand``).
            got: the unknown key itself (``comand``).
            allowed: the keys that table takes.
            path: the file, if there is one.
        """
        valid = sorted(allowed)
        close = difflib.get_close_matches(got, valid, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return cls(f"unknown key {got!r}{hint}; valid keys: {', '.join(valid)}", path=path, key=key)


class UntrustedConfig(ConfigError):
    """A project config file whose exact bytes the user has not trusted: nothing was loaded."""


class NotFound(AgentHostError):
    """A name the host does not know: a server, a namespaced tool, a prompt, a resource."""


class AmbiguousResource(NotFound):
    """A resource URI that more than one server could serve, equally well.

    Reading it from the wrong one would hand one server what was meant for another (a
    path, a token in a query), so the host picks none: the caller names the server.
    ``servers`` are the candidates, sorted.
    """

    def __init__(self, message: str, *, uri: str, servers: tuple[str, ...]) -> None:
        super().__init__(message)
        self.uri = uri
        self.servers = servers


class ProtocolError(AgentHostError):
    """Input that is not valid JSON-RPC 2.0 / MCP.

    ``code`` is the JSON-RPC error code that describes the problem (-32700 parse error,
    -32600 invalid request, ...), so a receiver can answer the peer with it.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int = -32600,
        server: str | None = None,
        request_id: int | str | None = None,
    ) -> None:
        self.code = code
        self.server = server
        #: The id of the request the bad input belonged to, when it could be read, so the
        #: receiver can answer that request with an error instead of leaving it unanswered.
        self.request_id = request_id
        super().__init__(f"{server}: {message}" if server else message)


@contextmanager
def server_data(server: str | None, what: str) -> Iterator[None]:
    """Make any failure while processing a server's data that server's error.

    Why: a server we do not trust controls the input, so it controls which exception our
    code (or a parser under it) raises: a YAML document nested 2,000 deep raises
    RecursionError, a crafted value a TypeError. None of them may take down the host, a
    CLI command or an agent run: each becomes a :class:`ProtocolError` naming the server
    and ``what`` was being processed (``skill deep``), which every caller already handles
    as that server's failure. Our own errors pass unchanged; cancellation and interrupts
    (not :class:`Exception`) pass too. The original stays chained as ``__cause__`` for a
    developer; the message holds only its type, never the server's (unbounded) text.
    """
    try:
        yield
    except AgentHostError:
        raise
    except Exception as exc:
        raise ProtocolError(
            f"{what}: the server's data could not be processed ({type(exc).__name__})",
            server=server,
        ) from exc


class UnsupportedRevision(ProtocolError):
    """The server answered with an MCP revision agenthost does not speak.

    ``supported`` keeps the revisions the server named (empty when it named none), so a
    caller deciding whether to fall back to the other era reads a field, not a guess.
    """

    def __init__(
        self,
        message: str,
        *,
        supported: tuple[str, ...] = (),
        code: int = -32600,
        server: str | None = None,
    ) -> None:
        super().__init__(message, code=code, server=server)
        self.supported = supported


class NotModern(ProtocolError):
    """``auto`` found a legacy server (its answer to ``server/discover`` is no modern one)."""


class MRTRLimitExceeded(ProtocolError):
    """The server still asked for input after the configured number of rounds."""


class SchemaRefused(ProtocolError):
    """A JSON Schema from a server that agenthost will not apply, in one line naming what it
    is and why: a ``$ref`` that is not local (it would be a fetch or a file read), a
    pattern RE2 cannot run, a schema over the size or depth bound, an unknown dialect, or
    a check that exceeded its work bound. Code -32602 (invalid params): answering a
    server's request, it is the server's error."""

    def __init__(self, message: str, *, server: str | None = None) -> None:
        super().__init__(message, code=-32602, server=server)


class TaskCancelled(ProtocolError):
    """The server reports a task ``cancelled`` that we did not cancel (someone else did,
    or the server gave up on it): there is no result to wait for."""


class TransportError(AgentHostError):
    """The connection to a server failed."""

    def __init__(self, message: str, *, server: str | None = None):
        self.server = server
        super().__init__(f"{server}: {message}" if server else message)


class TransportClosed(TransportError):
    """The peer closed the connection or its process exited."""


class SessionExpired(TransportClosed):
    """The server no longer knows our session (Streamable HTTP answered 404 to its id).

    The spec's remedy is a new session: a fresh ``initialize`` without the old id. A
    transport cannot do that by itself (the session above it holds the negotiated state),
    so it ends with this error; a supervisor that sees it restarts the session at once,
    without the backoff it applies to crashes, because the server is healthy.
    """


class MessageTooLarge(TransportError):
    """A single message exceeded the configured maximum size."""


class AuthorizationError(TransportError):
    """OAuth for a remote server failed, or needs a person and none is there.

    A transport error because the server cannot be used without it (the CLI exits 5). The
    message names the server and what to do; it never holds a token, code or secret.
    """


class RequestUnauthorized(AuthorizationError):
    """One request refused even after re-authorization: the session stays usable.

    A step-up that gave up (the server still answers ``insufficient_scope`` for the
    scopes just granted), or a fresh token answered with 401 again. Only this request
    fails (other tools may need no more than we hold), so the HTTP transport hands it to
    the waiting caller instead of ending the connection. ``scopes`` are the scopes last
    asked for (empty when none was named).
    """

    def __init__(
        self, message: str, *, server: str | None = None, scopes: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, server=server)
        self.scopes = scopes


class AgentHostTimeout(AgentHostError):
    """An operation took longer than its timeout allowed."""

    def __init__(self, message: str, *, server: str | None = None, timeout: float | None = None):
        self.server = server
        self.timeout = timeout
        super().__init__(f"{server}: {message}" if server else message)


class JSONRPCError(AgentHostError):
    """A JSON-RPC error object, received from a peer or raised by a handler to send one.

    ``message`` and ``data`` are safe to show (a received error has our secrets scrubbed
    out of them, :mod:`agenthost.redaction`); ``raw_data`` is ``data`` as the peer sent
    it, for code that *decides* from it (the revisions a server supports, the capability
    a call lacked): a registered value that happens to appear in it must not change what
    the host does.
    """

    def __init__(
        self,
        code: int,
        message: str,
        data: Any = None,
        *,
        server: str | None = None,
        raw_data: Any = None,
    ) -> None:
        self.code = code
        self.message = message
        self.data = data
        self.raw_data = data if raw_data is None else raw_data
        self.server = server
        prefix = f"{server}: " if server else ""
        super().__init__(f"{prefix}{message} (code {code})")

    @property
    def text(self) -> str:
        """The error as a person reads it: the server and its words, without the code."""
        return f"{self.server}: {self.message}" if self.server else self.message


class ServerUnavailable(AgentHostError):
    """The host has no working session to the server (it is starting, restarting, failed
    or stopped, or went away before answering): the request never ran.

    Not a :class:`JSONRPCError`: no peer answered, so there is no code to report, and a
    caller that handles a server's error answer must not mistake this for one.
    """

    def __init__(self, message: str, *, server: str | None = None) -> None:
        self.server = server
        super().__init__(f"{server}: {message}" if server else message)


class BackChannelRequired(JSONRPCError):
    """A request failed on a 2026-07-28 session because the server's code sent its own
    request (sampling, elicitation, roots) the way the ``initialize`` era does.

    2026-07-28 has no server-to-client requests (asks come back as MRTR), and the
    official Python SDK refuses them with ``NoBackChannelError`` (-32600, "Cannot send
    '<method>': this transport context has no back-channel for server-initiated
    requests."). The server works in the ``initialize`` era; the fix is
    ``protocol = "legacy"`` for it (a host in ``auto`` mode reconnects it so by itself).
    ``code`` and ``data`` are the server's; ``message`` says what happened and the fix.
    """

    def __init__(
        self,
        code: int,
        message: str,
        data: Any = None,
        *,
        server: str | None = None,
        ask: str,
        request: str,
        name: str | None = None,
    ) -> None:
        super().__init__(code, message, data, server=server)
        #: What the server tried to send (``sampling/createMessage`` ...).
        self.ask = ask
        #: The request that failed (``tools/call`` ...) and its tool, prompt or URI.
        self.request = request
        self.name = name


class OutputValidationError(AgentHostError):
    """A tool's structuredContent does not match the outputSchema it declared."""


class ConsentDenied(AgentHostError):
    """The consent policy (or the user) denied an action."""

    def __init__(self, message: str, *, rule: str | None = None) -> None:
        self.rule = rule
        super().__init__(message)


class InvalidAnswer(AgentHostError):
    """A value typed into an elicitation form does not fit the server's requested schema.

    Raised by the form parser so a prompter can say what is wrong and ask again; it never
    reaches the server (an invalid form is not sent).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class ProviderError(AgentHostError):
    """An LLM provider call failed; ``message`` is the provider's own words."""

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status: int | None = None,
        retryable: bool = False,
    ) -> None:
        self.provider = provider
        self.status = status
        self.retryable = retryable
        super().__init__(f"{provider}: {message}" if provider else message)


class UnsupportedContent(ProviderError):
    """The request holds content the chosen model or API cannot take (audio to a text model).

    Raised before anything is sent, so nothing is silently dropped; a sampling service can
    answer the server with "invalid params" or pick another model.
    """


class NoModelAvailable(ProviderError):
    """Model selection found no configured model that satisfies the request's constraints."""
