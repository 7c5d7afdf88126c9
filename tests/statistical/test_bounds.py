"""Central-DP bounds (``ldp-dask bounds``): the exact magnitude counts, the released power of two, the charge.

False-failure rate: the release test runs 10 seeds at n = 100,000, ε = 0.1 on data whose 95% point of |x| lies
in (512, 1024] with c_9 = 51% and c_10 = 100% of n. AboveThreshold misses the first count above the threshold by
more than α = (8/ε)·log(2K/β) with probability ≤ β (Dwork & Roth 2014, Thm 3.24; K = 1,124 counts); here the gap
is ≥ 5,000 rows against α = 1,354 at β = 10⁻⁴, so all 10 seeds fail together with probability ≤ 10⁻³.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask.central.bounds import HIGHEST_EXPONENT, LOWEST_EXPONENT, magnitude_counts
from ldp_dask.cli import main


def _brute(x):
    out = np.zeros(HIGHEST_EXPONENT - LOWEST_EXPONENT + 2, dtype=np.int64)
    for v in np.abs(np.asarray(x, dtype=float)):
        k = next((k for k in range(LOWEST_EXPONENT, HIGHEST_EXPONENT + 1) if v <= math.ldexp(1.0, k)), None)
        out[(HIGHEST_EXPONENT + 1 if k is None else k) - LOWEST_EXPONENT] += 1
    return out


def test_magnitude_counts_match_a_direct_count():
    rng = np.random.default_rng(3)
    x = np.concatenate([[0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -4.0, 4.000001, 1e-40, 2.0 ** -100, 2.0 ** -101,
                         1.7e308, -2.0 ** 1023, np.nextafter(2.0 ** 1023, np.inf)],
                        rng.normal(0, 1000, 300), rng.uniform(-1e-3, 1e-3, 50)])
    assert np.array_equal(magnitude_counts(x), _brute(x))
    with pytest.raises(ldp_dask.InputDataError, match="NaN or infinite"):
        magnitude_counts(np.array([1.0, np.nan]))


def test_bounds_find_the_power_of_two_and_are_charged(tmp_path):
    rng = np.random.default_rng(5)
    d = tmp_path / "data"
    d.mkdir()
    pq.write_table(pa.table({"x": rng.uniform(0, 1000, 100_000)}), d / "a.parquet")
    ledger = tmp_path / "l.sqlite"
    for seed in range(10):
        r = ldp_dask.central.bounds(str(d), "x", epsilon=0.1, seed=seed, client="local", ledger=ledger)
        assert r.bounds == (-1024.0, 1024.0) and r.exponent == 10, (seed, r)
    led = ldp_dask.Ledger(ledger)
    (row,) = led.summary()
    assert row["by_scope"] == {"central": pytest.approx(1.0)}  # 10 releases of ε = 0.1, all central
    with pytest.raises(ldp_dask.LdpDaskError, match="privacy unit"):
        ldp_dask.central.bounds(str(d), "x", epsilon=0.1, seed=1, privacy_unit="x")
    with pytest.raises(ldp_dask.LdpDaskError, match="'fraction' parameter"):
        ldp_dask.central.bounds(str(d), "x", epsilon=0.1, fraction=1.0, seed=1)


def test_bounds_per_person_weigh_each_person_equally(tmp_path, capsys):
    # 4,000 persons with 1-5 rows in [0, 100), and one with 60,000 rows at 10^6. Per row, 94% of the rows are
    # 10^6 (bounds 2^20); per person (k = 2, every person 2 records), 4,000 of 4,001 persons lie below 128: the
    # bounds are 2^7 with the mechanism at ε/k = 0.5 on n = 8,002 records (its error, (8/(εn))·log(2K/β) ≈ 0.02
    # of the share at β = 1e-6, cannot move the answer: 2^6 = 64 holds 64% of the records, 2^7 all but 0.02%)
    rng = np.random.default_rng(12)
    small = pd.DataFrame({"user": np.repeat(np.arange(4_000), rng.integers(1, 6, 4_000))})
    small["x"] = rng.uniform(0, 100, len(small))
    big = pd.DataFrame({"user": np.full(60_000, 10**6), "x": 1e6})
    df = pd.concat([small, big], ignore_index=True)
    df.to_parquet(tmp_path / "p.parquet")
    ledger = tmp_path / "l.sqlite"
    per_row = ldp_dask.central.bounds(df, "x", epsilon=1.0, seed=3, ledger=False)
    assert per_row.exponent == 20
    for seed in range(5):
        r = ldp_dask.central.bounds(df, "x", epsilon=1.0, seed=seed, privacy_unit="user", max_contributions=2,
                                    ledger=False)
        assert r.exponent == 7 and r.n == 2 * 4_001, (seed, r)
    facts = dict(r.describe().facts)
    assert facts["privacy unit"] == "user" and facts["population estimated"] == "each user weighted equally"
    assert "2 records each" in facts["neighbours"]
    # from the command line, on Parquet, charged ε 1 per user in the central scope
    assert main(["bounds", str(tmp_path / "p.parquet"), "--column", "x", "--epsilon", "1", "--seed", "2", "--local",
                 "--privacy-unit", "user", "--max-contributions", "2", "--json", "--ledger", str(ledger)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["bounds"] == [-128.0, 128.0] and "ε 1 per user spent" in out.err
    (row,) = ldp_dask.Ledger(ledger).summary()
    assert row["privacy_unit"] == "user" and row["by_scope"] == {"central": pytest.approx(1.0)}


def test_bounds_from_the_command_line(tmp_path, capsys):
    d = tmp_path / "data"
    d.mkdir()
    pq.write_table(pa.table({"x": np.random.default_rng(6).normal(0, 30, 50_000)}), d / "a.parquet")
    ledger = tmp_path / "l.sqlite"
    assert main(["bounds", str(d), "--column", "x", "--epsilon", "0.5", "--seed", "2", "--local", "--json",
                 "--ledger", str(ledger), "--out", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr()
    r = json.loads(out.out)
    assert r["bounds"] == [-64.0, 64.0] and r["fraction"] == 0.95  # 95% of |N(0, 30)| ≤ 58.8 < 64; 32: 71%
    assert "ε 0.5 per row spent" in out.err
    assert json.loads((tmp_path / "b.json").read_text())["bounds"] == [-64.0, 64.0]
