"""Writing results: JSON, PNG plots, and one description of each result rendered three ways.

Every result object (estimates, tests, quantile releases) writes through these
helpers, atomically (:func:`ldp_dask._io.atomic_write`), so a failed write leaves
nothing at the target path. Plots use matplotlib's headless Agg backend.

A result describes itself once (:meth:`describe` → :class:`Description`: a
title, a headline, facts and a table); the CLI prints it as text, the flows
publish it as markdown and the report embeds it as HTML, so the three never
disagree. Labels are data: the markdown and HTML renderings escape them.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import math
import os
import re
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ._io import atomic_write
from ._validation import LdpDaskError

__all__ = ["jsonable", "json_bytes", "save_json", "new_axes", "figure_png", "finish_plot", "write_result_files",
           "Description", "Table", "Described", "render_text", "render_markdown", "render_html", "md_cell", "fmt",
           "tidy_table", "parquet_bytes", "render_result", "page", "png_base64", "PAGE_CSS"]


def jsonable(v: Any) -> Any:
    """``v`` with numpy arrays and scalars turned into lists and Python numbers (for JSON)."""
    if isinstance(v, np.ndarray):
        if v.dtype.kind in "fc" and not np.isfinite(v).all():  # JSON has no NaN: null, vectorized
            out = v.astype(object)
            out[~np.isfinite(v)] = None
            return out.tolist()
        return v.tolist()
    if isinstance(v, (np.floating, np.integer)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None  # JSON has no NaN: "no value" is null, never a number a reader may average
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return v


def new_axes(ax: Any, figsize: tuple[float, float]) -> tuple[Any, bool]:
    """The Axes to draw on: ``ax``, or a new figure (headless Agg backend); and whether it is ours."""
    if ax is not None:
        return ax, False
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=figsize, dpi=110)[1], True


def figure_png(ax: Any, dpi: int | None = None, close: bool = True) -> bytes:
    """The Axes' figure as PNG bytes (files, artifacts, HTML pages); closes the figure when ``close``."""
    buf = io.BytesIO()
    with warnings.catch_warnings():  # a label (data) in a script the font lacks is drawn as a box: not the user's fault
        warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
        ax.figure.tight_layout()
        ax.figure.savefig(buf, format="png", dpi=dpi or "figure")
    if close:
        import matplotlib.pyplot as plt

        plt.close(ax.figure)
    return buf.getvalue()


def finish_plot(ax: Any, path: str | os.PathLike[str] | None, own: bool, overwrite: bool) -> Any:
    """Write the figure as a PNG atomically when ``path`` is given; close figures we created."""
    if path is not None:
        png = figure_png(ax, close=own)
        atomic_write(path, lambda fh: fh.write(png), overwrite=overwrite)
    return ax


def json_bytes(obj: dict[str, Any]) -> bytes:
    """``obj`` as indented JSON (numpy values converted)."""
    return json.dumps(jsonable(obj), indent=2, sort_keys=True).encode()


def save_json(obj: dict[str, Any], path: str | os.PathLike[str], overwrite: bool) -> str:
    """Write ``obj`` as indented JSON (numpy values converted), atomically."""
    blob = json_bytes(obj)
    return atomic_write(path, lambda fh: fh.write(blob), overwrite=overwrite)


def parquet_bytes(table: Any) -> bytes:
    """A pyarrow Table as the bytes of a Parquet file (what pandas, DuckDB and polars read as they are)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def tidy_table(columns: dict[str, Any], facts: dict[str, Any]) -> Any:
    """A tidy pyarrow Table of ``columns`` (one row per bin, category or quantile) with ``facts`` (method, n, ε,
    level …) as repeated columns too, so a reader without ldp_dask sees everything in plain columns; the facts
    are also kept as JSON in the schema metadata under ``ldp_dask.result``."""
    import pyarrow as pa

    rows = len(next(iter(columns.values())))
    data = {**columns, **{k: [v] * rows for k, v in facts.items()}}
    table = pa.table({k: pa.array(jsonable(list(v)) if not hasattr(v, "dtype") else v) for k, v in data.items()})
    return table.replace_schema_metadata({"ldp_dask.result": json.dumps(jsonable(facts))})


def write_result_files(result: Any, outputs: Any) -> None:
    """Stage a result's files among ``outputs`` (:class:`ldp_dask._io.StagedOutputs`): the ``json``
    output gets :meth:`to_dict`, the ``table`` output the Parquet file of ``to_table()`` (tidy rows), the
    ``plot`` output the PNG of :meth:`plot` (results that draw one), the
    ``html`` output a self-contained page (:func:`render_result`)."""
    if "json" in outputs:
        outputs.write("json", json_bytes(result.to_dict()))
    if "table" in outputs:
        if not hasattr(result, "to_table"):
            raise LdpDaskError(f"a {type(result).__name__} has no table form; write it as JSON (.json)")
        outputs.write("table", parquet_bytes(result.to_table()))
    if "plot" in outputs and hasattr(result, "plot"):
        outputs.write("plot", figure_png(result.plot()))
    if "html" in outputs:
        outputs.write("html", render_result(result).encode())


# --- one description of a result, three renderings ------------------------------------------------------------
_NUMBER = re.compile(r"^[−+-]?(\d[\d,]*\.?\d*|\.\d+)(e[−+-]?\d+)?%?$")


def _numeric(cell: str) -> bool:
    return bool(_NUMBER.match(cell.strip()))


@dataclass(frozen=True)
class Table:
    """Rows of a result under named columns (cells already formatted)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclass(frozen=True)
