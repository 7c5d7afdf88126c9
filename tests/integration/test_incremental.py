"""Scheduled releases that grow with the data: partitioned summaries, --since, merging, windows.

A table gains a file a day (hive ``date=YYYY-MM-DD/`` directories). Each test builds its days from seeds, so
every figure below is a fixed function of the code: there is nothing statistical to tolerate, and each
assertion is exact (bit-identity of released floats, ε charged, files read).

The proof that a --since release does not read an unchanged file: its data pages are overwritten with garbage
while its footer, size and modification time are kept, so any read of it fails (a full release does, below),
yet the --since release succeeds and equals the full release made before the damage.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask import InputDataError, LaplaceHistogram, LdpDaskError
from ldp_dask.cli import main
from ldp_dask.ledger import Ledger

HIST = LaplaceHistogram(epsilon=1.0, bins=16, domain=(0.0, 1.0))
ROWS = 30_000


def _day(root, day: int, seed: int | None = None, rows: int = ROWS):
    """Write day ``day``'s file (values from ``seed``, default the day) under root/date=2026-11-DD/."""
    folder = root / f"date=2026-11-{day:02d}"
    folder.mkdir(parents=True, exist_ok=True)
    values = np.random.default_rng(day if seed is None else seed).beta(2, 5, rows)
    pq.write_table(pa.table({"x": values, "user": np.arange(rows) % 1000}), folder / "part.parquet",
                   row_group_size=10_000)
    return folder / "part.parquet"


def _damage_data_pages(path) -> None:
    """Overwrite every byte between the magic and the footer, keeping the footer, the size and the mtime."""
    st = os.stat(path)
    size = st.st_size
    with open(path, "rb") as fh:
        fh.seek(size - 8)
        footer = int.from_bytes(fh.read(4), "little")
    with open(path, "r+b") as fh:
        fh.seek(4)
        fh.write(b"\xff" * (size - 8 - footer - 4))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _release(data, led, **kw):
    return ldp_dask.privatize(str(data), "x", HIST, seed=7, client="local", ledger=str(led), **kw)


def _append_only(led, table) -> None:
    """The operator's word that the table only ever gains files: its rows are followed file by file."""
    from ldp_dask.source import source_root

    Ledger(led).declare("table", source_root(str(table)), 100.0, append_only=True)


def _groups(led) -> dict[str, float]:
    (row,) = [r for r in Ledger(led).summary() if r["groups"]]
    return {k.rsplit("/", 2)[-2]: v for k, v in row["groups"].items()}


@pytest.fixture()
def table(tmp_path):
    data = tmp_path / "table"
    _day(data, 1)
    return data


def test_night_two_reads_only_its_partition_and_equals_a_full_run(tmp_path, table):
    led = tmp_path / "ledger.sqlite"
    _append_only(led, table)
    night1 = _release(table, led, incremental=True, out=tmp_path / "n1.parquet")
    assert night1.receipt.partitions == (1, 1) and night1.metadata["partitions_read"] == 1
    _day(table, 2)
    full = ldp_dask.privatize(str(table), "x", HIST, seed=7, client="local", incremental=True)  # no ledger
    _damage_data_pages(table / "date=2026-11-01" / "part.parquet")
    with pytest.raises(ldp_dask.InputDataError, match="part.parquet' could not be read as Parquet .*thrift"):
        # any read of day 1 now fails, naming the file
        ldp_dask.privatize(str(table), "x", HIST, seed=7, client="local", incremental=True)
    night2 = _release(table, led, since=tmp_path / "n1.parquet", out=tmp_path / "n2.parquet")
    s = night2
    assert (s.metadata["partitions_read"], s.metadata["partitions_reused"]) == (1, 1)
    assert s.same_release(full) and s.n == 2 * ROWS
    assert all(np.array_equal(a.sums["sum"], b.sums["sum"]) for a, b in zip(s.partitions, full.partitions))
    # the file as written carries the same totals and partitions, under a MAC that verifies with the key
    back = ldp_dask.read_summary(tmp_path / "n2.parquet", key=ldp_dask.noise.resolve_secret(seed=7))
    assert back.integrity == "verified" and back.same_release(full) and len(back.partitions) == 2
    # the ledger charged night 2 for day 2's rows only: ε 1 per row, each row released once (day 1's data pages
    # were damaged keeping its size and modification time: the append-only check sees the file as it was)
    assert night2.receipt.partitions == (1, 1) and night2.receipt.epsilon == 1.0
    assert _groups(led) == {"date=2026-11-01": 1.0, "date=2026-11-02": 1.0}
    assert night2.receipt.total == 1.0 and not night2.receipt.note


