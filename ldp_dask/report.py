"""A self-contained HTML page for a summary: the estimate, its uncertainty and the privacy parameters.

Everything on the page is computed from the summary file alone (post-processing
of a private release: no further privacy cost); the plot is embedded as a PNG
data URI, so the page can be mailed or attached to a ticket as one file.
"""

from __future__ import annotations

import base64
import html
import os
from datetime import datetime, timezone
from typing import Any

from ._validation import LdpDaskError
from .outputs import figure_png
from .estimators import estimate, estimator_for
from .summary import Summary, read_summary

__all__ = ["write_report", "render_report", "render_result", "default_report_path"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#1d2733;line-height:1.45}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #dde3ea}
.sub{color:#5b6b7c;margin-top:0}table{border-collapse:collapse;margin:.5rem 0}
td,th{border:1px solid #dde3ea;padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f3f6f9}td.num{text-align:right;font-variant-numeric:tabular-nums}
.headline{font-size:1.15rem;font-weight:600}img{max-width:100%;border:1px solid #dde3ea}
code{background:#f3f6f9;padding:0 .2rem}.note{color:#5b6b7c;font-size:.9rem}
"""


def default_report_path(summary_path: str | os.PathLike[str]) -> str:
    """``x.summary.parquet`` → ``x.summary.html`` (any other name: ``+ .html``)."""
    p = os.fspath(summary_path)
    return (p[: -len(".parquet")] if p.endswith(".parquet") else p) + ".html"


def _png(ax: Any) -> str:
    return base64.b64encode(figure_png(ax)).decode()


def render_report(summary: Summary | str | os.PathLike[str], level: float = 0.95, result: Any = None,
                  **options: Any) -> str:
    """The HTML page of ``summary`` as a string (see :func:`write_report`).

    The estimate's and the release's rows come from their :meth:`describe`, the
    same rows the CLI prints and the flows publish.
    """
    s = read_summary(summary)
    if estimator_for(s.channel) is None:
        body = (f"<p>{html.escape(repr(s.channel.name))} summaries feed the goodness-of-fit test "
                "(<code>ldp-dask gof</code>); they have no estimate of their own.</p>")
    else:
        est = result if result is not None else estimate(s, level=level, **options)
        picture = ""
        if hasattr(est, "plot"):
            picture = f'<img alt="the estimate with its uncertainty" src="data:image/png;base64,{_png(est.plot())}">'
        body = picture + "\n" + est.to_html(heading="")
        if s.channel.name in ("histogram", "haar", "wavelet", "square-wave"):  # assumption-free quantile intervals
            from .estimators import local_quantiles

            body += "\n<h2>Quantiles</h2>\n" + local_quantiles(s, level=level).to_html(heading="")
    title = f"Private release of {s.metadata.get('column', 'a column')}"
    sub = (f"n = {s.n:,} rows, ε = {s.epsilon_per_unit:g} per {html.escape(s.privacy_unit)}, channel "
           f"<code>{html.escape(s.channel.name)}</code>")
    return _page(title, sub, (("Estimate and uncertainty", body), ("Privacy parameters", s.to_html(heading=""))),
                 "Every number on this page is computed from the summary file alone: post-processing of the "
                 "release, which spends no further privacy budget. Intervals account for sampling and for the "
                 "privacy noise.")


def render_result(result: Any) -> str:
    """A self-contained HTML page for any result that describes itself (a central quantile release, local
    quantiles, a test, an estimate): its plot when it draws one, then its description's facts and table.

    What the page shows is what the release published (or post-processing of it): nothing else is read.
    """
    d = result.describe()
    picture = ""
    if hasattr(result, "plot"):
        picture = f'<img alt="{html.escape(d.title)}" src="data:image/png;base64,{_png(result.plot())}">\n'
    return _page(d.title, html.escape(d.headline), (("Result", picture + result.to_html(heading="")),),
                 "Every number on this page is part of the release or computed from it: post-processing, which "
                 "spends no further privacy budget.")


def _page(title: str, sub: str, sections: tuple[tuple[str, str], ...], note: str) -> str:
    """The page around already-escaped HTML sections (``sub`` is HTML too)."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    body = "\n".join(f"<h2>{html.escape(h)}</h2>\n{content}" for h, content in sections)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class=sub>{sub}</p>
{body}
<p class=note>{html.escape(note)} Page written {now} by ldp_dask.</p>
</body></html>
"""


def write_report(summary: Summary | str | os.PathLike[str], path: str | os.PathLike[str] | None = None,
                 level: float = 0.95, overwrite: bool = False, result: Any = None, **options: Any) -> str:
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

    def produce(outputs: Any) -> None:  # the target is checked (exists? an input?) before the page is rendered
        outputs.write("report", render_report(summary, level=level, result=result, **options).encode())

    inputs = [] if isinstance(summary, Summary) else [summary]
    return publish({"report": path}, produce, overwrite=overwrite, inputs=inputs)[1]["report"]

