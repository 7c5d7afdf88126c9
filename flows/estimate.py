"""Prefect flow: estimate from a summary file; write JSON, a plot and an artifact."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from ._outputs import publish_plot, write_outputs

import ldp_dask
from ldp_dask.estimators import DensityEstimate, FrequencyEstimate, MeanEstimate


@task(retries=2, retry_delay_seconds=2, persist_result=False)
def load_summary(path: str) -> ldp_dask.Summary:
    return ldp_dask.read_summary(path)


@task(persist_result=False)
def compute_estimate(summary: ldp_dask.Summary, level: float, projection: str | None,
                     options: dict[str, Any] | None) -> DensityEstimate | MeanEstimate:
    kwargs: dict[str, Any] = {"level": level, **(options or {})}
    if projection is not None:
        kwargs["projection"] = projection
    return ldp_dask.estimate(summary, **kwargs)


def _markdown(est: DensityEstimate | MeanEstimate | FrequencyEstimate, written: dict[str, str]) -> str:
    if isinstance(est, FrequencyEstimate):
        body = [f"| {lab} | {f:.4f} [{lo:.4f}, {hi:.4f}] |"
                for lab, f, lo, hi in zip(est.labels[:50], est.frequencies, est.ci_low, est.ci_high)]
        body.insert(0, f"| encoding | {est.method} ({est.level:.0%} intervals; first 50 categories) |")
    elif isinstance(est, MeanEstimate):
        body = [f"| mean | {est.value:.6g} ± {est.se:.3g} (se) |",
                f"| {est.level:.0%} interval | [{est.ci[0]:.6g}, {est.ci[1]:.6g}] |",
                f"| share of variance from privacy noise | {est.noise_share:.1%} |"]
    else:
        med = float(est.quantile(0.5))
        i = est.info
        shape = (f"{i['wavelet']} levels {i['j0']}–{i['j1']} ({i['calibration']}), γ = {i['gamma']:g}, "
                 f"details kept per level {i['kept_per_level']}" if est.smooth else f"{len(est.density)} bins")
        body = [f"| estimator | {shape} on [{est.edges[0]:g}, {est.edges[-1]:g}] |",
                f"| method | {est.method} |",
                f"| median of the estimate | {med:.6g} |",
                f"| median pointwise se of the density | {float(sorted(est.se)[len(est.se) // 2]):.3g} |"]
    files = [f"| {k} | `{v}` |" for k, v in written.items()]
    return "\n".join(["# Estimate from a local-DP summary", "", "| what | value |", "|---|---|",
                      f"| n | {est.n:,} |", f"| ε per row | {est.epsilon:g} |", *body, *files])


@flow(name="ldp-estimate")
def estimate_flow(summary: str, out: str | None = None, plot: str | None = None, level: float = 0.95,
                  projection: str | None = None, overwrite: bool = False,
                  options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Estimate from ``summary``; write ``out`` (JSON) and ``plot`` (PNG).

    The estimator follows the summary's channel (histogram or wavelet density,
    mean). ``projection`` is the estimator's (None: its default; "none": raw)
    and ``options`` its other keyword arguments, e.g. ``{"threshold": "soft",
    "gamma": 2.0}`` for a wavelet summary.
    """
    logger = get_run_logger()
    s = load_summary(summary)
    est = compute_estimate(s, level, projection, options)
    written = write_outputs(est, out, plot, overwrite)
    publish_plot(est, written, "ldp-density-plot", "estimate", "Estimated density or frequencies with their uncertainty")
    create_markdown_artifact(key="ldp-estimate", markdown=_markdown(est, written),
                             description="Estimate, uncertainty and privacy parameters")
    logger.info("Estimated %s from %s (n=%d, ε=%g): %s", type(est).__name__, summary, est.n, est.epsilon, written)
    return {"estimate": est.to_dict(), "written": written}
