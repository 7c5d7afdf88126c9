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

from typing import TYPE_CHECKING, Any

from ._version import __version__

#: Where each public name lives. Imported on first use (PEP 562), so that ``import ldp_dask`` and the
#: command line's ``--help`` do not load scipy, Dask, Prefect or matplotlib before they are needed.
_PUBLIC = {
    "privatize": "pipeline", "connect": "clusters", "RunOptions": "options", "RunKwargs": "options", "Row": "privacy", "Person": "privacy",
    "Summary": "summary", "read_summary": "summary", "verify_summary": "summary",
    "merge_summaries": "partitions", "Plan": "plans", "check_plan": "plans",
    "release_plan": "plans", "PlanRelease": "plans",
    "Ledger": "ledger", "BudgetExceeded": "ledger", "iceberg_catalog": "iceberg",
    "Channel": "channels", "LaplaceHistogram": "channels", "LaplaceMean": "channels", "WaveletLaplace": "channels",
    "HaarLaplace": "channels", "HaarAdaptive": "channels", "HybridMean": "channels", "RandomizedResponse": "channels",
    "HadamardResponse": "channels", "SubsetSelection": "channels", "SquareWave": "channels",
    "HeavyHitters": "channels", "heavy_hitters": "estimators",
    "estimate": "estimators", "histogram_density": "estimators", "wavelet_density": "estimators",
    "square_wave_density": "estimators",
    "mean": "estimators", "DensityEstimate": "estimators", "MeanEstimate": "estimators",
    "LdpDaskError": "_validation", "InputDataError": "_validation", "TaskError": "_validation",
}
_SUBMODULES = ("bases", "central", "gof", "channels", "estimators", "exactsum", "noise")

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from . import bases, central, channels, estimators, exactsum, gof, noise
    from ._validation import InputDataError, LdpDaskError, TaskError
    from .channels import (
        Channel,
        HaarAdaptive,
        HaarLaplace,
        HadamardResponse,
        HeavyHitters,
        HybridMean,
        LaplaceHistogram,
        LaplaceMean,
        RandomizedResponse,
        SquareWave,
        SubsetSelection,
        WaveletLaplace,
    )
    from .clusters import connect
    from .estimators import (  # type: ignore[no-redef]
        DensityEstimate,
        MeanEstimate,
        estimate,
        heavy_hitters,
        histogram_density,
        mean,
        square_wave_density,
        wavelet_density,
    )
    from .iceberg import iceberg_catalog
    from .ledger import BudgetExceeded, Ledger
    from .options import RunKwargs, RunOptions
    from .partitions import merge_summaries
    from .pipeline import privatize
    from .plans import Plan, PlanRelease, check_plan, release_plan
    from .privacy import Person, Row
    from .summary import Summary, read_summary, verify_summary


def __getattr__(name: str) -> Any:
    import importlib
    import importlib.util

    if name in _PUBLIC:
        value = getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    elif name in _SUBMODULES or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f".{name}", __name__)  # any module of the package, as before
    else:
        raise AttributeError(f"module 'ldp_dask' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "__version__",
    "privatize",
    "RunOptions",
    "RunKwargs",
    "Row",
    "Person",
    "connect",
    "Summary",
    "read_summary",
    "verify_summary",
    "merge_summaries",
    "Plan",
    "check_plan",
    "release_plan",
    "PlanRelease",
    "Ledger",
    "BudgetExceeded",
    "iceberg_catalog",
    "Channel",
    "LaplaceHistogram",
    "LaplaceMean",
    "WaveletLaplace",
    "HaarLaplace",
    "HaarAdaptive",
    "HybridMean",
    "RandomizedResponse",
    "HadamardResponse",
    "SubsetSelection",
    "HeavyHitters",
    "heavy_hitters",
    "SquareWave",
    "estimate",
    "histogram_density",
    "wavelet_density",
    "square_wave_density",
    "mean",
    "DensityEstimate",
    "MeanEstimate",
    "LdpDaskError",
    "InputDataError",
    "TaskError",
    "bases",
    "central",
    "gof",
    "channels",
    "estimators",
    "exactsum",
    "noise",
]
