"""Prefect flow: the scheduled job — privatize one column, estimate from the release, write a report.

Each run writes into a folder named after the run's scheduled date, so a nightly
deployment keeps one release per day::

    {out_dir}/{YYYY-MM-DD}/{column}.{channel}.summary.parquet   (the release)
    {out_dir}/{YYYY-MM-DD}/{column}.{channel}.estimate.json      (estimate + uncertainty)
    {out_dir}/{YYYY-MM-DD}/{column}.{channel}.png                (plot, densities and frequencies)
    {out_dir}/{YYYY-MM-DD}/{column}.{channel}.html               (report page)

A column name that is not a plain file name (``../..``, ``a/b``, ``.hidden``)
is made one by :func:`file_stem`, so every output stays inside ``out_dir``.

A run whose summary already exists (a retry, or a manual re-run the same day)
reuses it and spends nothing; the estimate and report are rewritten. An
incremental run (``incremental=True``, the nightly deployment) extends the
newest earlier day's summary: it reads only the files added or changed since,
and the ledger charges only them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import fsspec
from prefect import flow, get_run_logger

import ldp_dask
from ldp_dask._io import file_stem
from ldp_dask.estimators import estimator_for
from ldp_dask.flows._outputs import headline, publish_markdown
from ldp_dask.flows._run import with_run_options
from ldp_dask.flows.estimate import estimate_flow
from ldp_dask.flows.privatize import privatize_flow
from ldp_dask.report import write_report


def _run_date() -> str:
    """The flow run's scheduled date (UTC), or today's outside a run."""
    from prefect.runtime import flow_run

    when = flow_run.scheduled_start_time
    try:
        return datetime.fromisoformat(str(when)).astimezone(UTC).date().isoformat()
    except (TypeError, ValueError):
        return datetime.now(UTC).date().isoformat()


def day_folder(out_dir: str, date: str | None) -> tuple[str, str, Any, str]:
    """A run's day (``date``, default the scheduled date in UTC, checked as one safe path part), its folder in
    ``out_dir`` as given, the folder's filesystem and its path there."""
    day = date or _run_date()
    if not re.fullmatch(r"[0-9A-Za-z_-]+", day):
        raise ldp_dask.LdpDaskError(f"The 'date' parameter must be a date like 2026-11-23. Got {day!r} instead.")
    fs, root = fsspec.core.url_to_fs(out_dir)
    return day, f"{out_dir.rstrip('/')}/{day}", fs, f"{root.rstrip('/')}/{day}"


def previous_summary(out_dir: str, day: str, name: str) -> str | None:
    """The newest ``out_dir/<D>/name`` with a date folder D before ``day`` (the last night's release), or None."""
    fs, root = fsspec.core.url_to_fs(out_dir)
    if not fs.isdir(root):
        return None
    days = sorted((p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)), reverse=True)
    for d in days:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", d) and d < day and fs.exists(f"{root.rstrip('/')}/{d}/{name}"):
            return f"{out_dir.rstrip('/')}/{d}/{name}"
    return None


def check_series_ledger(earlier: str | None, run: dict[str, Any]) -> None:
    """Refuse a longitudinal night whose ledger has no record of the series' last published night (restored from
    an older copy, or deleted: :meth:`~ldp_dask.ledger.Ledger.check_published`); nothing to check on a first
    night, or without a ledger."""
    from ldp_dask.ledger import LEDGER_STAMP, open_ledger

    led = open_ledger(run.get("ledger", True))
    if earlier is None or led is None:
        return
    stamp = ldp_dask.read_summary(earlier, allow_unverified=True).metadata.get(LEDGER_STAMP)
    if stamp is not None:  # read for its stamp alone: a forged stamp can only refuse
        led.check_published([(f"the series' last night {earlier!r}", stamp)])


