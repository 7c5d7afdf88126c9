"""Wavelet bases, the WaveletLaplace channel and the thresholded estimator (Butucea et al. 2020; docs/channels.md).

Seeds are fixed; every statistical tolerance states its source and the
chance that a correct implementation would fail it with a random seed.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import pywt
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from ldp_dask import LdpDaskError
from ldp_dask.bases import get_basis
from ldp_dask.channels import WaveletLaplace, build_channel, wavelet_levels
from ldp_dask.estimators import DEFAULT_GAMMA, wavelet_density, wavelet_thresholds
from ldp_dask.summary import Summary

WAVELETS = ["haar", "db2", "db4", "db8", "sym4", "sym6", "coif1", "coif3"]
Z = 4.5  # P(|N(0,1)| > 4.5) = 6.8e-6 per check


# --- the tabulated basis ---------------------------------------------------------------
def _grid(n: int = 1 << 16) -> np.ndarray:
    return (np.arange(n) + 0.5) / n  # midpoint rule on [0, 1]


@pytest.mark.parametrize("name", ["db2", "db4", "sym4", "coif2", "haar"])
def test_two_scale_relation_with_pywavelets_filters(name):
    # φ_{jk} = Σ_l h_l φ_{j+1,2k+l} and ψ_{jk} = Σ_l g_l φ_{j+1,2k+l} with PyWavelets' rec_lo / rec_hi:
    # the table is PyWavelets' φ, ψ. Relative L2 error budget 2e-3: linear interpolation of a
    # Hölder-r function at resolution h = 2^-10 errs by O(h^r); db2 (r ≈ 0.55, the roughest here)
    # measured 8e-4, the smoother ones <= 4e-5. A wrong filter or shift gives errors of order 1.
    b, w = get_basis(name), pywt.Wavelet(name)
    S, j, t = b.support, 5, _grid()
    fine = b.design(t, j + 1, "phi")
    for kind, filt in (("phi", w.rec_lo), ("psi", w.rec_hi)):
        coarse = b.design(t, j, kind)
        rec = np.zeros_like(coarse)
        for k in range(-S + 1, 1 << j):
            for ell, h in enumerate(filt):
                kk = 2 * k + ell
                if -S + 1 <= kk < 1 << (j + 1):
                    rec[:, k + S - 1] += h * fine[:, kk + S - 1]
        interior = slice(S, (1 << j) - S)  # children all inside N_{j+1}
        err = np.linalg.norm(rec[:, interior] - coarse[:, interior]) / np.linalg.norm(coarse[:, interior])
        assert err < 2e-3, (kind, err)


@pytest.mark.parametrize("name", ["haar", "db4", "sym4", "coif2"])
def test_tabulated_basis_is_orthonormal(name):
    # Gram matrix of the interior functions of levels (φ, j0=3), (ψ, 3), (ψ, 4) by quadrature.
    b, t = get_basis(name), _grid()
    S = b.support
    cols = [b.design(t, 3, "phi")[:, S - 1: 8], b.design(t, 3, "psi")[:, S - 1: 8],
            b.design(t, 4, "psi")[:, S - 1: 16]]
    D = np.hstack([c for c in cols if c.shape[1]])
    gram = D.T @ D / len(t)
    assert np.abs(gram - np.eye(len(gram))).max() < 2e-3


def test_sparse_accumulation_matches_dense_design_and_kernel():
    b = get_basis("db4")
    t = np.random.default_rng(0).random(5000)
    t[:3] = [0.0, 1.0, np.nextafter(1.0, 0.0)]
    levels = [("phi", 2), ("psi", 2), ("psi", 3), ("psi", 6)]
    dense = np.concatenate([b.design(t, j, k).sum(axis=0) for k, j in levels])
    numpy_path = np.concatenate([b.accumulate(t, j, k) for k, j in levels])
    fused = b.accumulate_levels(t, levels)
    scale = np.abs(dense).max()
    assert np.abs(numpy_path - dense).max() < 1e-12 * scale * len(t)
    assert np.abs(fused - dense).max() < 1e-12 * scale * len(t)


def _both_paths(monkeypatch, b, t, levels, quantum):
    import ldp_dask.bases as bases

    monkeypatch.setattr(bases, "HISTOGRAM_CELLS_PER_LOOKUP", 1 << 30)
    histogram = b.accumulate_levels(t, levels, quantum=quantum)
    monkeypatch.setattr(bases, "HISTOGRAM_MAX_BITS", 0)
    per_row = b.accumulate_levels(t, levels, quantum=quantum)
    monkeypatch.undo()
    return histogram, per_row


@pytest.mark.parametrize("name", ["haar", "db2", "db4", "sym4", "coif3"])
def test_histogram_path_gives_the_per_row_sums(monkeypatch, name):
    # rows per table cell, then two matrix products per level: the same sums as evaluating every row
    b = get_basis(name)
    t = np.random.default_rng(11).beta(2.0, 5.0, 20000)
    t[:4] = [0.0, 1.0, np.nextafter(1.0, 0.0), 0.5]
    levels = [("phi", 2), ("psi", 2), ("psi", 3), ("psi", 7)]
    lattice_h, lattice_r = _both_paths(monkeypatch, b, t, levels, 4096.0)
    assert np.array_equal(lattice_h, lattice_r)  # integers: exact in any order
    cont_h, cont_r = _both_paths(monkeypatch, b, t, levels, 0.0)
    dense = np.concatenate([b.design(t, j, k).sum(axis=0) for k, j in levels])
    scale = np.abs(dense).max()
    assert np.abs(cont_h - dense).max() < 1e-12 * scale * len(t)
    assert np.abs(cont_r - dense).max() < 1e-12 * scale * len(t)


def test_levels_beyond_the_histogram_are_evaluated_per_row(monkeypatch):
    # with the cell count capped below the finest levels, those levels go row by row and the others by cells:
    # the same integers as either path alone (lattice), so nothing depends on where the cap falls
    import ldp_dask.bases as bases

    b = get_basis("db4")
    t = np.random.default_rng(17).beta(2.0, 5.0, 50_000)
    levels = [("phi", 2), ("psi", 2), ("psi", 4), ("psi", 6), ("psi", 7)]
    histogram, per_row = _both_paths(monkeypatch, b, t, levels, 4096.0)
    monkeypatch.setattr(bases, "HISTOGRAM_MAX_BITS", 5 + b.table_level)  # levels 6 and 7 per row
    mixed = b.accumulate_levels(t, levels, quantum=4096.0)
    assert np.array_equal(mixed, per_row) and np.array_equal(mixed, histogram)
    cont = b.accumulate_levels(t, levels)
    dense = np.concatenate([b.design(t, j, k).sum(axis=0) for k, j in levels])
    assert np.abs(cont - dense).max() < 1e-12 * np.abs(dense).max() * len(t)


@pytest.mark.parametrize("rows", [200, 200_000])  # the per-row kernel, then the histogram path
def test_the_domain_map_fused_into_the_sums_is_to_unit(rows):
    # exact_stats maps x to t inside the pass over the rows: the same sums as mapping first, edges included
    ch = WaveletLaplace(1.0, (-5.0, 5.0), 3, 6, wavelet="db4", noise="lattice")
    x = np.clip(np.random.default_rng(13).normal(0, 2, rows), -5, 5)
    x[:3] = [-5.0, 5.0, 0.0]
    expect = ch.basis.accumulate_levels(ch.to_unit(x), ch.levels, quantum=4096.0)
    assert np.array_equal(ch.exact_stats(x)["sum"], expect)


@pytest.mark.parametrize("name", ["haar", "db4", "sym4", "coif3"])
def test_lattice_coordinates_are_the_table_at_cell_midpoints(name):
    # independent route: snap t to the midpoint of its table cell and evaluate the interpolated table there
    b = get_basis(name)
    j, q = 5, 4096.0
    t = np.random.default_rng(12).random(3000)
    cells = np.floor(t * 2.0 ** (j + b.table_level))
    mid = (cells + 0.5) / 2.0 ** (j + b.table_level)
    expect = np.floor(b.design(mid, j, "psi", scaled=False) * q + 0.5)  # zero off the row's S columns
    assert np.array_equal(b.design(t, j, "psi", quantum=q), expect)
    # and within half a cell's change of the interpolated value, plus the rounding
    slope = np.abs(np.diff(b._tab["psi"])).max()
    assert np.abs(expect / q - b.design(t, j, "psi", scaled=False)).max() <= slope / 2 + 0.5 / q + 1e-12


@pytest.mark.parametrize("name", ["haar", "db2", "db4", "sym4", "coif3"])
def test_lattice_sensitivity_holds_for_every_table_cell(name):
    # a row's lattice coordinates depend only on its cell within the unit interval: check all 2^L of them
    ch = WaveletLaplace(1.0, (0.0, 1.0), 3, 4, wavelet=name, noise="lattice")
    b = ch.basis
    for g, (kind, _) in enumerate(ch.levels):
        norms = np.abs(b._by_shift(kind, "lattice", 4096.0)).sum(axis=1)  # Σ_m |coordinate| per cell
        assert 2.0 * norms.max() <= ch.lattice_sensitivities[g]


def _beta_coefficients(b, levels, a=2.0, c=3.0, n=1 << 17):
    t = _grid(n)
    f = stats.beta(a, c).pdf(t)
    return [b.design(t, j, k).T @ f / n for k, j in levels]


def test_noiseless_coefficients_from_samples_are_unbiased():
    # mean_i f_{jk}(X_i) vs ∫ f f_{jk} by quadrature, X ~ Beta(2, 3); tolerance Z × sd/√n per
    # coefficient with the sd computed from the same samples (~100 coefficients: false-failure < 1e-3)
    b = get_basis("db4")
    levels = [("phi", 2), ("psi", 2), ("psi", 3), ("psi", 4)]
    truth = np.concatenate(_beta_coefficients(b, levels))
    x = np.random.default_rng(7).beta(2.0, 3.0, size=200_000)
    D = np.hstack([b.design(x, j, k) for k, j in levels])
    est, sd = D.mean(axis=0), D.std(axis=0)
    ok = sd > 0
    assert np.all(np.abs(est - truth)[ok] <= Z * sd[ok] / math.sqrt(len(x)) + 1e-6)
    assert np.all(np.abs(truth[~ok]) < 1e-6)  # coefficients no sample touches are ~0


@pytest.mark.parametrize("name", ["haar", "db4", "coif2"])
def test_reconstruction_from_exact_coefficients(name):
    # f ∈ V_6 supported inside [0, 1]: its coefficients at levels j0=2..j1=5 reconstruct it
    b = get_basis(name)
    S, J = b.support, 6
    rng = np.random.default_rng(3)
    c = np.zeros(b.n_coefs(J))
    c[S - 1: S - 1 + (1 << J) - S + 1] = rng.normal(size=(1 << J) - S + 1)  # k = 0..2^J − S
    t = _grid()
    f = b.evaluate(t, J, "phi", c)
    levels = [("phi", 2)] + [("psi", j) for j in range(2, J)]
    coefs = [b.design(t, j, k).T @ f / len(t) for k, j in levels]
    rec = sum(b.evaluate(t, j, k, cc) for (k, j), cc in zip(levels, coefs))
    assert np.linalg.norm(rec - f) / np.linalg.norm(f) < 2e-3


# --- privacy ----------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(WAVELETS),
    j0=st.integers(0, 8),
    extra=st.integers(0, 7),
    nu=st.floats(1.0001, 6.0),
    eps=st.floats(1e-3, 50.0),
    lo=st.floats(-1e6, 1e6),
    width=st.floats(1e-6, 1e6),
    calibration=st.sampled_from(["tight", "paper"]),
)
def test_epsilon_spent_never_exceeds_requested(name, j0, extra, nu, eps, lo, width, calibration):
    if not lo + width > lo:
        return
    ch = WaveletLaplace(eps, (lo, lo + width), j0, j0 + extra, wavelet=name, calibration=calibration, nu=nu)
    assert ch.epsilon_spent() <= eps
    if calibration == "tight":
        assert ch.epsilon_spent() >= eps * (1 - 1e-12)  # the whole budget is used
    else:
        assert ch.epsilon_spent() <= eps / 2  # the paper's bounds are loose by more than 2×


@pytest.mark.parametrize("name", ["haar", "db4", "sym4", "coif2"])
def test_sensitivity_bounds_every_pair_of_rows(name):
    # brute force over a fine grid of t: max_{t,t'} Σ_ℓ ‖D_ℓ(t) − D_ℓ(t')‖₁/σ_ℓ ≤ ε_spent, and
    # each level's sup_t ‖D_ℓ(t)‖₁ is within 1% of Δ_ℓ/2 (the bound is tight, not just valid)
    ch = WaveletLaplace(1.0, (0.0, 1.0), 1, 3, wavelet=name)
    t = np.linspace(0.0, 1.0, 4097)
    blocks = [ch.basis.design(t, j, k) for k, j in ch.levels]
    for D, delta in zip(blocks, ch.sensitivities):
        norms = np.abs(D).sum(axis=1)
        assert norms.max() <= delta / 2
        assert norms.max() >= 0.99 * delta / 2
    scaled = np.hstack([D / s for D, s in zip(blocks, ch.sigmas)])
    sub = scaled[::8]
    worst = max(np.abs(sub[i] - scaled).sum(axis=1).max() for i in range(len(sub)))
    assert worst <= ch.epsilon_spent()


def _worst_pair(ch):
    t = np.linspace(0.0, 1.0, 1025)
    scaled = np.hstack([ch.basis.design(t, j, k) / s for (k, j), s in zip(ch.levels, ch.sigmas)])
    dist = np.abs(scaled[:, None, :] - scaled[None, :, :]).sum(axis=2)
    i, k = np.unravel_index(np.argmax(dist), dist.shape)
    return t[i], t[k], float(dist[i, k])


def _event_log_ratio(ch, x, xp, rng, n):
    # A = {z : each coordinate lies beyond both means on x's side}; on A the likelihood ratio
    # is constant and equal to its supremum exp(Σ|a − a'|/σ), and P(A|x) = 2^-(#differing coords)
    a = ch.exact_stats(np.array([x]))["sum"]
    ap = ch.exact_stats(np.array([xp]))["sum"]
    diff = np.abs(a - ap) > 1e-12
    up = a > ap

    def hits(z):
        zz = z[:, diff]
        hi = np.maximum(a, ap)[diff]
        lo = np.minimum(a, ap)[diff]
        ok = np.where(up[diff], zz >= hi, zz <= lo)
        return int(np.count_nonzero(ok.all(axis=1)))

    h1 = hits(ch.privatize(np.full(n, x), rng))
    h2 = hits(ch.privatize(np.full(n, xp), rng))
    p1, p2 = h1 / n, h2 / n
    se = math.sqrt((1 - p1) / (n * p1) + (1 - p2) / (n * p2))
    return math.log(p1 / p2), se, int(diff.sum())


def test_density_ratio_on_the_worst_case_event():
    # haar, j0 = j1 = 1: 3 coordinates, small enough for the event to have probability >= 1/8
    # (continuous noise: the event is defined on the real line; lattice noise: tests/statistical/test_lattice.py)
    ch = WaveletLaplace(1.0, (0.0, 1.0), 1, 1, wavelet="haar", noise="continuous")
    x, xp, realised = _worst_pair(ch)
    assert realised <= ch.epsilon_spent() * (1 + 1e-12)
    lr, se, _ = _event_log_ratio(ch, x, xp, np.random.default_rng(11), 400_000)
    assert abs(lr - realised) <= Z * se, (lr, realised, se)


def test_density_ratio_audit_catches_halved_noise():
    ch = WaveletLaplace(1.0, (0.0, 1.0), 1, 1, wavelet="haar", noise="continuous")
    x, xp, realised = _worst_pair(ch)
    ch.scales = ch.scales / 2  # miscalibrated: spends 2× what it reports
    lr, se, _ = _event_log_ratio(ch, x, xp, np.random.default_rng(12), 400_000)
    assert lr > ch.epsilon_spent() + Z * se


# --- the estimator ----------------------------------------------------------------------------------
def _mixture_pdf(x):
    return 0.6 * stats.norm.pdf(x, 0.35, 0.08) + 0.4 * stats.norm.pdf(x, 0.65, 0.1)


def _mixture_sample(rng, n):
    pick = rng.random(n) < 0.6
    x = np.where(pick, rng.normal(0.35, 0.08, n), rng.normal(0.65, 0.1, n))
    return np.clip(x, 0.0, 1.0)  # mass outside [0,1] is < 1e-4


def _hard_threshold_risk(beta, v, lam):
    """E(Y 1{|Y| ≥ λ} − β)² for Y ~ N(β, v): β² P(|Y| < λ) + v E[Z² 1{Z ≥ a or Z ≤ b}]."""
    s = np.sqrt(v)
    a, b = (lam - beta) / s, (-lam - beta) / s
    kill = stats.norm.cdf(a) - stats.norm.cdf(b)
    tails = a * stats.norm.pdf(a) + stats.norm.sf(a) + stats.norm.cdf(b) - b * stats.norm.pdf(b)
    return beta**2 * kill + v * tails


def test_l2_risk_below_its_theoretical_value_for_a_smooth_density():
    # Bound: for an orthonormal basis on ℝ, ‖f̃ − f‖²_[0,1] ≤ Σ_k (ĉ_k − c_k)² + ‖f − P_{j1+1} f‖², and
    # coefficient by coefficient E(ĉ − c)² is v_k (father) or the hard-threshold risk of
    # Y ~ N(β_k, v_k) at λ_j (details). v_k = Var f_k(X)/n + 2σ_ℓ²/n exactly (quadrature); the sum of
    # n Laplace noises is Gaussian up to a Berry–Esseen error O(1/√n). Tolerance: Z × the Monte-Carlo
    # standard error of the mean over 12 seeded replicates, plus 1% for the tabulation (~1e-5).
    n, eps = 200_000, 1.0
    j0, j1 = wavelet_levels(n, eps)
    ch = WaveletLaplace(eps, (0.0, 1.0), j0, j1)
    t = _grid(1 << 16)
    f = _mixture_pdf(t)
    design = [ch.basis.design(t, j, k) for k, j in ch.levels]
    beta = [D.T @ f / len(t) for D in design]
    second = [(D**2).T @ f / len(t) for D in design]
    var = [(s2 - b**2) / n + 2 * sig**2 / n for s2, b, sig in zip(second, beta, ch.sigmas)]
    tail = float(np.mean((f - sum(D @ b for D, b in zip(design, beta))) ** 2))
    lam = wavelet_thresholds(ch, n, DEFAULT_GAMMA)
    theory = float(var[0].sum()) + tail + sum(
        float(_hard_threshold_risk(b, v, lj).sum()) for b, v, lj in zip(beta[1:], var[1:], lam))
    rng = np.random.default_rng(2024)
    risks = []
    for _ in range(12):
        x = _mixture_sample(rng, n)
        s = Summary(ch, n, ch.stats(x, rng), {})
        risks.append(wavelet_density(s, projection="none").distance(_mixture_pdf) ** 2)
    se = np.std(risks, ddof=1) / math.sqrt(len(risks))
    assert np.mean(risks) <= 1.01 * theory + Z * se, (np.mean(risks), theory, se)
    # and the projection onto densities does not make it worse
    assert wavelet_density(s).distance(_mixture_pdf) ** 2 <= risks[-1] + 1e-12


def test_estimator_options_and_projection():
    rng = np.random.default_rng(5)
    n = 100_000
    ch = WaveletLaplace(2.0, (0.0, 1.0), *wavelet_levels(n, 2.0))
    s = Summary(ch, n, ch.stats(_mixture_sample(rng, n), rng), {"column": "x"})
    raw = {thr: wavelet_density(s, threshold=thr, projection="none") for thr in ("hard", "soft", "none")}
    # hard thresholding keeps exactly the details with |β̂| ≥ λ_j, β̂ = S/n (counted here from the sums)
    lam = wavelet_thresholds(ch, n, DEFAULT_GAMMA)
    beta_hat = [s.sums["sum"][sl] / n for sl in ch.slices[1:]]
    assert raw["hard"].info["kept_per_level"] == [int(np.sum(np.abs(b) >= lj)) for b, lj in zip(beta_hat, lam)]
    assert raw["none"].info["kept_per_level"] == [len(b) for b in beta_hat]
    proj = wavelet_density(s)
    assert np.all(proj.density >= 0)
    assert abs(proj.masses.sum() - 1) < 1e-9
    # projection onto densities never increases the L2 error (the truth is a density)
    assert proj.distance(_mixture_pdf) <= raw["hard"].distance(_mixture_pdf) + 1e-9
    # pdf is evaluated exactly and agrees with the tabulated midpoints
    mid = (proj.edges[:-1] + proj.edges[1:]) / 2
    assert np.allclose(proj.pdf(mid), proj.density)
    assert proj.pdf(-0.5) == 0 and proj.pdf(1.5) == 0
    q = proj.quantile([0.1, 0.5, 0.9])
    assert np.all(np.diff(q) > 0) and np.allclose(proj.cdf(q), [0.1, 0.5, 0.9], atol=1e-3)
    # on a domain of length 1 the L^r distances increase with r (Lyapunov): L1 ≤ L2 ≤ L3 ≤ L∞
    dists = [proj.distance(_mixture_pdf, r) for r in (1, 2, 3, math.inf)]
    assert all(a <= b * (1 + 1e-9) for a, b in zip(dists, dists[1:])), dists
    d = json.loads(json.dumps(proj.to_dict()))  # plain JSON, nothing numpy left in it
    assert np.array_equal(d["density"], proj.density) and np.array_equal(d["band_hi"], proj.band()[1])


def test_levels_follow_the_paper():
    # 2^{j0} ≍ (nα²)^{1/(2N+2)} with N = 1 by default; 2^{2 j1} ≍ nα²/log(nα²) (Butucea et al. 2020, Thm 4.1)
    j0, j1 = wavelet_levels(10**6, 1.0, "db4")
    assert j0 == round(math.log2(1e6) / 4)
    assert wavelet_levels(10**6, 1.0, "db4", regularity=3)[0] == round(math.log2(1e6) / 8)
    assert j1 == round(0.5 * math.log2(1e6 / math.log(1e6)))
    assert wavelet_levels(2, 1.0) == (0, 0)  # nα² < e: no detail level beyond j0
    ch = build_channel("wavelet", 1.0, (0, 1), n=10**6, calibration="paper")
    assert (ch.j0, ch.j1) == (j0, j1)
    assert build_channel("wavelet", 1.0, (0, 1), n=10**6, j0=5, calibration="paper").j1 == max(5, j1)
    # an explicit j1 asks for details: j0 from the paper's rule, never above j1
    assert (build_channel("wavelet", 1.0, (0, 1), n=10**6, j1=j1).j0, build_channel(
        "wavelet", 1.0, (0, 1), n=10**6, j1=2).j0) == (j0, 2)


@pytest.mark.parametrize("wavelet", ["haar", "db2", "db4", "sym4", "coif2"])
def test_default_release_is_the_father_level_with_the_histograms_noise(wavelet):
    # The default (tight) release is the father level alone, all of ε on it, at the level whose integrated
    # noise variance dim·2σ²/n (read from channels built at every level) is nearest, on a log scale, the
    # default histogram's K²·2b²/n (b its Laplace scale: the density's variance is K²·2b²/n on each of K
    # bins of width 1/K).
    for n, eps in [(100, 0.5), (10**4, 1.0), (10**5, 0.5), (10**6, 2.0), (10**8, 1.0)]:
        ch = build_channel("wavelet", eps, (0, 1), n=n, wavelet=wavelet, noise="continuous")
        assert ch.levels == [("phi", ch.j0)] and ch.j1 == ch.j0 - 1 and ch.linear
        assert ch.epsilon_spent() <= eps and ch.epsilon_spent() > eps * (1 - 1e-12)
        h = build_channel("histogram", eps, (0, 1), n=n, noise="continuous")
        hist_var = h.bins**2 * 2 * h.noise_scale**2

        def gap(J, eps=eps, hist_var=hist_var):
            c = WaveletLaplace(eps, (0, 1), J, J - 1, wavelet=wavelet, noise="continuous")
            return abs(math.log(c.dim * 2 * c.sigmas[0] ** 2 / hist_var))

        assert all(gap(ch.j0) <= gap(J) for J in range(0, ch.j0 + 4)), (n, eps, ch.j0)
    # an explicit j0 alone keeps the release linear at that level
    assert build_channel("wavelet", 1.0, (0, 1), n=10**6, j0=2).levels == [("phi", 2)]


# --- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"wavelet": "nope"}, "not a PyWavelets wavelet"),
        ({"wavelet": "bior2.2"}, "not orthogonal|Biorthogonal"),
        ({"wavelet": "mexh"}, "continuous wavelet"),
        ({"wavelet": "dmey"}, "Meyer"),
        ({"wavelet": 4}, "'wavelet' parameter"),
        ({"j0": 3, "j1": 1}, "'j1' parameter must be >= j0 - 1"),
        ({"j0": -1}, "'j0' parameter"),
        ({"j1": 2.5}, "'j1' parameter"),
        ({"nu": 1.0}, "'nu' parameter"),
        ({"nu": 0.5}, "'nu' parameter"),
        ({"nu": float("nan")}, "'nu' parameter"),
        ({"nu": float("inf")}, "'nu' parameter"),
        ({"j1": 31}, "beyond the resolution"),
        ({"j1": 27, "table_level": 14}, "beyond the resolution"),
        ({"calibration": "loose"}, "'calibration' parameter"),
        ({"table_level": 2}, "'table_level' parameter"),
        ({"epsilon": 0}, "'epsilon' parameter"),
    ],
)
def test_bad_configurations(kwargs, match):
    base = {"epsilon": 1.0, "domain": (0.0, 1.0), "j0": 1, "j1": 4}
    with pytest.raises(LdpDaskError, match=match):
        WaveletLaplace(**{**base, **kwargs})


def test_bad_estimator_arguments():
    ch = WaveletLaplace(1.0, (0, 1), 1, 3)
    s = Summary(ch, 100, ch.stats(np.full(100, 0.5), np.random.default_rng(0)), {})
    for kwargs, match in [({"threshold": "medium"}, "'threshold'"), ({"gamma": 0}, "'gamma'"),
                          ({"gamma": float("nan")}, "'gamma'"), ({"projection": "simplex"}, "'projection'"),
                          ({"grid": 3}, "'grid'")]:
        with pytest.raises(LdpDaskError, match=match):
            wavelet_density(s, **kwargs)
    with pytest.raises(LdpDaskError, match="do not apply"):
        build_channel("histogram", 1.0, (0, 1), n=100, wavelet="db4")


# --- quantile intervals from CDF envelopes ----------------------------------------------------------------
@pytest.mark.parametrize("noise", ["lattice", "continuous"])
@pytest.mark.parametrize("wavelet", ["haar", "db2", "db4", "sym4", "coif2"])
def test_cdf_envelopes_bound_the_step_at_every_point(wavelet, noise):
    # The bound's core claim, checked off the programme's grid: with the weights the envelopes use, the
    # functions a row actually contributes (the channel's own design matrix, lattice or interpolated) sum to
    # at least 1[t < e] − τ (upper) and at most 1[t ≤ e] + τ (lower) at 200,000 random points of [0, 1] and
    # at the edges themselves, for every edge of a level-4 release. Deterministic: no tolerance beyond τ.
    from ldp_dask.channels.wavelet import LATTICE_QUANTUM
    from ldp_dask.estimators.envelopes import OFFSETS, envelope

    ch = WaveletLaplace(1.0, (0.0, 1.0), 4, 3, wavelet=wavelet, noise=noise)
    b, j, S = ch.basis, ch.j0, ch.basis.support
    rng = np.random.default_rng(7)
    edges = [(m, r) for r in OFFSETS for m in range(1 << j) if m + r > 0]
    t = np.concatenate([rng.random(200_000), [(m + r) / 16 for m, r in edges],
                        [np.nextafter((m + r) / 16, 0) for m, r in edges]])
    lattice = noise == "lattice"
    D = b.design(t, j, "phi", scaled=False, quantum=LATTICE_QUANTUM if lattice else 0.0)
    if lattice:
        D = D / LATTICE_QUANTUM
    kmin, N = -S + 1, D.shape[1]
    for m, r in edges:
        for upper in (True, False):
            env = envelope(wavelet, ch.table_level, lattice, r, upper)
            w = np.zeros(N)
            first = m + env.first
            w[: max(0, min(N, first - kmin))] = env.c
            for i, v in enumerate(env.v):
                if 0 <= first + i - kmin < N:
                    w[first + i - kmin] = v
            H, e = D @ w, (m + r) / 16
            if upper:
                assert np.all(H >= (t < e) - env.tau - 1e-12), (m, r)
            else:
                assert np.all(H <= (t <= e) + env.tau + 1e-12), (m, r)
            assert env.tau < 1e-2 and env.h_min >= -1.5 and env.h_max <= 2.0  # useful, not only valid


@pytest.mark.slow
@pytest.mark.parametrize("wavelet", ["db4", "sym4", "haar"])
def test_default_wavelet_quantile_intervals_cover_every_decile(wavelet):
    # Data the coverage benchmark does not use: 200 data sets of 20,000 rows from Beta(5, 2), ε = 1, the
    # default wavelet release and its default ("envelope") intervals. Each decile's coverage must reach
    # 95% − 3.9 sd of 200 data sets (one-sided; at a true 95% the nine checks fail together with probability
    # < 4.5e-4; the intervals over-cover by construction).
    import ldp_dask
    from ldp_dask.estimators import local_quantiles

    rng = np.random.default_rng(21)
    n, reps = 20_000, 200
    truth = stats.beta(5, 2).ppf(np.arange(1, 10) / 10)
    ch = build_channel("wavelet", 1.0, (0.0, 1.0), n=n, wavelet=wavelet)
    hits = np.zeros(9)
    for r in range(reps):
        q = local_quantiles(ldp_dask.privatize(rng.beta(5, 2, n), channel=ch, seed=r))
        assert q.interval == "envelope"
        hits += (q.ci_low <= truth) & (truth <= q.ci_high)
    assert np.all(hits / reps >= 0.95 - 3.9 * np.sqrt(0.95 * 0.05 / reps)), hits / reps
