"""Partitions → per-partition private statistics → tree reduction → Summary.

The pipeline knows nothing of statistics: it reads a piece, asks the channel
to validate it and to produce its noisy statistics (or its privatized rows),
and adds results up. Data path (docs/privacy.md)::

    piece ──read──► channel.prepare ──► channel.exact_stats ─┐ (on the worker)
                                        channel.add_noise ◄──┘ keyed rng
          ──► exact fixed-point limbs ──► combine (split_every-ary tree) ──► Summary

* Only noisy statistics leave a worker (summary mode), or privatized rows
  written straight to Parquet by the worker (rows mode).
* The reduction adds fixed-point limbs exactly (:mod:`ldp_dask.exactsum`), so
  the result is bit-identical for every ``split_every``, every completion
  order, in-process or on a cluster, and after retries.
* Noise keys depend only on the secret, the public context, the partition
  index and the partition's content (:mod:`ldp_dask.noise`), so a retried or
  duplicated task reproduces its output exactly.
* Deterministic data errors (NaN, out of domain, ...) are returned as values
  rather than raised on the worker, so they are not retried and reach the
  driver as one clear :class:`InputDataError`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import uuid
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from . import exactsum
from ._validation import InputDataError, LdpDaskError, error_value
from .channels import Channel
from .noise import (TAG_MODULUS, Secret, bind_key, content_tag, digest_arrays, generator, hidden_from_children,
                    named_base_keys, partition_base_keys)
from .options import DEFAULT_CONNECT_TIMEOUT, RunOptions
from .release import Charge, Outputs, Released, plan, release
from .ledger import ROW_UNIT
from .source import Dataset, Piece, Reader, read_piece, read_units
from .units import UnitKeys, bounded_values, per_row_channel, tagged_frame, unit_keys
from .summary import Summary, summary_mac_key

__all__ = ["privatize", "release_summary", "run_channel", "local_charge", "connect", "map_reduce", "map_units",
           "MODES"]

MODES = ("summary", "rows")
#: Rows mode privatizes a partition in blocks of about this many values.
ROWS_BLOCK_VALUES = 1 << 22


@dataclass(frozen=True)
class _Job:
    """What every task of one release shares: reader, pieces, the tasks' noise keys, channel, clipping, mode,
    where rows go.

    Sent to the cluster once (:func:`share`); a task carries only the range of pieces it reads.
    """

    reader: Reader
    pieces: tuple[Piece, ...]
    keys: tuple[bytes, ...]
    channel: Channel
    clip: bool
    mode: str
    rows_dir: str | None = None
    rows_fs: Any = None


@dataclass(frozen=True)
class _Task:
    """Task ``index`` of a release: the pieces ``[start, stop)`` of the job, released as one partition (a few
    dozen bytes, whatever the number of pieces)."""

    index: int
    start: int
    stop: int


def _where(piece: Piece) -> str:
    return piece.path or f"rows {piece.start}..{piece.stop}"


def each_piece(pieces: tuple[Piece, ...], task: Any, fn: Any) -> list[Any] | dict[str, str]:
    """``fn(piece)`` for the pieces ``task.start`` to ``task.stop``, in order (worker side): their results, or
    the first deterministic error as ``{"error": ...}`` naming its file, never retried and never quoting the
    data. ``OSError`` and ``MemoryError`` propagate: transient, Dask retries the task."""
    out = []
    for piece in pieces[task.start:task.stop]:
        try:
            out.append(fn(piece))
        except (OSError, MemoryError):
            raise
        except Exception as exc:
            return error_value(_where(piece), exc)
    return out


def _run_piece(task: _Task, job: _Job) -> dict[str, Any]:
    """Release one task's rows on a worker: its pieces are read and validated one by one (an error names its
    file), then released together as one partition, under the task's key; returns a small accumulator."""
    parts = each_piece(job.pieces, task, lambda p: job.channel.prepare(read_piece(job.reader, p), clip=job.clip))
    if isinstance(parts, dict):
        return parts
    x = parts[0][0] if len(parts) == 1 else np.concatenate([v for v, _ in parts])
    clipped = sum(c for _, c in parts)
    del parts
    try:
        return _release_prepared(x, clipped, job, job.keys[task.index], task.index)
    except (OSError, MemoryError):
        raise
    except Exception as exc:
        return error_value(_where(job.pieces[task.start]), exc)


def _release_values(x: Any, job: _Job, key: bytes, index: int, where: str) -> dict[str, Any]:
    """Validate a partition's values and turn them into noisy sums (and privatized rows in rows mode)."""
    try:
        x, n_clipped = job.channel.prepare(x, clip=job.clip)
    except InputDataError as exc:
        return error_value(where, exc)
    return _release_prepared(x, n_clipped, job, key, index)


