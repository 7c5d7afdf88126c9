"""Estimators that run on the driver from a :class:`~ldp_dask.summary.Summary`."""

from __future__ import annotations

from typing import Any

from .._validation import LdpDaskError
from ..summary import Summary, read_summary
from .histogram import histogram_density, project_simplex
from .mean import mean
from .results import DensityEstimate, MeanEstimate
from .wavelet import DEFAULT_GAMMA, THRESHOLDS, wavelet_density, wavelet_thresholds

__all__ = [
    "estimate", "histogram_density", "wavelet_density", "wavelet_thresholds", "mean", "project_simplex",
    "DensityEstimate", "MeanEstimate", "DEFAULT_GAMMA", "THRESHOLDS",
]


def estimate(summary: Summary | str, **kwargs: Any) -> DensityEstimate | MeanEstimate:
    """The natural estimate for a summary's channel (density for a histogram or wavelet, mean for a mean)."""
    s = read_summary(summary)
    if s.channel.name == "histogram":
        return histogram_density(s, **kwargs)
    if s.channel.name == "wavelet":
        return wavelet_density(s, **kwargs)
    if s.channel.name == "mean":
        return mean(s, **kwargs)
    raise LdpDaskError(f"no estimator for channel {s.channel.name!r}")  # pragma: no cover
