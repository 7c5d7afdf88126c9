"""ldp_dask — locally differentially private statistics over Parquet, with Dask and Prefect.

The public surface::

    from ldp_dask import privatize, read_summary, LaplaceHistogram, LaplaceMean
    s = privatize("data/", column="income", channel=LaplaceHistogram(1.0, 32, (0, 2e5)))
    s.to_parquet("income.summary.parquet")
    ldp_dask.estimators.histogram_density(s).plot("income.png")

    w = privatize("data/", column="income", channel=WaveletLaplace(1.0, (0, 2e5), j0=4, j1=8))
    ldp_dask.wavelet_density(w).plot("income-wavelet.png")
"""

from __future__ import annotations

from ._version import __version__
from . import bases, central, channels, estimators, exactsum, gof, noise
from ._validation import InputDataError, LdpDaskError
from .channels import Channel, HaarAdaptive, HaarLaplace, LaplaceHistogram, LaplaceMean, WaveletLaplace
from .estimators import DensityEstimate, MeanEstimate, estimate, histogram_density, mean, wavelet_density
from .options import RunOptions
from .pipeline import connect, privatize
from .ledger import BudgetExceeded, Ledger
from .summary import Summary, read_summary, verify_summary

__all__ = [
    "__version__",
    "privatize",
    "RunOptions",
    "connect",
    "Summary",
    "read_summary",
    "verify_summary",
    "Ledger",
    "BudgetExceeded",
    "Channel",
    "LaplaceHistogram",
    "LaplaceMean",
    "WaveletLaplace",
    "HaarLaplace",
    "HaarAdaptive",
    "estimate",
    "histogram_density",
    "wavelet_density",
    "mean",
    "DensityEstimate",
    "MeanEstimate",
    "LdpDaskError",
    "InputDataError",
    "bases",
    "central",
    "gof",
    "channels",
    "estimators",
    "exactsum",
    "noise",
]
