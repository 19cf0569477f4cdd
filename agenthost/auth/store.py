"""Where OAuth state lives between runs: the OS keyring, or a 0600 file when there is none.

A store holds one opaque string per key (the state of one server, as JSON: its client
registration and tokens per authorization server issuer). Keeping the interface that
small makes it easy to replace (a vault, a secrets manager, a test's dictionary) and
matches what a keyring offers anyway. The stores never log what they hold.

Blocking work (the keyring talks D-Bus or a system service; files are files) runs in a
worker thread, so a store never blocks the Trio loop.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import os
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

import trio

if TYPE_CHECKING:
    from agenthost.auth.loopback import UrlOpener

__all__ = [
    "TOKEN_STORE",
    "FileTokenStore",
    "KeyringTokenStore",
    "MemoryTokenStore",
    "TokenStore",
    "auth_context",
    "data_dir",
    "default_token_store",
    "process_lock",
]

log = logging.getLogger("agenthost.auth")

SERVICE: Final = "agenthost"
_SAFE_KEY = re.compile(r"[A-Za-z0-9_.-]{1,128}\Z")


#: The store OAuth flows use when none is given: ``connect(token_store=...)`` and
#: ``open_host(token_store=...)`` set it for their block; unset: :func:`default_token_store`.
TOKEN_STORE: contextvars.ContextVar[TokenStore | None] = contextvars.ContextVar(
    "agenthost_token_store", default=None
)


@runtime_checkable
class TokenStore(Protocol):
    """A place for one secret string per key. Implement it to keep tokens elsewhere."""

    async def load(self, key: str) -> str | None:
        """The value saved under ``key``, or None."""
        ...

    async def save(self, key: str, value: str) -> None:
        """Save ``value`` under ``key``, replacing what was there."""
        ...

    async def delete(self, key: str) -> bool:
        """Forget ``key``; True if something was deleted."""
        ...


class MemoryTokenStore:
    """A store in a dictionary: for tests and for processes that must persist nothing."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"<MemoryTokenStore keys={sorted(self.values)}>"

    async def load(self, key: str) -> str | None:
        return self.values.get(key)

    async def save(self, key: str, value: str) -> None:
        self.values[key] = value

    async def delete(self, key: str) -> bool:
        return self.values.pop(key, None) is not None


def data_dir() -> Path:
    """``$XDG_DATA_HOME/agenthost`` (default ``~/.local/share/agenthost``)."""
    base = os.environ.get("XDG_DATA_HOME") or ""
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "share"
    return root / "agenthost"


