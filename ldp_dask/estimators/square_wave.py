"""Densities and CDF bounds from a Square Wave summary (Li, Wang, Lopuhaä-Zwakenberg, Li and Škorić 2020;
docs/estimators.md).

With c the D released report counts and M the D × d transition matrix of the channel (M[j, i] = P(j | i), p on a
cell's band of 2B + 1 indices, q elsewhere), the counts are multinomial with probabilities M·θ, θ the cells'
probabilities.

``square_wave_density``: expectation–maximisation with smoothing (EMS). From the uniform θ, repeat

    θ ← θ ⊙ Mᵀ(c / Mθ) / n        (the EM step for the multinomial likelihood)
    θ ← S θ / Σ S θ               (binomial smoothing, weights 1/4, 1/2, 1/4; at the ends 2/3, 1/3)

until the log-likelihood Σ c_j log (Mθ)_j improves by less than ``tol`` or θ moves by less than 1/n in L1
(``select="tol"``, the paper's rule). M is banded, so Mθ and Mᵀr are differences of cumulative sums: O(D) per
iteration. EMS is post-processing of the released counts (no privacy cost). The smoothing trades variance for bias,
so the estimate carries no pointwise band; its error is measured in ``benchmarks/distributions.py``.

The default, ``select="cv"``, chooses the smoothing and the stop from the counts themselves. The smoothing weight a
(kernel a, 1 − 2a, a) ranges over 1/4 (the paper's), 1/16, 1/64 and 0 (plain EM), the stop over checkpoints
10·2^{k/2} iterations. The released counts are a sum of one report per row, so thinning them — c¹_j ~ Binomial(c_j,
1/2), c² = c − c¹ — sends each row's report to one half or the other by a fair coin: c¹ and c² are the report counts of
two disjoint random halves of the rows (count splitting; Neufeld et al. 2024), exactly, whatever the data. Each
candidate is fitted on one half and scored by the held-out log-likelihood Σ_j c²_j log (Mθ̂¹)_j of the other (and
the other way round, over two independent thinnings: a cross-validated stopping rule for EM in the manner of
Coakley 1991); the weight with the largest total score is then read off the same path run on all the counts, two
checkpoints (a factor 2 in iterations) past the stop chosen on the halves: EM fitted to more rows is best stopped
later (the chosen stops grow like n^0.45 to n^0.9 in ``benchmarks/distributions.py``), and a half's best stop is early
for all n rows. The paths run side by side as one array, and stop once no weight's score has improved for four checkpoints (a
factor 4 in iterations). Where the data sit on atoms (a table of a few hundred distinct values) the choice is plain
EM run long, which resolves them; where the density is smooth it is the paper's smoothing stopped early.

``square_wave_cdf_bounds``: bounds on F(e_t) = P(X < e_t) at every cell edge that hold for every distribution.
g_j = (c_j/n − q)/(p − q) is unbiased for the mass of the cells whose band holds index j. Summing g over the
indices 0 … t − 1 + 2B and dividing by 2B + 1 gives a weight 1 to every cell below t and a weight that falls
linearly to 0 over the next 2B cells, so its mean is at least F(e_t) (and at most F(e_{t+2B})); summing over
0 … t − 1 gives a mean of at most F(e_t). Each is (the count of a set of indices)/n, affinely transformed, so its
variance is π_S(1 − π_S)/(nκ²), κ = (2B + 1)(p − q), π_S the set's report probability (plugged in, clipped) —
exact for n rows drawn from the distribution, conservative for a fixed table. The bounds are loose by up to 2B
cells (2b of the domain: 0.51 at ε = 1, 0.26 at ε = 2, 0.06 at ε = 4), the price of asking nothing of the
distribution.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import LdpDaskError, check_int, check_probability
from ..channels import SquareWave
from ..outputs import summary_info
from ..summary import Summary, read_summary
from .results import DensityEstimate

__all__ = ["square_wave_density", "square_wave_cdf_bounds", "ems", "ems_cv", "DEFAULT_TOL", "CV_WEIGHTS"]

#: EMS stops when the log-likelihood improves by less than this (or θ moves less than 1/n in L1)
DEFAULT_TOL = 1e-3
MAX_ITERATIONS = 10_000
#: the smoothing weights a (kernel a, 1 − 2a, a) that ``select="cv"`` chooses among; 1/4 is the paper's, 0 plain EM
CV_WEIGHTS = (0.25, 0.0625, 0.015625, 0.0)
#: ``select="cv"`` gives up on a weight once its held-out score has not improved for this many checkpoints
CV_PATIENCE = 4
#: the stop applied to all the counts is this many checkpoints (a factor 2^{1/2} each) past the one chosen on halves
CV_STOP_SHIFT = 2


def _channel(s: Summary, what: str) -> SquareWave:
    if not isinstance(s.channel, SquareWave):
        raise LdpDaskError(f"{what} needs a summary of the 'square-wave' channel; got {s.channel.name!r}.")
    return s.channel


def _cumulative(v: np.ndarray) -> np.ndarray:
    """Cumulative sums along the last axis with a leading 0: out[..., k] = Σ_{i<k} v[..., i]."""
    out = np.zeros(v.shape[:-1] + (v.shape[-1] + 1,))
    np.cumsum(v, axis=-1, out=out[..., 1:])
    return out


def _forward(theta: np.ndarray, ch: SquareWave) -> np.ndarray:
    """M·θ along the last axis: the report probabilities of the D indices."""
    p, q = ch.probabilities
    B, d = ch.band, ch.cells
    cum = _cumulative(theta)
    j = np.arange(ch.size)
    inband = cum[..., np.minimum(j, d - 1) + 1] - cum[..., np.clip(j - 2 * B, 0, d)]
    return q * cum[..., -1:] + (p - q) * inband


def _adjoint(r: np.ndarray, ch: SquareWave) -> np.ndarray:
    """Mᵀ·r along the last axis: for each cell, q·Σ r + (p − q)·(r summed over the cell's band)."""
    p, q = ch.probabilities
    B, d = ch.band, ch.cells
    cum = _cumulative(r)
    i = np.arange(d)
    return q * cum[..., -1:] + (p - q) * (cum[..., i + 2 * B + 1] - cum[..., i])


def _smooth(theta: np.ndarray, a: float | np.ndarray = 0.25) -> np.ndarray:
    """One pass of the kernel (a, 1 − 2a, a) along the last axis, renormalised at the ends to (1 − 2a, a)/(1 − a)
    (2/3, 1/3 for the paper's a = 1/4); ``a`` may hold one weight per row of a 2-D ``theta``."""
    if theta.shape[-1] < 3:
        return theta
    w = np.asarray(a, dtype=np.float64)
    c = w[..., None]
    out = np.empty_like(theta)
    out[..., 1:-1] = c * (theta[..., :-2] + theta[..., 2:]) + (1 - 2 * c) * theta[..., 1:-1]
    out[..., 0] = ((1 - 2 * w) * theta[..., 0] + w * theta[..., 1]) / (1 - w)
    out[..., -1] = ((1 - 2 * w) * theta[..., -1] + w * theta[..., -2]) / (1 - w)
    return out


def ems(counts: np.ndarray, ch: SquareWave, smooth: bool = True, tol: float = DEFAULT_TOL,
        max_iterations: int = MAX_ITERATIONS) -> tuple[np.ndarray, int]:
    """EM (with smoothing) for the cells' probabilities from the report counts, from the uniform θ; returns
    ``(θ, iterations)``."""
    c = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
    n = c.sum()
    if n <= 0:
        raise LdpDaskError("the summary holds no reports; EMS needs at least one row.")
    theta = np.full(ch.cells, 1.0 / ch.cells)
    fwd = _forward(theta, ch)
    ll_old = -math.inf
    for it in range(1, max_iterations + 1):
        prev = theta
        theta = prev * _adjoint(c / fwd, ch)
        theta /= theta.sum()
        if smooth:
            theta = _smooth(theta)
            theta /= theta.sum()
        fwd = _forward(theta, ch)  # the log-likelihood's and the next step's M·θ
        ll = float(c @ np.log(fwd))
        if (it > 2 and abs(ll - ll_old) < tol) or np.abs(theta - prev).sum() <= 1.0 / n:
            return theta, it
        ll_old = ll
    return theta, max_iterations


def _checkpoints(max_iterations: int) -> list[int]:
    """The stops ``select="cv"`` compares: 10·2^{k/2} iterations, rounded, up to ``max_iterations``."""
    ks = sorted({round(10 * 2 ** (k / 2)) for k in range(64)})
    return [k for k in ks if k <= max_iterations] or [max_iterations]


def ems_cv(counts: np.ndarray, ch: SquareWave, rng: np.random.Generator, weights: tuple[float, ...] = CV_WEIGHTS,
           max_iterations: int = MAX_ITERATIONS, repeats: int = 2) -> tuple[np.ndarray, dict[str, Any]]:
    """EM with the smoothing weight and the stop chosen by count-splitting cross-validation (module docstring).

    ``repeats`` independent thinnings of the counts, each scored both ways, run as one array beside the full counts'
    paths (one per weight). Returns ``(θ, choice)``: θ from the full counts at the chosen weight and stop, and
    ``choice`` = the weight, the iterations, and each weight's best held-out log-likelihood relative to the
    chosen one (≤ 0)."""
    c = np.rint(np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)).astype(np.int64)
    if c.sum() <= 0:
        raise LdpDaskError("the summary holds no reports; EMS needs at least one row.")
    nw = len(weights)
    train, test = [], []
    for _ in range(repeats):
        c1 = rng.binomial(c, 0.5)
        for tr, te in ((c1, c - c1), (c - c1, c1)):
            train += [tr] * nw
            test += [te] * nw
    if min(int(t.sum()) for t in train) == 0:
        return ems(c, ch)[0], {"weight": 0.25, "iterations": None, "fallback": "too few reports to split: the "
                               "paper's EMS, stopped by its tolerance"}
    k = len(train)
    C = np.vstack([np.asarray(train, dtype=np.float64), np.tile(c.astype(np.float64), (nw, 1))])
    T = np.asarray(test, dtype=np.float64)
    A = np.concatenate([np.tile(weights, 2 * repeats), weights])
    theta = np.full((len(C), ch.cells), 1.0 / ch.cells)
    fwd = _forward(theta, ch)
    best, stale = np.full(nw, -np.inf), np.zeros(nw, dtype=int)
    best_at = np.zeros(nw, dtype=int)  # each weight's best checkpoint (its index among the checkpoints)
    # each weight's full-count estimate CV_STOP_SHIFT checkpoints past its best (or the last one reached): the stop
    # is chosen on half the rows, and all n rows need more iterations
    late: dict[int, tuple[np.ndarray, int, int]] = {}
    stops = _checkpoints(max_iterations)
    t = -1
    for it in range(1, stops[-1] + 1):
        theta = theta * _adjoint(C / fwd, ch)
        theta = _smooth(theta / theta.sum(axis=-1, keepdims=True), A)
        theta /= theta.sum(axis=-1, keepdims=True)
        fwd = _forward(theta, ch)
        if it not in stops:
            continue
        t += 1
        score = np.einsum("ij,ij->i", T, np.log(fwd[:k])).reshape(-1, nw).sum(axis=0)
        better = score > best
        best, stale = np.where(better, score, best), np.where(better, 0, stale + 1)
        best_at = np.where(better, t, best_at)
        for i in np.flatnonzero(t - best_at <= CV_STOP_SHIFT):
            late[int(i)] = (theta[k + i].copy(), it, stops[best_at[i]])
        if (stale >= CV_PATIENCE).all():
            break
    w = int(np.argmax(best))
    theta_w, its, half_its = late[w]
    return theta_w, {"weight": float(weights[w]), "iterations": its, "half_iterations": half_its,
                     "scores": {f"{a:g}": float(b - best[w]) for a, b in zip(weights, best)}}


