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

Protocol pieces come from Authlib (PKCE challenge, grant URI and token request encoding,
client authentication including ``private_key_jwt`` signed by joserfc); the HTTP goes
through httpx under Trio. State (client registration and tokens, per issuer;
:mod:`agenthost.auth.state`) is saved in a :class:`~agenthost.auth.store.TokenStore` only
once a grant succeeded. Token-request forms and client authentication are built by the
pure functions of :mod:`agenthost.auth.grants`; this module is the driver that sends them.

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
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri, prepare_token_request
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from agenthost.auth.discovery import (
    MAX_DOCUMENT,
    AuthServerMetadata,
    Challenge,
    DiscoveryError,
    ResourceMetadata,
    as_metadata_urls,
    canonical_resource,
    fetch_json,
    parse_www_authenticate,
    prm_urls,
    resource_allowed,
)
from agenthost.auth.grants import JWT_BEARER, client_auth, default_alg, token_form
from agenthost.auth.loopback import URL_OPENER, UrlOpener, open_loopback
from agenthost.auth.settings import OAuthSettings
from agenthost.auth.state import (
    Client,
    IssuerState,
    SavedState,
    Tokens,
    dump_state,
    now,
    parse_state,
)
from agenthost.auth.store import TokenStore, default_token_store
from agenthost.errors import AuthorizationError
from agenthost.redaction import add_secret, redact_url

__all__ = ["MAX_STEP_UPS", "OAuth", "OAuthStatus"]

log = logging.getLogger("agenthost.auth")

#: Scope step-ups per server and process (the spec asks for a bound on retries).
MAX_STEP_UPS: Final = 3
#: Authorization servers remembered per server (a server may move; it must not grow us).
MAX_ISSUERS: Final = 8
_MAX_TEXT: Final = 200


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


class _Redact:
    def __init__(self) -> None:
        self.secrets: set[str] = set()

    def add(self, *values: str | None) -> None:
        for value in values:
            if value and len(value) >= 4:
                self.secrets.add(value)
                # And the process-wide registry: every log record, the CLI's output and
                # errors built from server text are scrubbed of it too.
                add_secret(value)

    def __call__(self, text: str) -> str:
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        text = " ".join(text.split())
        return text[:_MAX_TEXT] + ("..." if len(text) > _MAX_TEXT else "")


