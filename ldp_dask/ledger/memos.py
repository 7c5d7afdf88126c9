"""Per-person accounting of longitudinal releases: how many distinct memoized reports each person has released.

A longitudinal release (:mod:`ldp_dask.channels.memo`) returns, besides its noisy sums, one pair of keyed 64-bit
digests per person: the person's, and the memoized report's (a function of the memo key, the person and the
state). Equal digests mean the same person, the same report; nothing else can be read from them without the key.
The ledger keeps, per *series* (one memo key: a column, a channel and its parameters, a privacy unit, a key), the
set of distinct pairs released and each person's number of nights, and charges each person

    spend = min(reports · ε_memo, nights · ε_bits)

(docs/privacy.md, "Longitudinal releases"; ε_bits is infinite without the instantaneous layer). A release is
recorded with the increase of the largest spend of its series, so the sum of a series' recorded charges is the
most any one person has spent in it, and the budget rules (:mod:`.budget`) add it to every other release of the
dataset as before. The state is stored per release (table ``memo_states``) and read from the newest release
still active: a release removed before publishing leaves no trace in it.

A *capped* series (each person's cell hashed into g values before memoizing, :mod:`ldp_dask.channels.memo_hash`)
keeps no pairs and no per-person row: every person spends at most its cap, g·ε_memo, whatever their changes, and
at most nights·ε_bits with the instantaneous layer, so the series is charged min(cap, nights·ε_bits) in all — the
cap at its first night without the layer — and its state is its number of nights (:func:`capped_increase`).
"""

from __future__ import annotations

import io
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..noise import mix64
from .store import ACTIVE, Tx

__all__ = ["MemoUpdate", "MemoState", "merge", "spend_of", "spend_quantiles", "settle_memos", "settle_series",
           "series_states", "capped_spend", "capped_increase"]

#: Quantiles of the spend over persons that the ledger reports.
QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class MemoUpdate:
    """What a longitudinal release tells the ledger: its series, ε of a new memoized report, ε of one night's
    report against any other (None without an instantaneous layer) and the (person, report) digest pairs; or, for
    a *capped* series (:mod:`ldp_dask.channels.memo_hash`), its ``cap`` — the most any person can spend through its
    memoized reports, known before its first night — and no pairs."""

    series: str
    epsilon_memo: float
    epsilon_bits: float | None
    pairs: np.ndarray
    cap: float | None = None


def capped_spend(nights: int, cap: float, epsilon_bits: float | None) -> float:
    """The most a person of a capped series has spent after ``nights`` nights: min(cap, nights·ε_bits)."""
    if epsilon_bits is None or not math.isfinite(epsilon_bits):
        return float(cap) if nights > 0 else 0.0
    return min(float(cap), nights * float(epsilon_bits))


def capped_increase(tx: Tx, series: str, cap: float, epsilon_bits: float | None) -> float:
    """What a capped series' next night costs every person: the cap at its first night, and, with the
    instantaneous layer, ε_bits a night while nights·ε_bits is below it; then nothing. A function of the number of
    nights recorded alone: the budget decision depends on no one's data."""
    row = _current(tx, series, _LISTED)
    nights = 0 if row is None else int(row["nights"])
    top = 0.0 if row is None else float(json.loads(row["spread"]).get("max", 0.0))
    return max(0.0, capped_spend(nights + 1, cap, epsilon_bits) - top)


@dataclass(frozen=True)
class MemoState:
    """A series' released reports: the distinct (person, report) pairs, and per person (sorted) the number of
    distinct reports and of nights. Stored uncompressed: keyed digests do not compress."""

    pairs: np.ndarray
    persons: np.ndarray
    reports: np.ndarray
    nights: np.ndarray

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez(buf, pairs=self.pairs, persons=self.persons, reports=self.reports, nights=self.nights)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes) -> MemoState:
        with np.load(io.BytesIO(bytes(blob))) as z:
            return cls(z["pairs"], z["persons"], z["reports"], z["nights"])


def _pair_hash(pairs: np.ndarray) -> np.ndarray:
    """One 64-bit mix of each (person, report) pair: sorting by it is one key, not two."""
    return mix64(pairs[:, 0] ^ ((pairs[:, 1] << np.uint64(17)) | (pairs[:, 1] >> np.uint64(47))))


def _unique_rows(pairs: np.ndarray) -> np.ndarray:
    """The distinct rows of an (m, 2) uint64 array. Sorted by their :func:`_pair_hash`, where equal rows meet;
    should two distinct rows share a hash (about m²/2⁶⁵), by (column 0, column 1) instead: exact either way."""
    if len(pairs) == 0:
        return np.empty((0, 2), np.uint64)
    h = _pair_hash(pairs)
    order = np.argsort(h)
    p, hs = pairs[order], h[order]
    same_hash = hs[1:] == hs[:-1]
    same_row = same_hash & (p[1:, 0] == p[:-1, 0]) & (p[1:, 1] == p[:-1, 1])
    if np.array_equal(same_hash, same_row):
        return p[np.r_[True, ~same_row]]
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))  # a hash shared by distinct rows: the exact two-key sort
    p = pairs[order]
    return p[np.r_[True, (p[1:, 0] != p[:-1, 0]) | (p[1:, 1] != p[:-1, 1])]]