def test_an_edited_partition_gets_fresh_noise_and_is_charged_a_touched_one_is_free(tmp_path, table):
    led = tmp_path / "ledger.sqlite"
    _append_only(led, table)
    _day(table, 2)
    first = _release(table, led, incremental=True, out=tmp_path / "a.parquet")
    # day 2 touched (a new modification time, same bytes): read again, reproduces its sums, costs nothing
    path2 = table / "date=2026-11-02" / "part.parquet"
    os.utime(path2, (1_800_000_000, 1_800_000_000))
    touched = _release(table, led, since=tmp_path / "a.parquet", out=tmp_path / "b.parquet")
    assert touched.metadata["partitions_read"] == 1 and touched.receipt.partitions == (0, 1)
    assert touched.same_release(first) and touched.receipt.epsilon == 0.0
    # ... but a file of an append-only table changed (its version at least): its rows are no longer followed
    assert "changed since it was charged" in touched.receipt.note
    # day 1 edited (new values, same rows and row groups): fresh noise, charged on day 1's rows only
    _day(table, 1, seed=99)
    edited = _release(table, led, since=tmp_path / "b.parquet", out=tmp_path / "c.parquet")
    assert edited.metadata["partitions_read"] == 1
    assert not np.array_equal(edited.partitions[0].sums["sum"], first.partitions[0].sums["sum"])
    assert np.array_equal(edited.partitions[1].sums["sum"], first.partitions[1].sums["sum"])
    (row,) = Ledger(led).summary()  # counted conservatively: each release that released a file anew, every row
    assert row["spent"] == 2.0 and row["fallback"] and not row["groups"]
    # and it is what a full release of the edited table gives
    assert edited.same_release(ldp_dask.privatize(str(table), "x", HIST, seed=7, client="local", incremental=True))


def test_a_partitioned_release_on_the_cluster_equals_the_one_in_process(tmp_path, table, cluster):
    _day(table, 2)
    _day(table, 3, rows=25_000)
    local = ldp_dask.privatize(str(table), "x", HIST, seed=7, client="local", incremental=True,
                               out=tmp_path / "local.parquet")
    on_cluster = ldp_dask.privatize(str(table), "x", HIST, seed=7, client=cluster, incremental=True)
    assert on_cluster.same_release(local) and len(on_cluster.partitions) == 3
    _day(table, 4)
    since = ldp_dask.privatize(str(table), "x", HIST, seed=7, client=cluster, since=tmp_path / "local.parquet")
    assert since.metadata["partitions_read"] == 1
    assert since.same_release(ldp_dask.privatize(str(table), "x", HIST, seed=7, client="local", incremental=True))


