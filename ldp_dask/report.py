"""A self-contained HTML page for a summary: the estimate, its uncertainty and the privacy parameters.

Everything on the page is computed from the summary file alone (post-processing
of a private release: no further privacy cost); the plot is embedded as a PNG
data URI, so the page can be mailed or attached to a ticket as one file.
"""

from __future__ import annotations

import base64
import html
import json
import os
from datetime import datetime, timezone
from typing import Any

from ._io import atomic_write, check_output
from ._validation import LdpDaskError
from .outputs import figure_png
from .estimators import DensityEstimate, FrequencyEstimate, MeanEstimate, estimate, estimator_for
from .summary import Summary, read_summary

__all__ = ["write_report", "render_report", "default_report_path"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#1d2733;line-height:1.45}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #dde3ea}
.sub{color:#5b6b7c;margin-top:0}table{border-collapse:collapse;margin:.5rem 0}
td,th{border:1px solid #dde3ea;padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f3f6f9}td.num{text-align:right;font-variant-numeric:tabular-nums}
.big{font-size:1.6rem;font-weight:600}img{max-width:100%;border:1px solid #dde3ea}
code{background:#f3f6f9;padding:0 .2rem}.note{color:#5b6b7c;font-size:.9rem}
"""


def default_report_path(summary_path: str | os.PathLike[str]) -> str:
    """``x.summary.parquet`` → ``x.summary.html`` (any other name: ``+ .html``)."""
    p = os.fspath(summary_path)
    return (p[: -len(".parquet")] if p.endswith(".parquet") else p) + ".html"


def _png(ax: Any) -> str:
    return base64.b64encode(figure_png(ax)).decode()


def _rows(pairs: list[tuple[str, Any]]) -> str:
    return "\n".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in pairs)


def _g(x: float, digits: int = 6) -> str:
    return f"{x:.{digits}g}"


def _privacy(s: Summary) -> str:
    m = s.metadata
    ch = s.channel
    params = ch.params()
    pairs = [
        ("model", "local differential privacy: every row was privatized on its own before any sum, so the "
                  "guarantee holds against whoever reads this file, the workers' outputs or the cluster's logs"),
        ("channel", f"<code>{html.escape(ch.name)}</code>"),
        ("ε per row (requested / spent)", f"{ch.epsilon:g} / {ch.epsilon_spent():g}"),
    ]
    if "domain" in params:
        pairs.append(("public domain", html.escape(json.dumps(params["domain"]))))
    # the channel's own options, as its module declares them
    pairs += [(f"{opt.name} — {opt.help}", f"<code>{html.escape(json.dumps(params[opt.name], default=str))}</code>")
              for opt in ch.options if opt.name in params]
    pairs += [
        ("rows (n, public)", f"{s.n:,}"),
        ("column / source", html.escape(f"{m.get('column', '?')} of {m.get('source', '?')}")),
        ("mode", html.escape(str(m.get("mode", "?")))),
        ("key id (source)", html.escape(f"{m.get('key_id', '?')} ({m.get('key_source', '?')})")),
        ("released at", html.escape(str(m.get("created_at", "?")))),
        ("ldp_dask version", html.escape(str(m.get("package_version", "?")))),
    ]
    return f"<table>{_rows(pairs)}</table>"


def _density(est: DensityEstimate) -> str:
    lo, hi = est.band()
    qs = [0.1, 0.25, 0.5, 0.75, 0.9]
    qv = est.quantile(qs)
    shape = (f"{est.info['wavelet']} wavelets, levels {est.info['j0']}–{est.info['j1']}, γ = {est.info['gamma']:g}"
             if est.smooth else f"{len(est.density)} bins")
    png = _png(est.plot())
    bins = "\n".join(
        f"<tr><td class=num>{_g(est.edges[j], 5)}</td><td class=num>{_g(est.edges[j + 1], 5)}</td>"
        f"<td class=num>{_g(est.density[j], 4)}</td><td class=num>{_g(lo[j], 4)}</td>"
        f"<td class=num>{_g(hi[j], 4)}</td></tr>"
        for j in range(len(est.density)))
    return f"""
<p>Density on [{_g(est.edges[0])}, {_g(est.edges[-1])}], {html.escape(shape)}, method <code>{html.escape(est.method)}</code>;
the shaded band is a {est.level:.0%} pointwise confidence band that includes the privacy noise.</p>
<img alt="estimated density with its confidence band" src="data:image/png;base64,{png}">
<h3>Quantiles of the estimated density</h3>
<table><tr>{''.join(f'<th>{q:.0%}</th>' for q in qs)}</tr>
<tr>{''.join(f'<td class=num>{_g(v)}</td>' for v in qv)}</tr></table>
<details><summary>Density and band per bin ({len(est.density)} bins)</summary>
<table><tr><th>from</th><th>to</th><th>density</th><th>band low</th><th>band high</th></tr>{bins}</table></details>
"""


def _mean(est: MeanEstimate) -> str:
    pairs = [
        ("mean", f"<span class=big>{_g(est.value)}</span>"),
        ("standard error", _g(est.se, 3)),
        (f"{est.level:.0%} confidence interval", f"[{_g(est.ci[0])}, {_g(est.ci[1])}]"),
        ("share of the variance from privacy noise", f"{est.noise_share:.1%}"),
        ("public domain", f"[{_g(est.domain[0])}, {_g(est.domain[1])}]"),
    ]
    return f"<table>{_rows(pairs)}</table>"


def _frequencies(est: FrequencyEstimate) -> str:
    png = _png(est.plot())
    rows = "\n".join(
        f"<tr><td>{html.escape(str(lab))}</td><td class=num>{f:.4f}</td><td class=num>{se:.4f}</td>"
        f"<td class=num>[{lo:.4f}, {hi:.4f}]</td></tr>"
        for lab, f, se, lo, hi in zip(est.labels, est.frequencies, est.se, est.ci_low, est.ci_high))
    return f"""
<p>Frequencies of {len(est.labels)} categories, encoding <code>{html.escape(est.method)}</code>; intervals at
{est.level:.0%}, per category, including the privacy noise.</p>
<img alt="estimated frequencies with intervals" src="data:image/png;base64,{png}">
<table><tr><th>category</th><th>frequency</th><th>se</th><th>{est.level:.0%} interval</th></tr>{rows}</table>
"""


def render_report(summary: Summary | str | os.PathLike[str], level: float = 0.95, result: Any = None,
                  **options: Any) -> str:
    """The HTML page of ``summary`` as a string (see :func:`write_report`)."""
    s = read_summary(summary)
    if estimator_for(s.channel) is None:
        body = ("<p>An adaptive Haar summary feeds the goodness-of-fit test (<code>ldp-dask gof</code>); "
                "it has no density or mean estimate of its own.</p>")
    else:
        est = result if result is not None else estimate(s, level=level, **options)
        if isinstance(est, MeanEstimate):
            body = _mean(est)
        elif isinstance(est, FrequencyEstimate):
            body = _frequencies(est)
        else:
            body = _density(est)
    title = f"Private release of {s.metadata.get('column', 'a column')}"
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class=sub>n = {s.n:,} rows, ε = {s.channel.epsilon:g} per row, channel <code>{html.escape(s.channel.name)}</code></p>
<h2>Estimate and uncertainty</h2>
{body}
<h2>Privacy parameters</h2>
{_privacy(s)}
<p class=note>Every number on this page is computed from the summary file alone: post-processing of the
release, which spends no further privacy budget. Intervals account for sampling and for the privacy noise.
Page written {now} by ldp_dask.</p>
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
    check_output(path, overwrite)
    page = render_report(summary, level=level, result=result, **options).encode()
    return atomic_write(path, lambda fh: fh.write(page), overwrite=overwrite)