def _distinct(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values of ``a`` and their counts (a sort and a diff: ten times ``np.unique`` here)."""
    s = np.sort(a)
    if len(s) == 0:
        return s, np.zeros(0, np.int64)
    first = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    return s[first], np.diff(np.r_[first, len(s)])


def merge(state: MemoState | None, pairs: np.ndarray) -> MemoState:
    """The state after a night whose persons released ``pairs`` (one night more for each of its persons).

    The state's pairs are kept sorted by :func:`_pair_hash`, so a night sorts only its own pairs, looks each up
    and inserts the new ones (linear in the state); should two distinct pairs ever share a hash, the state is
    rebuilt by the exact two-key sort (:func:`_merge_exact`) instead."""
    tonight = np.asarray(pairs, dtype=np.uint64).reshape(-1, 2)
    if state is None or len(state.pairs) == 0 or len(tonight) == 0:
        return _merge_exact(state, tonight)
    old_hash = _pair_hash(state.pairs)
    h = _pair_hash(tonight)
    order = np.argsort(h)
    h, t = h[order], tonight[order]
    repeat = np.r_[False, h[1:] == h[:-1]]
    if repeat.any():  # a person twice in a night (ids that collide): the same pair once, else the exact way
        same = repeat[1:] & (t[1:, 0] == t[:-1, 0]) & (t[1:, 1] == t[:-1, 1])
        if not np.array_equal(repeat[1:], same):
            return _merge_exact(state, tonight)
        h, t = h[~repeat], t[~repeat]
    at = np.searchsorted(old_hash, h)
    inside = at < len(old_hash)
    found = np.zeros(len(h), bool)
    found[inside] = old_hash[at[inside]] == h[inside]
    hit = at[found]
    if not (np.all(old_hash[1:] > old_hash[:-1]) and np.array_equal(state.pairs[hit], t[found])):
        return _merge_exact(state, tonight)  # a hash shared by distinct pairs
    fresh = t[~found]
    everything = np.insert(state.pairs, at[~found], fresh, axis=0)
    persons, reports, nights = state.persons, state.reports, state.nights
    tonight_persons = _distinct(t[:, 0])[0]
    where = np.searchsorted(persons, tonight_persons)
    known = where < len(persons)
    known[known] = persons[where[known]] == tonight_persons[known]
    if not known.all():
        add = tonight_persons[~known]
        spot = where[~known]
        persons = np.insert(persons, spot, add)
        reports, nights = np.insert(reports, spot, 0), np.insert(nights, spot, 0)
    reports = reports + np.bincount(np.searchsorted(persons, fresh[:, 0]), minlength=len(persons))
    nights = nights.copy()
    nights[np.searchsorted(persons, tonight_persons)] += 1
    return MemoState(everything, persons, reports, nights)


def _merge_exact(state: MemoState | None, tonight: np.ndarray) -> MemoState:
    """:func:`merge` from scratch: every pair sorted again (the first night, and after a shared hash)."""
    old = state.pairs if state is not None else np.empty((0, 2), np.uint64)
    everything = _unique_rows(np.concatenate([old, tonight]))
    persons, reports = _distinct(everything[:, 0])
    nights = np.zeros(len(persons), np.int64)
    if state is not None:
        nights[np.searchsorted(persons, state.persons)] = state.nights
    nights[np.searchsorted(persons, _distinct(tonight[:, 0])[0])] += 1
    return MemoState(everything, persons, reports.astype(np.int64), nights)


def spend_of(state: MemoState, epsilon_memo: float, epsilon_bits: float | None) -> np.ndarray:
    """ε per person of the series: min(reports·ε_memo, nights·ε_bits)."""
    spend = state.reports * float(epsilon_memo)
    if epsilon_bits is not None and math.isfinite(epsilon_bits) and epsilon_bits < epsilon_memo:
        spend = np.minimum(spend, state.nights * float(epsilon_bits))
    return spend


def spend_quantiles(spend: np.ndarray) -> dict[str, Any]:
    """The distribution of spend over persons: how many, the median, the 90th and 99th percentiles, the most."""
    if len(spend) == 0:
        return {"persons": 0}
    qs = np.quantile(spend, QUANTILES)
    return {"persons": int(len(spend)), "p50": float(qs[0]), "p90": float(qs[1]), "p99": float(qs[2]),
            "max": float(spend.max()), "mean": float(spend.mean())}


_LISTED = ("m.series, m.release_id, m.root, m.epsilon_memo, m.epsilon_bits, m.nights, m.persons, m.spread, "
           "r.column_name AS column_name, r.channel AS release_channel")


def _current(tx: Tx, series: str, columns: str = "m.*") -> dict[str, Any] | None:
    """The series' state of its newest active release (``columns``: without the state, for a listing)."""
    return tx.one(f"SELECT {columns} FROM memo_states m JOIN releases r ON r.id = m.release_id WHERE m.series=? AND "
                  f"r.status IN {ACTIVE} ORDER BY m.release_id DESC LIMIT 1", (series,))


def settle_memos(tx: Tx, release_id: int, root: str, update: MemoUpdate) -> tuple[float, dict[str, Any]]:
    """Record a longitudinal release's pairs (in the ledger's transaction): the increase of the series' largest
    spend per person, which is what the release is charged, and the spend's distribution after it."""
    if update.cap is not None:
        return _settle_capped(tx, release_id, root, update)
    row = _current(tx, update.series)
    before = None if row is None else MemoState.from_bytes(row["state"])
    after = merge(before, update.pairs)
    top_before = 0.0 if row is None else float(json.loads(row["spread"]).get("max", 0.0))
    spend = spend_of(after, update.epsilon_memo, update.epsilon_bits)
    quantiles = spend_quantiles(spend)
    tx.run("INSERT INTO memo_states (series, release_id, root, epsilon_memo, epsilon_bits, nights, persons, spread, "
           "state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
           (update.series, release_id, root, float(update.epsilon_memo), update.epsilon_bits,
            int(after.nights.max(initial=0)), len(after.persons), json.dumps(quantiles), after.to_bytes(),
            time.time()))
    if row is not None:  # the state before this one stays until this release is committed or gone
        tx.run("DELETE FROM memo_states WHERE series=? AND release_id<?", (update.series, row["release_id"]))
    return max(0.0, float(spend.max(initial=0.0)) - top_before), quantiles


def _settle_capped(tx: Tx, release_id: int, root: str, update: MemoUpdate) -> tuple[float, dict[str, Any]]:
    """A capped series' night: one night more, charged :func:`capped_increase`; nothing per person is kept."""
    assert update.cap is not None
    row = _current(tx, update.series, _LISTED)
    nights = (0 if row is None else int(row["nights"])) + 1
    top_before = 0.0 if row is None else float(json.loads(row["spread"]).get("max", 0.0))
    top = capped_spend(nights, update.cap, update.epsilon_bits)
    spread = {"capped": True, "cap": float(update.cap), "nights": nights, "max": top}
    tx.run("INSERT INTO memo_states (series, release_id, root, epsilon_memo, epsilon_bits, nights, persons, spread, "
           "state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
           (update.series, release_id, root, float(update.epsilon_memo), update.epsilon_bits, nights, 0,
            json.dumps(spread), b"", time.time()))
    if row is not None:
        tx.run("DELETE FROM memo_states WHERE series=? AND release_id<?", (update.series, row["release_id"]))
    return max(0.0, top - top_before), spread


def settle_series(tx: Tx, release_id: int, root: str,
                  updates: MemoUpdate | Sequence[MemoUpdate]) -> tuple[float, dict[str, Any]]:
    """:func:`settle_memos` for one series, or for each of a longitudinal plan's: the charge is the sum of their
    increases (each person's spend is at most the sum of their spends in each series, whose largest values these
    are), and the distribution is the series' own, or for several ``{"persons", "max": Σ max, "series": [...]}``
    with each series' distribution (a person's digests differ from series to series, so their spends are not
    added person by person)."""
    if isinstance(updates, MemoUpdate):
        return settle_memos(tx, release_id, root, updates)
    settled = [settle_memos(tx, release_id, root, u) for u in updates]
    spreads = [s for _, s in settled]
    return sum(c for c, _ in settled), {"persons": max((s.get("persons", 0) for s in spreads), default=0),
                                        "max": sum(s.get("max", 0.0) for s in spreads), "series": spreads}


def series_states(tx: Tx) -> list[dict[str, Any]]:
    """Every series' current state, with its root and the distribution of spend over its persons (as recorded
    when it was settled: the states themselves are not read)."""
    out = []
    for s in tx.all("SELECT DISTINCT series FROM memo_states"):
        row = _current(tx, s["series"], _LISTED)
        if row is None:
            continue
        out.append({"series": row["series"], "root": row["root"], "nights": int(row["nights"]),
                    "column": row["column_name"], "channel": row["release_channel"],
                    "epsilon_memo": float(row["epsilon_memo"]), "epsilon_bits": row["epsilon_bits"],
                    **json.loads(row["spread"])})
    return out
