"""Mean and its confidence interval from a bounded-mean summary (docs/estimators.md).

Hybrid, Piecewise and Duchi's mechanisms (:class:`~ldp_dask.channels.HybridMean`): θ̂ = S/n is unbiased for
E X and the summary carries the sum of squares of the views, so the standard error is the views' sample standard
deviation over √n — a consistent estimate of the whole variance (data and noise), with no bound on Var X needed.
The share of it due to the noise is estimated from the mechanisms' closed-form Var[t* | t] (linear in E t²,
solved for Var t); for Duchi's mechanism alone the views' variance B² − μ² does not depend on Var t, and the share
reported is its lower bound with Var t at the Bhatia–Davis bound.

Laplace mean (:class:`~ldp_dask.channels.LaplaceMean`): θ̂ = S/n is unbiased for E X with Var θ̂ = (Var X + 2b²)/n, b = (hi − lo)/α
(docs/estimators.md: Var X/n + 8M²/(nα²)). Var X is not released, so the interval
bounds it by the Bhatia–Davis inequality Var X ≤ (hi − μ)(μ − lo), with μ
replaced by θ̂ clipped to the domain. At worst (Var X = 0 at the middle of the
domain) the interval is √(1 + α²/8) times as wide as with the true Var X:
6% at α = 1, 22% at α = 2, 73% at α = 4. The normal interval is
intersected with the domain, where μ must lie.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import norm

from .._validation import LdpDaskError, check_probability
from ..channels import HybridMean, LaplaceMean, MemoMean
from ..outputs import summary_info
from ..summary import Summary, read_summary
from .results import MeanEstimate

__all__ = ["mean"]


def mean(summary: Summary | str, level: float = 0.95) -> MeanEstimate:
    """Private mean with a noise-aware confidence interval at ``level``."""
    s = read_summary(summary)
    if not isinstance(s.channel, (LaplaceMean, HybridMean, MemoMean)):
        raise LdpDaskError(f"mean needs a summary of a mean channel ('mean', 'hybrid-mean', 'memo-mean'); got "
                           f"{s.channel.name!r}.")
    level = check_probability(level, "level")
    if isinstance(s.channel, MemoMean):
        return _memo_mean(s, level)
    if isinstance(s.channel, HybridMean):
        return _hybrid_mean(s, level)
    lo, hi = s.channel.domain
    n = s.n
    theta = float(s.sums["sum"][0] / n)
    mu = min(max(theta, lo), hi)
    var_x = (hi - mu) * (mu - lo)
    var_noise = s.channel.noise_variance
    se = float(np.sqrt((var_x + var_noise) / n))
    if n < 2:  # one report: its Laplace noise is far from normal; the whole domain as interval
        return _single(s, theta, se, level)
    value, ci = _feasible(theta, se, level, (lo, hi))
    return MeanEstimate(
        value=value, se=se, ci=ci, level=level, n=n, epsilon=s.channel.epsilon,
        domain=(lo, hi), noise_share=var_noise / (var_x + var_noise),
        info=summary_info(s), raw=theta,
    )


def _hybrid_mean(s: Summary, level: float) -> MeanEstimate:
    ch = s.channel
    assert isinstance(ch, HybridMean)
    n = s.n
    lo, hi = ch.domain
    total, squares = float(s.sums["sum"][0]), float(s.sums["sumsq"][0])
    theta = total / n
    if n < 2:  # one view has no sample variance: the largest a view may have, and the whole domain as interval
        worst = 1.0 + max(float(ch.row_variance(0.0)), float(ch.row_variance(1.0)))
        return _single(s, theta, ch.half * float(np.sqrt(worst)), level, {"mechanism": ch.mechanism})
    # the views' sample variance, in t units: E of it is Var t + E Var[t* | t]
    var_z = max(0.0, (squares - total * total / n) / (n - 1)) / ch.half**2
    mu = min(max((theta - ch.mid) / ch.half, -1.0), 1.0)
    base = float(ch.row_variance(0.0))  # Var[t* | t] = base + slope·t²
    slope = float(ch.row_variance(1.0)) - base
    if slope + 1 > 1e-12:  # var_z = Var t + base + slope (Var t + μ²)
        var_t = (var_z - base - slope * mu * mu) / (1 + slope)
    else:
        var_t = 1 - mu * mu  # Duchi alone: not identified; Bhatia–Davis
    var_t = min(max(var_t, 0.0), 1 - mu * mu)
    se = ch.half * float(np.sqrt(var_z / n))
    share = 1.0 - var_t / var_z if var_z > 0 else 1.0
    value, ci = _feasible(theta, se, level, (lo, hi))
    return MeanEstimate(
        value=value, se=se, ci=ci, level=level, n=n, epsilon=ch.epsilon, domain=(lo, hi),
        noise_share=min(max(share, 0.0), 1.0), info={**summary_info(s), "mechanism": ch.mechanism}, raw=theta,
    )


def _memo_mean(s: Summary, level: float) -> MeanEstimate:
    """One night of a memoized mean: unbiased from the share of 1-bits; the standard error plugs the share into
    the Bernoulli variance, which bounds the variance of a mean of independent Bernoullis with those rates
    (:class:`~ldp_dask.channels.MemoMean`)."""
    ch = s.channel
    assert isinstance(ch, MemoMean)
    n = s.n
    lo, hi = ch.domain
    theta, se = ch.estimate(float(s.sums["sum"][0]), n)
    if n < 2:  # one report: no normal approximation; the whole domain as interval
        return _single(s, theta, se, level)
    mu = min(max(theta, lo), hi)  # the data's share of a report's variance is at most Bhatia–Davis's bound
    share = 1.0 - (hi - mu) * (mu - lo) / (se * se * n) if se > 0 else 1.0
    value, ci = _feasible(theta, se, level, (lo, hi))
    return MeanEstimate(value=value, se=se, ci=ci, level=level, n=n, epsilon=ch.epsilon, domain=(lo, hi),
                        noise_share=min(max(share, 0.0), 1.0), info=summary_info(s), raw=theta)


def _single(s: Summary, theta: float, se: float, level: float, extra: dict[str, Any] | None = None) -> MeanEstimate:
    """The mean of a summary of one report (a public group, or a night, with one row): the report's value clipped
    to the domain, the largest standard error one report may have, and the whole domain as interval (it always
    covers; a normal interval from one report would not). Its standard error flags it as mostly noise."""
    assert isinstance(s.channel, (LaplaceMean, HybridMean, MemoMean))
    lo, hi = s.channel.domain
    return MeanEstimate(value=min(max(theta, lo), hi), se=se, ci=(lo, hi), level=level, n=s.n,
                        epsilon=s.channel.epsilon, domain=(lo, hi), noise_share=1.0,
                        info={**summary_info(s), **(extra or {})}, raw=theta)


def _feasible(theta: float, se: float, level: float, domain: tuple[float, float]) -> tuple[float, tuple[float, float]]:
    """The point estimate in the domain, where the mean must lie — the unbiased θ̂ clamped to it (θ̂ itself is kept
    as ``raw``) — and the normal interval θ̂ ± z·SE at ``level`` intersected with the domain and holding that point.
    For a mean in the domain the intersection loses no coverage; an interval wholly outside it (θ̂ + z·SE below the
    domain, say) covers nothing either way, and becomes the nearest end of the domain."""
    lo, hi = domain
    z = float(norm.ppf(0.5 + level / 2))
    value = min(max(theta, lo), hi)
    a, b = min(max(theta - z * se, lo), hi), min(max(theta + z * se, lo), hi)
    return value, (min(a, value), max(b, value))
