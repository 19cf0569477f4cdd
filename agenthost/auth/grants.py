"""The pure half of OAuth: token-request forms and client authentication.

Request bodies and headers built from plain values, with no I/O and no flow state, so
each grant and each client authentication method (RFC 6749 2.3, RFC 7523) can be
checked on its own; :mod:`agenthost.auth.flow` sends what these build.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import quote

from authlib.oauth2.auth import ClientAuth
from authlib.oauth2.rfc6749.parameters import prepare_token_request

from agenthost.auth.state import Client

__all__ = ["JWT_BEARER", "client_auth", "default_alg", "token_form"]

#: The RFC 7523 grant type (ID-JAG and workload identity exchanges).
JWT_BEARER: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def token_form(params: Mapping[str, Any], resource: str | None) -> tuple[str, str]:
    """The grant type and the form body of a token request.

    Empty values are left out, a scope sequence is joined with spaces, and the RFC 8707
    ``resource`` is added when known.
    """
    fields = {k: v for k, v in params.items() if v}
    if isinstance(fields.get("scope"), (tuple, list)):
        fields["scope"] = " ".join(fields["scope"])
    if resource:
        fields["resource"] = resource
    grant = fields.pop("grant_type")
    body: str = prepare_token_request(grant, **fields)
    return grant, body


def client_auth(
    client: Client,
    endpoint: str,
    body: str,
    headers: dict[str, str],
    *,
    issuer: str,
    key: Any = None,
    alg: str | None = None,
) -> tuple[str, dict[str, str], str | None]:
    """``body`` and ``headers`` with ``client``'s authentication at ``endpoint`` added.

    ``key``/``alg``: the signing key and algorithm of a ``private_key_jwt`` client.

    Returns:
        The body, the headers, and the signed client assertion if one was made (a
        secret: the caller scrubs it from messages).
    """
    method = client.method
    if method == "private_key_jwt":
        # Imported here: joserfc's JWT stack costs a quarter second to import, and
        # only private_key_jwt clients need it.
        from authlib.oauth2.rfc7523 import PrivateKeyJWT

        # RFC 7523bis: the audience is the authorization server's issuer identifier.
        signer = PrivateKeyJWT(endpoint, claims={"aud": issuer or endpoint}, alg=alg)
        auth = ClientAuth(client.client_id, key, signer)
        _, headers, body = auth.prepare("POST", endpoint, headers, body)
        assertion = dict(_parse_qs(body)).get("client_assertion")
        body = f"{body}&client_id={quote(client.client_id, safe='')}"
        return body, headers, assertion
    if method == "client_secret_basic":
        # RFC 6749 2.3.1: form-encode both parts before base64.
        user, password = client.client_id, client.client_secret or ""
        pair = f"{quote(user, safe='')}:{quote(password, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        # client_id in the body too: RFC 6749 allows it, and some servers (the official
        # SDK's) look the client up by it before checking the header.
        return f"{body}&client_id={quote(user, safe='')}", headers, None
    auth = ClientAuth(client.client_id, client.client_secret, method)
    _, headers, body = auth.prepare("POST", endpoint, headers, body)
    return body, headers, None


def default_alg(key: Any) -> str:
    from joserfc.jwk import ECKey, OKPKey

    if isinstance(key, ECKey):
        curve = key.curve_name
        return {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}.get(curve, "ES256")
    if isinstance(key, OKPKey):
        return "EdDSA"
    return "RS256"


def _parse_qs(body: str) -> Iterable[tuple[str, str]]:
    from urllib.parse import parse_qsl

    return parse_qsl(body, keep_blank_values=True)
