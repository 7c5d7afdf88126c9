"""Estimator accuracy against the truth, with tolerances from the variances in docs/estimators.md."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

import ldp_dask
from ldp_dask import LaplaceHistogram, LaplaceMean
from ldp_dask.estimators import project_simplex


def test_histogram_bins_within_their_standard_errors():
    # p̂_j is unbiased with Var = (p_j(1-p_j) + 2 b²)/n (docs/estimators.md). With K = 20 bins and
    # |z| < 4.5 per bin, a correct estimator fails with probability < 20 · 6.8e-6 = 1.4e-4.
    n, K, eps = 200_000, 20, 1.0
    law = stats.beta(2, 5)
    x = law.rvs(size=n, random_state=np.random.default_rng(1))
    ch = LaplaceHistogram(eps, K, (0.0, 1.0))
    est = ldp_dask.histogram_density(ldp_dask.privatize(x, channel=ch, seed=11), projection="none")
    p = np.diff(law.cdf(ch.edges))
    sd = np.sqrt((p * (1 - p) + ch.noise_variance) / n)
    z = (est.masses - p) / sd
    assert np.all(np.abs(z) < 4.5), z
    # the reported standard errors match the theory (plug-in p̂ instead of p)
    np.testing.assert_allclose(est.se * (1.0 / K), sd, rtol=0.02)


@pytest.mark.slow  # a coverage/law check of seconds: in make test, not test-fast
def test_histogram_l2_risk_matches_theory():
    # E‖p̂ − p‖² = Σ_j (p_j(1−p_j) + 2b²)/n; over 200 replicates the mean squared error
    # has relative sd ≈ sqrt(2/(200·K))·(1+...) < 3%; we allow 4 such sds (12%).
    n, K, eps, reps = 20_000, 10, 0.5, 200
    ch = LaplaceHistogram(eps, K, (0.0, 1.0))
    rng = np.random.default_rng(2)
    p = np.full(K, 1.0 / K)
    errs = []
    for r in range(reps):
        x = rng.uniform(0, 1, n)
        s = ldp_dask.privatize(x, channel=ch, seed=1000 + r)
        errs.append(np.sum((s.sums["sum"] / n - p) ** 2))
    theory = np.sum(p * (1 - p) + ch.noise_variance) / n
    assert abs(np.mean(errs) / theory - 1) < 0.12


def test_simplex_projection_is_a_probability_vector_and_never_hurts():
    rng = np.random.default_rng(3)
    for _ in range(200):
        p = rng.dirichlet(np.ones(15))
        noisy = p + rng.normal(0, 0.05, 15)
        q = project_simplex(noisy)
        assert np.all(q >= 0) and abs(q.sum() - 1) < 1e-12
        assert np.linalg.norm(q - p) <= np.linalg.norm(noisy - p) + 1e-12
    # a point already on the simplex is its own projection
    np.testing.assert_allclose(project_simplex(np.array([0.2, 0.3, 0.5])), [0.2, 0.3, 0.5])


def test_projected_estimate_is_a_density_with_consistent_cdf_and_quantiles():
    x = np.random.default_rng(4).normal(0.5, 0.1, 100_000).clip(0, 1)
    s = ldp_dask.privatize(x, channel=LaplaceHistogram(1.0, 16, (0.0, 1.0)), seed=4)
    est = ldp_dask.histogram_density(s)
    assert np.all(est.density >= 0)
    assert abs(np.sum(est.masses) - 1) < 1e-12
    q = est.quantile([0.1, 0.5, 0.9])
    np.testing.assert_allclose(est.cdf(q), [0.1, 0.5, 0.9], atol=1e-9)
    assert abs(q[1] - 0.5) < 0.05  # the median of N(0.5, 0.1) within half a bin-ish
    d = json.loads(json.dumps(est.to_dict()))  # plain JSON, nothing numpy left in it
    assert np.array_equal(d["density"], est.density) and np.array_equal(d["band_lo"], est.band()[0])


@pytest.mark.slow  # a coverage/law check of seconds: in make test, not test-fast
def test_mean_interval_covers_at_nominal_rate():
    # 400 replicates at nominal 95%: the coverage sd is sqrt(.95·.05/400) = 1.1%; the interval is
    # conservative by construction, so only a low coverage should fail: one-sided at 3.3 sd, false
    # failure < 5e-4.
    law = stats.beta(2, 5)
    ch = LaplaceMean(1.0, (0.0, 1.0))
    rng = np.random.default_rng(5)
    hits, widths = 0, []
    for r in range(400):
        x = law.rvs(size=2_000, random_state=rng)
        m = ldp_dask.mean(ldp_dask.privatize(x, channel=ch, seed=r))
        hits += m.ci[0] <= law.mean() <= m.ci[1]
        widths.append(m.ci[1] - m.ci[0])
    assert hits / 400 >= 0.95 - 3.3 * 0.011
    # and it is not vacuous: width ≈ 2·1.96·sqrt((Var_bound + 2b²)/n) < 0.2 here
    assert np.median(widths) < 0.2


@pytest.mark.parametrize("eps, widest", [(1.0, 1.061), (2.0, 1.225)])
def test_mean_interval_inflation_at_worst_is_as_documented(eps, widest):
    # Var X = 0 at the middle of the domain: the Bhatia–Davis bound adds (b − a)²/4 to the privacy term
    # v = 2(b − a)²/ε², so se / (true sd) = √(1 + ε²/8) (docs/estimators.md) on doubles; θ̂ moves the bound by
    # O(1/n) only. 10^6 rows: the noise moves θ̂ by ~3e-3 at ε = 1, changing the ratio by < 1e-4.
    ch = LaplaceMean(eps, (0.0, 1.0), noise="continuous")
    n = 1_000_000
    m = ldp_dask.mean(ldp_dask.privatize(np.full(n, 0.5), channel=ch, seed=1))
    ratio = m.se / np.sqrt(ch.noise_variance / n)
    assert abs(ratio - np.sqrt(1 + eps**2 / 8)) < 1e-3 and abs(ratio - widest) < 1e-3, ratio


def test_mean_error_within_theory():
    # θ̂ − μ has sd sqrt((Var X + Var noise)/n) (docs/estimators.md; Var noise = 2b² on doubles, slightly less
    # on the lattice); |z| < 4.5 fails w.p. 6.8e-6.
    law = stats.uniform(-2, 6)  # on [-2, 4]
    n = 500_000
    x = law.rvs(size=n, random_state=np.random.default_rng(6))
    ch = LaplaceMean(0.5, (-2.0, 4.0))
    m = ldp_dask.mean(ldp_dask.privatize(x, channel=ch, seed=6))
    sd = np.sqrt((law.var() + ch.noise_variance) / n)
    assert abs(m.value - law.mean()) / sd < 4.5
    assert m.se >= sd  # the Bhatia–Davis bound is conservative


def test_estimators_refuse_the_wrong_summary():
    x = np.random.default_rng(0).uniform(0, 1, 1000)
    s = ldp_dask.privatize(x, channel=LaplaceMean(1.0, (0, 1)), seed=0)
    with pytest.raises(ldp_dask.LdpDaskError, match="histogram"):
        ldp_dask.histogram_density(s)
    h = ldp_dask.privatize(x, channel=LaplaceHistogram(1.0, 4, (0, 1)), seed=0)
    with pytest.raises(ldp_dask.LdpDaskError, match="mean"):
        ldp_dask.mean(h)
    with pytest.raises(ldp_dask.LdpDaskError, match="'level'"):
        ldp_dask.mean(s, level=1.5)


def test_density_plot_and_distance(tmp_path):
    x = np.random.default_rng(8).uniform(0, 1, 50_000)
    est = ldp_dask.histogram_density(ldp_dask.privatize(x, channel=LaplaceHistogram(2.0, 8, (0, 1)), seed=8))
    path = tmp_path / "d.png"
    est.plot(str(path), truth=lambda t: np.ones_like(t))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the distance to U(0,1) is the bins' |f̂_j − 1| integrated exactly (the estimate is piecewise constant)
    l1, linf = est.distance(lambda t: np.ones_like(t), r=1), est.distance(lambda t: np.ones_like(t), r=np.inf)
    assert abs(l1 - np.sum(np.abs(est.density - 1) * est.widths)) < 1e-9
    assert abs(linf - np.max(np.abs(est.density - 1))) < 1e-12 and l1 < 0.1


@pytest.mark.slow  # a coverage/law check of seconds: in make test, not test-fast
def test_histogram_band_covers_the_bin_probabilities():
    # The printed band is p̂_j ± 1.96·se_j per bin. Over 400 data sets of Beta(2,5) (not the uniform the
    # defaults were tuned on) and 10 bins, the pooled coverage must reach 95% up to sampling error.
    # Bins of one data set are dependent, so the standard error is taken as if only the 400 data sets
    # counted (sd ≤ 1.1%): one-sided at 3.3 of those sd, false failure < 5e-4.
    law = stats.beta(2, 5)
    K, n, reps = 10, 20_000, 400
    ch = LaplaceHistogram(1.0, K, (0.0, 1.0))
    p = np.diff(law.cdf(ch.edges))
    rng = np.random.default_rng(11)
    hits = 0
    for r in range(reps):
        est = ldp_dask.histogram_density(ldp_dask.privatize(law.rvs(n, random_state=rng), channel=ch, seed=r),
                                         projection="none")
        lo, hi = (v / K for v in est.band())  # density band → bin-probability band
        hits += int(np.sum((lo <= p) & (p <= hi)))
    assert hits / (K * reps) >= 0.95 - 3.3 * np.sqrt(0.95 * 0.05 / reps), hits / (K * reps)


def test_density_warning_window_matches_a_convolution_and_is_computed_once():
    """The domain warning's window mass, by a running sum, against np.convolve (the slow oracle), on estimates
    built from released-looking densities; and ``warnings`` is computed once per estimate."""
    from ldp_dask.estimators.results import MASS_WARNING, DensityEstimate

    rng = np.random.default_rng(11)
    for bins in (7, 20, 21, 400, 4096):
        for spike in (False, True):
            density = rng.gamma(2.0, 1.0, bins) - 0.5  # a few negative noisy bins, clipped by the rule
            if spike:
                density[bins // 3] += 50.0 * bins
            edges = np.linspace(0.0, 1.0, bins + 1)
            est = DensityEstimate(edges, density, np.ones(bins), "histogram", 1000, 1.0)
            mass = np.clip(density, 0, None) * np.diff(edges)
            k = max(1, int(np.ceil(bins / 20)))
            window = np.convolve(mass, np.ones(k), mode="valid") / mass.sum()
            expected = bool(window.max() > MASS_WARNING)
            assert bool(est.warnings) == expected, (bins, spike)
            if expected:
                assert f"{window.max():.0%} of the estimated mass" in est.warnings[0]
            assert est.warnings is est.warnings  # cached: a second access does no work
