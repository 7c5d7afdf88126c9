"""Nightly releases of a Delta table charged from its log (ldp_dask.table_nights), on tables written and changed
by deltalake itself: an append is charged to the appended rows only, a compaction is free and leaves every
released number bit-identical, an update's rewritten file is read again and its rows pay again where they came
from, and the ledger follows ε per row by the log without a declaration until a release that did not follow it
(plain Parquet files of the table's directory, a night whose log was cleaned up) makes it conservative."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet  # noqa: F401 - pa.parquet
import pytest

import ldp_dask
from ldp_dask.ledger import open_ledger
from ldp_dask.source import source_root

deltalake = pytest.importorskip("deltalake")

HIST = ldp_dask.LaplaceHistogram(1.0, 8, (0.0, 1.0))


def _rows(seed: int, n: int, start: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"x": rng.beta(2, 5, n), "u": np.arange(start, start + n), "p": rng.integers(0, 300, n)})


def _files(path, version=None) -> set[str]:
    return {os.path.basename(u) for u in deltalake.DeltaTable(str(path), version=version).file_uris()}


def _charges(led: str) -> list[dict]:
    """The newest release's charges: (file name, ε) per part."""
    entry = open_ledger(led).entries()[-1]
    return [(p["root"].rsplit("/", 1)[1], p["epsilon"]) for p in json.loads(entry["parts"] or "[]")]


@pytest.fixture()
def night(tmp_path):
    path, led = tmp_path / "t", str(tmp_path / "ledger.sqlite")
    deltalake.write_deltalake(str(path), _rows(0, 3_000))
    deltalake.write_deltalake(str(path), _rows(1, 2_000, 3_000), mode="append")
    count = iter(range(1, 100))

    def release(since=None, **kw):
        i = next(count)
        out = tmp_path / f"n{i}.parquet"
        return ldp_dask.privatize(f"delta://{path}", "x", HIST, seed=3, client="local", ledger=led, incremental=True,
                                  out=out, since=since, **kw), out

    return path, led, release


def test_appends_are_charged_alone_a_compaction_is_free_an_update_pays_where_its_rows_came_from(night):
    path, led, release = night
    first, out1 = release()
    assert first.n == 5_000 and first.receipt.total == pytest.approx(1.0)
    old = _files(path)
    deltalake.write_deltalake(str(path), _rows(2, 500, 5_000), mode="append")  # version 2
    (appended,) = _files(path) - old
    two, out2 = release(out1)
    assert two.n == 5_500 and two.metadata["partitions_read"] == 1 and two.metadata["partitions_reused"] == 2
    assert _charges(led) == [(appended, pytest.approx(1.0))]  # the 500 appended rows, nothing else
    assert two.receipt.total == pytest.approx(1.0)  # ε per row followed by the log: no row paid twice
    # a compaction (no data change): nothing read, nothing charged, every number as it was
    deltalake.DeltaTable(str(path)).optimize.compact()
    assert len(_files(path)) == 1
    three, out3 = release(out2)
    assert three.metadata["partitions_read"] == 0 and three.n == 5_500
    assert all(np.array_equal(three.sums[k], two.sums[k]) for k in two.sums)
    assert open_ledger(led).entries()[-1]["epsilon"] == 0 and three.receipt.total == pytest.approx(1.0)
    (group,) = three.metadata["table"]["groups"]
    assert group["files"] == sorted(_files(path)) and set(group["partitions"]) == old | {appended}
    # a night later, the compacted file is still carried (the summary says which partitions it holds)
    four, out4 = release(out3)
    assert four.metadata["partitions_read"] == 0 and np.array_equal(four.sums["sum"], two.sums["sum"])
    # an update of 100 rows rewrites the compacted file: it is read again, and its rows pay where they came from
    deltalake.DeltaTable(str(path)).update({"x": "x * 0.5"}, predicate="u >= 5400")
    with pytest.warns(UserWarning, match="rewritten by a delete, update or merge .* charges only the persons"):
        five, out5 = release(out4)
    (rewritten,) = _files(path)
    assert five.metadata["partitions_read"] == 1 and five.n == 5_500
    assert sorted(_charges(led)) == sorted([(rewritten, pytest.approx(1.0))] +
                                           [(f, pytest.approx(1.0)) for f in old | {appended}])
    assert five.receipt.total == pytest.approx(2.0)  # a row of the first night: released fresh twice
    (item,) = [r for r in open_ledger(led).summary() if r["root"] == source_root(str(path))]
    assert item["table_log"] and item["follows_locations"]
    groups = {k.rsplit("/", 1)[1]: v for k, v in item["groups"].items()}
    assert groups[appended] == pytest.approx(2.0) and groups[rewritten] == pytest.approx(1.0)
    # another append: charged alone again, the rewritten file kept by its stamp
    deltalake.write_deltalake(str(path), _rows(3, 100, 6_000), mode="append")
    six, _ = release(out5)
    assert six.metadata["partitions_read"] == 1 and six.receipt.total == pytest.approx(2.0)
    # plain Parquet files of the table's directory: not followed by the log, so the ledger turns conservative
    plain = ldp_dask.privatize(str(path), "x", HIST, seed=3, client="local", ledger=led)
    assert plain.receipt.total == pytest.approx(1 + 1 + 0 + 0 + 1 + 1 + 1)


