"""The ledger's PostgreSQL store (``--ledger postgresql://user:password@host:5432/db``).

The same tables and rules as the SQLite file (:mod:`ldp_dask.ledger.sqlite`); what
differs is how one transaction excludes the others: every ledger transaction
starts with ``LOCK TABLE … IN EXCLUSIVE MODE`` on both tables, which
serialises ledger writers (as SQLite's ``BEGIN IMMEDIATE`` does) while plain
readers of other applications are not blocked. Needs ``psycopg`` 3
(``pip install 'ldp_dask[postgres]'``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .index import reindex
from .store import MIGRATIONS, POSTGRES_TYPES, SCHEMA_VERSION, TABLES, LedgerError, Store, Tx, check_schema, migrate

__all__ = ["PostgresStore", "public_url"]

#: pg_advisory_xact_lock key taken while the schema is created (two first uses at once)
_SCHEMA_LOCK = 7_120_114_001


def public_url(url: str) -> str:
    """The URL without its password (what logs, errors and receipts show)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class PostgresStore(Store):
    placeholder = "%s"

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise LedgerError("a postgresql:// ledger needs psycopg 3: pip install 'ldp_dask[postgres]'") from None
        self._psycopg = psycopg
        self.url = url
        self.location = public_url(url)
        where = f"the ledger {self.location!r}"
        with self._connection() as con, con.transaction():
            cur = con.cursor()
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
            names = {r[0] for r in cur.fetchall()}
            if not names & {"ledger_meta", "datasets", "releases"}:  # a new ledger in this database
                for stmt in TABLES:
                    cur.execute(stmt.format(**POSTGRES_TYPES))
                cur.execute("INSERT INTO ledger_meta VALUES ('schema', %s)", (SCHEMA_VERSION,))
                return
            row = None
            if "ledger_meta" in names:
                cur.execute("SELECT value FROM ledger_meta WHERE key = 'schema'")
                row = cur.fetchone()
            found = row[0] if row else None
            # an earlier schema: brought up to date
            while isinstance(found, str) and found in MIGRATIONS and {"datasets", "releases"} <= names:
                found = migrate(Tx(cur, self.placeholder), found, POSTGRES_TYPES, reindex)  # one version at a time
            check_schema(where, names, found)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        try:
            con = self._psycopg.connect(self.url, connect_timeout=30)
        except self._psycopg.Error as exc:
            # psycopg's message names the host and the failure, never the password
            raise LedgerError(f"cannot reach the ledger {self.location!r}: {' '.join(str(exc).split())}") from None
        try:
            yield con
        finally:
            con.close()

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        with self._connection() as con:
            try:
                with con.transaction():
                    cur = con.cursor()
                    cur.execute("LOCK TABLE datasets, releases IN EXCLUSIVE MODE")
                    yield Tx(cur, self.placeholder)
            except self._psycopg.Error as exc:
                raise LedgerError(f"the ledger {self.location!r} failed: {' '.join(str(exc).split())}") from None
