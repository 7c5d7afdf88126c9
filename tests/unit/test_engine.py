"""The engine's contract (exact tree, errors as values), the bounding kernel against its numpy reference, and the
privacy unit as a value with its one ε-per-unit rule."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ldp_dask
from ldp_dask import InputDataError, LdpDaskError, Person, Row, RunOptions
from ldp_dask._kernels import bound_cells, tag_and_bound
from ldp_dask.engine import BATCH_ROWS, SHUFFLE_FAN, Task, batches, run, runs, tree
from ldp_dask.persons import GROUP_ROWS, _group_plan, _map_plan
from ldp_dask.pipeline import local_charge
from ldp_dask.privacy import epsilon_per_unit, per_row_channel, unit_of
from ldp_dask.units import Cells, bucket_values, cells_of, keep_contributions, person_ids, ranks, tag_rows, unit_keys


def _square(task: Task, shared: int) -> dict[str, int]:
    return {"v": (task.index + shared) ** 2, "n": 1}


def _add(*accs: dict[str, int]) -> dict[str, int]:
    return {"v": sum(a["v"] for a in accs), "n": sum(a["n"] for a in accs)}


def _fails_on_three(task: Task, shared: int) -> object:
    if task.index == 3:
        return ldp_dask.TaskError("part-3.parquet: the column holds NaN")
    return _square(task, shared)


def test_run_in_process_is_the_same_root_for_every_fan_in() -> None:
    tasks = [Task(i, i, i + 1) for i in range(37)]
    expected = {"v": sum((i + 5) ** 2 for i in range(37)), "n": 37}
    for split_every in (2, 3, 8, 64):
        assert run(tasks, _square, 5, _add, RunOptions(client="local", split_every=split_every)) == expected


def test_tree_visits_each_leaf_once() -> None:
    calls = []

    def combine(*xs: int) -> int:
        calls.append(len(xs))
        return sum(xs)

    assert tree(list(range(10)), combine, 3) == 45
    assert sum(calls) == 10 + len(calls) - 1  # every leaf and every inner node is an input once


def test_a_task_error_reaches_the_driver_as_input_data_error() -> None:
    tasks = [Task(i, i, i + 1) for i in range(6)]
    with pytest.raises(InputDataError, match="part-3.parquet: the column holds NaN"):
        run(tasks, _fails_on_three, 0, _add, RunOptions(client="local"))


def test_task_error_pickles_by_value() -> None:
    e = ldp_dask.TaskError("x: y")
    assert pickle.loads(pickle.dumps(e)) == e and str(e) == "x: y"


def _in_cells(person: np.ndarray, rank: np.ndarray, cells: Cells) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(cells_of(person, cells.key, cells.count), kind="stable")
    return person[order], rank[order]


@pytest.mark.parametrize("k", [1, 2, 5, 16])
def test_bound_cells_keeps_what_the_sorting_reference_keeps_in_an_order_of_the_rows_alone(k: int) -> None:
    """The reduce-side kernel keeps each person's k smallest ranks (the sorting reference), and its output, rows
    and order, is the same however the rows are cut into parts and whatever order each part lists them in."""
    rng = np.random.default_rng(k)
    for n, persons, cut in ((0, 1, 1), (1, 1, 1), (50, 3, 2), (5_000, 700, 3), (20_000, 20_000, 5)):
        cells = Cells(key=int(rng.integers(1 << 62)), buckets=3, per_bucket=7)
        person = rng.integers(0, persons, n).astype(np.uint64) * np.uint64(0x10001)  # spread over 64 bits
        rank = rng.permutation(np.arange(n, dtype=np.uint64) * np.uint64(7919))  # distinct ranks
        outputs = []
        for trial in range(3):
            shuffled = rng.permutation(n)
            edges = np.sort(rng.integers(0, n + 1, cut - 1)) if trial else np.array([], int)
            pieces = [_in_cells(person[idx], rank[idx], cells) for idx in np.split(shuffled, edges)]
            p = np.concatenate([a for a, _ in pieces])
            r = np.concatenate([b for _, b in pieces])
            bounds = np.cumsum([0] + [len(a) for a, _ in pieces])
            keep, starts = bound_cells(p, r, bounds, np.uint64(cells.key), cells.count, 0, cells.count, k,
                                       np.full(n + 3, -1, np.int64))
            assert len(starts) == cells.count + 1 and starts[-1] == len(keep)
            want = keep_contributions(p, r, k)
            assert sorted(zip(p[keep].tolist(), r[keep].tolist())) == sorted(zip(p[want].tolist(), r[want].tolist()))
            kept_cells = cells_of(p[keep], cells.key, cells.count)
            assert np.all(np.diff(kept_cells) >= 0)
            assert np.array_equal(np.searchsorted(kept_cells, np.arange(cells.count + 1)), starts)
            outputs.append((p[keep].tolist(), r[keep].tolist()))
        assert outputs[0] == outputs[1] == outputs[2]


def test_bound_cells_reports_rows_out_of_cell_order() -> None:
    cells = Cells(key=9, buckets=2, per_bucket=4)
    person = np.arange(1, 200, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    c = cells_of(person, cells.key, cells.count)
    assert np.any(np.diff(c) < 0)  # these rows are not in cell order: the caller must sort them
    keep, starts = bound_cells(person, person, np.array([0, len(person)]), np.uint64(cells.key), cells.count, 0,
                               cells.count, 1, np.empty(len(person), np.int64))
    assert len(starts) == 0
    with pytest.raises(ValueError, match="out holds fewer"):
        bound_cells(person, person, np.array([0, len(person)]), np.uint64(cells.key), cells.count, 0, cells.count, 1,
                    np.empty(len(person) - 1, np.int64))


def test_tagging_kernel_agrees_with_the_numpy_tags() -> None:
    """tag_and_bound computes ranks and cells as units.ranks/units.cells_of do, keeps what the sorting reference
    keeps, and emits its rows in cell order with each cell's start."""
    rng = np.random.default_rng(5)
    keys = unit_keys(b"k" * 32, b"context")
    for n, count, per, k in ((0, 3, 2, 1), (1, 1, 1, 1), (30_000, 7, 3, 2), (5_000, 40, 32, 3), (9_000, 5, 9, 1)):
        person = rng.integers(0, max(1, n // 4), n).astype(np.uint64) * np.uint64(0x9E3779B1)
        cells = Cells(keys.bucket, count, per)
        index, p, r, starts = tag_and_bound(person, 17, np.uint64(keys.bucket), np.uint64(keys.rank), cells.count,
                                            k, np.empty((n + 5, 2), np.uint64), np.full(n + 3, -7, np.int32))
        rank = ranks(person, np.arange(17, 17 + n, dtype=np.uint64), keys)
        assert np.array_equal(p, person[index]) and np.array_equal(r, rank[index])
        assert sorted(index.tolist()) == sorted(keep_contributions(person, rank, k).tolist())
        c = cells_of(p, keys.bucket, cells.count)
        assert np.all(np.diff(c) >= 0)
        assert np.array_equal(np.searchsorted(c, np.arange(cells.count + 1)), starts)
        # a cell's bucket is the person's hash scaled to the buckets: the cells nest in the buckets
        assert np.array_equal(c // per, cells_of(p, keys.bucket, count))
    with pytest.raises(ValueError, match="scratch holds fewer"):
        tag_and_bound(person, 0, np.uint64(1), np.uint64(2), 4, 1, np.empty((n, 2), np.uint64), np.empty(n - 1, np.int32))


def test_a_reduce_keeps_nothing_in_the_buffers_it_reuses() -> None:
    """A reduce gathers its parts into this thread's scratch buffers: the values it returns are its own, untouched
    by the next reduce on the same thread, and equal to those of a reduce that reused nothing."""
    rng = np.random.default_rng(11)
    keys = unit_keys(b"k" * 32, b"context")
    cells = Cells(keys.bucket, 4, 3)

    def parts(n: int) -> list[dict[str, np.ndarray]]:  # two map tasks' group 0 of 1
        person = person_ids(rng.integers(0, n // 3, n))
        value = rng.random(n)
        return [tag_rows(value[a:b], person[a:b], a, keys, cells, 1, 2)[0] for a, b in ((0, n // 2), (n // 2, n))]

    first, second = parts(40_000), parts(9_000)
    got = bucket_values(first, 2, cells, 0, 4, False)
    want = [v.copy() for v in got]
    bucket_values(second, 2, cells, 0, 4, False)  # same thread: same buffers, fewer rows
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    from ldp_dask import units

    saved, units.SCRATCH_BYTES = units.SCRATCH_BYTES, 0  # nothing reused: fresh arrays throughout
    try:
        fresh = bucket_values(first, 2, cells, 0, 4, False)
    finally:
        units.SCRATCH_BYTES = saved
    assert all(np.array_equal(a, b) for a, b in zip(fresh, want)) and sum(map(len, want)) > 0


def test_scratch_is_kept_per_thread_within_its_bound() -> None:
    """A thread's scratch buffers are reused while they fit, never shared with another thread, and never held past
    SCRATCH_BYTES in all: a request beyond that gets a fresh array that is not kept."""
    import threading

    from ldp_dask import units

    saved, units.SCRATCH_BYTES = units.SCRATCH_BYTES, 1 << 21
    seen: dict[str, np.ndarray] = {}

    def work(tag: str) -> None:
        a = units.scratch("a", 100_000)
        assert np.shares_memory(a, units.scratch("a", 200_000))  # room to grow: 2^18 rows of 8 bytes, the bound
        b1, b2 = units.scratch("b", 10), units.scratch("b", 10)
        assert not np.shares_memory(b1, b2) and len(b1) == 10  # over the bound in all: fresh, not kept
        big = units.scratch("c", 1 << 20, np.uint8, width=4)
        assert big.shape == (1 << 20, 4) and not np.shares_memory(big, units.scratch("c", 1 << 20, np.uint8, 4))
        seen[tag] = a

    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in "xy"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        units.SCRATCH_BYTES = saved
    assert set(seen) == {"x", "y"} and not np.shares_memory(seen["x"], seen["y"])


def test_group_plan_gives_each_worker_thread_a_group_of_buckets() -> None:
    for buckets, rows, threads, want in ((8, 8 << 20, 1, 2), (8, 8 << 20, 2, 2), (8, 8 << 20, 16, 8),
                                         (8, 100, 3, 3), (1, 100 * GROUP_ROWS, 4, 1), (1000, 3 * GROUP_ROWS, 2, 3),
                                         (1000, 10**12, 2, SHUFFLE_FAN), (0, 0, 1, 1)):
        assert _group_plan(buckets, rows, threads) == want, (buckets, rows, threads)


def test_integer_person_ids_are_a_bijection_at_every_width() -> None:
    from ldp_dask._kernels import _PERSON_KEY
    from ldp_dask.units import _mix

    v = np.array([0, 1, -1, 2**40, -(2**62), 2**63 - 1], dtype=np.int64)
    ids = person_ids(v)
    assert np.array_equal(ids, _mix(v.view(np.uint64), int(_PERSON_KEY)))  # the numpy reference
    assert len(set(ids.tolist())) == len(v)
    assert np.array_equal(person_ids(v[:3].astype(np.int32)), ids[:3])
    assert np.array_equal(person_ids(np.array([0, 1], np.uint8)), ids[:2])


def test_map_plan_gives_each_worker_thread_a_run_of_pieces() -> None:
    from ldp_dask.source import Piece

    pieces = [Piece(index=i, num_rows=r, start=0, stop=r) for i, r in enumerate([5, 5, 5, 5, 1, 1, 1, 1, 8])]
    for threads in (1, 2, 3, 4, 100):
        tasks, rows = _map_plan(pieces, threads)
        assert [t.index for t in tasks] == list(range(len(tasks)))
        assert tasks[0].start == 0 and tasks[-1].stop == len(pieces)
        assert all(a.stop == b.start for a, b in zip(tasks, tasks[1:]))
        assert sum(rows) == 32 and len(tasks) == min(threads, len(pieces))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=60), st.integers(1, 70))
def test_runs_cut_the_tasks_into_near_equal_contiguous_runs(weights: list[int], most: int) -> None:
    cuts = runs(weights, most)
    assert len(cuts) == min(most, len(weights))
    assert cuts[0][0] == 0 and cuts[-1][1] == len(weights)
    assert all(a < b for a, b in cuts) and all(x[1] == y[0] for x, y in zip(cuts, cuts[1:]))
    # a run closes once it reaches its share (or when the runs still to open need every task left), so no
    # run holds more than a share and one task beyond it
    share = sum(weights) / len(cuts)
    assert all(sum(weights[a:b]) <= share + max(weights) for a, b in cuts)


def test_batches_are_as_many_per_worker_thread_as_keep_them_under_batch_rows() -> None:
    rows = [BATCH_ROWS // 8] * 128  # 16 BATCH_ROWS in all
    assert len(batches(rows, 16)) == 16 and len(batches(rows, 1)) == 16 and len(batches(rows, 32)) == 32
    assert len(batches(rows, 3)) == 18  # 6 per thread: the same number for every thread
    assert len(batches([1 << 20] * 3, 16)) == 3  # never more than the tasks
    assert len(batches([BATCH_ROWS] * 40, 2)) == 40
    assert batches([5, 5, 5], 0) == [(0, 1), (1, 2), (2, 3)]  # no worker yet: the cluster may grow to any size


def test_a_batch_folds_its_tasks_and_passes_an_error_on() -> None:
    from ldp_dask.engine import _Batch, _Guarded

    tasks = tuple(Task(i, i, i + 1) for i in range(6))
    assert _Batch(_square, _Guarded(_add))(1, 3, (tasks, 5)) == {"v": 36 + 49, "n": 2}
    error = ldp_dask.TaskError("part-3.parquet: the column holds NaN")
    for start in (0, 3):  # the error in the middle of a batch, or first
        assert _Batch(_fails_on_three, _Guarded(_add))(start, 6, (tasks, 5)) == error


def test_unit_values_and_their_public_spelling() -> None:
    assert RunOptions().unit == Row() and RunOptions().privacy_unit is None
    o = RunOptions.of(privacy_unit="user", max_contributions=3)
    assert o.unit == Person("user", 3) and o.max_contributions == 3
    assert RunOptions.of(o, max_contributions=2).unit == Person("user", 2)
    assert RunOptions.of(o, privacy_unit=None, max_contributions=1).unit == Row()
    with pytest.raises(LdpDaskError, match="'max_contributions' parameter needs 'privacy_unit'"):
        unit_of(None, 2)
    with pytest.raises(LdpDaskError, match="The 'max_contributions' parameter must be"):
        Person("user", 0)
    with pytest.raises(LdpDaskError, match="must be a column name"):
        Person("")
    with pytest.raises(LdpDaskError, match="either 'unit' or"):
        RunOptions.of(unit=Row(), privacy_unit="user")


def test_epsilon_per_unit_is_k_times_what_a_kept_row_spends() -> None:
    ch = ldp_dask.WaveletLaplace(1.0, (0.0, 1.0), j0=2, j1=4)  # spends less than requested (tight)
    for k in (1, 3):
        row = per_row_channel(ch, k)
        assert row.epsilon == pytest.approx(1.0 / k)
        per_unit = epsilon_per_unit(row, Person("u", k))
        assert per_unit == pytest.approx(k * max(row.epsilon, row.epsilon_spent()))
        assert per_unit <= 1.0 + 1e-12  # the budget asked for, per person
        opts = RunOptions.of(privacy_unit="u", max_contributions=k)
        assert local_charge(ch, "summary", opts).epsilon == per_unit
