"""A root's standing in the ledger, kept as it grows: what a release's checks read, without the whole history.

Under the conservative rule (:func:`.budget.spent_per_person`) and for the central composition
(:func:`.central.dataset_events`), what the releases touching a root add up to is a sum over releases: each adds
its largest charge there (per part, for a privacy unit's parts), and its central events times its copies. A
:class:`Fold` is that sum — spend as an exact fraction (so it does not depend on the order it was added in),
the views per column and scope, the events as counts, the units, and what decides whether the root's rows are
followed by a table's log — and folds add up. The ledger keeps, per root, the fold of its *committed* releases up
to an entry (``root_states``: committed releases never change), and adds the releases since, found by the
indexes (:mod:`.index`): a release's checks cost what its root's releases since the last one do, not what the
ledger holds.

Exact, not approximate: the ledger's tests compare every figure with the rules applied to the whole history
(tests/unit/test_ledger_standing.py). Two cases read the whole history of the root instead — a root whose rows
are followed by location (the largest sum over locations is not a sum over releases), and releases that read a
hard link of a file another release read (its charge then depends on the other's files) — and are never kept.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..privacy import ROW_UNIT
from .budget import charges_of, finish, overlaps, release_of, spent_per_person, summarize
from .central import LONGITUDINAL, compose, spend_of_events
from .index import aliased_records, relevant
from .store import ACTIVE, Tx

__all__ = ["Fold", "fold", "View", "summaries"]


def _add(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> dict[str, Fraction]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, Fraction(0)) + v
    return out


@dataclass
class Fold:
    """What the releases touching a root add up to there (module docstring); ``+`` adds two disjoint sets."""

    spend: Fraction = Fraction(0)
    by_column: dict[str, Fraction] = field(default_factory=dict)
    by_scope: dict[str, Fraction] = field(default_factory=dict)
    #: central events (ε, δ) → how many, and the longitudinal releases' charges together (one pure event)
    events: Counter[tuple[float, float]] = field(default_factory=Counter)
    longitudinal: Fraction = Fraction(0)
    #: the units of the releases whose root overlaps, each with one such root, and the unit of the first of them
    units: dict[str, str] = field(default_factory=dict)
    unit: str | None = None
    #: the tables whose logs those releases followed, and whether one of them did not follow one
    tables: list[str] = field(default_factory=list)
    unfollowed: bool = False
    #: the newest partitioned release with a charge here, and what it added
    night: int | None = None
    night_spend: Fraction = Fraction(0)

    def __add__(self, other: Fold) -> Fold:
        newer = other if (other.night or -2) > (self.night or -2) else self
        return Fold(self.spend + other.spend, _add(self.by_column, other.by_column),
                    _add(self.by_scope, other.by_scope), self.events + other.events,
                    self.longitudinal + other.longitudinal, {**other.units, **self.units},
                    self.unit if self.unit is not None else other.unit,
                    sorted(set(self.tables) | set(other.tables)), self.unfollowed or other.unfollowed,
                    newer.night, newer.night_spend)

    @property
    def log_followed(self) -> bool:
        """:func:`.budget.log_followed`: every release rooted here followed one table's log."""
        return not self.unfollowed and len(self.tables) == 1

    def event_counts(self) -> Counter[tuple[float, float]]:
        """The central events, the longitudinal releases as one pure event."""
        out = Counter(self.events)
        if self.longitudinal > 0:
            out[(float(self.longitudinal), 0.0)] += 1
        return out

    def to_json(self) -> str:
        return json.dumps({"spend": str(self.spend), "by_column": {k: str(v) for k, v in self.by_column.items()},
                           "by_scope": {k: str(v) for k, v in self.by_scope.items()},
                           "events": [[e, d, n] for (e, d), n in sorted(self.events.items())],
                           "longitudinal": str(self.longitudinal), "units": self.units, "unit": self.unit,
                           "tables": self.tables, "unfollowed": self.unfollowed, "night": self.night,
                           "night_spend": str(self.night_spend)})

    @classmethod
    def from_json(cls, text: str) -> Fold:
        s = json.loads(text)
        return cls(Fraction(s["spend"]), {k: Fraction(v) for k, v in s["by_column"].items()},
                   {k: Fraction(v) for k, v in s["by_scope"].items()},
                   Counter({(float(e), float(d)): int(n) for e, d, n in s["events"]}), Fraction(s["longitudinal"]),
                   dict(s["units"]), s["unit"], list(s["tables"]), bool(s["unfollowed"]), s["night"],
                   Fraction(s["night_spend"]))


