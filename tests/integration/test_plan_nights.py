"""An incremental plan with a privacy unit: a night, not a file.

A plan's nightly series with ``--privacy-unit`` bounds the persons of tonight's files together, once for every
statistic: a first night over 3 new files charges ε 1 per person (not 3, not ε per statistic), each statistic's
summary keeps one partition naming the 3 files, holding exactly k reports per person; a second night adds one
partition and ε 1; a re-run of a night is free and bit-identical; the summaries' central statements count the
nights as the same persons.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask.cli import main
from ldp_dask.ledger import Ledger

PLAN = """
[[statistic]]
column = "distance"
target = "distribution"
domain = [0, 5000]
bins = 8

[[statistic]]
column = "distance"
target = "mean"
domain = [0, 5000]

[[statistic]]
column = "carrier"
target = "frequencies"
categories = ["AA", "B6", "DL", "UA"]

[[statistic]]
column = "air_time"
target = "mean"
domain = [0, 700]
group_by = "carrier"
groups = ["AA", "B6"]
name = "air_by_carrier"
"""
PERSONS, K = 1_000, 2


def _day(root, name, seed, persons=PERSONS, rows=3_000):
    """A day's file: rows of planes drawn from the same fleet (a plane flies on many days, in many files)."""
    rng = np.random.default_rng(seed)
    pq.write_table(pa.table({"tailnum": rng.integers(0, persons, rows),
                             "distance": np.clip(rng.gamma(2.0, 500.0, rows), 0, 5000),
                             "carrier": rng.choice(["AA", "B6", "DL", "UA"], rows),
                             "air_time": rng.uniform(20, 600, rows)}), root / name)


def _present(root) -> int:
    """How many planes the files hold (each plane seen tonight reports exactly K times)."""
    return len(np.unique(pq.read_table(root, columns=["tailnum"]).column(0).to_numpy()))


def test_a_plans_night_is_charged_once_per_person_whatever_its_files(tmp_path):
    root, led = tmp_path / "flights", str(tmp_path / "ledger.sqlite")
    root.mkdir()
    Ledger(led).declare("flights", str(root), limit=10.0, privacy_unit="tailnum")
    for i in range(3):
        _day(root, f"day-{i}.parquet", i)
    (tmp_path / "plan.toml").write_text(PLAN)
    plan = ldp_dask.Plan.from_toml(tmp_path / "plan.toml")
    run = dict(incremental=True, privacy_unit="tailnum", max_contributions=K, seed=7, ledger=led, client="local")
    one = ldp_dask.release_plan(plan, str(root), 1.0, out=tmp_path / "n1", **run)
    assert one.receipt.epsilon == pytest.approx(1.0) and one.receipt.total == pytest.approx(1.0)
    assert sum(s.epsilon for s in one.statistics) == pytest.approx(1.0) and one.design == "split-epsilon"
    planes = _present(root)
    for s in one.statistics:
        (night,) = s.summary.partitions
        assert night.paths == ("day-0.parquet", "day-1.parquet", "day-2.parquet"), s.label
        assert s.summary.n == K * planes and s.summary.privacy_unit == "tailnum", s.label
        assert s.summary.metadata["files_read"] == 3 and s.summary.central["partitions"] == 1, s.label
    _day(root, "day-3.parquet", 3)
    two = ldp_dask.release_plan(plan, str(root), 1.0, out=tmp_path / "n2", since=tmp_path / "n1", **run)
    assert two.receipt.epsilon == pytest.approx(1.0) and two.receipt.total == pytest.approx(2.0)
    for a, b in zip(one.statistics, two.statistics):
        assert [p.paths for p in b.summary.partitions] == [a.summary.partitions[0].paths, ("day-3.parquet",)]
        kept, first = b.summary.partitions[0], a.summary.partitions[0]  # the first night's sums, not read again
        assert kept.tag == first.tag and all(np.array_equal(kept.sums[k], first.sums[k]) for k in first.sums)
        assert b.summary.central["partitions"] == 2 and b.summary.central["units"] is not None
        assert b.summary.metadata["partitions_reused"] == 1 and b.summary.metadata["files_read"] == 1
    again = ldp_dask.release_plan(plan, str(root), 1.0, out=tmp_path / "n2b", since=tmp_path / "n1", **run)
    assert again.receipt.reused and again.receipt.epsilon == 0 and again.receipt.total == pytest.approx(2.0)
    assert all(a.summary.same_release(b.summary) for a, b in zip(two.statistics, again.statistics))
    back = ldp_dask.read_summary(tmp_path / "n2" / "distance.mean.summary.parquet", allow_unverified=True)
    assert back.same_release(two.statistics[1].summary)
    # the series' split is its first night's: another ε starts another series
    with pytest.raises(ldp_dask.LdpDaskError, match="starts a new series"):
        ldp_dask.release_plan(plan, str(root), 0.5, since=tmp_path / "n2", **run)


def test_a_plans_nights_from_the_command_line(tmp_path, capsys):
    """`ldp-dask release PLAN SOURCE --incremental --privacy-unit tailnum --epsilon 1`, then `--since` the first
    night: `plan check` states a night's cost before anything is spent; the first night is charged ε 1 per plane; a
    night with no new file is free and says so."""
    root, led = tmp_path / "flights", str(tmp_path / "ledger.sqlite")
    root.mkdir()
    for i in range(2):
        _day(root, f"day-{i}.parquet", 10 + i)
    (tmp_path / "plan.toml").write_text(PLAN)
    unit = ["--privacy-unit", "tailnum", "--max-contributions", str(K), "--seed", "3", "--ledger", led, "--local"]
    assert main(["plan", "check", str(tmp_path / "plan.toml"), str(root), "--epsilon", "1", *unit[:4]]) == 0
    assert "a night costs ε 1 per tailnum once, whatever the number of its new files" in capsys.readouterr().out
    assert main(["release", str(tmp_path / "plan.toml"), str(root), "--epsilon", "1", "--incremental",
                 "--out", str(tmp_path / "n1"), "--json", *unit]) == 0
    said = capsys.readouterr()
    first, first_err = json.loads(said.out), said.err
    assert first["charged"] == pytest.approx(1.0)
    assert all(s["n"] == K * _present(root) for s in first["statistics"])
    assert main(["release", str(tmp_path / "plan.toml"), str(root), "--epsilon", "1", "--since",
                 str(tmp_path / "n1"), "--out", str(tmp_path / "n2"), *unit]) == 0
    said = capsys.readouterr()
    assert "tonight's files released anew as one night over their persons, ε 1 per tailnum" in first_err, first_err
    assert "no file new tonight: no ε spent" in said.err and "now 1 " in said.err, said.err
    assert "ε 1 per tailnum a night; tonight's files bounded together" in said.out, said.out