def test_a_series_is_extended_only_by_the_same_key_channel_and_options(tmp_path, table):
    first = tmp_path / "s.parquet"
    ldp_dask.privatize(str(table), "x", HIST, seed=7, client="local", incremental=True, out=first)
    plain = tmp_path / "plain.parquet"
    ldp_dask.privatize(str(table), "x", HIST, seed=7, client="local", out=plain)
    cases = [
        (dict(seed=8, since=first), "key id"),
        (dict(seed=7, since=first, channel=LaplaceHistogram(1.0, 32, (0.0, 1.0))), "same channel and parameters"),
        (dict(seed=7, since=first, clip=True), "clipping"),
        (dict(seed=7, since=plain), "keeps no partitions"),
        (dict(seed=7, incremental=True, mode="rows", rows_path=tmp_path / "rows"), "summary mode only"),
        (dict(seed=7, since=first, privacy_unit="user", ledger=False), "privacy unit"),
    ]
    for kw, message in cases:
        channel = kw.pop("channel", HIST)
        mode = kw.pop("mode", "summary")
        with pytest.raises(LdpDaskError, match=message):
            ldp_dask.privatize(str(table), "x", channel, mode, client="local", **kw)
    with pytest.raises(LdpDaskError, match="needs a Parquet source"):
        ldp_dask.privatize(np.random.default_rng(0).random(100), channel=HIST, seed=7, incremental=True)
    # a kept sum altered after the release: the totals no longer add up; altered with its total too (the sums
    # are integers here, so both stay exact), the MAC no longer matches. Either way nothing is reused
    original = pq.read_table(first)
    stat, index = original.column("statistic").to_pylist(), original.column("index").to_numpy()
    last = len(stat) - 1  # a row of partition 0 (the partition rows follow the totals')
    total_row = next(i for i in range(len(stat)) if stat[i] == stat[last] and index[i] == index[last])
    for rows, message in (([last], "not the sum of its partitions"), ([last, total_row], "modified after its release")):
        values = original.column("value").to_numpy().copy()
        values[rows] += 1.0
        pq.write_table(original.set_column(original.column_names.index("value"), "value", pa.array(values)), first)
        with pytest.raises(InputDataError, match=message):
            ldp_dask.privatize(str(table), "x", HIST, seed=7, client="local", since=first)


def test_merging_night_summaries_gives_the_full_release_and_refuses_overlap(tmp_path, table):
    _day(table, 2)
    _day(table, 3)
    nights = []
    for day in (1, 2, 3):  # each night released on its own directory
        out = tmp_path / f"night{day}.parquet"
        ldp_dask.privatize(str(table / f"date=2026-11-{day:02d}"), "x", HIST, seed=7, client="local",
                           incremental=True, out=out)
        nights.append(str(out))
    full = ldp_dask.privatize(str(table), "x", HIST, seed=7, client="local", incremental=True,
                              out=tmp_path / "full.parquet")
    key = ldp_dask.noise.resolve_secret(seed=7)
    merged = ldp_dask.merge_summaries(nights, out=tmp_path / "merged.parquet", key=key)
    assert merged.same_release(full) and merged.n == 3 * ROWS
    assert ldp_dask.read_summary(tmp_path / "merged.parquet", key=key).integrity == "verified"
    # the last two days, from kept sums: what a release of those two directories' files gives
    last2 = ldp_dask.merge_summaries([str(tmp_path / "full.parquet")], window="2d", key=key)
    assert last2.same_release(ldp_dask.merge_summaries(nights[1:], key=key)) and last2.n == 2 * ROWS
    with pytest.raises(LdpDaskError, match="summaries 1 and 2 overlap"):
        ldp_dask.merge_summaries([nights[0], str(tmp_path / "full.parquet")], key=key)
    with pytest.raises(LdpDaskError, match="same channel and parameters"):
        other = ldp_dask.privatize(str(table / "date=2026-11-01"), "x", LaplaceHistogram(2.0, 16, (0.0, 1.0)),
                                   seed=7, client="local", incremental=True)
        ldp_dask.merge_summaries([other, nights[1]], key=key)
    with pytest.raises(LdpDaskError, match="at least two"):
        ldp_dask.merge_summaries(nights[:1])
    # non-partitioned summaries merge too, by their roots, and refuse the same overlap
    plain = [ldp_dask.privatize(str(table / f"date=2026-11-{d:02d}"), "x", HIST, seed=7, client="local")
             for d in (1, 2)]
    assert ldp_dask.merge_summaries(plain).n == 2 * ROWS
    with pytest.raises(LdpDaskError, match="overlap"):
        ldp_dask.merge_summaries([plain[0], ldp_dask.privatize(str(table), "x", HIST, seed=7, client="local")])


