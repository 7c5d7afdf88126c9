"""Rows that change files are charged wherever they went: every file operation, end to end through the CLI.

A dataset's budget is declared on its directory (ε 1 per row). Each test releases some rows at ε 1, moves them
by one file operation — a rename, a copy, a partial copy, a compaction, a rewrite, rows moved between files, an
overlapping glob, another spelling of the path, a symbolic or hard link from another directory — and releases
again at ε 1 with fresh noise: the ledger must refuse, since those rows would have been released twice. By
default the dataset is counted conservatively (every release of it counts for every row); declared append-only,
each row pays for its own file while the ledger's checks hold, and an operation that breaks them is caught,
said, and counted conservatively from then on.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ldp_dask.cli import main


def _write(path, seed, n=4_000):
    pq.write_table(pa.table({"x": np.random.default_rng(seed).random(n)}), path)


@pytest.fixture
def table(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    _write(d / "a.parquet", 0)
    _write(d / "b.parquet", 1)
    return d


def _release(source, tmp_path, seed=1, name=None):
    out = tmp_path / "out" / f"{name or os.urandom(4).hex()}.parquet"
    out.parent.mkdir(exist_ok=True)
    return main(["privatize", str(source), "--column", "x", "--channel", "histogram", "--bins", "8", "--domain", "0",
                 "1", "--epsilon", "1", "--out", str(out), "--local", "--seed", str(seed)])


def _declare(table, append_only=False):
    flag = ["--append-only"] if append_only else []
    assert main(["budget", "set", "d", "--source", str(table), "--limit", "1", *flag]) == 0


def _refused(capsys, why="'d' has spent 1 of its budget 1"):
    err = capsys.readouterr().err
    assert why in err, err
    return err


def _rename(table, tmp_path):
    os.rename(table / "a.parquet", table / "renamed.parquet")
    return table / "renamed.parquet"


def _copy(table, tmp_path):
    shutil.copy(table / "a.parquet", table / "copy.parquet")
    return table / "copy.parquet"


def _partial_copy(table, tmp_path):
    pq.write_table(pq.read_table(table / "a.parquet").slice(0, 1_000), table / "part.parquet")
    return table / "part.parquet"


def _compaction(table, tmp_path):
    both = pa.concat_tables([pq.read_table(table / "a.parquet"), pq.read_table(table / "b.parquet")])
    os.remove(table / "a.parquet")
    os.remove(table / "b.parquet")
    pq.write_table(both, table / "compacted.parquet")
    return table


def _rewrite(table, tmp_path):
    t = pq.read_table(table / "a.parquet")
    pq.write_table(t.slice(0, 3_999), table / "a.parquet")  # one row deleted, the rest rewritten in place
    return table / "a.parquet"


def _move_rows(table, tmp_path):
    a, b = pq.read_table(table / "a.parquet"), pq.read_table(table / "b.parquet")
    pq.write_table(a.slice(2_000), table / "a.parquet")
    pq.write_table(pa.concat_tables([b, a.slice(0, 2_000)]), table / "b.parquet")  # half of a's rows now in b
    return table / "b.parquet"


def _glob(table, tmp_path):
    return str(table) + "/a*.parquet"


def _spelling(table, tmp_path):
    return "file://" + str(table) + "/./a.parquet"


def _symlink_elsewhere(table, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    os.symlink(table / "a.parquet", other / "link.parquet")
    return other


def _hard_link_elsewhere(table, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    os.link(table / "a.parquet", other / "same.parquet")
    return other


OPERATIONS = [_rename, _copy, _partial_copy, _compaction, _rewrite, _move_rows, _glob, _spelling, _symlink_elsewhere,
              _hard_link_elsewhere]


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda f: f.__name__.strip("_"))
def test_rows_moved_by_a_file_operation_are_charged_again(table, tmp_path, capsys, operation):
    _declare(table)
    first = str(table) + "/*.parquet" if operation is _glob else table / "a.parquet"
    assert _release(first, tmp_path) == 0
    source = operation(table, tmp_path)
    capsys.readouterr()
    assert _release(source, tmp_path, seed=2 if operation is _spelling else 1) == 2
    _refused(capsys)


def test_a_symlink_in_another_directory_released_first_is_charged_to_the_dataset(table, tmp_path, capsys):
    # the sweep's case: the link's directory is released (at ε 1) before the dataset itself; both are charged on
    # the rows' real location, so the dataset's own release then exceeds its budget of 1
    _declare(table)
    other = _symlink_elsewhere(table, tmp_path)
    assert _release(other, tmp_path) == 0
    capsys.readouterr()
    assert _release(other, tmp_path, seed=3) == 2  # the link again, fresh noise: refused by the dataset's budget
    _refused(capsys)
    assert _release(table / "a.parquet", tmp_path, seed=4) == 2
    _refused(capsys)
    capsys.readouterr()
    assert main(["budget", "--json"]) == 0
    (row,) = [r for r in json.loads(capsys.readouterr().out) if r["dataset"] == "d"]
    assert row["spent"] == 1.0


@pytest.mark.parametrize("operation, why", [
    (_rename, "has gone"), (_copy, "holds the same Parquet footer"), (_rewrite, "changed since it was charged"),
    (_compaction, "has gone"), (_hard_link_elsewhere, "is a link to"),
], ids=["rename", "copy", "rewrite", "compaction", "hard-link"])
def test_an_append_only_dataset_catches_what_breaks_its_promise(table, tmp_path, capsys, operation, why):
    _declare(table, append_only=True)
    assert _release(table / "a.parquet", tmp_path) == 0
    assert _release(table / "b.parquet", tmp_path) == 0  # another file's rows: ε 1 per row still
    source = operation(table, tmp_path)
    if operation is _hard_link_elsewhere:  # the link moved into the dataset: read beside the file it links
        os.rename(source / "same.parquet", table / "same.parquet")
        source = table / "same.parquet"
    capsys.readouterr()
    assert _release(source, tmp_path) == 2
    err = _refused(capsys, "declared append-only")
    assert why in err and "has spent 2 of its budget 1" in err  # counted conservatively: both releases, every row
    capsys.readouterr()
    assert main(["budget"]) == 0
    assert "counted conservatively since" in capsys.readouterr().out


def test_an_append_only_dataset_charges_a_new_file_only_for_its_own_rows(table, tmp_path, capsys):
    _declare(table, append_only=True)
    assert _release(table / "a.parquet", tmp_path) == 0
    _write(table / "c.parquet", 7)  # tomorrow's file
    assert _release(table / "c.parquet", tmp_path) == 0
    assert _release(table / "b.parquet", tmp_path) == 0
    assert _release(table, tmp_path) == 2  # every row again (the whole directory): over
    _refused(capsys)
    capsys.readouterr()
    assert main(["budget", "--json"]) == 0
    (row,) = [r for r in json.loads(capsys.readouterr().out) if r["dataset"] == "d"]
    assert row["spent"] == 1.0 and row["append_only"] and row["fallback"] is None
    assert sorted(v for v in row["groups"].values()) == [1.0, 1.0, 1.0]