@asynccontextmanager
async def process_lock(key: str) -> AsyncIterator[None]:
    """Hold the lock of ``key`` across processes (an advisory ``flock`` on a file in
    ``data_dir()/locks``) for a read-refresh-save of the saved state: two processes that
    refresh one login at once would otherwise both spend the same refresh token, and the
    loser would save an empty login over the winner's good one.

    Cancellation: waiting polls every 20 ms, so the caller's deadline bounds it. Where
    ``flock`` does not exist (Windows) no lock is taken.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path = FileTokenStore(data_dir() / "locks")._path(key).with_suffix(".lock")

    def open_lock() -> int:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    fd = await trio.to_thread.run_sync(open_lock)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await trio.sleep(0.02)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _encode(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))


class FileTokenStore:
    """One file per key, mode 0600, in a 0700 directory (default ``data_dir()/tokens``).

    Writes go to a temporary file created 0600 and renamed over the old one, so a crash
    never leaves a half-written or briefly world-readable file.
    """

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or data_dir() / "tokens"

    def __repr__(self) -> str:
        return f"<FileTokenStore {str(self.directory)!r}>"

    def _path(self, key: str) -> Path:
        """The key's file: the key itself when it is a plain name, else percent-encoded
        (a server name may hold a space, a slash, ``..``); a plain name never holds
        ``%``, so two keys never share a file."""
        if _SAFE_KEY.match(key) and not key.startswith("."):
            return self.directory / f"{key}.json"
        if not key or len(key) > 256:
            raise ValueError("a token store key must be 1 to 256 characters")
        name = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else _encode(c) for c in key)
        if len(name) > 200:  # file names stop at 255 bytes
            name = "%" + hashlib.sha256(key.encode()).hexdigest()
        return self.directory / f"{name}.json"

    async def load(self, key: str) -> str | None:
        path = self._path(key)
        try:
            return await trio.to_thread.run_sync(path.read_text, "utf-8")
        except FileNotFoundError:
            return None

    async def save(self, key: str, value: str) -> None:
        await trio.to_thread.run_sync(self._write, self._path(key), value)

    def _write(self, path: Path, value: str) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(value)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, path)

    async def delete(self, key: str) -> bool:
        path = self._path(key)

        def unlink() -> bool:
            try:
                path.unlink()
            except FileNotFoundError:
                return False
            return True

        return await trio.to_thread.run_sync(unlink)


class KeyringTokenStore:
    """The OS keyring (macOS Keychain, Windows Credential Locker, Secret Service...).

    Entries are ``service="agenthost"``, ``username=<key>``.
    """

    def __init__(self, service: str = SERVICE) -> None:
        self.service = service

    def __repr__(self) -> str:
        return f"<KeyringTokenStore service={self.service!r}>"

    async def load(self, key: str) -> str | None:
        import keyring

        value: str | None = await trio.to_thread.run_sync(keyring.get_password, self.service, key)
        return value

    async def save(self, key: str, value: str) -> None:
        import keyring

        await trio.to_thread.run_sync(keyring.set_password, self.service, key, value)

    async def delete(self, key: str) -> bool:
        import keyring
        import keyring.errors

        def delete() -> bool:
            try:
                keyring.delete_password(self.service, key)
            except keyring.errors.PasswordDeleteError:
                return False
            return True

        return await trio.to_thread.run_sync(delete)


def _keyring_usable() -> bool:
    """True when a real keyring backend is there (not the "fail" or null backends)."""
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:  # pragma: no cover - keyring is a dependency
        return False
    try:
        backend = keyring.get_keyring()
    except Exception:  # a broken keyring config means "no keyring"
        return False
    name = type(backend).__module__
    if isinstance(backend, fail.Keyring) or name.startswith("keyring.backends.null"):
        return False
    if name.startswith("keyrings.alt") or "plaintext" in type(backend).__name__.lower():
        # keyrings.alt keeps secrets in a file, as text or under a password it asks for
        # on the terminal: not an OS keyring. The 0600 file store is no worse and honest.
        log.info("token store: %s is not an OS keyring; using files", type(backend).__name__)
        return False
    priority = getattr(backend, "priority", 1)
    return isinstance(priority, (int, float)) and priority > 0


def default_token_store() -> TokenStore:
    """The OS keyring when one exists, else a :class:`FileTokenStore` under the data dir.

    ``AGENTHOST_TOKEN_STORE=file`` forces the file store (CI, containers, tests).
    """
    choice = os.environ.get("AGENTHOST_TOKEN_STORE", "").lower()
    if choice != "file" and _keyring_usable():
        return KeyringTokenStore()
    log.debug("token store: files under %s", data_dir() / "tokens")
    return FileTokenStore()


@contextmanager
def auth_context(
    token_store: TokenStore | None = None, url_opener: UrlOpener | None = None
) -> Iterator[None]:
    """Within the block, OAuth flows keep their logins in ``token_store`` and show a login
    URL with ``url_opener`` (each None: left as it is). What ``connect()`` and
    ``open_host()`` use for their ``token_store``/``url_opener`` arguments; the tasks a
    block starts inherit it (context variables)."""
    from agenthost.auth.loopback import URL_OPENER

    store_token = TOKEN_STORE.set(token_store) if token_store is not None else None
    opener_token = URL_OPENER.set(url_opener) if url_opener is not None else None
    try:
        yield
    finally:
        if opener_token is not None:
            URL_OPENER.reset(opener_token)
        if store_token is not None:
            TOKEN_STORE.reset(store_token)
