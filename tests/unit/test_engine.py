"""The engine's contract (exact tree, errors as values), the bounding kernel against its numpy reference, and the
privacy unit as a value with its one ε-per-unit rule."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import ldp_dask
from ldp_dask import InputDataError, LdpDaskError, Person, Row, RunOptions
from ldp_dask._kernels import smallest_ranks
from ldp_dask.engine import Task, run, tree
from ldp_dask.pipeline import local_charge
from ldp_dask.privacy import epsilon_per_unit, per_row_channel, unit_of
from ldp_dask.units import keep_contributions


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


@pytest.mark.parametrize("k", [1, 2, 5, 40])
def test_smallest_ranks_keeps_what_the_sorting_reference_keeps(k: int) -> None:
    rng = np.random.default_rng(k)
    for n, persons in ((0, 1), (1, 1), (50, 3), (5_000, 700), (20_000, 20_000)):
        person = rng.integers(0, persons, n).astype(np.uint64) * np.uint64(0x10001)  # spread over 64 bits
        rank = rng.permutation(np.arange(n, dtype=np.uint64) * np.uint64(7919))  # distinct ranks
        got = smallest_ranks(person, rank, k)
        want = keep_contributions(person, rank, k)
        assert sorted(got.tolist()) == sorted(want.tolist())
        # each person's kept rows are together, by increasing rank; the order is a function of the arrays
        p = person[got]
        starts = [i for i in range(len(p)) if i == 0 or p[i] != p[i - 1]]
        assert len(starts) == len(set(p.tolist()))
        for a, b in zip(starts, [*starts[1:], len(p)]):
            assert np.all(np.diff(rank[got[a:b]].astype(np.float64)) > 0)
        assert np.array_equal(smallest_ranks(person, rank, k), got)


def test_tagging_kernel_agrees_with_the_numpy_tags() -> None:
    """tag_and_bound computes ranks and buckets as units.ranks/units.buckets do, keeps what the sorting reference
    keeps, and orders its output by group of buckets."""
    from ldp_dask._kernels import tag_and_bound
    from ldp_dask.units import buckets, ranks, unit_keys

    rng = np.random.default_rng(5)
    keys = unit_keys(b"k" * 32, b"context")
    for n, count, groups, k in ((0, 3, 2, 1), (1, 1, 1, 1), (30_000, 7, 3, 2), (5_000, 40, 32, 3)):
        person = rng.integers(0, max(1, n // 4), n).astype(np.uint64) * np.uint64(0x9E3779B1)
        index, p, r, b, bounds = tag_and_bound(person, 17, np.uint64(keys.bucket), np.uint64(keys.rank), count,
                                               groups, k)
        rank = ranks(person, np.arange(17, 17 + n, dtype=np.uint64), keys)
        assert np.array_equal(p, person[index]) and np.array_equal(r, rank[index])
        assert np.array_equal(b, buckets(person[index], keys, count))
        assert sorted(index.tolist()) == sorted(keep_contributions(person, rank, k).tolist())
        group = (b * groups) // count
        assert np.all(np.diff(group) >= 0) and bounds[0] == 0 and bounds[-1] == len(index)
        assert np.array_equal(np.searchsorted(group, np.arange(groups + 1)), bounds)


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