@flow(name="ldp-release")
@with_run_options
def release_flow(
    source: str,
    column: str,
    out_dir: str,
    domain: list[float] | None = None,
    channel: str = "histogram",
    epsilon: float = 1.0,
    bins: int | str | None = "auto",
    mode: str = "summary",
    options: dict[str, Any] | None = None,
    date: str | None = None,
    incremental: bool = False,
    window: str | None = None,
    skip_changed: bool = False,
    longitudinal: bool = False,
    instant: float | None = None,
    memo_levels: int = 1,
    capped: bool = True,
    **run: Any,
) -> dict[str, Any]:
    """Privatize ``column`` of ``source`` into ``out_dir/<date>/``, then estimate it and write an HTML report.

    ``date`` (YYYY-MM-DD) names the folder; default: the run's scheduled date
    in UTC. With ``incremental`` the release is partitioned and extends the
    newest earlier day's summary in ``out_dir`` (``since``): only the files
    that are new or changed since then are read and charged
    (docs/how-to/incremental.md); the key must be configured
    (``LDP_DASK_SECRET`` or a secret file), since a series is extended only
    under the key that started it; ``skip_changed`` releases the new day
    without an old file that changed (a correction), keeping its earlier sums.
    ``longitudinal`` (with a ``privacy_unit``; ``instant``, ``memo_levels``)
    releases a snapshot table of the same persons each night, each person
    repeating a memoized report while the state of its value holds
    (docs/how-to/longitudinal.md): ``epsilon`` is the series' whole cost per
    person, charged at its first night (``capped=False``: per distinct report,
    the artifact showing the spend's percentiles over persons).
    ``window`` (``"30d"``) releases the last
    days of a date-partitioned table. ``mode="rows"`` also writes the
    privatized rows beside the summary (``<stem>.rows/``). The other
    parameters, every run option included, are :func:`privatize_flow`'s; the
    estimate and the report are post-processing of the release (no privacy
    cost).
    """
    logger = get_run_logger()
    day, folder, fs, local = day_folder(out_dir, date)
    name = f"{file_stem(column)}.{file_stem(channel)}"
    stem = f"{folder}/{name}"
    summary = f"{stem}.summary.parquet"
    if fs.exists(f"{local}/{name}.summary.parquet"):
        logger.info("The release for %s already exists (%s): reusing it, no ε spent", day, summary)
        release: dict[str, Any] = {"summary": summary, "reused": True}
    else:
        if longitudinal:  # the ledger must remember the series' last published night (not an older copy)
            check_series_ledger(previous_summary(out_dir, day, f"{name}.summary.parquet"), run)
        since = previous_summary(out_dir, day, f"{name}.summary.parquet") if incremental else None
        if incremental:
            logger.info("Incremental release: extending %s", since or "nothing (the first night of the series)")
        rows_out = f"{stem}.rows" if mode == "rows" else None
        release = privatize_flow(source=source, column=column, out=summary, domain=domain, channel=channel,
                                 epsilon=epsilon, bins=bins, mode=mode, rows_out=rows_out, options=options,
                                 incremental=incremental or window is not None, since=since, window=window,
                                 skip_changed=skip_changed, longitudinal=longitudinal, instant=instant,
                                 memo_levels=memo_levels, capped=capped, **run)
        release["reused"] = False
    written: dict[str, str] = {"summary": summary}
    has_estimate = estimator_for(channel) is not None
    if has_estimate:
        est = estimate_flow(summary, out=f"{stem}.estimate.json", plot=f"{stem}.png", overwrite=True)
        written.update(est["written"])
    s = ldp_dask.read_summary(summary)
    estimated = ldp_dask.estimate(s) if has_estimate else None  # one estimate for the report and the table
    written["report"] = write_report(s, f"{stem}.html", overwrite=True, result=estimated)
    reused = "Reused the existing release (no ε spent by this run)." if release["reused"] else "New release."
    budget = tuple(release.get("budget", {}).items())  # spent, remaining, nights left (a new release only)
    publish_markdown(s, "ldp-nightly-release", "Where the day's release, estimate and report are",
                     ("this run", reused), ("estimate", headline(estimated)), *budget, *written.items(),
                     title=f"Release of {column} for {day}")
    return {"date": day, "release": release, "written": written}
