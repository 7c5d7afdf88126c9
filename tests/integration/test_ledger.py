"""The privacy budget ledger: charged per dataset root whatever the file layout, free only for provably
identical re-runs, crash-safe, refusing broken ledger files, atomic under concurrent processes.

Every bypass found by trying the ledger as an adversarial operator is a test here: append a file, glob a
directory's files, release one file of it or its parent, edit a file in place, change the partitioning or
the mode, kill the run between publishing and committing, kill it with rows staged. In each the spent ε
shown by ``ldp-dask budget`` equals what was released.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import socket
import sqlite3
import subprocess
import sys
import time
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask import LdpDaskError
from ldp_dask.cli import main
from ldp_dask.ledger import BudgetExceeded, Ledger, LedgerError
from ldp_dask.ledger.store import INDEX_TABLES, POSTGRES_TYPES, SCHEMA_VERSION, SQLITE_TYPES

KEY = "a-file-secret-0123456789abcdef"


def _write(path, seed, n=20_000, row_group_size=None):
    pq.write_table(pa.table({"x": np.random.default_rng(seed).random(n), "y": np.random.default_rng(seed + 99).random(n)}),
                   path, row_group_size=row_group_size)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def led(request, tmp_path):
    """A new ledger: a SQLite file, or a database on a real PostgreSQL server started for the session."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    from pg_server import fresh_database

    return fresh_database(request.getfixturevalue("postgres"), f"ledger_{uuid.uuid4().hex[:12]}")


def _sql(location: str, statement: str, params=()) -> None:
    """Change the ledger behind its back (to stage a crash, another host, an expired lease)."""
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location) as con:
            con.execute(statement.replace("?", "%s"), params)
    else:
        with sqlite3.connect(location) as con:
            con.execute(statement, params)


@pytest.fixture()
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    _write(d / "a.parquet", 0, row_group_size=5_000)
    (tmp_path / "key").write_text(KEY)
    return d


def _privatize(source, out, ledger, *extra, column="x"):
    return main(["privatize", str(source), "--column", column, "--channel", "histogram", "--bins", "8", "--domain",
                 "0", "1", "--epsilon", "1", "--out", str(out), "--local", "--ledger", str(ledger), *extra])


