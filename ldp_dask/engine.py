"""The engine: run tasks in this process or on a Dask cluster and combine their results by an exact tree.

Every map/reduce of the package runs here — local releases (plain, partitioned,
by privacy unit), the central quantiles' histogram and the central bounds'
magnitude counts — in the spirit of Dask's ``dask/array/reductions.py``
(chunk → combine → aggregate)::

    tasks ──fn(task, shared)──► accumulators ──combine (split_every-ary tree)──► root

The contract a caller keeps:

* ``fn(task, shared)`` runs on a worker (or in this process) and returns a
  small accumulator — a dict of numpy arrays and integers — or a
  :class:`~ldp_dask._validation.TaskError` for a deterministic data error
  (never retried; the driver raises it once as :class:`InputDataError`).
  ``OSError`` and ``MemoryError`` propagate instead: transient, Dask retries.
* ``fn`` is a pure function of its inputs: a retried, duplicated or
  speculatively re-run task reproduces its accumulator bit for bit (noise is
  keyed by the task, :mod:`ldp_dask.noise`).
* ``combine(*accs)`` is associative and exact (integer counts, fixed-point
  limbs of :mod:`ldp_dask.exactsum`), so the root is the same for every
  ``split_every``, completion order and cluster. The engine passes a
  ``TaskError`` through the tree without calling ``combine``.
* ``shared`` (what every task needs: the reader, the pieces, the channel,
  the tasks' keys) goes to the cluster once, with the tasks themselves; on
  Dask the tasks run in :func:`batches` of consecutive tasks (one per worker
  thread, or more to stay under :data:`BATCH_ROWS` rows), and a batch's payload is
  two integers, whatever the number of partitions. A batch folds its tasks'
  accumulators with ``combine``, so batching changes no released number.

Where the work runs is decided once, by :meth:`RunOptions.runs_in_process
<ldp_dask.options.RunOptions.runs_in_process>`: ``client="local"``, small
sources with no cluster named, or a caller's ``in_process=True`` (in-memory
data) run here; anything else attaches to the cluster of :func:`ldp_dask.clusters.connect`.

:func:`shuffle` is the engine's second operation: a map whose results are
split into groups, each group gathered from every task and reduced on one
worker — what contribution bounding by person needs (:mod:`ldp_dask.units`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from ._frames import as_frame, from_frame
from ._validation import InputDataError, TaskError
from .clusters import connect
from .options import RunOptions

__all__ = ["Task", "TaskError", "tasks_of", "task_rows", "run", "shuffle", "tree", "share",
           "TaskPlan", "GroupPlan", "SHUFFLE_FAN", "BATCH_ROWS", "batches", "runs",
           "SHUFFLE_DIRECT_ROWS", "LargeShuffle"]

#: At most this many map tasks and this many groups in a direct :func:`shuffle` (at most SHUFFLE_FAN² small
#: transfer tasks): its cost stays bounded by the cluster's per-task overhead, whatever the number of partitions.
SHUFFLE_FAN = 32
#: Above this many input rows a shuffle on Dask moves its groups with Dask's own (peer-to-peer, disk-backed)
#: DataFrame shuffle instead: one task's share of a direct shuffle would no longer fit in a worker's memory.
SHUFFLE_DIRECT_ROWS = SHUFFLE_FAN << 22


@dataclass(frozen=True)
class Task:
    """Task ``index`` of a run: the pieces ``[start, stop)`` of the shared job, processed as one partition."""

    index: int
    start: int
    stop: int


def tasks_of(dataset: Any) -> list[Task]:
    """A planned dataset's tasks, in the plan's order (:attr:`~ldp_dask.source.Dataset.tasks`)."""
    return [Task(i, a, b) for i, (a, b) in enumerate(dataset.tasks)]


def task_rows(pieces: Sequence[Any], task: Any) -> int:
    """The rows a task reads (its ``[start, stop)`` range of ``pieces``)."""
    return sum(pieces[i].num_rows for i in range(task.start, task.stop))


@dataclass(frozen=True)
class _Guarded:
    """``combine`` that passes the first :class:`TaskError` on instead of combining (picklable)."""

    combine: Callable[..., Any]

    def __call__(self, *accs: Any) -> Any:
        for a in accs:
            if isinstance(a, TaskError):
                return a
        return self.combine(*accs)


def tree(level: list[Any], combine: Callable[..., Any], split_every: int,
         submit: Callable[[Callable[..., Any], list[Any], int, int], Any] | None = None) -> Any:
    """The root of a ``split_every``-ary tree of ``combine`` over ``level`` (the package's one tree loop).

    ``submit(combine, group, depth, i)`` schedules one node (on Dask:
    ``client.submit``); without it the nodes run here.
    """
    depth = 0
    while len(level) > 1:
        level = [combine(*level[i:i + split_every]) if submit is None
                 else submit(combine, level[i:i + split_every], depth, i)
                 for i in range(0, len(level), split_every)]
        depth += 1
    return level[0]


#: On Dask, :func:`run` hands the cluster one batch of consecutive tasks per worker thread (each batch one Dask
#: task, folding its tasks' accumulators with ``combine``), or as many per thread as keep a batch under
#: BATCH_ROWS rows (about 0.1 s of a light channel's work, so that progress, a retried batch and workers that
#: join later stay fine-grained on large inputs). Measured on 16 workers over 128 tasks of 2^20 rows: the
#: scheduler costs about 0.6 ms per task, and one batch per thread placed on its own thread released in
#: 0.33-0.37 s against 0.34-0.58 s for one Dask task per task. Which task reads which rows, and so every
#: released number, is the plan's and does not change.
BATCH_ROWS = 1 << 23


def batches(weights: Sequence[int], threads: int) -> list[tuple[int, int]]:
    """:func:`run`'s batches on ``threads`` worker threads: ``[start, stop)`` runs of the tasks (``weights``: their
    rows), the same number for every thread, as few as keep each under about :data:`BATCH_ROWS` rows (never more
    than the tasks). A cluster with no worker yet gets one batch per task: it may grow to any size."""
    if threads < 1:
        return [(i, i + 1) for i in range(len(weights))]
    per_thread = max(1, -(-sum(weights) // (BATCH_ROWS * threads)))
    return runs(weights, threads * per_thread)


def runs(weights: Sequence[int], most: int) -> list[tuple[int, int]]:
    """``min(most, len(weights))`` contiguous ``[start, stop)`` runs of the tasks, of near-equal total weight, in order."""
    n = len(weights)
    if n <= most:
        return [(i, i + 1) for i in range(n)]
    total = sum(weights)
    cuts, acc, k = [0], 0, 1
    for i, w in enumerate(weights[:-1]):
        acc += w
        # close a run where the running weight reaches the next of ``most`` equal shares, or where the runs
        # still to open need every task left
        left = n - (i + 1)  # tasks after this boundary; each of the ``most - k`` runs still to open needs one
        if (acc * most >= k * total and left >= most - k) or left == most - k:
            cuts.append(i + 1)
            k += 1
            if k == most:
                break
    cuts.append(n)
    return list(zip(cuts[:-1], cuts[1:]))


@dataclass(frozen=True)
class _Batch:
    """``fn`` on consecutive tasks in one Dask task, their accumulators folded by (guarded) ``combine``."""

    fn: Callable[[Task, Any], Any]
    combine: _Guarded

    def __call__(self, start: int, stop: int, job: tuple[tuple[Task, ...], Any]) -> Any:
        tasks, shared = job
        acc = self.fn(tasks[start], shared)
        for t in tasks[start + 1:stop]:
            if isinstance(acc, TaskError):
                return acc
            acc = self.combine(acc, self.fn(t, shared))
        return acc


def _raise_if_error(root: Any) -> Any:
    if isinstance(root, TaskError):
        raise InputDataError(root.message)
    return root


def run(tasks: Sequence[Task], fn: Callable[[Task, Any], Any], shared: Any, combine: Callable[..., Any],
        options: RunOptions, *, rows: Sequence[int] | None = None, in_process: bool = False,
        prefix: str = "ldp", desc: str = "privatize") -> Any:
    """``fn(task, shared)`` on every task, here or on Dask, then an exact tree of ``combine``: the root.

    Parameters
    ----------
    tasks : sequence of Task
        At least one.
    fn : callable ``(task, shared) -> accumulator | TaskError``
        A module-level function (it is pickled by reference to the workers).
    shared : picklable
        What every task needs; sent to the cluster once.
    combine : callable ``(*accumulators) -> accumulator``
        Associative and exact.
    options : RunOptions
        Where to run (``client``, ``in_process_rows``), ``split_every``, ``retries``, ``progress``.
    rows : sequence of int, optional
        Rows per task: the progress bar's weights and the size that decides
        where the work runs (default: one per task).
    in_process : bool
        Run here whatever the options say (in-memory data).

    Returns
    -------
    The root accumulator.

    Raises
    ------
    InputDataError
        A task returned a :class:`TaskError` (the first one met).
    """
    if not tasks:
        raise ValueError("the engine needs at least one task")
    weights = list(rows) if rows is not None else [1] * len(tasks)
    guarded = _Guarded(combine)
    if in_process or options.runs_in_process(sum(weights)):
        accs = _map_here(tasks, weights, lambda t: fn(t, shared), options.progress, desc)
        return tree(accs, guarded, options.split_every)
    with connect(options.client, timeout=options.connect_timeout) as client:
        token = uuid.uuid4().hex[:12]
        # the tasks travel once, with what they share: a batch's own payload is its [start, stop) of them
        job = share(client, (tuple(tasks), shared), f"{prefix}-job-{token}")
        slots = _slots(client)
        batch, cuts = _Batch(fn, guarded), batches(weights, len(slots))
        # batch i on worker thread i mod threads where it can (left alone, the scheduler puts a few tasks all beside
        # the small shared job), free to move when a worker is busy or leaves
        level = [client.submit(batch, a, b, job, key=f"{prefix}-piece-{token}-{i}", retries=options.retries,
                               pure=False, **_on(slots, i))
                 for i, (a, b) in enumerate(cuts)]
        del job  # the tasks hold it until they have run
        root = tree(level, guarded, options.split_every, _submitter(client, options, f"{prefix}-combine-{token}"))
        if options.progress:
            _follow(level, [sum(weights[a:b]) for a, b in cuts], "row", desc)
        # no reference to a partition's future is kept once the tree is submitted: the cluster frees each
        # partition's result as soon as its combine has run (worker memory follows the tree's width)
        del level
        return _raise_if_error(root.result())


#: What a shuffle's caller may pass instead of its map tasks: a function of the cluster's parallelism (worker
#: threads; 1 in this process) returning the map tasks and the rows each reads.
TaskPlan = Callable[[int], tuple[Sequence[Task], Sequence[int]]]
#: ... and instead of its number of groups, a function of the same parallelism returning it.
GroupPlan = Callable[[int], int]


def shuffle(tasks: Sequence[Task] | TaskPlan, map_fn: Callable[[Task, Any, int], Any], map_shared: Any,
            reduce_fn: Callable[[int, int, list[Any], Any], Any], reduce_shared: Any, groups: int | GroupPlan,
            combine: Callable[..., Any], options: RunOptions, *, rows: Sequence[int] | None = None,
            in_process: bool = False, prefix: str = "ldp-shuffle", desc: str = "shuffle",
            large: LargeShuffle | None = None, direct_rows: int = SHUFFLE_DIRECT_ROWS) -> Any:
    """Map, split each result into ``groups`` parts, reduce each group from all tasks, combine: the root.

    ``map_fn(task, map_shared, groups)`` returns a sequence of ``groups``
    parts (or a :class:`TaskError`); ``reduce_fn(g, groups, [part g of every
    task], reduce_shared)`` returns an accumulator (or a ``TaskError``); the
    accumulators go through the same exact tree as :func:`run`. Only part g
    of each map result travels to group g's worker (one small transfer task
    per task and group, run where the map result lives), so the data moved
    is the data itself, once. The caller keeps ``len(tasks)`` and ``groups``
    at most :data:`SHUFFLE_FAN` (coarser tasks, groups of buckets).

    Parts are dicts of equal-length numpy arrays. With ``large`` (a
    :class:`LargeShuffle`) a shuffle on Dask of more than ``direct_rows`` rows
    runs its finer tasks and groups instead and moves the rows with Dask's
    DataFrame shuffle (peer-to-peer, spilling to disk), so that no task holds
    more than its own share. A group's rows then arrive in no set order:
    ``reduce_fn`` must not depend on it (as the direct path's does not on
    which tasks finished first).

    ``tasks`` may be a :data:`TaskPlan`, called with the parallelism where the
    shuffle runs, for a caller whose result does not depend on how the map
    tasks cut the input (so that each worker gets one large map task); and
    ``groups`` a :data:`GroupPlan`, for one whose result does not depend on
    how the groups cut it (so that each worker thread reduces one group).
    """
    plan = tasks if callable(tasks) else None
    if plan is not None:
        tasks, rows = plan(1)
    n_groups = groups(1) if callable(groups) else groups
    assert not callable(tasks)
    if not tasks:
        raise ValueError("the engine needs at least one task")
    weights = list(rows) if rows is not None else [1] * len(tasks)
    guarded = _Guarded(combine)
    if in_process or options.runs_in_process(sum(weights)):
        _check_fan(tasks, n_groups)
        mapped = _map_here(tasks, weights, lambda t: map_fn(t, map_shared, n_groups), options.progress, desc)
        accs = [reduce_fn(g, n_groups, [parts[g] for parts in mapped], reduce_shared) for g in range(n_groups)]
        return _raise_if_error(tree(accs, guarded, options.split_every))
    with connect(options.client, timeout=options.connect_timeout) as client:
        if large is not None and sum(weights) > direct_rows:
            return _shuffle_frames(client, large.tasks, map_fn, map_shared, reduce_fn, large.reduce_shared,
                                   large.groups, guarded, options, prefix)
        slots = _slots(client)
        if plan is not None:
            tasks, rows = plan(max(1, len(slots)))
            weights = list(rows)
        if callable(groups):
            n_groups = groups(max(1, len(slots)))
        _check_fan(tasks, n_groups)
        token = uuid.uuid4().hex[:12]
        job = share(client, map_shared, f"{prefix}-job-{token}")
        # each map task on its own worker thread where the cluster has enough (a scheduler left alone puts them all
        # beside the small shared job), free to move when a worker leaves
        mapped_f = [client.submit(map_fn, t, job=job, groups=n_groups, retries=options.retries, pure=False,
                                  key=f"{prefix}-map-{token}-{i}", **_on(slots, i))
                    for i, t in enumerate(tasks)]
        del job
        reducer = share(client, reduce_shared, f"{prefix}-reducer-{token}")
        reduced = []
        for g in range(n_groups):
            parts = [client.submit(_part, m, g, key=f"{prefix}-part-{token}-{i}-{g}", retries=options.retries,
                                   pure=False, **_on(slots, i)) for i, m in enumerate(mapped_f)]
            reduced.append(client.submit(_reduce_parts, reduce_fn, g, n_groups, reducer, *parts,
                                         retries=options.retries, pure=False, key=f"{prefix}-reduce-{token}-{g}"))
        del reducer, parts
        root = tree(reduced, guarded, options.split_every, _submitter(client, options, f"{prefix}-combine-{token}"))
        if options.progress:
            _follow(mapped_f, weights, "row", desc)
        del mapped_f, reduced
        return _raise_if_error(root.result())


def _slots(client: Any) -> list[str]:
    """One entry per worker thread of the cluster (a worker's address repeated once per thread)."""
    return [w for w, n in client.nthreads().items() for _ in range(n)]


def _on(slots: list[str], i: int) -> dict[str, Any]:
    """``client.submit`` keywords placing task ``i`` on thread slot ``i mod len(slots)``, softly."""
    return {"workers": [slots[i % len(slots)]], "allow_other_workers": True} if slots else {}


def _check_fan(tasks: Sequence[Task], groups: int) -> None:
    if len(tasks) > SHUFFLE_FAN or not 1 <= groups <= SHUFFLE_FAN:  # pragma: no cover - a caller's bug
        raise ValueError(f"a shuffle takes at most {SHUFFLE_FAN} tasks and groups; got {len(tasks)} and {groups}")


def _map_here(tasks: Sequence[Task], weights: list[int], call: Callable[[Task], Any], progress: bool,
              desc: str) -> list[Any]:
    """``call(task)`` for every task in this process, in order, with the progress bar; the first
    :class:`TaskError` is raised as :class:`InputDataError`."""
    out = []
    with _bar(sum(weights), progress, desc) as bar:
        for t, w in zip(tasks, weights):
            result = call(t)
            if isinstance(result, TaskError):
                raise InputDataError(result.message)
            out.append(result)
            if bar is not None:
                bar.update(w)
    return out


@dataclass(frozen=True)
class LargeShuffle:
    """How :func:`shuffle` runs a large input: finer ``tasks`` and ``groups`` (each with ``reduce_shared``)."""

    tasks: Sequence[Task]
    groups: int
    reduce_shared: Any


def _error_of(result: Any) -> str | None:
    return result.message if isinstance(result, TaskError) else None


def _reduce_frame(reduce_fn: Callable[[int, int, list[Any], Any], Any], g: int, groups: int, shared: Any,
                  frame: Any) -> Any:
    """Group ``g``'s rows (in the order they arrived) handed to ``reduce_fn`` as one part."""
    return reduce_fn(g, groups, [from_frame(frame)], shared)


def _shuffle_frames(client: Any, tasks: Sequence[Task], map_fn: Callable[[Task, Any, int], Any], map_shared: Any,
                    reduce_fn: Callable[[int, int, list[Any], Any], Any], reduce_shared: Any, groups: int,
                    guarded: _Guarded, options: RunOptions, prefix: str) -> Any:
    """The large shuffle: map results as DataFrames, moved by Dask's DataFrame shuffle (``set_index`` on known
    divisions, so group g becomes partition g), each group reduced where it lands, then the exact tree."""
    import dask
    import dask.dataframe as dd

    token = uuid.uuid4().hex[:12]
    job = share(client, map_shared, f"{prefix}-job-{token}")
    mapped = client.map(map_fn, list(tasks), job=job, groups=groups, retries=options.retries, pure=False,
                        key=[f"{prefix}-map-{token}-{i}" for i in range(len(tasks))])
    del job
    errors = [e for e in client.gather(client.map(_error_of, mapped, pure=False,
                                                  key=[f"{prefix}-check-{token}-{i}" for i in range(len(tasks))]))
              if e]
    if errors:  # bad data met while tagging: raised once, before anything moves
        raise InputDataError(errors[0])
    frames = client.map(as_frame, mapped, retries=options.retries, pure=False,
                        key=[f"{prefix}-frame-{token}-{i}" for i in range(len(tasks))])
    del mapped
    meta = client.submit(lambda f: f.iloc[:0], frames[0], pure=False).result()
    by_group = dd.from_delayed(frames, meta=meta, verify_meta=False).set_index(
        "group", divisions=list(range(groups + 1)), sorted=False)
    reducer = share(client, reduce_shared, f"{prefix}-reducer-{token}")
    reduced = client.compute([dask.delayed(_reduce_frame, pure=False)(reduce_fn, g, groups, reducer,
                                                                             part.reset_index())
                              for g, part in enumerate(by_group.to_delayed())], retries=options.retries)
    del frames, by_group, reducer
    root = tree(reduced, guarded, options.split_every, _submitter(client, options, f"{prefix}-combine-{token}"))
    del reduced
    return _raise_if_error(root.result())


def _part(parts: Any, g: int) -> Any:
    """Part ``g`` of a map result (worker side, where the result lives), or its error."""
    return parts if isinstance(parts, TaskError) else parts[g]


def _reduce_parts(reduce_fn: Callable[[int, int, list[Any], Any], Any], g: int, groups: int, shared: Any,
                  *parts: Any) -> Any:
    for p in parts:
        if isinstance(p, TaskError):
            return p
    return reduce_fn(g, groups, list(parts), shared)


def _submitter(client: Any, options: RunOptions, prefix: str) -> Callable[[Callable[..., Any], list[Any], int, int],
                                                                          Any]:
    def submit(combine: Callable[..., Any], group: list[Any], depth: int, i: int) -> Any:
        return client.submit(combine, *group, key=f"{prefix}-{depth}-{i}", retries=options.retries, pure=False)

    return submit


def _identity(value: Any) -> Any:
    return value


def share(client: Any, value: Any, key: str) -> Any:
    """A future of ``value`` for many tasks to depend on, sent to the scheduler once.

    A task that returns ``value``, not ``client.scatter``: scattered data has
    no lineage, so a worker dying with the only copy would fail every task
    that needs it, while a task's result is recomputed where it was lost.
    """
    return client.submit(_identity, value, key=key, pure=False)


def _bar(total: int, enabled: bool, desc: str) -> Any:
    if not enabled:
        return nullcontext(None)
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="row", unit_scale=True, desc=desc, leave=True)  # the final line stays


def _follow(futures: list[Any], weights: list[int], unit: str, desc: str) -> None:
    """A progress bar advancing by ``weights`` as ``futures`` complete (the operator's terminal only)."""
    from distributed import as_completed
    from tqdm.auto import tqdm

    weight = {f.key: w for f, w in zip(futures, weights)}
    with tqdm(total=sum(weights), unit=unit, unit_scale=True, desc=desc, leave=True) as bar:
        for f in as_completed(futures):
            bar.update(weight.pop(f.key))
