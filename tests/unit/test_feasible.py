"""Every printed mean is a possible mean: the estimate lies in the domain, its interval too, and the interval holds it;
the unbiased estimate stays available as ``raw``."""

from __future__ import annotations

import numpy as np
import pytest

import ldp_dask
from ldp_dask.channels import HybridMean, LaplaceMean, MemoMean
from ldp_dask.estimators import mean
from ldp_dask.summary import Summary


def test_a_mean_below_its_domain_is_shown_at_its_end_with_the_unbiased_one_kept():
    """The reported case: a counter on [0, 1000] whose noisy mean came out at −90 was printed as −90 with the
    interval [0, 370] — a point outside its own interval and outside the domain."""
    ch = LaplaceMean(0.5, (0.0, 1000.0))
    est = mean(Summary(ch, 30, {"sum": np.array([-90.0 * 30])}, {"column": "flights"}))
    assert est.raw == pytest.approx(-90.0) and est.value == 0.0
    assert est.ci[0] == 0.0 and est.ci[0] <= est.value <= est.ci[1] <= 1000.0
    assert est.to_dict()["value"] == 0.0 and est.to_dict()["raw"] == pytest.approx(-90.0)
    assert est.to_table().column("raw").to_pylist() == [pytest.approx(-90.0)]
    text = str(est.describe())
    assert "-90" in text and "mostly noise" in text and "outside the domain" in text, text


def test_an_interval_wholly_outside_the_domain_becomes_its_nearest_end():
    ch = LaplaceMean(4.0, (0.0, 1.0))
    est = mean(Summary(ch, 10_000, {"sum": np.array([-0.5 * 10_000])}, {"column": "x"}))  # θ̂ = −0.5, se ≈ 0.007
    assert est.value == 0.0 and est.ci == (0.0, 0.0)
    inside = mean(Summary(ch, 10_000, {"sum": np.array([0.4 * 10_000])}, {"column": "x"}))
    assert inside.value == inside.raw == pytest.approx(0.4)
    assert not any("outside the domain" in w for w in inside.warnings)


@pytest.mark.parametrize("channel", ["mean", "hybrid-mean", "memo-mean"])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("n", [5, 30, 10_000])
def test_every_mean_is_possible_on_data_at_one_end(channel, epsilon, n):
    """Data all at one end of the domain, small n and small ε — where the noise pushes θ̂ out of the domain most
    often: over 10 keys each, every estimate and interval end lies in [lo, hi] and every interval holds its estimate
    (and, where θ̂ left the domain, a warning says so)."""
    lo, hi = -50.0, 1000.0
    for end in (lo, hi):
        x = np.full(n, end)
        for seed in range(10):
            if channel == "memo-mean":
                ch = MemoMean(epsilon, (lo, hi))
                person = np.arange(n, dtype=np.uint64) + np.uint64(seed << 32)
                stats, _ = ch.memo_stats(x, person, (seed + 1) << 64)
                s = Summary(ch, n, {"sum": stats["sum"].astype(float)}, {"column": "x"})
            else:
                cls = LaplaceMean if channel == "mean" else HybridMean
                s = ldp_dask.privatize(x, channel=cls(epsilon, (lo, hi)), seed=seed, ledger=False)
            est = mean(s)
            assert lo <= est.value <= hi and lo <= est.ci[0] <= est.value <= est.ci[1] <= hi, (est.raw, est.ci)
            assert (est.raw == est.value) or any("outside the domain" in w for w in est.warnings)
