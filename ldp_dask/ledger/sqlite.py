"""The ledger's SQLite store: one file, created whole, checked on opening, migrated from earlier schemas.

Writers serialise on ``BEGIN IMMEDIATE``; readers see the last committed
state. An empty, corrupt or foreign file is refused with one line; only a path
that does not exist yet starts a new ledger.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .index import reindex
from .store import MIGRATIONS, SCHEMA_VERSION, SQLITE_TYPES, TABLES, LedgerError, Store, Tx, check_schema, migrate

__all__ = ["SQLiteStore"]


class SQLiteStore(Store):
    def __init__(self, path: str | os.PathLike[str]) -> None:
        # absolute: a relative path used from another directory would silently start a second ledger; the
        # receipts print where the ledger is
        self.path = Path(os.path.abspath(os.fspath(path)))
        self.location = str(self.path)
        if self.path.exists():
            self._check()
        else:
            self._create()

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60, isolation_level=None)

    def _create(self) -> None:
        """Build the schema in a temporary file and link it into place: a new ledger appears whole or not at all."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.new-{uuid.uuid4().hex}")
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            for stmt in TABLES:
                con.execute(stmt.format(**SQLITE_TYPES))
            con.execute("INSERT INTO ledger_meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        finally:
            con.close()
        try:
            os.link(tmp, self.path)
        except FileExistsError:  # another process created it first: use theirs
            pass
        except OSError:  # a file system without hard links: rename, unless another process was first
            if not self.path.exists():
                os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)
        self._check()

    def _check(self) -> None:
        where = f"the ledger {self.location!r}"
        if self.path.is_dir():
            raise LedgerError(f"{where} is a directory; give the path of a ledger file")
        if self.path.stat().st_size == 0:
            raise LedgerError(f"{where} is empty (0 bytes): it was truncated or is not a ledger. It is not "
                              "re-created, since that would forget every recorded release; restore it from a backup")
        try:
            con = self._connect()
            try:
                con.execute("BEGIN IMMEDIATE")  # a migration by another process is seen whole
                names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                version = None
                if "ledger_meta" in names:
                    row = con.execute("SELECT value FROM ledger_meta WHERE key='schema'").fetchone()
                    version = row[0] if row else None
                while version in MIGRATIONS and {"datasets", "releases"} <= names:  # one version at a time
                    version = migrate(Tx(con.cursor(), "?"), version, SQLITE_TYPES, reindex)
                    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                con.execute("COMMIT")
            finally:
                con.close()
        except sqlite3.DatabaseError:
            raise LedgerError(f"{where} is not a readable SQLite ledger (corrupt or another kind of file); it is "
                              "not re-created, since that would forget every recorded release") from None
        check_schema(where, names, version)

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")  # SQLite's write lock: one ledger transaction at a time
            try:
                yield Tx(con.cursor(), "?")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"the ledger {self.location!r} failed: {exc}") from None
        finally:
            con.close()
