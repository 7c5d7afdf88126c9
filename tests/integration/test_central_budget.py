"""A dataset's central budget: the ledger composes the central guarantee of every release and refuses the release
that would pass it, on real Parquet through the command line (docs/privacy.md, "The central guarantee")."""

from __future__ import annotations

import json

import pytest

from ldp_dask.cli import main
from ldp_dask.ledger import open_ledger
from ldp_dask.ledger.central import compose


def _budget(led, capsys):
    capsys.readouterr()
    assert main(["budget", "--ledger", led, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    return row


def test_the_ledger_composes_central_guarantees_and_enforces_a_central_budget(tmp_path, capsys):
    data, led = tmp_path / "data", str(tmp_path / "ledger.sqlite")
    main(["demo", "--data-only", str(data)])
    # a local budget that allows much, a central one that allows one histogram of 120,000 rows at ε₀ = 1
    assert main(["budget", "set", "demo", "--source", str(data), "--limit", "10", "--central", "0.01", "1e-6",
                 "--ledger", led]) == 0
    assert "central ε ≤ 0.01 at δ 1e-06" in capsys.readouterr().out
    hist = ["privatize", str(data), "--column", "x", "--domain", "0", "1", "--epsilon", "1", "--channel",
            "histogram", "--bins", "16", "--ledger", led, "--json"]
    assert main([*hist, "--out", str(tmp_path / "a.parquet"), "--seed", "1"]) == 0
    stated = json.loads(capsys.readouterr().out)["central"]
    row = _budget(led, capsys)
    # one mechanism: the summary's own statement, composed at the budget's δ (a δ 1000× larger: ε no larger)
    assert row["central"]["events"] == 1 and row["central"]["delta"] == 1e-6
    assert 0 < row["central"]["epsilon"] <= stated["epsilon"] < 0.01
    assert row["central"]["budget"] == {"epsilon": 0.01, "delta": 1e-6}
    assert main(["budget", "--ledger", led]) == 0
    assert "central guarantee: ε" in capsys.readouterr().out
    assert main(["budget", "--ledger", led, "--entries"]) == 0
    assert f"central (ε {stated['epsilon']:.3g}, δ 1e-09)" in capsys.readouterr().out

    # the same release again: free, and nothing new to compose
    assert main([*hist, "--out", str(tmp_path / "again.parquet"), "--seed", "1"]) == 0
    assert "composed over 1 mechanism(s)" in capsys.readouterr().err
    assert _budget(led, capsys)["central"]["events"] == 1

    # rows mode publishes each report: ε 1, far past the central budget; refused with nothing published, though
    # the local budget had room
    rows = tmp_path / "rows"
    assert main(["privatize", str(data), "--column", "x", "--domain", "0", "1", "--epsilon", "1", "--channel",
                 "histogram", "--bins", "16", "--mode", "rows", "--rows-out", str(rows), "--out",
                 str(tmp_path / "r.parquet"), "--seed", "3", "--ledger", led]) != 0
    err = capsys.readouterr().err
    assert "central budget of ε 0.01 at δ 1e-06" in err and "nothing was published" in err
    assert not (tmp_path / "r.parquet").exists() and not rows.exists()
    assert len(open_ledger(led).entries()) == 2 and _budget(led, capsys)["spent"] == 1.0

    # a second histogram with fresh noise: two statements compose past 0.01 (each alone fits)
    assert main([*hist, "--out", str(tmp_path / "b.parquet"), "--seed", "2"]) != 0
    assert "compose to ε 0.01" in capsys.readouterr().err
    assert not (tmp_path / "b.parquet").exists()

    # without the central budget the same release goes through, and the composition counts both
    assert main(["budget", "set", "demo", "--source", str(data), "--limit", "10", "--ledger", led]) == 0
    capsys.readouterr()
    assert main([*hist, "--out", str(tmp_path / "b.parquet"), "--seed", "2"]) == 0
    second = json.loads(capsys.readouterr().out)["central"]
    row = _budget(led, capsys)
    assert row["central"]["events"] == 2 and row["central"]["budget"] is None
    pair = [(stated["epsilon"], stated["delta"]), (second["epsilon"], second["delta"])]
    assert row["central"]["epsilon"] == pytest.approx(compose(pair, 1e-6))
    assert max(stated["epsilon"], second["epsilon"]) < row["central"]["epsilon"] <= sum(e for e, _ in pair)
    first = open_ledger(led).entries()[0]
    assert json.loads(first["central"]) == {"events": [[stated["epsilon"], stated["delta"]]]}