class Description:
    """What a result says, written once and rendered as text (CLI), markdown (Prefect artifacts) or HTML (reports).

    Attributes
    ----------
    title : str
    headline : str
        The key number with its uncertainty, in one sentence.
    facts : tuple of (label, value)
        Everything else worth stating, one row each (values already formatted).
    table : Table, optional
        Per-bin, per-category or per-quantile rows.
    """

    title: str
    headline: str = ""
    facts: tuple[tuple[str, str], ...] = ()
    table: Table | None = None

    def with_facts(self, *facts: tuple[str, str], title: str | None = None) -> Description:
        """A copy with ``facts`` appended (and the title replaced when given)."""
        return dataclasses.replace(self, facts=self.facts + tuple(facts), title=self.title if title is None else title)


#: A terminal shows at most this many rows of a result's table: the first ones and the last few, with a line that
#: says how to get every row (a density's table is already at most 64 evenly spaced bins: shown whole).
TEXT_ROWS = 64
#: Of those, the last rows kept.
TEXT_TAIL = 5
#: What the truncation line points to (the command line's --json, Python's to_dict() and the HTML report).
ALL_ROWS_HINT = "every row: --json on the command line, .to_dict() in Python"


def render_text(d: Description, max_rows: int | None = TEXT_ROWS) -> str:
    """Plain text for a terminal: title, headline, aligned facts, the table with right-aligned numbers. A table of
    more than ``max_rows`` rows shows its first and last rows and one line saying how many are left out and how to
    get them all (``max_rows=None``: every row)."""
    lines = [d.title] + ([f"  {d.headline}"] if d.headline else [])
    width = max((len(k) for k, _ in d.facts), default=0)
    lines += [f"  {k:<{width}}  {v}" for k, v in d.facts]
    if d.table is not None and d.table.rows:
        t = d.table
        rows = list(t.rows)
        shown: list[tuple[str, ...] | None] = list(rows)
        if max_rows is not None and len(rows) > max_rows:  # None marks the line that says what was left out
            shown = [*rows[:max_rows - TEXT_TAIL], None, *rows[-TEXT_TAIL:]]
        kept = [r for r in shown if r is not None]
        widths = [max(len(c), *(len(r[i]) for r in kept)) for i, c in enumerate(t.columns)]
        if t.caption:
            lines.append(f"  {t.caption}")
        lines.append("  " + "  ".join(c.rjust(w) for c, w in zip(t.columns, widths)))
        for r in shown:
            if r is None:
                lines.append(f"  … {len(rows) - len(kept):,} of {len(rows):,} rows not shown ({ALL_ROWS_HINT})")
                continue
            lines.append("  " + "  ".join(c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(r, widths)))
    return "\n".join(printable(line).rstrip() for line in lines)


