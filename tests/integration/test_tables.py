"""Delta Lake tables as sources, written by deltalake itself (no mocks): a release at a version reads the files
its log lists at that version, equals the release of the same files as plain Parquet (same key, same pieces:
identical sums), records the table's format, identity and version in its summary and ledger entry, and is
charged on the table's directory; what cannot be read as written is refused in one line."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import ldp_dask
from ldp_dask.cli import main
from ldp_dask.ledger import open_ledger
from ldp_dask.source import source_root

deltalake = pytest.importorskip("deltalake")

HIST = ldp_dask.LaplaceHistogram(1.0, 8, (0.0, 1.0))


def _rows(seed: int, n: int, start: int = 0) -> pa.Table:
    return pa.table({"x": np.random.default_rng(seed).beta(2, 5, n), "u": np.arange(start, start + n)})


@pytest.fixture()
def table(tmp_path):
    """Version 0: 3,000 rows; 1: 2,000 appended; 2: the rows with u < 500 deleted (copy-on-write: the files
    holding them rewritten); 3: compacted (no data change)."""
    path = tmp_path / "events"
    deltalake.write_deltalake(str(path), _rows(0, 3_000))
    deltalake.write_deltalake(str(path), _rows(1, 2_000, 3_000), mode="append")
    deltalake.DeltaTable(str(path)).delete("u < 500")
    deltalake.DeltaTable(str(path)).optimize.compact()
    return path


def test_a_version_is_the_files_its_log_lists_and_equals_them_as_plain_parquet(table, tmp_path):
    key = dict(seed=3, client="local", ledger=False)
    one = ldp_dask.privatize(f"delta://{table}@1", "x", HIST, **key)
    assert one.n == 5_000 and one.metadata["source"] == f"Delta table {table} at version 1"
    ident = one.metadata["table"]
    assert ident["format"] == "delta" and ident["version"] == 1 and ident["location"] == str(table)
    assert ident["id"] == deltalake.DeltaTable(str(table)).metadata().id
    # the same files as plain Parquet, copied out (the table's directory also holds files later versions removed)
    import shutil

    plain = tmp_path / "plain"
    plain.mkdir()
    for uri in deltalake.DeltaTable(str(table), version=1).file_uris():
        shutil.copy(uri.removeprefix("file://"), plain)
    same = ldp_dask.privatize(str(plain), "x", HIST, **key)
    assert np.array_equal(one.sums["sum"], same.sums["sum"]) and one.n == same.n
    # after the delete: only the live files are read (the directory as plain Parquet holds the removed ones too)
    now = ldp_dask.privatize(f"delta://{table}", "x", HIST, **key)
    assert now.n == 4_500 and now.metadata["table"]["version"] == 3 and now.metadata["table"]["id"] == ident["id"]
    everything = ldp_dask.privatize(str(table), "x", HIST, **key)
    assert everything.n > now.n  # what guessing from the directory would have read
    assert ldp_dask.privatize(f"delta://{table}@2", "x", HIST, **key).n == 4_500


@pytest.mark.cluster
def test_a_release_of_a_table_on_the_cluster_is_charged_on_its_directory(table, tmp_path, cluster, capsys):
    led, out = tmp_path / "ledger.sqlite", tmp_path / "s.parquet"
    assert main(["budget", "set", "events", "--source", f"delta://{table}", "--limit", "3", "--ledger",
                 str(led)]) == 0
    assert main(["privatize", f"delta://{table}@1", "--column", "x", "--channel", "histogram", "--bins", "8",
                 "--domain", "0", "1", "--epsilon", "1", "--seed", "3", "--scheduler", cluster.scheduler.address,
                 "--ledger", str(led), "--out", str(out)]) == 0
    assert "dataset events now 1 of budget 3" in capsys.readouterr().err
    (entry,) = open_ledger(str(led)).entries()
    assert entry["root"] == source_root(str(table)) and entry["source"] == f"Delta table {table} at version 1"
    s = ldp_dask.read_summary(out, key=ldp_dask.noise.resolve_secret(seed=3))
    assert s.metadata["table"]["version"] == 1 and s.n == 5_000
    assert main(["privatize", f"delta://{table}@3", "--column", "x", "--channel", "histogram", "--bins", "8",
                 "--domain", "0", "1", "--epsilon", "1", "--seed", "3", "--local", "--ledger", str(led),
                 "--out", str(tmp_path / "s3.parquet")]) == 0
    capsys.readouterr()
    assert main(["budget", "--ledger", str(led)]) == 0  # per table, the versions its releases read
    assert f"Delta table {table}: version(s) 1, 3 released" in capsys.readouterr().out


@pytest.mark.parametrize("source,said", [
    ("delta://{t}@x", "must be a whole number"),
    ("delta://{t}@9", "at version 9"),
    ("delta://{t}/nope", "no Delta table"),
])
def test_a_table_that_is_not_there_is_one_line(table, tmp_path, capsys, source, said):
    led, out = tmp_path / "l.sqlite", tmp_path / "s.parquet"
    code = main(["privatize", source.format(t=table), "--column", "x", "--channel", "histogram", "--bins", "8",
                 "--domain", "0", "1", "--epsilon", "1", "--seed", "3", "--local", "--ledger", str(led),
                 "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and said in err, err
    assert open_ledger(str(led)).entries() == [] and not out.exists()


def test_a_table_with_deletion_vectors_is_refused(tmp_path, capsys):
    """Rows deleted by a mask beside their file are still in the file: reading it would release them."""
    path = tmp_path / "dv"
    deltalake.write_deltalake(str(path), _rows(0, 100), configuration={"delta.enableDeletionVectors": "true"})
    with pytest.raises(ldp_dask.InputDataError, match="deletion vectors"):
        ldp_dask.privatize(f"delta://{path}", "x", HIST, seed=1, client="local", ledger=False)


@pytest.mark.s3
def test_a_table_on_object_storage_reads_its_version_there(s3, tmp_path):
    """A Delta table on the S3-compatible server (written by deltalake, then uploaded with its log): released at
    each version through the s3fs-style storage options the Parquet sources take, equal to the same table on local
    disk (the same files: noise is keyed by the files' names, which deltalake draws at random when it writes)."""
    endpoint, options = s3
    import fsspec

    fs = fsspec.filesystem("s3", endpoint_url=endpoint)
    if not fs.exists("ldp-delta"):
        fs.mkdir("ldp-delta")
    local = tmp_path / "events"
    deltalake.write_deltalake(str(local), _rows(0, 3_000))
    deltalake.write_deltalake(str(local), _rows(1, 2_000, 3_000), mode="append")
    fs.put(str(local), "ldp-delta/events", recursive=True)  # the same files and log (paths in the log are relative)
    theirs = {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true"}
    assert deltalake.DeltaTable("s3://ldp-delta/events", storage_options=theirs).version() == 1
    for version in (0, 1):
        remote = ldp_dask.privatize(f"delta://s3://ldp-delta/events@{version}", "x", HIST, seed=3, client="local",
                                    ledger=False, storage_options=options)
        here = ldp_dask.privatize(f"delta://{local}@{version}", "x", HIST, seed=3, client="local", ledger=False)
        assert remote.n == here.n == (3_000 if version == 0 else 5_000)
        assert np.array_equal(remote.sums["sum"], here.sums["sum"])
        assert remote.metadata["table"]["location"] == "s3://ldp-delta/events"
