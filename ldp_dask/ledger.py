"""Privacy budget ledger: every release recorded, per-dataset budgets enforced atomically.

A SQLite file (``LDP_DASK_LEDGER``, ``--ledger PATH``; the CLI defaults to
``~/.ldp_dask/ledger.sqlite``) holds one row per release: dataset fingerprint
(structural, see :mod:`ldp_dask.source`), column, scope (``local`` or
``central``), channel and parameters, ε, key identifier (never the key),
output path, time, flow run id and status.

* **Atomic enforcement.** :meth:`Ledger.reserve` runs inside ``BEGIN IMMEDIATE``
  (SQLite's write lock): it adds up what the dataset-and-column has spent in
  that scope — committed releases and live reservations — and refuses, before
  any work starts, a release that would exceed the budget, with a message
  showing what was spent and what remains. Concurrent flows cannot overspend.
* **Re-runs are free.** A release with the same fingerprint, column, channel,
  parameters and key id as a committed one reproduces the same output (the
  noise is keyed), so it spends nothing; with a new secret it spends again.
* **Crashes leave no entry.** A reservation becomes a release only on
  :meth:`Ledger.commit` after the output is written; an exception aborts it,
  and reservations of processes that no longer exist are dropped.
* Local and central releases are accounted separately (two scopes).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ._validation import LdpDaskError

__all__ = ["Ledger", "Reservation", "BudgetExceeded", "default_ledger_path", "SCOPES", "open_ledger"]

SCOPES = ("local", "central")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS releases (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    fingerprint TEXT NOT NULL,
    dataset TEXT,
    column_name TEXT NOT NULL,
    scope TEXT NOT NULL,
    channel TEXT NOT NULL,
    params TEXT NOT NULL,
    epsilon REAL NOT NULL,
    key_id TEXT NOT NULL,
    release_key TEXT NOT NULL,
    output TEXT,
    flow_run_id TEXT,
    status TEXT NOT NULL,
    host TEXT,
    pid INTEGER
);
CREATE INDEX IF NOT EXISTS releases_by_dataset ON releases (fingerprint, column_name, scope);
CREATE TABLE IF NOT EXISTS budgets (
    fingerprint TEXT NOT NULL,
    column_name TEXT NOT NULL,
    scope TEXT NOT NULL,
    dataset TEXT,
    epsilon_limit REAL NOT NULL,
    PRIMARY KEY (fingerprint, column_name, scope)
);
"""


class BudgetExceeded(LdpDaskError):
    """A release would exceed the budget of its dataset and column."""


def default_ledger_path() -> Path:
    """``$LDP_DASK_LEDGER``, else ``~/.ldp_dask/ledger.sqlite``."""
    env = os.environ.get("LDP_DASK_LEDGER")
    return Path(env) if env else Path.home() / ".ldp_dask" / "ledger.sqlite"


