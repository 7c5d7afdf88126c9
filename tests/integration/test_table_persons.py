"""Persons in a living table: a longitudinal release with a privacy unit over a Delta or Iceberg table charges a
night after an UPDATE to the persons it changed, not to the copied rows of the files it rewrote.

A memoized report is a keyed function of (series, person, state), never of the file a row sits in, so a rewrite
that copies a person's row reproduces the person's report: the ledger, which counts distinct reports per person
from their keyed digests, sees nothing new for them. Measured here on tables written and changed by deltalake and
pyiceberg themselves; the realised loss of one updated person against one untouched one is audited on the
memoized channels in tests/statistical/test_longitudinal_audit.py."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pytest

import ldp_dask
from ldp_dask.channels import MemoHistogram

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.slow  # seconds of real tables and nights: in make test, not test-fast

PERSONS, CELLS = 900, 10
MEMO = MemoHistogram(1.0, CELLS, (0.0, 100.0))  # uncapped: ε per distinct report, charged person by person


def _persons(seed: int) -> pa.Table:
    x = np.floor(np.random.default_rng(seed).uniform(0, CELLS, PERSONS)) * 10 + 5.0  # cell centres
    return pa.table({"id": np.arange(PERSONS), "x": x})


def _changed(spend: dict, eps: float) -> float:
    """Persons at 2ε_memo in a series whose persons hold one or two reports: (mean − ε)·persons/ε."""
    return (spend["mean"] - eps) * spend["persons"] / eps


def test_an_update_of_100_rows_of_a_900_row_file_charges_those_100_persons(tmp_path):
    path, led = tmp_path / "t", str(tmp_path / "ledger.sqlite")
    deltalake.write_deltalake(str(path), _persons(0))  # one file of 900 rows

    def night(day: int, ledger: str = led):
        return ldp_dask.privatize(f"delta://{path}", "x", MEMO, privacy_unit="id", seed=5, client="local",
                                  ledger=ledger, night=f"2026-01-{day:02d}")

    eps = MEMO.epsilon_spent()
    first = night(1)
    assert first.receipt.epsilon == pytest.approx(eps) and first.receipt.spend["max"] == pytest.approx(eps)
    metrics = deltalake.DeltaTable(str(path)).update({"x": "(x + 30) % 100"}, predicate="id < 100")
    assert (metrics["num_updated_rows"], metrics["num_copied_rows"]) == (100, 800)  # the file rewritten whole
    second = night(2)
    spend = second.receipt.spend
    assert second.receipt.epsilon == pytest.approx(eps)  # the largest spend grew by one report
    assert spend["persons"] == PERSONS and spend["p50"] == pytest.approx(eps) and spend["max"] == pytest.approx(2 * eps)
    assert _changed(spend, eps) == pytest.approx(100, abs=1e-6)  # the 800 copied rows' persons paid nothing again
    # what changed in the released supports is the 100 persons' reports: the rest repeat, bit for bit
    moved = np.abs(second.sums["sum"] - first.sums["sum"]).sum()
    assert 0 < moved <= 2 * 100 * CELLS

    deltalake.DeltaTable(str(path)).optimize.compact()  # no data change
    third = night(3)
    assert third.receipt.epsilon == 0.0 and np.array_equal(third.sums["sum"], second.sums["sum"])
    assert _changed(third.receipt.spend, eps) == pytest.approx(100, abs=1e-6)

    # the same 900 rows laid out otherwise (three files, shuffled, a new table at the same place): the same release
    rows = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    shutil.rmtree(path)
    order = np.random.default_rng(1).permutation(PERSONS)
    for part in np.array_split(order, 3):
        deltalake.write_deltalake(str(path), rows.take(part), mode="append")
    again = night(3, ledger=str(tmp_path / "other.sqlite"))
    assert np.array_equal(again.sums["sum"], third.sums["sum"])


def test_a_capped_series_charges_updates_and_deletes_nothing(tmp_path):
    """The default longitudinal channel caps the series: its first night charges ε, and a night after an UPDATE,
    then after a DELETE with an append, nothing — the charge is a function of the number of nights alone."""
    path, led = tmp_path / "t", str(tmp_path / "ledger.sqlite")
    deltalake.write_deltalake(str(path), _persons(2))
    hist = ldp_dask.LaplaceHistogram(1.0, CELLS, (0.0, 100.0))
    charged = []
    for day in range(1, 4):
        if day == 2:
            deltalake.DeltaTable(str(path)).update({"x": "(x + 30) % 100"}, predicate="id < 100")
        if day == 3:
            deltalake.DeltaTable(str(path)).delete("id >= 850")
            deltalake.write_deltalake(str(path), pa.table({"id": np.arange(900, 950), "x": np.full(50, 25.0)}),
                                      mode="append")
        s = ldp_dask.privatize(f"delta://{path}", "x", hist, longitudinal=True, privacy_unit="id", seed=5,
                               client="local", ledger=led, night=f"2026-01-{day:02d}")
        charged.append(s.receipt.epsilon)
    assert charged == pytest.approx([1.0, 0.0, 0.0], abs=1e-6) and s.n == PERSONS


def test_an_iceberg_overwrite_charges_the_persons_it_changed(tmp_path, monkeypatch):
    pytest.importorskip("pyiceberg")
    from pyiceberg.expressions import LessThan

    monkeypatch.setenv("LDP_DASK_LEDGER", str(tmp_path / "ledger.sqlite"))
    catalog = ldp_dask.iceberg_catalog()
    catalog.create_namespace_if_not_exists("crm")
    rows = _persons(3)
    table = catalog.create_table("crm.balances", schema=rows.schema)
    table.append(rows)
    eps = MEMO.epsilon_spent()

    def night(day: int):
        return ldp_dask.privatize("iceberg://local/crm.balances", "x", MEMO, privacy_unit="id", seed=5,
                                  client="local", night=f"2026-01-{day:02d}")

    first = night(1)
    changed = rows.slice(0, 100).set_column(1, "x", pa.array((rows["x"].to_numpy()[:100] + 30) % 100))
    table.overwrite(changed, overwrite_filter=LessThan("id", 100))  # copy-on-write: 100 deleted, 100 appended
    second = night(2)
    assert first.receipt.epsilon == pytest.approx(eps) and second.receipt.epsilon == pytest.approx(eps)
    assert second.n == PERSONS and _changed(second.receipt.spend, eps) == pytest.approx(100, abs=1e-6)
