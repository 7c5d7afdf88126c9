"""The command line's small promises: ``--version``, and ``demo --data-only DIR``, the sample table the README's
snippets read (a clone has no ``data/``)."""

from __future__ import annotations

import pyarrow.dataset as ds
import pytest

import ldp_dask
from ldp_dask.cli import main
from ldp_dask.demo import SAMPLE_COLUMNS


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"ldp-dask {ldp_dask.__version__}"


def test_data_only_writes_the_sample_table_and_nothing_else(tmp_path, capsys):
    where = tmp_path / "data"
    assert main(["demo", "--data-only", str(where)]) == 0
    table = ds.dataset(where).to_table()
    assert table.num_rows == 120_000 and set(table.column_names) == set(SAMPLE_COLUMNS)
    assert 0 < table["delay"].null_count < 0.05 * table.num_rows
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no demo run, no ledger
    out = capsys.readouterr().out
    assert "120,000 rows" in out and all(name in out for name in SAMPLE_COLUMNS)


def test_data_only_refuses_a_directory_in_use(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.parquet").write_bytes(b"not ours")
    assert main(["demo", "--data-only", str(tmp_path / "data")]) != 0
    assert "exists and is not an empty directory" in capsys.readouterr().err
    assert (tmp_path / "data" / "mine.parquet").read_bytes() == b"not ours"


def test_privatize_and_estimate_state_the_central_guarantee(tmp_path, capsys, monkeypatch):
    import json

    monkeypatch.setenv("LDP_DASK_LEDGER", str(tmp_path / "ledger.sqlite"))
    main(["demo", "--data-only", str(tmp_path / "data")])
    capsys.readouterr()
    out = str(tmp_path / "x.parquet")
    assert main(["privatize", str(tmp_path / "data"), "--column", "x", "--domain", "0", "1", "--epsilon", "1",
                 "--channel", "histogram", "--bins", "16", "--out", out, "--seed", "1", "--json"]) == 0
    released = json.loads(capsys.readouterr().out)["central"]
    assert released["unit"] == "row" and released["units"] == 120_000 and released["delta"] == 1e-9
    assert 0 < released["epsilon"] < 0.02 and released["local_epsilon"] == 1.0
    assert main(["estimate", out, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["central"] == released  # the file carries it
    assert main(["estimate", out]) == 0
    assert "central guarantee" in capsys.readouterr().out
    # a δ the run sets: stated, recorded in the file, and a larger δ buys a smaller ε for the same release
    wider = str(tmp_path / "wider.parquet")
    assert main(["privatize", str(tmp_path / "data"), "--column", "x", "--domain", "0", "1", "--epsilon", "1",
                 "--channel", "histogram", "--bins", "16", "--out", wider, "--seed", "1", "--json", "--no-ledger",
                 "--central-delta", "1e-6"]) == 0
    stated = json.loads(capsys.readouterr().out)["central"]
    assert stated["delta"] == 1e-6 and 0 < stated["epsilon"] < released["epsilon"]
    assert main(["estimate", wider, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["central"] == stated
    assert main(["privatize", str(tmp_path / "data"), "--column", "x", "--domain", "0", "1", "--epsilon", "1",
                 "--channel", "histogram", "--bins", "16", "--out", str(tmp_path / "no.parquet"), "--seed", "1",
                 "--no-ledger", "--central-delta", "0.5"]) != 0
    assert "'central_delta' parameter must be a number in [1e-15, 0.001]. Got 0.5" in capsys.readouterr().err


@pytest.mark.parametrize("word", ["off", "none", "False"])
def test_a_ledger_word_meaning_none_is_refused_not_made_a_file(word, tmp_path, monkeypatch, capsys):
    """`--ledger off` once wrote a SQLite ledger named `off` in the working directory: it is refused, naming
    --no-ledger, and no file appears."""
    monkeypatch.chdir(tmp_path)
    for argv in (["budget", "--ledger", word],
                 ["privatize", "x.parquet", "--column", "x", "--epsilon", "1", "--ledger", word]):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2
        assert "--no-ledger" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
