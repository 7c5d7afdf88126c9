"""A self-contained HTML page for a summary: the estimate, its uncertainty and the privacy parameters.

Everything on the page is computed from the summary file alone (post-processing
of a private release: no further privacy cost); the plot is embedded as a PNG
data URI, so the page can be mailed or attached to a ticket as one file.
"""

from __future__ import annotations

import html
import os
from typing import Any

from ._validation import LdpDaskError
from .estimators import estimate, estimator_for, has_local_quantiles
from .outputs import page, png_base64, render_result
from .summary import Summary, read_summary

__all__ = ["write_report", "render_report", "render_result", "default_report_path", "plan_pages"]  # render_result: outputs.py

def default_report_path(summary_path: str | os.PathLike[str]) -> str:
    """``x.summary.parquet`` → ``x.summary.html`` (any other name: ``+ .html``)."""
    p = os.fspath(summary_path)
    return (p[: -len(".parquet")] if p.endswith(".parquet") else p) + ".html"


def render_report(summary: Summary | str | os.PathLike[str], level: float = 0.95, result: Any = None, *,
                  allow_unverified: bool = False, quantiles: Any = None, **options: Any) -> str:
    """The HTML page of ``summary`` as a string (see :func:`write_report`).

    The estimate's and the release's rows come from their :meth:`describe`, the
    same rows the CLI prints and the flows publish.
    """
    s = read_summary(summary, allow_unverified=allow_unverified)
    if estimator_for(s.channel) is None:
        body = (f"<p>{html.escape(repr(s.channel.name))} summaries feed the goodness-of-fit test "
                "(<code>ldp-dask gof</code>); they have no estimate of their own.</p>")
    else:
        est = result if result is not None else estimate(s, level=level, **options)
        picture = ""
        if hasattr(est, "plot"):
            picture = f'<img alt="the estimate with its uncertainty" src="data:image/png;base64,{png_base64(est.plot())}">'
        body = picture + "\n" + est.to_html(heading="")
        if has_local_quantiles(s.channel):  # assumption-free quantile intervals
            from .estimators import local_quantiles

            q = quantiles if quantiles is not None else local_quantiles(s, level=level)
            body += "\n<h2>Quantiles</h2>\n" + q.to_html(heading="")
    title = f"Private release of {s.metadata.get('column', 'a column')}"
    unit = html.escape(s.privacy_unit)
    counted = "rows" if unit == "row" else f"reports ({s.metadata.get('max_contributions', 1)} per {unit}; each {unit} weighted equally)"
    sub = (f"n = {s.n:,} {counted}, ε = {s.epsilon_per_unit:g} per {unit}, channel "
           f"<code>{html.escape(s.channel.name)}</code>")
    return page(title, sub, (("Estimate and uncertainty", body), ("Privacy parameters", s.to_html(heading=""))),
                 "Every number on this page is computed from the summary file alone: post-processing of the "
                 "release, which spends no further privacy budget. Intervals account for sampling and for the "
                 "privacy noise.")


def write_report(summary: Summary | str | os.PathLike[str], path: str | os.PathLike[str] | None = None,
                 level: float = 0.95, overwrite: bool = False, result: Any = None, *, allow_unverified: bool = False,
                 key: Any = None, **options: Any) -> str:
    """Write an HTML page with the estimate, its uncertainty and the privacy parameters of ``summary``.

    Parameters
    ----------
    summary : Summary or path
        A summary written by :func:`ldp_dask.privatize` (any channel).
    path : path, optional
        Output file; default: the summary's path with ``.html`` for ``.parquet``.
    level : float
        Confidence level of the intervals and bands, in (0, 1).
    overwrite : bool
        Replace an existing page.
    result : DensityEstimate, MeanEstimate or FrequencyEstimate, optional
        The summary's estimate when the caller already has it (else computed
        with ``level`` and ``options``).
    allow_unverified : bool
        Report on a summary file that the key at hand cannot verify
        (:func:`ldp_dask.read_summary`); refused otherwise.
    key : bytes, Secret or None
        The key to verify a summary file under (None: the environment's, when it names one).
    **options :
        Passed to the channel's estimator (e.g. ``threshold="soft"`` for wavelets).

    Returns
    -------
    str
        The path written (atomically).
    """
    if path is None:
        if isinstance(summary, Summary):
            raise LdpDaskError("The 'path' parameter is required when the summary is not a file.")
        path = default_report_path(summary)
    from .release import publish

    source = summary
    if key is not None and not isinstance(summary, Summary):
        summary = read_summary(summary, key=key, allow_unverified=allow_unverified)

    def produce(outputs: Any) -> None:  # the target is checked (exists? an input?) before the page is rendered
        outputs.write("report", render_report(summary, level=level, result=result, allow_unverified=allow_unverified,
                                                 **options).encode())

    inputs = [] if isinstance(source, Summary) else [source]
    return publish({"report": path}, produce, overwrite=overwrite, inputs=inputs)[1]["report"]



def plan_pages(result: Any, files: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The pages of a released plan (:class:`~ldp_dask.plans.run.PlanRelease`): an index page (the plan, its
    ε, and each statistic's result linking to its page, named by ``files``) and a page per statistic."""
    pages = {}
    for s in result.statistics:
        if s.statistic.target == "gof" or s.statistic.group is not None:  # a test, or results per group
            pages[s.label] = render_result(s.result)
        else:
            pages[s.label] = render_report(s.summary, level=result.level, result=s.result, quantiles=s.quantiles)
    d = result.describe()
    rows = "\n".join(
        f"<tr><td><a href=\"{html.escape(files[s.label])}\">{html.escape(s.label)}</a></td>"
        f"<td>{html.escape(s.statistic.target)}</td><td><code>{html.escape(s.channel_name)}</code></td>"
        f"<td class=num>{s.epsilon:.4g}</td><td class=num>{s.n:,}</td>"
        f"<td>{html.escape(row[-1])}</td></tr>" for s, row in zip(result.statistics, d.table.rows))
    table = (f"<table><tr><th>statistic</th><th>target</th><th>channel</th><th>ε per {html.escape(result.unit)}</th>"
             "<th>reports</th>"
             f"<th>result</th></tr>\n{rows}</table>")
    facts = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in d.facts)
    index = page(d.title, html.escape(d.headline), (("Statistics", table), ("The release", f"<table>{facts}</table>")),
                 "Every number on these pages is computed from the plan's summaries: post-processing of one release, "
                 "which spends no further privacy budget. Intervals account for sampling and for the privacy noise.")
    return index, pages
