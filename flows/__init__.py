"""Prefect flows: thin wiring around ldp_dask (retries on I/O, artifacts, logs).

One flow per file: ``flows/privatize.py:privatize_flow``,
``flows/estimate.py:estimate_flow``, ``flows/gof.py:gof_flow`` and
``flows/quantiles.py:quantile_flow``.
"""

from .estimate import estimate_flow
from .gof import gof_flow
from .privatize import privatize_flow
from .quantiles import quantile_flow

__all__ = ["privatize_flow", "estimate_flow", "gof_flow", "quantile_flow"]
