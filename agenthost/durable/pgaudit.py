"""The fleet's audit: a PostgreSQL table that every worker appends to.

A durable run's audit lines carry ``run_id`` and ``seq``; activities are at least once,
so the same line may be appended again by a retry on another machine. The table's
primary key is ``(run_id, seq)`` and each insert is ``ON CONFLICT DO NOTHING``: the
database, not a file lock, makes "written once" hold across machines. One machine keeps
the JSONL file (:class:`~agenthost.durable.activities.JsonlAuditSink`).

Each line is sealed with the deployment's key (:func:`~agenthost.durable.seal.seal_line`):
a row already holding the key counts as written only if its line verifies. A forged row
written ahead is replaced by the real line, which then says ``"replaced_unverified"`` with
the digest of the row it replaced.

The DSN may hold a password: it is registered with :mod:`agenthost.redaction` and
only ever shown through :func:`~agenthost.redaction.redact_url`.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from agenthost import redaction
from agenthost.durable.seal import DurableKey, digest, line_verifies, seal_line
from agenthost.errors import AgentHostError
from agenthost.redaction import add_secrets_of_url, redact_url
from agenthost_policies.audit import redact

__all__ = ["DSN_SCHEMES", "PostgresAuditSink", "is_dsn"]

#: What a DSN starts with (a value without one of these is a file path).
DSN_SCHEMES = ("postgresql://", "postgres://")
#: Seconds to connect, and for one statement: a stuck database fails the activity
#: attempt (Temporal retries it) instead of holding a worker thread forever.
CONNECT_TIMEOUT = 10
STATEMENT_TIMEOUT_MS = 30_000

_TABLE = """
CREATE TABLE IF NOT EXISTS agenthost_audit (
    run_id text NOT NULL,
    seq bigint NOT NULL,
    line jsonb NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
)
"""
_INSERT = (
    "INSERT INTO agenthost_audit (run_id, seq, line) VALUES (%s, %s, %s)"
    " ON CONFLICT (run_id, seq) DO NOTHING"
)
_HELD = "SELECT line FROM agenthost_audit WHERE run_id = %s AND seq = %s FOR UPDATE"
_REPLACE = "UPDATE agenthost_audit SET line = %s, written_at = now() WHERE run_id = %s AND seq = %s"


def is_dsn(value: str) -> bool:
    """True for a PostgreSQL connection URI (``postgresql://...``)."""
    return value.startswith(DSN_SCHEMES)


class PostgresAuditSink:
    """Appends audit lines to the ``agenthost_audit`` table, once per ``(run_id, seq)``.

    One connection per worker, opened on first use and opened again after it broke;
    appends from this process's threads take turns on it.
    """

    def __init__(self, dsn: str, *, key: DurableKey) -> None:
        add_secrets_of_url(dsn)
        self._dsn = dsn
        self._key = key
        self._lock = threading.Lock()
        self._conn: Any = None

    def __repr__(self) -> str:
        return f"PostgresAuditSink({redact_url(self._dsn)!r})"

    @property
    def shown(self) -> str:
        """The DSN as it may be printed (password and query values replaced)."""
        return redact_url(self._dsn)

    def append(self, lines: Sequence[Mapping[str, Any]]) -> int:
        """Insert each line whose key holds no verified line yet; returns how many were."""
        if not lines:
            return 0
        import psycopg

        rows = [(str(line["run_id"]), int(line["seq"]), redact(dict(line))) for line in lines]
        with self._lock:
            try:
                conn = self._connection()
                written = 0
                with conn.transaction(), conn.cursor() as cursor:
                    for run_id, seq, line in rows:
                        sealed = json.dumps(seal_line(self._key, line), sort_keys=True)
                        cursor.execute(_INSERT, (run_id, seq, sealed))
                        if cursor.rowcount > 0:
                            written += 1
                            continue
                        cursor.execute(_HELD, (run_id, seq))
                        held = cursor.fetchone()
                        if held is None or line_verifies(self._key, held[0]):
                            continue  # written already (by a retry, or another worker)
                        flagged = seal_line(
                            self._key, {**line, "replaced_unverified": digest(held[0])}
                        )
                        cursor.execute(_REPLACE, (json.dumps(flagged, sort_keys=True), run_id, seq))
                        written += 1
                return written
            except psycopg.Error as exc:
                self._close()
                # psycopg's message may quote the DSN; only its first line, redacted.
                text = str(exc).strip()
                first = text.splitlines()[0] if text else type(exc).__name__
                raise AgentHostError(
                    f"the audit database {self.shown} failed: {redaction.redact(first)}"
                ) from None

    def lines(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The stored lines in (run_id, seq) order; for ``agenthost`` tools and tests."""
        with self._lock:
            conn = self._connection()
            query = "SELECT line FROM agenthost_audit"
            args: tuple[str, ...] = ()
            if run_id is not None:
                query, args = query + " WHERE run_id = %s", (run_id,)
            with conn.transaction(), conn.cursor() as cursor:
                cursor.execute(query + " ORDER BY run_id, seq", args)
                return [dict(row[0]) for row in cursor.fetchall()]

    def close(self) -> None:
        with self._lock:
            self._close()

    def _connection(self) -> Any:
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(
                self._dsn,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT,
                options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
            )
            with self._conn.transaction():
                # Two workers starting at once both create it: serialised by a lock.
                self._conn.execute("SELECT pg_advisory_xact_lock(7412250)")
                self._conn.execute(_TABLE)
        return self._conn

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # a broken connection closes as it can
                conn.close()