@dataclass(frozen=True)
class Reservation:
    """A pending (or reused) release; ``id`` is None when an identical release was already committed."""

    id: int | None
    epsilon: float
    reused: bool
    spent_before: float
    limit: float | None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Ledger:
    """The ledger in one SQLite file (created on first use)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.executescript(_SCHEMA)

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            yield con
        finally:
            con.close()

    # --- budgets ------------------------------------------------------------------------------------------
    def set_budget(self, fingerprint: str, column: str, scope: str, limit: float, dataset: str | None = None) -> None:
        """Set (or replace) the ε budget of a dataset-and-column in a scope."""
        _check_scope(scope)
        if not (isinstance(limit, (int, float)) and limit >= 0 and limit < float("inf")):
            raise LdpDaskError(f"The 'limit' parameter must be a finite number >= 0. Got {limit!r} instead.")
        with self._connect() as con:
            con.execute("INSERT OR REPLACE INTO budgets VALUES (?, ?, ?, ?, ?)",
                        (fingerprint, column, scope, dataset, float(limit)))

    def spent(self, fingerprint: str, column: str, scope: str) -> float:
        with self._connect() as con:
            return self._spent(con, fingerprint, column, scope)

    def _spent(self, con: sqlite3.Connection, fingerprint: str, column: str, scope: str) -> float:
        row = con.execute("SELECT COALESCE(SUM(epsilon), 0) FROM releases WHERE fingerprint=? AND column_name=? "
                          "AND scope=? AND status IN ('committed', 'reserved')", (fingerprint, column, scope)).fetchone()
        return float(row[0])

    def _drop_dead_reservations(self, con: sqlite3.Connection) -> None:
        host = socket.gethostname()
        for rid, pid in con.execute("SELECT id, pid FROM releases WHERE status='reserved' AND host=?", (host,)).fetchall():
            if pid is not None and pid != os.getpid() and not _pid_alive(int(pid)):
                con.execute("DELETE FROM releases WHERE id=?", (rid,))

    # --- releases -----------------------------------------------------------------------------------------
    def reserve(self, *, fingerprint: str, column: str, scope: str, channel: str, params: dict[str, Any],
                epsilon: float, key_id: str, dataset: str | None = None, output: str | None = None,
                flow_run_id: str | None = None, reproducible: bool = True) -> Reservation:
        """Record a release as pending, or refuse it if it would exceed the budget (atomic)."""
        _check_scope(scope)
        release_key = json.dumps([fingerprint, column, scope, channel, params, key_id], sort_keys=True, default=str)
        con_ctx = self._connect()
        with con_ctx as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                self._drop_dead_reservations(con)
                spent = self._spent(con, fingerprint, column, scope)
                lim = con.execute("SELECT epsilon_limit FROM budgets WHERE fingerprint=? AND column_name=? AND scope=?",
                                  (fingerprint, column, scope)).fetchone()
                limit = float(lim[0]) if lim else None
                if reproducible and con.execute(
                        "SELECT 1 FROM releases WHERE release_key=? AND status='committed' LIMIT 1",
                        (release_key,)).fetchone():
                    con.execute("COMMIT")
                    return Reservation(None, 0.0, True, spent, limit)
                if limit is not None and spent + epsilon > limit * (1 + 1e-12):
                    con.execute("ROLLBACK")
                    raise BudgetExceeded(
                        f"this {scope} release of column {column!r} needs ε = {epsilon:g}, but the dataset has spent "
                        f"{spent:g} of its {scope} budget {limit:g} (remaining {max(0.0, limit - spent):g}); "
                        "nothing was run"
                    )
                cur = con.execute(
                    "INSERT INTO releases (created_at, fingerprint, dataset, column_name, scope, channel, params, "
                    "epsilon, key_id, release_key, output, flow_run_id, status, host, pid) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'reserved', ?, ?)",
                    (time.time(), fingerprint, dataset, column, scope, channel, json.dumps(params, default=str),
                     float(epsilon), key_id, release_key, output, flow_run_id, socket.gethostname(), os.getpid()))
                con.execute("COMMIT")
                return Reservation(int(cur.lastrowid), float(epsilon), False, spent, limit)
            except BudgetExceeded:
                raise
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise

    def commit(self, reservation: Reservation, output: str | None = None) -> None:
        if reservation.id is None:
            return
        with self._connect() as con:
            con.execute("UPDATE releases SET status='committed', output=COALESCE(?, output) WHERE id=?",
                        (output, reservation.id))

    def abort(self, reservation: Reservation) -> None:
        if reservation.id is None:
            return
        with self._connect() as con:
            con.execute("DELETE FROM releases WHERE id=? AND status='reserved'", (reservation.id,))

    # --- reading ------------------------------------------------------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        with self._connect() as con:
            con.row_factory = sqlite3.Row
            rows = con.execute("SELECT id, created_at, fingerprint, dataset, column_name, scope, channel, params, "
                               "epsilon, key_id, output, flow_run_id, status FROM releases ORDER BY id").fetchall()
        return [dict(r) for r in rows]

    def summary(self) -> list[dict[str, Any]]:
        """Per dataset-and-column: spent and budget in each scope."""
        with self._connect() as con:
            keys = con.execute("SELECT DISTINCT fingerprint, column_name, dataset FROM releases "
                               "UNION SELECT fingerprint, column_name, dataset FROM budgets").fetchall()
            out = []
            seen = set()
            for fp, col, ds in keys:
                if (fp, col) in seen:
                    continue
                seen.add((fp, col))
                item: dict[str, Any] = {"fingerprint": fp, "column": col, "dataset": ds}
                for scope in SCOPES:
                    lim = con.execute("SELECT epsilon_limit FROM budgets WHERE fingerprint=? AND column_name=? "
                                      "AND scope=?", (fp, col, scope)).fetchone()
                    item[f"{scope}_spent"] = self._spent(con, fp, col, scope)
                    item[f"{scope}_budget"] = float(lim[0]) if lim else None
                out.append(item)
        return out


def _check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise LdpDaskError(f"The 'scope' parameter must be 'local' or 'central'. Got {scope!r} instead.")


def open_ledger(ledger: Ledger | str | os.PathLike[str] | bool | None) -> Ledger | None:
    """A Ledger from an object, a path, True (the default path) or None/False (no ledger)."""
    if ledger is None or ledger is False:
        return None
    if ledger is True:
        return Ledger(default_ledger_path())
    if isinstance(ledger, Ledger):
        return ledger
    return Ledger(ledger)
