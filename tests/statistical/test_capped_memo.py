"""Capped memoized channels (each person's cell hashed into g values, the hash memoized): the audit of a person's
spend over 30 nights of changes, and the accuracy and coverage of each night over 30 nights.

The audit runs the channel itself for R persons (distinct persons' reports are independent draws: R persons with
one history are R runs of the mechanism) through 30 nights on which every person changes cell every night. Two
histories of each person with the same pattern of *hashed* states (docs/privacy.md: the relation the memoized
layer is charged under): A cycles through the person's cells that hash to 0 on nights 0–14 and through those that
hash to 1 on nights 15–29; B the other way round. The adversary's statistic is the person's support of A's cell,
summed over the nights. The charge of the series, g·ε_memo = 2ε_memo, must bound the realised loss (Clopper–
Pearson at confidence 1 − 10⁻⁴, Bonferroni over the events tried: a false failure at most 10⁻⁴); the same audit of
the uncapped memoized histogram at the same ε_memo — 20 distinct cells, ε_memo each — finds the loss far above 2ε_memo,
so the audit can fail. It also finds the charge realised (≥ 0.85 of it): not a vacuous bound.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldp_dask.audit import event_loss_lower_bound
from ldp_dask.channels import CappedHistogram, MemoHistogram
from ldp_dask.estimators import frequencies
from ldp_dask.ledger.memos import capped_spend
from ldp_dask.summary import Summary

pytestmark = pytest.mark.slow

R, NIGHTS, CELLS = 100_000, 30, 20
KEY = (0xABC << 80) | 12345
ALPHA = 1e-4


def _histories(ch, person):
    """Each person's two histories A and B (module docstring), as cell indices (R × NIGHTS)."""
    h = ch._hashes(person, KEY)

    def history(first: int, then: int) -> np.ndarray:
        out = np.empty((R, NIGHTS), np.int64)
        for value, nights in ((first, range(15)), (then, range(15, NIGHTS))):
            ok = h == value
            order = np.argsort(~ok, axis=1, kind="stable")  # the person's cells hashing to `value` first
            k = np.maximum(ok.sum(axis=1), 1)
            for i, t in enumerate(nights):
                out[:, t] = order[np.arange(R), i % k]  # a new cell every night, cycling through them
        return out

    return history(0, 1), history(1, 0), h


def _support_of(ch, person, history, cells):
    """Each person's summed support of ``cells`` (one per night) by their reports under ``history``."""
    total = np.zeros(R, np.int64)
    for t in range(NIGHTS):
        reports = ch.reports(history[:, t] + 0.5, person, KEY)  # the cell's middle: domain (0, 20), 20 cells
        total += reports[np.arange(R), cells[:, t]]
    return total


def _loss_lower_bound(a: np.ndarray, b: np.ndarray) -> float:
    """max over the events {T ≥ t} and {T ≤ t}, both directions, of ln(P_a/P_b) bounded below at 1 − ALPHA."""
    thresholds = np.unique(np.r_[a, b])
    events = [(a >= t, b >= t) for t in thresholds] + [(a <= t, b <= t) for t in thresholds]
    alpha = ALPHA / (2 * len(events))
    return max(max(event_loss_lower_bound(int(x.sum()), int(y.sum()), R, alpha),
                   event_loss_lower_bound(int(y.sum()), int(x.sum()), R, alpha)) for x, y in events)


def test_thirty_changes_cost_the_cap_and_the_audit_finds_no_more():
    capped = CappedHistogram(1.0, CELLS, (0.0, 20.0), g=2)
    person = np.arange(R, dtype=np.uint64) + np.uint64(3 << 40)
    a, b, h = _histories(capped, person)
    both = ~((h == 0).all(axis=1) | (h == 1).all(axis=1))  # (a person whose cells all hash alike: 2·2⁻²⁰)
    assert (h[np.arange(R)[:, None], a][both] == np.r_[np.zeros(15), np.ones(15)]).all()  # the hashed pattern
    assert (np.diff(a[both], axis=1) != 0).mean() > 0.9  # the cell changes (almost) every night
    cap = capped.epsilon_spent()
    assert cap == pytest.approx(2 * capped.epsilon_memo()) and cap <= 1.0
    assert capped_spend(NIGHTS, cap, None) == cap  # the ledger's charge after 30 nights: the cap
    found = _loss_lower_bound(_support_of(capped, person, a, a), _support_of(capped, person, b, a))
    assert 0.85 * cap <= found <= cap, found


