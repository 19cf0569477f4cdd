"""DPoP (RFC 9449; MCP's SEP-1932 extension): tokens bound to a key only we hold.

Pure pieces, no I/O: the key (:class:`DPoPKey`), the proof JWT (:func:`proof`), the
nonces servers hand out (:class:`Nonces`) and the ``use_dpop_nonce`` signals. The OAuth
flow (:mod:`agenthost.auth.flow`, :mod:`agenthost.auth.exchange`) decides when to use
them.

What a hostile server can and cannot make us do:

* sign only our own request: ``htm`` is the request's method and ``htu`` its URL
  without query or fragment, both ours; the only server value a proof carries is a
  nonce of at most :data:`MAX_NONCE` characters of the RFC's ``NQCHAR`` set (anything
  else is ignored, so no retry follows it);
* retry once: one nonce retry per token request and per MCP request, never a loop;
* grow us: at most :data:`MAX_NONCES` nonces per server, the oldest dropped.

The key is ES256 (P-256), one per client at an authorization server, saved with the
tokens (a refresh token bound to it is useless without it). Its private half is never in
a repr, a log record or an error message.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

import httpx
import orjson
from joserfc import jws
from joserfc.jwk import ECKey

from agenthost.auth.discovery import parse_www_authenticate

__all__ = [
    "ALG",
    "MAX_NONCE",
    "MAX_NONCES",
    "DPoPKey",
    "DPoPMode",
    "Nonces",
    "asks_for_nonce",
    "htu",
    "nonce_of",
    "proof",
    "uses_dpop",
    "valid_nonce",
]

#: ``dpop`` of ``[servers.NAME.oauth]``: always, never, or when the server advertises it.
DPoPMode = bool | Literal["auto"]

#: The one algorithm we sign with (RFC 9449 names no default; ES256 is what servers take).
ALG: Final = "ES256"
#: The longest nonce we take from a server (longer ones are ignored).
MAX_NONCE: Final = 256
#: Nonces remembered per server (one per URL we sent a proof to).
MAX_NONCES: Final = 16
# RFC 9449 section 8.1: nonce = 1*NQCHAR, NQCHAR = %x21 / %x23-5B / %x5D-7E.
_NQCHARS = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class DPoPKey:
    """Our DPoP key pair. ``repr`` shows the public thumbprint only."""

    def __init__(self, key: ECKey) -> None:
        self._key = key
        self._private: dict[str, Any] = dict(key.as_dict(private=True))
        self.public_jwk: dict[str, Any] = dict(key.as_dict(private=False))
        self.thumbprint: str = key.thumbprint()

    @classmethod
    def generate(cls) -> DPoPKey:
        return cls(ECKey.generate_key("P-256", private=True))

    @classmethod
    def from_saved(cls, data: Mapping[str, Any]) -> DPoPKey:
        """The key saved by :meth:`saved`.

        Raises:
            ValueError: not a private P-256 key (the caller forgets it and logs in again).
        """
        if data.get("kty") != "EC" or data.get("crv") != "P-256" or not data.get("d"):
            raise ValueError("not a private P-256 key")
        try:
            return cls(ECKey.import_key(dict(data)))
        except Exception:  # joserfc raises several types for a damaged key
            raise ValueError("not a private P-256 key") from None

    def saved(self) -> dict[str, Any]:
        """The private JWK, for the token store (a secret: never log it)."""
        return dict(self._private)

    def matches(self, saved: Mapping[str, Any]) -> bool:
        """Whether ``saved`` is this key (a cheap check before loading it again)."""
        return saved == self._private

    @property
    def secret(self) -> str:
        """The private scalar, for the redactor."""
        return str(self._private["d"])

    def sign(self, claims: Mapping[str, Any]) -> str:
        header = {"typ": "dpop+jwt", "alg": ALG, "jwk": self.public_jwk}
        payload = orjson.dumps(dict(claims))
        return jws.serialize_compact(header, payload, self._key, algorithms=[ALG])

    def __repr__(self) -> str:
        return f"<DPoPKey {self.thumbprint}>"


def htu(url: str | httpx.URL) -> str:
    """The ``htu`` of a request to ``url``: scheme, authority and path; no query or
    fragment (RFC 9449 section 4.2)."""
    parsed = httpx.URL(url) if isinstance(url, str) else url
    return str(parsed.copy_with(query=None, fragment=None))


def proof(
    key: DPoPKey,
    method: str,
    url: str | httpx.URL,
    *,
    access_token: str | None = None,
    nonce: str | None = None,
) -> str:
    """A fresh proof (new ``jti``) for one HTTP request.

    Args:
        access_token: the DPoP-bound token the request carries (``ath``: its hash).
        nonce: the server's latest nonce for this URL, if it gave one.
    """
    claims: dict[str, Any] = {
        "jti": secrets.token_urlsafe(24),
        "htm": method.upper(),
        "htu": htu(url),
        "iat": int(time.time()),
    }
    if access_token is not None:
        claims["ath"] = _b64(hashlib.sha256(access_token.encode("ascii", "replace")).digest())
    if nonce is not None:
        claims["nonce"] = nonce
    return key.sign(claims)


def nonce_of(our_proof: str) -> str | None:
    """The nonce a proof of ours carries (read back from the request it is on: requests
    run concurrently, so the remembered nonce may be newer than the one it was sent with)."""
    try:
        payload = our_proof.split(".")[1]
        claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return None
    nonce = claims.get("nonce") if isinstance(claims, dict) else None
    return nonce if isinstance(nonce, str) else None


def valid_nonce(value: str | None) -> str | None:
    """``value`` if it is a nonce we may put in a proof, else None."""
    if value is None or len(value) > MAX_NONCE or not _NQCHARS.fullmatch(value):
        return None
    return value


class Nonces:
    """The latest nonce each server gave, by ``htu`` (bounded: :data:`MAX_NONCES`)."""

    def __init__(self) -> None:
        self._by_url: OrderedDict[str, str] = OrderedDict()

    def get(self, url: str | httpx.URL) -> str | None:
        return self._by_url.get(htu(url))

    def update(self, url: str | httpx.URL, value: str | None) -> bool:
        """Remember the ``DPoP-Nonce`` a response to ``url`` carried; True when it is a
        usable nonce other than the one remembered (a retry with it can succeed)."""
        nonce = valid_nonce(value)
        if nonce is None:
            return False
        key = htu(url)
        changed = self._by_url.get(key) != nonce
        self._by_url.pop(key, None)
        self._by_url[key] = nonce
        while len(self._by_url) > MAX_NONCES:
            self._by_url.popitem(last=False)
        return changed

    def __len__(self) -> int:
        return len(self._by_url)


def uses_dpop(mode: DPoPMode, algs: Iterable[str] | None) -> bool:
    """Whether to ask an authorization server for DPoP-bound tokens: ``True`` always (a
    server that ignores the proof answers with a Bearer token, refused then); ``"auto"``
    when its metadata lists ES256 in ``dpop_signing_alg_values_supported``."""
    if mode is True:
        return True
    return mode == "auto" and algs is not None and ALG in algs


def asks_for_nonce(challenges: Iterable[str]) -> bool:
    """Whether ``WWW-Authenticate`` values hold a DPoP challenge with
    ``error="use_dpop_nonce"`` (RFC 9449 section 9)."""
    challenge = parse_www_authenticate(challenges, scheme="dpop")
    return challenge is not None and challenge.error == "use_dpop_nonce"