def test_a_window_releases_the_last_days_and_charges_only_new_ones(tmp_path, table):
    led = tmp_path / "ledger.sqlite"
    _append_only(led, table)
    for day in (2, 3, 4):
        _day(table, day)
    first = _release(table, led, window="2d", out=tmp_path / "w1.parquet")
    assert [p.path for p in first.partitions] == ["date=2026-11-03/part.parquet", "date=2026-11-04/part.parquet"]
    assert first.n == 2 * ROWS and _groups(led) == {"date=2026-11-03": 1.0, "date=2026-11-04": 1.0}
    _day(table, 5)
    second = _release(table, led, window="2d", since=tmp_path / "w1.parquet", out=tmp_path / "w2.parquet")
    s = second
    assert [p.path for p in s.partitions] == ["date=2026-11-04/part.parquet", "date=2026-11-05/part.parquet"]
    assert (s.metadata["partitions_read"], s.metadata["partitions_reused"]) == (1, 1)
    assert np.array_equal(s.partitions[0].sums["sum"], first.partitions[1].sums["sum"])  # day 4 kept, not redrawn
    assert _groups(led) == {"date=2026-11-03": 1.0, "date=2026-11-04": 1.0, "date=2026-11-05": 1.0}
    for bad in ("30", "0d", "1w", "-3d"):
        with pytest.raises(LdpDaskError, match="'window' parameter"):
            _release(table, led, window=bad)
    flat = tmp_path / "flat"
    flat.mkdir()
    pq.write_table(pa.table({"x": [0.5, 0.25]}), flat / "a.parquet")
    with pytest.raises(LdpDaskError, match="date directory"):
        _release(flat, led, window="3d")


