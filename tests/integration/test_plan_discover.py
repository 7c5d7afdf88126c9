"""A plan whose groups are found privately (``groups = "discover"``, docs/how-to/plans.md): the keys found by a
heavy-hitters release at a share of ε, the grouped statistics released over them at the rest, from the command
line (two ledger entries adding up to ε), with a privacy unit (ε per person in all), and refused before anything
is spent when the budget cannot hold the whole plan or a series would need the keys to stay put."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask import LdpDaskError
from ldp_dask.cli import main
from ldp_dask.ledger import BudgetExceeded, open_ledger

PLAN = """
[discover]
share = 0.5
max_bytes = 8

[[statistic]]
column = "x"
target = "mean"
domain = [0, 100]
group_by = "shop"
groups = "discover"
top = 6

[[statistic]]
column = "x"
target = "distribution"
domain = [0, 100]
bins = 10
name = "x.all"
"""
#: the frequent shops (shares 0.3 .. 0.1) and their means; 0.25 of the rows fall on 5,000 rare shops of mean 10
SHOPS = {"north": (0.3, 20.0), "south": (0.2, 40.0), "east": (0.15, 60.0), "west": (0.1, 80.0)}
RARE = 5_000


def _table(path, rows, seed, persons=None):
    rng = np.random.default_rng(seed)
    names = np.array([*SHOPS, *(f"r{i}" for i in range(RARE))])
    shares = np.r_[[p for p, _ in SHOPS.values()], np.full(RARE, 0.25 / RARE)]
    means = np.r_[[m for _, m in SHOPS.values()], np.full(RARE, 10.0)]
    g = rng.choice(len(names), rows, p=shares)
    t = {"shop": names[g].tolist(), "x": rng.uniform(-10, 10, rows) + means[g]}
    if persons is not None:
        t["user"] = persons
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(t), path)
    return pq.read_table(path).to_pandas()


def test_a_plan_finds_its_group_keys_and_releases_over_them(tmp_path, capsys):
    """From the command line with a ledger: ``plan check`` shows the discovery's share; ``release`` writes the
    keys' report in ``discover/`` and the plan's in ``out/``, charges ε/2 + ε/2 as two entries, finds the four
    frequent shops (their stated miss chance is below 10⁻⁴ each), and each found shop's 99.99% interval holds its
    mean over this table (false failure ≤ 5 × 10⁻⁴ over the five groups)."""
    data = tmp_path / "sales" / "day-1.parquet"
    rows = _table(data, 200_000, seed=4)
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    assert main(["plan", "check", str(plan), str(data.parent), "--epsilon", "4"]) == 0
    said = capsys.readouterr().out
    assert "keys of shop found first, at ε 2 per row" in said and "(7 groups)" in said  # top 6 and "other"
    led = str(tmp_path / "ledger.sqlite")
    assert main(["release", str(plan), str(data.parent), "--epsilon", "4", "--out", str(tmp_path / "out"),
                 "--ledger", led, "--seed", "8", "--local", "--confidence", "0.9999", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["charged"] == pytest.approx(2.0) and res["discovery"]["charged"] == pytest.approx(2.0)
    entries = open_ledger(led).entries()
    assert [e["channel"] for e in entries] == ["plan", "plan"]
    assert sum(e["epsilon"] for e in entries) == pytest.approx(4.0)
    assert open_ledger(led).spent(entries[0]["root"]) == pytest.approx(4.0)
    found = res["found"]["shop"]
    keys = json.loads((tmp_path / "out" / "discover" / "estimates.json").read_text())["statistics"][0]
    summary = ldp_dask.read_summary(tmp_path / "out" / "discover" / "shop.keys.summary.parquet",
                                    allow_unverified=True)
    listed = ldp_dask.estimate(summary, top=6, level=0.9999)
    assert keys["result"]["labels"] == listed.labels  # the report's list is the summary's, post-processed
    for shop, (share, _) in SHOPS.items():
        assert listed.miss_chance(share) < 1e-4, (shop, listed.miss_chance(share))
        assert shop in found, (shop, found)
    assert len(found) <= 6 and not any(k.endswith("…") for k in found)
    assert (tmp_path / "out" / "index.html").read_text().count("found privately") >= 1
    means = next(s for s in res["statistics"] if s["name"] == "x.mean")["result"]
    assert means["groups"][:-1] == found
    truth = rows.groupby(rows["shop"].where(rows["shop"].isin(found), "other"))["x"].mean()
    for label, low, high in zip(means["groups"], means["ci_low"], means["ci_high"]):
        mu = truth["other" if label == means["groups"][-1] else label]
        assert low <= mu <= high, (label, low, mu, high)


@pytest.mark.slow  # two releases per person-bounded pass: seconds, in make test
def test_discovered_groups_with_a_privacy_unit_cost_epsilon_per_person(tmp_path):
    """With a privacy unit both releases bound each person's rows; the ledger's spend per person is ε in all."""
    persons = np.repeat(np.arange(40_000), 3)
    data = tmp_path / "sales" / "day-1.parquet"
    _table(data, len(persons), seed=5, persons=persons)
    plan = ldp_dask.Plan.from_dict({"discover": {"share": 0.5, "max_bytes": 8},
                                    "statistic": [{"column": "x", "target": "mean", "domain": [0, 100],
                                                   "group_by": "shop", "groups": "discover", "top": 6}]})
    led = str(tmp_path / "ledger.sqlite")
    r = ldp_dask.release_plan(plan, str(data.parent), 4.0, privacy_unit="user", max_contributions=1, ledger=led,
                              seed=2, client="local")
    assert r.unit == "user" and r.charged == pytest.approx(2.0) and r.discovery.charged == pytest.approx(2.0)
    assert {"north", "south", "east"} <= set(r.found["shop"])  # shares ≥ 0.15 of 40,000 persons' one report
    root = open_ledger(led).entries()[0]["root"]
    assert open_ledger(led).spent(root) == pytest.approx(4.0)


def test_a_discovering_plan_is_refused_before_anything_is_spent(tmp_path):
    """A budget that cannot hold the whole plan, a nightly series, a public group and a stray [discover] table are
    refused before the discovery reads a row: no ledger entry, no file."""
    data = tmp_path / "sales" / "day-1.parquet"
    _table(data, 5_000, seed=6)
    plan = ldp_dask.Plan.from_toml(_write(tmp_path / "plan.toml", PLAN))
    led = str(tmp_path / "ledger.sqlite")
    assert main(["budget", "set", "sales", "--source", str(data.parent), "--limit", "3", "--ledger", led]) == 0
    with pytest.raises(BudgetExceeded, match="would exceed the budget of dataset 'sales'"):
        ldp_dask.release_plan(plan, str(data.parent), 4.0, out=tmp_path / "out", ledger=led, client="local")
    assert open_ledger(led).entries() == [] and not (tmp_path / "out").exists()
    with pytest.raises(LdpDaskError, match="released whole each time"):
        ldp_dask.release_plan(plan, str(data.parent), 1.0, incremental=True, ledger=led, client="local")
    stat = {"column": "x", "target": "mean", "domain": [0, 100], "group_by": "shop", "groups": "discover"}
    with pytest.raises(LdpDaskError, match="groups found privately are private groups"):
        ldp_dask.Plan.from_dict({"statistic": [{**stat, "group_kind": "public"}]})
    with pytest.raises(LdpDaskError, match="a \\[discover\\] table but no statistic"):
        ldp_dask.Plan.from_dict({"discover": {}, "statistic": [{"column": "x", "target": "mean",
                                                                "domain": [0, 100]}]})
    with pytest.raises(LdpDaskError, match="'share' of a plan's \\[discover\\] table"):
        ldp_dask.Plan.from_dict({"discover": {"share": 1.0}, "statistic": [stat]})
    with pytest.raises(LdpDaskError, match="'top' of statistic"):
        ldp_dask.Plan.from_dict({"statistic": [{**stat, "top": 0}]})
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "index.html").write_text("an earlier report")
    with pytest.raises(LdpDaskError, match="already exists"):
        ldp_dask.release_plan(plan, str(data.parent), 3.0, out=tmp_path / "out", ledger=led, client="local")
    assert open_ledger(led).entries() == [] and not (tmp_path / "out" / "discover").exists()


def _write(path, text):
    path.write_text(text)
    return path


def test_keys_found_in_an_integer_column_in_memory_are_integers():
    """Found keys are text (a value's UTF-8 bytes); on an integer column held in memory they are typed as the
    column, or every row would fall in "other"."""
    import pandas as pd

    rng = np.random.default_rng(1)
    g = rng.choice([7, 42, 1000], 30_000, p=[0.5, 0.3, 0.2])
    df = pd.DataFrame({"g": g, "x": rng.uniform(0, 10, 30_000)})
    plan = ldp_dask.Plan.from_dict({"discover": {"share": 0.5, "max_bytes": 4},
                                    "statistic": [{"column": "x", "target": "mean", "domain": [0, 10],
                                                   "group_by": "g", "groups": "discover", "top": 3}]})
    r = ldp_dask.release_plan(plan, df, 4.0, seed=1, ledger=False, client="local")
    assert sorted(r.found["g"]) == [7, 42, 1000] and all(isinstance(k, int) for k in r.found["g"])
    rows = r["x.mean"].result.rows  # estimated rows per group: "other" holds nobody
    assert rows[-1] < 0.1 * len(df) and rows[:-1].sum() > 0.8 * len(df)