def test_the_uncapped_channel_at_the_same_epsilon_memo_is_seen_above_the_cap():
    capped = CappedHistogram(1.0, CELLS, (0.0, 20.0), g=2)
    uncapped = MemoHistogram(capped.epsilon_memo(), CELLS, (0.0, 20.0))
    person = np.arange(R, dtype=np.uint64) + np.uint64(3 << 40)
    a, b, _ = _histories(capped, person)
    found = _loss_lower_bound(_support_of(uncapped, person, a, a), _support_of(uncapped, person, b, a))
    assert found > capped.epsilon_spent(), found


# --- thirty nights: accuracy and coverage ------------------------------------------------------------------------
KEYS, N = 400, 5_000
#: Per night, 400 keys × 20 cells = 8,000 intervals; the cells of one release and the nights of one key are
#: correlated (shared reports), so at most about 4,000 count as independent: binomial sd ≤ 0.35%; the ±1.5% band
#: is 4.3 sd (≤ 2·10⁻⁵ a night, and the 30 nights of a key move together: ≤ 10⁻³ for the test).
BAND = 0.015


def _nights(seed: int):
    """30 nights of N persons' cells: 10% of them redrawn from the population's law each night."""
    rng = np.random.default_rng(seed)
    weights = rng.gamma(2.0, 1.0, CELLS)
    weights /= weights.sum()
    x = rng.choice(CELLS, N, p=weights)
    for night in range(NIGHTS):
        if night:
            move = rng.random(N) < 0.1
            x[move] = rng.choice(CELLS, int(move.sum()), p=weights)
        yield x + 0.5, np.bincount(x, minlength=CELLS) / N


def test_each_nights_intervals_cover_and_cost_little_accuracy():
    """Capped at ε_memo = 1 (g = 2, the series' cap 2) against the uncapped memoized unary encoding at ε_memo = 1:
    each night's 95% intervals cover within ±1.5%, and the per-night RMSE of the 20 shares is at most 1.2 times the
    uncapped one (closed form at a rare cell: 1.13; measured here 1.09 pooled, nights 1.07–1.11; the pooled ratio
    over 400 keys varies by about 1%, so 1.2 is some 7 sd away). Measured coverage per night: 0.948–0.956."""
    capped = CappedHistogram(2.0, CELLS, (0.0, float(CELLS)), g=2, instant=4.0)
    uncapped = MemoHistogram(1.0, CELLS, (0.0, float(CELLS)), instant=4.0)
    assert capped.epsilon_memo() == pytest.approx(1.0, abs=1e-6) and uncapped.epsilon_spent() <= 1.0
    person = np.arange(N, dtype=np.uint64) + np.uint64(7 << 40)
    rng = np.random.default_rng(99)
    hits = np.zeros(NIGHTS)
    squared = {capped.name: np.zeros(NIGHTS), uncapped.name: np.zeros(NIGHTS)}
    for key in range(KEYS):
        for night, (x, truth) in enumerate(_nights(key)):
            for ch in (capped, uncapped):
                stats, _ = ch.memo_stats(x, person, (key << 64) | 7)
                sums = ch.add_noise(stats, N, rng)["sum"]
                est = frequencies(Summary(ch, N, {"sum": np.asarray(sums, float)}, {"column": "x"}))
                squared[ch.name][night] += np.sum((est.raw - truth) ** 2)  # the unbiased estimators' errors
                if ch is capped:
                    hits[night] += np.sum((est.ci_low <= truth) & (truth <= est.ci_high))
    coverage = hits / (KEYS * CELLS)
    assert (np.abs(coverage - 0.95) <= BAND).all(), coverage
    ratio = np.sqrt(squared[capped.name].sum() / squared[uncapped.name].sum())
    assert ratio <= 1.2, ratio