def printable(text: str) -> str:
    """``text`` with every control character shown as its escape (``\\x1b``): labels are data, and a terminal must
    not obey an ANSI sequence a category carries."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


_MD_ESCAPES = str.maketrans({"\\": "\\\\", "|": r"\|", "`": r"\`", "*": r"\*", "_": r"\_", "[": r"\[", "]": r"\]",
                             "$": r"\$", "#": r"\#", "~": r"\~", "!": r"\!", "&": "&amp;", "<": "&lt;", ">": "&gt;",
                             "\n": " ", "\r": " "})


def md_cell(text: Any) -> str:
    """``text`` safe inside a markdown table cell or paragraph (labels are data: nothing is interpreted)."""
    return str(text).translate(_MD_ESCAPES)


def render_markdown(d: Description) -> str:
    """Markdown for Prefect artifacts: a heading, the headline, a two-column table of facts, the rows table."""
    out = [f"# {md_cell(d.title)}", ""]
    if d.headline:
        out += [md_cell(d.headline), ""]
    if d.facts:
        out += ["| what | value |", "|---|---|", *[f"| {md_cell(k)} | {md_cell(v)} |" for k, v in d.facts], ""]
    if d.table is not None and d.table.rows:
        t = d.table
        if t.caption:
            out += [md_cell(t.caption), ""]
        out += ["| " + " | ".join(md_cell(c) for c in t.columns) + " |",
                "|" + "|".join("---:" if _numeric(t.rows[0][i]) else "---" for i in range(len(t.columns))) + "|",
                *["| " + " | ".join(md_cell(c) for c in r) + " |" for r in t.rows], ""]
    return "\n".join(out).rstrip() + "\n"


def render_html(d: Description, heading: str = "h2", fold_rows: int = 30) -> str:
    """An HTML fragment for reports; a table of more than ``fold_rows`` rows is folded in ``<details>``."""
    esc = html.escape
    out = [f"<{heading}>{esc(d.title)}</{heading}>"] if heading else []
    if d.headline:
        out.append(f"<p class=headline>{esc(d.headline)}</p>")
    if d.facts:
        rows = "".join(f"<tr><th>{esc(k)}</th><td{' class=num' if _numeric(v) else ''}>{esc(v)}</td></tr>"
                       for k, v in d.facts)
        out.append(f"<table>{rows}</table>")
    if d.table is not None and d.table.rows:
        t = d.table
        head = "".join(f"<th>{esc(c)}</th>" for c in t.columns)
        body = "".join("<tr>" + "".join(f"<td{' class=num' if _numeric(c) else ''}>{esc(c)}</td>" for c in r)
                       + "</tr>" for r in t.rows)
        table = f"<table><tr>{head}</tr>{body}</table>"
        caption = esc(t.caption or f"{len(t.rows)} rows")
        out.append(f"<details><summary>{caption}</summary>{table}</details>" if len(t.rows) > fold_rows
                   else (f"<h3>{esc(t.caption)}</h3>" if t.caption else "") + table)
    return "\n".join(out)


class Described:
    """Mixin of result objects: one :meth:`describe`, rendered by ``str()``, :meth:`to_markdown` and :meth:`to_html`."""

    def describe(self) -> Description:  # pragma: no cover - every result implements it
        raise NotImplementedError

    def __str__(self) -> str:
        return render_text(self.describe())

    def to_markdown(self) -> str:
        return render_markdown(self.describe())

    def to_html(self, heading: str = "h2") -> str:
        return render_html(self.describe(), heading)

    def to_pandas(self) -> Any:
        """The result's tidy table (``to_table()``) as a pandas DataFrame."""
        to_table = getattr(self, "to_table", None)
        if to_table is None:
            raise LdpDaskError(f"a {type(self).__name__} has no table form; use to_dict()")
        return to_table().to_pandas()

    def _repr_html_(self) -> str:
        """What Jupyter shows for a result: its description as HTML and, when it draws one, its plot."""
        d = self.describe()
        picture = ""
        plot = getattr(self, "plot", None)
        if callable(plot):
            try:
                picture = f'<img alt="{html.escape(d.title)}" src="data:image/png;base64,{png_base64(plot())}">'
            except Exception:  # noqa: BLE001 - a notebook shows the description even when a plot cannot be drawn
                picture = ""
        return f'<div class="ldp-dask-result">{render_html(d, "h3")}{picture}</div>'


def summary_info(summary: Any) -> dict[str, Any]:
    """What an estimate records about the summary it was made from: column, privacy unit, integrity."""
    unit = summary.privacy_unit
    central, whose = summary.stated_central()
    return {"column": summary.metadata.get("column", "value"), "privacy_unit": unit,
            "population": "rows" if unit == "row" else f"each {unit} weighted equally",
            "summary_integrity": summary.integrity, "central": central, "central_delta_of": whose}


