"""Privacy budget ledger: every release recorded, charged per person against the dataset it reads.

The ledger (``--ledger``, ``ledger=``, ``LDP_DASK_LEDGER``; every face —
Python, the command line, the flows — defaults to ``~/.ldp_dask/ledger.sqlite``
and skips it only when told, ``ledger=False`` or ``--no-ledger``) is a SQLite
file, or a PostgreSQL database for a deployment (``postgresql://…``). Its
rules (docs/privacy.md, "The budget ledger"):

* **Charged against the population, not the files.** A release is charged
  against a dataset *identity*: a root location (a directory, a bucket
  prefix, a file). The operator may declare one once, with a name, a budget
  and a privacy unit (``ldp-dask budget set NAME --source URL --limit ε``);
  otherwise a release's identity is its own resolved root (a directory for a
  directory or a glob of its files). Two roots *overlap* when one contains the
  other; a person's spend on a root is bounded by the sum of ε over every
  release whose root overlaps it, whatever the columns, file layout or
  partitioning. A release must fit in the budget of every declared dataset it
  overlaps. Local and central releases add up (a local ε-DP release is also
  ε-DP for the person); per column and per scope are views of the same total.
* **Per person.** Budgets count ε per *privacy unit*: a person named by a
  column (releases made with ``privacy_unit=``), or a row. All releases
  overlapping a root must use the same unit, since ε per row and ε per person
  cannot be added up.
* **A re-run is free only when its output is provably identical:** the same
  root, column, mechanism, parameters, key, partitioning, mode and privacy unit,
  and the same keyed digest of every partition's content (recorded at the
  first release). Anything else is charged.
* **Charged exactly when a private output left the process.** A release is
  *reserved* (its ε counted) before any work, *publishing* just before its
  outputs are renamed into place and *committed* after. A failure before
  publishing removes the reservation; from publishing on the charge stands.
  Reservations carry a lease, renewed while the run lives: a reservation whose
  process died (same host) or whose lease expired (any host) is resolved by the
  next ledger operation — committed if it was publishing or left a staged
  output on disk, dropped otherwise.
* **Refused, never re-created.** An empty, corrupt or foreign file is refused
  with one line; only a path that does not exist yet starts a new ledger.

The package: the budget rules (:mod:`.budget`, pure functions of the
charges), the composed central guarantee (:mod:`.central`), the recovery of
dead reservations (:mod:`.recovery`), the storage interface (:mod:`.store`), the SQLite file
(:mod:`.sqlite`) and the PostgreSQL database (:mod:`.postgres`); the rules
that use a store — reserve, settle, commit, abort, recover — are written
once, in :class:`Ledger`, here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._validation import LdpDaskError
from ..privacy import ROW_UNIT
from .budget import SCOPES, BudgetExceeded, Part, check_scope, over_budget, overlaps, spent_per_person
from .central import (
    central_budget,
    check_central_budget,
    counts,
    delta_label,
    encode_events,
    over_central_budgets,
    report_delta,
)
from .index import drop_release, recorded_parts, relevant, tag_parts
from .memos import MemoUpdate, series_states, settle_series
from .recovery import recover
from .reserve import PENDING, Request, Reservation, reserve_in, touching
from .sqlite import SQLiteStore
from .standing import View, summaries
from .store import LedgerError, Store, Tx

__all__ = ["Ledger", "Reservation", "BudgetExceeded", "LedgerError", "default_ledger_path", "SCOPES",
           "open_ledger", "DEFAULT_LEASE_SECONDS", "ROW_UNIT", "overlaps", "Part", "spent_per_person",
           "LEDGER_STAMP"]

#: The metadata key under which a summary records the ledger entry that charged it: ``{"ledger": id, "entry": n}``
LEDGER_STAMP = "ledger_entry"

#: A reservation's lease; a live run renews it every third of this.
DEFAULT_LEASE_SECONDS = 600.0


def default_ledger_path() -> str:
    """``$LDP_DASK_LEDGER``, else ``~/.ldp_dask/ledger.sqlite``; refused when there is no home directory to put it
    in (``HOME`` set but empty: the ledger would land at ``/.ldp_dask``)."""
    given = os.environ.get("LDP_DASK_LEDGER")
    if given:
        return given
    home = os.environ.get("HOME", None)
    if home is not None and not home.strip():
        raise LdpDaskError(f"HOME is {home!r}, so the default ledger would be /.ldp_dask/ledger.sqlite: set "
                           "LDP_DASK_LEDGER (or pass --ledger / ledger=) to where the ledger lives")
    return str(Path.home() / ".ldp_dask" / "ledger.sqlite")


class Ledger:
    """The privacy budget ledger (SQLite file, or PostgreSQL URL: ``postgresql://user@host/db``).

    Parameters
    ----------
    location : path or URL
        A SQLite file (created on first use; refused if empty or corrupt) or a
        PostgreSQL connection URL.
    lease_seconds : float
        How long a reservation holds budget without being renewed.
    """

    def __init__(self, location: str | os.PathLike[str], *, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        loc = os.fspath(location)
        if not (isinstance(lease_seconds, (int, float)) and 0 < lease_seconds < 1e9):
            raise LdpDaskError(f"The 'lease_seconds' parameter must be a number in (0, 1e9). Got {lease_seconds!r}.")
        self.lease_seconds = float(lease_seconds)
        if loc.startswith(("postgresql://", "postgres://")):
            from .postgres import PostgresStore

            self.store: Store = PostgresStore(loc)
        else:
            self.store = SQLiteStore(loc)
        self.location = self.store.location

    @property
    def path(self) -> str:
        """Where the ledger lives (a file path, or the URL without its password)."""
        return self.location

    def __repr__(self) -> str:
        return f"Ledger({self.location!r})"

    # --- datasets -----------------------------------------------------------------------------------------
    def declare(self, name: str, root: str, limit: float, privacy_unit: str | None = None,
                append_only: bool = False, central: tuple[float, float] | None = None) -> None:
        """Declare (or update) a dataset: its name, root, ε budget per person and privacy unit.

        ``central`` is a central budget (ε, δ) its releases' central guarantees,
        composed (:mod:`.central`), must also fit; None: none (a new declaration
        without it removes one).

        The unit is fixed by the first declaration or release; changing it
        later is refused, since ε per row and per person cannot be added up.
        ``append_only`` (ε per row only) is the operator's word that files are
        only ever added to the dataset, never renamed, rewritten, copied or
        removed: its rows are then followed by location (a row pays for the
        releases that read its file), which every release checks as far as it
        can (:meth:`reserve`); once a check fails the dataset is counted
        conservatively for good (``fallback`` says why).
        """
        if not (isinstance(name, str) and name.strip() and len(name) <= 200):
            raise LdpDaskError(f"The 'name' parameter must be a non-empty string (≤ 200 characters). Got {name!r}.")
        if not (isinstance(limit, (int, float)) and not isinstance(limit, bool) and 0 <= limit < float("inf")):
            raise LdpDaskError(f"The 'limit' parameter must be a finite number >= 0. Got {limit!r} instead.")
        unit = privacy_unit or ROW_UNIT
        c_eps, c_delta = check_central_budget(central)
        if append_only and unit != ROW_UNIT:
            raise LdpDaskError("'append_only' is for a dataset charged ε per row: a person may own rows in every "
                               "file, so a dataset with a privacy unit is charged the sum of its releases anyway")
        with self.store.transaction() as tx:
            self._recover(tx)
            other = tx.one("SELECT name FROM datasets WHERE root=? AND name<>?", (root, name))
            if other:
                raise LdpDaskError(f"the root {root!r} is already declared as dataset {other['name']!r}")
            for r in relevant(tx, [root]):
                if overlaps(r["root"], root) and r["privacy_unit"] != unit:
                    raise LdpDaskError(
                        f"releases of {r['root']!r} were made with privacy unit {r['privacy_unit']!r}; a dataset "
                        f"overlapping them cannot be declared with unit {unit!r} (ε per row and per person cannot "
                        "be added up)")
            old = tx.one("SELECT append_only, fallback, root FROM datasets WHERE name=?", (name,))
            if old:
                # a fallback stays: the rows were not followed once, and a new declaration does not bring them back
                keep = old["fallback"] if old["root"] == root else None
                tx.run("UPDATE datasets SET root=?, epsilon_limit=?, privacy_unit=?, append_only=?, fallback=?, "
                       "central_epsilon=?, central_delta=? WHERE name=?",
                       (root, float(limit), unit, int(bool(append_only)), keep, c_eps, c_delta, name))
            else:
                tx.run("INSERT INTO datasets (name, root, epsilon_limit, privacy_unit, created_at, append_only, "
                       "central_epsilon, central_delta) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (name, root, float(limit), unit, time.time(), int(bool(append_only)), c_eps, c_delta))

    def datasets(self) -> list[dict[str, Any]]:
        with self.store.transaction() as tx:
            return tx.all("SELECT name, root, epsilon_limit, privacy_unit, append_only, fallback, central_epsilon, "
                          "central_delta FROM datasets ORDER BY name")

    @staticmethod
    def _view(tx: Tx) -> View:
        """The releases as this transaction sees them, per root (:class:`.standing.View`)."""
        return View(tx, tx.all("SELECT * FROM datasets"))

    def spent(self, root: str) -> float:
        """ε per person spent on ``root``: the most any one person in it has spent (:func:`spent_per_person`)."""
        with self.store.transaction() as tx:
            self._recover(tx)
            return self._view(tx).spent(root)

    # --- releases -----------------------------------------------------------------------------------------
    def reserve(self, *, root: str, column: str, scope: str, channel: str, params: Mapping[str, Any],
                epsilon: float, key_id: str, release_key: str, source: str | None = None,
                privacy_unit: str = ROW_UNIT, outputs: Sequence[str] = (), reproducible: bool = True,
                flow_run_id: str | None = None, epsilon_requested: float | None = None,
                token: str | None = None, parts: Sequence[Part] | None = None,
                files: Sequence[Mapping[str, Any]] = (),
                listing: Callable[[str], Mapping[str, Mapping[str, Any]]] | None = None,
                capped: Sequence[tuple[str, float, float | None]] = (),
                table: Mapping[str, Any] | None = None) -> Reservation:
        """Reserve ``epsilon`` against every budget the release overlaps, or refuse (atomic, before any work).

        A release that could be a free re-run (an identical recorded release
        exists) is let through as *tentative* when its ε does not fit: the
        content digest decides at :meth:`settle`. ``token`` names the
        outputs staged by the run (see :func:`ldp_dask._io.temp_name`), so that
        recovery can tell whether a dead run left a private output on disk.

        ``parts`` makes it a *partitioned* release: each :class:`Part` (a file
        of the dataset, with its own noise) is charged on its own root, and a
        part that reproduces a recorded part (same part key, and at
        :meth:`settle` the same content tag) costs nothing. ``epsilon`` is then
        the most a part may cost.

        ``files`` are the files the release reads, where they really lie: each
        a mapping with ``loc`` (the resolved location), ``id`` (device and
        inode, where the file system has them), ``state`` and ``footer``
        (digests keyed under ``key_id``: the file's size and version, and its
        Parquet footer). The release is charged on every location its rows
        really lie at (:func:`~ldp_dask.ledger.budget.charges_of`), so a budget
        applies whatever link or spelling the release reached the rows by.
        ``listing(root)`` gives the files now under a root, ``{loc: {"state":
        …, "id": …}}`` keyed the same way: for a dataset declared append-only
        the ledger checks that every file charged before is still there,
        unchanged, and that no file read now is a copy or link of one charged
        before; where a check fails the dataset falls back, for good, to the
        conservative rule, and the reservation's ``note`` says why.

        ``capped`` names the capped longitudinal series the release continues
        (``(series, cap, ε_bits)`` each, :mod:`.memos`): what their next nights
        cost is added to ``epsilon`` (the rest of the release), decided from
        their numbers of nights in the reservation's own transaction (the cap
        at a first night, nothing once it is reached).

        ``table`` is the table the release read (``format``, ``id``, ``version``, and ``followed``: whether its
        charges follow the rows by the table's log). Where every release on a root followed one table's log,
        ε per row there is followed by location without a declaration (:func:`.budget.log_followed`).
        """
        check_scope(scope)
        token = token or uuid.uuid4().hex
        files_json = json.dumps([dict(f) for f in files]) if files else None
        found: list[tuple[str, str]] = []  # append-only datasets whose promise broke: recorded even if refused
        try:
            request = Request(root, column, scope, channel, params, epsilon, key_id, release_key, source,
                              privacy_unit, tuple(outputs), reproducible, flow_run_id, epsilon_requested, token,
                              None if parts is None else tuple(parts), tuple(files), files_json, listing,
                              tuple(capped), None if table is None else json.dumps(
                                  {k: table.get(k) for k in ("format", "id", "version", "followed")}))
            return reserve_in(self, request, found)
        finally:
            if found:
                with self.store.transaction() as tx:
                    for name, why in found:
                        tx.run("UPDATE datasets SET fallback=? WHERE name=? AND fallback IS NULL", (why, name))

    def settle(self, reservation: Reservation, content_tag: str | None, reproducible: bool = True,
               part_tags: Mapping[str, str] | None = None,
               memos: MemoUpdate | Sequence[MemoUpdate] | None = None,
               central: Sequence[tuple[float, float]] | None = None) -> Reservation:
        """Decide the charge once the output is computed, just before it is published (status *publishing*).

        Free when a committed release has the same release key and content
        digest; otherwise charged its ε, which a tentative reservation must
        still fit (:class:`BudgetExceeded` otherwise: nothing is published).
        A partitioned release gives each part's content tag in ``part_tags``
        (by part key): each part is free or charged on its own. A longitudinal
        release gives its ``memos`` (a longitudinal plan, one per statistic): it
        is charged the increase of its series' largest spend per person, added
        over its series (:func:`.memos.settle_series`), at most the ε reserved,
        and its note gives the spend's distribution over persons.

        ``central`` are the release's central events (:mod:`.central`): the
        (ε, δ) of each independent mechanism it consists of; None: it is
        ε-DP at its charge (a longitudinal release is recorded as one). A
        release charged anything must fit every central budget it touches with
        them (:class:`BudgetExceeded` otherwise: nothing is published).
        """
        recorded = encode_events(central, longitudinal=memos is not None)
        with self.store.transaction() as tx:
            row = tx.one("SELECT status, root, parts FROM releases WHERE id=?", (reservation.id,))
            if row is None or row["status"] != "reserved":
                raise LedgerError(f"reservation #{reservation.id} was lost from the ledger {self.location!r} "
                                  "(its lease expired?); nothing was published")
            if row["parts"] is not None:
                return self._settle_parts(tx, reservation, row, content_tag, reproducible, part_tags or {},
                                          recorded)
            same = (reproducible and content_tag is not None and tx.one(
                "SELECT id FROM releases WHERE release_key=? AND content_tag=? AND status='committed' AND id<>?",
                (reservation.release_key, content_tag, reservation.id)))
            if same:
                tx.run("UPDATE releases SET status='publishing', epsilon=0, content_tag=?, note=? WHERE id=?",
                       (content_tag, f"identical to #{same['id']}", reservation.id))
                return dataclasses.replace(reservation, epsilon=0.0, reused=True, tentative=False)
            if reservation.tentative:
                self._check_fits(tx, reservation, row["root"], [(row["root"], reservation.requested)])
            charged, spread = reservation.requested, None
            if memos is not None:
                charged, spread = settle_series(tx, reservation.id, row["root"], memos)
                if charged > reservation.requested * (1 + 1e-12):  # pragma: no cover - a reservation's bug
                    raise LedgerError(f"a longitudinal release reserved ε {reservation.requested:g} but its series "
                                      f"grew by {charged:g}; nothing was published")
                tx.run("UPDATE releases SET note=? WHERE id=?",
                       ("; ".join(filter(None, [reservation.note, "longitudinal: " + json.dumps(spread)])),
                        reservation.id))
            self._check_central(tx, reservation, row["root"], [(row["root"], charged)], recorded)
            tx.run("UPDATE releases SET status='publishing', epsilon=?, content_tag=?, central=? WHERE id=?",
                   (charged, content_tag, recorded, reservation.id))
            return dataclasses.replace(reservation, epsilon=charged, reused=False, tentative=False, spread=spread)

    def _settle_parts(self, tx: Tx, reservation: Reservation, row: dict[str, Any], content_tag: str | None,
                      reproducible: bool, part_tags: Mapping[str, str], central: str | None) -> Reservation:
        """Each part free when a committed part has its key and content tag, else charged its ε."""
        parts = json.loads(row["parts"])
        recorded = recorded_parts(tx, [p["key"] for p in parts], exclude=reservation.id)
        for p in parts:
            p["tag"] = part_tags.get(p["key"])
            same = reproducible and p["tag"] is not None and p["tag"] in recorded.get(p["key"], ())
            p["epsilon"] = 0.0 if same else float(p["requested"])
        charged = max((p["epsilon"] for p in parts), default=0.0)
        fresh = sum(p["epsilon"] > 0 for p in parts)
        if reservation.tentative:
            self._check_fits(tx, reservation, row["root"], [(p["root"], p["epsilon"]) for p in parts])
        self._check_central(tx, reservation, row["root"], [(p["root"], p["epsilon"]) for p in parts], central)
        tx.run("UPDATE releases SET status='publishing', epsilon=?, content_tag=?, parts=?, note=?, central=? "
               "WHERE id=?", (charged, content_tag, json.dumps(parts), f"{fresh} of {len(parts)} partitions "
                              "released anew", central, reservation.id))
        tag_parts(tx, reservation.id, parts)
        return dataclasses.replace(reservation, epsilon=charged, reused=fresh == 0 and bool(parts), tentative=False,
                                   parts=fresh)

    def _as_charged(self, tx: Tx, reservation: Reservation, charges: list[tuple[str, float]],
                    central: str | None = None) -> tuple[dict[str, Any], View]:
        """The release as it would be charged (``charges``: per part, or one on its root; ``central``: its events)
        and the view of the others."""
        mine = tx.one("SELECT id, root, privacy_unit, files, parts, epsilon, table_log, column_name, scope "
                      "FROM releases WHERE id=?", (reservation.id,))
        assert mine is not None
        if mine["parts"] is not None:
            mine["parts"] = json.dumps([{"root": loc, "epsilon": e} for loc, e in charges])
        else:
            mine["epsilon"] = max((e for _, e in charges), default=0.0)
        mine["id"], mine["central"] = PENDING, central
        return mine, self._view(tx)

    def _check_central(self, tx: Tx, reservation: Reservation, root: str, charges: list[tuple[str, float]],
                       central: str | None) -> None:
        """A release charged anything must fit, with its central events, every central budget it touches."""
        if not any(e > 0 for _, e in charges) or not tx.one("SELECT name FROM datasets WHERE central_epsilon IS NOT "
                                                            "NULL LIMIT 1"):
            return
        mine, view = self._as_charged(tx, reservation, charges, central)
        why = over_central_budgets(lambda r: view.events(r, mine, reservation.id), touching(view, mine, root),
                                   composed=view.composed)
        if why:
            drop_release(tx, reservation.id)
            raise BudgetExceeded(f"{why}; nothing was published")

    def _check_fits(self, tx: Tx, reservation: Reservation, root: str, charges: list[tuple[str, float]]) -> None:
        """A tentative release turned out to be charged: it must still fit every budget it overlaps."""
        mine, view = self._as_charged(tx, reservation, charges)
        for d in touching(view, mine, root):
            s = view.spent(d["root"], exclude=reservation.id)
            if over_budget(view.spent(d["root"], mine, reservation.id), float(d["epsilon_limit"])):
                drop_release(tx, reservation.id)
                raise BudgetExceeded(
                    f"the data changed since the recorded release, so this is a new release needing "
                    f"ε = {reservation.requested:g}, but the dataset {d['name']!r} has spent {s:g} of its "
                    f"budget {float(d['epsilon_limit']):g}; nothing was published")

    def commit(self, reservation: Reservation) -> None:
        """The outputs are published: the charge is final."""
        with self.store.transaction() as tx:
            tx.run("UPDATE releases SET status='committed' WHERE id=? AND status IN ('publishing', 'reserved')",
                   (reservation.id,))

    def abort(self, reservation: Reservation) -> None:
        """Nothing left the process (the caller removed every staged output): remove the reservation."""
        with self.store.transaction() as tx:
            drop_release(tx, reservation.id, "AND status IN ('reserved', 'publishing')")

    def renew(self, reservation: Reservation) -> None:
        with self.store.transaction() as tx:
            tx.run("UPDATE releases SET lease_until=? WHERE id=?", (time.time() + self.lease_seconds, reservation.id))

    @contextmanager
    def holding(self, reservation: Reservation) -> Iterator[None]:
        """Renew ``reservation``'s lease every third of the lease while the block runs."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.lease_seconds / 3):
                try:
                    self.renew(reservation)
                except LdpDaskError:  # pragma: no cover - the run goes on; settle() notices a lost reservation
                    pass

        t = threading.Thread(target=beat, name="ldp-dask-ledger-lease", daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join()

    def _recover(self, tx: Tx) -> None:
        """Resolve reservations whose process died or whose lease expired (:func:`.recovery.recover`)."""
        recover(tx)

    def recover(self) -> None:
        """Resolve dead reservations now (every reserve and listing does it too)."""
        with self.store.transaction() as tx:
            self._recover(tx)

    # --- reading ------------------------------------------------------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        with self.store.transaction() as tx:
            self._recover(tx)
            return tx.all("SELECT id, created_at, root, source, column_name, scope, channel, params, privacy_unit, "
                          "epsilon, epsilon_requested, key_id, outputs, flow_run_id, status, note, parts, central "
                          "FROM releases ORDER BY id")

    def summary(self) -> list[dict[str, Any]]:
        """Per dataset (declared, or the root of undeclared releases): ε per person spent (the most any one
        person has spent, :func:`spent_per_person`), budget, the per-column and per-scope views, whether its rows
        are followed by location (``append_only``, and ``fallback``: why no longer), and for a dataset whose
        rows are followed its person ``groups``: ε per row at each charged location inside it (a partition)."""
        with self.store.transaction() as tx:
            self._recover(tx)
            view = self._view(tx)
            items = summaries(view, series_states(tx))
            budgets = {d["root"]: central_budget(d) for d in view.datasets}
            for item in items:  # the composed central guarantee, beside the local spend
                item["central"] = view.central(item["root"], budgets.get(item["root"]))
        return items

    def standing(self, root: str) -> tuple[float, dict[str, Any]]:
        """:meth:`spent` on ``root`` and the composed central guarantee of the releases touching it
        (:func:`.central.central_spend`, at the δ of the central budget declared there, if any)."""
        with self.store.transaction() as tx:
            self._recover(tx)
            view = self._view(tx)
            declared = next((d for d in view.datasets if d["root"] == root), None)
            return view.spent(root), view.central(root, central_budget(declared) if declared else None)

    def sequence(self) -> tuple[str, int]:
        """This ledger's identity (a random id made with it, kept in the ledger: a copy shares it) and the number
        of its newest entry (0 when it has none). Entry numbers only grow, so a ledger restored from an older copy
        is behind the entries its releases' summaries record (:meth:`check_published`)."""
        with self.store.transaction() as tx:
            tx.run("INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', ?) ON CONFLICT (key) DO NOTHING",
                   (uuid.uuid4().hex,))
            row = tx.one("SELECT value FROM ledger_meta WHERE key = 'ledger_id'")
            top = tx.one("SELECT MAX(id) AS top FROM releases")
        assert row is not None
        return str(row["value"]), int((top or {}).get("top") or 0)

    def check_published(self, stamps: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Refuse, before anything is reserved, a release that builds on published summaries this ledger has no
        record of: ``stamps`` are ``(where, ledger stamp)`` of each (:data:`LEDGER_STAMP` in a summary's
        metadata). A stamp from this ledger with an entry past its newest means the ledger was restored from an
        older copy (the releases since would be forgotten, and charged again from too low a spend); a stamp
        from another ledger, that this is not the ledger that charged them (deleted and started anew, or
        another one)."""
        if not stamps:
            return
        lid, top = self.sequence()
        for where, stamp in stamps:
            theirs, entry = str(stamp.get("ledger", "")), int(stamp.get("entry", 0))
            if theirs == lid and entry <= top:
                continue
            why = (f"was recorded as entry #{entry} of this ledger, whose newest entry is #{top}: the ledger was "
                   "restored from an older copy, and has forgotten the releases since" if theirs == lid else
                   f"was recorded by another ledger (id {theirs[:8]}, this one is {lid[:8]}): this ledger was "
                   "deleted and started anew, or is not the one that charged the series")
            raise LedgerError(f"{where} {why}. Nothing was run. Restore the newest copy of the ledger "
                              "(docs/how-to/incremental.md, 'Backing up the ledger'), or start a new series without it")

    def reading(self, root: str, extra: Sequence[tuple[float, float]]) -> tuple[float, str]:
        """The δ at which a release about to be published on ``root`` is read, with its label: the δ its receipt
        will compose the dataset at (:func:`.central.report_delta` of the dataset's events and ``extra``, this
        release's), so that its pages, written before the charge, state the same δ as its receipt."""
        with self.store.transaction() as tx:
            view = self._view(tx)
            declared = next((d for d in view.datasets if d["root"] == root), None)
            events = view.events(root) + counts(extra)
        budget = central_budget(declared) if declared else None
        return report_delta(events, budget[1] if budget else None), delta_label(budget is not None)


def open_ledger(ledger: Ledger | str | os.PathLike[str] | bool | None) -> Ledger | None:
    """A Ledger from an object, a path or URL, True or None (the default location), or False (no ledger: the
    caller's explicit choice)."""
    if ledger is False:
        return None
    if ledger is True or ledger is None:
        return Ledger(default_ledger_path())
    if isinstance(ledger, Ledger):
        return ledger
    return Ledger(ledger)