def fold(rows: Sequence[Mapping[str, Any]], root: str,
         charges: Sequence[tuple[str, float, Any]] | None = None) -> Fold:
    """The :class:`Fold` of ``rows`` (releases, in entry order) on ``root``; ``charges``: :func:`charges_of` them."""
    top = root.rstrip("/")
    best: dict[Any, float] = {}  # per payer (a release, or a part of a privacy unit's release): its largest charge
    charged: dict[Any, float] = {}  # per release: its largest positive charge, and its copies
    copies: dict[Any, set[Any]] = {}
    for loc, e, who in charges_of([dict(r) for r in rows]) if charges is None else charges:
        if overlaps(loc, top):
            best[who] = max(best.get(who, 0.0), float(e))
            if e > 0:
                rid = release_of(who)
                charged[rid] = max(charged.get(rid, 0.0), float(e))
                copies.setdefault(rid, set()).add(who)
    # sums kept exact as integers in units of 2^-1074 (every double is one), made Fractions once at the end
    paid: dict[Any, int] = {}
    for who, e in best.items():
        rid = release_of(who)
        paid[rid] = paid.get(rid, 0) + _exact(e)
    out = Fold()
    spend, longitudinal, night_spend = 0, 0, 0
    by_column: dict[str, int] = {}
    by_scope: dict[str, int] = {}
    decoded: dict[str, Any] = {}  # central statements repeat from release to release: each text decoded once
    for r in rows:
        rid = r["id"]
        if overlaps(r["root"], top):
            unit = r.get("privacy_unit") or ROW_UNIT
            out.units.setdefault(unit, r["root"])
            if out.unit is None:
                out.unit = unit
            t = json.loads(r["table_log"]) if r.get("table_log") else None
            if not t or not t.get("followed") or unit != ROW_UNIT:
                out.unfollowed = True
            else:
                out.tables = sorted(set(out.tables) | {str(t.get("id"))})
        if rid not in paid:
            continue
        p = paid[rid]
        spend += p
        column, scope = str(r.get("column_name")), str(r.get("scope"))
        by_column[column] = by_column.get(column, 0) + p
        by_scope[scope] = by_scope.get(scope, 0) + p
        if r.get("parts") and (out.night is None or rid > out.night):
            out.night, night_spend = rid, p
        if rid in charged:
            text = r.get("central")
            if text and text not in decoded:
                decoded[text] = json.loads(text)
            recorded = decoded[text] if text else None
            if recorded == LONGITUDINAL:
                longitudinal += _exact(charged[rid])
                continue
            mine = ([(float(e), float(d)) for e, d in recorded["events"]] if recorded is not None
                    else [(charged[rid], 0.0)])
            for ev in mine:
                out.events[ev] += len(copies[rid])
    out.spend, out.longitudinal, out.night_spend = (Fraction(v, _SCALE) for v in (spend, longitudinal, night_spend))
    out.by_column = {k: Fraction(v, _SCALE) for k, v in by_column.items()}
    out.by_scope = {k: Fraction(v, _SCALE) for k, v in by_scope.items()}
    return out


#: every finite double is an integer multiple of 2^-1074
_SCALE = 1 << 1074