class OAuth(httpx.Auth):
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
        self._store = store
        self._opener = opener if opener is not None else URL_OPENER.get()
        self._lock = trio.Lock()
        self._loaded = False
        self._issuers: dict[str, IssuerState] = {}
        self._current: str | None = None
        self._resource: str | None = None
        self._step_ups = 0
        self._tried_scopes: set[frozenset[str]] = set()
        self._redact = _Redact()
        self._redact.add(self.settings.client_secret)

    def __repr__(self) -> str:
        return f"<OAuth {self.server!r} issuer={self._current!r}>"

    # -- helpers

    def _error(self, problem: str, fix: str | None = None) -> AuthorizationError:
        text = f"authorization failed: {self._redact(problem)}"
        if fix:
            text += f"; {fix}"
        return AuthorizationError(text, server=self.server)

    def _login_hint(self) -> str:
        return f"run `agenthost auth login {self.server}`"

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
        if self._loaded:
            return
        self._loaded = True
        raw = await self._storage().load(self.server)
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
        if sent is not None:
            request.headers["Authorization"] = f"Bearer {sent}"
        response = yield request
        for _ in range(2 + MAX_STEP_UPS):
            status = response.status_code
            if status not in (401, 403):
                return
            challenge = parse_www_authenticate(response.headers.get_list("www-authenticate"))
            if status == 401:
                await self._unauthorized(challenge, sent)
            elif challenge is not None and challenge.error == "insufficient_scope":
                if not await self._step_up(challenge, sent):
                    return
            else:
                return
            sent = self._access_token()
            if sent is None:
                return
            request.headers["Authorization"] = f"Bearer {sent}"
            response = yield request

    async def bearer(self) -> str | None:
        """The access token to send now, refreshed first when about to expire; None when
        there is none (then only the auth flow can get one).

        Why public: the lean HTTP path (:mod:`agenthost.transports.lean`) attaches the
        token from this same state and hands a 401/403 back to :meth:`async_auth_flow`.
        """
        return await self._valid_token()

    async def _valid_token(self) -> str | None:
        """The access token to send, refreshed first when it is about to expire."""
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

    async def _step_up(self, challenge: Challenge, sent: str | None) -> bool:
        async with self._lock:
            current = self._access_token()
            if current is not None and current != sent:
                return True
            state = self._state
            wanted = set(challenge.scopes or ())
            if state is not None and state.scopes:
                wanted.update(state.scopes)
            key = frozenset(wanted)
            if self._step_ups >= MAX_STEP_UPS or key in self._tried_scopes:
                log.warning(
                    "%s: the server still answers insufficient_scope (%s); not asking again",
                    self.server,
                    " ".join(sorted(wanted)) or "no scope named",
                )
                return False
            self._step_ups += 1
            shown = " ".join(sorted(wanted))
            log.info("%s: step-up authorization for scopes %s", self.server, shown)
            await self._authorize(challenge, tuple(sorted(wanted)))
            return True

    # -- the flows

    async def _authorize(
        self, challenge: Challenge | None, scopes_override: tuple[str, ...] | None
    ) -> None:
        """Discovery, client identity and a grant; saves the result. Holds the lock."""
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
        if state is None:
            state = IssuerState(token_endpoint=meta.token_endpoint)
        state.token_endpoint = meta.token_endpoint
        state.auth_methods = meta.token_endpoint_auth_methods_supported
        if self.settings.grant == "client_credentials":
            client = self._configured_client(meta)
            assert client is not None
            tokens = await self._token_request(
                meta.token_endpoint,
                client,
                {"grant_type": "client_credentials", "scope": scopes},
                issuer=meta.issuer,
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
                status, doc = await fetch_json(self._http, url)
                log.debug("%s: protected resource metadata %s -> HTTP %d", self.server, url, status)
                if status == 200:
                    prm = ResourceMetadata.from_json(doc)
                    break
            if prm is not None:
                if prm.resource is not None and not resource_allowed(self.url, prm.resource):
                    raise DiscoveryError(
                        f"the protected resource metadata is for {prm.resource!r}, not for"
                        f" {redact_url(self.url)!r} (refused: tokens would go to another resource)"
                    )
                self._resource = prm.resource or canonical_resource(self.url)
                issuer = prm.authorization_servers[0]
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
                else:
                    meta = AuthServerMetadata.legacy_defaults(self.url)
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

    def _configured_client(self, meta: AuthServerMetadata) -> Client | None:
        settings = self.settings
        if not settings.client_id:
            return None
        method = settings.auth_method
        if method is None:
            if settings.client_secret:
                supported = meta.token_endpoint_auth_methods_supported
                method = (
                    "client_secret_post"
                    if supported
                    and "client_secret_basic" not in supported
                    and "client_secret_post" in supported
                    else "client_secret_basic"
                )
            else:
                method = "none"
        return Client(
            client_id=settings.client_id,
            client_secret=settings.client_secret,
            method=method,
            source="config",
        )

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

    async def _register(self, meta: AuthServerMetadata, redirect_uri: str, scopes: Any) -> Client:
        supported = meta.token_endpoint_auth_methods_supported
        if supported is None or "none" in supported:
            method = "none"
        elif "client_secret_basic" in supported:
            method = "client_secret_basic"
        elif "client_secret_post" in supported:
            method = "client_secret_post"
        else:
            method = "none"
        body: dict[str, Any] = {
            "client_name": self.settings.client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": "native",
        }
        if scopes:
            body["scope"] = " ".join(scopes)
        endpoint = meta.registration_endpoint
        assert endpoint is not None
        response, raw = await self._post("registration endpoint", endpoint, json=body)
        data = self._json_object(response, raw, "registration endpoint", endpoint)
        if response.status_code not in (200, 201) or not isinstance(data.get("client_id"), str):
            raise self._error(
                f"client registration at {redact_url(endpoint)} failed (HTTP {response.status_code}"
                f"{self._oauth_error(data)})",
                f"set client_id in [servers.{self.server}.oauth] to use a pre-registered client",
            )
        secret = data.get("client_secret")
        secret = secret if isinstance(secret, str) and secret else None
        self._redact.add(secret)
        granted = data.get("token_endpoint_auth_method")
        if isinstance(granted, str) and granted in (
            "none",
            "client_secret_basic",
            "client_secret_post",
        ):
            method = granted
        if method != "none" and secret is None:
            method = "none"
        log.info("%s: registered a client with %s", self.server, meta.issuer)
        return Client(
            client_id=data["client_id"],
            client_secret=secret,
            method=method,
            redirect_uris=(redirect_uri,),
            source="dcr",
        )

    async def _authorization_code(
        self, meta: AuthServerMetadata, state: IssuerState, scopes: tuple[str, ...] | None
    ) -> tuple[Tokens, Client]:
        opener = self._opener
        if opener is None:
            raise self._error("the server needs a person to log in", self._login_hint())
        if meta.authorization_endpoint is None:
            raise self._error(f"the authorization server {meta.issuer} has no authorize endpoint")
        if (
            scopes is not None
            and meta.scopes_supported
            and "offline_access" in meta.scopes_supported
            and "offline_access" not in scopes
        ):
            scopes = (*scopes, "offline_access")
        elif scopes is None and meta.scopes_supported and "offline_access" in meta.scopes_supported:
            scopes = ("offline_access",)
        async with open_loopback(self.settings.redirect_port) as loopback:
            client = await self._client_for(meta, state, loopback.redirect_uri, scopes)
            verifier = generate_token(64)
            state_value = generate_token(32)
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
            expected_issuer = meta.issuer
            log.info("%s: waiting for the browser login at %s", self.server, redact_url(url))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(opener, self.server, url)
                with trio.move_on_after(self.settings.login_timeout) as waited:
                    params = await loopback.wait()
                nursery.cancel_scope.cancel()
            if waited.cancelled_caught:
                raise self._error(
                    f"no answer from the browser within {self.settings.login_timeout:g} s",
                    self._login_hint() + " and finish the login in the browser",
                )
        code = params.get("code")
        self._redact.add(code)
        if params.get("state") != state_value:
            raise self._error(
                "the authorization response's state does not match the request (discarded)",
                self._login_hint() + " again",
            )
        iss = params.get("iss")
        if iss is not None and iss != expected_issuer:
            raise self._error(
                f"the authorization response came from issuer {iss!r}, not {expected_issuer!r}"
                " (discarded: possible mix-up attack)",
                self._login_hint() + " again",
            )
        if iss is None and meta.authorization_response_iss_parameter_supported:
            raise self._error(
                "the authorization response lacks the iss parameter its server promises"
                " (discarded)",
                self._login_hint() + " again",
            )
        if "error" in params:
            raise self._error(
                f"the authorization server refused: {params['error']}"
                + (f" ({params['error_description']})" if params.get("error_description") else ""),
                self._login_hint() + " again",
            )
        if not code:
            raise self._error("the authorization response holds no code", self._login_hint())
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
        )
        return tokens, client

    async def _workload_jwt(self) -> str:
        """The workload's JWT: configured, or read from its file now (it rotates)."""
        path = self.settings.assertion_file
        if path is None:
            assert self.settings.assertion is not None
            value = self.settings.assertion
        else:
            try:
                value = (await trio.Path(path).read_text("utf-8")).strip()
            except OSError as exc:
                raise self._error(
                    f"cannot read the assertion_file {path!r}: {exc.strerror}",
                    f"check assertion_file in [servers.{self.server}.oauth]",
                ) from None
        self._redact.add(value)
        return value

    async def _id_jag(self, audience: str, scopes: tuple[str, ...] | None) -> str:
        """Cross-app access: exchange the IdP's ID token for an ID-JAG (RFC 8693).

        The ID-JAG names the authorization server (``audience``) and this MCP server
        (``resource``); the authorization server takes it as a jwt-bearer assertion.
        """
        settings = self.settings
        endpoint = settings.idp_token_endpoint
        assert endpoint is not None and settings.id_token is not None
        self._redact.add(settings.id_token, settings.idp_client_secret)
        fields: dict[str, str] = {
            "subject_token": settings.id_token,
            "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
            "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
            "audience": audience,
            "resource": self._resource or canonical_resource(self.url),
        }
        if scopes:
            fields["scope"] = " ".join(scopes)
        body: str = prepare_token_request(
            "urn:ietf:params:oauth:grant-type:token-exchange", **fields
        )
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        if settings.idp_client_id:
            idp_client = Client(
                client_id=settings.idp_client_id,
                client_secret=settings.idp_client_secret,
                method="client_secret_basic" if settings.idp_client_secret else "none",
            )
            body, headers = self._client_auth(idp_client, endpoint, body, headers, "")
        response, raw = await self._post(
            "identity provider", endpoint, content=body.encode(), headers=headers
        )
        data = self._json_object(response, raw, "identity provider token endpoint", endpoint)
        jag = data.get("access_token")
        if response.status_code != 200 or not isinstance(jag, str) or not jag:
            raise self._error(
                f"the identity provider {redact_url(endpoint)} refused the token exchange"
                f" (HTTP {response.status_code}{self._oauth_error(data)})",
                "sign in to your identity provider again and update id_token",
            )
        self._redact.add(jag)
        return jag

    async def _try_refresh(self, state: IssuerState) -> bool:
        """Refresh ``state``'s tokens; False if there is no refresh token or it failed."""
        tokens = state.tokens
        if tokens is None or tokens.refresh_token is None:
            return False
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
            )
        except AuthorizationError as exc:
            log.info("%s: refresh failed: %s", self.server, exc)
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

    async def _token_request(
        self, endpoint: str, client: Client, params: dict[str, Any], *, issuer: str
    ) -> Tokens:
        """POST to the token endpoint with client authentication; parse the answer."""
        grant, body = token_form(params, self._resource)
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        body, headers = self._client_auth(client, endpoint, body, headers, issuer)
        response, raw = await self._post(
            "token endpoint",
            endpoint,
            fix="check your network, then retry",
            content=body.encode(),
            headers=headers,
        )
        data = self._json_object(response, raw, "token endpoint", endpoint)
        if response.status_code != 200:
            error = data.get("error")
            fix = (
                self._login_hint()
                if error == "invalid_grant"
                else f"check the client settings in [servers.{self.server}.oauth]"
            )
            raise self._error(
                f"the token endpoint {redact_url(endpoint)} refused the {grant} request"
                f" (HTTP {response.status_code}{self._oauth_error(data)})",
                fix,
            )
        access = data.get("access_token")
        token_type = data.get("token_type")
        if not isinstance(access, str) or not access:
            raise self._error(f"the token endpoint {redact_url(endpoint)} returned no access_token")
        if not isinstance(token_type, str) or token_type.lower() != "bearer":
            raise self._error(
                f"the token endpoint {redact_url(endpoint)} returned a token of type"
                f" {str(token_type)[:20]!r}, not Bearer"
            )
        refresh = data.get("refresh_token")
        refresh = refresh if isinstance(refresh, str) and refresh else None
        self._redact.add(access, refresh)
        expires_in = data.get("expires_in")
        expires_at = (
            now() + float(expires_in)
            if isinstance(expires_in, (int, float))
            and not isinstance(expires_in, bool)
            and math.isfinite(expires_in)
            and expires_in > 0
            else None
        )
        scope = data.get("scope")
        return Tokens(
            access_token=access,
            refresh_token=refresh,
            expires_at=expires_at,
            scope=scope if isinstance(scope, str) else None,
        )

    def _client_auth(
        self, client: Client, endpoint: str, body: str, headers: dict[str, str], issuer: str
    ) -> tuple[str, dict[str, str]]:
        """:func:`~agenthost.auth.grants.client_auth` with this server's signing key; the
        signed assertion joins the secrets scrubbed from messages."""
        key = alg = None
        if client.method == "private_key_jwt":
            key = self._signing_key()
            alg = self.settings.signing_algorithm or default_alg(key)
        body, headers, assertion = client_auth(
            client, endpoint, body, headers, issuer=issuer, key=key, alg=alg
        )
        self._redact.add(assertion)
        return body, headers

    def _signing_key(self) -> Any:
        from joserfc.jwk import ECKey, OKPKey, RSAKey

        pem = self.settings.private_key
        if not pem:
            raise self._error("private_key_jwt needs a private key", "set private_key_file")
        for kind in (RSAKey, ECKey, OKPKey):
            try:
                return kind.import_key(pem)
            except Exception:  # joserfc raises several types; try the next kind
                continue
        raise self._error(
            "the configured private key is not an RSA, EC or OKP PEM key",
            f"check private_key in [servers.{self.server}.oauth]",
        )

    async def _post(
        self, what: str, endpoint: str, *, fix: str | None = None, **request: Any
    ) -> tuple[httpx.Response, bytes]:
        """POST to an authorization-server endpoint and read the bounded answer.

        Error handling: any httpx error becomes one :class:`AuthorizationError` naming
        ``what`` and the (redacted) endpoint, with only the error's type: httpx's own
        message can quote the request.
        """
        try:
            response = await self._http.post(endpoint, **request)
            return response, await self._bounded(response)
        except httpx.HTTPError as exc:
            raise self._error(
                f"cannot reach the {what} {redact_url(endpoint)}: {type(exc).__name__}", fix
            ) from None

    async def _bounded(self, response: httpx.Response) -> bytes:
        if len(response.content) > MAX_DOCUMENT:
            raise self._error(f"an answer from {redact_url(str(response.url))} is too large")
        return response.content

    def _json_object(
        self, response: httpx.Response, raw: bytes, what: str, url: str
    ) -> dict[str, Any]:
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        try:
            data = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            data = None
        if not isinstance(data, dict):
            raise self._error(
                f"the {what} {redact_url(url)} answered HTTP {response.status_code} with"
                f" {kind or 'no content type'}, not a JSON object",
                "check the server's authorization setup (a proxy or login page may be in the way)",
            )
        return data

    def _oauth_error(self, data: dict[str, Any]) -> str:
        error = data.get("error")
        if not isinstance(error, str):
            return ""
        text = f": {error}"
        description = data.get("error_description")
        if isinstance(description, str) and description:
            text += f": {description}"
        return self._redact(text)

    # -- the login commands

    async def login(self) -> OAuthStatus:
        """Authorize now (``agenthost auth login``): probe the server for its challenge.

        Raises:
            AuthorizationError: discovery or the grant failed; nothing is saved then.
        """
        challenge: Challenge | None = None
        try:
            response = await self._http.post(
                self.url,
                content=b'{"jsonrpc":"2.0","id":0,"method":"ping"}',
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
            )
        except httpx.HTTPError as exc:
            raise self._error(
                f"cannot reach {redact_url(self.url)}: {type(exc).__name__}",
                "check the server's URL",
            ) from None
        if response.status_code in (401, 403):
            challenge = parse_www_authenticate(response.headers.get_list("www-authenticate"))
        async with self._lock:
            await self._load()
            await self._authorize(challenge, None)
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
