"""Prefect flow: locally private goodness-of-fit test from a summary or from raw Parquet data."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE

from ldp_dask import gof
from ldp_dask.channels.haar import DEFAULT_SPLIT
from ldp_dask.flows._outputs import publish_markdown, publish_plot
from ldp_dask.flows._run import logged_warnings, run_options, with_run_options
from ldp_dask.options import RunOptions


@task(persist_result=False, cache_policy=NONE)  # no input hashing: the options hold the key's source
def run_test(source: str, null: Any, alpha: float, column: str | None, domain: list[float] | None,
             epsilon: float | None, adaptive: bool, split: str, J: int | None, smoothness: float,
             B: int, calibration_seed: int | None, summary_out: str | None, out: str | None, plot: str | None,
             overwrite: bool, options: RunOptions) -> tuple[gof.TestResult, Any]:
    """Privatize if needed (through the release path; Dask retries its own tasks), test, write the outputs; the
    library's warnings go to the run's log."""
    with logged_warnings(get_run_logger()):
        return gof.run(source, null, alpha, column=column,
                       domain=(float(domain[0]), float(domain[1])) if domain else None, epsilon=epsilon,
                       adaptive=adaptive, split=split, J=J, smoothness=smoothness, B=B, rng=calibration_seed,
                       summary_out=summary_out, out=out, plot=plot, overwrite=overwrite, options=options)


@flow(name="ldp-gof")
@with_run_options
def gof_flow(source: str, null: str | list[float], alpha: float = 0.05, column: str | None = None,
             domain: list[float] | None = None, epsilon: float | None = None, adaptive: bool = False,
             split: str = DEFAULT_SPLIT, J: int | None = None, smoothness: float = 1.0, B: int = 9999,
             calibration_seed: int | None = None, summary_out: str | None = None, out: str | None = None,
             plot: str | None = None, overwrite: bool = False, **run: Any) -> dict[str, Any]:
    """Test H0: f = ``null`` from a haar summary, or privatize ``source`` (raw data) first.

    Privatizing raw data is a release: it is recorded in the budget ``ledger``
    like any other.

    ``null`` is a scipy.stats name such as ``"beta(2,2)"`` or bin probabilities;
    ``alpha`` is the test's significance level, in (0, 0.5).
    Writes ``out`` (JSON) and ``plot`` (PNG) and publishes a markdown artifact.
    """
    from prefect.runtime import flow_run

    logger = get_run_logger()
    options = run_options(run, str(flow_run.get_id()))
    res, _ = run_test(source, null, alpha, column, domain, epsilon, adaptive, split, J, smoothness, B,
                      calibration_seed, summary_out, out, plot, overwrite, options)
    written = dict(res.written)
    publish_plot(res, written, "ldp-gof-plot", "null law", "Null law of the statistic with the observed value")
    publish_markdown(res, "ldp-gof", "Goodness-of-fit decision and p-value", *written.items())
    logger.info("GoF test of %s (n=%d, ε=%g): p=%.4g, reject=%s", res.null, res.n, res.epsilon, res.p_value,
                res.reject)
    return {"result": res.to_dict(), "written": written}
