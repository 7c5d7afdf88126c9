"""One ε policy for every face: a release above ε 50 per unit is refused the same way from Python, the command
line and the Prefect flows, before anything is read, written or charged; above 10 it is warned about."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask import LdpDaskError, central, gof
from ldp_dask.cli import main
from ldp_dask.policy import LdpDaskWarning

REFUSAL = "The 'epsilon' parameter must be at most 50 per row. Got 1000"


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    pq.write_table(pa.table({"x": np.random.default_rng(3).beta(2, 5, 3000)}), d / "part-0.parquet")
    return d


def _python_releases(data: Path, ledger: Path, out: Path, eps: float, **run: object) -> dict[str, object]:
    ch = ldp_dask.LaplaceHistogram(eps, 16, (0.0, 1.0))
    common = {"seed": 1, "client": "local", "ledger": str(ledger), **run}
    return {
        "privatize": lambda: ldp_dask.privatize(str(data), column="x", channel=ch, out=str(out / "s.parquet"),
                                                **common),
        "gof": lambda: gof.run(str(data), "beta(2,5)", column="x", domain=(0.0, 1.0), epsilon=eps, B=99, rng=1,
                               **common),
        "quantiles": lambda: central.quantiles(str(data), column="x", epsilon=eps, bounds=(0.0, 1.0), **common),
        "bounds": lambda: central.bounds(str(data), "x", epsilon=eps, out=str(out / "b.json"), **common),
    }


def _cli(data: Path, ledger: Path, out: Path, eps: str) -> dict[str, list[str]]:
    common = ["--local", "--seed", "1", "--ledger", str(ledger)]
    return {
        "privatize": ["privatize", str(data), "--column", "x", "--channel", "histogram", "--bins", "16", "--domain",
                      "0", "1", "--epsilon", eps, "--out", str(out / "s.parquet"), *common],
        "gof": ["gof", str(data), "--null", "beta(2,5)", "--column", "x", "--domain", "0", "1", "--epsilon", eps,
                "--B", "99", *common],
        "quantiles": ["quantiles", str(data), "--column", "x", "--bounds", "0", "1", "--epsilon", eps, *common],
        "bounds": ["bounds", str(data), "--column", "x", "--epsilon", eps, "--out", str(out / "b.json"), *common],
    }


@pytest.mark.parametrize("command", ["privatize", "gof", "quantiles", "bounds"])
def test_python_and_cli_refuse_epsilon_1000_alike(command, data, tmp_path, capsys):
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    out.mkdir()
    with pytest.raises(LdpDaskError) as info:
        _python_releases(data, ledger, out, 1000.0)[command]()
    assert REFUSAL in str(info.value)
    assert main(_cli(data, ledger, out, "1000")[command]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ldp-dask: error: ") and REFUSAL in err[0], err
    assert os.listdir(out) == []  # nothing written
    assert not ledger.exists()  # refused before the ledger was even opened: nothing charged


@pytest.mark.prefect
def test_flows_refuse_epsilon_1000_alike(prefect_harness, data, tmp_path):
    from ldp_dask.flows import gof_flow, privatize_flow, quantile_flow

    out = tmp_path / "out"
    out.mkdir()
    flows = {
        "privatize": lambda: privatize_flow(source=str(data), column="x", channel="histogram", bins=16,
                                            domain=[0.0, 1.0], epsilon=1000.0, out=str(out / "s.parquet"), seed=1,
                                            ledger=False),
        "gof": lambda: gof_flow(source=str(data), null="beta(2,5)", column="x", domain=[0.0, 1.0], epsilon=1000.0,
                                B=99, seed=1, ledger=False),
        "quantiles": lambda: quantile_flow(source=str(data), column="x", bounds=[0.0, 1.0], epsilon=1000.0, seed=1,
                                           ledger=False),
    }
    for run in flows.values():
        with pytest.raises(LdpDaskError, match=REFUSAL):
            run()
    assert os.listdir(out) == []


def test_allow_large_epsilon_releases_and_warns(data, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.warns(LdpDaskWarning, match="little protection"):
        s = _python_releases(data, tmp_path / "l.sqlite", out, 1000.0, allow_large_epsilon=True)["privatize"]()
    assert s.epsilon == 1000.0


def test_epsilon_above_ten_warns_in_python_and_on_the_command_line(data, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.warns(LdpDaskWarning, match=r"ε = 20 per row .* little protection"):
        _python_releases(data, tmp_path / "l.sqlite", out, 20.0)["quantiles"]()
    assert main(_cli(data, tmp_path / "l.sqlite", out, "20")["bounds"]) == 0
    err = capsys.readouterr().err
    assert "ldp-dask: warning: ε = 20 per row" in err


def test_more_bins_than_rows_warns_from_python(tmp_path):
    with pytest.warns(LdpDaskWarning, match="64 bins for 10 rows"):
        ldp_dask.privatize(np.linspace(0, 1, 10), channel=ldp_dask.LaplaceHistogram(1.0, 64, (0.0, 1.0)), seed=1)


def test_a_person_unit_counts_epsilon_per_person(tmp_path):
    """k rows at ε/k each: the policy judges the ε per person, 60 > 50, though each kept row spends only 20."""
    t = pa.table({"x": np.linspace(0, 1, 300), "user": np.arange(300) % 30})
    with pytest.raises(LdpDaskError, match="at most 50 per user. Got 60"):
        ldp_dask.privatize(t, column="x", channel=ldp_dask.LaplaceMean(60.0, (0.0, 1.0)), seed=1,
                           privacy_unit="user", max_contributions=3)
