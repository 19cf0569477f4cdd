"""The front channel of the authorization code grant, pure: what the browser is sent to
ask for (:func:`requested_scopes`) and what its redirect brings back, checked against
that request (:func:`authorization_code`).

The redirect's parameters in, the code out, or :class:`ResponseRefused` saying why the
answer is discarded. A mismatch is a CSRF or
mix-up attempt (RFC 6749 10.12, RFC 9207), so nothing in a refused answer is used: not
its code, and not one of two values given for a parameter (``iss=thief&iss=honest``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

__all__ = ["RESPONSE_PARAMETERS", "ResponseRefused", "authorization_code", "requested_scopes"]

#: The parameters of an authorization response (RFC 6749 4.1.2 and 4.1.2.1, RFC 9207).
RESPONSE_PARAMETERS: Final = frozenset(
    {"code", "state", "iss", "error", "error_description", "error_uri"}
)


def requested_scopes(
    scopes: tuple[str, ...] | None, supported: Sequence[str] | None
) -> tuple[str, ...] | None:
    """The scopes to ask for: ``scopes`` (None: the server's default), plus
    ``offline_access`` when the authorization server offers it, so that the login
    brings a refresh token and the person is not sent to the browser again."""
    if not supported or "offline_access" not in supported:
        return scopes
    if scopes is None:
        return ("offline_access",)
    return scopes if "offline_access" in scopes else (*scopes, "offline_access")


class ResponseRefused(ValueError):
    """The authorization response is discarded; the message says why (no secret in it)."""


def authorization_code(
    params: Mapping[str, str],
    *,
    state: str,
    issuer: str,
    iss_required: bool,
    repeated: frozenset[str] = frozenset(),
) -> str:
    """The code of ``params``, once its state, its issuer and its error are checked.

    Args:
        params: the redirect's query parameters (one value each).
        state: the ``state`` the request carried.
        issuer: the authorization server the request went to (its metadata's issuer).
        iss_required: its metadata says ``authorization_response_iss_parameter_supported``.
        repeated: names that appeared more than once in the redirect.

    Raises:
        ResponseRefused: the answer is not this request's, or holds no code.
    """
    if repeated:
        # Only names we know are quoted: the rest are the server's text.
        names = ", ".join(sorted(repeated & RESPONSE_PARAMETERS)) or "a parameter"
        raise ResponseRefused(
            f"the authorization response repeats {names} (discarded: a parameter may appear once)"
        )
    if params.get("state") != state:
        raise ResponseRefused(
            "the authorization response's state does not match the request (discarded)"
        )
    iss = params.get("iss")
    if iss is not None and iss != issuer:
        raise ResponseRefused(
            f"the authorization response came from issuer {iss!r}, not {issuer!r}"
            " (discarded: possible mix-up attack)"
        )
    if iss is None and iss_required:
        raise ResponseRefused(
            "the authorization response lacks the iss parameter its server promises (discarded)"
        )
    if "error" in params:
        description = params.get("error_description")
        raise ResponseRefused(
            f"the authorization server refused: {params['error']}"
            + (f" ({description})" if description else "")
        )
    code = params.get("code")
    if not code:
        raise ResponseRefused("the authorization response holds no code")
    return code
