"""Predicted errors before anything is spent: what a release of ``n`` reports will give, from public quantities.

With a privacy unit the number of reports is k × the persons (each person makes exactly k reports, each at ε/k),
so a larger k divides ε and the persons do not grow: "choose k near the typical rows per person" can turn a release
of a few thousand persons into noise. :func:`predict` gives the standard error of the channel's raw estimate
from its closed-form noise variance (the same variances ``--channel auto`` compares, :mod:`ldp_dask.channels.auto`)
plus the sampling variance (at the typical share, or a bound for a mean), and says when it passes what the
estimate can mean:

* a mean (``mean``, ``hybrid-mean``): its 95% interval, ±1.96 SE, wider than the domain;
* a share (a ``histogram`` bin, an ``rr`` or ``hadamard`` category): ±1.96 SE wider than the typical share 1/K
  (K bins or categories), so a typical bin cannot be told from an empty one;
* a heavy hitter's share (``heavy-hitters``): ±1.96 SE wider than 1%, a share the release should resolve.

Channels without a closed form (wavelets, square wave: smoothed estimates) get no prediction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .channels import Channel
from .channels.auto import frequency_variances

__all__ = ["Prediction", "predict", "unit_warning", "HEAVY_SHARE"]

#: The share at which a heavy-hitter release's error is predicted (and beyond use when its 95% half-width passes it).
HEAVY_SHARE = 0.01


@dataclass(frozen=True)
class Prediction:
    """The predicted standard error of a release's raw estimate, and whether it is beyond use."""

    what: str
    se: float
    limit: float
    n: float

    @property
    def useless(self) -> bool:
        """The 95% half-width 1.96·SE passes :attr:`limit` (half the domain, or the typical share)."""
        return 1.96 * self.se > self.limit

    def line(self) -> str:
        return f"predicted standard error of {self.what}: {self.se:.3g} (from about {self.n:,.0f} reports)"


def predict(channel: Channel, n: float) -> Prediction | None:
    """The predicted standard error of ``channel``'s raw estimate from ``n`` reports, or None (no closed form).

    Shares are predicted at the typical share 1/K (K bins or categories), whose sampling variance is
    (1/K)(1 − 1/K); a mean at the largest sampling variance its domain allows, half its width squared — the
    data's own variance is not public — so a mean's prediction is an upper bound, tight where the noise
    dominates (small ε per report)."""
    if n <= 0:
        return None
    name = channel.name
    if name in ("mean", "hybrid-mean"):
        lo, hi = channel.domain  # type: ignore[attr-defined]
        half = (hi - lo) / 2
        if name == "mean":
            noise = channel.noise_variance  # type: ignore[attr-defined]
        else:
            noise = channel.worst_variance() * half**2  # type: ignore[attr-defined]
        return Prediction("the mean (at most)", math.sqrt((noise + half**2) / n), half, n)
    if name == "group-mean":  # a typical group (share 1/G) at the worst value of its mean and spread
        p, v = 1 / channel.groups, channel.noise_variance  # type: ignore[attr-defined]
        half = channel.half  # type: ignore[attr-defined]
        return Prediction("a typical group's mean (at most)", half * math.sqrt(max(p + v, 2 * v) / (n * p * p)), half, n)
    if name == "group-histogram":  # a typical group (share 1/G), a typical cell (share 1/K) within it
        p, k, v = 1 / channel.groups, channel.cells, channel.noise_variance  # type: ignore[attr-defined]
        t = 1 / k
        var = (p * t * (1 - t) + v * ((1 - t) ** 2 + (k - 1) * t * t)) / (n * p * p)
        return Prediction("a typical group's typical share", math.sqrt(var), t, n)
    if name in ("histogram", "haar"):  # a Haar view is a histogram's one-hot scaled by c = 2^(J/2), noise and all
        bins = channel.bins  # type: ignore[attr-defined]
        share = 1 / bins
        noise = channel.noise_variance / getattr(channel, "c", 1.0) ** 2  # type: ignore[attr-defined]
        return Prediction("a typical bin's share (before smoothing)", math.sqrt((noise + share * (1 - share)) / n),
                          share, n)
    if name in ("rr", "hadamard", "subset"):
        d = len(channel.labels)  # type: ignore[attr-defined]
        if name in ("rr", "subset"):  # a report's indicator of category c: π = p_out + (p_in − p_out)θ, θ = 1/d
            p_in, p_out = channel.p_in, channel.p_out  # type: ignore[attr-defined]
            pi = p_out + (p_in - p_out) / d
            n_var = pi * (1 - pi) / (p_in - p_out) ** 2
        else:  # a ±1 indicator of variance at most 1, over (p − q)²: the rare category's
            n_var = frequency_variances(channel.epsilon, d)["hadamard"]
        return Prediction("a typical category's share", math.sqrt(n_var / n), 1 / d, n)
    if name == "heavy-hitters":  # a listed value's share, from the estimate groups' reports, at a share of 1%
        p_in, p_out = channel.report_probabilities  # type: ignore[attr-defined]
        m, share = channel.width, channel.estimate_groups / channel.groups  # type: ignore[attr-defined]
        pi = p_out + (p_in - p_out) * (HEAVY_SHARE + (1 - HEAVY_SHARE) / m)
        se = m / (m - 1) * math.sqrt(pi * (1 - pi) / (n * share)) / (p_in - p_out)
        return Prediction(f"a listed value's share (at {HEAVY_SHARE:.0%})", se, HEAVY_SHARE, n)
    if name in ("memo-histogram", "memo-rr", "capped-histogram", "capped-rr"):  # one night, at the typical share 1/d
        d = channel.dim
        p_in, p_out = channel.report_probabilities  # type: ignore[attr-defined]
        pi = p_out + (p_in - p_out) / d
        what = "a typical bin's share" if name.endswith("histogram") else "a typical category's share"
        return Prediction(f"{what} (one night)", math.sqrt(pi * (1 - pi) / n) / (p_in - p_out), 1 / d, n)
    if name in ("memo-mean", "capped-mean"):  # one night, at the largest Bernoulli variance (a share of 1s of 1/2)
        lo, hi = channel.domain  # type: ignore[attr-defined]
        _, se = channel.estimate(n / 2, int(max(n, 1)))  # type: ignore[attr-defined]
        return Prediction("the mean (one night, at most)", se, (hi - lo) / 2, n)
    return None


def unit_warning(channel: Channel, persons: float, k: int) -> str | None:
    """The warning for a release with a privacy unit whose k reports per person at ε/k predict an estimate beyond
    use, with what k = 1 would predict; None when it is usable or has no prediction. ``channel`` is the channel
    as asked for (ε per person)."""
    from .privacy import per_row_channel

    p = predict(per_row_channel(channel, k), persons * k)
    if p is None or not p.useless:
        return None
    one = predict(channel, persons) if k > 1 else None
    helps = "A larger ε helps" if one is None else \
        f"A smaller --max-contributions (k = 1 predicts {one.se:.3g}) or a larger ε helps"
    return (f"{p.line()}: about {persons:,.0f} persons × k = {k} reports at ε/k = {channel.epsilon / k:.3g}. Its 95% "
            f"interval (±{1.96 * p.se:.3g}) is wider than {'half the domain' if 'mean' in p.what else 'a typical share'}"
            f" ({p.limit:.3g}): the estimate would be mostly noise. {helps}; nothing has been spent yet")
