"""Histogram density from a :class:`LaplaceHistogram` (or :class:`HaarLaplace`) summary (docs/estimators.md).

With S_j = Σ_i Z_ij the released bin sums,

    p̂_j = S_j / n,   f̂_j = p̂_j · K / (b − a),

p̂ is unbiased with Var p̂_j = (p_j(1 − p_j) + 2σ²)/n, σ = 2/α the noise
scale (each Z_ij carries σ W_ij with Var W = 2). The standard error plugs in
p̂_j clipped to [0, 1].

``projection="simplex"`` replaces p̂ by its Euclidean projection onto the
probability simplex {p ≥ 0, Σ p = 1} (Duchi et al. 2008). The true p lies in
that convex set, so the projection never increases the L2 error
‖p̃ − p‖₂ ≤ ‖p̂ − p‖₂ and yields a proper density; it is post-processing, so
it costs no privacy.
"""

from __future__ import annotations

import numpy as np

from .._validation import LdpDaskError, check_probability
from ..channels import HaarLaplace, LaplaceHistogram
from ..outputs import summary_info
from ..summary import Summary, read_summary
from .results import DensityEstimate

__all__ = ["histogram_density", "project_simplex", "simplex_shift"]


def _shift_below_top(w: np.ndarray) -> float:
    """τ for ``w`` whose largest value is 0 and none below −1 (Duchi et al. 2008, sort-based, O(K log K))."""
    u = np.sort(w)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.arange(1, len(w) + 1)
    r = int(k[np.flatnonzero(u - css / k > 0)[-1]])  # k = 1 qualifies exactly here: u₁ = 0, css₁ = −1
    return float(css[r - 1] / r)


def simplex_shift(v: np.ndarray) -> float:
    """The τ with Σ max(v − τ, 0) = 1 (Duchi et al. 2008, sort-based, O(K log K)).

    Computed on v − max v, with values below −1 raised to −1 (they project to 0 either way, since τ ≥ max v − 1):
    the same τ, without the rounding that lost every index at 1e300 or overflowed a sum at 1.7e308."""
    v = np.asarray(v, dtype=np.float64)
    top = float(v.max())
    return top + _shift_below_top(np.maximum(v - top, -1.0))


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of ``v`` onto {p ≥ 0, Σ p = 1}: max(v − τ, 0), computed relative to max v."""
    v = np.asarray(v, dtype=np.float64)
    w = np.maximum(v - float(v.max()), -1.0)
    return np.maximum(w - _shift_below_top(w), 0.0)


def histogram_density(
    summary: Summary | str, projection: str = "simplex", level: float = 0.95
) -> DensityEstimate:
    """Density estimate from a histogram summary.

    Parameters
    ----------
    summary : Summary or path
    projection : {"simplex", "none"}
        ``"none"`` returns the raw unbiased estimate (may be negative).
    level : float
        Confidence level of the pointwise band, in (0, 1).
    """
    s = read_summary(summary)
    if not isinstance(s.channel, (LaplaceHistogram, HaarLaplace)):
        raise LdpDaskError(
            f"histogram_density needs a summary of the 'histogram' or 'haar' channel; got {s.channel.name!r}."
        )
    if projection not in ("simplex", "none"):
        raise LdpDaskError(f"The 'projection' parameter must be 'simplex' or 'none'. Got {projection!r} instead.")
    level = check_probability(level, "level")
    ch = s.channel
    lo, hi = ch.domain
    n = s.n
    c = getattr(ch, "c", 1.0)  # a Haar summary holds 2^{J/2} × the histogram's sums (docs/estimators.md)
    p_hat = s.sums["sum"] / (c * n)
    pc = np.clip(p_hat, 0.0, 1.0)
    var = (pc * (1 - pc) + ch.noise_variance / c**2) / n
    scale = ch.bins / (hi - lo)
    p = project_simplex(p_hat) if projection == "simplex" else p_hat
    return DensityEstimate(
        edges=ch.edges,
        density=p * scale,
        se=np.sqrt(var) * scale,
        method="histogram+simplex" if projection == "simplex" else "histogram",
        n=n,
        epsilon=ch.epsilon,
        level=level,
        info={**summary_info(s), "bins": ch.bins, "domain": list(ch.domain)},
        raw=p_hat * scale,
    )
