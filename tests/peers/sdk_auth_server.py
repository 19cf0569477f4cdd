"""An OAuth-protected MCP server and its authorization server, built on the official SDK.

The SDK (``mcp`` 2.x) ships the authorization server's endpoints (metadata, ``/authorize``,
``/token``, ``/register``, PKCE checks, client authentication) and the resource server's
bearer middleware and Protected Resource Metadata; what it leaves to an application is
the *provider*: where clients, codes and tokens live and how a user consents. This file
is that application, the smallest honest one: an in-memory store and a consent page that
a person (in the tests, a browser stand-in) must GET and then POST to approve.

Usage::

    python tests/peers/sdk_auth_server.py --port N [--token-lifetime S] [--fault F]
        [--transport streamable-http|sse] [--certfile PEM --keyfile PEM]

Everything is on ``http://127.0.0.1:N`` (with ``--certfile``/``--keyfile``, on
``https://localhost:N``, the name the test certificates are for): the MCP endpoint
``/mcp`` (scope ``mcp``; with ``--transport sse`` the legacy ``/sse`` + ``/messages/``),
the PRM at ``/.well-known/oauth-protected-resource/mcp`` (or ``.../sse``), the
authorization server at the origin. Faults (for the bad-input tests) change one thing each:

* ``no-s256``: the AS metadata lists only ``plain`` PKCE;
* ``bad-issuer``: the AS metadata names another issuer;
* ``bad-state``: the consent redirect carries a different ``state``;
* ``html-token``: the token endpoint answers with an HTML page;
* ``no-refresh``: every refresh token is refused (``invalid_grant``);
* ``insufficient-scope``: a tool ``admin`` whose every call is answered 403
  ``insufficient_scope`` asking for ``mcp admin``, even with a token that holds both
  (a step-up that cannot help); clients may be granted ``admin``. On ``/mcp`` and, with
  ``--transport sse``, on ``/messages/``;
* ``get-insufficient-scope``: every ``GET /mcp`` (the stream of server-initiated
  messages) is answered so (noted ``insufficient_scope GET``); POSTs are served.

``--dpop MODE`` layers DPoP (RFC 9449) over the SDK, which knows only Bearer
(:class:`DPoPLayer`): the AS metadata advertises ES256 proofs; a token request with a
valid proof gets a token bound to the proof's key (``token_type`` ``DPoP``; its refresh
token too), which the MCP endpoint then takes only as ``Authorization: DPoP`` with a valid
proof of that key. Modes: ``on``; ``nonce`` (the token endpoint and the MCP endpoint each
demand their own nonce, ``use_dpop_nonce``); ``bearer`` (advertised, but the proof is
ignored and a Bearer token issued, as RFC 9449 section 5 allows).

Observations go to ``AGENTHOST_PEER_LOG`` (one line each): ``token <grant_type>``,
``refresh-rotated``, ``consent``, ``wire <method> <path> <status>`` for every request to
the MCP endpoint or ``/messages/`` (what the client put on the wire); with ``--dpop``,
``proof <path> <jwt>`` for every proof received and ``dpop <status> <path>`` for every
answer the layer gave itself.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import secrets
import time
from typing import Any
from urllib.parse import parse_qs, urlencode

import uvicorn
from joserfc import jws
from joserfc.jwk import ECKey
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

SCOPE = "mcp"
ADMIN = "admin"


def secret(value: str) -> str:
    """Record a value that must never appear in agenthost's logs (AGENTHOST_PEER_SECRETS)."""
    path = os.environ.get("AGENTHOST_PEER_SECRETS")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(value + "\n")
    return value