def _release_prepared(x: np.ndarray, n_clipped: int, job: _Job, key: bytes, index: int) -> dict[str, Any]:
    """A partition's validated values → noisy sums drawn once for its ``len(x)`` rows (or privatized rows)."""
    m = len(x)
    if job.mode == "summary":
        exact = job.channel.exact_stats(x)
        digest = digest_arrays(np.array([m]), *(exact[k] for k in sorted(exact)))
        rng = generator(bind_key(key, digest))
        noisy = job.channel.add_noise(exact, m, rng)
        del exact  # never leaves this function
        stats = {k: exactsum.from_float(v) for k, v in noisy.items()}
    else:
        digest = digest_arrays(x)
        rng = generator(bind_key(key, digest))
        stats = _write_rows(job, index, x, rng)
    return {"n": m, "clipped": n_clipped, "pieces": 1, "stats": stats, "tag": content_tag(key, digest)}


def _write_rows(job: _Job, index: int, x: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Privatize ``x`` block by block, write the views to partition ``index``'s file, return their exact sums."""
    dim = job.channel.view_dim
    block = max(1, ROWS_BLOCK_VALUES // dim)
    schema = pa.schema(
        [("z", pa.list_(pa.float64(), dim))],
        metadata={b"ldp_dask.channel": job.channel.name.encode(),
                  b"ldp_dask.channel_params": repr(job.channel.params()).encode()},
    )
    sums: dict[str, np.ndarray] | None = None
    path = f"{job.rows_dir}/part-{index:05d}.parquet"
    with job.rows_fs.open(path, "wb") as fh, pq.ParquetWriter(fh, schema) as writer:
        for s in range(0, len(x), block):
            z = job.channel.privatize(x[s : s + block], rng)
            col = pa.FixedSizeListArray.from_arrays(pa.array(z.ravel()), dim)
            writer.write_table(pa.Table.from_arrays([col], schema=schema))
            part = {k: exactsum.from_float(v) for k, v in job.channel.row_sums(z).items()}
            sums = part if sums is None else {k: exactsum.add(sums[k], part[k]) for k in part}
    if sums is None:  # no rows (an empty bucket): an empty file, zero sums
        sums = {k: exactsum.from_float(np.zeros_like(v)) for k, v in
                job.channel.row_sums(np.zeros((1, dim))).items()}
    return sums


def _combine(*accs: dict[str, Any]) -> dict[str, Any]:
    """Associative, exact combination of accumulators (errors propagate)."""
    for a in accs:
        if "error" in a:
            return {"error": a["error"]}
    keys = accs[0]["stats"].keys()
    return {
        "n": sum(a["n"] for a in accs),
        "clipped": sum(a["clipped"] for a in accs),
        "pieces": sum(a["pieces"] for a in accs),
        "tag": sum(a["tag"] for a in accs) % TAG_MODULUS,
        "stats": {k: exactsum.add(*(a["stats"][k] for a in accs)) for k in keys},
    }


@dataclass(frozen=True)
class _ByFile:
    """A partitioned release's job: the release's job, and the file each task reads (sent to the cluster once)."""

    job: _Job
    files: tuple[str, ...]

    @property
    def pieces(self) -> tuple[Piece, ...]:
        return self.job.pieces


def _run_file_task(task: _Task, job: _ByFile) -> dict[str, Any]:
    """:func:`_run_piece`, its accumulator filed under the task's file (worker side)."""
    acc = _run_piece(task, job.job)
    return acc if "error" in acc else {"files": {job.files[task.index]: acc}}


def _combine_files(*accs: dict[str, Any]) -> dict[str, Any]:
    """Combine per-file accumulators: a file's tasks add up exactly, files stay apart (errors propagate)."""
    for a in accs:
        if "error" in a:
            return {"error": a["error"]}
    out: dict[str, Any] = {}
    for a in accs:
        for name, acc in a["files"].items():
            out[name] = _combine(out[name], acc) if name in out else acc
    return {"files": out}


def _progress(total: int, enabled: bool, desc: str) -> Any:
    if not enabled:
        return nullcontext(None)
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="row", unit_scale=True, desc=desc, leave=True)  # the final line stays


def _run_local(tasks: list[_Task], job: Any, split_every: int, progress: bool, fn: Any = None,
               combine: Any = None) -> dict[str, Any]:
    """``fn(task, job)`` (default :func:`_run_piece`) on every task in this process, then ``combine``'s tree."""
    fn, combine = fn or _run_piece, combine or _combine
    pieces = job.pieces
    accs = []
    with _progress(sum(task_rows(pieces, t) for t in tasks), progress, "privatize") as bar:
        for t in tasks:
            acc = fn(t, job)
            if "error" in acc:
                return acc
            accs.append(acc)
            if bar is not None:
                bar.update(task_rows(pieces, t))
    level = accs
    while len(level) > 1:
        level = [combine(*level[i : i + split_every]) for i in range(0, len(level), split_every)]
    return level[0]


def _tasks(dataset: Dataset) -> list[_Task]:
    """The release's tasks, in the plan's order (:attr:`~ldp_dask.source.Dataset.tasks`)."""
    return [_Task(i, a, b) for i, (a, b) in enumerate(dataset.tasks)]


def task_rows(pieces: tuple[Piece, ...], task: Any) -> int:
    """The rows a task reads (its ``[start, stop)`` range of ``pieces``)."""
    return sum(pieces[i].num_rows for i in range(task.start, task.stop))


def _identity(value: Any) -> Any:
    return value


def share(client: Any, value: Any, key: str) -> Any:
    """A future of ``value`` for many tasks to depend on, sent to the scheduler once.

    A task that returns ``value``, not ``client.scatter``: scattered data has
    no lineage, so a worker dying with the only copy would fail every task
    that needs it, while a task's result is recomputed where it was lost.
    """
    return client.submit(_identity, value, key=key, pure=False)


def map_reduce(client: Any, fn: Any, tasks: list[Any], shared: Any, combine: Any, prefix: str, rows: list[int],
               split_every: int, retries: int, progress: bool, desc: str) -> Any:
    """``fn(task, shared)`` on every task, then a ``split_every``-ary tree of ``combine``; returns the root.

    ``shared`` (what every task needs: the reader, the channel, ...) goes to
    the cluster once (:func:`share`), so a task's payload is its own small
    description whatever the number of partitions. Keys are
    ``{prefix}-piece-{token}-{i}`` and ``{prefix}-combine-{token}-…``. No
    reference to a partition's future is kept once the tree is submitted (the
    progress bar holds each only until it completes), so the cluster frees a
    partition's result as soon as its combine has run: worker memory follows
    the tree's width, not the number of partitions. ``progress`` advances a bar
    by ``rows`` as partitions complete.
    """
    token = uuid.uuid4().hex[:12]
    job = share(client, shared, f"{prefix}-job-{token}")
    level = client.map(fn, tasks, job=job, key=[f"{prefix}-piece-{token}-{i}" for i in range(len(tasks))],
                       retries=retries, pure=False)
    del job  # the tasks hold it until they have run
    done = None
    if progress:
        from distributed import as_completed

        weight = {f.key: r for f, r in zip(level, rows)}
        done = as_completed(level)
    depth = 0
    while len(level) > 1:
        level = [client.submit(combine, *level[i : i + split_every], key=f"{prefix}-combine-{token}-{depth}-{i}",
                               retries=retries, pure=False)
                 for i in range(0, len(level), split_every)]
        depth += 1
    if done is not None:
        with _progress(sum(rows), True, desc) as bar:
            for f in done:
                bar.update(weight.pop(f.key))
    return level[0].result()


def _run_dask(client: Any, tasks: list[_Task], job: _Job, split_every: int, progress: bool,
              retries: int) -> dict[str, Any]:
    return map_reduce(client, _run_piece, tasks, job, _combine, "ldp", [task_rows(job.pieces, t) for t in tasks],
                      split_every, retries, progress, "privatize")


@contextmanager
def connect(client: Any = None, n_workers: int | None = None,
            timeout: float = DEFAULT_CONNECT_TIMEOUT) -> Iterator[Any]:
    """A ``distributed.Client``: the one given, one for an address, or one for the environment's cluster.

    ``client=None`` looks at the environment, so that deployments choose their
    cluster without changing parameters:

    * ``DASK_SCHEDULER_ADDRESS`` (Dask's ``scheduler-address`` setting): attach
      to that running scheduler;
    * ``LDP_DASK_CLUSTER``: a cluster class as ``module.Class`` (e.g.
      ``dask_jobqueue.SLURMCluster`` or ``dask_kubernetes.operator.KubeCluster``),
      created for the block with the keyword arguments in
      ``LDP_DASK_CLUSTER_OPTIONS`` (a JSON object), scaled to
      ``LDP_DASK_CLUSTER_WORKERS`` workers (default 2) and closed at the end;
    * otherwise a LocalCluster of worker processes (one thread each).

    A scheduler named by address that does not answer within ``timeout``
    seconds raises :class:`~ldp_dask.LdpDaskError` in one line.
    """
    import dask
    from distributed import Client, LocalCluster

    address = os.environ.get("DASK_SCHEDULER_ADDRESS") or dask.config.get("scheduler-address", None)
    if client is None and address:
        client = str(address)
    if client is None and os.environ.get("LDP_DASK_CLUSTER"):
        with _cluster_from_env() as cluster, Client(cluster) as c:
            yield c
    elif client is None:
        workers = n_workers or max(1, min(os.cpu_count() or 1, 8))
        # worker processes inherit the environment: the key's variables are hidden while the cluster lives
        # (a nanny restarting a worker spawns it again), and this process still resolves the key
        with hidden_from_children(), LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
                Client(cluster) as c:
            yield c
    elif isinstance(client, str):
        try:
            c = Client(client, timeout=timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            raise LdpDaskError(f"cannot reach the Dask scheduler at {client!r} within {timeout:g} s (--scheduler, "
                               f"DASK_SCHEDULER_ADDRESS or client=): {type(exc).__name__}; is it running and "
                               "reachable from here?") from None
        with c:
            yield c
    else:
        yield client


@contextmanager
def _cluster_from_env() -> Iterator[Any]:
    """The cluster named by ``LDP_DASK_CLUSTER`` (see :func:`connect`), scaled and closed at the end."""
    import importlib
    import json

    spec = os.environ["LDP_DASK_CLUSTER"]
    module, _, name = spec.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name) if module else None
    except (ImportError, AttributeError):
        cls = None
    if cls is None:
        raise LdpDaskError(f"LDP_DASK_CLUSTER must name an importable cluster class as 'module.Class' "
                           f"(e.g. dask_jobqueue.SLURMCluster). Got {spec!r} instead.")
    raw = os.environ.get("LDP_DASK_CLUSTER_OPTIONS", "{}")
    try:
        options = json.loads(raw)
    except ValueError:
        options = None
    if not isinstance(options, dict):
        raise LdpDaskError(f"LDP_DASK_CLUSTER_OPTIONS must be a JSON object of keyword arguments. Got {raw!r}.")
    workers = os.environ.get("LDP_DASK_CLUSTER_WORKERS", "2")
    if not workers.isdigit() or int(workers) < 1:
        raise LdpDaskError(f"LDP_DASK_CLUSTER_WORKERS must be a positive integer. Got {workers!r} instead.")
    with hidden_from_children(), cls(**options) as cluster:
        cluster.scale(int(workers))
        yield cluster


def run_channel(dataset: Dataset, channel: Channel, mode: str, secret: Secret, options: RunOptions,
                rows: tuple[Any, str] | None = None, rows_path: str | None = None) -> Summary:
    """The map/reduce of one channel over a planned dataset: partitions → noisy sums → one :class:`Summary`.

    No ledger, no output file: callers go through :func:`ldp_dask.release.release`
    (e.g. :func:`privatize`). ``rows`` is ``(fs, directory)`` where rows mode
    writes one Parquet file per partition; ``rows_path`` is where that
    directory will be published (recorded in the metadata).
    """
    context = {
        "v": 1, "fingerprint": dataset.fingerprint, "column": dataset.column,
        "channel": channel.name, "params": channel.params(), "mode": mode,
    }
    rows_fs, rows_dir = rows if rows is not None else (None, None)
    choice = getattr(channel, "choice", None)
    k = options.max_contributions
    if dataset.unit is not None:
        channel = per_row_channel(channel, k)
        context = {**context, "unit": dataset.unit, "k": k}
        acc = _run_units(dataset, channel, mode, secret, options, context, rows_fs, rows_dir)
    else:
        tasks = _tasks(dataset)
        keys = tuple(partition_base_keys(secret, context, len(tasks)))
        job = _Job(dataset.reader, dataset.pieces, keys, channel, options.clip, mode, rows_dir, rows_fs)
        if dataset.kind == "memory" or options.runs_in_process(dataset.n):
            acc = _run_local(tasks, job, options.split_every, options.progress)
        else:
            with connect(options.client, timeout=options.connect_timeout) as c:
                acc = _run_dask(c, tasks, job, options.split_every, options.progress, options.retries)
    if "error" in acc:
        raise InputDataError(acc["error"])
    if dataset.unit is None and acc["n"] != dataset.n:  # pragma: no cover - a planning bug, not user input
        raise RuntimeError(f"processed {acc['n']} rows, planned {dataset.n}")
    sums = {k: exactsum.to_float(v) for k, v in acc["stats"].items()}
    metadata = _metadata(dataset, secret, mode, options.clip, rows_path)
    if choice:  # chosen by --channel auto: what was compared, kept with the release
        metadata["choice"] = choice
    metadata.update(privacy_unit=dataset.unit or ROW_UNIT, max_contributions=k,
                    epsilon_per_unit=k * max(channel.epsilon, channel.epsilon_spent()))
    return Summary(channel, int(acc["n"]), sums, metadata, n_clipped=int(acc["clipped"]) if options.clip else None,
                   content_tag=f"{acc['tag']:064x}")


# --- privacy units: tag rows by person, shuffle by bucket, keep k rows per person, release per bucket ------
@dataclass(frozen=True)
class _Tagging:
    """What every tagging task shares (sent once): the reader, the pieces and the row number each starts
    at, the person keys, the number of buckets."""

    reader: Reader
    pieces: tuple[Piece, ...]
    first_rows: tuple[int, ...]
    keys: UnitKeys
    buckets: int


def _tag_piece(task: _Task, job: _Tagging) -> Any:
    """A task's rows tagged (bucket, person, rank, value), or ``{"error": ...}`` (worker side)."""
    frames = each_piece(job.pieces, task, lambda p: tagged_frame(
        read_piece(job.reader, p), read_units(job.reader, p), job.first_rows[p.index], job.keys, job.buckets))
    if isinstance(frames, dict):
        return frames
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _error_of(frame: Any) -> str | None:
    return frame["error"] if isinstance(frame, dict) else None


@dataclass(frozen=True)
class _ReleaseBucket:
    """What a bucket of persons' kept rows become in a local release: the channel's noisy sums."""

    job: _Job

    def __call__(self, values: Any, where: str, index: int, key: bytes | None) -> dict[str, Any]:
        assert key is not None
        return _release_values(values, self.job, key, index, where)


def _run_bucket(frame: Any, handler: Any, index: int, key: bytes | None, k: int,
                categorical: bool) -> dict[str, Any]:
    """Keep at most ``k`` rows per person of bucket ``index`` and hand them to ``handler`` (worker side)."""
    where = f"the rows of bucket {index} (grouped by person)"
    try:
        return handler(bounded_values(frame, k, categorical), where, index, key)
    except (OSError, MemoryError):
        raise
    except Exception as exc:
        return error_value(where, exc)


def _run_units(dataset: Dataset, channel: Channel, mode: str, secret: Secret, options: RunOptions,
               context: dict[str, Any], rows_fs: Any, rows_dir: str | None) -> dict[str, Any]:
    """Contribution bounding then the channel: one partition per bucket of persons (docs/privacy.md)."""
    keys = partition_base_keys(secret, context, len(dataset.tasks))
    handler = _ReleaseBucket(_Job(dataset.reader, (), (), channel, options.clip, mode, rows_dir, rows_fs))
    return map_units(dataset, secret, context, handler, _combine, options, keys=keys,
                     categorical=channel.value_kind == "categorical")


def map_units(dataset: Dataset, secret: Secret, context: dict[str, Any], handler: Any, combine: Any,
              options: RunOptions, *, keys: list[bytes] | None = None, categorical: bool = False,
              in_process: bool = False) -> dict[str, Any]:
    """Bound each person's rows, then ``handler(values, where, j, keys[j])`` on bucket j; ``combine`` the results.

    There is one bucket per task of ``dataset`` (:attr:`~ldp_dask.source.Dataset.tasks`); ``keys`` (optional) gives
    each bucket its noise key (None is passed without). The bucket and rank
    keys are derived here, on the driver, from the secret and ``context``. In
    process (in-memory data, :meth:`RunOptions.runs_in_process` or ``in_process``) the rows are
    grouped with numpy; on Dask they are shuffled by bucket, the handler is
    sent to the cluster once, and nothing but error strings and the final
    result comes back to the driver. A handler returns a dict, or ``{"error": ...}``.
    """
    tasks = _tasks(dataset)
    count = len(tasks)
    bucket_keys: list[bytes | None] = list(keys) if keys is not None else [None] * count
    if len(bucket_keys) != count:  # pragma: no cover - a caller's bug
        raise ValueError(f"{len(bucket_keys)} keys for {count} buckets")
    ukeys = unit_keys(secret.key, json.dumps(context, sort_keys=True, default=str).encode())
    firsts = np.concatenate([[0], np.cumsum([p.num_rows for p in dataset.pieces])[:-1]]).astype(int).tolist()
    tagging = _Tagging(dataset.reader, dataset.pieces, tuple(firsts), ukeys, count)
    k = options.max_contributions
    if dataset.kind == "memory" or options.runs_in_process(dataset.n) or in_process:
        frames = [_tag_piece(t, tagging) for t in tasks]
        error = next((e for e in map(_error_of, frames) if e), None)
        if error:
            return {"error": error}
        rows = pd.concat(frames, ignore_index=True)
        order = np.argsort(rows["bucket"].to_numpy(), kind="stable")
        bounds = np.searchsorted(rows["bucket"].to_numpy()[order], np.arange(count + 1))
        accs = [_run_bucket(rows.iloc[order[bounds[j]:bounds[j + 1]]], handler, j, bucket_keys[j], k, categorical)
                for j in range(count)]
        bad = next((a for a in accs if "error" in a), None)
        if bad is not None:
            return bad
        level = accs
        while len(level) > 1:
            level = [combine(*level[i : i + options.split_every]) for i in range(0, len(level), options.split_every)]
        return level[0]
    with connect(options.client, timeout=options.connect_timeout) as client:
        return _shuffle_units(client, tasks, tagging, handler, bucket_keys, combine, k, categorical, options)


def _shuffle_units(client: Any, tasks: list[_Task], tagging: _Tagging, handler: Any,
                   keys: list[bytes | None], combine: Any, k: int, categorical: bool,
                   options: RunOptions) -> dict[str, Any]:
    """The Dask path: tag partitions, check them, shuffle rows by bucket (``set_index`` on known divisions:
    bucket j becomes partition j), run each bucket's handler, tree-reduce."""
    import dask
    import dask.dataframe as dd

    token = uuid.uuid4().hex[:12]
    shared = share(client, tagging, f"ldp-units-job-{token}")
    tagged = client.map(_tag_piece, tasks, job=shared, retries=options.retries, pure=False,
                        key=[f"ldp-units-tag-{token}-{i}" for i in range(len(tasks))])
    del shared
    if options.progress:
        _follow(tagged, [task_rows(tagging.pieces, t) for t in tasks], "row", "tag by person")
    errors = client.gather(client.map(_error_of, tagged, key=[f"ldp-units-check-{token}-{i}"
                                                                for i in range(len(tasks))]))
    error = next((e for e in errors if e), None)
    if error:
        return {"error": error}
    meta = pd.DataFrame({"bucket": pd.Series([], dtype="int64"), "person": pd.Series([], dtype="uint64"),
                         "rank": pd.Series([], dtype="uint64"),
                         "value": pd.Series([], dtype="object" if categorical else "float64")})
    frame = dd.from_delayed(tagged, meta=meta, verify_meta=False)
    by_bucket = frame.set_index("bucket", divisions=list(range(len(keys) + 1)), sorted=False)
    release = share(client, handler, f"ldp-units-release-{token}")
    buckets = client.compute([dask.delayed(_run_bucket, pure=False)(part, release, j, key, k, categorical)
                              for j, (part, key) in enumerate(zip(by_bucket.to_delayed(), keys))],
                             retries=options.retries)
    del tagged, frame, by_bucket, release  # the shuffle's inputs are freed as the buckets complete
    level = buckets
    depth = 0
    while len(level) > 1:
        level = [client.submit(combine, *level[i : i + options.split_every], retries=options.retries, pure=False,
                               key=f"ldp-units-combine-{token}-{depth}-{i}")
                 for i in range(0, len(level), options.split_every)]
        depth += 1
    if options.progress:
        _follow(buckets, [1] * len(buckets), "bucket", "release by person")
    del buckets
    return level[0].result()


def _follow(futures: list[Any], weights: list[int], unit: str, desc: str) -> None:
    """A progress bar advancing by ``weights`` as ``futures`` complete (the operator's terminal only)."""
    from distributed import as_completed
    from tqdm.auto import tqdm

    weight = {f.key: w for f, w in zip(futures, weights)}
    with tqdm(total=sum(weights), unit=unit, unit_scale=True, desc=desc, leave=True) as bar:
        for f in as_completed(futures):
            bar.update(weight.pop(f.key))


def release_summary(source: Any, column: str | None = None, channel: Channel | None = None, mode: str = "summary",
                    *, out: str | os.PathLike[str] | None = None, rows_path: str | os.PathLike[str] | None = None,
                    overwrite: bool = False, options: RunOptions | None = None, incremental: bool = False,
                    since: Any = None, window: str | None = None, **run: Any) -> Released[Summary]:
    """:func:`privatize` through the release path, returning the ledger's receipt and the files written too."""
    if not isinstance(channel, Channel):
        raise LdpDaskError(f"The 'channel' parameter must be a Channel instance. Got {channel!r} instead.")
    if mode not in MODES:
        raise LdpDaskError(f"The 'mode' parameter must be one of {MODES}. Got {mode!r} instead.")
    opts = RunOptions.of(options, **run)
    if mode == "rows" and rows_path is None:
        raise LdpDaskError("Rows mode needs 'rows_path' (--rows-out), the directory for privatized rows.")
    if mode != "rows" and rows_path is not None:
        raise LdpDaskError("'rows_path' is only used with mode='rows'.")
    dataset = plan(source, column, channel.value_kind, opts).for_noise_cells(channel.dim)
    if dataset.value_kind != channel.value_kind:
        raise LdpDaskError(f"the dataset was planned as {dataset.value_kind!r} values but the {channel.name!r} "
                           f"channel needs {channel.value_kind!r} values")
    if getattr(channel, "domain", None) is not None:  # the footers may prove the release would be refused
        dataset.check_range(channel.domain, opts.clip)
    if incremental or since is not None or window is not None:
        return _release_partitioned(dataset, channel, mode, out, overwrite, opts, since, window)
    rows = None if rows_path is None else os.fspath(rows_path)

    secret, opts = _with_key(opts)

    def compute(secret: Secret, outputs: Outputs) -> Summary:
        return run_channel(dataset, channel, mode, secret, opts, outputs.directory("rows") if rows else None, rows)

    return release(dataset, local_charge(channel, mode, opts), compute, opts,
                   targets={"summary": out, "rows": rows}, write=_summary_writer(secret), overwrite=overwrite,
                   content_tag=lambda s: s.content_tag)


def _with_key(opts: RunOptions) -> tuple[Secret, RunOptions]:
    """The run's key, resolved once on the driver (a fresh random key too), and options that carry it."""
    secret = opts.key()
    return secret, dataclasses.replace(opts, secret=secret, seed=None, secret_file=None)


def _summary_writer(secret: Secret) -> Any:
    """What stages the summary file: with an HMAC under a key derived from the release key (``ldp-dask verify``)."""
    mac = summary_mac_key(secret)

    def write(summary: Summary, outputs: Outputs) -> None:
        if "summary" in outputs:
            outputs.write("summary", lambda fh: summary.write_parquet(fh, mac))

    return write


def _release_partitioned(dataset: Dataset, channel: Channel, mode: str, out: Any, overwrite: bool,
                         opts: RunOptions, since: Any, window: str | None) -> Released[Summary]:
    """A partitioned release (:mod:`ldp_dask.partitions`): a file is a partition with its own noise, kept in the
    summary; with ``since`` only the files that changed are read; each file read is charged on its own rows."""
    from .partitions import parse_window, plan_partitions, windowed
    from .summary import read_summary

    if mode != "summary":
        raise LdpDaskError("A partitioned release (incremental, since, window) keeps per-file noisy sums: it runs in "
                           f"summary mode only. Got mode={mode!r}.")
    if dataset.kind != "parquet":
        raise LdpDaskError("A partitioned release (incremental, since, window) needs a Parquet source: its files "
                           "are the partitions. Write the data to Parquet files first.")
    if dataset.unit is not None:
        raise LdpDaskError(f"A partitioned release bounds nothing across files, so it cannot count ε per "
                           f"{dataset.unit!r} (a person may have rows in every file); release the whole table with "
                           "--privacy-unit, or release per row.")
    secret, opts = _with_key(opts)  # the stamps, the plan and the release share it
    if window is not None:
        dataset = windowed(dataset, parse_window(window))
    dataset = dataclasses.replace(dataset, by_file=True)
    previous = None if since is None else read_summary(since, key=secret)
    charge = local_charge(channel, mode, opts)
    plan_ = plan_partitions(dataset, channel, mode, opts.clip, secret, charge.epsilon, since=previous)
    charge = dataclasses.replace(charge, parts=plan_.parts, context={**charge.context, "partitioned": plan_.context_id})
    return release(dataset, charge, lambda sec, _: _run_partitioned(dataset, channel, sec, opts, plan_), opts,
                   targets={"summary": out}, write=_summary_writer(secret), overwrite=overwrite,
                   content_tag=lambda s: s.content_tag, part_tags=lambda s: plan_.part_tags(s.partitions))


def _run_partitioned(dataset: Dataset, channel: Channel, secret: Secret, options: RunOptions,
                     plan_: Any) -> Summary:
    """Read the files the plan must read (each task keyed by its file's name), keep every file's sums apart, and
    add the kept sums of the others: the totals are the exact sum of all partitions, rounded once."""
    from .summary import Partition, sum_partitions

    reading = plan_.to_read
    pieces = tuple(dataclasses.replace(p, index=i) for i, p in enumerate(p for f in reading for p in f.pieces))
    sub = dataclasses.replace(dataset, pieces=pieces, n=sum(p.num_rows for p in pieces))
    tasks = _tasks(sub)
    by_path = {f.path: f for f in reading}
    files = [by_path[pieces[t.start].path or ""] for t in tasks]
    names = [name for f in reading for name in f.task_names()]  # tasks come file by file, in the plan's order
    if len(names) != len(tasks):  # pragma: no cover - a planning bug
        raise RuntimeError(f"{len(tasks)} tasks for {len(names)} planned")
    keys = tuple(named_base_keys(secret, plan_.context, names))
    shared = _ByFile(_Job(sub.reader, pieces, keys, channel, options.clip, "summary"), tuple(f.name for f in files))
    if not tasks:
        acc: dict[str, Any] = {"files": {}}
    elif options.runs_in_process(sub.n):
        acc = _run_local(tasks, shared, options.split_every, options.progress, _run_file_task, _combine_files)
    else:
        with connect(options.client, timeout=options.connect_timeout) as c:
            acc = map_reduce(c, _run_file_task, tasks, shared, _combine_files, "ldp",
                             [task_rows(pieces, t) for t in tasks], options.split_every, options.retries,
                             options.progress, "privatize")
    if "error" in acc:
        raise InputDataError(acc["error"])
    read = {}
    for f in reading:
        a = acc["files"][f.name]
        if a["n"] != f.rows:  # pragma: no cover - a planning bug, not user input
            raise RuntimeError(f"processed {a['n']} rows of {f.name}, planned {f.rows}")
        read[f.name] = Partition(f.name, f.rows, f.layout, f.stamp, f"{a['tag']:064x}",
                                 {k: exactsum.to_float(v) for k, v in a["stats"].items()})
    parts = tuple(read.get(f.name) or plan_.reused[f.name] for f in plan_.files)
    if not parts:  # pragma: no cover - a planned dataset has rows
        raise InputDataError("the release has no partition")
    metadata = _metadata(dataset, secret, "summary", options.clip, None)
    metadata.update(privacy_unit=ROW_UNIT, max_contributions=1,
                    epsilon_per_unit=max(channel.epsilon, channel.epsilon_spent()),
                    partition_context=plan_.context_id, partitions_read=len(read),
                    partitions_reused=len(parts) - len(read))
    tag = sum(int(p.tag, 16) for p in parts) % TAG_MODULUS
    clipped = sum(int(acc["files"][f.name]["clipped"]) for f in reading)
    return Summary(channel, sum(p.rows for p in parts), sum_partitions(parts), metadata,
                   n_clipped=clipped if options.clip else None, content_tag=f"{tag:064x}", partitions=parts)


def local_charge(channel: Channel, mode: str, options: RunOptions) -> Charge:
    """What a local release spends per privacy unit: the ε the per-row channel really spends (from its
    sensitivities), times the rows a person may contribute. The mode decides the output too (clipping changes
    the content, which the content tag covers)."""
    row = per_row_channel(channel, options.max_contributions)
    per_row = max(row.epsilon, row.epsilon_spent())
    return Charge("local", channel.name, channel.params(), per_row * options.max_contributions,
                  context={"mode": mode})


def privatize(source: Any, column: str | None = None, channel: Channel | None = None, mode: str = "summary", *,
              out: str | os.PathLike[str] | None = None, rows_path: str | os.PathLike[str] | None = None,
              overwrite: bool = False, options: RunOptions | None = None, incremental: bool = False,
              since: Any = None, window: str | None = None, **run: Any) -> Summary:
    """Privatize one column with a local channel and reduce it to a :class:`Summary`.

    Every row is privatized by ``channel`` (ε per row, the channel's own
    calibration) on the Dask workers or in this process, and only the noisy
    sums come back (summary mode, drawn exactly in distribution), so the
    summary is what a reader of genuine local reports would see.

    Parameters
    ----------
    source : path, URL, numpy array, pandas DataFrame/Series, pyarrow Table or Dataset
        A Parquet file, directory, glob or fsspec URL (processed on Dask), or
        in-memory data (processed in-process; same result for the same key
        and partitioning), or a :class:`~ldp_dask.source.Dataset` already
        planned by :func:`~ldp_dask.release.plan` (then its partitioning is
        used as it is).
    column : str
        Column to privatize (optional for 1-D arrays).
    channel : Channel
        E.g. ``LaplaceHistogram(epsilon=1, bins=32, domain=(0, 1))``.
    mode : {"summary", "rows"}
        ``"summary"``: only noisy sums leave workers, drawn exactly in
        distribution. ``"rows"``: every row's view is written to ``rows_path``
        (one Parquet file per partition) and the summary is reduced from them.
    out : path or URL, optional
        Also write the summary there (atomically, before the release is
        committed to the ledger).
    rows_path : path or URL, optional
        Output directory for rows mode.
    overwrite : bool
        Replace existing outputs.
    options : RunOptions, optional
        How the release runs: cluster, key, clipping, partitioning, ledger, ...
    incremental : bool
        A *partitioned* release (:mod:`ldp_dask.partitions`, docs/how-to/incremental.md):
        each file of a Parquet source is a partition with noise of its own,
        and the summary keeps every file's noisy sums, so that a later
        release reads only the files that changed (``since``). The ledger
        charges each file released anew on its own rows.
    since : path or Summary, optional
        A partitioned summary released earlier with the same key, channel and
        parameters: its files that did not change (same name, row groups,
        footer, size and modification time) are not read, their kept sums are
        used. The result is bit-identical to reading every file. Implies
        ``incremental``.
    window : str, optional
        ``"30d"``: release only the files of the last 30 days of a
        hive-partitioned table (``date=YYYY-MM-DD/`` directories), ending at
        the newest date. Implies ``incremental``.
    **run :
        Any :class:`~ldp_dask.options.RunOptions` field by name, overriding
        ``options`` (``client="local"``, ``seed=1``, ``ledger=True``, ...).

    Returns
    -------
    Summary

    Raises
    ------
    InputDataError
        Unusable data (NaN, out of domain, wrong type, empty, corrupt); nothing is written.
    BudgetExceeded
        The ledger's budget for the dataset and column would be exceeded; nothing is run.
    """
    return release_summary(source, column, channel, mode, out=out, rows_path=rows_path, overwrite=overwrite,
                           options=options, incremental=incremental, since=since, window=window, **run).result


def _metadata(dataset: Dataset, sec: Secret, mode: str, clip: bool, rows_path: Any) -> dict[str, Any]:
    return {
        "column": dataset.column,
        "source": dataset.description,
        "fingerprint": dataset.fingerprint,
        "root": dataset.root,
        "mode": mode,
        "partitions": len(dataset.pieces),
        "key_id": sec.key_id,
        "key_source": sec.source,
        "reproducible": sec.reproducible,
        "insecure_seed": sec.insecure,
        "clip": bool(clip),
        "nulls": None if dataset.fill is None else {"policy": "value", "value": dataset.fill},
        "rows_path": os.fspath(rows_path) if rows_path is not None else None,
    }
