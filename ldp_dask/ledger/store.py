"""The ledger's storage interface: one exclusive transaction primitive, the tables and their schema.

A store (:class:`Store`) is a connection factory whose ``transaction()`` yields a
cursor inside one exclusive transaction; :class:`Tx` runs ``?``-placeholder
queries on it whatever the backend. The SQLite file (:mod:`.sqlite`) and the
PostgreSQL database (:mod:`.postgres`) are the two stores; the rules that use
them are written once, in :class:`ldp_dask.ledger.Ledger`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .._validation import LdpDaskError

__all__ = ["Store", "Tx", "LedgerError", "SCHEMA_VERSION", "MIGRATIONS", "TABLES", "ACTIVE", "check_schema",
           "INDEX_SCHEMA", "INDEX_TABLES", "SQLITE_TYPES", "POSTGRES_TYPES", "migrate"]

SCHEMA_VERSION = "8"


#: Statements that bring a ledger of an earlier schema version to :data:`SCHEMA_VERSION`, applied on opening
#: (version 3 added ``parts``: a partitioned release's charges, one per partition released anew; version 4 the files
#: a release read, where they really lie, and datasets declared append-only; version 5 the states of longitudinal
#: series, :mod:`.memos`; version 6 each release's central events and a dataset's central budget, :mod:`.central`;
#: version 7 the table a release read and whether its charges follow the table's log, :func:`.budget.log_followed`).
_MEMO_STATES = """CREATE TABLE IF NOT EXISTS memo_states (
        series TEXT NOT NULL,
        release_id BIGINT NOT NULL,
        root TEXT NOT NULL,
        epsilon_memo DOUBLE PRECISION NOT NULL,
        epsilon_bits DOUBLE PRECISION,
        nights INTEGER NOT NULL,
        persons BIGINT NOT NULL,
        spread TEXT NOT NULL,
        state BYTEA NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (series, release_id))"""

INDEX_TABLES = ("release_locs", "release_files", "aliased", "release_parts", "root_states", "compositions")

#: ``{text}`` is the column type of a location: compared byte by byte on every backend (a prefix range must not
#: follow a locale's collation)
INDEX_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS release_locs (loc {text} NOT NULL, release_id BIGINT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS release_locs_by_loc ON release_locs (loc, release_id)",
    "CREATE INDEX IF NOT EXISTS release_locs_by_release ON release_locs (release_id)",
    "CREATE TABLE IF NOT EXISTS release_files (file_id TEXT NOT NULL, loc {text} NOT NULL, release_id BIGINT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS release_files_by_id ON release_files (file_id)",
    "CREATE INDEX IF NOT EXISTS release_files_by_release ON release_files (release_id)",
    "CREATE TABLE IF NOT EXISTS aliased (file_id TEXT PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS release_parts (part_key TEXT NOT NULL, tag TEXT, release_id BIGINT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS release_parts_by_key ON release_parts (part_key)",
    "CREATE INDEX IF NOT EXISTS release_parts_by_release ON release_parts (release_id)",
    # a root's standing over its committed releases up to an entry (:mod:`.standing`)
    "CREATE TABLE IF NOT EXISTS root_states (root {text} PRIMARY KEY, upto BIGINT NOT NULL, state TEXT NOT NULL)",
    # the composed central ε a root's receipt stated last, by its events: the next check or receipt of the same
    # events does not run the accountant again (:meth:`.standing.View.central`)
    "CREATE TABLE IF NOT EXISTS compositions (root {text} PRIMARY KEY, events TEXT NOT NULL, "
    "delta DOUBLE PRECISION NOT NULL, epsilon DOUBLE PRECISION NOT NULL)",
    # the entries recovery looks at, few: a partial index (one on every status would lead the planner past the
    # index by release key for the 'committed' lookups)
    "CREATE INDEX IF NOT EXISTS releases_running ON releases (status) WHERE status IN ('reserved', 'publishing')",
]

MIGRATIONS = {"2": ["ALTER TABLE releases ADD COLUMN parts TEXT",
                    "UPDATE ledger_meta SET value='3' WHERE key='schema'"],
              "3": ["ALTER TABLE releases ADD COLUMN files TEXT",
                    "ALTER TABLE datasets ADD COLUMN append_only INTEGER NOT NULL DEFAULT 0",
                    "ALTER TABLE datasets ADD COLUMN fallback TEXT",
                    "UPDATE ledger_meta SET value='4' WHERE key='schema'"],
              "4": [_MEMO_STATES, "UPDATE ledger_meta SET value='5' WHERE key='schema'"],
              "5": ["ALTER TABLE releases ADD COLUMN central TEXT",
                    "ALTER TABLE datasets ADD COLUMN central_epsilon DOUBLE PRECISION",
                    "ALTER TABLE datasets ADD COLUMN central_delta DOUBLE PRECISION",
                    "UPDATE ledger_meta SET value='6' WHERE key='schema'"],
              "6": ["ALTER TABLE releases ADD COLUMN table_log TEXT",
                    "UPDATE ledger_meta SET value='7' WHERE key='schema'"],
              "7": [*INDEX_SCHEMA, "UPDATE ledger_meta SET value='8' WHERE key='schema'"]}

#: the versions whose migration ends by indexing the releases already recorded (:func:`.index.reindex`)
REINDEX_AFTER = {"7"}


def migrate(tx: Tx, version: str, types: dict[str, str], reindex: Callable[[Tx], None]) -> str:
    """Bring a ledger at ``version`` up by one version, in the caller's transaction; the new version. ``reindex``
    (:func:`.index.reindex`) indexes the recorded releases after the migrations of :data:`REINDEX_AFTER`."""
    for stmt in MIGRATIONS[version]:
        tx.run(stmt.format(**types))
    if version in REINDEX_AFTER:
        reindex(tx)
    return str(int(version) + 1)


TABLES = [
    "CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS datasets (
        name TEXT PRIMARY KEY,
        root TEXT NOT NULL UNIQUE,
        epsilon_limit DOUBLE PRECISION NOT NULL,
        privacy_unit TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        append_only INTEGER NOT NULL DEFAULT 0,
        fallback TEXT,
        central_epsilon DOUBLE PRECISION,
        central_delta DOUBLE PRECISION)""",
    """CREATE TABLE IF NOT EXISTS releases (
        id {id},
        created_at DOUBLE PRECISION NOT NULL,
        root TEXT NOT NULL,
        source TEXT,
        column_name TEXT NOT NULL,
        scope TEXT NOT NULL,
        channel TEXT NOT NULL,
        params TEXT NOT NULL,
        privacy_unit TEXT NOT NULL,
        epsilon DOUBLE PRECISION NOT NULL,
        epsilon_requested DOUBLE PRECISION NOT NULL,
        key_id TEXT NOT NULL,
        release_key TEXT NOT NULL,
        content_tag TEXT,
        outputs TEXT NOT NULL,
        token TEXT NOT NULL,
        flow_run_id TEXT,
        parts TEXT,
        files TEXT,
        central TEXT,
        table_log TEXT,
        status TEXT NOT NULL,
        note TEXT,
        host TEXT,
        pid INTEGER,
        lease_until DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS releases_by_root ON releases (root)",
    "CREATE INDEX IF NOT EXISTS releases_by_key ON releases (release_key)",
    _MEMO_STATES,
    *INDEX_SCHEMA,
]

#: the backends' spelling of the schema's placeholders: ``{id}``, an entry number assigned in order, and
#: ``{text}``, a location compared byte by byte
SQLITE_TYPES = {"id": "INTEGER PRIMARY KEY AUTOINCREMENT", "text": "TEXT"}
POSTGRES_TYPES = {"id": "BIGSERIAL PRIMARY KEY", "text": 'TEXT COLLATE "C"'}


ACTIVE = ("reserved", "publishing", "committed")


class LedgerError(LdpDaskError):
    """The ledger cannot be used (empty, corrupt, foreign or unreachable); nothing was run."""


# --- storage: one small adapter per database; the rules above are written once, in Ledger -----------------
class Store:
    """A database connection factory with one exclusive transaction primitive."""

    location: str
    placeholder = "?"

    @contextmanager
    def transaction(self) -> Iterator[Any]:  # pragma: no cover - abstract
        raise NotImplementedError
        yield


class Tx:
    """Queries inside one exclusive transaction, with ``?`` placeholders on every backend."""

    def __init__(self, cursor: Any, placeholder: str) -> None:
        self.cur, self.ph = cursor, placeholder

    def _sql(self, sql: str) -> str:
        return sql if self.ph == "?" else sql.replace("?", self.ph)

    def run(self, sql: str, params: Sequence[Any] = ()) -> Any:
        self.cur.execute(self._sql(sql), tuple(params))
        return self.cur

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cur = self.run(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        rows = self.all(sql, params)
        return rows[0] if rows else None


def check_schema(where: str, tables: set[str], version: str | None) -> None:
    if version == SCHEMA_VERSION and {"datasets", "releases"} <= tables:
        return
    if version is None and "releases" in tables:
        raise LedgerError(f"{where} was written by an earlier ldp_dask, whose budgets followed file layouts; "
                          "start a new ledger (--ledger NEW) and declare each dataset's budget there "
                          "(ldp-dask budget set NAME --source URL --limit ε)")
    if version is not None:
        raise LedgerError(f"{where} has schema version {version!r}; this ldp_dask reads version {SCHEMA_VERSION}")
    raise LedgerError(f"{where} is not an ldp_dask ledger (no ledger tables); it is not re-created, since that "
                      "would forget every recorded release")
