"""Prefect flow: a table's whole report — a release plan — in one pass, one folder per night.

Each run writes into a folder named after the run's scheduled date::

    {out_dir}/{YYYY-MM-DD}/index.html                       (the report: the plan and each statistic's result)
    {out_dir}/{YYYY-MM-DD}/<statistic>.html                 (a page per statistic)
    {out_dir}/{YYYY-MM-DD}/<statistic>.summary.parquet      (a summary per statistic, or per public group)
    {out_dir}/{YYYY-MM-DD}/estimates.json                   (every estimate with its uncertainty)

It publishes one markdown artifact for the plan (with the budget) and one table artifact per statistic. A run whose
folder already holds the report (a retry, a manual re-run the same day) spends nothing. An incremental run (the
nightly deployment) extends the newest earlier day's plan: it reads only the files added or changed since, once for
every statistic, and the ledger charges only them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

import ldp_dask
from ldp_dask.flows._outputs import publish_markdown, table_rows
from ldp_dask.flows._run import logged_warnings, run_options, with_run_options
from ldp_dask.flows.release import day_folder, previous_summary


def artifact_key(label: str) -> str:
    """A statistic's name as a Prefect artifact key (lowercase letters, digits and dashes)."""
    return "ldp-plan-" + (re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or "statistic")


def publish_statistic(statistic: Any) -> None:
    """One table artifact for a statistic of the plan: its result's rows (per bin, category, quantile or group),
    else its facts."""
    d = statistic.result.describe()
    unit = statistic.summaries[0][1].privacy_unit  # "row", or the column naming a person
    create_table_artifact(key=artifact_key(statistic.label), table=table_rows(d),
                          description=f"{statistic.label}: {d.headline or d.title} (ε {statistic.epsilon:.4g} per "
                                      f"{unit})")


@flow(name="ldp-plan")
@with_run_options
def plan_flow(
    plan: str,
    source: str,
    out_dir: str,
    epsilon: float,
    date: str | None = None,
    incremental: bool = False,
    skip_changed: bool = False,
    design: str | None = None,
    confidence: float = 0.95,
    longitudinal: bool = False,
    **run: Any,
) -> dict[str, Any]:
    """Release the plan (a TOML file of statistics) over ``source`` into ``out_dir/<date>/``, as one pass and one
    release: each statistic's summary, a page per statistic, the report's index and ``estimates.json``.

    ``epsilon`` is the total ε per row, split among the statistics as ``ldp-dask plan check`` shows. With
    ``incremental`` each night extends the newest earlier day's plan in ``out_dir`` (only new or changed files
    are read and charged; the split of the first night is kept); ``skip_changed`` keeps the earlier sums of a file
    changed since. ``design`` forces ``split-epsilon`` or ``split-rows``. ``longitudinal`` (with a
    ``privacy_unit``) memoizes every person's report of every statistic (docs/how-to/longitudinal.md); the
    artifact shows the spend's percentiles per statistic.
    """
    from prefect.runtime import flow_run

    logger = get_run_logger()
    day, folder, fs, local = day_folder(out_dir, date)
    if fs.exists(f"{local}/index.html"):
        logger.info("The plan for %s is already released (%s): nothing spent by this run", day, folder)
        with fs.open(f"{local}/estimates.json") as fh:
            return {"date": day, "reused": True, "folder": folder, "estimates": json.load(fh)}
    since = None
    if incremental:
        index = previous_summary(out_dir, day, "index.html")
        since = index.rsplit("/", 1)[0] if index else None
        logger.info("Incremental plan: extending %s", since or "nothing (the first night of the series)")
    with logged_warnings(logger):
        result = ldp_dask.release_plan(plan, source, epsilon, out=folder, level=confidence, design=design,
                                       incremental=incremental, since=since, skip_changed=skip_changed,
                                       longitudinal=longitudinal, options=run_options(run, str(flow_run.get_id())))
    found = result.discovery.statistics if result.discovery is not None else ()
    for s in (*found, *result.statistics):  # a plan with groups found privately: the release that found them first
        publish_statistic(s)
        logger.info("%s: ε %.4g per %s, %d reports", s.label, s.epsilon, result.unit, s.n)
    for column, keys in result.found.items():
        logger.info("keys of %s found privately: %d (%s)", column, len(keys), ", ".join(map(str, keys[:20])))
    publish_markdown(result, "ldp-plan", "The night's report: every statistic of the plan from one release",
                     ("report", result.written["index"]), ("estimates", result.written["estimates"]),
                     title=f"Plan of {len(result.statistics)} statistics for {day}")
    logger.info("Wrote %s; %s", result.written["index"], result.receipt.line() if result.receipt else "")
    return {"date": day, "reused": False, "folder": folder, "design": result.design, "charged": result.charged,
            "written": dict(result.written), "statistics": [s.label for s in result.statistics],
            **({"found": result.found, "found_charged": result.discovery.charged} if result.discovery else {})}
