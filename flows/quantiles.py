"""Prefect flow: central-DP quantiles of one column (docs/central-quantiles.md)."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE

from ldp_dask._validation import DECILES
from ldp_dask.central import QuantileRelease, quantiles
from ldp_dask.flows._outputs import publish_markdown, publish_plot
from ldp_dask.flows._run import logged_warnings, run_options, with_run_options
from ldp_dask.options import RunOptions


@task(persist_result=False, cache_policy=NONE)  # no input hashing: the options hold the key's source
def run_release(source: str, column: str, q: list[float], epsilon: float, bounds: list[float], method: str,
                rho: float | None, steps: int | None, out: str | None, plot: str | None, overwrite: bool,
                options: RunOptions) -> QuantileRelease:
    """Exact reduction on Dask and the mechanism on the driver; only the release leaves this task. The library's
    warnings go to the run's log."""
    with logged_warnings(get_run_logger()):
        return quantiles(source, column=column, q=q, epsilon=epsilon, bounds=(float(bounds[0]), float(bounds[1])),
                         method=method, rho=rho, steps=steps, out=out, plot=plot, overwrite=overwrite,
                         options=options)


@flow(name="ldp-quantiles")
@with_run_options
def quantile_flow(source: str, column: str, bounds: list[float], epsilon: float = 1.0,
                  q: list[float] | None = None, method: str = "best", rho: float | None = None,
                  steps: int | None = None, out: str | None = None, plot: str | None = None,
                  overwrite: bool = False, **run: Any) -> dict[str, Any]:
    """Release central-DP quantiles (default: the nine deciles) and publish them as an artifact.

    The release is recorded in the budget ``ledger`` (central scope); with a
    ``privacy_unit`` each person keeps at most ``max_contributions`` rows and ε
    is per person.
    """
    from prefect.runtime import flow_run

    logger = get_run_logger()
    options = run_options(run, str(flow_run.get_id()))
    r = run_release(source, column, list(q or DECILES), epsilon, bounds, method, rho, steps, out, plot, overwrite,
                      options)
    written = dict(r.written)
    publish_plot(r, written, "ldp-quantiles-plot", "released quantile function",
                 "The released quantile function (public information only)")
    publish_markdown(r, "ldp-quantiles", "Released quantiles and how ε was spent",
                     *written.items())
    logger.info("Released %d quantiles of %s with %s (ε=%g, n=%d)", len(r.q), column, r.method, r.epsilon, r.n)
    return {"release": r.to_dict(), "written": written}
