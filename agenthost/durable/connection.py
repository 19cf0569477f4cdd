"""How the CLI and a worker reach Temporal: the address, the namespace, TLS (a CA to
trust, a client certificate for mTLS, the server's name) and an API key.

Reaching Temporal's port is enough to start runs, answer their questions and read
their transcripts, so a deployment beyond one machine connects with TLS and
authenticates: ``--temporal-tls-*`` / ``--temporal-api-key-file`` on the command line,
else the ``[temporal]`` table of the config (paths relative to its file), with the API
key also from ``TEMPORAL_API_KEY``. The key is never a flag value (``ps`` shows those),
is registered as a secret before anything can print it, and turns TLS on: a key is not
sent in the clear. Any of the TLS settings turns TLS on too.

:func:`resolve` merges the sources (a flag over the environment over the config) and
reads the files, each bad file one line naming it; :meth:`TemporalSettings.connect_args`
is what :func:`temporalio.client.Client.connect` takes. The table also names the
deployment's durable-run key file (``key_file``, :mod:`agenthost.durable.seal`), which
:func:`key_file` reads out of it; it is not part of connecting.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from agenthost.errors import ConfigError
from agenthost.redaction import add_secret

__all__ = ["ENV_ADDRESS", "ENV_API_KEY", "KEYS", "TemporalSettings", "key_file", "resolve"]

ENV_ADDRESS = "AGENTHOST_TEMPORAL"
ENV_API_KEY = "TEMPORAL_API_KEY"
#: The ``[temporal]`` keys that say how to connect, and the flags that set the same
#: (``--temporal-`` + dashes).
KEYS = (
    "address",
    "namespace",
    "tls",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_server_name",
    "api_key_file",
)
#: The ``[temporal]`` keys: those, and the durable-run key file (``--key-file``).
_TABLE_KEYS = (*KEYS, "key_file")
#: A PEM file or API key file this large is no certificate or key.
_FILE_MAX = 1024 * 1024
#: What an API key, a bearer token in a gRPC header, is made of.
_TOKEN = re.compile(r"[\x21-\x7e]+")


@attrs.frozen(kw_only=True)
class TemporalSettings:
    """Where Temporal is and how to connect; files already read."""

    address: str
    namespace: str = "default"
    tls: bool = False
    ca: bytes | None = attrs.field(default=None, repr=False)
    cert: bytes | None = attrs.field(default=None, repr=False)
    key: bytes | None = attrs.field(default=None, repr=False)
    server_name: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False)

    def connect_args(self) -> dict[str, Any]:
        """Keyword arguments of ``Client.connect`` beside the address."""
        from temporalio.service import TLSConfig

        tls: bool | TLSConfig = False
        if self.tls:
            tls = TLSConfig(
                server_root_ca_cert=self.ca,
                client_cert=self.cert,
                client_private_key=self.key,
                domain=self.server_name,
            )
        return {"namespace": self.namespace, "tls": tls, "api_key": self.api_key}


def _read(path: str, what: str, *, pem: str | None) -> bytes:
    try:
        with open(path, "rb") as file:
            data = file.read(_FILE_MAX + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    if len(data) > _FILE_MAX:
        raise ConfigError(f"the {what} {path} is over {_FILE_MAX} bytes")
    if pem is not None and f"-----BEGIN {pem}".encode() not in data:
        raise ConfigError(f"the {what} {path} is not PEM (no '-----BEGIN {pem}' line)")
    return data


def _from_config(table: Mapping[str, Any], source: str | None) -> dict[str, Any]:
    """The ``[temporal]`` table checked: known keys, strings (``tls`` a boolean), and
    paths made absolute against the config file's folder."""
    where = source or "<config>"
    base = Path(source).resolve().parent if source else Path.cwd()
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _TABLE_KEYS:
            raise ConfigError(
                f"unknown key; valid: {', '.join(_TABLE_KEYS)}",
                path=where,
                key=f"temporal.{key}",
            )
        wanted = bool if key == "tls" else str
        if not isinstance(value, wanted) or (wanted is str and not value):
            kind = "true or false" if key == "tls" else "a non-empty string"
            raise ConfigError(f"must be {kind}", path=where, key=f"temporal.{key}")
        if key in ("tls_ca", "tls_cert", "tls_key", "api_key_file", "key_file"):
            value = str(base / os.path.expanduser(str(value)))
        out[key] = value
    return out


def key_file(config: Mapping[str, Any] | None, source: str | None) -> str | None:
    """The ``key_file`` of the ``[temporal]`` table ``config`` of the file ``source``,
    absolute; None when it has none.

    Raises:
        ConfigError: the table has a bad key (one line).
    """
    path = _from_config(config or {}, source).get("key_file")
    return str(path) if path is not None else None


def resolve(
    flags: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    *,
    source: str | None = None,
    env: Mapping[str, str] | None = None,
) -> TemporalSettings:
    """The settings from ``flags`` (the :data:`KEYS`, None when not given), the
    environment, and the ``[temporal]`` table ``config`` of the file ``source``.

    Raises:
        ConfigError: no address, a bad key, or a file that cannot be used (one line).
    """
    environ = os.environ if env is None else env
    merged = _from_config(config or {}, source)
    merged.pop("key_file", None)  # not how to connect: see key_file()
    merged.update({k: v for k, v in flags.items() if v not in (None, False)})
    address = flags.get("address") or environ.get(ENV_ADDRESS) or merged.get("address")
    if not address:
        raise ConfigError(f"give --temporal HOST:PORT (or set {ENV_ADDRESS})")
    api_key = None
    if merged.get("api_key_file"):
        api_key = _read(merged["api_key_file"], "API key file", pem=None).decode().strip()
        if not api_key:
            raise ConfigError(f"the API key file {merged['api_key_file']} is empty")
    elif environ.get(ENV_API_KEY):
        api_key = environ[ENV_API_KEY].strip()
    add_secret(api_key)
    if api_key is not None and not _TOKEN.fullmatch(api_key):
        # A line break or a space inside is no header value: the SDK dropped the key
        # silently and connected unauthenticated.
        origin = merged.get("api_key_file") or ENV_API_KEY
        raise ConfigError(
            f"the API key in {origin} has a space, a line break or another character a"
            " key cannot have (printable ASCII only)"
        )
    if bool(merged.get("tls_cert")) != bool(merged.get("tls_key")):
        raise ConfigError(
            "mTLS takes both a client certificate and its key"
            " (--temporal-tls-cert and --temporal-tls-key, or tls_cert and tls_key)"
        )
    ca = _read(merged["tls_ca"], "CA file", pem="CERTIFICATE") if merged.get("tls_ca") else None
    cert = key = None
    if merged.get("tls_cert"):
        cert = _read(merged["tls_cert"], "client certificate", pem="CERTIFICATE")
        key = _read(merged["tls_key"], "client key", pem="")
    tls = bool(
        merged.get("tls") or ca or cert or merged.get("tls_server_name") or api_key is not None
    )
    return TemporalSettings(
        address=str(address),
        namespace=str(merged.get("namespace") or "default"),
        tls=tls,
        ca=ca,
        cert=cert,
        key=key,
        server_name=merged.get("tls_server_name"),
        api_key=api_key,
    )
