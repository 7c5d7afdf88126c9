"""Estimators that run on the driver from a :class:`~ldp_dask.summary.Summary`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .._validation import LdpDaskError
from ..channels import Channel
from ..summary import Summary, read_summary
from .frequencies import FrequencyEstimate, frequencies
from .groups import GroupMeansEstimate, GroupSharesEstimate, group_means, group_shares
from .heavy_hitters import HeavyHittersEstimate, heavy_hitters
from .histogram import histogram_density, project_simplex
from .local_quantiles import QuantileEstimate, local_quantiles
from .mean import mean
from .results import DensityEstimate, MeanEstimate, NoRows, no_rows
from .sketch import sketch_frequencies
from .square_wave import square_wave_cdf_bounds, square_wave_density
from .wavelet import DEFAULT_GAMMA, THRESHOLDS, pooled_split, wavelet_density, wavelet_thresholds

__all__ = [
    "sketch_frequencies", "heavy_hitters", "HeavyHittersEstimate",
    "estimate", "histogram_density", "wavelet_density", "wavelet_thresholds", "pooled_split", "mean", "project_simplex",
    "DensityEstimate", "MeanEstimate", "DEFAULT_GAMMA", "THRESHOLDS", "frequencies", "FrequencyEstimate",
    "local_quantiles", "QuantileEstimate", "estimator_for", "ESTIMATORS", "square_wave_density",
    "square_wave_cdf_bounds", "QUANTILE_CHANNELS", "has_local_quantiles", "group_means", "GroupMeansEstimate",
    "group_shares", "GroupSharesEstimate", "NoRows",
]


#: Which estimator serves which channel, stated once: the natural estimator of each channel's summaries (adaptive
#: Haar summaries feed the goodness-of-fit test) ...
ESTIMATORS: dict[str, Callable[..., Any]] = {
    "histogram": histogram_density, "haar": histogram_density, "wavelet": wavelet_density, "wavelet-split": wavelet_density, "mean": mean,
    "hybrid-mean": mean, "square-wave": square_wave_density,
    "rr": frequencies, "hadamard": frequencies, "subset": frequencies, "sketch": sketch_frequencies,
    "heavy-hitters": heavy_hitters, "group-mean": group_means,
    "group-histogram": group_shares, "memo-histogram": frequencies, "memo-rr": frequencies,
    "capped-histogram": frequencies, "capped-rr": frequencies, "memo-mean": mean, "capped-mean": mean,
}
#: ... and the channels whose summaries also give quantiles with assumption-free intervals (:func:`local_quantiles`).
QUANTILE_CHANNELS = frozenset({"histogram", "haar", "wavelet", "wavelet-split", "square-wave"})


def has_local_quantiles(channel: Channel | str) -> bool:
    """Whether :func:`local_quantiles` serves a channel's summaries (by channel or name)."""
    return (channel if isinstance(channel, str) else channel.name) in QUANTILE_CHANNELS


def estimator_for(channel: Channel | str) -> Callable[..., Any] | None:
    """The estimator of a channel's summaries (by channel or name), or None when it has none."""
    return ESTIMATORS.get(channel if isinstance(channel, str) else channel.name)


def estimate(summary: Summary | str, **kwargs: Any) -> DensityEstimate | MeanEstimate | FrequencyEstimate | NoRows:
    """The natural estimate for a summary's channel: density (histogram, haar, wavelet, square-wave), mean (mean,
    hybrid-mean), frequencies (rr, hadamard); :class:`NoRows` for a summary of no rows (a declared public group
    with no row tonight: no point estimate, the interval the whole feasible range)."""
    s = read_summary(summary)
    if s.n == 0:  # a declared public group with no rows tonight: a result, not an error
        return no_rows(s, _target(s.channel))
    fn = estimator_for(s.channel)
    if fn is None:
        raise LdpDaskError(f"{s.channel.name!r} summaries have no estimate of their own; they feed the "
                           "goodness-of-fit test (ldp_dask.gof, 'ldp-dask gof').")
    allowed = set(inspect.signature(fn).parameters) - {"summary"}
    extra = sorted(set(kwargs) - allowed)
    if extra:
        raise LdpDaskError(
            f"The option(s) {', '.join(extra)} do not apply to {fn.__name__} ({s.channel.name!r} summaries); "
            f"it takes {', '.join(sorted(allowed))}."
        )
    return fn(s, **kwargs)


def _target(channel: Channel) -> str:
    """What a channel's natural estimate is: ``"mean"``, ``"frequencies"`` or ``"density"``."""
    fn = estimator_for(channel)
    return "mean" if fn is mean else "frequencies" if fn in (frequencies, sketch_frequencies, heavy_hitters) else "density"
