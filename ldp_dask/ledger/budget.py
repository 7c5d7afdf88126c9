"""The ledger's budget rules: which charges overlap a dataset, and what one person has spent.

Pure functions of the recorded charges ``(root, ε)`` — no database — so the
rule is stated once and tested directly against a brute-force model of who
spent what (tests/unit/test_budget_rule.py). Roots are resolved locations
(``file:///data/t``, ``s3://bucket/t``); two roots *overlap* when one contains
the other, by path components.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._validation import LdpDaskError
from ..privacy import ROW_UNIT

__all__ = ["SCOPES", "ROW_UNIT", "BudgetExceeded", "Part", "overlaps", "spent_per_person", "charges_of", "release_of", "nights_left",
           "BUDGET_RTOL", "over_budget", "remaining",
           "person_groups", "spent_view", "check_scope", "dataset_summaries", "summarize", "finish"]

SCOPES = ("local", "central")


class BudgetExceeded(LdpDaskError):
    """A release would exceed the budget of a dataset it reads."""


def overlaps(a: str, b: str) -> bool:
    """Whether two roots share rows: equal, or one contains the other (path components, not prefixes)."""
    a, b = a.rstrip("/"), b.rstrip("/")
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


@dataclass(frozen=True)
class Part:
    """One partition of a partitioned release: charged on its own root, free when it reproduces a recorded part.

    Attributes
    ----------
    root : str
        The partition's location (a file's resolved URL): the people it holds.
    key : str
        The partition's release key: everything but its content that decides its noisy sums (dataset column,
        mechanism and parameters, key id, the file's layout).
    epsilon : float
        ε per person if the partition is released anew.
    """

    root: str
    key: str
    epsilon: float


#: A charge: ``(location, ε)``, or ``(location, ε, release)`` — the charges of one release are paid once by a row
#: or person (the largest of them that covers it), those of different releases add up.
Charge = tuple[Any, ...]


def charges_of(active: list[dict[str, Any]]) -> list[tuple[str, float, Any]]:
    """Every charge of the active releases as ``(location, ε, release id)``.

    A partitioned release is charged on each of its parts, else on its root. A release is also charged on the
    real location of every file it read that lies outside its root (a symbolic link into another directory), and
    on every other location where a file it read is known to the ledger under the same device and inode (a hard
    link): wherever the rows it released really lie.
    """
    aliases: dict[str, set[str]] = {}
    files = [json.loads(r["files"]) if r.get("files") else [] for r in active]  # each decoded once
    for read in files:
        for f in read:
            if f.get("id"):
                aliases.setdefault(f["id"], set()).add(f["loc"])
    out: list[tuple[str, float, Any]] = []
    for r, read in zip(active, files):
        rid, eps, root = r["id"], float(r["epsilon"]), r["root"].rstrip("/")
        # with a privacy unit each part (a file) is a release over the persons in it, and a person may be in all
        per_part = bool(r.get("parts")) and r.get("privacy_unit", ROW_UNIT) != ROW_UNIT
        mine: list[tuple[str, float, Any]]
        if r.get("parts"):
            parts = json.loads(r["parts"])
            mine = [(p["root"], float(p["epsilon"]), (rid, i) if per_part else rid) for i, p in enumerate(parts)]
        else:
            mine = [(root, eps, rid)]
        by_loc = {loc.rstrip("/"): (e, who) for loc, e, who in mine}
        for f in read:
            loc = f["loc"].rstrip("/")
            e, who = by_loc.get(loc, (eps if not r.get("parts") else 0.0, rid))
            if not r.get("parts") and not overlaps(loc, root):
                mine.append((loc, e, who))
            for other in aliases.get(f.get("id") or "", ()):
                if other.rstrip("/") != loc:
                    mine.append((other, e, who))
        out += mine
    return out


def release_of(rid: Any) -> Any:
    """The release a charge belongs to (a part of a release with a privacy unit is charged as ``(id, part)``)."""
    return rid[0] if isinstance(rid, tuple) else rid


def _ancestors(path: str) -> Iterator[str]:
    """``path`` and every directory above it (``file:///a/b`` → itself, ``file:///a``, ``file://``, …)."""
    path = path.rstrip("/")
    yield path
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        yield path


def _by_release(charges: Sequence[Charge]) -> dict[Any, list[tuple[str, float]]]:
    out: dict[Any, list[tuple[str, float]]] = {}
    for i, c in enumerate(charges):
        out.setdefault(c[2] if len(c) > 2 else ("charge", i), []).append((c[0].rstrip("/"), float(c[1])))
    return out


def _increments(charges: Sequence[Charge]) -> dict[str, float]:
    """Per location, what its charges add to a row below it, one release paying once along any chain of
    locations: a release's charge on a location inside another of its charged locations adds only what it
    exceeds that one by, so that summing along a row's ancestors takes each release's largest covering charge."""
    out: dict[str, float] = {}
    for mine in _by_release(charges).values():
        own: dict[str, float] = {}
        for loc, e in mine:
            own[loc] = max(own.get(loc, 0.0), e)
        above_of = {loc: [a for a in list(_ancestors(loc))[1:] if a in own] for loc in own} if len(own) > 1 else {}
        if not any(above_of.values()):  # no charge of this release lies inside another (the usual case)
            for loc, e in own.items():
                out[loc] = out.get(loc, 0.0) + e
            continue
        total: dict[str, float] = {}
        for loc in sorted(own, key=lambda c: c.count("/")):
            above = max((total[a] for a in above_of[loc]), default=0.0)
            total[loc] = max(own[loc], above)
        for loc, t in total.items():
            above = max((total[a] for a in above_of[loc]), default=0.0)
            if t > above:
                out[loc] = out.get(loc, 0.0) + (t - above)
    return out


def spent_per_person(charges: Sequence[Charge], root: str, unit: str = ROW_UNIT,
                     follow_locations: bool = False) -> float:
    """The most ε any one person (or row) in ``root`` has spent, from charges ``(location, ε[, release])``.

    **By default, conservatively:** every release with a charge overlapping ``root`` adds its largest such
    charge. A person may have rows anywhere in ``root``; and with ε per row, a row need not stay in one file —
    a rename, a copy, a compaction moves it, and a later release gives it fresh noise — so whatever the files
    went through, no row of ``root`` has been released with fresh noise more often than this counts (one row
    held twice at once, in two files read by one release, is two rows: see docs/privacy.md).

    **Following locations** (``follow_locations``; ε per row in a dataset declared append-only whose charged
    files are all still where and as they were): a row lives in one file and has paid only the charges above it,
    so its spend is the largest sum over the charges above any one location under ``root`` (the root itself, or a
    charged location inside it) — a table growing a file a day is then charged per day, not per night.
    """
    top = root.rstrip("/")
    if unit != ROW_UNIT or not follow_locations:
        # summed exactly (math.fsum): the ledger keeps this sum as it grows, in another order (:mod:`.standing`)
        return float(math.fsum(max((e for loc, e in mine if overlaps(loc, top)), default=0.0)
                               for mine in _by_release(charges).values()))
    by_root = _increments(charges)
    points = {top} | {r for r in by_root if r.startswith(top + "/")}
    return max((sum(by_root.get(a, 0.0) for a in _ancestors(c)) for c in points), default=0.0)


def log_followed(rows: Sequence[Mapping[str, Any]], root: str) -> bool:
    """Whether every active release overlapping ``root`` read one table and charged its rows as that table's log
    followed them (a release of the whole table on its directory; a nightly one on each file it read and on the
    locations its re-read rows came from, :mod:`ldp_dask.table_nights`), ε per row: then a row pays exactly the
    charges on the location it is followed by, as in a dataset declared append-only, with no declaration —
    the log, not a promise, says where each row went. One release that did not (plain Parquet files of the
    table's directory, a night whose log could not be followed, another table) makes it conservative."""
    tables = set()
    for r in rows:
        if not overlaps(r["root"], root):
            continue
        t = json.loads(r.get("table_log") or "null")
        if not t or not t.get("followed") or r.get("privacy_unit", ROW_UNIT) != ROW_UNIT:
            return False
        tables.add(t.get("id"))
    return len(tables) == 1


def person_groups(charges: Sequence[Charge], root: str) -> dict[str, float]:
    """ε per row at each charged location inside ``root`` of a dataset whose rows are followed by location
    (:func:`spent_per_person` with ``follow_locations``), in one pass over the charges and their ancestors
    (O(charges · depth), not one pass per location: 30,000 partition charges took minutes).

    A row under location c has paid the charges above it; the most any row of c has paid is the largest sum
    over the ancestors of a charged location p at or under c, and every charge above such a p overlaps c."""
    top = root.rstrip("/")
    by_root = _increments(charges)
    points = {r for r in by_root if r.startswith(top + "/")}
    best: dict[str, float] = {}
    for p in points:
        chain = list(_ancestors(p))
        paid = sum(by_root.get(a, 0.0) for a in chain)
        for a in chain:
            if a in points and paid > best.get(a, -1.0):
                best[a] = paid
    return {c: best[c] for c in sorted(points)}


def spent_view(rows: list[dict[str, Any]], key: str, root: str, unit: str, follow_locations: bool = False,
               charges: Sequence[tuple[str, float, Any]] | None = None) -> dict[str, float]:
    """ε per person on ``root`` from the releases of each value of ``key`` (a column, a scope); ``charges``:
    :func:`charges_of` the rows, when already at hand."""
    every = charges_of(rows) if charges is None else charges
    out = {}
    for v in sorted({r[key] for r in rows}):
        ids = {r["id"] for r in rows if r[key] == v}
        mine = [c for c in every if release_of(c[2]) in ids]
        out[v] = spent_per_person(mine, root, unit, follow_locations)
    return out


#: The budget rules' one tolerance, relative to the budget: a spend passes its budget only beyond
#: budget × (1 + BUDGET_RTOL), and what is left of a budget within budget × BUDGET_RTOL of it is none. The channels
#: spend a hair under their nominal ε (calibrations nudged down by about 10⁻⁹ so that rounding never passes it)
#: and ε splits add floats: a dataset that spent "exactly" its budget is then 10⁻⁹ short, and is shown as spent.
BUDGET_RTOL = 1e-7


def over_budget(spent: float, limit: float) -> bool:
    """Whether ``spent`` passes ``limit`` (beyond the rounding of the budget rules, :data:`BUDGET_RTOL`)."""
    return spent > limit * (1 + BUDGET_RTOL)


def remaining(limit: float, spent: float) -> float:
    """ε left of ``limit`` after ``spent``: 0 when within :data:`BUDGET_RTOL` of the budget (or over it)."""
    left = limit - spent
    return 0.0 if left <= limit * BUDGET_RTOL else left


def nights_left(left: float, rate: float) -> int:
    """How many more nights at ``rate`` ε per person (> 0) fit in ``left`` (rounding error forgiven)."""
    return int(max(0.0, left) / rate * (1 + BUDGET_RTOL))


def check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise LdpDaskError(f"The 'scope' parameter must be 'local' or 'central'. Got {scope!r} instead.")


def dataset_summaries(declared: list[dict[str, Any]], rows: list[dict[str, Any]], follows: Any,
                      series: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """What :meth:`ldp_dask.ledger.Ledger.summary` lists, from the declared datasets and the active releases:
    per dataset its spend per person and the views of it; ``follows(declared, root, rows)`` says whether a root's
    rows are followed by location. ``series`` are the longitudinal series' states (:func:`.memos.series_states`):
    each dataset lists those on its rows, with the distribution of spend over their persons."""
    items = [{"dataset": d["name"], "root": d["root"], "budget": float(d["epsilon_limit"]),
              "privacy_unit": d["privacy_unit"], "append_only": bool(d["append_only"]),
              "fallback": d["fallback"]} for d in declared]
    charges = charges_of(rows)
    touches: dict[Any, set[str]] = {}
    for loc, _, rid in charges:
        touches.setdefault(release_of(rid), set()).add(loc)
    for r in rows:
        if not any(overlaps(loc, d["root"]) for d in declared for loc in touches.get(r["id"], {r["root"]})) \
                and not any(i["root"] == r["root"] for i in items):
            items.append({"dataset": None, "root": r["root"], "budget": None, "privacy_unit": r["privacy_unit"],
                          "append_only": False, "fallback": None})
    for item in items:
        summarize(item, rows, charges, touches, follows(declared, item["root"], rows), series)
    return items


def summarize(item: dict[str, Any], rows: list[dict[str, Any]], charges: Sequence[tuple[str, float, Any]],
              touches: Mapping[Any, set[str]], follow: bool, series: Sequence[dict[str, Any]] = ()) -> None:
    """Fill one item of :func:`dataset_summaries` (``dataset``, ``root``, ``budget``, ``privacy_unit``) from the
    active releases ``rows``, their ``charges`` and the locations each touches; ``follow``: whether its rows are
    followed by location."""
    mine = [r for r in rows if any(overlaps(loc, item["root"]) for loc in touches.get(r["id"], {r["root"]}))]
    unit = item["privacy_unit"] or ROW_UNIT
    item["follows_locations"] = follow
    item["table_log"] = log_followed(rows, item["root"])
    ids = {r["id"] for r in mine}
    own = [c for c in charges if release_of(c[2]) in ids]
    item["spent"] = spent_per_person(own, item["root"], unit, follow)
    item["by_column"] = spent_view(mine, "column_name", item["root"], unit, follow, own)
    item["by_scope"] = spent_view(mine, "scope", item["root"], unit, follow, own)
    item["groups"] = person_groups(own, item["root"]) if follow else {}
    # a nightly series: the newest partitioned release's charge here is the rate at which nights are spent
    night = max((r["id"] for r in mine if r.get("parts")), default=None)
    rate = 0.0 if night is None else spent_per_person([c for c in own if release_of(c[2]) == night],
                                                         item["root"], unit, follow)
    finish(item, rate, series)


def finish(item: dict[str, Any], rate: float, series: Sequence[dict[str, Any]]) -> None:
    """The night rate, the nights left and the longitudinal series of a summary item whose spend is known."""
    item["night_rate"] = rate if rate > 0 else None
    item["nights_left"] = (nights_left(remaining(item["budget"], item["spent"]), rate)
                           if rate > 0 and item["budget"] is not None else None)
    item["longitudinal"] = [dict(m) for m in series if overlaps(m["root"], item["root"])]
