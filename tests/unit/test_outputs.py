"""Every result describes its rows once; the CLI's text, the flows' markdown and the report's HTML render that
one description, so they show the same numbers, and labels that look like markup stay text."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pytest

import ldp_dask
from ldp_dask import gof
from ldp_dask.central import quantiles
from ldp_dask.channels import HaarAdaptive, RandomizedResponse
from ldp_dask.estimators import local_quantiles
from ldp_dask.outputs import md_cell

TRICKY = ["a|b", "<b>bold</b>", "*star*", "[link](x)", "`tick`"]


def _results():
    rng = np.random.default_rng(0)
    x = rng.beta(2, 5, 20_000)
    h = ldp_dask.privatize(x, channel=ldp_dask.LaplaceHistogram(1.0, 12, (0, 1)), seed=1)
    w = ldp_dask.privatize(x, channel=ldp_dask.WaveletLaplace(1.0, (0, 1), 2, 4), seed=1)
    m = ldp_dask.privatize(x, channel=ldp_dask.LaplaceMean(1.0, (0, 1)), seed=1)
    f = ldp_dask.privatize(np.array(TRICKY)[rng.integers(0, 5, 5000)], channel=RandomizedResponse(2.0, TRICKY),
                           seed=1)
    a = ldp_dask.privatize(x, channel=HaarAdaptive(1.0, [1, 2, 3], (0, 1)), seed=1)
    return {
        "histogram density": ldp_dask.estimate(h), "wavelet density": ldp_dask.estimate(w),
        "mean": ldp_dask.estimate(m), "frequencies": ldp_dask.estimate(f),
        "local quantiles": local_quantiles(h, B=20, rng=1),
        "central quantiles": quantiles(x, q=[0.25, 0.5], epsilon=1.0, bounds=(0, 1), seed=1),
        "adaptive test": gof.adaptive_test(a, "beta(2,5)", B=99, rng=1), "summary": h,
    }


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        if data.strip():
            self.cells.append(data.strip())


RESULTS = _results()


@pytest.mark.parametrize("name", sorted(RESULTS))
def test_text_markdown_and_html_show_the_same_rows(name):
    r = RESULTS[name]
    d = r.describe()
    text, md = str(r), r.to_markdown()
    page = _Text()
    page.feed(r.to_html())
    cells = [c for fact in d.facts for c in fact]
    if d.table is not None:
        cells += [*d.table.columns, *(c for row in d.table.rows for c in row)]
    assert d.title in text and d.headline in text and d.headline in page.cells
    for cell in cells:  # every label and value, in each of the three renderings
        assert cell in text and cell in page.cells and md_cell(cell) in md, cell
    # markdown: every row of a table has as many unescaped pipes as its header, whatever the labels hold
    for block in re.split(r"\n\n", md):
        rows = [ln for ln in block.splitlines() if ln.startswith("|")]
        counts = {len(re.findall(r"(?<!\\)\|", ln)) for ln in rows}
        assert len(counts) <= 1, block


def test_labels_are_data_not_markup():
    r = RESULTS["frequencies"]
    page = _Text()
    page.feed(r.to_html())
    assert "b" not in page.tags  # "<b>bold</b>" is a category, shown as text
    assert "<b>bold</b>" in page.cells and "a|b" in page.cells
    md = r.to_markdown()
    assert r"a\|b" in md and "&lt;b&gt;bold&lt;/b&gt;" in md and r"\*star\*" in md and r"\[link\](x)" in md


@pytest.mark.parametrize("name", ["central quantiles", "local quantiles", "adaptive test", "mean"])
def test_result_page_holds_the_description_and_the_plot(name):
    from ldp_dask.report import render_result

    r = RESULTS[name]
    d = r.describe()
    page = _Text()
    html_page = render_result(r)
    page.feed(html_page)
    assert d.title in page.cells and d.headline in page.cells
    for cell in (c for fact in d.facts for c in fact):
        assert cell in page.cells, cell
    assert ("img" in page.tags) == hasattr(r, "plot")
    assert "script" not in page.tags and "http" not in html_page.split("<body>")[1].replace("data:image", "")


def test_quantiles_cli_writes_pages_with_accuracy_and_intervals(tmp_path):
    """``ldp-dask quantiles --html``: the central page carries the a-priori accuracy, the local page the
    intervals; a column name that looks like markup stays text in both."""
    import pandas as pd

    from ldp_dask.cli import main

    col = "<i>dist</i>"
    x = np.random.default_rng(3).beta(2, 5, 200_000)  # above JointExp's range: inverse sensitivity, with a bound
    pd.DataFrame({col: x}).to_parquet(tmp_path / "d.parquet")
    main(["quantiles", str(tmp_path / "d.parquet"), "--column", col, "--bounds", "0", "1", "--epsilon", "1",
          "--local", "--seed", "1", "--ledger", str(tmp_path / "l.db"), "--html", str(tmp_path / "c.html")])
    page = _Text()
    page.feed((tmp_path / "c.html").read_text())
    assert "i" not in page.tags and f"Central-DP quantiles of {col}" in page.cells
    acc = [c for c in page.cells if c.startswith("a-priori accuracy (95%")]
    assert acc, page.cells
    statement = page.cells[page.cells.index(acc[0]) + 1]
    assert "records away from being the exact quantile" in statement

    main(["privatize", str(tmp_path / "d.parquet"), "--column", col, "--domain", "0", "1", "--epsilon", "1",
          "--channel", "histogram", "--local", "--seed", "1", "--ledger", str(tmp_path / "l.db"),
          "--out", str(tmp_path / "h.summary.parquet")])
    main(["quantiles", str(tmp_path / "h.summary.parquet"), "--html", str(tmp_path / "l.html")])
    page = _Text()
    page.feed((tmp_path / "l.html").read_text())
    assert "i" not in page.tags and "img" in page.tags
    assert "95% interval" in page.cells and sum(c.startswith("[") for c in page.cells) == 9


# --- the terminal and the notebook ---------------------------------------------------------------------------------
def test_numbers_are_rounded_to_what_their_standard_error_supports():
    from ldp_dask.outputs import decimals_for, fmt_interval, fmt_se

    assert fmt_se(11.5216, 5.92) == "11.5" and fmt_se(0.1969123, 0.0056) == "0.1969" and fmt_se(2041.68, 367) == "2040"
    assert [decimals_for(s) for s in (0.056, 5.9, 367.0)] == [3, 1, -1]
    assert decimals_for(0.0) is None and fmt_se(1 / 9, float("nan")) == "0.111111"  # no se: six digits, as before
    rng = np.random.default_rng(5)
    for lo, width, se in zip(rng.normal(0, 100, 500), rng.exponential(3, 500), rng.exponential(2, 500)):
        text = fmt_interval(lo, lo + width, se)
        a, b = (float(v) for v in text.strip("[]").split(", "))
        assert a <= lo + 1e-12 and b >= lo + width - 1e-12, (lo, width, se, text)  # rounded outward: it contains
        assert b - a <= width + 2 * 10.0 ** -decimals_for(se) + 1e-9  # and by at most one unit each side


def test_a_long_table_is_cut_with_a_line_that_says_how_to_get_every_row():
    from ldp_dask.outputs import ALL_ROWS_HINT, TEXT_ROWS, Description, Table, render_text

    rows = tuple((f"c{i}", f"{i / 7:.3f}") for i in range(1000))
    text = render_text(Description("t", table=Table(("category", "share"), rows)))
    assert "c0 " in text and "c999" in text and "c500" not in text
    assert f"{1000 - TEXT_ROWS:,} of 1,000 rows not shown" in text and "--json" in text and ".to_dict()" in text
    assert ALL_ROWS_HINT in text
    assert len(text.splitlines()) <= TEXT_ROWS + 4
    full = render_text(Description("t", table=Table(("category", "share"), rows)), max_rows=None)
    assert "c500" in full and "not shown" not in full
    short = render_text(Description("t", table=Table(("category", "share"), rows[:TEXT_ROWS])))
    assert "not shown" not in short


def test_results_render_in_a_notebook():
    s = ldp_dask.privatize(np.random.default_rng(3).beta(2, 5, 5_000), channel=ldp_dask.LaplaceHistogram(1, 8, (0, 1)),
                           seed=3, ledger=False)
    for result, drawn in ((s, False), (ldp_dask.estimate(s), True), (local_quantiles(s), True)):
        page = result._repr_html_()
        d = result.describe()
        assert page.startswith('<div class="ldp-dask-result">') and d.title.split(" of ")[0] in page
        assert ('src="data:image/png;base64,' in page) == (drawn and hasattr(result, "plot"))
        HTMLParser().feed(page)
