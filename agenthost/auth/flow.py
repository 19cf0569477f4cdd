"""OAuth 2.1 for one remote MCP server, as an ``httpx.Auth`` the HTTP transports use.

What happens, per the MCP authorization spec (2025-11-25; 2026-07-28 unchanged here):

* Every request carries ``Authorization: Bearer <token>`` once we have one; a token about
  to expire is refreshed first (rotation honoured: a new refresh token replaces the old).
* A 401: refresh if we can; else discovery (:mod:`agenthost.auth.discovery`), a client
  identity (configured client, Client ID Metadata Document, Dynamic Client Registration, in
  that order), and a grant: authorization code + PKCE S256 through a browser and the
  loopback redirect when a person is there (:data:`~agenthost.auth.loopback.URL_OPENER`),
  or client credentials when configured. Headless without credentials fails with an
  :class:`~agenthost.errors.AuthorizationError` naming the server and the login command.
* A 403 ``insufficient_scope``: step-up to the union of the scopes asked so far and the
  challenge's; never twice for the same scope set, and at most :data:`MAX_STEP_UPS` times.
* ``resource`` (RFC 8707) on every authorization and token request; ``iss`` (RFC 9207)
  checked against the issuer recorded before the browser was opened.
* DPoP (RFC 9449, SEP-1932; ``dpop`` in the settings): tokens bound to a key saved with
  them, sent as ``Authorization: DPoP`` with a fresh proof per request; a
  ``use_dpop_nonce`` refusal is retried once with the server's nonce
  (:mod:`agenthost.auth.dpop`; the sending side in :mod:`agenthost.auth.exchange`).

Protocol pieces come from Authlib (PKCE challenge, grant URI and token request encoding,
client authentication including ``private_key_jwt`` signed by joserfc); the HTTP goes
through httpx under Trio. State (client registration and tokens, per issuer;
:mod:`agenthost.auth.state`) is saved in a :class:`~agenthost.auth.store.TokenStore` only
once a grant succeeded. Token-request forms and client authentication are built by the
pure functions of :mod:`agenthost.auth.grants`, the browser's request and the check of its
answer by :mod:`agenthost.auth.authorize`; what goes to the authorization server's
endpoints (the issuer pin, bounded answers, one deadline per exchange) is
:mod:`agenthost.auth.exchange`; this module is the driver that orders the steps.

Secrets: access and refresh tokens, codes, verifiers, client secrets and assertions are
never put in a log record, an exception message or a repr; text from the authorization
server that is quoted in an error is scrubbed of every secret we know.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncGenerator
from typing import Any, Final
from urllib.parse import urlsplit

import attrs
import httpx
import orjson
import trio
from authlib.common.security import generate_token
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from agenthost._util import collapse_single_group
from agenthost.auth.authorize import ResponseRefused, authorization_code, requested_scopes
from agenthost.auth.discovery import (
    AuthServerMetadata,
    Challenge,
    DiscoveryError,
    ResourceMetadata,
    as_metadata_urls,
    canonical_resource,
    check_outward,
    fetch_json,
    parse_www_authenticate,
    prm_urls,
    resource_allowed,
    same_origin,
)
from agenthost.auth.dpop import Nonces
from agenthost.auth.exchange import Exchange, Redactor
from agenthost.auth.grants import JWT_BEARER
from agenthost.auth.loopback import URL_OPENER, UrlOpener, open_loopback
from agenthost.auth.settings import OAuthSettings
from agenthost.auth.state import (
    Client,
    IssuerState,
    SavedState,
    Tokens,
    dump_state,
    parse_state,
)
from agenthost.auth.store import TOKEN_STORE, TokenStore, default_token_store, process_lock
from agenthost.errors import AuthorizationError, RequestUnauthorized
from agenthost.redaction import redact_url
from agenthost.transports._httpx import RENEWED, failure_name

__all__ = ["MAX_STEP_UPS", "OAuth", "OAuthStatus"]

log = logging.getLogger("agenthost.auth")

#: Scope step-ups per server and process (the spec asks for a bound on retries).
MAX_STEP_UPS: Final = 3
#: Authorization servers remembered per server (a server may move; it must not grow us).
MAX_ISSUERS: Final = 8


@attrs.frozen(kw_only=True)
class OAuthStatus:
    """What ``agenthost auth status`` shows for a server. Holds no secret."""

    server: str
    issuer: str | None
    logged_in: bool
    expires_at: float | None = None
    scopes: tuple[str, ...] = ()
    refreshable: bool = False
    client: str | None = None


class OAuth(Exchange, httpx.Auth):
    """OAuth for one server: give it to the ``httpx.AsyncClient`` of the MCP transport.

    Args:
        server: the server's name (in messages and the store key).
        url: the MCP endpoint.
        settings: ``[servers.NAME.oauth]``.
        http: a client for the authorization server's endpoints (never this one's own);
            not closed here.
        store: where state persists; default :func:`default_token_store`.
        opener: shows the authorization URL to a person; default the context's
            :data:`URL_OPENER` (None: headless).

    Cancellation: every network step is cancellable; a login waits at most
    ``settings.login_timeout`` for the browser.
    """

    requires_request_body = False
    requires_response_body = False

    def __init__(
        self,
        *,
        server: str,
        url: str,
        settings: OAuthSettings | None = None,
        http: httpx.AsyncClient,
        store: TokenStore | None = None,
        opener: UrlOpener | None = None,
    ) -> None:
        self.server = server
        self.url = url
        self.settings = settings or OAuthSettings()
        self._http = http
        self._store = store if store is not None else TOKEN_STORE.get()
        self._opener = opener if opener is not None else URL_OPENER.get()
        self._lock = trio.Lock()
        self._loaded = False
        self._issuers: dict[str, IssuerState] = {}
        self._current: str | None = None
        self._resource: str | None = None
        self._step_ups = 0
        self._tried_scopes: set[frozenset[str]] = set()
        #: True during ``auth login``: the user may move to another authorization server.
        self._relogin = False
        #: The last token request was refused (HTTP 400/401), not merely failed.
        self._refused = False
        #: The deadline of the exchange under way (:meth:`_deadline`).
        self._exchange: trio.CancelScope | None = None
        self._nonces = Nonces()
        self._dpop_loaded = None
        settings = self.settings
        self._redact = Redactor(
            settings.client_secret,
            settings.assertion,
            settings.id_token,
            settings.idp_client_secret,
            settings.private_key,
        )

    def __repr__(self) -> str:
        return f"<OAuth {self.server!r} issuer={self._current!r}>"

    # -- helpers

    def _storage(self) -> TokenStore:
        if self._store is None:
            self._store = default_token_store()
        return self._store

    @property
    def _state(self) -> IssuerState | None:
        return self._issuers.get(self._current) if self._current else None

    def _access_token(self) -> str | None:
        state = self._state
        return state.tokens.access_token if state and state.tokens else None

    # -- persistence

    async def _load(self) -> None:
        """Read the saved state, once. ``_loaded`` is set only after the read, with no
        await between it and the state being in: a caller that sees it set (the lock-free
        path of :meth:`_valid_token`) finds the state there, and a read cancelled half way
        is done again by the next caller. Not under the lock in :meth:`status`: a read
        that finishes after another caller's is dropped (that one may have moved on)."""
        if not self._loaded:
            self._adopt(await self._storage().load(self.server))

    def _adopt(self, raw: str | None) -> None:
        if self._loaded:
            return
        self._loaded = True
        if not raw:
            return
        try:
            saved = parse_state(raw, self.url)
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
            saved = None
            log.warning("%s: ignoring unreadable saved authorization state", self.server)
        if saved is None:  # unreadable, or another server URL's (not for this resource)
            return
        self._issuers.update(saved.issuers)
        self._current = saved.current
        pin = self.settings.issuer
        if pin is not None and self._current is not None and self._current != pin:
            # Saved under another issuer than the one now configured: never refresh
            # there with the configured credentials.
            self._current = None
        self._resource = saved.resource
        for state in self._issuers.values():
            if state.client:
                self._redact.add(state.client.client_secret)
            if state.tokens:
                self._redact.add(state.tokens.access_token, state.tokens.refresh_token)

    async def _save(self) -> None:
        saved = SavedState(issuers=self._issuers, current=self._current, resource=self._resource)
        await self._storage().save(self.server, dump_state(self.url, saved))

    # -- the httpx.Auth hook

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        sent = await self._valid_token()
        self._present(request, sent, self._state)
        response = yield request
        if self._nonce_retry(request, response, self._state):
            response = yield request
        # This request got a fresh token (here, or on the lean path before it came to
        # httpx): a 401 to it is final.
        renewed = request.extensions.get(RENEWED) is True
        for _ in range(2 + MAX_STEP_UPS):
            challenges = response.headers.get_list("www-authenticate")
            if not await self.refused(response.status_code, challenges, sent, renewed=renewed):
                return
            renewed = True
            sent = self._access_token()
            if sent is None:
                return
            self._present(request, sent, self._state)
            response = yield request
            if self._nonce_retry(request, response, self._state):
                response = yield request

    async def refused(
        self, status: int, challenges: list[str], sent: str | None, *, renewed: bool
    ) -> bool:
        """Act on the server's answer to a request that carried ``sent``: True when the
        request is to go again with the token now held (a login, refresh or step-up
        happened, or another request's did); False when the answer is final.

        Why public: the lean HTTP path (:mod:`agenthost.transports.lean`) hands us its
        refused response here, so the server sees it once (it used to go again through
        httpx just to reach :meth:`async_auth_flow`). ``renewed``: this request already
        went again with a fresh token.

        Raises:
            RequestUnauthorized: this request alone is refused for good (a fresh token
                refused too, a step-up that cannot help).
            AuthorizationError: no token can be had (login needed, discovery failed).
        """
        if status not in (401, 403):
            return False
        challenge = parse_www_authenticate(challenges)
        if status == 401:
            if renewed:
                # At most one fresh token per request: a server that refuses every
                # one must not cost a token request per retry (it was 5 per request).
                raise RequestUnauthorized(
                    "the server refused the access token its authorization server"
                    f" just issued (HTTP 401): log in again ({self._login_hint()}),"
                    " or ask the server's operator about its authorization setup",
                    server=self.server,
                )
            await self._unauthorized(challenge, sent)
        elif challenge is not None and challenge.error == "insufficient_scope":
            await self._step_up(challenge, sent)
        else:
            return False
        return self._access_token() is not None

    async def bearer(self) -> str | None:
        """The access token to send now, refreshed first when about to expire; None when
        there is none (then only the auth flow can get one); ``""`` for a DPoP-bound
        token (each request needs a proof of its own: only the auth flow sends it).

        Public: the lean HTTP path attaches the token and hands a 401/403 to :meth:`refused`.
        """
        if (now := self.bearer_now())[0]:
            return now[1]
        token = await self._valid_token()
        state = self._state
        return "" if token and state and state.tokens and state.tokens.dpop else token

    def bearer_now(self) -> tuple[bool, str | None]:
        """``(True, bearer())`` when that needs no wait, else ``(False, None)``: the lean
        path starts a request without yielding (bench: "HTTP JSON calls/s, 1 in flight")."""
        if not self._loaded or self._lock.locked():
            return False, None
        state = self._state
        tokens = state.tokens if state is not None else None
        if tokens is None or not tokens.expiring():
            return True, None if tokens is None else ("" if tokens.dpop else tokens.access_token)
        return False, None

    async def _valid_token(self) -> str | None:
        """The access token to send, refreshed first when it is about to expire."""
        if self._loaded and not self._lock.locked():  # no lock (a checkpoint): as bearer_now
            state = self._state
            if state is None or state.tokens is None:
                return None
            if not state.tokens.expiring():
                return self._access_token()
        async with self._lock:
            await self._load()
            state = self._state
            if state is None or state.tokens is None:
                return None
            if state.tokens.expiring() and not await self._try_refresh(state):
                if self.settings.grant == "authorization_code":
                    return None
                await self._authorize(None, None)
            return self._access_token()

    async def _unauthorized(self, challenge: Challenge | None, sent: str | None) -> None:
        async with self._lock:
            await self._load()
            current = self._access_token()
            if current is not None and current != sent:
                return  # another request already got a fresh token
            state = self._state
            if sent is not None and state is not None and await self._try_refresh(state):
                return
            await self._authorize(challenge, None)

    async def _step_up(self, challenge: Challenge, sent: str | None) -> None:
        """Re-authorize for the scopes ``challenge`` asks more; once per scope set.

        Raises:
            RequestUnauthorized: giving up (the scopes were asked for already, the bound
                is reached, or the re-authorization failed): this request fails alone.
        """
        async with self._lock:
            current = self._access_token()
            if current is not None and current != sent:
                return
            state = self._state
            wanted = set(challenge.scopes or ())
            if state is not None and state.scopes:
                wanted.update(state.scopes)
            key = frozenset(wanted)
            scopes = tuple(sorted(wanted))
            shown = " ".join(scopes) or "(no scope named)"
            if self._step_ups >= MAX_STEP_UPS or key in self._tried_scopes:
                log.warning(
                    "%s: the server still answers insufficient_scope (%s); not asking again",
                    self.server,
                    shown,
                )
                raise RequestUnauthorized(
                    f"the server refuses this request without scope {shown} even after"
                    f" re-authorization (insufficient_scope); {self._login_hint()}"
                    " with an account allowed that scope",
                    server=self.server,
                    scopes=scopes,
                )
            self._step_ups += 1
            log.info("%s: step-up authorization for scopes %s", self.server, shown)
            try:
                await self._authorize(challenge, scopes)
            except RequestUnauthorized:
                raise
            except AuthorizationError as exc:
                reason = str(exc).removeprefix(f"{self.server}: ")
                raise RequestUnauthorized(
                    f"step-up to scope {shown} failed: {reason}",
                    server=self.server,
                    scopes=scopes,
                ) from None

    # -- the flows

    async def _authorize(
        self, challenge: Challenge | None, scopes_override: tuple[str, ...] | None
    ) -> None:
        """Discovery, client identity and a grant; saves the result. Holds the lock."""
        with self._deadline("the login"):
            await self._authorize_now(challenge, scopes_override)

    async def _authorize_now(
        self, challenge: Challenge | None, scopes_override: tuple[str, ...] | None
    ) -> None:
        meta, prm = await self._discover(challenge)
        if scopes_override is not None:
            scopes: tuple[str, ...] | None = scopes_override
        elif challenge is not None and challenge.scopes:
            scopes = challenge.scopes
        elif prm is not None and prm.scopes_supported:
            scopes = prm.scopes_supported
        else:
            scopes = None
        if self.settings.scopes:
            scopes = tuple(dict.fromkeys((*(scopes or ()), *self.settings.scopes)))
        state = self._issuers.get(meta.issuer)
        if state is None or state.token_endpoint != meta.token_endpoint:
            # A registered client is bound to the endpoint it was registered for: metadata
            # that moves the token endpoint gets a fresh registration, never the old secret.
            state = IssuerState(token_endpoint=meta.token_endpoint)
        state.token_endpoint = meta.token_endpoint
        state.auth_methods = meta.token_endpoint_auth_methods_supported
        key = self._dpop_key(state, meta)
        if self.settings.grant == "client_credentials":
            client = self._configured_client(meta)
            assert client is not None
            tokens = await self._token_request(
                meta.token_endpoint,
                client,
                {"grant_type": "client_credentials", "scope": scopes},
                issuer=meta.issuer,
                dpop=key,
            )
        elif self.settings.grant == "enterprise":
            client = self._configured_client(meta)
            assert client is not None
            assertion = await self._id_jag(meta.issuer, scopes)
            tokens = await self._token_request(
                meta.token_endpoint,
                client,
                {"grant_type": JWT_BEARER, "assertion": assertion, "scope": scopes},
                issuer=meta.issuer,
                dpop=key,
            )
        elif self.settings.grant == "jwt_bearer":
            # Workload identity (RFC 7523): one try; a refusal is final, never retried
            # with another grant.
            client = self._configured_client(meta)
            assert client is not None
            workload = await self._workload_jwt()
            tokens = await self._token_request(
                meta.token_endpoint,
                client,
                {"grant_type": JWT_BEARER, "assertion": workload, "scope": scopes},
                issuer=meta.issuer,
                dpop=key,
            )
        else:
            tokens, client = await self._authorization_code(meta, state, scopes)
        state.client = client
        state.tokens = tokens
        state.scopes = scopes
        self._issuers.pop(meta.issuer, None)  # re-inserted last: the most recent
        self._issuers[meta.issuer] = state
        self._current = meta.issuer
        while len(self._issuers) > MAX_ISSUERS:
            oldest = next(issuer for issuer in self._issuers if issuer != meta.issuer)
            del self._issuers[oldest]
        if scopes:
            self._tried_scopes.add(frozenset(scopes))
        await self._save()
        log.info(
            "%s: authorized by %s%s",
            self.server,
            meta.issuer,
            f" (scopes: {' '.join(scopes)})" if scopes else "",
        )

    async def _discover(
        self, challenge: Challenge | None
    ) -> tuple[AuthServerMetadata, ResourceMetadata | None]:
        try:
            prm: ResourceMetadata | None = None
            for url in prm_urls(self.url, challenge):
                check_outward(self.url, url, "the challenge's resource_metadata")
                status, doc = await fetch_json(self._http, url)
                log.debug("%s: protected resource metadata %s -> HTTP %d", self.server, url, status)
                if status == 200:
                    prm = ResourceMetadata.from_json(doc)
                    break
            if prm is not None:
                if prm.resource is not None and not resource_allowed(
                    self.url, prm.resource, fetched_from=url
                ):
                    raise DiscoveryError(
                        f"the protected resource metadata is for {prm.resource!r}, not for"
                        f" {redact_url(self.url)!r} (refused: tokens would go to another resource)"
                    )
                self._resource = prm.resource or canonical_resource(self.url)
                if prm.resource is not None:
                    self._check_audience(prm.resource)
                issuer = self._choose_issuer(prm.authorization_servers)
                self._check_issuer(issuer)
                if issuer != self.settings.issuer:  # a pinned one is the user's choice
                    check_outward(self.url, issuer, "the authorization server")
                for url in as_metadata_urls(issuer):
                    status, doc = await fetch_json(self._http, url)
                    log.debug("%s: AS metadata %s -> HTTP %d", self.server, url, status)
                    if status == 200:
                        meta = AuthServerMetadata.from_json(doc, expected_issuer=issuer)
                        break
                else:
                    raise DiscoveryError(f"no authorization server metadata found for {issuer}")
            else:
                # 2025-03-26: the MCP server's origin is the authorization server.
                self._resource = canonical_resource(self.url)
                parts = urlsplit(self.url)
                url = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server"
                status, doc = await fetch_json(self._http, url)
                if status == 200:
                    meta = AuthServerMetadata.from_json(doc, expected_issuer=None)
                    if not same_origin(meta.issuer, self.url):
                        # Else the document at the server's origin could claim to be any
                        # authorization server (the one a secret is pinned to) while
                        # naming endpoints of its own choosing.
                        raise DiscoveryError(
                            f"the authorization server metadata at {redact_url(url)} names"
                            f" the issuer {meta.issuer!r}, not one at the server's origin"
                            " (refused: a mismatched issuer is how mix-up attacks work)"
                        )
                else:
                    meta = AuthServerMetadata.legacy_defaults(self.url)
                self._check_issuer(meta.issuer)
            if meta.issuer != self.settings.issuer:
                for endpoint in (meta.token_endpoint, meta.registration_endpoint):
                    if endpoint is not None:
                        check_outward(self.url, endpoint, "its endpoint")
        except DiscoveryError as exc:
            raise self._error(str(exc), "check the server's URL, or ask its operator") from None
        if self.settings.grant == "authorization_code" and "S256" not in (
            meta.code_challenge_methods_supported or ()
        ):
            raise self._error(
                f"the authorization server {meta.issuer} does not support PKCE with S256"
                " (code_challenge_methods_supported); refusing to authorize with it",
                "ask the server's operator to enable PKCE S256",
            )
        return meta, prm

    async def _client_for(
        self, meta: AuthServerMetadata, state: IssuerState, redirect_uri: str, scopes: Any
    ) -> Client:
        """Client identity in the spec's order: configured, CIMD, a saved or new DCR."""
        configured = self._configured_client(meta)
        if configured is not None:
            return configured
        url = self.settings.client_metadata_url
        if url and meta.client_id_metadata_document_supported:
            method = "private_key_jwt" if self.settings.private_key else "none"
            return Client(client_id=url, method=method, source="cimd")
        saved = state.client
        if saved is not None and saved.source == "dcr" and redirect_uri in saved.redirect_uris:
            return saved
        if meta.registration_endpoint is None:
            raise self._error(
                f"the authorization server {meta.issuer} offers no client registration",
                f"register a client with it and set client_id in [servers.{self.server}.oauth]",
            )
        return await self._register(meta, redirect_uri, scopes)

    async def _authorization_code(
        self, meta: AuthServerMetadata, state: IssuerState, scopes: tuple[str, ...] | None
    ) -> tuple[Tokens, Client]:
        opener = self._opener
        if opener is None:
            raise self._error("the server needs a person to log in", self._login_hint())
        if meta.authorization_endpoint is None:
            raise self._error(f"the authorization server {meta.issuer} has no authorize endpoint")
        scopes = requested_scopes(scopes, meta.scopes_supported)
        # The loopback's nursery would wrap our one-line errors in an ExceptionGroup.
        with collapse_single_group():
            return await self._authorization_code_at(meta, state, scopes, opener)

    async def _authorization_code_at(
        self,
        meta: AuthServerMetadata,
        state: IssuerState,
        scopes: tuple[str, ...] | None,
        opener: UrlOpener,
    ) -> tuple[Tokens, Client]:
        state_value = generate_token(32)
        async with open_loopback(self.settings.redirect_port, state=state_value) as loopback:
            client = await self._client_for(meta, state, loopback.redirect_uri, scopes)
            verifier = generate_token(64)
            self._redact.add(verifier)
            url = prepare_grant_uri(
                meta.authorization_endpoint,
                client.client_id,
                "code",
                redirect_uri=loopback.redirect_uri,
                scope=" ".join(scopes) if scopes else None,
                state=state_value,
                code_challenge=create_s256_code_challenge(verifier),
                code_challenge_method="S256",
                resource=self._resource,
            )
            log.info("%s: waiting for the browser login at %s", self.server, redact_url(url))
            exchange = self._exchange
            if exchange is not None:
                exchange.deadline = math.inf  # the person's time is login_timeout's
            async with trio.open_nursery() as nursery:
                nursery.start_soon(opener, self.server, url)
                with trio.move_on_after(self.settings.login_timeout) as waited:
                    params = await loopback.wait()
                nursery.cancel_scope.cancel()
            if exchange is not None:
                exchange.deadline = trio.current_time() + self.settings.exchange_timeout
            if waited.cancelled_caught:
                ignored = (
                    f" ({loopback.ignored} answer(s) not for this login, by their state,"
                    " were ignored)"
                    if loopback.ignored
                    else ""
                )
                raise self._error(
                    f"no answer from the browser within {self.settings.login_timeout:g} s"
                    + ignored,
                    self._login_hint() + " and finish the login in the browser",
                )
        self._redact.add(params.get("code"))
        try:
            code = authorization_code(
                params,
                state=state_value,
                issuer=meta.issuer,
                iss_required=bool(meta.authorization_response_iss_parameter_supported),
                repeated=loopback.repeated,
            )
        except ResponseRefused as exc:
            raise self._error(str(exc), self._login_hint() + " again") from None
        tokens = await self._token_request(
            meta.token_endpoint,
            client,
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": loopback.redirect_uri,
                "code_verifier": verifier,
            },
            issuer=meta.issuer,
            dpop=self._dpop_key(state, meta),
        )
        return tokens, client

    async def _try_refresh(self, state: IssuerState) -> bool:
        """Refresh ``state``'s tokens; False if there is no refresh token or it failed.

        Under the cross-process lock of this server's saved state: another process may
        have refreshed (and spent the refresh token) meanwhile; then its tokens are taken.
        """
        tokens = state.tokens
        if tokens is None or tokens.refresh_token is None:
            return False
        with self._deadline("the refresh"):
            async with process_lock(self.server):
                if await self._adopt_saved(state):
                    return True
                return await self._refresh_locked(state, tokens)

    async def _adopt_saved(self, state: IssuerState) -> bool:
        """Take the saved tokens of the current issuer if another process saved newer ones."""
        raw = await self._storage().load(self.server)
        try:
            saved = parse_state(raw, self.url) if raw else None
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
            saved = None
        entry = saved.issuers.get(self._current) if saved and self._current else None
        fresh = entry.tokens if entry else None
        if fresh is None or state.tokens is None:
            return False
        if fresh.access_token == state.tokens.access_token or fresh.expiring():
            return False
        self._redact.add(fresh.access_token, fresh.refresh_token)
        state.tokens = fresh
        log.info("%s: took the tokens another process refreshed", self.server)
        return True

    async def _refresh_locked(self, state: IssuerState, tokens: Tokens) -> bool:
        assert tokens.refresh_token is not None
        client = state.client
        if client is None:
            client = self._configured_client(
                AuthServerMetadata(
                    issuer=self._current or "",
                    authorization_endpoint=None,
                    token_endpoint=state.token_endpoint,
                    token_endpoint_auth_methods_supported=state.auth_methods,
                )
            )
        if client is None and self.settings.client_metadata_url:
            client = Client(client_id=self.settings.client_metadata_url, source="cimd")
        if client is None:
            return False
        try:
            fresh = await self._token_request(
                state.token_endpoint,
                client,
                {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token},
                issuer=self._current or "",
                dpop=self._dpop_key(state, None),
            )
        except AuthorizationError as exc:
            log.info("%s: refresh failed: %s", self.server, exc)
            if not self._refused:
                # Unreachable, too slow, a garbled answer: the saved login may still be
                # good; never replace it with an empty one for that.
                raise
            state.tokens = None
            await self._save()
            if self._opener is None and self.settings.grant == "authorization_code":
                raise self._error(
                    "the saved login expired and could not be refreshed", self._login_hint()
                ) from None
            return False
        if fresh.refresh_token is None:
            fresh.refresh_token = tokens.refresh_token  # no rotation: keep the old one
        if fresh.scope is None:
            fresh.scope = tokens.scope
        state.tokens = fresh
        await self._save()
        log.info("%s: access token refreshed", self.server)
        return True

    # -- the login commands

    async def login(self) -> OAuthStatus:
        """Authorize now (``agenthost auth login``): probe the server for its challenge.

        Raises:
            AuthorizationError: discovery or the grant failed; nothing is saved then.
        """
        with self._deadline("the login"):
            return await self._login()

    async def _login(self) -> OAuthStatus:
        challenge: Challenge | None = None
        try:
            # Streamed and never read: only the status and the challenge matter.
            async with self._http.stream(
                "POST",
                self.url,
                content=b'{"jsonrpc":"2.0","id":0,"method":"ping"}',
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
            ) as response:
                status = response.status_code
                values = response.headers.get_list("www-authenticate")
        except httpx.HTTPError as exc:
            raise self._error(
                f"cannot reach {redact_url(self.url)}: {failure_name(exc)}",
                "check the server's URL",
            ) from None
        if status in (401, 403):
            challenge = parse_www_authenticate(values)
        async with self._lock:
            await self._load()
            self._relogin = True
            try:
                await self._authorize(challenge, None)
            finally:
                self._relogin = False
        return await self.status()

    async def status(self) -> OAuthStatus:
        """What is saved for this server (no network)."""
        await self._load()
        state = self._state
        tokens = state.tokens if state else None
        return OAuthStatus(
            server=self.server,
            issuer=self._current,
            logged_in=tokens is not None,
            expires_at=tokens.expires_at if tokens else None,
            scopes=tuple((tokens.scope or "").split()) if tokens else (),
            refreshable=bool(tokens and tokens.refresh_token),
            client=(state.client.source if state and state.client else None),
        )

    async def logout(self) -> bool:
        """Forget everything saved for this server; True if there was something."""
        self._issuers.clear()
        self._current = None
        self._loaded = True
        return await self._storage().delete(self.server)
