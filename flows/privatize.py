"""Prefect flow: privatize one column of a Parquet dataset into a summary file.

Thin by design: the statistics and the release path live in :mod:`ldp_dask`; this
file adds retries on metadata planning (I/O failures only), a markdown artifact and logs. Task results are not
persisted (``persist_result=False``). Nothing exact about the data is logged:
only public quantities (n, ε, parameters, paths, key id).
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE

import ldp_dask
from ldp_dask.channels import channel_options
from ldp_dask.commands import ChannelRequest, plan_column, release_column
from ldp_dask.estimators import estimator_for
from ldp_dask.flows._outputs import budget_facts, headline, publish_markdown, publish_plot, retry_on_io
from ldp_dask.flows._run import logged_warnings, run_options, with_run_options
from ldp_dask.options import RunOptions


@task(retries=2, retry_delay_seconds=2, retry_condition_fn=retry_on_io, persist_result=False, cache_policy=NONE)
def plan_release(source: str, column: str, request: ChannelRequest, run: RunOptions) -> dict[str, Any]:
    """Read metadata only: plan partitions, build the channel for n (the release checks the outputs before any
    work); ``channel="auto"`` chooses it (ldp_dask.channels.choose_channel)."""
    dataset, channel, request = plan_column(source, column, request, run)
    return {"channel": channel, "dataset": dataset, "request": request, "n": dataset.n,
            "partitions": len(dataset.pieces)}


@task(persist_result=False, cache_policy=NONE)  # no input hashing: the options hold the key's source
def run_release(planned: dict[str, Any], out: str, rows_out: str | None, overwrite: bool, run: RunOptions,
                incremental: bool = False, since: str | None = None, window: str | None = None,
                skip_changed: bool = False, longitudinal: dict[str, Any] | None = None) -> ldp_dask.Summary:
    """The release path: reserve ε, run the Dask pipeline (Dask retries its own tasks), write, commit; the
    library's warnings go to the run's log."""
    with logged_warnings(get_run_logger()):
        return release_column(planned["dataset"], planned["channel"], planned["request"], run, out=out,
                              rows_out=rows_out, overwrite=overwrite, incremental=incremental, since=since,
                              window=window, skip_changed=skip_changed, longitudinal=longitudinal)


@flow(name="ldp-privatize", log_prints=False)
@with_run_options
def privatize_flow(
    source: str,
    column: str,
    out: str,
    domain: list[float] | None = None,
    channel: str = "histogram",
    epsilon: float = 1.0,
    bins: int | str | None = "auto",
    mode: str = "summary",
    rows_out: str | None = None,
    overwrite: bool = False,
    options: dict[str, Any] | None = None,
    incremental: bool = False,
    since: str | None = None,
    window: str | None = None,
    skip_changed: bool = False,
    longitudinal: bool = False,
    instant: float | None = None,
    memo_levels: int = 1,
    capped: bool = True,
    **run: Any,
) -> dict[str, Any]:
    """Privatize ``column`` of ``source`` with a local channel and write a summary.

    ``options`` holds channel-specific parameters, e.g.
    ``{"wavelet": "db4", "j0": 2, "j1": 8, "calibration": "tight"}`` for the
    wavelet channel (without levels, the default release splits the rows among
    three father levels chosen from n and ε; docs/channels.md).
    The release is recorded in the privacy budget ``ledger`` before any work
    starts and committed once the summary is written, so a failed or retried
    run never counts twice. Returns public facts about the release.
    ``incremental``, ``since`` and ``window`` make it a partitioned release
    that reads only the files that changed since an earlier summary
    (:func:`ldp_dask.privatize`, docs/how-to/incremental.md); ``skip_changed``
    keeps the earlier sums of a file that changed instead of releasing it again. ``longitudinal`` (with a
    ``privacy_unit``) memoizes each person's report, ``instant`` and ``memo_levels`` being the memoized
    channel's options (docs/how-to/longitudinal.md): ``epsilon`` is then the series' whole cost per person, charged
    at its first night (``capped=False``: ε per distinct report, charged per person's changes, the artifact showing
    the spend's percentiles over persons).
    """
    from prefect.runtime import flow_run

    logger = get_run_logger()
    run_opts = run_options(run, str(flow_run.get_id()))
    # bins="auto" is the default of channels that have bins: a channel without them (rr, hadamard) takes none
    takes_bins = channel == "auto" or channel in channel_options()["bins"][1]
    given = bins is not None and (bins != "auto" or takes_bins)
    request = ChannelRequest(channel, epsilon, (float(domain[0]), float(domain[1])) if domain else None,
                             {**(options or {}), **({"bins": bins} if given else {})}, mode)
    planned = plan_release(source, column, request, run_opts)
    ch = planned["channel"]
    logger.info("Privatizing %s[%s]: n=%d rows in %d partitions with %r (mode=%s)",
                source, column, planned["n"], planned["partitions"], ch, mode)
    memo = {"instant": instant, "levels": memo_levels, "capped": capped} if longitudinal else None
    summary = run_release(planned, out, rows_out, overwrite, run_opts, incremental, since, window, skip_changed,
                          memo)
    ch = summary.channel
    path = summary.written["summary"]
    partitions = None
    if summary.partitions:
        m = summary.metadata
        charged = summary.receipt.partitions[0] if summary.receipt is not None and summary.receipt.partitions else None
        partitions = {"read": m["partitions_read"], "reused": m["partitions_reused"], "charged": charged,
                      "since": since}
        logger.info("Partitions: %d read, %d reused from %s without reading them, %s released anew (charged)",
                    m["partitions_read"], m["partitions_reused"], since or "no earlier summary",
                    "?" if charged is None else charged)
    meta = summary.file_metadata()
    est = ldp_dask.estimate(summary) if estimator_for(ch) else None  # post-processing of the release
    facts = {**summary.release_facts(), "budget": dict(budget_facts(summary.receipt)),
             "partitions": None if partitions is None else {**partitions, "since": since}}
    ledger_line = summary.receipt.line() if summary.receipt else "ledger: not recorded"
    reading = () if partitions is None else (("partitions", f"{partitions['read']} read, {partitions['reused']} "
                                                            f"reused from {since or 'no earlier summary'}"),)
    publish_markdown(summary, "ldp-release", "What was released and what it cost",
                     ("default estimate", headline(est)), *reading, *summary.written.items(),
                     ("ledger", ledger_line), ("report", f"ldp-dask report {path}"))
    if est is not None:
        publish_plot(est, {}, "ldp-release-plot", "estimate from the release",
                     "Default estimate from the released summary (post-processing, no privacy cost)")
    logger.info("Wrote %s (%s, key id %s)", path, summary.privacy_line(), meta["key_id"])
    return facts
