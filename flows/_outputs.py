"""Output steps shared by the flows: write a result's JSON and PNG, publish the PNG as an artifact."""

from __future__ import annotations

import base64
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from ldp_dask import LdpDaskError
from ldp_dask.outputs import figure_png, md_cell, render_markdown, write_result_files
from ldp_dask.receipts import central_spend_line, series_spend
from ldp_dask.release import publish


def retry_on_io(_task: Any, _task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: retry transient failures (I/O), never bad input, which a retry cannot fix.
    Prefect passes the task and its run first (positionally); only the state is read."""
    try:
        exc = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - no result to inspect: retry as configured
        return True
    return not isinstance(exc, LdpDaskError)


@task(retries=3, retry_delay_seconds=1, retry_condition_fn=retry_on_io, persist_result=False)
def write_outputs(result: Any, out: str | None, plot: str | None, overwrite: bool,
                  inputs: tuple[str, ...] = ()) -> dict[str, str]:
    """A post-processed result's JSON (``out``) and plot (``plot``, when it can plot), published together; neither
    may be one of ``inputs`` (the summary it was computed from)."""
    return publish({"json": out, "plot": plot}, lambda outputs: write_result_files(result, outputs),
                   overwrite=overwrite, inputs=inputs)[1]


def publish_plot(result: Any, written: dict[str, str], key: str, alt: str, description: str) -> None:
    """Publish the result's plot as a markdown artifact (PNG embedded as a data URI).

    The PNG written by :func:`write_outputs` is used when there is one;
    otherwise the plot is drawn in memory (no file). Results without a plot
    publish nothing.
    """
    if "plot" in written:
        with open(written["plot"], "rb") as fh:
            png = fh.read()
    elif hasattr(result, "plot"):
        png = figure_png(result.plot(), dpi=90)
    else:
        return
    data = base64.b64encode(png).decode()
    create_markdown_artifact(key=key, markdown=f"![{alt}](data:image/png;base64,{data})", description=description)


def headline(est: Any) -> str:
    """One line with an estimate's key number and its uncertainty (its description's headline)."""
    if est is None:
        return "no estimate for this channel (adaptive Haar summaries feed the goodness-of-fit test)"
    return est.describe().headline


def budget_facts(receipt: Any) -> tuple[tuple[str, str], ...]:
    """What a release's receipt says of the budget: the dataset's ε per person spent, what remains, and for a
    night of a series the nights left at its rate (nothing for post-processing, which releases nothing)."""
    if receipt is None:
        return ()
    if receipt.ledger is None:
        return (("budget", "not recorded (ledger=False): nothing charged, no budget checked"),)
    unit = receipt.privacy_unit
    if receipt.total is None:  # published; the charge is pending until the ledger is reached (its recovery)
        return (("budget", receipt.note),)
    spent = f"{receipt.total:g}" + (f" of budget {receipt.limit:g}" if receipt.limit is not None else
                                    " (no budget set)")
    out = [(f"ε per {unit} charged by this release", f"{receipt.epsilon:g}"),
           (f"ε per {unit} spent on {receipt.dataset}", spent)]
    if receipt.remaining is not None:
        out.append((f"ε per {unit} remaining", f"{receipt.remaining:.3g}"))
    if receipt.nights_left is not None:
        out.append(("nights left at this night's rate", str(receipt.nights_left)))
    if getattr(receipt, "central", None) is not None:
        out.append((f"central guarantee per {unit} on {receipt.dataset}, composed",
                    central_spend_line(receipt.central)))
    spend = getattr(receipt, "spend", None)
    if spend:  # a longitudinal release: how ε is spread over the series' persons (a plan: per statistic)
        parts = spend.get("series", [spend])
        for i, p in enumerate(parts):
            out.append(("longitudinal series" + ("" if len(parts) == 1 else f", statistic {i + 1}"),
                        series_spend(p, unit)))
    return tuple(out)


def publish_markdown(result: Any, key: str, description: str, *facts: tuple[str, str],
                     title: str | None = None) -> None:
    """Publish ``result.describe()`` (with extra ``facts``, e.g. the files written) as a markdown artifact, and its
    rows (per bin, category or quantile) as a table artifact ``<key>-table`` whose cells are escaped like the
    markdown's (labels are data: a category named ``**x**`` or ``<b>`` shows as written)."""
    d = result.describe().with_facts(*facts, *budget_facts(getattr(result, "receipt", None)), title=title)
    create_markdown_artifact(key=key, markdown=render_markdown(d), description=description)
    if d.table is not None and d.table.rows:
        create_table_artifact(key=f"{key}-table", table=table_rows(d), description=d.table.caption or description)


def table_rows(d: Any) -> list[dict[str, str]]:
    """A description's table as a Prefect table artifact's rows, cells escaped like its markdown's; without a table,
    its headline and facts, one per row (under "what": the UI hides a column without a name)."""
    if d.table is not None and d.table.rows:
        return [{md_cell(c): md_cell(v) for c, v in zip(d.table.columns, r)} for r in d.table.rows]
    return [{"what": md_cell(k), "value": md_cell(v)} for k, v in (("result", d.headline), *d.facts)]