def _spent(ledger, capsys) -> list[dict]:
    """What `ldp-dask budget --json` shows, per dataset."""
    capsys.readouterr()
    assert main(["budget", "--ledger", str(ledger), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_budget_is_enforced_before_any_work(tmp_path, data, capsys, led):
    assert main(["budget", "set", "survey", "--source", str(data), "--limit", "1.5", "--ledger", str(led)]) == 0
    assert _privatize(data, tmp_path / "a.parquet", led, "--seed", "1") == 0
    capsys.readouterr()
    assert _privatize(data, tmp_path / "b.parquet", led, "--seed", "2") == 2  # a new key spends again: 2 > 1.5
    err = capsys.readouterr().err
    assert "'survey' has spent 1 of its budget 1.5 (remaining 0.5)" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b.parquet").exists()
    entries = Ledger(led).entries()
    assert len(entries) == 1 and entries[0]["status"] == "committed" and entries[0]["epsilon"] == 1.0


def test_rerun_with_the_same_key_and_data_is_free_and_identical(tmp_path, data, capsys, led):
    for name in ("a", "b"):
        assert _privatize(data, tmp_path / f"{name}.parquet", led, "--secret-file", str(tmp_path / "key")) == 0
    assert "identical to a recorded release: no ε spent" in capsys.readouterr().err
    import ldp_dask

    a, b = (ldp_dask.read_summary(tmp_path / f"{n}.parquet") for n in "ab")
    assert a.same_release(b)
    assert [d["spent"] for d in _spent(led, capsys)] == [1.0]
    # a random secret is not reproducible: each run spends
    assert _privatize(data, tmp_path / "c.parquet", led) == 0
    assert _privatize(data, tmp_path / "d.parquet", led) == 0
    assert [d["spent"] for d in _spent(led, capsys)] == [3.0]


def test_budget_is_per_person_across_columns_and_scopes(tmp_path, data, capsys, led):
    assert main(["budget", "set", "survey", "--source", str(data), "--limit", "2", "--ledger", str(led)]) == 0
    assert _privatize(data, tmp_path / "a.parquet", led, "--seed", "1") == 0
    assert main(["quantiles", str(data), "--column", "y", "--bounds", "0", "1", "--epsilon", "0.5", "--local",
                 "--seed", "1", "--ledger", str(led)]) == 0
    (row,) = _spent(led, capsys)
    assert row["spent"] == 1.5 and row["by_column"] == {"x": 1.0, "y": 0.5}
    assert row["by_scope"] == {"local": 1.0, "central": 0.5}
    # another column is the same people: 1.5 + 1 > 2
    assert _privatize(data, tmp_path / "b.parquet", led, "--seed", "1", column="y") == 2
    assert "remaining 0.5" in capsys.readouterr().err
    assert main(["budget", "--ledger", str(led), "--entries"]) == 0
    text = capsys.readouterr().out
    assert "central-quantiles" in text and "histogram" in text and KEY not in text


# --- the bypasses -----------------------------------------------------------------------------------------
def test_appending_a_file_does_not_reset_the_budget(tmp_path, data, capsys, led):
    # no declaration: the default identity is the directory
    assert _privatize(data, tmp_path / "a.parquet", led, "--secret-file", str(tmp_path / "key")) == 0
    _write(data / "b.parquet", 1)
    assert _privatize(data, tmp_path / "b.parquet", led, "--secret-file", str(tmp_path / "key")) == 0
    (row,) = _spent(led, capsys)
    assert row["root"] == f"file://{os.path.realpath(data)}" and row["spent"] == 2.0


def test_files_globs_parents_and_links_of_a_declared_dataset_are_charged_to_it(tmp_path, data, capsys, led):
    parent = tmp_path / "all"
    data = parent / "survey"
    data.mkdir(parents=True)
    _write(data / "a.parquet", 0)
    _write(data / "b.parquet", 1)
    _write(parent / "other.parquet", 2)
    assert main(["budget", "set", "survey", "--source", str(data), "--limit", "10", "--ledger", str(led)]) == 0
    os.symlink(data, tmp_path / "link")
    sources = [data / "a.parquet", str(data / "*.parquet"), tmp_path / "link", parent]
    for i, source in enumerate(sources):
        assert _privatize(source, tmp_path / f"o{i}.parquet", led, "--seed", "1") == 0, source
    rows = _spent(led, capsys)
    survey = next(r for r in rows if r["dataset"] == "survey")
    assert survey["spent"] == 4.0  # each release read some of its people
    # the budget binds every one of these paths
    assert main(["budget", "set", "survey", "--source", str(data), "--limit", "4.5", "--ledger", str(led)]) == 0
    for i, source in enumerate(sources):
        assert _privatize(source, tmp_path / f"p{i}.parquet", led, "--seed", "2") == 2, source
        assert "'survey' has spent 4 of its budget 4.5" in capsys.readouterr().err


def test_editing_a_file_in_place_is_a_new_release(tmp_path, data, capsys, led):
    key = ("--secret-file", str(tmp_path / "key"))
    assert _privatize(data, tmp_path / "a.parquet", led, *key) == 0
    _write(data / "a.parquet", 7, row_group_size=5_000)  # new values, same rows, same row groups
    assert _privatize(data, tmp_path / "b.parquet", led, *key) == 0
    assert "ε 1 per row spent" in capsys.readouterr().err
    assert [r["spent"] for r in _spent(led, capsys)] == [2.0]


@pytest.mark.parametrize("change", [("--partition-rows", "5000"), ("--mode", "rows", "--rows-out", "ROWS"),
                                    ("--clip",)])
def test_partitioning_mode_and_clipping_change_the_release(tmp_path, data, capsys, change, led):
    key = ("--secret-file", str(tmp_path / "key"))
    assert _privatize(data, tmp_path / "a.parquet", led, *key) == 0
    change = [str(tmp_path / "rows") if c == "ROWS" else c for c in change]
    assert _privatize(data, tmp_path / "b.parquet", led, *key, *change) == 0
    import ldp_dask

    a, b = (ldp_dask.read_summary(tmp_path / f"{n}.parquet") for n in "ab")
    assert [r["spent"] for r in _spent(led, capsys)] == [1.0 if a.same_release(b) else 2.0]
    if change[0] != "--clip":  # clipping nothing changes nothing; the others draw other noise
        assert not a.same_release(b)


def test_an_exhausted_budget_still_allows_an_identical_rerun_but_not_edited_data(tmp_path, data, capsys, led):
    key = ("--secret-file", str(tmp_path / "key"))
    assert main(["budget", "set", "survey", "--source", str(data), "--limit", "1", "--ledger", str(led)]) == 0
    assert _privatize(data, tmp_path / "a.parquet", led, *key) == 0
    assert _privatize(data, tmp_path / "b.parquet", led, *key) == 0  # provably identical: free
    _write(data / "a.parquet", 7, row_group_size=5_000)
    capsys.readouterr()
    assert _privatize(data, tmp_path / "c.parquet", led, *key) == 2
    err = capsys.readouterr().err
    assert "the data changed since the recorded release" in err and "nothing was published" in err
    assert not (tmp_path / "c.parquet").exists() and not list(tmp_path.glob(".c.parquet.tmp-*"))
    assert [r["spent"] for r in _spent(led, capsys)] == [1.0]


def test_releases_in_different_privacy_units_cannot_be_added_up(led):
    led = Ledger(led)
    root = "file:///data/survey"
    led.reserve(root=root, column="x", scope="local", channel="c", params={}, epsilon=1.0, key_id="k",
                release_key="r1")
    with pytest.raises(LdpDaskError, match="privacy unit 'row'"):
        led.reserve(root=root + "/part", column="x", scope="local", channel="c", params={}, epsilon=1.0,
                    key_id="k", release_key="r2", privacy_unit="person")
    with pytest.raises(LdpDaskError, match="cannot be declared with unit 'person'"):
        led.declare("survey", root, 3.0, privacy_unit="person")


# --- crashes ------------------------------------------------------------------------------------------------
_CRASH = """
import os, sys
from ldp_dask import ledger, _io
where = sys.argv[1]
if where == "commit":      # the outputs are published, the ledger's commit never happens
    ledger.Ledger.commit = lambda self, r: os._exit(9)
elif where == "publish":   # the charge is settled, the outputs are about to be renamed into place
    _io.StagedOutputs.publish = lambda self: os._exit(9)
elif where == "settle":    # the rows and the summary are staged on disk, the charge not yet settled
    ledger.Ledger.settle = lambda self, *a, **k: os._exit(9)
elif where == "raise":     # an exception after the rows were written: nothing is published
    def boom(self): raise RuntimeError("disk full")
    _io.StagedOutputs.publish = boom
from ldp_dask import LdpDaskError
from ldp_dask.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("where, charged", [("commit", 1.0), ("publish", 1.0), ("settle", 1.0), ("raise", 0.0)])
def test_a_run_killed_after_its_output_left_is_charged(tmp_path, data, capsys, where, charged, led):
    args = ["privatize", str(data), "--column", "x", "--channel", "histogram", "--bins", "8", "--domain", "0", "1",
            "--epsilon", "1", "--out", str(tmp_path / "s.parquet"), "--local", "--ledger", str(led), "--seed", "1",
            "--mode", "rows", "--rows-out", str(tmp_path / "rows")]
    proc = subprocess.run([sys.executable, "-c", _CRASH, where, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == (1 if where == "raise" else 9), proc.stderr
    # the dead process's reservation is resolved by the next ledger operation (here: the listing)
    rows = _spent(led, capsys)
    assert sum(r["spent"] for r in rows) == charged
    entries = Ledger(led).entries()
    assert [e["status"] for e in entries] == (["committed"] if charged else [])
    if where == "commit":
        assert (tmp_path / "s.parquet").exists() and "publishing" in entries[0]["note"]
    if where == "publish":
        assert not (tmp_path / "s.parquet").exists() and "publishing" in entries[0]["note"]
    if where == "settle":
        assert not (tmp_path / "s.parquet").exists() and "staged on disk" in entries[0]["note"]
    if where == "raise":
        assert not (tmp_path / "rows").exists() and not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_reservations_of_dead_processes_and_expired_leases_are_resolved(tmp_path, led):
    path, led = led, Ledger(led)
    led.declare("d", "file:///d", 1.0)
    kw = dict(root="file:///d", column="x", scope="local", channel="c", params={}, epsilon=1.0, key_id="k")
    r = led.reserve(release_key="a", outputs=[str(tmp_path / "never-written")], **kw)
    # the reserving process crashed before writing: a pid that cannot exist
    _sql(path, "UPDATE releases SET pid=? WHERE id=?", (2**22 + 12345, r.id))
    r2 = led.reserve(release_key="b", **kw)
    assert [e["id"] for e in led.entries()] == [r2.id]
    # another host, publishing, lease still running: it holds the budget
    _sql(path, "UPDATE releases SET host='elsewhere', status='publishing', lease_until=? WHERE id=?",
         (time.time() + 3600, r2.id))
    with pytest.raises(BudgetExceeded):
        led.reserve(release_key="c", **kw)
    # its lease expires: it was publishing, so it is committed, never dropped
    _sql(path, "UPDATE releases SET lease_until=? WHERE id=?", (time.time() - 1, r2.id))
    (e,) = led.entries()
    assert e["status"] == "committed" and "recovered" in e["note"]


@pytest.mark.slow  # seconds of real processes: in make test, not test-fast
def test_a_live_run_renews_its_lease(led):
    path, led = led, Ledger(led, lease_seconds=0.6)
    r = led.reserve(root="file:///d", column="x", scope="local", channel="c", params={}, epsilon=1.0, key_id="k",
                    release_key="a")
    _sql(path, "UPDATE releases SET host='elsewhere' WHERE id=?", (r.id,))  # as seen from another host
    with led.holding(r):
        time.sleep(2.0)  # three leases long
        assert [e["status"] for e in led.entries()] == ["reserved"]
    time.sleep(0.8)
    assert led.entries() == []  # no longer renewed, nothing staged: dropped


# --- broken ledger files --------------------------------------------------------------------------------------
@pytest.mark.parametrize("content", [b"", b"garbage, not a database" * 100, "foreign", "v1"])
def test_an_empty_or_corrupt_ledger_is_refused_never_recreated(tmp_path, data, capsys, content):
    led = tmp_path / "ledger.sqlite"
    if content == "foreign":
        with sqlite3.connect(led) as con:
            con.execute("CREATE TABLE t (a)")
    elif content == "v1":
        with sqlite3.connect(led) as con:
            con.execute("CREATE TABLE releases (id INTEGER, fingerprint TEXT)")
    else:
        led.write_bytes(content)
    before = led.read_bytes()
    for argv in (["budget", "--ledger", str(led)],
                 ["privatize", str(data), "--column", "x", "--channel", "histogram", "--bins", "8", "--domain", "0",
                  "1", "--epsilon", "1", "--out", str(tmp_path / "s.parquet"), "--local", "--ledger", str(led)]):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "ledger" in err[0], err
    assert led.read_bytes() == before and not (tmp_path / "s.parquet").exists()
    with pytest.raises(LedgerError):
        Ledger(led)


# --- concurrency -----------------------------------------------------------------------------------------------
def _race(location, barrier, results):
    led = Ledger(location)
    barrier.wait()
    try:
        led.reserve(root="file:///d/part", column="x", scope="local", channel="histogram",
                    params={"pid": os.getpid()}, epsilon=1.0, key_id=str(os.getpid()), release_key=str(os.getpid()))
        results.put("ok")
    except BudgetExceeded:
        results.put("refused")


def race_four(location) -> list[str]:
    """Four processes reserve ε 1 at once against a budget of 1.5: exactly one may pass."""
    Ledger(location).declare("d", "file:///d", 1.5)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(location), barrier, results)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    return sorted(results.get(timeout=10) for _ in procs)


@pytest.mark.slow
def test_concurrent_releases_cannot_overspend(led):
    assert race_four(led) == ["ok", "refused", "refused", "refused"]


def test_hostname_and_pid_are_recorded_for_recovery(led):
    Ledger(led).reserve(root="file:///d", column="x", scope="local", channel="c", params={}, epsilon=1.0,
                        key_id="k", release_key="a")
    assert [(e["status"], e["epsilon"]) for e in Ledger(led).entries()] == [("reserved", 1.0)]
    host_pid = _select(led, "SELECT host, pid FROM releases")
    assert host_pid == (socket.gethostname(), os.getpid())


def _select(location: str, statement: str):
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location) as con:
            return tuple(con.execute(statement).fetchone())
    with sqlite3.connect(location) as con:
        return con.execute(statement).fetchone()


@pytest.mark.postgres
def test_a_postgresql_database_holding_other_tables_or_an_old_ledger_is_refused(postgres, capsys):
    from pg_server import fresh_database

    from ldp_dask.ledger.postgres import public_url

    url = fresh_database(postgres, f"ledger_{uuid.uuid4().hex[:12]}")
    _sql(url, "CREATE TABLE releases (id INTEGER, fingerprint TEXT)")  # what an earlier ldp_dask wrote
    assert main(["budget", "--ledger", url]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "earlier ldp_dask" in err[0], err
    # a server that does not answer: one line, and no password in it
    assert main(["budget", "--ledger", "postgresql://ldp:hunter2@127.0.0.1:9/none"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach the ledger" in err[0] and "hunter2" not in err[0], err
    assert public_url("postgresql://u:pw@h:5/db") == "postgresql://u:***@h:5/db"


@pytest.mark.postgres
def test_the_environment_can_name_a_postgresql_ledger(postgres, data, tmp_path, capsys, monkeypatch):
    from pg_server import fresh_database

    url = fresh_database(postgres, f"ledger_{uuid.uuid4().hex[:12]}").replace("ldp@", "ldp:s3cret@")
    monkeypatch.setenv("LDP_DASK_LEDGER", url)  # trust authentication: the password is ignored, and never shown
    assert main(["privatize", str(data), "--column", "x", "--channel", "histogram", "--bins", "8", "--domain", "0",
                 "1", "--epsilon", "1", "--out", str(tmp_path / "s.parquet"), "--local", "--seed", "1"]) == 0
    err = capsys.readouterr().err
    assert "ε 1 per row spent" in err and "postgresql://ldp:***@" in err and "s3cret" not in err
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    assert "1 per row" in out and "s3cret" not in out


# --- partitioned releases: charged per partition, per row --------------------------------------------------
def _reserve_parts(location, parts, key_id="k", release="r"):
    from ldp_dask.ledger import Part

    led = Ledger(location)
    r = led.reserve(root="file:///d", column="x", scope="local", channel="histogram", params={}, epsilon=1.0,
                    key_id=key_id, release_key=release, parts=[Part(f"file:///d/{p}", f"key-{p}", 1.0) for p in parts])
    return led, r


def test_partitions_are_charged_per_row_not_per_night(led):
    Ledger(led).declare("d", "file:///d", 2.5, append_only=True)  # files only added: rows followed by location
    for night in range(1, 6):  # a table growing a file a night: each night releases the new file anew
        ledger, r = _reserve_parts(led, [f"day{i}" for i in range(1, night + 1)])
        settled = ledger.settle(r, "t", part_tags={f"key-day{i}": f"tag{i}" for i in range(1, night + 1)})
        ledger.commit(settled)
        assert settled.epsilon == 1.0 and not settled.reused
    (row,) = Ledger(led).summary()
    # each row was released once with fresh noise: ε 1 per row, not 5 (nor 15)
    assert row["spent"] == 1.0 and row["groups"] == {f"file:///d/day{i}": 1.0 for i in range(1, 6)}
    notes = [e["note"] for e in Ledger(led).entries()]
    assert notes == ["1 of 1 partitions released anew", "1 of 2 partitions released anew",
                     "1 of 3 partitions released anew", "1 of 4 partitions released anew",
                     "1 of 5 partitions released anew"]


def test_a_changed_partition_is_charged_again_and_only_it(led):
    Ledger(led).declare("d", "file:///d", 10.0, append_only=True)
    ledger, r = _reserve_parts(led, ["a", "b"])
    ledger.commit(ledger.settle(r, "t", part_tags={"key-a": "A", "key-b": "B"}))
    ledger, r = _reserve_parts(led, ["a", "b"])
    ledger.commit(ledger.settle(r, "t", part_tags={"key-a": "A", "key-b": "B2"}))  # b was edited
    (row,) = Ledger(led).summary()
    assert row["groups"] == {"file:///d/a": 1.0, "file:///d/b": 2.0} and row["spent"] == 2.0
    # a full release of the directory covers every row: it adds to each group
    Ledger(led).commit(Ledger(led).settle(Ledger(led).reserve(
        root="file:///d", column="x", scope="local", channel="c", params={}, epsilon=0.5, key_id="k",
        release_key="whole"), "w"))
    (row,) = Ledger(led).summary()
    assert row["groups"] == {"file:///d/a": 1.5, "file:///d/b": 2.5} and row["spent"] == 2.5


def test_a_budget_refuses_a_partition_it_cannot_afford_but_not_a_reproduced_one(led):
    Ledger(led).declare("d", "file:///d", 1.0, append_only=True)
    ledger, r = _reserve_parts(led, ["a"])
    ledger.commit(ledger.settle(r, "t", part_tags={"key-a": "A"}))
    ledger, r = _reserve_parts(led, ["a", "b"])  # a reproduced, b new: fits (ε 1 per row)
    ledger.commit(ledger.settle(r, "t", part_tags={"key-a": "A", "key-b": "B"}))
    ledger, r = _reserve_parts(led, ["a", "b"])  # both tentative: they may reproduce recorded parts
    assert r.tentative
    with pytest.raises(BudgetExceeded, match="data changed"):
        ledger.settle(r, "t", part_tags={"key-a": "A", "key-b": "B-edited"})
    ledger.abort(r)  # what the release path does: nothing was published
    assert [e["status"] for e in Ledger(led).entries()] == ["committed", "committed"]
    with pytest.raises(BudgetExceeded, match="needs ε = 0.1"):  # b's rows have spent their budget
        Ledger(led).reserve(root="file:///d/b", column="y", scope="central", channel="c", params={}, epsilon=0.1,
                            key_id="k", release_key="other")
    ledger, r = _reserve_parts(led, ["c"])  # new rows: they have spent nothing
    ledger.commit(ledger.settle(r, "t", part_tags={"key-c": "C"}))
    (row,) = Ledger(led).summary()
    assert row["spent"] == 1.0 and row["groups"] == {f"file:///d/{p}": 1.0 for p in "abc"}


def test_sibling_files_released_apart_add_up_unless_declared_append_only(tmp_path, data, capsys, led):
    _write(data / "b.parquet", 1)
    # by default rows are not followed by location (a file may be renamed or compacted into another): the
    # second file's release counts for every row of the dataset
    assert main(["budget", "set", "d", "--source", str(data), "--limit", "1", "--ledger", str(led)]) == 0
    assert _privatize(data / "a.parquet", tmp_path / "a.parquet", led, "--seed", "1") == 0
    assert _privatize(data / "b.parquet", tmp_path / "b.parquet", led, "--seed", "1") == 2
    assert "'d' has spent 1 of its budget 1" in capsys.readouterr().err
    # declared append-only (files only ever added), each row pays for the releases of its own file
    other = tmp_path / "other.sqlite"
    assert main(["budget", "set", "d", "--source", str(data), "--limit", "1", "--append-only", "--ledger",
                 str(other)]) == 0
    assert _privatize(data / "a.parquet", tmp_path / "a2.parquet", other, "--seed", "1") == 0
    assert _privatize(data / "b.parquet", tmp_path / "b2.parquet", other, "--seed", "1") == 0  # other rows
    assert _privatize(data, tmp_path / "all.parquet", other, "--seed", "1") == 2  # every row again: over
    assert "'d' has spent 1 of its budget 1" in capsys.readouterr().err
    (row,) = _spent(other, capsys)
    assert row["spent"] == 1.0 and set(row["groups"].values()) == {1.0} and row["append_only"]


def _schema_2(stmt: str) -> str:
    """A table as schema version 2 had it: without the columns versions 3, 4, 6 and 7 added (and no table of
    version 5's longitudinal states: an empty statement)."""
    if "memo_states" in stmt or any(t in stmt for t in (*INDEX_TABLES, "releases_running")):
        return "SELECT 1"  # version 8's indexes did not exist either
    for added in ("        parts TEXT,\n", "        files TEXT,\n", "        central TEXT,\n", "        table_log TEXT,\n"):
        stmt = stmt.replace(added, "")
    return stmt.replace(",\n        append_only INTEGER NOT NULL DEFAULT 0,\n        fallback TEXT,\n        "
                        "central_epsilon DOUBLE PRECISION,\n        central_delta DOUBLE PRECISION)", ")")


def test_a_schema_2_ledger_is_brought_up_to_date_with_its_releases(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as con:  # what the previous ldp_dask created
        from ldp_dask.ledger.store import TABLES as _TABLES

        for stmt in _TABLES:
            con.execute(_schema_2(stmt.format(**SQLITE_TYPES)))
        con.execute("INSERT INTO ledger_meta VALUES ('schema', '2')")
        con.execute("INSERT INTO releases (created_at, root, column_name, scope, channel, params, privacy_unit, "
                    "epsilon, epsilon_requested, key_id, release_key, outputs, token, status, lease_until) VALUES "
                    "(0, 'file:///d', 'x', 'local', 'c', '{}', 'row', 1.5, 1.5, 'k', 'r', '[]', 't', 'committed', 0)")
    assert "parts" not in {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(releases)")}
    assert Ledger(path).spent("file:///d") == 1.5
    assert _select(str(path), "SELECT value FROM ledger_meta") == (SCHEMA_VERSION,) == ("8",)
    assert _select(str(path), "SELECT count(*) FROM memo_states") == (0,)


@pytest.mark.postgres
def test_a_schema_2_postgresql_ledger_is_brought_up_to_date(postgres):
    from pg_server import fresh_database

    from ldp_dask.ledger.store import TABLES as _TABLES

    url = fresh_database(postgres, f"ledger_{uuid.uuid4().hex[:12]}")
    for stmt in _TABLES:  # what the previous ldp_dask created
        _sql(url, _schema_2(stmt.format(**POSTGRES_TYPES)))
    _sql(url, "INSERT INTO ledger_meta VALUES ('schema', '2')")
    _sql(url, "INSERT INTO releases (created_at, root, column_name, scope, channel, params, privacy_unit, epsilon, "
              "epsilon_requested, key_id, release_key, outputs, token, status, lease_until) VALUES "
              "(0, 'file:///d', 'x', 'local', 'c', '{}', 'row', 1.5, 1.5, 'k', 'r', '[]', 't', 'committed', 0)")
    assert Ledger(url).spent("file:///d") == 1.5
    assert _select(url, "SELECT value FROM ledger_meta") == (SCHEMA_VERSION,) == ("8",)
    assert _select(url, "SELECT count(*) FROM memo_states") == (0,)
    led, r = _reserve_parts(url, ["a"])  # the new column is there: a partitioned release is recorded
    led.commit(led.settle(r, "t", part_tags={"key-a": "A"}))
    assert Ledger(url).spent("file:///d") == 2.5


@pytest.mark.slow  # seconds of real processes: in make test, not test-fast
@pytest.mark.postgres
def test_a_ledger_lost_after_publishing_is_reported_as_a_pending_charge(postgres, tmp_path, data):
    """The ledger's server refuses the release's connections from the moment its charge is settled (a trigger on
    the real server locks the ledger's role out), so the outputs are published but the commit cannot reach it:
    the release says so — published, charged, pending — and the ledger's recovery commits the entry once its
    lease ends."""
    import psycopg
    from pg_server import fresh_database

    from ldp_dask.policy import LdpDaskWarning

    admin = fresh_database(postgres, f"ledger_{uuid.uuid4().hex[:12]}")
    role = f"writer_{uuid.uuid4().hex[:8]}"
    host = admin.split("@", 1)[1]
    with psycopg.connect(admin, autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN")
        con.execute(f'ALTER DATABASE "{admin.rsplit("/", 1)[1]}" OWNER TO {role}')
        con.execute(f"GRANT ALL ON SCHEMA public TO {role}")
    url = f"postgresql://{role}@{host}"
    Ledger(url)  # the tables, owned by the ledger's role
    with psycopg.connect(admin, autocommit=True) as con:
        con.execute(f"""CREATE FUNCTION lock_out() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
                        BEGIN
                          IF NEW.status = 'publishing' THEN EXECUTE 'ALTER ROLE {role} NOLOGIN'; END IF;
                          RETURN NEW;
                        END $$""")
        con.execute("CREATE TRIGGER lock_out AFTER UPDATE ON releases FOR EACH ROW EXECUTE FUNCTION lock_out()")
    out = tmp_path / "s.parquet"
    with pytest.warns(LdpDaskWarning, match="could not be reached to commit it"):
        s = ldp_dask.privatize(str(data), "x", ldp_dask.LaplaceHistogram(1.0, 8, (0, 1)), seed=1, client="local",
                               out=out, ledger=Ledger(url, lease_seconds=2))
    assert out.exists() and s.written["summary"] == str(out)  # published
    assert s.receipt.total is None and s.receipt.epsilon == 1.0
    line = s.receipt.line()
    assert "charge pending" in line and "published" in line and "commits it" in line
    with psycopg.connect(admin, autocommit=True) as con:  # the server lets the ledger in again
        con.execute(f"ALTER ROLE {role} LOGIN")
        con.execute("DROP TRIGGER lock_out ON releases")
    time.sleep(2.5)  # the lease ends: the next ledger operation commits the entry
    (entry,) = Ledger(url).entries()
    assert entry["status"] == "committed" and "stopped while publishing" in entry["note"]
    assert Ledger(url).spent(entry["root"]) == 1.0
