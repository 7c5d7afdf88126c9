"""Apache Iceberg tables as sources, written by pyiceberg itself into the embedded catalog (a SqlCatalog on an
SQLite file beside the ledger): a release at a snapshot reads the data files its manifests list and equals the
same files as plain Parquet; a nightly series follows the snapshots (an append charged to its rows alone, a
copy-on-write delete read again and charged where its rows came from); what cannot be read as written is refused
in one line."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pytest

import ldp_dask
from ldp_dask.cli import main
from ldp_dask.ledger import open_ledger
from ldp_dask.source import source_root

pytest.importorskip("pyiceberg")

HIST = ldp_dask.LaplaceHistogram(1.0, 8, (0.0, 1.0))
TABLE = "iceberg://local/shop.events"


def _rows(seed: int, n: int, start: int = 0) -> pa.Table:
    return pa.table({"x": np.random.default_rng(seed).beta(2, 5, n), "u": np.arange(start, start + n)})


@pytest.fixture()
def events(tmp_path, monkeypatch):
    """The embedded catalog beside a ledger in tmp_path; shop.events with 3,000 rows, then 2,000 appended."""
    monkeypatch.setenv("LDP_DASK_LEDGER", str(tmp_path / "ledger.sqlite"))
    catalog = ldp_dask.iceberg_catalog()
    catalog.create_namespace_if_not_exists("shop")
    table = catalog.create_table("shop.events", schema=_rows(0, 1).schema)
    table.append(_rows(0, 3_000))
    table.append(_rows(1, 2_000, 3_000))
    return catalog


def _paths(table, snapshot=None) -> list[str]:
    return [t.file.file_path.removeprefix("file://") for t in table.scan(snapshot_id=snapshot).plan_files()]


def test_a_snapshot_is_the_files_its_manifests_list_and_equals_them_as_plain_parquet(events, tmp_path):
    assert (tmp_path / "iceberg.sqlite").exists() and (tmp_path / "warehouse").is_dir()  # beside the ledger
    table = events.load_table("shop.events")
    two = table.current_snapshot().snapshot_id
    table.delete("u < 500")  # copy-on-write: the file holding those rows rewritten
    table = events.load_table("shop.events")
    key = dict(seed=3, client="local", ledger=False)
    then = ldp_dask.privatize(f"{TABLE}@{two}", "x", HIST, **key)
    meta = then.metadata["table"]
    assert then.n == 5_000 and then.metadata["source"] == f"Iceberg table local/shop.events at snapshot {two}"
    assert meta["format"] == "iceberg" and meta["version"] == two and meta["id"] == str(table.metadata.table_uuid)
    plain = tmp_path / "plain"
    (plain / "data").mkdir(parents=True)
    for f in _paths(table, two):
        shutil.copy(f, plain / "data")
    same = ldp_dask.privatize(str(plain), "x", HIST, **key)
    assert np.array_equal(then.sums["sum"], same.sums["sum"]) and then.n == same.n
    now = ldp_dask.privatize(TABLE, "x", HIST, **key)
    assert now.n == 4_500 and now.metadata["table"]["version"] == table.current_snapshot().snapshot_id
    assert ldp_dask.privatize(os.path.dirname(_paths(table)[0]), "x", HIST, **key).n > 4_500  # what guessing reads


def test_a_nightly_series_follows_the_snapshots(events, tmp_path, capsys):
    led = str(tmp_path / "ledger.sqlite")
    args = ["--column", "x", "--channel", "histogram", "--bins", "8", "--domain", "0", "1", "--epsilon", "1",
            "--seed", "3", "--local", "--ledger", led]
    assert main(["budget", "set", "events", "--source", TABLE, "--limit", "3", "--ledger", led]) == 0
    table = events.load_table("shop.events")
    assert open_ledger(led).datasets()[0]["root"] == source_root(table.metadata.location)
    assert main(["privatize", TABLE, *args, "--incremental", "--out", str(tmp_path / "n1.parquet")]) == 0
    before = set(_paths(table))
    table.append(_rows(2, 500, 5_000))
    (appended,) = set(_paths(events.load_table("shop.events"))) - before
    assert main(["privatize", TABLE, *args, "--since", str(tmp_path / "n1.parquet"),
                 "--out", str(tmp_path / "n2.parquet")]) == 0
    parts = json.loads(open_ledger(led).entries()[-1]["parts"])
    assert [p["root"].removeprefix("file://") for p in parts] == [appended] and parts[0]["epsilon"] == 1.0
    assert "dataset events now 1 of budget 3" in capsys.readouterr().err  # the appended rows alone paid
    events.load_table("shop.events").delete("u >= 5400")  # rewrites the appended file: 400 of its rows copied
    assert main(["privatize", TABLE, *args, "--since", str(tmp_path / "n2.parquet"),
                 "--out", str(tmp_path / "n3.parquet")]) == 0
    (rewritten,) = set(_paths(events.load_table("shop.events"))) - before
    roots = sorted(p["root"].removeprefix("file://") for p in json.loads(open_ledger(led).entries()[-1]["parts"]))
    assert roots == sorted([rewritten, appended])  # read again, and charged where its rows came from
    assert "dataset events now 2 of budget 3" in capsys.readouterr().err
    s = ldp_dask.read_summary(tmp_path / "n3.parquet", key=ldp_dask.noise.resolve_secret(seed=3))
    assert s.n == 5_400 and s.metadata["partitions_read"] == 1 and s.metadata["partitions_reused"] == 2
    assert main(["budget", "--ledger", led]) == 0
    out = capsys.readouterr().out
    snapshots = [x.snapshot_id for x in events.load_table("shop.events").snapshots()][1:]
    assert f"Iceberg table local/shop.events: snapshot(s) {', '.join(map(str, sorted(snapshots)))} released" in out
    assert "a table's log: ε per row followed" in out


@pytest.mark.parametrize("source,said", [
    ("iceberg://nowhere/shop.events", "no Iceberg catalog named 'nowhere'"),
    ("iceberg://local/shop.missing", "no Iceberg table 'shop.missing'"),
    ("iceberg://local/events", "names no Iceberg table"),
    ("iceberg://local/shop.events@latest", "must be a snapshot id"),
    ("iceberg://local/shop.events@12345", "has no snapshot 12345"),
])
def test_a_table_that_is_not_there_is_one_line(events, tmp_path, capsys, source, said):
    out = tmp_path / "s.parquet"
    code = main(["privatize", source, "--column", "x", "--channel", "histogram", "--bins", "8", "--domain", "0", "1",
                 "--epsilon", "1", "--seed", "3", "--local", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and said in err, err
    assert not out.exists()


def test_a_table_whose_columns_were_renamed_is_refused(events):
    """Its older files carry the old name: reading them by the new one would fail, or read another column."""
    with events.load_table("shop.events").update_schema() as update:
        update.rename_column("u", "id")
    with pytest.raises(ldp_dask.InputDataError, match="renamed columns"):
        ldp_dask.privatize(TABLE, "x", HIST, seed=1, client="local", ledger=False)


@pytest.mark.s3
def test_a_table_of_a_configured_catalog_on_object_storage(s3, tmp_path, monkeypatch):
    """A catalog pyiceberg is configured for by environment (an SQL catalog whose warehouse is a bucket of the
    S3-compatible server): its table is read at each snapshot, the data files through the storage options Parquet
    sources take, and the summary records the table's location in the bucket."""
    endpoint, options = s3
    import fsspec

    fs = fsspec.filesystem("s3", endpoint_url=endpoint)
    if not fs.exists("ldp-iceberg"):
        fs.mkdir("ldp-iceberg")
    for k, v in {"TYPE": "sql", "URI": f"sqlite:///{tmp_path}/objects.sqlite", "WAREHOUSE": "s3://ldp-iceberg/wh",
                 "S3__ENDPOINT": endpoint, "S3__ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
                 "S3__SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"], "S3__REGION": "us-east-1"}.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__OBJECTS__{k}", v)
    catalog = ldp_dask.iceberg_catalog("objects")
    catalog.create_namespace_if_not_exists("shop")
    table = catalog.create_table("shop.events", schema=_rows(0, 1).schema)
    table.append(_rows(0, 3_000))
    first = catalog.load_table("shop.events").current_snapshot().snapshot_id
    catalog.load_table("shop.events").append(_rows(1, 2_000, 3_000))
    assert all(p.startswith("s3://ldp-iceberg/wh/") for p in _paths(catalog.load_table("shop.events")))
    for snapshot, rows in ((first, 3_000), (None, 5_000)):
        at = "" if snapshot is None else f"@{snapshot}"
        s = ldp_dask.privatize(f"iceberg://objects/shop.events{at}", "x", HIST, seed=3, client="local", ledger=False,
                               storage_options=options)
        assert s.n == rows and s.metadata["table"]["location"].startswith("s3://ldp-iceberg/wh/")