def test_the_cli_series_and_budget_per_partition(tmp_path, table, capsys):
    led = str(tmp_path / "ledger.sqlite")
    assert main(["budget", "set", "events", "--source", str(table), "--limit", "4", "--append-only", "--ledger",
                 led]) == 0
    assert "append-only" in capsys.readouterr().out
    base = ["privatize", str(table), "--column", "x", "--channel", "histogram", "--bins", "16", "--domain", "0", "1",
            "--epsilon", "1", "--local", "--seed", "7", "--ledger", led, "--json"]
    assert main([*base, "--incremental", "--out", str(tmp_path / "n1.parquet")]) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["partitions_read"], first["partitions_charged"], first["epsilon_charged"]) == (1, 1, 1.0)
    _day(table, 2)
    assert main([*base, "--since", str(tmp_path / "n1.parquet"), "--out", str(tmp_path / "n2.parquet")]) == 0
    second = json.loads(capsys.readouterr().out)
    assert (second["partitions_read"], second["partitions_reused"], second["partitions_charged"]) == (1, 1, 1)
    assert main(["budget", "--ledger", led]) == 0
    text = capsys.readouterr().out
    assert "1 per row of budget 4" in text and "per partition: 2 charged inside it, ε per row from 1 to 1" in text
    assert "append-only: ε per row followed file by file" in text
    assert "date=2026-11-02/part.parquet: 1" in text
    # merge refuses overlapping data in one line, exit 2
    assert main(["merge", str(tmp_path / "n1.parquet"), str(tmp_path / "n2.parquet"), "--out",
                 str(tmp_path / "m.parquet"), "--seed", "7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "overlap" in err[0] and not (tmp_path / "m.parquet").exists()
    assert main(["merge", str(tmp_path / "n2.parquet"), "--window", "1d", "--out", str(tmp_path / "w.parquet"),
                 "--seed", "7"]) == 0
    assert "took a window of 1 summary (last 1d)" in capsys.readouterr().out
    w = ldp_dask.read_summary(tmp_path / "w.parquet", key=ldp_dask.noise.resolve_secret(seed=7))
    assert w.n == ROWS and w.integrity == "verified"
    assert [p.path for p in w.partitions] == ["date=2026-11-02/part.parquet"]


def test_parameters_that_follow_n_are_flagged_before_the_series_breaks(tmp_path, table, capsys):
    argv = ["privatize", str(table), "--column", "x", "--channel", "histogram", "--domain", "0", "1", "--epsilon",
            "1", "--local", "--seed", "7", "--no-ledger", "--incremental"]
    assert main([*argv, "--out", str(tmp_path / "auto.parquet")]) == 0  # bins chosen from n
    assert "chosen from n (bins)" in capsys.readouterr().err
    assert main([*argv, "--bins", "16", "--out", str(tmp_path / "fixed.parquet")]) == 0
    assert "warning" not in capsys.readouterr().err
    _day(table, 2, rows=4 * ROWS)  # the table grew: 'auto' now picks other bins, and the series is refused
    assert main([*argv[:-1], "--since", str(tmp_path / "auto.parquet"), "--out", str(tmp_path / "b.parquet")]) == 2
    assert "bins='auto'" in capsys.readouterr().err


def test_the_totals_are_the_correctly_rounded_sum_of_the_partitions():
    """Against math.fsum, coordinate by coordinate, on values whose float sum depends on the order."""
    import math

    from ldp_dask.summary import Partition, sum_partitions

    rng = np.random.default_rng(3)
    parts = [Partition(f"p{i}", 1, ((0,),), "0", "0",
                       {"sum": rng.normal(0, 1, 50) * 10.0 ** rng.integers(-8, 12, 50)}) for i in range(37)]
    total = sum_partitions(parts)["sum"]
    expected = [math.fsum(p.sums["sum"][j] for p in parts) for j in range(50)]
    assert total.tolist() == expected
    assert total.tolist() == sum_partitions(parts[::-1])["sum"].tolist()
    assert any(sum(p.sums["sum"][j] for p in parts) != expected[j] for j in range(50))  # naive sums differ


def test_a_corrected_old_file_is_named_in_the_refusal_and_can_be_skipped(tmp_path, table, capsys):
    # a budget that holds two nights of new days; day 1 is corrected before night 2: releasing it again would
    # cost a third ε on every row (the correction makes the table no longer append-only as the ledger sees it).
    # The refusal names the file and the flag; --skip-changed releases day 2 with day 1's earlier sums
    led = str(tmp_path / "ledger.sqlite")
    assert main(["budget", "set", "events", "--source", str(table), "--limit", "1", "--append-only", "--ledger",
                 led]) == 0
    base = ["privatize", str(table), "--column", "x", "--channel", "histogram", "--bins", "16", "--domain", "0", "1",
            "--epsilon", "1", "--local", "--seed", "7", "--ledger", led]
    assert main([*base, "--incremental", "--out", str(tmp_path / "n1.parquet")]) == 0
    _day(table, 1, seed=99)  # the correction
    _day(table, 2)
    capsys.readouterr()
    night2 = [*base, "--since", str(tmp_path / "n1.parquet"), "--out", str(tmp_path / "n2.parquet")]
    assert main(night2) == 2
    err = capsys.readouterr().err
    assert "date=2026-11-01/part.parquet changed since the --since summary" in err and "--skip-changed" in err
    assert not (tmp_path / "n2.parquet").exists()
    assert main([*night2, "--skip-changed"]) == 2  # the ledger already counts the table conservatively: day 2 too
    assert "has spent 1 of its budget 1" in capsys.readouterr().err
    # with room in the budget, --skip-changed releases day 2 alone and warns about day 1
    assert main(["budget", "set", "events", "--source", str(table), "--limit", "2", "--ledger", led]) == 0
    capsys.readouterr()
    assert main([*night2, "--skip-changed"]) == 0
    out = capsys.readouterr()
    assert "not released again (--skip-changed): date=2026-11-01/part.parquet" in out.err
    s = ldp_dask.read_summary(tmp_path / "n2.parquet")
    assert (s.metadata["partitions_read"], s.metadata["partitions_reused"]) == (1, 1)


def test_merge_refuses_the_same_file_under_another_name(tmp_path, table):
    # a hard link (or a byte copy) of day 1 in another directory: the roots are disjoint, the rows are not
    other = tmp_path / "other"
    other.mkdir()
    os.link(table / "date=2026-11-01" / "part.parquet", other / "linked.parquet")
    shutil.copy(table / "date=2026-11-01" / "part.parquet", tmp_path / "copied.parquet")
    for incremental in (True, False):  # kept partitions, or a release of the whole source
        def release(source, incremental=incremental):
            return ldp_dask.privatize(str(source), "x", HIST, seed=7, client="local", ledger=False,
                                      incremental=incremental)

        a = release(table)
        for twin in (other, tmp_path / "copied.parquet"):
            with pytest.raises(LdpDaskError, match="same content"):
                ldp_dask.merge_summaries([a, release(twin)])
        fresh = tmp_path / f"fresh-{incremental}"
        _day(fresh, 2)  # other rows: merged
        assert ldp_dask.merge_summaries([a, release(fresh)]).n == 2 * ROWS