def note(line: str) -> None:
    path = os.environ.get("AGENTHOST_PEER_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


class Provider:
    """The SDK's ``OAuthAuthorizationServerProvider``, in memory, with a consent page."""

    def __init__(self, base: str, lifetime: int, fault: str | None) -> None:
        self.base = base
        self.lifetime = lifetime
        self.fault = fault
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.pending: dict[str, tuple[str, AuthorizationParams]] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        if client_info.client_secret:
            secret(client_info.client_secret)
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        ticket = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.pending[ticket] = (client.client_id, params)
        return f"{self.base}/consent?{urlencode({'ticket': ticket})}"

    def consent_page(self, ticket: str) -> str:
        client_id, params = self.pending[ticket]
        return (
            "<!doctype html><form method=post action=/consent>"
            f"<p>Allow {client_id} the scopes {' '.join(params.scopes or [])}?</p>"
            f"<input type=hidden name=ticket value={ticket}>"
            "<button name=decision value=allow>Allow</button></form>"
        )

    def approve(self, ticket: str) -> str:
        client_id, params = self.pending.pop(ticket)
        code = secret(secrets.token_urlsafe(24))
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="alice",
        )
        note("consent")
        state = "not-the-state-you-sent" if self.fault == "bad-state" else params.state
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    def _issue(
        self, client_id: str, scopes: list[str], resource: str | None, grant: str
    ) -> OAuthToken:
        access = secret(secrets.token_urlsafe(32))
        refresh = secret(secrets.token_urlsafe(32))
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + self.lifetime,
            resource=resource,
            subject="alice",
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource, subject="alice"
        )
        note(f"token {grant}")
        return OAuthToken(
            access_token=access,
            expires_in=self.lifetime,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        assert client.client_id is not None
        return self._issue(
            client.client_id,
            authorization_code.scopes,
            authorization_code.resource,
            "authorization_code",
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        if self.fault == "no-refresh":
            return None
        token = self.refresh.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if self.refresh.pop(refresh_token.token, None) is None:
            raise TokenError("invalid_grant", "refresh token already used")
        note("refresh-rotated")
        assert client.client_id is not None
        scopes = scopes or refresh_token.scopes
        return self._issue(client.client_id, scopes, refresh_token.resource, "refresh_token")

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def exchange_identity_assertion(self, *_args: Any, **_kwargs: Any) -> OAuthToken:
        raise NotImplementedError("this peer does not take identity assertions")

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


class Faults:
    """ASGI middleware for the metadata and token faults (the SDK's routes are fixed)."""

    def __init__(self, app: ASGIApp, base: str, fault: str | None, sse: bool = False) -> None:
        self.app = app
        self.base = base
        self.fault = fault
        self.app_is_sse = sse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        method = scope.get("method")
        mcp_post = method == "POST" and (path == "/mcp" or path.startswith("/messages"))
        if self.fault == "insufficient-scope" and mcp_post:
            await self.insufficient_scope(scope, receive, send)
            return
        if self.fault == "get-insufficient-scope" and method == "GET" and path == "/mcp":
            note("insufficient_scope GET")
            await self.refusal()(scope, receive, send)
            return
        if scope["type"] == "http" and self.fault == "html-token" and path == "/token":
            page = HTMLResponse("<html><body><h1>Sign in</h1></body></html>", status_code=200)
            await page(scope, receive, send)
            return
        if (
            scope["type"] == "http"
            and self.fault in ("no-s256", "bad-issuer")
            and path == "/.well-known/oauth-authorization-server"
        ):
            metadata: dict[str, Any] = {
                "issuer": self.base,
                "authorization_endpoint": f"{self.base}/authorize",
                "token_endpoint": f"{self.base}/token",
                "registration_endpoint": f"{self.base}/register",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
            }
            if self.fault == "no-s256":
                metadata["code_challenge_methods_supported"] = ["plain"]
            else:
                metadata["issuer"] = "http://attacker.invalid"
            await JSONResponse(metadata)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def refusal(self) -> JSONResponse:
        """403 ``insufficient_scope`` asking for ``mcp admin``."""
        resource = "sse" if self.app_is_sse else "mcp"
        challenge = (
            f'Bearer error="insufficient_scope", scope="{SCOPE} {ADMIN}",'
            f' resource_metadata="{self.base}/.well-known/oauth-protected-resource/{resource}"'
        )
        return JSONResponse(
            {"error": "insufficient_scope"},
            status_code=403,
            headers={"WWW-Authenticate": challenge},
        )

    async def insufficient_scope(self, scope: Scope, receive: Receive, send: Send) -> None:
        """403 to every ``tools/call`` of ``admin``; anything else goes on to the SDK."""
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if (
            isinstance(request, dict)
            and request.get("method") == "tools/call"
            and (request.get("params") or {}).get("name") == ADMIN
        ):
            note("insufficient_scope")
            await self.refusal()(scope, receive, send)
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


AS_NONCE = "as-nonce.1"
RS_NONCE = "rs-nonce.1"


def check_proof(proof: str, method: str, url: str, token: str | None) -> tuple[dict[str, Any], str]:
    """The claims and key thumbprint of a valid proof for ``method url`` (RFC 9449 4.3).

    Raises:
        ValueError: saying what is wrong.
    """
    header = jws.extract_compact(proof.encode()).protected
    jwk = header.get("jwk")
    if header.get("typ") != "dpop+jwt" or header.get("alg") != "ES256" or not jwk:
        raise ValueError(f"bad header {header}")
    if "d" in jwk:
        raise ValueError("the proof carries the private key")
    key = ECKey.import_key(jwk)
    claims = json.loads(jws.deserialize_compact(proof, key, algorithms=["ES256"]).payload)
    if claims.get("htm") != method or claims.get("htu") != url:
        raise ValueError(f"htm/htu {claims.get('htm')} {claims.get('htu')} for {method} {url}")
    if not isinstance(claims.get("jti"), str) or abs(time.time() - claims.get("iat", 0)) > 60:
        raise ValueError("jti or iat")
    if token is not None:
        ath = base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=")
        if claims.get("ath") != ath.decode():
            raise ValueError("ath does not match the token")
    return claims, key.thumbprint()


class DPoPLayer:
    """RFC 9449 in front of the SDK's Bearer-only endpoints (see the module doc)."""

    def __init__(self, app: ASGIApp, base: str, mode: str) -> None:
        self.app = app
        self.base = base
        self.mode = mode
        #: Access and refresh tokens -> the thumbprint of the key they are bound to.
        self.bound: dict[str, str] = {}
        self.jtis: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif path == "/.well-known/oauth-authorization-server":
            await self.downstream(scope, receive, send, self.advertise)
        elif path == "/token":
            await self.token(scope, receive, send)
        elif path in ("/mcp", "/sse", "/messages/"):  # the MCP endpoints, legacy SSE's too
            await self.resource(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    @staticmethod
    def advertise(data: dict[str, Any]) -> None:
        data["dpop_signing_alg_values_supported"] = ["ES256"]

    async def refuse(
        self, scope: Scope, receive: Receive, send: Send, status: int, error: str, nonce: str = ""
    ) -> None:
        note(f"dpop {status} {scope['path']} {error}")
        headers = {"DPoP-Nonce": nonce} if nonce else {}
        if status == 401:
            headers["WWW-Authenticate"] = f'DPoP error="{error}", algs="ES256"'
        await JSONResponse({"error": error}, status_code=status, headers=headers)(
            scope, receive, send
        )

    def proof_of(self, scope: Scope) -> str | None:
        values = [v.decode() for k, v in scope["headers"] if k == b"dpop"]
        if values:
            note(f"proof {scope['path']} {values[0]}")
        return values[0] if len(values) == 1 else None

    def fresh(self, claims: dict[str, Any]) -> bool:
        if claims["jti"] in self.jtis:
            return False
        self.jtis.add(claims["jti"])
        return True

    async def token(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_body(receive)
        proof = self.proof_of(scope)
        if proof is None:
            await self.app(scope, replay(body, receive), send)
            return
        try:
            claims, jkt = check_proof(proof, "POST", f"{self.base}/token", None)
        except ValueError as exc:
            await self.refuse(scope, receive, send, 400, f"invalid_dpop_proof: {exc}")
            return
        if not self.fresh(claims):
            await self.refuse(scope, receive, send, 400, "invalid_dpop_proof: replayed")
            return
        if self.mode == "nonce" and claims.get("nonce") != AS_NONCE:
            await self.refuse(scope, receive, send, 400, "use_dpop_nonce", AS_NONCE)
            return
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        refresh = form.get("refresh_token")
        if refresh is not None and self.bound.get(refresh, jkt) != jkt:
            await self.refuse(scope, receive, send, 400, "invalid_grant: another key")
            return

        def bind(data: dict[str, Any]) -> None:
            if self.mode == "bearer" or "access_token" not in data:
                return
            data["token_type"] = "DPoP"
            self.bound[data["access_token"]] = jkt
            if data.get("refresh_token"):
                self.bound[data["refresh_token"]] = jkt

        await self.downstream(scope, replay(body, receive), send, bind)

    async def resource(self, scope: Scope, receive: Receive, send: Send) -> None:
        values = [v.decode() for k, v in scope["headers"] if k == b"authorization"]
        scheme, _, token = (values[0] if values else "").partition(" ")
        if token not in self.bound:
            if scheme.lower() == "bearer":
                note(f"bearer {scope['path']}")
            if scheme.lower() == "dpop":
                await self.refuse(scope, receive, send, 401, "invalid_token")
            else:
                await self.app(scope, receive, send)
            return
        if scheme != "DPoP":
            await self.refuse(scope, receive, send, 401, "invalid_token")  # a downgrade
            return
        proof = self.proof_of(scope)
        try:
            if proof is None:
                raise ValueError("no single DPoP header")
            url = f"{self.base}{scope['path']}"
            claims, jkt = check_proof(proof, scope["method"], url, token)
            if jkt != self.bound[token] or not self.fresh(claims):
                raise ValueError("another key, or a replayed proof")
        except ValueError as exc:
            await self.refuse(scope, receive, send, 401, f"invalid_dpop_proof: {exc}")
            return
        if self.mode == "nonce" and claims.get("nonce") != RS_NONCE:
            await self.refuse(scope, receive, send, 401, "use_dpop_nonce", RS_NONCE)
            return
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"authorization", b"dpop")]
        headers.append((b"authorization", f"Bearer {token}".encode()))
        await self.app(dict(scope, headers=headers), receive, send)

    async def downstream(self, scope: Scope, receive: Receive, send: Send, edit: Any) -> None:
        """Run the SDK, then ``edit`` its JSON answer (a 200) before it leaves."""
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def capture(message: Any) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            else:
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, capture)
        body = b"".join(chunks)
        if start.get("status") == 200:
            data = json.loads(body)
            edit(data)
            body = json.dumps(data).encode()
        headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": start["status"], "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def read_body(receive: Receive) -> bytes:
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the SDK the body already read, then the real events."""
    replayed = False

    async def again() -> Any:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


def build(
    port: int,
    lifetime: int,
    fault: str | None,
    transport: str = "streamable-http",
    dpop: str | None = None,
    tls: bool = False,
) -> ASGIApp:
    base = f"https://localhost:{port}" if tls else f"http://127.0.0.1:{port}"
    endpoint = f"{base}/sse" if transport == "sse" else f"{base}/mcp"
    provider = Provider(base, lifetime, fault)
    server = MCPServer(
        "sdk-auth",
        auth_server_provider=provider,
        # Validated from strings, as the SDK documents: its URL type keeps a path-less
        # issuer without a trailing slash that way (issuer comparison is exact).
        auth=AuthSettings.model_validate(
            {
                "issuer_url": base,
                "resource_server_url": endpoint,
                # Refuse tokens not issued for this resource: checks our RFC 8707 parameter.
                "validate_token_resource": True,
                "required_scopes": [SCOPE],
                "client_registration_options": ClientRegistrationOptions(
                    enabled=True,
                    # The step-up may ask for ADMIN: registration must not be what refuses.
                    valid_scopes=[SCOPE, ADMIN]
                    if fault and "insufficient-scope" in fault
                    else [SCOPE],
                    default_scopes=[SCOPE],
                ),
                "revocation_options": RevocationOptions(enabled=True),
            }
        ),
    )

    @server.tool()
    def echo(message: str) -> str:
        """Echo the message back."""
        return message

    async def consent(request: Request) -> Response:
        if request.method == "GET":
            ticket = request.query_params.get("ticket", "")
            if ticket not in provider.pending:
                return HTMLResponse("unknown ticket", status_code=400)
            return HTMLResponse(provider.consent_page(ticket))
        form = await request.form()
        ticket = str(form.get("ticket", ""))
        if form.get("decision") != "allow" or ticket not in provider.pending:
            return HTMLResponse("denied", status_code=400)
        return RedirectResponse(provider.approve(ticket), status_code=302)

    if fault == "insufficient-scope":

        @server.tool()
        def admin() -> str:
            """Never reached: the fault refuses every call for want of a scope."""
            return "admin"

    server.custom_route("/consent", methods=["GET", "POST"])(consent)
    app: Starlette = server.sse_app() if transport == "sse" else server.streamable_http_app()
    faults = Faults(app, base, fault, sse=transport == "sse")
    return Wire(DPoPLayer(faults, base, dpop) if dpop else faults, endpoint)


class Wire:
    """ASGI middleware noting each request to the MCP endpoint with the status answered."""

    def __init__(self, app: ASGIApp, endpoint: str) -> None:
        self.app = app
        self.path = endpoint.rsplit("/", 1)[1]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (
            path.strip("/") == self.path or path.startswith("/messages")
        ):
            await self.app(scope, receive, send)
            return

        async def noting(message: Any) -> None:
            if message["type"] == "http.response.start":
                note(f"wire {scope['method']} {scope['path']} {message['status']}")
            await send(message)

        await self.app(scope, receive, noting)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-lifetime", type=int, default=3600)
    parser.add_argument("--fault", default=None)
    parser.add_argument(
        "--transport", choices=("streamable-http", "sse"), default="streamable-http"
    )
    parser.add_argument("--dpop", choices=("on", "nonce", "bearer"), default=None)
    parser.add_argument("--certfile", help="serve over TLS with this certificate chain")
    parser.add_argument("--keyfile", help="the private key of --certfile")
    args = parser.parse_args()
    tls = args.certfile is not None
    app = build(args.port, args.token_lifetime, args.fault, args.transport, args.dpop, tls)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        ssl_certfile=args.certfile,
        ssl_keyfile=args.keyfile,
    )


if __name__ == "__main__":
    main()