def summary_facts(info: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The rows an estimate's description shows about its summary: privacy unit and integrity."""
    from .amplification import central_line

    names = (("privacy_unit", "privacy unit"), ("population", "population estimated"),
             ("summary_integrity", "summary integrity"))
    facts = tuple((label, str(info[key])) for key, label in names if key in info)
    if "central" not in info:
        return facts
    return facts + (("central guarantee", central_line(info["central"], *_whose(info))),)


def restated(result: Any, summary: Any) -> Any:
    """``result`` (an estimate of ``summary``) with its central statement as ``summary`` is read now
    (:meth:`ldp_dask.Summary.stated_central`); a result that states none, unchanged."""
    info = getattr(result, "info", None)
    if isinstance(result, type) or not dataclasses.is_dataclass(result) or not (isinstance(info, dict)
                                                                                and "central" in info):
        return result
    central, whose = summary.stated_central()
    plain: Any = result  # a dataclass instance (checked above)
    return dataclasses.replace(plain, info={**info, "central": central, "central_delta_of": whose})


def _whose(info: dict[str, Any]) -> tuple[str, ...]:
    """How ``info``'s central statement labels its δ (older results: their summary's own)."""
    return (str(info["central_delta_of"]),) if "central_delta_of" in info else ()


def fmt(x: float, digits: int = 6) -> str:
    """A number with ``digits`` significant digits."""
    return f"{x:.{digits}g}"


def decimals_for(scale: float) -> int | None:
    """The decimal places that show an uncertainty ``scale`` (a standard error) to two significant digits: 3 for
    0.056, 1 for 5.9, −1 for 367 (tens). None when ``scale`` is not a positive finite number."""
    if not (math.isfinite(scale) and scale > 0):
        return None
    return 1 - math.floor(math.log10(scale))


def _at(x: float, places: int, direction: int = 0) -> str:
    """``x`` at ``places`` decimals: to the nearest (``direction`` 0), down (−1) or up (+1); a value already on the
    grid up to float noise stays where it is."""
    units = x * 10.0 ** places
    near = round(units)
    if direction and abs(units - near) > 1e-9 * max(1.0, abs(units)):
        near = math.floor(units) if direction < 0 else math.ceil(units)
    text = f"{near / 10.0 ** places:.{max(places, 0)}f}"
    return "0" if float(text) == 0 else text


def fmt_se(x: float, se: float, digits: int = 6) -> str:
    """``x`` rounded to what its standard error ``se`` supports (the digits that show ``se`` to two significant
    digits; ``fmt(x, digits)`` when ``se`` is zero, NaN or infinite). 11.5216 with se 5.92 is "11.5"."""
    places = decimals_for(se)
    if places is None or not math.isfinite(x):
        return fmt(x, digits)
    return _at(x, places)


def fmt_interval(lo: float, hi: float, scale: float, digits: int = 6) -> str:
    """``[lo, hi]`` at the precision ``scale`` supports, rounded outward (the printed interval contains the
    computed one, so rounding never narrows what the interval claims)."""
    places = decimals_for(scale)
    if places is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return f"[{fmt(lo, digits)}, {fmt(hi, digits)}]"
    return f"[{_at(lo, places, -1)}, {_at(hi, places, +1)}]"


def interval_scale(lo: float, hi: float, level: float = 0.95) -> float:
    """The standard error a normal interval ``[lo, hi]`` at ``level`` implies: its half-width over z."""
    from statistics import NormalDist

    return (hi - lo) / (2 * NormalDist().inv_cdf(0.5 + level / 2))


# --- the self-contained HTML page of a result (the summary report, report.py, uses it too) -------------------
PAGE_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#1d2733;line-height:1.45}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #dde3ea}
.sub{color:#5b6b7c;margin-top:0}table{border-collapse:collapse;margin:.5rem 0}
td,th{border:1px solid #dde3ea;padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f3f6f9}td.num{text-align:right;font-variant-numeric:tabular-nums}
.headline{font-size:1.15rem;font-weight:600}img{max-width:100%;border:1px solid #dde3ea}
code{background:#f3f6f9;padding:0 .2rem}.note{color:#5b6b7c;font-size:.9rem}
"""


def png_base64(ax: Any) -> str:
    """A figure as base64 PNG, for an <img> in a page."""
    return base64.b64encode(figure_png(ax)).decode()


def render_result(result: Any) -> str:
    """A self-contained HTML page for any result that describes itself (a central quantile release, local
    quantiles, a test, an estimate): its plot when it draws one, then its description's facts and table.

    What the page shows is what the release published (or post-processing of it): nothing else is read.
    """
    d = result.describe()
    picture = ""
    if hasattr(result, "plot"):
        picture = f'<img alt="{html.escape(d.title)}" src="data:image/png;base64,{png_base64(result.plot())}">\n'
    return page(d.title, html.escape(d.headline), (("Result", picture + result.to_html(heading="")),),
                 "Every number on this page is part of the release or computed from it: post-processing, which "
                 "spends no further privacy budget.")


def page(title: str, sub: str, sections: tuple[tuple[str, str], ...], note: str) -> str:
    """The page around already-escaped HTML sections (``sub`` is HTML too)."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    body = "\n".join(f"<h2>{html.escape(h)}</h2>\n{content}" for h, content in sections)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{PAGE_CSS}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class=sub>{sub}</p>
{body}
<p class=note>{html.escape(note)} Page written {now} by ldp_dask.</p>
</body></html>
"""
