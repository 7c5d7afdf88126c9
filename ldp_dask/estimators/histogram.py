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


def _shift(v: np.ndarray) -> float | None:
    """τ by the sort-based rule (Duchi et al. 2008, O(K log K)), or None where rounding lost it (|v| ~ 1e300)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.arange(1, len(v) + 1)
    found = np.flatnonzero(u - css / k > 0)  # k = 1 always qualifies in exact arithmetic
    if found.size == 0:
        return None
    tau = float(css[found[-1]] / k[found[-1]])
    return tau if np.isfinite(tau) else None


def simplex_shift(v: np.ndarray) -> float:
    """The τ with Σ max(v − τ, 0) = 1 (Duchi et al. 2008, sort-based, O(K log K)).

    Where rounding loses it (a value of 1e300 makes u₁ − (u₁ − 1) round to 0; 1.7e308 overflows the sums), it is
    computed on v − max v with values below −1 raised to −1, which project to 0 either way (τ ≥ max v − 1)."""
    v = np.asarray(v, dtype=np.float64)
    tau = _shift(v)
    if tau is not None:
        return tau
    top = float(v.max())
    below = _shift(np.maximum(v - top, -1.0))
    assert below is not None  # the largest is 0 and css₁ = −1: k = 1 qualifies exactly
    return top + below


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of ``v`` onto {p ≥ 0, Σ p = 1}: max(v − τ, 0) (relative to max v where τ alone would
    lose the result to rounding, :func:`simplex_shift`)."""
    v = np.asarray(v, dtype=np.float64)
    tau = _shift(v)
    if tau is not None:
        return np.maximum(v - tau, 0.0)
    w = np.maximum(v - float(v.max()), -1.0)
    below = _shift(w)
    assert below is not None
    return np.maximum(w - below, 0.0)


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
