"""Bounded means by the Piecewise, Duchi and Hybrid mechanisms (Wang et al. 2019; Duchi, Jordan and Wainwright
2018; docs/channels.md): each view's law against the papers' densities, unbiasedness with the closed-form
variance, summary mode against per-row privatization, the lattice, interval coverage on data the estimator was
not tuned on, the command line and bad input. (Audits: tests/statistical/test_audit.py; the Dask path: tests/integration/test_pipeline.py.)

False-failure rates (fixed seeds; what a correct implementation would suffer with a random seed): KS and
binomial tests at α = 10⁻³ each, Bonferroni-split within a test; mean checks at 4.5 standard errors (7·10⁻⁶
each); variance checks at 4.5 standard deviations of a sample variance (from the views' kurtosis); the coverage test one-sided
at 3.3 sd (5·10⁻⁴)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

import ldp_dask
from ldp_dask import LdpDaskError
from ldp_dask.channels import HybridMean, LaplaceMean, build_channel
from ldp_dask.estimators import mean

ALPHA = 1e-3
MECHS = ("hybrid", "piecewise", "duchi")


def _pm_cdf(y: np.ndarray, t: float, eps: float) -> np.ndarray:
    """The Piecewise mechanism's CDF at y for input t, from the paper's density (Wang et al. 2019, Alg. 2)."""
    h = math.exp(eps / 2)
    c = (h + 1) / (h - 1)
    p = (math.exp(eps) - h) / (2 * h + 2)
    left = (c + 1) / 2 * t - (c - 1) / 2
    right = left + c - 1
    lo_part = np.clip(y, -c, left) + c
    band = np.clip(y, left, right) - left
    hi_part = np.clip(y, right, c) - right
    return p / math.exp(eps) * (lo_part + hi_part) + p * band


@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0])
def test_privacy_parameters(eps):
    for mech in MECHS:
        ch = HybridMean(eps, (0.0, 1.0), mechanism=mech)
        assert eps * (1 - 1e-12) <= ch.epsilon_spent() <= eps, mech
    ch = HybridMean(eps, (0.0, 1.0))
    assert ch.beta == pytest.approx(1 - math.exp(-eps / 2) if eps > 0.61 else 0.0, rel=1e-12, abs=0)
    # the hybrid's worst case is no worse than either mechanism's and below the Laplace mean's 8/ε²
    worst = {m: HybridMean(eps, (0.0, 1.0), mechanism=m).worst_variance() for m in MECHS}
    assert worst["hybrid"] <= min(worst["piecewise"], worst["duchi"]) + 1e-12 and worst["hybrid"] < 8 / eps**2


@pytest.mark.parametrize("t", [-1.0, -0.3, 0.0, 0.8, 1.0])
def test_piecewise_views_follow_the_papers_density(t):
    eps = 1.3
    ch = HybridMean(eps, (-1.0, 1.0), mechanism="piecewise", noise="continuous")
    y = ch.draw(np.full(50_000, t), np.random.default_rng(int(10 * t) + 20))
    assert stats.kstest(y, lambda v: _pm_cdf(v, t, eps)).pvalue > ALPHA / 5


@pytest.mark.parametrize("t", [-1.0, 0.2, 1.0])
def test_duchi_views_follow_their_law(t):
    eps = 0.8
    ch = HybridMean(eps, (-1.0, 1.0), mechanism="duchi")
    b = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    y = ch.draw(np.full(50_000, t), np.random.default_rng(3))
    assert np.all(np.isclose(np.abs(y), b, rtol=1e-15))
    plus = int(np.count_nonzero(y > 0))
    assert stats.binomtest(plus, len(y), (1 + t / b) / 2).pvalue > ALPHA / 3


@pytest.mark.parametrize("mech", MECHS)
@pytest.mark.parametrize("noise", ["lattice", "continuous"])
def test_views_are_unbiased_with_the_closed_form_variance(mech, noise):
    # 200,000 views at each of three inputs: the mean within 4.5 standard errors; the sample variance within the
    # its standard deviation from the views' kurtosis, 4.5 sd
    ch = HybridMean(2.0, (10.0, 30.0), mechanism=mech, noise=noise)
    rng = np.random.default_rng(4)
    for t in (-0.9, 0.0, 0.7):
        z = ch.draw(np.full(200_000, t), rng)
        v = float(ch.row_variance(t))
        assert abs(z.mean() - t) <= 4.5 * math.sqrt(v / len(z)), (t, z.mean())
        kurt, n = stats.kurtosis(z, fisher=False), len(z)
        sd_rel = math.sqrt((kurt - (n - 3) / (n - 1)) / n)  # sd of s²/σ², Var s² = σ⁴(κ − (n − 3)/(n − 1))/n
        assert abs(z.var(ddof=1) / v - 1) <= 4.5 * sd_rel, (t, z.var(), v)
        if noise == "lattice":
            pm = ~np.isclose(np.abs(z), ch.duchi_b, rtol=0, atol=1e-12)
            k = z[pm] / ch.granularity
            assert np.array_equal(k, np.rint(k))  # on the public lattice


@pytest.mark.parametrize("mech", MECHS)
def test_summary_law_equals_rows_law(mech):
    # the summary's two statistics against the sums of per-row views (two KS tests per mechanism at α/2)
    ch = HybridMean(1.0, (0.0, 4.0), mechanism=mech)
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 4, 6)
    summ = [ch.stats(x, rng) for _ in range(3000)]
    rows = [ch.privatize(x, rng) for _ in range(3000)]
    for key, f in (("sum", lambda z: z.sum()), ("sumsq", lambda z: np.square(z).sum())):
        a = np.array([s[key][0] for s in summ])
        b = np.array([f(z) for z in rows])
        assert stats.ks_2samp(a, b).pvalue > ALPHA / 2, key


def _datasets(rng: np.random.Generator, n: int):
    """Shapes the estimator was not tuned on: all mass at the ends, a point mass, a skewed continuous law."""
    yield "ends", rng.choice([0.0, 100.0], p=[0.3, 0.7], size=n), 70.0
    yield "point", np.full(n, 37.0), 37.0
    yield "gamma", np.minimum(rng.gamma(2.0, 8.0, n), 100.0), None


@pytest.mark.slow  # a coverage sweep: 10 s each on the 2-core machine
@pytest.mark.parametrize("mech", MECHS)
def test_mean_intervals_cover(mech):
    # 95% intervals over 300 data sets per shape (n = 3000, ε = 1): the true mean is the data's own mean (the
    # estimand of a finite table) for "gamma"; pooled coverage of 900 intervals ≥ 95% − 3.3 sd (sd = 0.73%)
    rng = np.random.default_rng({"hybrid": 6, "piecewise": 7, "duchi": 8}[mech])
    ch = HybridMean(1.0, (0.0, 100.0), mechanism=mech)
    hits = total = 0
    for r in range(300):
        for _, x, mu in _datasets(rng, 3000):
            m = mean(ldp_dask.privatize(x, channel=ch, seed=r))
            truth = float(x.mean()) if mu is None else mu
            hits += int(m.ci[0] <= truth <= m.ci[1])
            total += 1
    assert hits / total >= 0.95 - 3.3 * math.sqrt(0.95 * 0.05 / total), hits / total


@pytest.mark.slow  # an accuracy sweep: 8 s on the 2-core machine
def test_more_accurate_than_the_laplace_mean():
    # the measured spread of 400 releases of one data set (ε = 2): the hybrid's noise variance is 1.042/2.0 of the
    # Laplace mean's, so the F statistic stays below 0.52 × its upper 10⁻³ quantile (0.71 < 1: a Laplace-sized
    # variance fails)
    rng = np.random.default_rng(9)
    x = rng.uniform(0, 1, 5000)
    est = {}
    for name, ch in (("hybrid", HybridMean(2.0, (0.0, 1.0))), ("laplace", LaplaceMean(2.0, (0.0, 1.0)))):
        est[name] = np.array([mean(ldp_dask.privatize(x, channel=ch, seed=s)).raw for s in range(400)])
    f = est["hybrid"].var(ddof=1) / est["laplace"].var(ddof=1)
    # the variance ratio over its true value 1.042/2.0 (t units) is F(399, 399): below its 1 − 10⁻³ quantile
    assert f < stats.f.ppf(1 - ALPHA, 399, 399) * (1.042 / 2.0), f


def test_command_line_and_estimate(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ldp_dask.cli import main

    x = np.random.default_rng(10).beta(2, 5, 100_000) * 50
    pq.write_table(pa.table({"age": x}), tmp_path / "a.parquet")
    out = tmp_path / "a.summary.parquet"
    assert main(["privatize", str(tmp_path / "a.parquet"), "--column", "age", "--channel", "hybrid-mean",
                 "--mechanism", "piecewise", "--domain", "0", "50", "--epsilon", "2", "--out", str(out),
                 "--local", "--seed", "1"]) == 0
    capsys.readouterr()
    assert main(["estimate", str(out), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    # sd = 25·√(1.23/10⁵) = 0.088; 4.5 sd < 0.4
    assert d["mechanism"] == "piecewise" and abs(d["value"] - x.mean()) < 0.4 and d["ci"][0] < x.mean() < d["ci"][1]
    assert 0 < d["noise_share"] < 1


@pytest.mark.parametrize("kwargs, match", [
    ({"mechanism": "laplace"}, "'mechanism' parameter must be one of hybrid, piecewise, duchi"),
    ({"noise": "gaussian"}, "'noise' parameter"),
    ({"epsilon": 0.0}, "'epsilon' parameter"),
    ({"domain": (1.0, 1.0)}, "domain"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(LdpDaskError, match=match):
        HybridMean(**{"epsilon": 1.0, "domain": (0.0, 1.0), **kwargs})
    with pytest.raises(LdpDaskError, match="needs a public 'domain'"):
        build_channel("hybrid-mean", 1.0)
    with pytest.raises(ldp_dask.InputDataError, match="outside the declared domain"):
        ldp_dask.privatize(np.array([0.5, 2.0]), channel=HybridMean(1.0, (0, 1)), seed=1)
