"""Every face charges: Python with no ``ledger=``, the command line and the flows record every release in the same
default ledger ($LDP_DASK_LEDGER, else ~/.ldp_dask/ledger.sqlite); not recording is the explicit ``ledger=False``
(``--no-ledger``), which the receipt and the summary state."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask import LdpDaskError, gof
from ldp_dask.central import bounds, quantiles
from ldp_dask.cli import main
from ldp_dask.ledger import BudgetExceeded, Ledger
from ldp_dask.summary import read_summary

CHANNEL = ldp_dask.LaplaceHistogram(5.0, 8, (0.0, 1.0))


@pytest.fixture()
def default_ledger(tmp_path, monkeypatch) -> str:
    path = str(tmp_path / "default-ledger.sqlite")
    monkeypatch.setenv("LDP_DASK_LEDGER", path)
    return path


@pytest.fixture()
def flights(tmp_path):
    d = tmp_path / "flights"
    d.mkdir()
    rng = np.random.default_rng(3)
    pq.write_table(pa.table({"x": rng.random(4_000), "tail": rng.integers(0, 300, 4_000)}), d / "a.parquet")
    return d


@pytest.mark.slow
def test_python_with_no_ledger_argument_charges_the_default_ledger(flights, default_ledger):
    """The reviewers' case: ε 5 per row on a dataset declared per person with a budget went out unrecorded."""
    assert main(["budget", "set", "flights", "--source", str(flights), "--limit", "1", "--privacy-unit", "tail"]) == 0
    with pytest.raises(LdpDaskError, match="declared with privacy unit 'tail'; this release uses 'row'"):
        ldp_dask.privatize(str(flights), "x", CHANNEL, seed=1)
    assert Ledger(default_ledger).entries() == []  # refused before any work: nothing charged, nothing released

    s = ldp_dask.privatize(str(flights), "x", ldp_dask.LaplaceHistogram(0.5, 8, (0.0, 1.0)), seed=1,
                           privacy_unit="tail")
    assert s.receipt is not None and s.receipt.ledger == default_ledger and s.receipt.epsilon == 0.5
    assert s.metadata["ledger"] == "recorded"
    [entry] = Ledger(default_ledger).entries()
    assert entry["status"] == "committed" and entry["epsilon"] == 0.5 and entry["privacy_unit"] == "tail"
    with pytest.raises(BudgetExceeded, match="flights"):  # 0.5 + 0.6 > 1, with a fresh key
        ldp_dask.privatize(str(flights), "x", ldp_dask.LaplaceHistogram(0.6, 8, (0.0, 1.0)), seed=2,
                           privacy_unit="tail")


def test_every_releasing_call_charges_by_default(flights, default_ledger):
    ldp_dask.privatize(str(flights), "x", CHANNEL, seed=1)
    quantiles(str(flights), "x", q=[0.5], epsilon=1.0, bounds=(0.0, 1.0), seed=1)
    gof.run(str(flights), "uniform", column="x", domain=(0.0, 1.0), epsilon=1.0, B=99, rng=1, seed=1)
    bounds(str(flights), "x", epsilon=0.1, seed=1)
    entries = Ledger(default_ledger).entries()
    assert len(entries) == 4 and {e["status"] for e in entries} == {"committed"}
    assert sorted(e["scope"] for e in entries) == ["central", "central", "local", "local"]


def test_not_recording_is_explicit_and_stated(flights, default_ledger, tmp_path, capsys):
    s = ldp_dask.privatize(str(flights), "x", CHANNEL, seed=1, out=str(tmp_path / "s.parquet"), ledger=False)
    assert "not recorded" in s.receipt.line() and s.metadata["ledger"] == "not recorded (ledger=False)"
    written = read_summary(str(tmp_path / "s.parquet"))
    assert written.metadata["ledger"] == "not recorded (ledger=False)"
    assert "budget ledger" in written.to_markdown() and "not recorded" in written.to_markdown()
    q = quantiles(str(flights), "x", q=[0.5], epsilon=1.0, bounds=(0.0, 1.0), seed=1, ledger=False)
    assert q.details["ledger"] == "not recorded (ledger=False)"
    # the command line's --no-ledger is the same choice, said on its output and in the file
    capsys.readouterr()
    assert main(["privatize", str(flights), "--column", "x", "--channel", "histogram", "--bins", "8", "--domain",
                 "0", "1", "--epsilon", "1", "--out", str(tmp_path / "c.parquet"), "--local", "--seed", "1",
                 "--no-ledger"]) == 0
    assert "ledger: not recorded" in capsys.readouterr().err
    assert read_summary(str(tmp_path / "c.parquet")).metadata["ledger"] == "not recorded (ledger=False)"
    assert Ledger(default_ledger).entries() == []
    # ... and without it the command line records in the same default ledger as Python
    assert main(["privatize", str(flights), "--column", "x", "--channel", "histogram", "--bins", "8", "--domain",
                 "0", "1", "--epsilon", "1", "--out", str(tmp_path / "d.parquet"), "--local", "--seed", "1"]) == 0
    assert read_summary(str(tmp_path / "d.parquet")).metadata["ledger"] == "recorded"
    assert len(Ledger(default_ledger).entries()) == 1


@pytest.mark.slow  # a Prefect flow run (3.5 s): make test runs it, make test-fast stays under 3 minutes
def test_the_flows_take_the_same_default(flights, default_ledger):
    from flows._run import run_options

    assert run_options({}).recorded and run_options({}).ledger is True
    assert not run_options({"ledger": False}).recorded
    assert ldp_dask.RunOptions().recorded and ldp_dask.RunOptions(ledger=None).recorded
