"""The privacy budget ledger: enforcement before work, free re-runs, separate scopes, atomicity
under concurrent processes, and no entry (nor partial file) when a release fails."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sqlite3

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ldp_dask.cli import main
from ldp_dask.ledger import BudgetExceeded, Ledger


@pytest.fixture()
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    pq.write_table(pa.table({"x": np.random.default_rng(0).random(20_000)}), d / "a.parquet")
    return d


def _privatize(data, out, ledger, *extra):
    return main(["privatize", str(data), "--column", "x", "--channel", "histogram", "--bins", "8", "--domain", "0",
                 "1", "--epsilon", "1", "--out", str(out), "--local", "--ledger", str(ledger), *extra])


def test_budget_is_enforced_before_any_work(tmp_path, data, capsys):
    led = tmp_path / "ledger.sqlite"
    assert main(["budget", "set", str(data), "--column", "x", "--scope", "local", "--limit", "1.5",
                 "--ledger", str(led)]) == 0
    assert _privatize(data, tmp_path / "a.parquet", led, "--seed", "1") == 0
    capsys.readouterr()
    assert _privatize(data, tmp_path / "b.parquet", led, "--seed", "2") == 2  # a new key spends again: 2 > 1.5
    err = capsys.readouterr().err
    assert "spent 1 of its local budget 1.5 (remaining 0.5)" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b.parquet").exists()
    entries = Ledger(led).entries()
    assert len(entries) == 1 and entries[0]["status"] == "committed" and entries[0]["epsilon"] == 1.0


def test_rerun_with_the_same_key_is_free_and_identical(tmp_path, data, capsys):
    led = tmp_path / "ledger.sqlite"
    (tmp_path / "key").write_text("a-file-secret-0123456789abcdef")
    for name in ("a", "b"):
        assert _privatize(data, tmp_path / f"{name}.parquet", led, "--secret-file", str(tmp_path / "key")) == 0
    err = capsys.readouterr().err
    assert "no ε spent" in err
    assert (tmp_path / "a.parquet").read_bytes() != b"" and Ledger(led).spent(
        Ledger(led).entries()[0]["fingerprint"], "x", "local") == 1.0
    import ldp_dask

    a, b = (ldp_dask.read_summary(tmp_path / f"{n}.parquet") for n in "ab")
    assert a.same_release(b)
    # a random secret is not reproducible: each run spends
    assert _privatize(data, tmp_path / "c.parquet", led) == 0
    assert _privatize(data, tmp_path / "d.parquet", led) == 0
    assert Ledger(led).spent(Ledger(led).entries()[0]["fingerprint"], "x", "local") == 3.0


def test_local_and_central_are_accounted_separately(tmp_path, data, capsys):
    led = tmp_path / "ledger.sqlite"
    assert _privatize(data, tmp_path / "a.parquet", led, "--seed", "1") == 0
    assert main(["quantiles", str(data), "--column", "x", "--bounds", "0", "1", "--epsilon", "0.5", "--local",
                 "--seed", "1", "--ledger", str(led)]) == 0
    capsys.readouterr()
    assert main(["budget", "--ledger", str(led), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["local_spent"] == 1.0 and row["central_spent"] == 0.5 and row["column"] == "x"
    assert main(["budget", "--ledger", str(led), "--entries"]) == 0
    text = capsys.readouterr().out
    assert "central-quantiles" in text and "histogram" in text and "secret" not in text.lower()


def test_failed_release_leaves_no_entry_and_no_file(tmp_path, capsys):
    led = tmp_path / "ledger.sqlite"
    d = tmp_path / "bad"
    d.mkdir()
    pq.write_table(pa.table({"x": np.array([0.5, np.nan])}), d / "a.parquet")
    assert _privatize(d, tmp_path / "out.parquet", led, "--seed", "1") == 2
    assert "NaN" in capsys.readouterr().err
    assert not (tmp_path / "out.parquet").exists() and Ledger(led).entries() == []


def _race(path, barrier, results):
    led = Ledger(path)
    barrier.wait()
    try:
        led.reserve(fingerprint="fp", column="x", scope="local", channel="histogram", params={"pid": os.getpid()},
                    epsilon=1.0, key_id=str(os.getpid()))
        results.put("ok")
    except BudgetExceeded:
        results.put("refused")


@pytest.mark.slow
def test_concurrent_releases_cannot_overspend(tmp_path):
    path = tmp_path / "ledger.sqlite"
    Ledger(path).set_budget("fp", "x", "local", 1.5)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(path), barrier, results)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    outcomes = sorted(results.get(timeout=10) for _ in procs)
    assert outcomes == ["ok", "refused", "refused", "refused"]


def test_reservations_of_dead_processes_are_dropped(tmp_path):
    path = tmp_path / "ledger.sqlite"
    led = Ledger(path)
    led.set_budget("fp", "x", "local", 1.0)
    r = led.reserve(fingerprint="fp", column="x", scope="local", channel="c", params={}, epsilon=1.0, key_id="k")
    with sqlite3.connect(path) as con:  # pretend the reserving process crashed: a pid that cannot exist
        con.execute("UPDATE releases SET pid=? WHERE id=?", (2**22 + 12345, r.id))
    r2 = led.reserve(fingerprint="fp", column="x", scope="local", channel="c", params={}, epsilon=1.0, key_id="k2")
    assert not r2.reused and [e["id"] for e in led.entries()] == [r2.id]