def _exact(x: float) -> int:
    """``x`` in units of 2^-1074, exactly (its denominator is a power of two no larger)."""
    num, den = float(x).as_integer_ratio()
    return num * (_SCALE // den)


class View:
    """The ledger's releases as one transaction sees them, per root (a release's checks, a receipt, a listing).

    ``datasets`` are the declared datasets. ``pending`` arguments are a release not recorded yet (id
    :data:`~.reserve.PENDING`); ``exclude`` the id of the release being settled, replaced by its pending form.
    """

    def __init__(self, tx: Tx, datasets: Sequence[Mapping[str, Any]]) -> None:
        self.datasets: list[dict[str, Any]]
        self.tx, self.datasets = tx, [dict(d) for d in datasets]
        self.aliases = aliased_records(tx)
        self.linked = {a["file_id"] for a in self.aliases}
        self._folds: dict[str, Fold] = {}

    # --- the whole history of a root -------------------------------------------------------------------
    def rows(self, roots: Sequence[str], pending: Mapping[str, Any] | None = None,
             exclude: int | None = None) -> list[dict[str, Any]]:
        """Every active release with a charge that may overlap one of ``roots`` (and ``pending``, last)."""
        ids = _file_ids([pending]) if pending is not None else set()
        rows = [r for r in relevant(self.tx, roots, 0, ids, self.aliases) if r["id"] != exclude]
        return [*rows, dict(pending)] if pending is not None else rows

    # --- the kept standing --------------------------------------------------------------------------------
    def fold(self, root: str, exclude: int | None = None) -> Fold:
        """The fold of the active releases on ``root`` (``exclude``: one left out), from the kept standing."""
        top = root.rstrip("/")
        key = top if exclude is None else f"{top}\x00{exclude}"
        if key in self._folds:
            return self._folds[key]
        kept = self.tx.one("SELECT upto, state FROM root_states WHERE root=?", (top,))
        upto, base = (int(kept["upto"]), Fold.from_json(kept["state"])) if kept else (0, Fold())
        tail = relevant(self.tx, [top], upto, (), self.aliases)
        if self.linked and _file_ids(tail) & self.linked:  # a hard link ties these releases to others: the whole history, not kept
            whole = [r for r in relevant(self.tx, [top], 0, (), self.aliases) if r["id"] != exclude]
            out = self._folds[key] = fold(whole, top)
            return out
        done = 0  # the committed releases that open the tail are kept with the standing (never past one that is not)
        while done < len(tail) and tail[done]["status"] == "committed":
            done += 1
        head = fold(tail[:done], top)
        out = self._folds[key] = base + head + fold([r for r in tail[done:] if r["id"] != exclude], top)
        if done:
            self._keep(top, int(tail[done - 1]["id"]), base + head, kept is not None)
        return out

    def _keep(self, top: str, upto: int, state: Fold, exists: bool) -> None:
        if exists:
            self.tx.run("UPDATE root_states SET upto=?, state=? WHERE root=?", (upto, state.to_json(), top))
        else:
            self.tx.run("INSERT INTO root_states (root, upto, state) VALUES (?, ?, ?)", (top, upto, state.to_json()))

    def _standing(self, root: str, pending: Mapping[str, Any] | None, exclude: int | None) -> Fold | None:
        """The fold with ``pending`` added, or None where it must be read from the whole history (``pending``
        read a file known at another location: a hard link)."""
        if pending is not None and self._linked(pending):
            return None
        base = self.fold(root, exclude)
        return base if pending is None else base + fold([pending], root)

    def _linked(self, pending: Mapping[str, Any]) -> bool:
        """Whether ``pending`` read a file whose identity is known at another location (or at two)."""
        return bool(_file_ids([pending]) & self.linked or self.elsewhere(pending))

    def elsewhere(self, pending: Mapping[str, Any]) -> set[str]:
        """The other locations at which the files ``pending`` read are known by identity (hard links)."""
        mine = {f["id"]: f["loc"].rstrip("/") for f in json.loads(pending.get("files") or "[]") if f.get("id")}
        wanted, out = sorted(mine), set()
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            for r in self.tx.all(f"SELECT file_id, loc FROM release_files WHERE file_id IN ({', '.join('?' * len(chunk))})",
                                 chunk):
                if r["loc"] != mine[r["file_id"]]:
                    out.add(r["loc"])
        return out

    # --- what the rules read ------------------------------------------------------------------------------
    def follows(self, root: str, standing: Fold) -> bool:
        """Whether ε per row on ``root`` follows locations (:meth:`ldp_dask.ledger.Ledger._follows`)."""
        return standing.log_followed or any(
            d["append_only"] and not d["fallback"] and d["privacy_unit"] == ROW_UNIT and
            (root.rstrip("/") + "/").startswith(d["root"].rstrip("/") + "/") for d in self.datasets)

    def standing(self, root: str, pending: Mapping[str, Any] | None = None,
                 exclude: int | None = None) -> tuple[Fold, list[dict[str, Any]] | None]:
        """The fold on ``root`` (with ``pending``), and the whole history's rows where the rules need them (rows
        followed by location, a hard link), else None."""
        kept = self._standing(root, pending, exclude)
        if kept is not None and not (kept.unit in (None, ROW_UNIT) and self.follows(root, kept)):
            return kept, None
        rows = self.rows([root], pending, exclude)
        return fold(rows, root), rows

    def spent(self, root: str, pending: Mapping[str, Any] | None = None, exclude: int | None = None) -> float:
        """ε per person on ``root`` (:func:`.budget.spent_per_person`, by the rule that applies there)."""
        standing, rows = self.standing(root, pending, exclude)
        if rows is None:
            return float(standing.spend)
        unit = standing.unit or ROW_UNIT
        return spent_per_person(charges_of(rows), root, unit, unit == ROW_UNIT and self.follows(root, standing))

    def events(self, root: str, pending: Mapping[str, Any] | None = None,
               exclude: int | None = None) -> Counter[tuple[float, float]]:
        """The central events of the releases touching ``root`` (:func:`.central.dataset_events`), as counts."""
        kept = self._standing(root, pending, exclude)
        if kept is None:
            kept = fold(self.rows([root], pending, exclude), root)
        return kept.event_counts()


    def composed(self, root: str) -> Callable[[Mapping[tuple[float, float], int], float], float]:
        """:func:`.central.compose` for ``root``, remembering the last composition per root: a receipt states what
        its release's settle just composed, and the next release's first check composes the same events."""
        top = root.rstrip("/")

        def memo(events: Mapping[tuple[float, float], int], delta: float) -> float:
            key = json.dumps([[e, d, n] for (e, d), n in sorted(events.items()) if n])
            kept = self.tx.one("SELECT events, delta, epsilon FROM compositions WHERE root=?", (top,))
            if kept is not None and kept["events"] == key and float(kept["delta"]) == delta:
                return float(kept["epsilon"])
            eps = compose(events, delta)
            if kept is None:
                self.tx.run("INSERT INTO compositions (root, events, delta, epsilon) VALUES (?, ?, ?, ?)",
                            (top, key, delta, eps))
            else:
                self.tx.run("UPDATE compositions SET events=?, delta=?, epsilon=? WHERE root=?", (key, delta, eps, top))
            return eps

        return memo

    def central(self, root: str, budget: tuple[float, float] | None) -> dict[str, Any]:
        """:func:`.central.central_spend` on ``root`` (at ``budget``'s δ, if one is declared there)."""
        return spend_of_events(self.events(root), budget, self.composed(root))


def _file_ids(rows: Sequence[Mapping[str, Any] | None]) -> set[str]:
    return {f["id"] for r in rows if r is not None for f in json.loads(r.get("files") or "[]") if f.get("id")}


def summaries(view: View, series: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """:func:`.budget.dataset_summaries` of the whole ledger, from the kept standing of each item's root: the
    declared datasets, then each root of releases charged on no declared dataset, by its first such release."""
    declared = sorted(view.datasets, key=lambda d: d["name"])
    items = [{"dataset": d["name"], "root": d["root"], "budget": float(d["epsilon_limit"]),
              "privacy_unit": d["privacy_unit"], "append_only": bool(d["append_only"]),
              "fallback": d["fallback"]} for d in declared]
    named = {i["root"] for i in items}
    found: list[tuple[int, dict[str, Any]]] = []
    for r in view.tx.all(f"SELECT DISTINCT root FROM releases WHERE status IN {ACTIVE}"):
        if r["root"] in named:
            continue
        rows = view.rows([r["root"]])
        touches: dict[Any, set[str]] = {}
        for loc, _, who in charges_of(rows):
            touches.setdefault(release_of(who), set()).add(loc)
        first = next((x for x in rows if x["root"] == r["root"] and not any(
            overlaps(loc, d["root"]) for d in declared for loc in touches.get(x["id"], {x["root"]}))), None)
        if first is not None:
            found.append((int(first["id"]), {"dataset": None, "root": r["root"], "budget": None,
                                             "privacy_unit": first["privacy_unit"], "append_only": False,
                                             "fallback": None}))
    items += [item for _, item in sorted(found, key=lambda f: f[0])]
    for item in items:
        standing, whole = view.standing(item["root"])
        unit = item["privacy_unit"] or ROW_UNIT
        follow = view.follows(item["root"], standing)
        if whole is not None and unit == ROW_UNIT and follow:  # by location: the rules over the whole history
            rows = whole
            charges = charges_of(rows)
            touches = {}
            for loc, _, who in charges:
                touches.setdefault(release_of(who), set()).add(loc)
            summarize(item, rows, charges, touches, follow, series)
            continue
        item["follows_locations"] = follow
        item["table_log"] = standing.log_followed
        item["spent"] = float(standing.spend)
        item["by_column"] = {k: float(standing.by_column[k]) for k in sorted(standing.by_column)}
        item["by_scope"] = {k: float(standing.by_scope[k]) for k in sorted(standing.by_scope)}
        item["groups"] = {}
        finish(item, float(standing.night_spend) if standing.night is not None else 0.0, series)
    return items
