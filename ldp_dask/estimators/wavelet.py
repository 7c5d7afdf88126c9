"""Adaptive wavelet density estimator from a :class:`WaveletLaplace` summary (Butucea et al. 2020, eq. (5)).

With S the released coefficient sums and n the number of reports,

    α̂_{j0k} = S_{j0−1,k}/n,    β̂_{jk} = S_{jk}/n,
    f̃(t) = Σ_k α̂_{j0k} φ_{j0k}(t) + Σ_{j=j0}^{j1} Σ_k β̃_{jk} ψ_{jk}(t).

The default release (tight calibration, levels not given) has no detail level
(j1 = j0 − 1, :func:`ldp_dask.channels.linear_level`): f̃ is then the linear
estimator Σ_k α̂_{j0k} φ_{j0k}, unbiased for the projection P_{j0} f, whose
integrated variance is Σ_k (Var φ_{j0k}(X) + 2σ²)/n. Spending ε on one level
instead of splitting it over 4–6 takes the risk from 3.4× to 1.6× that of the
best fixed resolution chosen with hindsight, in geometric mean over the grid of
``benchmarks/wavelet_rates.py`` (12.4× to 5.2× in the worst cell).

Thresholds (docs/corrections.md). The paper keeps β̂_{jk} when |β̂_{jk}| ≥ K t_j with
t_j = γ j^{ν+1/2} 2^{j/2}/√(nα²) and K = 4 c_A ‖ψ‖∞ (2ν−1)/(ν−1); since
σ_j = K (j∨1)^ν 2^{j/2}/α for the paper's calibration, K t_j = γ √j σ_j/√n
(for j ≥ 1). We use that form, λ_j = γ √j σ_j / √n, for either calibration:
a universal-type threshold on the noise scale (β̂_{jk} carries noise of
standard deviation √2 σ_j/√n). ``threshold``:

* ``"hard"`` (the paper's estimator (5)): β̃ = β̂ 1{|β̂| ≥ λ_j};
* ``"soft"``: β̃ = sign(β̂) max(|β̂| − λ_j, 0);
* ``"none"``: the linear estimator, every detail kept.

γ = :data:`DEFAULT_GAMMA` was chosen by ``benchmarks/wavelet_rates.py``
(section "Choice of γ" of ``benchmarks/RESULTS.md``): the value with the
smallest worst-case ratio to the best γ over three densities, three ε and
four n.

Projection. ``projection="density"`` (default) replaces f̃ by max(f̃ − c, 0)
with c such that it integrates to one: the L2 projection onto densities,
post-processing that never increases the L2 error (the truth is a density)
and costs no privacy. ``"none"`` keeps the paper's raw estimator.

Uncertainty. Conditionally on the selected coefficients, the kept terms have
variance Var(ĉ_k) = (Var f_k(X) + 2σ_ℓ²)/n, and for the sampling part
Σ_k f_k(t)² Var f_k(X) ≤ ‖f‖∞ Σ_k f_k(t)² (orthonormality), so

    se(t)² = Σ_ℓ Σ_{k kept} (2σ_ℓ² + ‖f̃‖∞) f_k(t)² / n,

a pointwise standard error that ignores the selection and the bias.

All densities are reported on the original scale: f_X(x) = f_T(t)/(hi − lo).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import LdpDaskError, check_probability
from ..channels import WaveletLaplace, WaveletSplit
from ..outputs import summary_info
from ..summary import Summary, read_summary
from .histogram import simplex_shift
from .results import DensityEstimate

__all__ = ["wavelet_density", "wavelet_thresholds", "pooled_split", "THRESHOLDS", "DEFAULT_GAMMA",
           "WaveletFunction"]

THRESHOLDS = ("hard", "soft", "none")
#: γ of λ_j = γ √j σ_j/√n; see the module docstring for how it was chosen.
DEFAULT_GAMMA = 4.0


def wavelet_thresholds(channel: WaveletLaplace, n: int, gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """λ_j = γ √j σ_j / √n for each detail level j0..j1 (docs/estimators.md)."""
    j = np.array([jj for _, jj in channel.levels[1:]], dtype=np.float64)
    return gamma * np.sqrt(j) * channel.sigmas[1:] / math.sqrt(n)


class WaveletFunction:
    """f(x) = shift-and-clip of Σ_ℓ Σ_k c_{ℓk} f_{ℓk}(t(x)) / (hi − lo), evaluated exactly.

    ``levels``: the (kind, j) of each array of ``coefs`` (default: the channel's blocks).
    """

    def __init__(self, channel: WaveletLaplace | WaveletSplit, coefs: list[np.ndarray], shift: float | None = None,
                 levels: list[tuple[str, int]] | None = None) -> None:
        self.channel, self.coefs, self.shift = channel, coefs, shift
        own: list[tuple[str, int]] = channel.levels if isinstance(channel, WaveletLaplace) else [
            ("phi", j) for j in channel.levels]
        self.levels: list[tuple[str, int]] = list(own if levels is None else levels)

    def raw_unit(self, t: np.ndarray) -> np.ndarray:
        """Σ c f(t) on the unit scale (density of t)."""
        b = self.channel.basis
        out = np.zeros(len(t))
        for (kind, j), c in zip(self.levels, self.coefs):
            if np.any(c):
                out += b.evaluate(t, j, kind, c)  # type: ignore[arg-type]
        return out

    def unit(self, t: np.ndarray) -> np.ndarray:
        v = self.raw_unit(t)
        return v if self.shift is None else np.maximum(v - self.shift, 0.0)

    def __call__(self, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        lo, hi = self.channel.domain
        shape = x.shape
        v = self.unit(self.channel.to_unit(x.ravel())) / (hi - lo)
        return v.reshape(shape)


def pooled_split(channel: WaveletSplit, sums: np.ndarray, group_n: np.ndarray, extra_variance: float = 1.0
                 ) -> tuple[list[tuple[str, int]], list[np.ndarray], list[float], np.ndarray]:
    """The levels of a split release pooled and shrunk (docs/estimators.md, "Wavelet density").

    Level L_g's rows estimate its father coefficients ĉ_g = S_g/n_g, each with variance at most
    v_g = (2σ_g² + ``extra_variance``)/n_g (2σ_g² the noise of one row on one coefficient; the default 1 bounds the
    average sampling variance per coefficient, Σ_k Var φ_{Lk}(X) ≤ E Σ_k φ_{Lk}(X)² ≈ 2^L). The exact orthonormal
    change of basis :meth:`~ldp_dask.bases.WaveletBasis.analysis` rewrites ĉ_g as father coefficients at the
    coarsest level L_1 and detail coefficients at L_1, …, L_g − 1, white noise staying white with the same
    variance. Each block is then the inverse-variance weighted mean over the levels that carry it (all of them for
    the father block, those with L_g > j for detail level j), of variance V = 1/Σ 1/v_g, and each detail level j,
    with d_j coefficients β̂_j, is multiplied by the positive-part James–Stein factor

        a_j = max(0, 1 − d_j V_j / ‖β̂_j‖²)

    (Cai 1999, the level as one block): in Gaussian noise, for d_j > 4, its risk on the level is at most
    d_j V_j − d_j(d_j − 4) V_j² / (‖β_j‖² + d_j V_j) — about the linear estimate's d_j V_j where the level carries
    signal, about ‖β_j‖² + 4 V_j where it carries none — so the data choose the resolution between L_1 and L_k.

    Returns the levels ((kind, j): the father block, then each detail level), their coefficients, their
    per-coefficient variances V (before shrinking) and the factors a_j.
    """
    b = channel.basis
    base = channel.levels[0]
    blocks: dict[tuple[str, int], list[tuple[np.ndarray, float]]] = {key: [] for key in _split_blocks(channel)}
    for g, (L, v) in enumerate(zip(channel.levels, _level_variances(channel, group_n, extra_variance))):
        if not np.isfinite(v):  # no row drew this level
            continue
        c = np.asarray(sums[channel.block(g)], dtype=np.float64) / float(group_n[g])
        for j in range(L, base, -1):
            c, d = b.analysis(c, j)
            blocks[("psi", j - 1)].append((d, v))
        blocks[("phi", base)].append((c, v))
    pooled = _pooled_variances(channel, group_n, extra_variance)
    levels = [key for key in blocks if blocks[key]]  # a block no row's level carries is left out
    coefs = [np.sum([x / v for x, v in blocks[key]], axis=0) * pooled[key] for key in levels]  # inverse-variance means
    variances = [pooled[key] for key in levels]
    factors = np.array([max(0.0, 1.0 - len(c) * V / max(float(c @ c), 1e-300))
                        for c, V in zip(coefs[1:], variances[1:])])
    coefs = [coefs[0]] + [a * c for a, c in zip(factors, coefs[1:])]
    return levels, coefs, variances, factors


def _split_blocks(channel: WaveletSplit) -> list[tuple[str, int]]:
    """The blocks a split release is pooled into: the father level L_1, then detail levels L_1, …, L_k − 1."""
    return [("phi", channel.levels[0])] + [("psi", j) for j in range(channel.levels[0], channel.levels[-1])]


def _level_variances(channel: WaveletSplit, group_n: np.ndarray, extra_variance: float) -> list[float]:
    """v_g = (2σ_g² + ``extra_variance``)/n_g per level (inf where no row drew it)."""
    return [(float(nv) + extra_variance) / float(ng) if ng > 0 else math.inf
            for nv, ng in zip(channel.noise_variances, group_n)]


def _pooled_variances(channel: WaveletSplit, group_n: np.ndarray, extra_variance: float) -> dict[tuple[str, int], float]:
    """V = 1/Σ 1/v_g over the levels that carry each block (all for the father block, L_g > j for detail j)."""
    v = _level_variances(channel, group_n, extra_variance)
    out = {}
    for kind, j in _split_blocks(channel):
        inv = sum(1.0 / vg for L, vg in zip(channel.levels, v) if kind == "phi" or L > j)
        if inv > 0:
            out[(kind, j)] = 1.0 / inv
    return out


def wavelet_density(
    summary: Summary | str,
    threshold: str = "hard",
    gamma: float = DEFAULT_GAMMA,
    projection: str = "density",
    level: float = 0.95,
    grid: int | None = None,
) -> DensityEstimate:
    """Adaptive thresholded wavelet density estimate (Butucea et al. 2020, eq. (5)).

    Parameters
    ----------
    summary : Summary or path
        A summary of the ``wavelet`` channel.
    threshold : {"hard", "soft", "none"}
        Hard thresholding (the paper's), soft, or none (linear estimator). A
        summary of the father level alone (the default release, j1 = j0 − 1) has
        no detail to threshold: its estimate is the linear one, method
        ``wavelet-linear``.
    gamma : float
        γ > 0 in λ_j = γ √j σ_j/√n.
    projection : {"density", "none"}
        Project onto densities (default) or return the raw estimate.
    level : float
        Confidence level of the pointwise band, in (0, 1).
    grid : int, optional
        Number of cells of the tabulation behind cdf/quantile/plot (default
        max(1024, 2^(j1+4)), at most 2^16).
    """
    s = read_summary(summary)
    ch = s.channel
    if not isinstance(ch, (WaveletLaplace, WaveletSplit)):
        raise LdpDaskError(f"wavelet_density needs a summary of the 'wavelet' channel (or 'wavelet-split'); got "
                           f"{ch.name!r}.")
    if threshold not in THRESHOLDS:
        raise LdpDaskError(f"The 'threshold' parameter must be one of {', '.join(THRESHOLDS)}. Got {threshold!r} instead.")
    if projection not in ("density", "none"):
        raise LdpDaskError(f"The 'projection' parameter must be 'density' or 'none'. Got {projection!r} instead.")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not (0 < gamma < math.inf):
        raise LdpDaskError(f"The 'gamma' parameter must be a finite number > 0. Got {gamma!r} instead.")
    level = check_probability(level, "level")
    finest = ch.levels[-1] if isinstance(ch, WaveletSplit) else ch.j1
    G = grid if grid is not None else min(1 << 16, max(1024, 1 << (finest + 4)))
    if isinstance(G, bool) or not isinstance(G, (int, np.integer)) or not (16 <= G <= 1 << 22):
        raise LdpDaskError(f"The 'grid' parameter must be an integer in [16, 4194304]. Got {grid!r} instead.")
    n = s.n
    if isinstance(ch, WaveletSplit):
        return _split_density(s, ch, projection, level, G)
    raw = s.sums["sum"] / n
    coefs = [raw[sl].copy() for sl in ch.slices]
    lam = wavelet_thresholds(ch, n, gamma)
    kept = [np.ones(len(coefs[0]), dtype=bool)]
    for i, lj in enumerate(lam, start=1):
        c = coefs[i]
        if threshold == "hard":
            keep = np.abs(c) >= lj
            c[~keep] = 0.0
        elif threshold == "soft":
            keep = np.abs(c) > lj
            coefs[i] = np.sign(c) * np.maximum(np.abs(c) - lj, 0.0)
        else:
            keep = np.ones(len(c), dtype=bool)
        kept.append(keep)

    f = WaveletFunction(ch, coefs)
    t_mid, v, edges, width = _on_grid(f, projection, G)
    sup_f = float(max(v.max(), 0.0))
    var = np.zeros(G)
    for (kind, j), nv, kp in zip(ch.levels, ch.noise_variances, kept):
        if kp.any():
            var += ch.basis.evaluate(t_mid, j, kind, kp * (nv + sup_f), power=2)  # type: ignore[arg-type]
    se = np.sqrt(var / n) / width
    linear = ch.linear  # the father level alone: nothing to threshold
    method = ("wavelet-linear" if linear else f"wavelet-{threshold}") + ("+density" if projection == "density" else "")
    n_kept = [int(k.sum()) for k in kept[1:]]
    return DensityEstimate(
        edges=edges, density=v / width, se=se, method=method, n=n, epsilon=ch.epsilon, level=level,
        info={
            **summary_info(s), "domain": list(ch.domain), "wavelet": ch.wavelet,
            "j0": ch.j0, "j1": ch.j1, "calibration": ch.calibration, "nu": ch.nu, "gamma": gamma,
            "threshold": threshold, "thresholds": lam, "kept_per_level": n_kept,
            "sigmas": ch.sigmas, "projection_shift": f.shift,
            "label": (f"{ch.wavelet} level {ch.j0}, linear" if linear
                      else f"{ch.wavelet} levels {ch.j0}–{ch.j1}, {threshold} threshold"),
        },
        evaluator=f,
    )


def _on_grid(f: WaveletFunction, projection: str, G: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The estimate at the G cell midpoints of the unit interval (projected onto densities if asked: sets
    ``f.shift``), the cell edges on the original scale and the domain's width."""
    lo, hi = f.channel.domain
    width = hi - lo
    t_mid = (np.arange(G) + 0.5) / G
    v = f.raw_unit(t_mid)
    if projection == "density":
        f.shift = simplex_shift(v / G) * G
        v = np.maximum(v - f.shift, 0.0)
    edges = lo + np.arange(G + 1) * (width / G)
    edges[-1] = hi
    return t_mid, v, edges, width


def _split_density(s: Summary, ch: WaveletSplit, projection: str, level: float, G: int) -> DensityEstimate:
    """:func:`wavelet_density` for a split release: the pooled, level-wise shrunk estimate (:func:`pooled_split`).

    Band: the kept terms' variance, each block's V with the sampling bound ‖f̃‖∞ in place of 1, times a_j² for
    detail level j — pointwise, ignoring the shrinkage's randomness and its bias, as for the other releases.
    """
    group_n = np.asarray(s.sums["group_n"], dtype=np.float64)
    levels, coefs, variances, factors = pooled_split(ch, s.sums["sum"], group_n)
    f = WaveletFunction(ch, coefs, levels=levels)
    t_mid, v, edges, width = _on_grid(f, projection, G)
    sup_f = float(max(v.max(), 0.0))
    with_sup = _pooled_variances(ch, group_n, max(sup_f, 1e-12))
    var = np.zeros(G)
    for (kind, j), a2 in zip(levels, np.concatenate([[1.0], factors**2])):
        V = with_sup[(kind, j)]
        if a2 > 0:
            var += ch.basis.evaluate(t_mid, j, kind, np.full(ch.basis.n_coefs(j), a2 * V), power=2)  # type: ignore[arg-type]
    se = np.sqrt(var) / width
    method = "wavelet-split" + ("+density" if projection == "density" else "")
    details = ", ".join(f"{j}: {a:.2f}" for (_, j), a in zip(levels[1:], factors))
    return DensityEstimate(
        edges=edges, density=v / width, se=se, method=method, n=s.n, epsilon=ch.epsilon, level=level,
        info={
            **summary_info(s), "domain": list(ch.domain), "wavelet": ch.wavelet, "levels": list(ch.levels),
            "shares": list(ch.shares), "rows_per_level": [int(x) for x in group_n],
            "shrink_factors": [float(a) for a in factors], "projection_shift": f.shift,
            "label": f"{ch.wavelet} levels {ch.levels[0]}–{ch.levels[-1]} pooled, details shrunk ({details})",
        },
        evaluator=f,
    )
