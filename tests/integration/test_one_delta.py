"""One δ per reading: everything a reader sees of one release (the terminal lines of a release, a plan's index
page, its statistics' pages, its report's rows) states its central guarantees at one δ, labelled with whose it
is; a summary read alone states its own, labelled so (docs/privacy.md, "The central guarantee")."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import ldp_dask
from ldp_dask.cli import main
from ldp_dask.ledger import open_ledger

#: every δ a page states, with what follows it (a label in parentheses, or nothing)
STATED = re.compile(r"at δ ([0-9.e+-]+)(\s*\(([^)]*)\))?")

PLAN = """
[[statistic]]
column = "x"
target = "distribution"
domain = [0, 1]
bins = 8

[[statistic]]
column = "x"
target = "mean"
domain = [0, 1]

[[statistic]]
column = "g"
target = "frequencies"
categories = ["a", "b", "c"]

[[statistic]]
column = "x"
target = "mean"
domain = [0, 1]
group_by = "g"
groups = ["a", "b", "c"]
name = "x.by.g"
"""


def _deltas(text: str) -> list[tuple[float, str]]:
    """Every (δ, label) stated in ``text``; the label is empty when the δ is unlabelled."""
    return [(float(m.group(1)), (m.group(3) or "").strip()) for m in STATED.finditer(text)]


def _one_delta(text: str, where: str) -> tuple[float, str]:
    found = _deltas(text)
    assert found, f"{where}: no central statement found"
    assert all(label for _, label in found), f"{where}: an unlabelled δ in {found}"
    deltas = {d for d, _ in found}
    assert len(deltas) == 1, f"{where}: {len(deltas)} different δ on one reading: {sorted(deltas)}"
    return found[0]


def _table(path: Path, rows: int = 40_000) -> Path:
    rng = np.random.default_rng(7)
    path.mkdir()
    for i in range(2):
        pq.write_table(pa.table({"x": rng.beta(2, 5, rows), "g": rng.choice(["a", "b", "c"], rows)}),
                       path / f"part-{i}.parquet")
    return path


def test_a_release_and_its_ledger_line_state_one_delta_and_a_file_read_alone_its_own(tmp_path, capsys):
    data, led = _table(tmp_path / "t"), str(tmp_path / "ledger.sqlite")
    assert main(["budget", "set", "t", "--source", str(data), "--limit", "10", "--central", "1", "1e-5",
                 "--ledger", led]) == 0
    capsys.readouterr()
    out = tmp_path / "x.summary.parquet"
    assert main(["privatize", str(data), "--column", "x", "--domain", "0", "1", "--epsilon", "1", "--channel",
                 "histogram", "--bins", "16", "--ledger", led, "--out", str(out), "--seed", "3"]) == 0
    got = capsys.readouterr()
    delta, label = _one_delta(got.out + got.err, "privatize")
    assert delta == 1e-5 and label == "the dataset's δ, its central budget's"
    assert main(["budget", "--ledger", led]) == 0
    assert _one_delta(capsys.readouterr().out, "budget") == (1e-5, "the dataset's δ, its central budget's")
    # the file read alone: its own δ (the run's --central-delta), labelled as its own
    assert main(["estimate", str(out), "--seed", "3"]) == 0
    assert _one_delta(capsys.readouterr().out, "estimate") == (1e-9, "this summary's δ")
    # restating at a larger δ is the same release's guarantee: never a larger ε
    s = ldp_dask.read_summary(out, key=ldp_dask.noise.resolve_secret(seed=3))
    assert s.central_at(1e-5)["epsilon"] <= s.central["epsilon"]


def test_a_plan_states_one_delta_on_every_page_with_and_without_a_central_budget(tmp_path):
    data = _table(tmp_path / "t")
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    led = str(tmp_path / "ledger.sqlite")
    open_ledger(led).declare("t", ldp_dask.source.source_root(str(data)), 10.0, central=(2.0, 1e-5))
    for out, kw, want in ((tmp_path / "budgeted", {"ledger": led}, (1e-5, "the dataset's δ, its central budget's")),
                          (tmp_path / "unledgered", {"ledger": False}, None)):
        result = ldp_dask.release_plan(plan, str(data), 1.0, out=out, seed=5, **kw)
        pages = {p.name: html.unescape(p.read_text()) for p in Path(out).glob("*.html")}
        assert len(pages) == 5, sorted(pages)  # the index and a page per statistic
        seen = {_one_delta(str(result), "the plan's description")}
        seen |= {_one_delta(text, name) for name, text in pages.items()}
        assert len(seen) == 1, f"the plan's pages state different δ: {seen}"
        if want is not None:
            assert seen == {want}
            assert result.receipt is not None and _one_delta(result.receipt.line(), "receipt") == want
        else:  # no ledger: the plan's own composition's δ, said to be the plan's
            (delta, label), = seen
            assert label == "the plan's δ" and delta >= 1e-6
        # each statistic's summary file, read alone, states its own δ again
        for st in result.statistics:
            if st.summary is not None:
                alone = ldp_dask.read_summary(st.summary.metadata.get("path") or next(
                    Path(out).glob(f"{st.label}.summary.parquet")), key=ldp_dask.noise.resolve_secret(seed=5))
                assert _one_delta(str(alone), st.label) == (1e-9, "this summary's δ")
