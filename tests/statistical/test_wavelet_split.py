"""The wavelet channel with the rows split among father levels, and its pooled, shrunk estimate.

False-failure rates: seeds are fixed; the rates are those of a correct implementation with a random seed.
The law test runs 5 KS tests at α = 2·10⁻⁴ (≤ 10⁻³ together; KS is conservative on lattice laws); the audit
bound is one-sided Clopper–Pearson at 1 − 10⁻³; the risk test is one-sided at Z = 3.3 Monte-Carlo standard
errors (≈ 5·10⁻⁴).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ldp_dask._validation import LdpDaskError
from ldp_dask.audit import audit_channel, miscalibrated
from ldp_dask.channels import WaveletLaplace, WaveletSplit, build_channel, channel_from_params, linear_level
from ldp_dask.channels.wavelet import LATTICE_QUANTUM
from ldp_dask.estimators import estimate, pooled_split, wavelet_density
from ldp_dask.summary import Summary

ALPHA_LAW, ALPHA_AUDIT, REPS, Z = 2e-4, 1e-3, 3000, 3.3


def test_default_levels_shares_and_spend():
    for n, eps in [(10**4, 0.5), (10**5, 1.0), (10**7, 2.0)]:
        ch = build_channel("wavelet-split", eps, (0.0, 1.0), n=n)
        J = linear_level(n, eps)
        assert ch.levels == sorted({max(0, J - 1), J, J + 1})
        assert np.allclose(ch.probabilities, np.array([1, 2, 3]) / 6)
        # each level spends all of ε on its own rows, from its own sensitivity; the mixture spends the max
        assert ch.epsilon_spent() == max(p.epsilon_spent() for p in ch.parts)
        assert eps * (1 - 1e-9) < ch.epsilon_spent() <= eps
    ch = WaveletSplit(1.0, (0.0, 1.0), [2, 5], shares=[1.0, 3.0], wavelet="haar")
    assert np.allclose(ch.probabilities, [0.25, 0.75])
    assert channel_from_params(ch.name, ch.params()).params() == ch.params()


@pytest.mark.parametrize("kwargs, match", [
    ({"noise": "continuous"}, "'noise' parameter .* must be 'lattice'"),
    ({"levels": [2, 2]}, "distinct levels"),
    ({"levels": []}, "non-empty"),
    ({"levels": "3"}, "list of integers"),
    ({"levels": [1, 2], "shares": [1.0]}, "2 positive finite numbers"),
    ({"levels": [1, 2], "shares": [1.0, -1.0]}, "positive finite"),
    ({"levels": [1, 2], "shares": [1.0, float("nan")]}, "positive finite"),
    ({"levels": [1, 15]}, "finest level \\+ table level"),
])
def test_bad_configurations_name_the_parameter(kwargs, match):
    args = {"levels": [1, 2, 3], **kwargs}
    with pytest.raises(LdpDaskError, match=match):
        WaveletSplit(1.0, (0.0, 1.0), **args)


@pytest.mark.parametrize("m", [pytest.param(1, marks=pytest.mark.slow), 6])
def test_summary_law_equals_rows_law(m):
    # The summary draws each table cell's split and every level's sums from the rows per cell; the rows
    # mode privatizes each row at its drawn level. Both are the law of the sum of m views.
    ch = WaveletSplit(1.0, (-2.0, 3.0), [1, 2, 3], wavelet="db2")
    rng = np.random.default_rng(100 + m)
    x, _ = ch.prepare(-2.0 + 5.0 * rng.beta(2, 5, m))
    summ = {"sum": [], "group_n": []}
    rows = {"sum": [], "group_n": []}
    for _ in range(REPS):
        for k, v in ch.stats(x, rng).items():
            summ[k].append(v)
        for k, v in ch.row_sums(ch.privatize(x, rng)).items():
            rows[k].append(v)
    S, R = ({k: np.array(v) for k, v in d.items()} for d in (summ, rows))
    dim = S["sum"].shape[1]
    for key, j in [("sum", 0), ("sum", dim // 2), ("sum", dim - 1), ("group_n", 0), ("group_n", 2)]:
        p = stats.ks_2samp(S[key][:, j], R[key][:, j]).pvalue
        assert p > ALPHA_LAW, (key, j, p)


def test_summary_sums_per_level_are_the_lattice_sums_of_the_rows_drawn():
    # With one level, every row is drawn there: the cell-count path must give the per-row lattice sums exactly.
    rng = np.random.default_rng(3)
    x = rng.beta(2, 5, 5000)
    for levels in ([3], [0], [6]):
        ch = WaveletSplit(1.0, (0.0, 1.0), levels, wavelet="db4")
        part = ch.parts[0]
        exact = part.exact_stats(x)["sum"]  # lattice coordinates, as the one-level channel sums them
        cells = ch.exact_stats(x)["cells"]
        assert np.array_equal(ch.basis.cell_sums(cells, levels[0], "phi", LATTICE_QUANTUM), exact)


def test_audit_passes_and_catches_halved_noise():
    ch = WaveletSplit(1.0, (0.0, 1.0), [1, 2], wavelet="db2")
    r = audit_channel(ch, samples=200_000, rng=np.random.default_rng(1), alpha=ALPHA_AUDIT)
    assert r.passed and r.epsilon_lower <= ch.epsilon_spent(), r
    assert r.epsilon_lower > 0.3, r
    bad = audit_channel(miscalibrated(ch, 2.0), samples=200_000, rng=np.random.default_rng(2), alpha=ALPHA_AUDIT)
    assert not bad.passed and bad.epsilon_lower > 1.2, bad


def test_pooling_noise_free_sums_recovers_every_level():
    # Exact (noise-free) sums of each level over the same rows: after the change of basis every level
    # carries the same coarse blocks, so pooling them must reproduce the finest level's function. The sums
    # are scaled as if from 10^12 times the rows, so that the noise variance is negligible and the
    # James–Stein factors are 1 to within 10^-9.
    x = np.random.default_rng(4).beta(3, 2, 20_000)
    ch = WaveletSplit(1.0, (0.0, 1.0), [2, 3, 4], wavelet="db4")
    M = 1e12
    sums = M * np.concatenate([p.basis.accumulate_levels(x, p.levels) for p in ch.parts])
    levels, coefs, _, factors = pooled_split(ch, sums, np.full(3, M * len(x)), extra_variance=0.0)
    assert levels == [("phi", 2), ("psi", 2), ("psi", 3)]
    assert np.all(np.abs(factors - 1) < 1e-9)
    t = (np.arange(2048) + 0.5) / 2048
    finest = ch.basis.evaluate(t, 4, "phi", sums[ch.block(2)] / (M * len(x)))
    pooled = sum(ch.basis.evaluate(t, j, kind, c) for (kind, j), c in zip(levels, coefs))
    # the two-scale relation holds for the tabulated φ, ψ to the table's interpolation error (~1e-6 for db4)
    assert np.max(np.abs(pooled - finest)) < 1e-4 * np.max(np.abs(finest))
    # and a level the data do not need is shrunk away: the same sums from 2,000 rows' worth of noise
    _, _, _, few = pooled_split(ch, sums / M, np.full(3, float(len(x))))
    assert few[-1] < 0.5


def _js_risk_bound(beta: np.ndarray, V: float) -> float:
    """Risk bound of the positive-part James–Stein estimate of one level in Gaussian noise (docs)."""
    d = len(beta)
    return d * V - d * (d - 4) * V**2 / (float(beta @ beta) + d * V)


def test_l2_risk_below_its_theoretical_value():
    # Data the benchmark does not use: Beta(2, 6) on [0, 1], n = 300,000, ε = 1, the default split release.
    # Bound: the father block's variance d_0 V_0 + each shrunk level's James–Stein bound + the bias beyond the
    # finest level, with V the pooled per-coefficient variance (noise and the sampling bound) and β the true
    # coefficients (quadrature). The sum of Laplace noises is Gaussian up to O(1/√n); Z Monte-Carlo se.
    n, eps = 300_000, 1.0
    ch = build_channel("wavelet-split", eps, (0.0, 1.0), n=n)
    pdf = stats.beta(2, 6).pdf
    t = (np.arange(1 << 15) + 0.5) / (1 << 15)
    f = pdf(t)
    b, top, base = ch.basis, ch.levels[-1], ch.levels[0]
    c_top = b.design(t, top, "phi").T @ f / len(t)
    c = c_top
    betas = []
    for j in range(top, base, -1):
        c, d = b.analysis(c, j)
        betas.insert(0, d)
    expected_n = n * ch.probabilities
    v = [(nv + 1.0) / ng for nv, ng in zip(ch.noise_variances, expected_n)]
    V0 = 1.0 / sum(1.0 / x for x in v)
    Vd = [1.0 / sum(1.0 / v[g] for g, L in enumerate(ch.levels) if L > j) for j in range(base, top)]
    tail = float(np.mean((f - b.evaluate(t, top, "phi", c_top)) ** 2))
    theory = len(c) * V0 + sum(_js_risk_bound(bt, V) for bt, V in zip(betas, Vd)) + tail
    rng = np.random.default_rng(77)
    risks = []
    for _ in range(12):
        x = rng.beta(2, 6, n)
        s = Summary(ch, n, ch.stats(x, rng), {})
        risks.append(wavelet_density(s, projection="none").distance(pdf) ** 2)
    se = np.std(risks, ddof=1) / math.sqrt(len(risks))
    assert np.mean(risks) <= 1.01 * theory + Z * se, (np.mean(risks), theory, se)
    # not vacuous: the linear estimate at the finest level alone, with all rows, is worse than the bound
    lin = WaveletLaplace(eps, (0.0, 1.0), top, top - 1)
    assert len(c_top) * float(lin.noise_variances[0]) / n > theory


def test_estimate_and_band_from_a_split_summary():
    rng = np.random.default_rng(9)
    n = 100_000
    ch = build_channel("wavelet-split", 1.0, (10.0, 20.0), n=n)
    s = Summary(ch, n, ch.stats(10 + 10 * rng.beta(5, 2, n), rng), {})
    e = estimate(s)
    assert e.method == "wavelet-split+density"
    assert abs(np.sum(e.density * np.diff(e.edges)) - 1.0) < 1e-9
    assert np.all(e.se > 0) and e.info["rows_per_level"] == [int(v) for v in s.sums["group_n"]]
    assert len(e.info["shrink_factors"]) == ch.levels[-1] - ch.levels[0]


def test_the_wavelet_channel_by_name_is_the_split_release_unless_told_otherwise():
    n, eps = 10**5, 1.0
    J = linear_level(n, eps)
    ch = build_channel("wavelet", eps, (0.0, 1.0), n=n)
    assert isinstance(ch, WaveletSplit) and ch.levels == [J - 1, J, J + 1]
    # one level where asked (j0), where the split cannot be drawn exactly (continuous noise), or the paper's levels
    assert build_channel("wavelet", eps, (0.0, 1.0), n=n, j0=3).levels == [("phi", 3)]
    one = build_channel("wavelet", eps, (0.0, 1.0), n=n, noise="continuous")
    assert isinstance(one, WaveletLaplace) and one.levels == [("phi", J)]
    assert isinstance(build_channel("wavelet", eps, (0.0, 1.0), n=n, calibration="paper"), WaveletLaplace)
    # options the split has no use for are still checked
    with pytest.raises(LdpDaskError, match="'nu' parameter"):
        build_channel("wavelet", eps, (0.0, 1.0), n=n, nu=0.5)
    with pytest.raises(LdpDaskError, match="'calibration' parameter"):
        build_channel("wavelet", eps, (0.0, 1.0), n=n, calibration="loose")
    s = Summary(ch, n, ch.stats(np.random.default_rng(1).beta(2, 5, n), np.random.default_rng(2)), {})
    text = str(estimate(s).describe())
    assert "pooled" in text and "levels" in text