def square_wave_density(summary: Summary | str, select: str = "cv", smooth: bool = True, tol: float | None = None,
                        max_iterations: int = MAX_ITERATIONS, level: float = 0.95,
                        seed: int | np.random.Generator = 0) -> DensityEstimate:
    """Density on the channel's d cells by EM with smoothing (module docstring).

    Parameters
    ----------
    summary : Summary or path
        A ``square-wave`` summary.
    select : {"cv", "tol"}
        ``"cv"`` (default): the smoothing weight (1/4, 1/16, 1/64 or none) and the stop chosen by count-splitting
        cross-validation on the released counts. ``"tol"``: the paper's EMS (weight 1/4, or none with
        ``smooth=False``), stopped when the log-likelihood improves by less than ``tol``.
    smooth : bool
        With ``select="tol"``: EMS (default) or plain EM (``False``: less bias, much more variance).
    tol : float, optional
        With ``select="tol"``: the stopping tolerance (> 0; default 10⁻³).
    max_iterations : int
        At most this many iterations (1 … 10^6).
    level : float
        Recorded with the estimate (the level the other density estimates use for their band); the smoothed
        estimate itself has no band.
    seed : int or numpy.random.Generator
        The randomness of the count splitting (``select="cv"``); the default 0 makes the estimate a fixed function of
        the summary. Post-processing: it spends no ε.

    Returns
    -------
    DensityEstimate
        Piecewise constant on the d cells; ``se`` is NaN (the smoothed estimate has no unbiased band). Quantile
        intervals: :func:`ldp_dask.estimators.local_quantiles` (bounds valid for every distribution). ``info``
        records the weight and the iterations, and with ``select="cv"`` each weight's held-out score.

    Notes
    -----
    Bias and variance: the smoothing and the stop trade one for the other and have no closed form; the errors are
    measured in ``benchmarks/distributions.py``. The thinning that ``select="cv"`` scores on splits the rows exactly in
    two random halves, so the choice is honest for any data; it is a half-sample's choice, applied to all n rows with
    the stop doubled.
    """
    s = read_summary(summary)
    ch = _channel(s, "square_wave_density")
    if select not in ("cv", "tol"):
        raise LdpDaskError(f"The 'select' parameter must be 'cv' or 'tol'. Got {select!r} instead.")
    if select == "cv" and (tol is not None or smooth is not True):
        raise LdpDaskError("The 'tol' and 'smooth' parameters apply with select='tol' (the paper's EMS); "
                           "select='cv' chooses the smoothing and the stop itself.")
    tol = DEFAULT_TOL if tol is None else tol
    if not (isinstance(tol, (int, float)) and tol > 0):
        raise LdpDaskError(f"The 'tol' parameter must be a number > 0. Got {tol!r} instead.")
    max_iterations = check_int(max_iterations, "max_iterations", 1, 10**6)
    level = check_probability(level, "level")
    if select == "cv":
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(check_int(seed, "seed", 0))
        theta, choice = ems_cv(s.sums["sum"], ch, rng, max_iterations=max_iterations)
        its, a = choice["iterations"], choice["weight"]
        label = (f"{ch.cells} cells, EM with smoothing weight {a:g} after {its} iterations "
                 "(both chosen by cross-validation)" if its is not None else f"{ch.cells} cells, EMS")
    else:
        theta, its = ems(s.sums["sum"], ch, smooth=bool(smooth), tol=float(tol), max_iterations=max_iterations)
        choice = {"weight": 0.25 if smooth else 0.0, "iterations": its}
        label = f"{ch.cells} cells, EMS after {its} iterations" if smooth else f"{ch.cells} cells, EM after {its} iterations"
    lo, hi = ch.domain
    scale = ch.cells / (hi - lo)
    method = "square-wave+ems" if select == "cv" or smooth else "square-wave+em"
    return DensityEstimate(
        edges=ch.edges, density=theta * scale, se=np.full(ch.cells, np.nan), method=method, n=s.n,
        epsilon=ch.epsilon, level=level,
        info={**summary_info(s), "cells": ch.cells, "band": ch.band, "iterations": its, "domain": list(ch.domain),
              "select": select, "smoothing": choice, "label": label})


