"""The bearer token of ``agenthost serve --http`` on loopback: one per user, kept 0600.

Loopback is not one person: every local user reaches ``127.0.0.1``, and a gateway without
authentication let another user call the first one's servers (read a 0600 file through
their filesystem server) and answer their consent forms ("always", recorded as theirs).
So loopback needs a token too, unless the user says ``--no-auth``. Without
``AGENTHOST_SERVE_TOKEN`` the gateway uses the one in :func:`token_path` (beside the trust
store, ``$XDG_STATE_HOME/agenthost/serve-token``), made on first use by
:func:`load_or_create` and kept across starts, so a client configured once keeps working.

The file is the user's alone: mode 0600 in a 0700 directory (a folder others may write
is refused: they could swap the file; so is a link to it that another user made), written
whole (a temporary file linked into place, so a concurrent start reads a whole token or
makes none), opened without following a symlink. A file someone else owns, or that others
may read, is refused (the token may be known): one line says to delete it, and the next
start makes a new one. A token the user gives (``AGENTHOST_SERVE_TOKEN``, the token file)
is refused below :data:`MIN_LENGTH` characters, with how to make one.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from agenthost.config.trust import default_trust_path
from agenthost.errors import ConfigError

__all__ = ["MIN_LENGTH", "TOKEN_FILE", "check_given", "load_or_create", "token_path"]

TOKEN_FILE: Final = "serve-token"
#: The shortest token taken. Why characters, not an entropy estimate: nothing can tell a
#: random token from a chosen one; 32 random URL-safe characters are 192 bits, and a
#: token made here (``secrets.token_urlsafe(32)``) is 43 characters, 256 bits.
MIN_LENGTH: Final = 32
#: What a token made here looks like; one the user wrote there may be any URL-safe text
#: of at least :data:`MIN_LENGTH` characters.
_TOKEN = re.compile(rf"[A-Za-z0-9_\-]{{{MIN_LENGTH},256}}")
#: A token given in the environment: printable ASCII without spaces (a header value).
_GIVEN = re.compile(rf"[!-~]{{{MIN_LENGTH},1024}}")
_MAKE_ONE: Final = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
_LARGEST: Final = 1024


def token_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/agenthost/serve-token`` (the state directory the trust store uses)."""
    return default_trust_path(env).with_name(TOKEN_FILE)


def check_given(token: str, variable: str = "AGENTHOST_SERVE_TOKEN") -> None:
    """Refuse a token a person or a script chose that is guessable or unsendable.

    Raises:
        ConfigError: one line naming ``variable`` and how to make a token (never the
            token itself).
    """
    if not _GIVEN.fullmatch(token):
        raise ConfigError(
            f"{variable} must be at least {MIN_LENGTH} characters (printable ASCII, no"
            f" spaces; it has {len(token)}): make one with {_MAKE_ONE}",
            key="serve.http",
        )


def load_or_create(path: Path) -> str:
    """The token in ``path``, made (0600, whole) when there is none.

    Raises:
        ConfigError: the file is not the user's alone, or holds no token.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    link = path.parent.lstat()
    if stat.S_ISLNK(link.st_mode) and link.st_uid != os.geteuid():
        # Another user's link (planted in a shared folder): theirs to re-point later.
        raise ConfigError(
            f"{path.parent} (the token's folder) is a link another user made: delete it"
            " or set XDG_STATE_HOME to a folder of yours alone",
            key="serve.http",
        )
    folder = path.parent.stat()
    if folder.st_uid != os.geteuid():
        # Theirs to swap the file in, and only they may chmod it: the user can go
        # elsewhere, or its owner (or root) can remove it.
        raise ConfigError(
            f"{path.parent} (the token's folder) belongs to another user: set"
            " XDG_STATE_HOME to a folder of yours alone, or have its owner remove it",
            key="serve.http",
        )
    if folder.st_mode & 0o022:
        # Whoever may write the folder may swap the token file for one they know.
        raise ConfigError(
            f"other users may write {path.parent} (the token's folder): make it yours alone"
            f" (chmod 700) or set XDG_STATE_HOME to a folder that is",
            key="serve.http",
        )
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask said
        os.write(fd, token.encode() + b"\n")
        os.fsync(fd)
        os.close(fd)
        try:
            os.link(temporary, path)
        except FileExistsError:  # another start made one first: it is the token
            return _read(path)
    finally:
        os.unlink(temporary)
    return token


def _read(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:  # a symlink (ELOOP), a folder, no permission
        raise ConfigError(
            f"{path} cannot be read as the token file ({exc.strerror}): delete it (a new"
            " token is made at the next start)",
            key="serve.http",
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            raise ConfigError(
                f"{path} is not a file of yours: delete it (a new token is made at the next start)",
                key="serve.http",
            )
        if info.st_mode & 0o077:
            raise ConfigError(
                f"{path} may be read by other users (mode {stat.S_IMODE(info.st_mode):04o}):"
                " delete it (a new token is made at the next start) and update your clients",
                key="serve.http",
            )
        text = os.read(fd, _LARGEST).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if not _TOKEN.fullmatch(text):
        raise ConfigError(
            f"{path} holds no token (32 or more URL-safe characters): delete it (a new one"
            " is made at the next start)",
            key="serve.http",
        )
    return text
