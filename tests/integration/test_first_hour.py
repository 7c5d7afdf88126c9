"""What a user meets in the first hour, from the command line: the null policy, the warnings that say a parameter
was badly chosen (computed from released values only), tidy Parquet outputs, and category codes kept as typed.

Statistical claims here are deterministic given the seeds: each data set is fixed, and the thresholds sit far from
the values the released estimates take (a domain 20× too wide puts ≈ 99% of the mass in one bin against the 50%
threshold; a 20-bin histogram of a spread column puts ≤ 15% in any bin).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ldp_dask.cli import main


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(11)
    d = tmp_path / "data"
    d.mkdir()
    n = 40_000
    x = rng.gamma(2.0, 500.0, n).clip(0, 5000)
    codes = np.array(["01", "02", "10"])[rng.choice(3, n, p=[0.5, 0.3, 0.2])]
    pq.write_table(pa.table({"distance": x, "delay": pa.array(rng.normal(10, 5, n), mask=rng.random(n) < 0.05),
                             "code": codes, "icode": rng.choice([1, 2, 10], n)}), d / "a.parquet")
    return d


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


COMMON = ("--local", "--seed", "1", "--no-ledger")


def test_nulls_are_refused_before_work_with_the_policy_to_choose(capsys, tmp_path, data):
    code, _, err = _run(capsys, "privatize", data, "--column", "delay", "--channel", "mean", "--domain", -50, 100,
                        "--epsilon", 1, "--out", tmp_path / "m.parquet", *COMMON)
    assert code == 2 and "contains null values" in err and "--nulls value V" in err and "Parquet statistics" in err
    assert not (tmp_path / "m.parquet").exists()
    for bad, message in ((["drop"], "exact count"), (["value", "x"], "must be a number"), (["value"], "'error', 'value V' or V")):
        code, _, err = _run(capsys, "privatize", data, "--column", "delay", "--channel", "mean", "--domain", -50, 100,
                            "--epsilon", 1, "--out", tmp_path / "m.parquet", "--nulls", *bad, *COMMON)
        assert code == 2 and message in err, err


def test_nulls_replaced_by_a_public_value(capsys, tmp_path, data):
    """Nulls → 0, the mean's interval covers the mean of the filled column (its error is n^-1/2-small: the
    interval is ±1.96 se wide, se ≈ 0.8 at n = 40,000, ε = 1 on [−50, 100]; the fixed seed makes this exact)."""
    out = tmp_path / "m.parquet"
    code, _, err = _run(capsys, "privatize", data, "--column", "delay", "--channel", "mean", "--domain", -50, 100,
                        "--epsilon", 1, "--out", out, "--nulls", "value", 0, *COMMON)
    assert code == 0, err
    code, text, _ = _run(capsys, "estimate", out, "--json")
    est = json.loads(text)
    col = pq.read_table(data / "a.parquet", columns=["delay"]).column(0).to_numpy(zero_copy_only=False)
    filled = np.nan_to_num(np.asarray(col, dtype=float), nan=0.0).mean()
    assert est["n"] == 40_000 and est["ci"][0] <= filled <= est["ci"][1]
    import ldp_dask

    assert ldp_dask.read_summary(out).metadata["nulls"] == {"policy": "value", "value": 0.0}


def test_a_badly_chosen_domain_is_said(capsys, tmp_path, data):
    wide = tmp_path / "wide.parquet"
    assert _run(capsys, "privatize", data, "--column", "distance", "--channel", "histogram", "--bins", 20,
                "--domain", 0, 100_000, "--epsilon", 1, "--out", wide, *COMMON)[0] == 0
    code, text, err = _run(capsys, "estimate", wide)
    assert code == 0 and "ldp-dask: warning:" in err and "of the estimated mass lies in [0, 5000]" in err
    assert "warning" in text  # in the printed result too, and in the JSON
    code, text, err = _run(capsys, "estimate", wide, "--json")
    assert json.loads(text)["warnings"] and "warning" in err
    good = tmp_path / "good.parquet"
    assert _run(capsys, "privatize", data, "--column", "distance", "--channel", "histogram", "--bins", 20,
                "--domain", 0, 5000, "--epsilon", 1, "--out", good, *COMMON)[0] == 0
    code, text, err = _run(capsys, "estimate", good, "--json")
    assert code == 0 and json.loads(text)["warnings"] == [] and "warning" not in err  # the check can stay quiet


def test_noise_dominated_mean_and_extreme_parameters_are_said(capsys, tmp_path, data):
    out = tmp_path / "m.parquet"
    assert _run(capsys, "privatize", data, "--column", "distance", "--channel", "mean", "--domain", 0, 1_000_000,
                "--epsilon", 1, "--out", out, *COMMON)[0] == 0
    code, _, err = _run(capsys, "estimate", out)
    assert code == 0 and "privacy noise makes" in err
    code, _, err = _run(capsys, "privatize", data, "--column", "distance", "--channel", "histogram", "--bins",
                        100_000, "--domain", 0, 5000, "--epsilon", 20, "--out", tmp_path / "h.parquet", *COMMON)
    assert code == 0 and "100,000 bins for 40,000 rows" in err and "little protection" in err
    code, _, err = _run(capsys, "privatize", data, "--column", "distance", "--channel", "mean", "--domain", 0, 5000,
                        "--epsilon", 51, "--out", tmp_path / "x.parquet", *COMMON)
    assert code == 2 and "at most 50" in err and not (tmp_path / "x.parquet").exists()


def test_tidy_parquet_estimates_read_without_ldp_dask(capsys, tmp_path, data):
    s = tmp_path / "codes.parquet"
    code, _, err = _run(capsys, "privatize", data, "--column", "code", "--channel", "rr", "--categories", "01", "02",
                        "10", "--epsilon", 2, "--out", s, *COMMON)
    assert code == 0, err  # string codes that look like integers stay strings on a string column
    assert _run(capsys, "estimate", s, "--out", tmp_path / "f.parquet")[0] == 0
    t = pq.read_table(tmp_path / "f.parquet").to_pandas()
    assert list(t["category"]) == ["01", "02", "10"] and {"frequency", "se", "ci_low", "ci_high"} <= set(t.columns)
    assert (t["ci_low"] <= t["frequency"]).all() and (t["frequency"] <= t["ci_high"]).all()
    code, _, err = _run(capsys, "privatize", data, "--column", "icode", "--channel", "rr", "--categories", "1", "2",
                        "10", "--epsilon", 2, "--out", tmp_path / "i.parquet", *COMMON)
    assert code == 0, err  # integers on an integer column
    h = tmp_path / "h.parquet"
    assert _run(capsys, "privatize", data, "--column", "distance", "--channel", "histogram", "--bins", 10,
                "--domain", 0, 5000, "--epsilon", 1, "--out", h, *COMMON)[0] == 0
    assert _run(capsys, "estimate", h, "--confidence", 0.9, "--out", tmp_path / "d.parquet")[0] == 0
    import duckdb

    rows = duckdb.sql(f"select bin_low, bin_high, density, ci_low, ci_high, confidence from "
                      f"'{tmp_path / 'd.parquet'}' order by bin_low").fetchall()
    assert len(rows) == 10 and rows[0][0] == 0 and rows[-1][1] == 5000 and {r[5] for r in rows} == {0.9}
    assert all(lo <= d <= hi for _, _, d, lo, hi, _ in rows)
    assert sorted(os.listdir(tmp_path)) == sorted(["data", "codes.parquet", "f.parquet", "i.parquet", "h.parquet",
                                                   "d.parquet"])
