"""The person shuffle: every privacy-unit release's rows bounded by person (docs/privacy.md, "Privacy unit").

:func:`map_units` tags each row with its person's keyed hash, keeps each person's k rows of smallest keyed rank
(:func:`ldp_dask.units.kept_index`), moves only the kept rows to their bucket's worker
(:func:`ldp_dask.engine.shuffle`) and hands each bucket to a handler: a channel's noisy sums
(:func:`ldp_dask.pipeline.run_channel`), a longitudinal night's memoized reports, a plan's statistics, the central
mechanisms' exact counts (:mod:`ldp_dask.central`). :func:`estimate_persons` counts the persons of a table from a
sketch of its unit column (one pass, nothing released). Nothing here knows statistics.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from . import engine
from ._validation import LdpDaskError, TaskError
from .engine import SHUFFLE_FAN, LargeShuffle, Task, run, runs, shuffle, task_rows, tasks_of
from .noise import Secret
from .options import RunOptions
from .source import Dataset, Piece
from .tasks import BucketRelease, Tagging, release_group, tag_task
from .units import plan_cells, unit_keys

__all__ = ["map_units", "estimate_persons", "count_persons", "MAP_TASK_ROWS", "GROUP_ROWS"]


#: A privacy-unit release's map tasks read about this many rows at most (each holds about 80 bytes a row while it
#: bounds them); a cluster gets at least one map task per worker thread.
MAP_TASK_ROWS = 1 << 22
#: ... and its buckets are released in groups of at most about this many input rows, one group per worker thread or
#: more (a reduce task costs a few ms, and holds about 40 bytes a kept row).
GROUP_ROWS = 1 << 22


def _map_plan(pieces: Sequence[Piece], parallelism: int) -> tuple[list[Task], list[int]]:
    """The map tasks of a privacy-unit release: contiguous runs of pieces of near-equal rows, one per worker
    thread or more when a run would pass :data:`MAP_TASK_ROWS` (at most :data:`~ldp_dask.engine.SHUFFLE_FAN`).
    Fewer, larger map tasks bound more rows where they are read, so fewer cross the cluster; how the tasks cut the
    rows does not change the release (:func:`ldp_dask.units.kept_index`)."""
    rows = [p.num_rows for p in pieces]
    parts = min(SHUFFLE_FAN, max(parallelism, -(-sum(rows) // MAP_TASK_ROWS), 1))
    tasks = [Task(i, a, b) for i, (a, b) in enumerate(runs(rows, parts) if pieces else [(0, 0)])]
    return tasks, [task_rows(pieces, t) for t in tasks]


def _group_plan(buckets: int, rows: int, parallelism: int) -> int:
    """How many groups of consecutive buckets a privacy-unit release reduces: one per worker thread, or more when a
    group would pass :data:`GROUP_ROWS` input rows; at most one per bucket and :data:`~ldp_dask.engine.SHUFFLE_FAN`.
    How the groups cut the buckets does not change the release (each bucket is bounded and released alone)."""
    return max(1, min(buckets, SHUFFLE_FAN, max(parallelism, -(-rows // GROUP_ROWS))))


def map_units(dataset: Dataset, secret: Secret, context: dict[str, Any], handler: Any, combine: Any,
              options: RunOptions, *, keys: list[bytes] | None = None, categorical: bool = False,
              in_process: bool = False, direct_rows: int | None = None, persons: bool = False,
              reader: Any = None) -> Any:
    """Bound each person's rows, then ``handler(values, where, j, keys[j])`` on bucket j; ``combine`` the results.
    ``reader`` (default the dataset's) reads the values: a :class:`~ldp_dask.reading.Columns` makes them whole
    rows of several columns (a plan's).

    There is one bucket per task of ``dataset`` (:attr:`~ldp_dask.source.Dataset.tasks`); ``keys`` (optional)
    gives each bucket its noise key (None is passed without). The bucket and rank keys are derived here, on the
    driver, from the secret and ``context``. The rows are tagged and bounded per map task (:func:`_map_plan`),
    shuffled in groups of buckets by :func:`ldp_dask.engine.shuffle` (at most
    :data:`~ldp_dask.engine.SHUFFLE_FAN` map tasks and groups), and each bucket is bounded again and released
    where its group lands: nothing but error strings and the root come back to the driver. With ``persons`` the
    handler gets ``(values, person ids)`` (a longitudinal release). Above ``direct_rows``
    rows on Dask (default :data:`~ldp_dask.engine.SHUFFLE_DIRECT_ROWS`), the plan's own tasks tag the rows and
    Dask's DataFrame shuffle moves them, one bucket per partition; the release is the same, since
    :func:`~ldp_dask.units.kept_index` does not depend on the order rows arrive in. A handler returns an
    accumulator, or a :class:`~ldp_dask.TaskError`.
    """
    count = len(dataset.tasks)
    bucket_keys: tuple[bytes | None, ...] = tuple(keys) if keys is not None else (None,) * count
    if len(bucket_keys) != count:  # pragma: no cover - a caller's bug
        raise ValueError(f"{len(bucket_keys)} keys for {count} buckets")
    ukeys = unit_keys(secret.key, json.dumps(context, sort_keys=True, default=str).encode())
    firsts = np.concatenate([[0], np.cumsum([p.num_rows for p in dataset.pieces])[:-1]]).astype(int).tolist()
    k = options.max_contributions
    cells = plan_cells(ukeys.bucket, count, dataset.n)
    tagging = Tagging(reader or dataset.reader, dataset.pieces, tuple(firsts), ukeys, cells, k)
    # map tasks of contiguous pieces, one per worker thread or more (_map_plan); groups of consecutive buckets, one
    # per worker thread or more (_group_plan), neither of which changes what is released (the kept rows, their
    # order and each bucket's key are the plan's)
    bucketing = BucketRelease(handler, combine, bucket_keys, cells, k, categorical, persons)
    large = LargeShuffle(tasks_of(dataset), count, bucketing)
    return shuffle(partial(_map_plan, dataset.pieces), tag_task, tagging, release_group, bucketing,
                   partial(_group_plan, count, dataset.n), combine,
                   options, in_process=in_process or dataset.kind == "memory", prefix="ldp-units", desc="bound by person",
                   large=large, direct_rows=engine.SHUFFLE_DIRECT_ROWS if direct_rows is None else direct_rows)


def _sketch_task(task: Any, job: tuple[Any, tuple[Piece, ...]]) -> dict[str, Any] | TaskError:
    """A task's persons as a HyperLogLog sketch (worker side): only the unit column is read. ``job`` is the
    dataset's reader and pieces."""
    from .reading import read_units
    from .tasks import each_piece
    from .units import person_ids, person_sketch

    reader, pieces = job
    sketches = each_piece(pieces, task, lambda p: person_sketch(person_ids(read_units(reader, p),
                                                                           nulls=reader.unit_nulls)))
    if isinstance(sketches, TaskError):
        return sketches
    return {"sketch": np.maximum.reduce(sketches) if sketches else person_sketch(np.empty(0, np.uint64))}


def _sketch_combine(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"sketch": np.maximum.reduce([p["sketch"] for p in parts])}


def estimate_persons(dataset: Dataset, options: RunOptions) -> float:
    """About how many persons a privacy-unit dataset holds (a HyperLogLog sketch, about 1.6% relative error; one
    pass over the unit column, nothing released). Under the unit's neighbouring relation the number of persons is
    public (docs/privacy.md), so a prediction made from it reveals nothing a release does not."""
    from .units import sketch_count

    if dataset.unit is None:
        raise LdpDaskError("estimate_persons needs a dataset planned with a privacy unit")
    tasks = tasks_of(dataset)
    res = run(tasks, _sketch_task, (dataset.reader, dataset.pieces), _sketch_combine, options,
              rows=[task_rows(dataset.pieces, t) for t in tasks], in_process=dataset.kind == "memory",
              prefix="ldp-persons", desc="count persons")
    return sketch_count(res["sketch"])


def count_persons(dataset: Dataset, options: RunOptions) -> int:
    """:func:`estimate_persons` as a whole number, at least 1: what a plan's error predictions are made for."""
    return max(1, int(round(estimate_persons(dataset, options))))
