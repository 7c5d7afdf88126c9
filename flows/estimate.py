"""Prefect flow: estimate from a summary file; write JSON, a plot and an artifact."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task

import ldp_dask
from ldp_dask.flows._outputs import publish_markdown, publish_plot, write_outputs


@task(retries=2, retry_delay_seconds=2, persist_result=False)
def load_summary(path: str) -> ldp_dask.Summary:
    return ldp_dask.read_summary(path)


@task(persist_result=False)
def compute_estimate(summary: ldp_dask.Summary, confidence: float, projection: str | None,
                     options: dict[str, Any] | None) -> Any:
    kwargs: dict[str, Any] = {"level": confidence, **(options or {})}
    if projection is not None:
        kwargs["projection"] = projection
    return ldp_dask.estimate(summary, **kwargs)


@flow(name="ldp-estimate")
def estimate_flow(summary: str, out: str | None = None, plot: str | None = None, confidence: float = 0.95,
                  projection: str | None = None, overwrite: bool = False,
                  options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Estimate from ``summary``; write ``out`` (JSON) and ``plot`` (PNG).

    The estimator follows the summary's channel (histogram or wavelet density,
    mean). ``projection`` is the estimator's (None: its default; "none": raw)
    and ``options`` its other keyword arguments, e.g. ``{"threshold": "soft",
    "gamma": 2.0}`` for a wavelet summary; ``confidence`` is the level of the
    intervals and bands.
    """
    logger = get_run_logger()
    s = load_summary(summary)
    est: Any = compute_estimate(s, confidence, projection, options)
    written = write_outputs(est, out, plot, overwrite, (summary,))
    publish_plot(est, written, "ldp-density-plot", "estimate", "Estimated density or frequencies with their uncertainty")
    publish_markdown(est, "ldp-estimate", "Estimate and its uncertainty", *written.items())
    logger.info("Estimated %s from %s (n=%d, ε=%g): %s", type(est).__name__, summary, est.n, est.epsilon, written)
    return {"estimate": est.to_dict(), "written": written}