def square_wave_cdf_bounds(summary: Summary | str, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(edges, upper, lower)``: bounds on F at the d + 1 cell edges, valid for every distribution (module
    docstring); each side fails with probability (1 − ``level``)/2 at each edge (normal approximation), so the
    interval between them holds F(e_t) with probability at least ``level``. F(e_0) = 0 and F(e_d) = 1 exactly."""
    from scipy.stats import norm

    s = read_summary(summary)
    ch = _channel(s, "square_wave_cdf_bounds")
    level = check_probability(level, "level")
    z = float(norm.ppf(0.5 + level / 2))
    n, d, w = s.n, ch.cells, 2 * ch.band + 1
    p, q = ch.probabilities
    kappa = w * (p - q)
    cum = np.concatenate([[0.0], np.cumsum(np.asarray(s.sums["sum"], dtype=np.float64))]) / n  # cum[k] = Σ_{j<k}
    t = np.arange(d + 1)

    def bound(k: np.ndarray, sign: float) -> np.ndarray:
        pi = cum[k]
        est = (pi - k * q) / kappa
        pc = np.clip(pi, 0.0, 1.0)
        return est + sign * z * np.sqrt(pc * (1 - pc) / n) / kappa

    upper = np.clip(bound(t + w - 1, 1.0), 0.0, 1.0)
    lower = np.clip(bound(t, -1.0), 0.0, 1.0)
    upper[0], lower[0], upper[-1], lower[-1] = 0.0, 0.0, 1.0, 1.0
    return ch.edges, upper, lower
