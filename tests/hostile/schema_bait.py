"""Bait for a JSON Schema loader: a loopback HTTP listener and a file that count every read.

Why: a server's schema with ``$ref: http://...`` or ``$ref: file://...`` must never make
the host fetch or read anything. A negative ("zero fetches") is only worth something when
the counter is known to count, so each bait also has a positive control: the test fetches
the URL, or reads the file, on purpose and sees the count move.

The file is a FIFO: whoever opens it for reading unblocks the writer thread, which counts
the open and writes a schema. A regular file's access time is not reliable (``noatime``).
"""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["BAIT_SCHEMA", "FileBait", "HttpBait"]

#: What either bait answers with: a schema every object fits, so a fetch succeeds quietly.
BAIT_SCHEMA = json.dumps({"type": "object"}).encode()


class HttpBait:
    """An HTTP listener on 127.0.0.1 answering every GET with :data:`BAIT_SCHEMA`."""

    def __init__(self) -> None:
        self.hits = 0
        bait = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                bait.hits += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/schema+json")
                self.send_header("Content-Length", str(len(BAIT_SCHEMA)))
                self.end_headers()
                self.wfile.write(BAIT_SCHEMA)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/schema.json"

    def __enter__(self) -> HttpBait:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class FileBait:
    """A FIFO at ``path``: each open for reading is counted and gets :data:`BAIT_SCHEMA`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reads = 0
        self._closing = False
        os.mkfifo(path)
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return self.path.as_uri()

    def _serve(self) -> None:
        while True:
            with open(self.path, "wb") as fifo:  # blocks until someone opens it to read
                if self._closing:
                    return
                self.reads += 1
                fifo.write(BAIT_SCHEMA)
            self._wait_for_the_reader_to_leave()

    def _wait_for_the_reader_to_leave(self) -> None:
        # Reopened at once, the FIFO would hand the same reader a second copy (it reads to
        # EOF, and there is a writer again): wait until no reader has it open.
        while not self._closing:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: nobody has it open for reading
                return
            os.close(fd)
            time.sleep(0.01)

    def read_on_purpose(self) -> bytes:
        """The positive control: read the bait ourselves (counted like anyone's read)."""
        return self.path.read_bytes()  # the writer counts before it writes, so before EOF

    def __enter__(self) -> FileBait:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing = True
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)  # unblock the writer's open
        try:
            self._thread.join(5)  # the reader stays open until the writer has seen it
        finally:
            os.close(fd)