@pytest.mark.slow
def test_a_log_that_cannot_be_followed_falls_back_to_the_files_and_says_so(night, capsys):
    path, led, release = night
    _, out1 = release()
    deltalake.write_deltalake(str(path), _rows(2, 500, 5_000), mode="append")
    deltalake.DeltaTable(str(path)).optimize.compact()
    deltalake.DeltaTable(str(path)).create_checkpoint()  # version 3 readable from its checkpoint alone
    for version in (1, 2):  # as the log's cleanup of commits older than its retention would
        os.remove(path / "_delta_log" / f"{version:020d}.json")
    assert deltalake.DeltaTable(str(path)).version() == 3
    with pytest.warns(UserWarning, match="log cannot be followed tonight"):
        two, _ = release(out1)
    assert two.metadata["table"]["followed"] is False and two.metadata["partitions_read"] == 1
    assert two.receipt.total == pytest.approx(2.0)  # the compacted file's rows: released fresh a second time


def test_a_table_from_another_table_or_an_older_version_is_refused(night, tmp_path):
    path, led, release = night
    _, out1 = release()
    other = tmp_path / "other"
    deltalake.write_deltalake(str(other), _rows(0, 100))
    with pytest.raises(ldp_dask.LdpDaskError, match="another table"):
        ldp_dask.privatize(f"delta://{other}", "x", HIST, seed=3, client="local", ledger=led, incremental=True,
                           since=out1)
    with pytest.raises(ldp_dask.LdpDaskError, match="older"):
        ldp_dask.privatize(f"delta://{path}@0", "x", HIST, seed=3, client="local", ledger=led, incremental=True,
                           since=out1)


@pytest.mark.slow
def test_a_privacy_unit_night_carries_its_nights_through_a_compaction(night):
    path, led, release = night
    unit = dict(privacy_unit="p", max_contributions=2)
    first, out1 = release(**unit)
    deltalake.write_deltalake(str(path), _rows(2, 500, 5_000), mode="append")
    two, out2 = release(out1, **unit)
    assert two.metadata["files_read"] == 1 and two.receipt.total == pytest.approx(2.0)  # a person: both nights
    deltalake.DeltaTable(str(path)).optimize.compact()
    three, _ = release(out2, **unit)
    assert three.metadata["partitions_read"] == 0 and three.metadata["partitions_reused"] == 2
    assert np.array_equal(three.sums["sum"], two.sums["sum"]) and three.receipt.total == pytest.approx(2.0)


PLAN = """
[[statistic]]
column = "x"
target = "mean"
domain = [0, 1]

[[statistic]]
column = "c"
target = "frequencies"
categories = ["a", "b"]
"""


@pytest.mark.slow
def test_a_plans_nights_over_a_table_carry_a_compaction_and_read_a_delete_again(tmp_path):
    """Through a plan (its statistics share the rows): the compaction is free and identical for every statistic,
    and a delete rereads the file it rewrote, though delta-rs wrote its string column as ``string_view``."""
    path, led = tmp_path / "t", str(tmp_path / "ledger.sqlite")
    rng = np.random.default_rng(0)
    first = _rows(0, 3_000).append_column("c", pa.array(rng.choice(["a", "b"], 3_000)))
    deltalake.write_deltalake(str(path), first)
    deltalake.write_deltalake(str(path), _rows(1, 2_000, 3_000).append_column(
        "c", pa.array(rng.choice(["a", "b"], 2_000))), mode="append")
    (tmp_path / "plan.toml").write_text(PLAN)
    plan = ldp_dask.Plan.from_toml(tmp_path / "plan.toml")
    run = dict(seed=3, client="local", ledger=led, incremental=True)
    one = ldp_dask.release_plan(plan, f"delta://{path}", 1.0, out=tmp_path / "n1", **run)
    deltalake.DeltaTable(str(path)).optimize.compact()
    two = ldp_dask.release_plan(plan, f"delta://{path}", 1.0, out=tmp_path / "n2", since=tmp_path / "n1", **run)
    assert two.receipt.total == pytest.approx(1.0) and open_ledger(led).entries()[-1]["epsilon"] == 0
    for a, b in zip(one.statistics, two.statistics):
        assert b.summary.metadata["partitions_read"] == 0
        assert all(np.array_equal(a.summary.sums[k], b.summary.sums[k]) for k in a.summary.sums)
    deltalake.DeltaTable(str(path)).delete("u < 10")
    (rewritten,) = deltalake.DeltaTable(str(path)).file_uris()
    assert pa.types.is_string_view(pa.parquet.read_schema(rewritten.removeprefix("file://")).field("c").type)
    three = ldp_dask.release_plan(plan, f"delta://{path}", 1.0, out=tmp_path / "n3", since=tmp_path / "n2", **run)
    assert sum(s.summary.n for s in three.statistics) == 4_990 and three.receipt.total == pytest.approx(2.0)
    assert len(_charges(led)) == 3  # the rewritten file, and the two files its rows came from


@pytest.mark.slow
def test_a_log_that_calls_an_append_a_rewrite_is_caught_by_its_row_count(night):
    """A commit that removes a released file and adds another with ``dataChange: false`` claims the new file
    holds the old rows; it holds 500 rows where the old one held 3,000, so it is read and charged as a change
    (on its own location and the removed file's), not carried."""
    path, led, release = night
    _, out1 = release()
    old = _files(path)
    deltalake.write_deltalake(str(path), _rows(2, 500, 5_000), mode="append")  # version 2, edited below
    (new,) = _files(path) - old
    big = next(f for f in old if deltalake.DeltaTable(str(path), version=0).file_uris()[0].endswith(f))
    log = path / "_delta_log" / f"{2:020d}.json"
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    for x in lines:
        if "add" in x:
            x["add"]["dataChange"] = False
    lines.append({"remove": {"path": big, "dataChange": False, "deletionTimestamp": 0}})
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    assert _files(path) == (old - {big}) | {new}
    two, _ = release(out1)
    assert two.metadata["partitions_read"] == 1 and two.n == 2_500
    assert sorted(_charges(led)) == sorted([(new, pytest.approx(1.0)), (big, pytest.approx(1.0))])
