"""A TLS front for a Temporal server on 127.0.0.1 (the dev server serves no TLS).

It terminates TLS with a ``trustme`` certificate for ``localhost`` and ``127.0.0.1``
(with ``mtls``, a client certificate the same CA issued is required) and forwards the
bytes to the plain server. On the way it reads the client's HTTP/2 HEADERS frames
(``hpack``) and records every ``authorization`` value: a test sees the API key reach
the server as gRPC metadata, and sees it never sent when the handshake failed.

Usage::

    with TlsFront("127.0.0.1:7233", ca, mtls=True) as front:
        ...  # connect to 127.0.0.1:{front.port}; front.authorizations, front.handshakes
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from typing import Any

import hpack
import trustme

__all__ = ["TlsFront"]

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HEADERS, _CONTINUATION = 0x1, 0x9
_END_HEADERS, _PADDED, _PRIORITY = 0x4, 0x8, 0x20


class _Headers:
    """Reads the header blocks of one client's HTTP/2 byte stream."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen
        self.buffer = b""
        self.preface = False
        self.block = b""
        self.decoder = hpack.Decoder()

    def feed(self, data: bytes) -> None:
        self.buffer += data
        if not self.preface:
            if len(self.buffer) < len(_PREFACE):
                return
            self.buffer, self.preface = self.buffer[len(_PREFACE) :], True
        while len(self.buffer) >= 9:
            length = int.from_bytes(self.buffer[:3], "big")
            kind, flags = self.buffer[3], self.buffer[4]
            if len(self.buffer) < 9 + length:
                return
            payload, self.buffer = self.buffer[9 : 9 + length], self.buffer[9 + length :]
            if kind == _HEADERS:
                if flags & _PADDED:
                    payload = payload[1 : len(payload) - payload[0]]
                if flags & _PRIORITY:
                    payload = payload[5:]
                self.block = payload
            elif kind == _CONTINUATION:
                self.block += payload
            else:
                continue
            if flags & _END_HEADERS:
                for name, value in self.decoder.decode(self.block, raw=True):
                    if name.lower() == b"authorization":
                        self.seen.append(value.decode("latin-1"))
                self.block = b""


class TlsFront:
    """See the module docstring."""

    def __init__(self, upstream: str, ca: trustme.CA, *, mtls: bool = False) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("localhost", "127.0.0.1").configure_cert(self.context)
        self.context.set_alpn_protocols(["h2"])
        if mtls:
            self.context.verify_mode = ssl.CERT_REQUIRED
            ca.configure_trust(self.context)
        self.authorizations: list[str] = []
        #: Connections whose TLS handshake succeeded.
        self.handshakes = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="tls-front", daemon=True)

    def __enter__(self) -> TlsFront:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the TLS front did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(
            self._client, "127.0.0.1", 0, ssl=self.context, ssl_handshake_timeout=10
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.handshakes += 1
        headers = _Headers(self.authorizations)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, read: Any) -> None:
            with contextlib.suppress(OSError, ConnectionError, asyncio.IncompleteReadError):
                while data := await src.read(65536):
                    if read is not None:
                        read(data)
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(OSError, ConnectionError):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, headers.feed), pipe(up_reader, writer, None))
