"""A plan's ``target = "heavy_hitters"`` (docs/how-to/plans.md): checked with a predicted error, released from the
command line beside a mean (the plan's budget split between them), nightly (a second night reads only its new file and its sums
are those of both files), and with a privacy unit (one report per person, one charge)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask import LdpDaskError
from ldp_dask.cli import main
from ldp_dask.ledger import open_ledger

PLAN = """
[[statistic]]
column = "term"
target = "heavy_hitters"
top = 5
max_bytes = 8
alphabet = "abcdefghijklmnopqrstuvwxyz"
name = "terms"

[[statistic]]
column = "x"
target = "mean"
domain = [0, 10]
"""
VOCAB = np.array(["rain", "sunshine", "fog", "snowfall", "hail", "wind", "drizzle", "storm", "mist", "sleet"])
SHARES = np.array([0.3, 0.2, 0.12, 0.08, 0.05] + [0.25 / 5] * 5)


def _day(path, rng, rows=40_000, persons=None):
    t = {"term": VOCAB[rng.choice(len(VOCAB), rows, p=SHARES)].tolist(), "x": rng.uniform(0, 10, rows)}
    if persons is not None:
        t["user"] = persons
    pq.write_table(pa.table(t), path)


@pytest.mark.slow  # two nights and a reference release: seconds, in make test
def test_a_plan_finds_heavy_hitters_beside_a_mean_and_nightly(tmp_path, capsys):
    rng = np.random.default_rng(21)
    data = tmp_path / "events"
    data.mkdir()
    (tmp_path / "plan.toml").write_text(PLAN)
    _day(data / "day-1.parquet", rng)
    assert main(["plan", "check", str(tmp_path / "plan.toml"), str(data), "--epsilon", "4", "--json"]) == 0
    checked = {s["name"]: s for s in json.loads(capsys.readouterr().out)["statistics"]}
    assert checked["terms"]["channel"] == "heavy-hitters" and 0 < checked["terms"]["predicted_se"] < 0.01
    led = str(tmp_path / "ledger.sqlite")
    assert main(["budget", "set", "events", "--source", str(data), "--limit", "10", "--append-only",
                 "--ledger", led]) == 0
    common = ["--epsilon", "4", "--seed", "3", "--ledger", led, "--json", "--local"]
    assert main(["release", str(tmp_path / "plan.toml"), str(data), "--incremental", "--out", str(tmp_path / "n1"),
                 *common]) == 0
    capsys.readouterr()
    found = json.loads((tmp_path / "n1" / "estimates.json").read_text())
    terms = next(s for s in found["statistics"] if s["name"] == "terms")
    assert terms["result"]["method"] == "heavy-hitters"
    assert set(terms["result"]["labels"][:3]) == {"rain", "sunshine", "fog"}  # 0.3, 0.2, 0.12 of 40,000 rows
    _day(data / "day-2.parquet", rng)
    assert main(["release", str(tmp_path / "plan.toml"), str(data), "--since", str(tmp_path / "n1"), "--out",
                 str(tmp_path / "n2"), *common]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["receipt"]["partitions"] == [1, 1] and res["receipt"]["total"] == 4.0
    s = ldp_dask.read_summary(tmp_path / "n2" / "terms.summary.parquet", allow_unverified=True)
    ref = ldp_dask.release_plan(ldp_dask.Plan.from_toml(tmp_path / "plan.toml"), str(data), 4.0, incremental=True,
                                seed=3, ledger=False)
    assert s.n == ref["terms"].summary.n > 30_000 and s.metadata["partitions_reused"] == 1  # either design
    assert np.array_equal(s.sums["sum"], ref["terms"].summary.sums["sum"])
    r = ldp_dask.estimate(s, top=5, alphabet="abcdefghijklmnopqrstuvwxyz")
    assert set(r.labels[:4]) == {"rain", "sunshine", "fog", "snowfall"}


@pytest.mark.slow  # in make test
def test_a_plan_with_a_privacy_unit_finds_heavy_hitters_once_per_person(tmp_path, capsys):
    rng = np.random.default_rng(22)
    data = tmp_path / "events"
    data.mkdir()
    _day(data / "d.parquet", rng, rows=60_000, persons=rng.integers(0, 20_000, 60_000))
    (tmp_path / "plan.toml").write_text(PLAN)
    led = tmp_path / "ledger.sqlite"
    assert main(["release", str(tmp_path / "plan.toml"), str(data), "--epsilon", "4", "--privacy-unit", "user",
                 "--max-contributions", "1", "--seed", "5", "--ledger", str(led), "--out", str(tmp_path / "o"),
                 "--json", "--local"]) == 0
    released = json.loads(capsys.readouterr().out)
    assert released["charged"] == pytest.approx(4.0)
    (entry,) = open_ledger(str(led)).entries()
    assert entry["privacy_unit"] == "user" and entry["epsilon"] == pytest.approx(4.0)
    s = ldp_dask.read_summary(tmp_path / "o" / "terms.summary.parquet", allow_unverified=True)
    assert s.privacy_unit == "user" and s.n == len(np.unique(pq.read_table(data / "d.parquet")["user"]))
    assert ldp_dask.estimate(s, top=3, alphabet="abcdefghijklmnopqrstuvwxyz").labels[0] == "rain"


def test_what_a_heavy_hitter_statistic_cannot_say_is_refused():
    with pytest.raises(LdpDaskError, match="only a 'heavy_hitters' target takes"):
        ldp_dask.Plan.from_dict({"statistic": [{"column": "x", "target": "mean", "domain": [0, 1], "top": 3}]})
    with pytest.raises(LdpDaskError, match="private group_by is offered"):
        ldp_dask.Plan.from_dict({"statistic": [{"column": "t", "target": "heavy_hitters", "group_by": "g",
                                                "groups": ["a"]}]})
