"""The default adaptive goodness-of-fit test: its collection of levels, its level, and its separation against
the best single level chosen with hindsight (docs/goodness-of-fit.md#the-adaptive-test).

The distributions here are not those of ``benchmarks/gof_power.py``: a Beta(5, 2) null, and a departure
that is uniform on [0.3, 0.55]. Seeds are fixed; each tolerance states its false-failure rate.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ldp_dask import LdpDaskError, gof
from ldp_dask.channels import ADAPTIVE_SPAN, HaarAdaptive, HaarLaplace, adaptive_levels
from ldp_dask.gof.calibration import critical_value, simulate_summary_statistic, summary_statistic
from ldp_dask.summary import Summary


def test_default_collection_is_the_stated_range():
    assert ADAPTIVE_SPAN == 4
    assert adaptive_levels(10**6, 1.0) == [1, 2, 3, 4]
    assert adaptive_levels(10**6, 1.0, span=None) == list(range(1, 14))  # 2^J ≤ (nε²)^{2/3}
    assert adaptive_levels(100, 0.5) == [1, 2, 3]  # (nε²)^{2/3} = 8.5: fewer levels when n ε² is small
    assert adaptive_levels(10**6, 1.0, span=6) == list(range(1, 7))
    with pytest.raises(LdpDaskError, match="'span'"):
        adaptive_levels(10**6, 1.0, span=0)
    assert HaarAdaptive.build(1.0, (0, 1), n=10**6).levels == [1, 2, 3, 4]


@pytest.mark.slow
def test_default_level_on_a_skewed_null():
    # 500 null data sets from Beta(5, 2), n = 20,000, ε = 1, B = 199 each: (B + 1)γ = 10, so the Monte-Carlo
    # test has exact level 0.05 and the count of rejections is Binomial(500, 0.05); accepted within its
    # two-sided 5·10⁻⁴ tails (false failure ≤ 5·10⁻⁴).
    R, B, n = 500, 199, 20_000
    ch = HaarAdaptive(1.0, adaptive_levels(n, 1.0), (0.0, 1.0))
    assert ch.levels == [1, 2, 3, 4] and ch.split == "details"
    rng = np.random.default_rng(35)
    rej = sum(gof.adaptive_test(Summary(ch, n, ch.stats(rng.beta(5, 2, n), rng), {}), "beta(5,2)", 0.05, B=B,
                                rng=rng).reject for _ in range(R))
    lo, hi = stats.binom.ppf(2.5e-4, R, 0.05), stats.binom.isf(2.5e-4, R, 0.05)
    assert lo <= rej <= hi, (rej / R, lo / R, hi / R)


def _best_single_level_lambda(n: int, eps: float, h: np.ndarray, rng: np.random.Generator) -> float:
    """Smallest mixture weight λ at which some single level J ≤ 6 (all n rows) has power 0.8 against
    (1 − λ) U(0, 1) + λ h, h given by its 2^6 bin probabilities: per J, bisection on λ with 4,000 data sets per
    step drawn from the exact law of the sums, and a critical value from 20,000 null draws."""
    best = 1.0
    for J in range(1, 7):
        ch = HaarLaplace(eps, J, (0, 1))
        p0, hj = np.full(1 << J, 2.0**-J), h.reshape(1 << J, -1).sum(axis=1)
        crit = critical_value(simulate_summary_statistic(n, p0, ch.noise_law, 20_000, rng), 0.05)[0]

        def power(lam: float, ch: HaarLaplace = ch, p0: np.ndarray = p0, hj: np.ndarray = hj,
                  crit: float = crit) -> float:
            N = rng.multinomial(n, (1 - lam) * p0 + lam * hj, size=4_000).astype(np.float64)
            S = ch.c * N + ch.noise_law.sums(rng, n, N.shape)
            return float(np.mean(summary_statistic(S, n, ch.c * p0, ch.noise_law) > crit))

        if power(best) < 0.8:
            continue
        lo, hi = 0.0, best
        for _ in range(14):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if power(mid) >= 0.8 else (mid, hi)
        best = hi
    return best


@pytest.mark.slow
def test_adaptive_reaches_power_at_one_and_a_half_times_the_best_single_separation():
    # The claim (docs/goodness-of-fit.md): the default adaptive test reaches power 0.8 within 1.5× the
    # separation of the best single level chosen with hindsight. Here, on a departure and a null the
    # benchmark does not use: f = (1 − λ) U(0, 1) + λ U(0.3, 0.55), n = 50,000, ε = 1. The best single level's
    # λ80 is found by simulation; the library's adaptive test (B = 199 per data set) is then run on 300 data
    # sets at 1.5 λ80, where the claim says its power is at least 0.8. Accepted above 0.8 − 3.1 × sd of a
    # Binomial(300, 0.8) rate (0.728): false failure ≤ 1·10⁻³ when the claim holds with power exactly 0.8
    # (less when it holds with room). Measured on this seed: 0.86 for the default; the nested test over
    # levels 1..10 (the default before, adaptive_levels(n, ε, span=None)) has power 0.43 here, so the check
    # can fail.
    n, eps, R = 50_000, 1.0, 300
    edges = np.linspace(0, 1, 65)
    h = np.diff(np.clip((edges - 0.3) / 0.25, 0, 1))
    rng = np.random.default_rng(3535)
    lam = 1.5 * _best_single_level_lambda(n, eps, h, rng)
    assert lam < 1
    ch = HaarAdaptive(eps, adaptive_levels(n, eps), (0.0, 1.0))
    rej = 0
    for _ in range(R):
        k = rng.binomial(n, lam)
        x = np.concatenate([rng.uniform(0, 1, n - k), rng.uniform(0.3, 0.55, k)])
        rej += gof.adaptive_test(Summary(ch, n, ch.stats(x, rng), {}), "uniform", 0.05, B=199, rng=rng).reject
    floor = 0.8 - 3.1 * math.sqrt(0.8 * 0.2 / R)
    assert rej / R >= floor, (rej / R, floor, lam)


def test_levels_reach_the_adaptive_test_from_raw_data(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(4)
    pq.write_table(pa.table({"x": rng.beta(2, 2, 4_000)}), tmp_path / "x.parquet")
    kw = dict(column="x", domain=(0.0, 1.0), epsilon=1.0, B=99, rng=1, ledger=None)
    res, s = gof.run(str(tmp_path / "x.parquet"), "uniform", adaptive=True, levels=[1, 2], **kw)
    assert res.J == [1, 2] and s.channel.levels == [1, 2]
    res, s = gof.run(str(tmp_path / "x.parquet"), "uniform", adaptive=True, **kw)
    assert res.J == [1, 2, 3, 4]
    with pytest.raises(LdpDaskError, match="'levels' parameter"):
        gof.run(str(tmp_path / "x.parquet"), "uniform", levels=[1, 2], **kw)
