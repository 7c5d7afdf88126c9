"""Prefect flows: thin wiring around ldp_dask (retries on I/O, artifacts, logs).

One flow per file (the deployments name them by path): ``flows/privatize.py:privatize_flow``,
``flows/estimate.py:estimate_flow``, ``flows/gof.py:gof_flow``,
``flows/quantiles.py:quantile_flow``, the scheduled job
``flows/release.py:release_flow`` (privatize, estimate, report) and the scheduled report
``flows/plan.py:plan_flow`` (a release plan: every statistic of a table in one pass). Their
deployments are in ``deploy/prefect.yaml``.
"""

from .estimate import estimate_flow
from .gof import gof_flow
from .plan import plan_flow
from .privatize import privatize_flow
from .quantiles import quantile_flow
from .release import release_flow

__all__ = ["privatize_flow", "estimate_flow", "gof_flow", "quantile_flow", "release_flow", "plan_flow"]
