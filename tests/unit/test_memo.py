"""Memoized channels and the ledger's per-person count of reports, checked against independent references.

The kernels are compared with the vectorized numpy Philox (itself checked against numpy's own generator), the
thresholds with the ε formula, the α-point rounding with its exact expectation, the ledger's merge with a count
made by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldp_dask import LdpDaskError
from ldp_dask import _memo_kernels as K
from ldp_dask.channels import (
    LaplaceHistogram,
    LaplaceMean,
    MemoFrequencies,
    MemoHistogram,
    MemoMean,
    RandomizedResponse,
    memoized,
)
from ldp_dask.channels.memo import SCALE, bit_thresholds, flip_threshold, unary_thresholds
from ldp_dask.ledger.memos import MemoState, merge, spend_of, spend_quantiles
from ldp_dask.noise import philox_blocks

KEY = (0x0123456789ABCDEF << 64) | 0xFEDCBA9876543210


def _block(person, state, lane, use):
    n = len(person)
    c = np.stack([person, np.asarray(state, np.uint64), np.full(n, lane, np.uint64), np.full(n, use, np.uint64)], 1)
    return philox_blocks(KEY, c)


def _uniforms(person, state, lane, use):
    """The eight 32-bit uniforms of each (person, state, lane, use) block, by the numpy Philox."""
    w = _block(person, state, lane, use)
    u = np.empty((len(person), 8), np.uint64)
    u[:, 0::2], u[:, 1::2] = w & np.uint64(0xFFFFFFFF), w >> np.uint64(32)
    return u


def test_the_unary_kernel_draws_the_bits_and_digests_of_the_numpy_philox():
    rng = np.random.default_rng(1)
    person = rng.integers(0, 2**63, 500, dtype=np.uint64)
    ch = MemoHistogram(1.5, 19, (0.0, 1.0))
    x = rng.random(500)
    stats, pairs = ch.memo_stats(x, person, KEY)
    state = np.minimum((x * 19).astype(int), 18)
    expected = np.zeros(19, np.int64)
    for lane in range(3):
        u = _uniforms(person, state, lane, K.USE_BITS)
        for t in range(8):
            j = lane * 8 + t
            if j < 19:
                expected[j] += np.count_nonzero(u[:, t] < np.where(state == j, ch.t_in, ch.t_out).astype(np.uint64))
    assert np.array_equal(stats["sum"], expected)
    zero = np.zeros(500, np.uint64)
    assert np.array_equal(pairs[:, 0], _block(person, zero, 0, K.USE_PERSON)[:, 0])
    assert np.array_equal(pairs[:, 1], _block(person, state, 0, K.USE_DIGEST)[:, 0])


def test_the_mean_kernel_rounds_by_each_persons_alpha_and_draws_one_bit():
    rng = np.random.default_rng(2)
    person = rng.integers(0, 2**63, 400, dtype=np.uint64)
    ch = MemoMean(0.7, (-5.0, 5.0), levels=3)
    x = rng.uniform(-5, 5, 400)
    stats, pairs = ch.memo_stats(x, person, KEY)
    zero = np.zeros(400, np.uint64)
    w = philox_blocks(KEY, np.stack([person, zero, zero, np.full(400, K.USE_ALPHA, np.uint64)], 1))[:, 0]
    alpha = (w >> np.uint64(11)).astype(np.float64) / 2.0**53
    t = (x + 5) * 3 / 10
    c = np.minimum(np.floor(t), 2)
    z = (c + (t - c >= 1 - alpha)).astype(np.int64)
    u = _uniforms(person, z, 0, K.USE_BITS)[:, 0]
    assert stats["sum"][0] == np.count_nonzero(u < ch.thresholds[z])
    assert np.array_equal(pairs[:, 1], _block(person, z, 0, K.USE_DIGEST)[:, 0])


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 5.0])
def test_epsilon_is_computed_from_the_thresholds_and_never_exceeds_the_request(eps):
    t_in, t_out = unary_thresholds(eps)
    spent = math.log(t_in * (SCALE - t_out)) - math.log((SCALE - t_in) * t_out)
    assert spent <= eps and eps - spent < 1e-6
    assert MemoHistogram(eps, 8, (0, 1)).epsilon_spent() == pytest.approx(spent, abs=1e-12)
    thr = bit_thresholds(eps, 7).astype(object)  # exact integers
    assert thr[0] + thr[-1] == SCALE and len(set(np.diff(thr))) == 1  # linear in the level, symmetric
    assert math.log((SCALE - thr[0]) / thr[0]) <= eps
    assert eps - MemoMean(eps, (0, 1), levels=7).epsilon_spent() < 1e-6
    t = flip_threshold(eps)
    assert math.log((SCALE - t) / t) <= eps < math.log((SCALE - t + 1) / (t - 1))


def test_the_instantaneous_layer_lowers_a_nights_epsilon_and_bounds_any_change():
    plain = MemoFrequencies(1.0, ["a", "b", "c"])
    both = MemoFrequencies(1.0, ["a", "b", "c"], instant=2.0)
    assert plain.night_epsilon() == pytest.approx(plain.epsilon_spent())
    p, q = both.report_probabilities  # the two layers composed by hand
    r = 1 / (math.exp(2.0) + 1)
    assert p == pytest.approx(0.5, abs=1e-9) and q == pytest.approx((1 - r) / (math.e + 1) + r * math.e / (math.e + 1),
                                                                     rel=1e-7)
    assert both.night_epsilon() < plain.epsilon_spent()
    assert both.epsilon_bits() == pytest.approx(3 * 2.0, rel=1e-8) and math.isinf(plain.epsilon_bits())
    # the ledger's spend with the channels' ε: min(reports·ε_memo, nights·ε_bits)
    state = MemoState(np.empty((0, 2), np.uint64), np.array([1, 2], np.uint64), np.array([1, 3]), np.array([30, 30]))
    assert np.allclose(spend_of(state, plain.epsilon_spent(), None), [1.0, 3.0], atol=1e-8)
    mean = MemoMean(2.0, (0, 1), instant=0.1)
    state = MemoState(state.pairs, state.persons, np.array([1, 2]), np.array([1, 30]))
    assert np.allclose(spend_of(state, mean.epsilon_spent(), mean.epsilon_bits()), [0.1, 3.0], rtol=1e-6)


def test_a_person_repeats_the_report_of_a_state_whatever_the_order_and_company():
    rng = np.random.default_rng(3)
    person = rng.integers(0, 2**63, 1000, dtype=np.uint64)
    x = rng.random(1000)
    ch = MemoHistogram(1.0, 10, (0, 1))
    _, pairs = ch.memo_stats(x, person, KEY)
    order = rng.permutation(1000)[:600]
    stats, again = ch.memo_stats(x[order], person[order], KEY)
    assert np.array_equal(again, pairs[order])
    assert np.array_equal(ch.memo_stats(x[order], person[order], KEY)[0]["sum"], stats["sum"])
    moved = x.copy()
    moved[:10] = (moved[:10] + 0.5) % 1.0  # ten persons change cell
    _, after = ch.memo_stats(moved, person, KEY)
    assert np.array_equal(after[:, 0], pairs[:, 0])
    assert (after[:10, 1] != pairs[:10, 1]).all() and np.array_equal(after[10:, 1], pairs[10:, 1])
    _, other = ch.memo_stats(x, person, KEY ^ 1)  # another series' key: every report new
    assert not np.isin(other[:, 1], pairs[:, 1]).any()


def test_alpha_point_rounding_is_unbiased_and_moves_only_at_the_persons_alpha_point():
    ch = MemoMean(1.0, (0.0, 10.0), levels=4)
    alpha = (np.arange(10_000) + 0.5) / 10_000  # α uniform on a fine grid: the expectation exactly
    for x in (0.0, 1.3, 2.5, 7.77, 10.0):
        z = ch.levels_of(np.full(10_000, x), alpha)
        assert z.mean() * 10 / 4 == pytest.approx(x, abs=1e-3)
    a = np.array([0.3])
    # in the cell [2.5, 5): t = x·4/10; the point moves from 1 to 2 where the fraction passes 1 − α = 0.7
    assert ch.levels_of(np.array([4.2]), a)[0] == 1 and ch.levels_of(np.array([4.3]), a)[0] == 2
    assert ch.levels_of(np.array([2.6]), a)[0] == ch.levels_of(np.array([4.2]), a)[0] == 1


def test_memoized_maps_each_one_night_channel_to_its_memoized_form():
    from ldp_dask.channels import CappedFrequencies, CappedHistogram, CappedMean

    # capped by default: ε is the series' whole cost
    assert memoized(LaplaceHistogram(1.0, 12, (0, 3))) == CappedHistogram(1.0, 12, (0, 3), g=2)
    assert memoized(RandomizedResponse(0.5, ["x", "y", "z"]), instant=2.0) == CappedFrequencies(
        0.5, ["x", "y", "z"], instant=2.0, g=2)
    assert memoized(LaplaceMean(2.0, (0, 9)), levels=3) == CappedMean(2.0, (0, 9), 3)
    # uncapped: ε per distinct report
    assert memoized(LaplaceHistogram(1.0, 12, (0, 3)), capped=False) == MemoHistogram(1.0, 12, (0, 3))
    assert memoized(RandomizedResponse(0.5, ["x", "y"], other=True, encoding="oue"), capped=False) == MemoFrequencies(
        0.5, ["x", "y"], True)
    assert memoized(RandomizedResponse(0.5, ["x", "y"]), capped=False) == MemoFrequencies(0.5, ["x", "y"],
                                                                                          encoding="kary")
    assert memoized(LaplaceMean(2.0, (0, 9)), levels=3, instant=1.0, capped=False) == MemoMean(2.0, (0, 9), 3, 1.0)
    with pytest.raises(LdpDaskError, match="no memoized form"):
        from ldp_dask.channels import WaveletLaplace

        memoized(WaveletLaplace(1.0, (0, 1), j0=2, j1=4))
    with pytest.raises(LdpDaskError, match="longitudinal release only"):
        MemoMean(1.0, (0, 1)).privatize(np.zeros(3), np.random.default_rng(0))
    with pytest.raises(LdpDaskError, match="'levels'"):
        MemoMean(1.0, (0, 1), levels=0)


def test_the_ledger_counts_each_persons_distinct_reports_and_nights():
    a, b, c = np.uint64(11), np.uint64(22), np.uint64(33)
    nights = [np.array([[a, 1], [b, 5]], np.uint64),
              np.array([[a, 1], [b, 6], [c, 9]], np.uint64),
              np.array([[a, 1], [b, 5], [c, 9]], np.uint64)]  # b returns to a report released before
    state = None
    for pairs in nights:
        state = merge(state, pairs)
    restored = MemoState.from_bytes(state.to_bytes())
    assert restored.persons.tolist() == [11, 22, 33]
    assert restored.reports.tolist() == [1, 2, 1] and restored.nights.tolist() == [3, 3, 2]
    spend = spend_of(restored, 0.5, None)
    assert spend.tolist() == [0.5, 1.0, 0.5]
    assert spend_of(restored, 0.5, 0.2).tolist() == pytest.approx([0.5, 0.6, 0.4])  # min(reports·0.5, nights·0.2)
    q = spend_quantiles(spend)
    assert q["persons"] == 3 and q["max"] == 1.0 and q["p50"] == 0.5


@pytest.mark.parametrize("ch", [MemoHistogram(0.8, 21, (0, 1)), MemoFrequencies(2.0, list(range(5))),
                                MemoFrequencies(0.7, list(range(5)), encoding="kary"),
                                MemoMean(1.0, (0, 1), levels=5)], ids=lambda c: f"{c.name}-{c.params()}")
def test_the_kernels_sums_are_the_sums_of_the_persons_reports(ch):
    rng = np.random.default_rng(4)
    person = rng.integers(0, 2**63, 3000, dtype=np.uint64)
    x = rng.integers(0, 5, 3000) if ch.name == "memo-rr" else rng.random(3000)
    stats, _ = ch.memo_stats(x, person, KEY)
    assert np.array_equal(stats["sum"], ch.reports(x, person, KEY).sum(axis=0))


def _rot(m):
    return ((m << np.uint64(17)) | (m >> np.uint64(47))).astype(np.uint64)


def test_the_ledgers_fast_merge_equals_the_exact_one_night_after_night_even_on_a_shared_hash():
    from ldp_dask.ledger.memos import _merge_exact, _pair_hash

    rng = np.random.default_rng(5)
    persons = rng.integers(0, 2**63, 5000, dtype=np.uint64)
    memo = rng.integers(0, 2**63, 5000, dtype=np.uint64)
    fast = exact = None
    for night in range(6):
        change = rng.random(5000) < 0.2
        memo = np.where(change, rng.integers(0, 2**63, 5000, dtype=np.uint64), memo)
        present = rng.random(5000) < 0.9  # some persons miss a night
        tonight = np.stack([persons[present], memo[present]], 1)
        if night == 4:  # a pair whose hash equals a stored pair's (p ^ rot(m) is what the hash mixes)
            p1, m1 = fast.pairs[0]
            m2 = np.uint64(12345)
            crafted = np.array([[p1 ^ _rot(np.array([m1]))[0] ^ _rot(np.array([m2]))[0], m2]], np.uint64)
            assert _pair_hash(crafted)[0] == _pair_hash(fast.pairs[:1])[0]
            tonight = np.concatenate([tonight, crafted, tonight[:3]])  # and three pairs twice
        fast, exact = merge(fast, tonight), _merge_exact(exact, tonight)
        for name in ("persons", "reports", "nights"):
            assert np.array_equal(getattr(fast, name), getattr(exact, name)), (night, name)
        assert len(fast.pairs) == len(exact.pairs)
    assert exact.reports.max() >= 2 and exact.nights.max() == 6


def test_the_kernels_use_counters_agree_with_the_channels():
    from ldp_dask.channels import memo

    assert (memo.USE_BITS, memo.USE_ALPHA) == (K.USE_BITS, K.USE_ALPHA)


@pytest.mark.parametrize("d", [2, 5, 64])
@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0])
def test_the_kary_memo_spends_at_most_its_epsilon_and_its_layers_compose(d, eps):
    from ldp_dask.channels.memo import kary_threshold

    t = kary_threshold(eps, d)
    spent = math.log(t * (d - 1)) - math.log(SCALE - t)
    assert spent <= eps and eps - spent < 1e-6 and math.log((t + 1) * (d - 1)) - math.log(SCALE - t - 1) > eps
    ch = MemoFrequencies(eps, list(range(d)), encoding="kary", instant=1.5)
    p, q = ch.report_probabilities  # the two layers by hand: keep the memo with q_I, else move uniformly
    pm, qi = t / SCALE, ch._irr.p_in
    assert p == pytest.approx(pm * qi + (1 - pm) * (1 - qi) / (d - 1), rel=1e-12)
    assert p + (d - 1) * q == pytest.approx(1.0, rel=1e-12)  # one report among d categories
    assert ch.epsilon_bits() <= 1.5 and ch.night_epsilon() < spent


def test_one_nights_predicted_error_is_the_estimators_at_the_typical_share():
    from ldp_dask.predict import predict

    ch = MemoFrequencies(1.0, list(range(4)), encoding="kary", instant=2.0)
    p_in, p_out = ch.report_probabilities
    pi = p_out + (p_in - p_out) / 4
    assert predict(ch, 10_000).se == pytest.approx(math.sqrt(pi * (1 - pi) / 10_000) / (p_in - p_out))
    mean = MemoMean(1.0, (0, 10))
    # 1BitMean at ε: Var ≤ (10·(e^ε + 1)/(e^ε − 1))²/4 per report
    assert predict(mean, 10_000).se == pytest.approx(10 * (math.e + 1) / (math.e - 1) / 2 / 100, rel=1e-6)


@pytest.mark.parametrize("g", [2, 3])
@pytest.mark.parametrize("cells", [7, 20, 300])
def test_the_capped_kernels_sum_what_the_numpy_reference_draws(g, cells):
    """The fused kernel's supports are the numpy Philox reference's per-person supports, summed (g = 2 counts a
    byte of cells at once, other g cell by cell; 300 cells need two hash blocks for g = 2, 38 for g = 3); the
    layer's supports of unchanged reports equal the memoized ones; each person supports their own cell's hash."""
    from ldp_dask.channels import CappedHistogram

    ch = CappedHistogram(1.0, cells, (0.0, 1.0), g=g)
    rng = np.random.default_rng(g * 1000 + cells)
    x, person = rng.uniform(0, 1, 5_000), rng.integers(0, 2**63, 5_000).astype(np.uint64)
    stats, pairs = ch.memo_stats(x, person, 0xFEED)
    reports = ch.reports(x, person, 0xFEED)
    assert pairs.shape == (0, 2) and (reports.sum(axis=0) == stats["sum"]).all() and set(stats) == {"sum"}
    layered = CappedHistogram(1.0, cells, (0.0, 1.0), g=g, instant=2.0)  # the same memoized reports, kept
    stats = layered.memo_stats(x, person, 0xFEED)[0]
    assert (stats["sum"] == reports.sum(axis=0)).all()
    assert (ch._supports(person, stats["memo"], stats["key"]) == stats["sum"]).all()
    hashes = ch._hashes(person, 0xFEED)
    own = hashes[np.arange(len(x)), ch._states(x)]
    assert ((own == stats["memo"]) == reports[np.arange(len(x)), ch._states(x)].astype(bool)).all()
    # a person's hash of a cell is uniform on the g values (and the report keeps it with p₁ ≈ e^{ε/g}/(e^{ε/g}+g−1))
    assert abs(np.mean(hashes == 0) - 1 / g) < 4 * np.sqrt(1 / g / hashes.size) + 1e-3
    p1 = np.exp(0.5 if g == 2 else 1 / 3) / (np.exp(0.5 if g == 2 else 1 / 3) + g - 1)
    assert abs(np.mean(own == stats["memo"]) - p1) < 4 * np.sqrt(p1 * (1 - p1) / len(x))
