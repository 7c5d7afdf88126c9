"""Densities and CDF bounds from a Square Wave summary (Li, Wang, Lopuhaä-Zwakenberg, Li and Škorić 2020;
docs/estimators.md).

With c the D released report counts and M the D × d transition matrix of the channel (M[j, i] = P(j | i), p on a
cell's band of 2B + 1 indices, q elsewhere), the counts are multinomial with probabilities M·θ, θ the cells'
probabilities.

``square_wave_density``: expectation–maximisation with smoothing (EMS). From the uniform θ, repeat

    θ ← θ ⊙ Mᵀ(c / Mθ) / n        (the EM step for the multinomial likelihood)
    θ ← S θ / Σ S θ               (binomial smoothing, weights 1/4, 1/2, 1/4; at the ends 2/3, 1/3)

until the log-likelihood Σ c_j log (Mθ)_j improves by less than ``tol`` or θ moves by less than 1/n in L1.
M is banded, so Mθ and Mᵀr are differences of cumulative sums: O(D) per iteration. EMS is post-processing of the
released counts (no privacy cost). The smoothing trades variance for bias, so the estimate carries no pointwise
band; its error is measured in ``benchmarks/distributions.py``.

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

import numpy as np

from .._validation import LdpDaskError, check_int, check_probability
from ..channels import SquareWave
from ..outputs import summary_info
from ..summary import Summary, read_summary
from .results import DensityEstimate

__all__ = ["square_wave_density", "square_wave_cdf_bounds", "ems", "DEFAULT_TOL"]

#: EMS stops when the log-likelihood improves by less than this (or θ moves less than 1/n in L1)
DEFAULT_TOL = 1e-3
MAX_ITERATIONS = 10_000


def _channel(s: Summary, what: str) -> SquareWave:
    if not isinstance(s.channel, SquareWave):
        raise LdpDaskError(f"{what} needs a summary of the 'square-wave' channel; got {s.channel.name!r}.")
    return s.channel


def _forward(theta: np.ndarray, ch: SquareWave) -> np.ndarray:
    """M·θ: the report probabilities of the D indices."""
    p, q = ch.probabilities
    B, d = ch.band, ch.cells
    cum = np.concatenate([[0.0], np.cumsum(theta)])
    j = np.arange(ch.size)
    inband = cum[np.minimum(j, d - 1) + 1] - cum[np.clip(j - 2 * B, 0, d)]
    return q * cum[-1] + (p - q) * inband


def _adjoint(r: np.ndarray, ch: SquareWave) -> np.ndarray:
    """Mᵀ·r: for each cell, q·Σ r + (p − q)·(r summed over the cell's band)."""
    p, q = ch.probabilities
    B, d = ch.band, ch.cells
    cum = np.concatenate([[0.0], np.cumsum(r)])
    i = np.arange(d)
    return q * cum[-1] + (p - q) * (cum[i + 2 * B + 1] - cum[i])


def _smooth(theta: np.ndarray) -> np.ndarray:
    if len(theta) < 3:
        return theta
    out = np.empty_like(theta)
    out[1:-1] = 0.25 * theta[:-2] + 0.5 * theta[1:-1] + 0.25 * theta[2:]
    out[0] = (2 * theta[0] + theta[1]) / 3
    out[-1] = (2 * theta[-1] + theta[-2]) / 3
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


def square_wave_density(summary: Summary | str, smooth: bool = True, tol: float = DEFAULT_TOL,
                        max_iterations: int = MAX_ITERATIONS, level: float = 0.95) -> DensityEstimate:
    """Density on the channel's d cells by EMS (module docstring).

    Parameters
    ----------
    summary : Summary or path
        A ``square-wave`` summary.
    smooth : bool
        EMS (default) or plain EM (``False``: less bias, much more variance).
    tol : float
        Stop when the log-likelihood improves by less than ``tol`` (> 0).
    max_iterations : int
        At most this many iterations (1 … 10^6).
    level : float
        Recorded with the estimate (the level the other density estimates use for their band); the smoothed
        estimate itself has no band.

    Returns
    -------
    DensityEstimate
        Piecewise constant on the d cells; ``se`` is NaN (the smoothed estimate has no unbiased band). Quantile
        intervals: :func:`ldp_dask.estimators.local_quantiles` (bounds valid for every distribution).
    """
    s = read_summary(summary)
    ch = _channel(s, "square_wave_density")
    if not (isinstance(tol, (int, float)) and tol > 0):
        raise LdpDaskError(f"The 'tol' parameter must be a number > 0. Got {tol!r} instead.")
    max_iterations = check_int(max_iterations, "max_iterations", 1, 10**6)
    level = check_probability(level, "level")
    theta, its = ems(s.sums["sum"], ch, smooth=bool(smooth), tol=float(tol), max_iterations=max_iterations)
    lo, hi = ch.domain
    scale = ch.cells / (hi - lo)
    method = "square-wave+ems" if smooth else "square-wave+em"
    return DensityEstimate(
        edges=ch.edges, density=theta * scale, se=np.full(ch.cells, np.nan), method=method, n=s.n,
        epsilon=ch.epsilon, level=level,
        info={**summary_info(s), "cells": ch.cells, "band": ch.band, "iterations": its, "domain": list(ch.domain),
              "label": f"{ch.cells} cells, EMS after {its} iterations" if smooth else
              f"{ch.cells} cells, EM after {its} iterations"})


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
