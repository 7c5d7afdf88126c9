"""Estimators that run on the driver from a :class:`~ldp_dask.summary.Summary`."""

from __future__ import annotations

import inspect
from typing import Any

from .._validation import LdpDaskError
from ..summary import Summary, read_summary
from .frequencies import FrequencyEstimate, frequencies
from .histogram import histogram_density, project_simplex
from .local_quantiles import QuantileEstimate, local_quantiles
from .mean import mean
from .results import DensityEstimate, MeanEstimate
from .wavelet import DEFAULT_GAMMA, THRESHOLDS, wavelet_density, wavelet_thresholds

__all__ = [
    "estimate", "histogram_density", "wavelet_density", "wavelet_thresholds", "mean", "project_simplex",
    "DensityEstimate", "MeanEstimate", "DEFAULT_GAMMA", "THRESHOLDS", "frequencies", "FrequencyEstimate",
    "local_quantiles", "QuantileEstimate",
]


def estimate(summary: Summary | str, **kwargs: Any) -> DensityEstimate | MeanEstimate | FrequencyEstimate:
    """The natural estimate for a summary's channel: density (histogram, haar, wavelet), mean, frequencies (rr)."""
    s = read_summary(summary)
    fn = {"histogram": histogram_density, "haar": histogram_density, "wavelet": wavelet_density,
          "mean": mean, "rr": frequencies}.get(s.channel.name)
    if fn is None:
        raise LdpDaskError(f"no estimator for channel {s.channel.name!r}")  # pragma: no cover
    allowed = set(inspect.signature(fn).parameters) - {"summary"}
    extra = sorted(set(kwargs) - allowed)
    if extra:
        raise LdpDaskError(
            f"The option(s) {', '.join(extra)} do not apply to {fn.__name__} ({s.channel.name!r} summaries); "
            f"it takes {', '.join(sorted(allowed))}."
        )
    return fn(s, **kwargs)
