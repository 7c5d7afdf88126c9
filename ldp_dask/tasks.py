"""What one task does on a worker: read its pieces, validate them, and turn them into noisy sums or rows.

Each function here is a task body for :func:`ldp_dask.engine.run` or
:func:`ldp_dask.engine.shuffle`: it receives its :class:`~ldp_dask.engine.Task`
and the job every task shares, and returns a small accumulator or a
:class:`~ldp_dask._validation.TaskError`. Data path (docs/privacy.md)::

    piece ──read──► channel.prepare ──► channel.exact_stats ─┐ (on the worker)
                                        channel.add_noise ◄──┘ keyed rng
          ──► exact fixed-point limbs ──► combine (the engine's tree) ──► Summary

* Only noisy statistics leave a worker (summary mode), or privatized rows
  written straight to Parquet by the worker (rows mode).
* Sums are exact fixed-point limbs (:mod:`ldp_dask.exactsum`): the root is
  bit-identical for every ``split_every``, completion order and cluster.
* A task's noise key depends only on the secret, the public context, the
  task and its content (:mod:`ldp_dask.noise`): a retried or duplicated task
  reproduces its output exactly.
* Deterministic data errors (NaN, out of domain, ...) are returned as values,
  not raised, so they are not retried and reach the driver as one clear
  :class:`~ldp_dask.InputDataError`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import exactsum
from ._validation import InputDataError, TaskError, error_value
from .channels import Channel
from .noise import TAG_MODULUS, bind_key, content_tag, digest_arrays, generator
from .reading import read_piece, read_with_units
from .source import Piece, Reader
from .units import Cells, UnitKeys, bucket_values, person_ids, scratch, tag_rows

__all__ = ["ChannelJob", "ByFile", "each_piece", "noisy_sums", "file_sums", "combine_sums", "combine_files",
           "release_values", "release_prepared", "release_exact", "Tagging", "tag_task", "BucketRelease", "release_group",
           "ROWS_BLOCK_VALUES", "piece_name", "MemoRelease", "combine_memos"]

#: Rows mode privatizes a partition in blocks of about this many values.
ROWS_BLOCK_VALUES = 1 << 22


@dataclass(frozen=True)
class ChannelJob:
    """What every task of one local release shares: reader, pieces, the tasks' noise keys, channel, clipping, mode,
    where rows go. Sent to the cluster once; a task carries only the range of pieces it reads."""

    reader: Reader
    pieces: tuple[Piece, ...]
    keys: tuple[bytes, ...]
    channel: Channel
    clip: bool
    mode: str
    rows_dir: str | None = None
    rows_fs: Any = None


def piece_name(piece: Piece) -> str:
    return piece.path or f"rows {piece.start}..{piece.stop}"


def each_piece(pieces: tuple[Piece, ...], task: Any, fn: Callable[[Piece], Any]) -> list[Any] | TaskError:
    """``fn(piece)`` for the pieces ``task.start`` to ``task.stop``, in order: their results, or the first
    deterministic error as a :class:`TaskError` naming its file, never quoting the data. ``OSError`` and
    ``MemoryError`` propagate: transient, Dask retries the task."""
    out = []
    for piece in pieces[task.start:task.stop]:
        try:
            out.append(fn(piece))
        except (OSError, MemoryError):
            raise
        except Exception as exc:
            return error_value(piece_name(piece), exc)
    return out


def noisy_sums(task: Any, job: ChannelJob) -> dict[str, Any] | TaskError:
    """One task's rows, released: its pieces are read and validated one by one (an error names its file), then
    released together as one partition, under the task's key; returns a small accumulator. In summary mode, a
    channel whose exact sums are integers (``Channel.integer_sums``) sums each piece as it is read, so the task's
    rows are never held together: integer partial sums add exactly, the same statistics as one pass."""
    if job.mode == "summary" and job.channel.integer_sums:
        return _summed_pieces(task, job)
    parts = each_piece(job.pieces, task, lambda p: job.channel.prepare(read_piece(job.reader, p), clip=job.clip))
    if isinstance(parts, TaskError):
        return parts
    x = parts[0][0] if len(parts) == 1 else np.concatenate([v for v, _ in parts])
    clipped = sum(c for _, c in parts)
    del parts
    try:
        return release_prepared(x, clipped, job, job.keys[task.index], task.index)
    except (OSError, MemoryError):
        raise
    except Exception as exc:
        return error_value(piece_name(job.pieces[task.start]), exc)


def _summed_pieces(task: Any, job: ChannelJob) -> dict[str, Any] | TaskError:
    """:func:`noisy_sums` of a channel with integer sums: exact statistics piece by piece, added, then noise once."""

    def piece_stats(p: Piece) -> tuple[int, int, dict[str, np.ndarray]]:
        return job.channel.counted(read_piece(job.reader, p), clip=job.clip)

    parts = each_piece(job.pieces, task, piece_stats)
    if isinstance(parts, TaskError):
        return parts
    m, clipped, exact = parts[0]
    for mi, ci, ei in parts[1:]:
        m, clipped = m + mi, clipped + ci
        exact = {k: v + ei[k] for k, v in exact.items()}
    try:
        return release_exact(exact, m, clipped, job, job.keys[task.index])
    except (OSError, MemoryError):
        raise
    except Exception as exc:
        return error_value(piece_name(job.pieces[task.start]), exc)


def release_values(x: Any, job: ChannelJob, key: bytes, index: int, where: str) -> dict[str, Any] | TaskError:
    """Validate a partition's values and turn them into noisy sums (and privatized rows in rows mode)."""
    try:
        x, n_clipped = job.channel.prepare(x, clip=job.clip)
    except InputDataError as exc:
        return error_value(where, exc)
    return release_prepared(x, n_clipped, job, key, index)


def release_prepared(x: np.ndarray, n_clipped: int, job: ChannelJob, key: bytes, index: int) -> dict[str, Any]:
    """A partition's validated values → noisy sums drawn once for its ``len(x)`` rows (or privatized rows)."""
    m = len(x)
    if job.mode == "summary":
        return release_exact(job.channel.exact_stats(x), m, n_clipped, job, key)
    digest = digest_arrays(x)
    rng = generator(bind_key(key, digest))
    stats = _write_rows(job, index, x, rng)
    return {"n": m, "clipped": n_clipped, "pieces": 1, "stats": stats, "tag": content_tag(key, digest)}


def release_exact(exact: dict[str, np.ndarray], m: int, n_clipped: int, job: ChannelJob, key: bytes) -> dict[str, Any]:
    """A partition's exact statistics (of its ``m`` rows) → its noisy sums, drawn once under the partition's key
    bound to its content; the exact statistics never leave this function."""
    digest = digest_arrays(np.array([m]), *(exact[k] for k in sorted(exact)))
    noisy = job.channel.add_noise(exact, m, generator(bind_key(key, digest)))
    del exact
    stats = {k: exactsum.from_float(v) for k, v in noisy.items()}
    return {"n": m, "clipped": n_clipped, "pieces": 1, "stats": stats, "tag": content_tag(key, digest)}


def _write_rows(job: ChannelJob, index: int, x: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
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


def combine_sums(*accs: dict[str, Any]) -> dict[str, Any]:
    """Associative, exact combination of noisy-sum accumulators."""
    keys = accs[0]["stats"].keys()
    return {
        "n": sum(a["n"] for a in accs),
        "clipped": sum(a["clipped"] for a in accs),
        "pieces": sum(a["pieces"] for a in accs),
        "tag": sum(a["tag"] for a in accs) % TAG_MODULUS,
        "stats": {k: exactsum.add(*(a["stats"][k] for a in accs)) for k in keys},
    }


@dataclass(frozen=True)
class ByFile:
    """A partitioned release's job: the release's job, the file each task reads, and the task body whose
    accumulator is filed under it (:func:`noisy_sums`, or a plan's :func:`ldp_dask.plans.tasks.plan_sums`); sent to
    the cluster once."""

    job: Any
    files: tuple[str, ...]
    sums: Callable[[Any, Any], Any] = noisy_sums


def file_sums(task: Any, job: ByFile) -> dict[str, Any] | TaskError:
    """``job.sums``'s accumulator, filed under the task's file."""
    acc = job.sums(task, job.job)
    return acc if isinstance(acc, TaskError) else {"files": {job.files[task.index]: acc}}


def combine_files(*accs: dict[str, Any], combine: Callable[..., Any] = combine_sums) -> dict[str, Any]:
    """Combine per-file accumulators with ``combine``: a file's tasks add up exactly, files stay apart (the engine
    takes ``functools.partial(combine_files, combine=...)`` for another kind of accumulator)."""
    out: dict[str, Any] = {}
    for a in accs:
        for name, acc in a["files"].items():
            out[name] = combine(out[name], acc) if name in out else acc
    return {"files": out}


# --- privacy units: tag rows by person, bound each person's rows, shuffle by bucket, release per bucket --------
@dataclass(frozen=True)
class Tagging:
    """What every tagging task shares (sent once): the reader, the pieces and the row number each starts at, the
    rank key, the persons' cells and the bound k."""

    reader: Reader
    pieces: tuple[Piece, ...]
    first_rows: tuple[int, ...]
    keys: UnitKeys
    cells: Cells
    k: int


def tag_task(task: Any, job: Tagging, groups: int) -> list[dict[str, np.ndarray]] | TaskError:
    """A task's rows tagged (person, rank, value), each person's ``k`` smallest ranks in the task kept, in cell
    order, cut into ``groups`` groups of buckets (worker side). The task's pieces are consecutive in the plan, so
    their rows are the positions ``first_rows[task.start]`` on."""
    ends = np.cumsum([0] + [p.num_rows for p in job.pieces[task.start:task.stop]])
    person = scratch("ids", int(ends[-1]))  # read by the bounding only: it keeps copies of what it keeps

    def tagged(piece: Piece) -> Any:  # the piece's values; its persons' ids straight into the task's array
        values, units = read_with_units(job.reader, piece)
        i = piece.index - task.start  # a piece's index is its place in the plan
        person_ids(units, out=person[ends[i]:ends[i + 1]], nulls=job.reader.unit_nulls)
        return values

    read = each_piece(job.pieces, task, tagged)
    if isinstance(read, TaskError):
        return read
    values = read[0] if len(read) == 1 else _concat_values(read)
    where = f"the rows of pieces {task.start}..{task.stop - 1}"
    try:
        return tag_rows(values, person, job.first_rows[task.start], job.keys, job.cells, groups, job.k)
    except (OSError, MemoryError):
        raise
    except Exception as exc:
        return error_value(where, exc)


def _concat_values(parts: list[Any]) -> Any:
    """The pieces' values as one array: numbers without nulls into this thread's scratch (the bounding gathers
    copies of the values it keeps), anything else as a new array."""
    if isinstance(parts[0], (pa.Array, pa.ChunkedArray)):
        if all(_plain_numbers(p) for p in parts):
            parts = [p.to_numpy() for p in parts]
        else:
            return pa.chunked_array(parts).combine_chunks()
    dtype = np.result_type(*parts)
    if dtype.kind not in "iuf":
        return np.concatenate(parts)
    return np.concatenate(parts, out=scratch("values", sum(len(p) for p in parts), dtype))


def _plain_numbers(values: Any) -> bool:
    """A pyarrow array of integers or floats without nulls, in one chunk (so that it converts to numpy in place)."""
    if isinstance(values, pa.ChunkedArray) and values.num_chunks != 1:
        return False
    return (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)) and values.null_count == 0


@dataclass(frozen=True)
class BucketRelease:
    """What a group of buckets becomes: for each bucket j, ``handler(values, where, j, keys[j])`` on its persons'
    kept rows, combined by ``combine``. ``handler`` returns an accumulator or a :class:`TaskError`."""

    handler: Callable[[Any, str, int, bytes | None], Any]
    combine: Callable[..., Any]
    keys: tuple[bytes | None, ...]
    cells: Cells
    k: int
    categorical: bool
    #: the handler gets ``(values, person ids)`` (a longitudinal release, :class:`MemoRelease`)
    persons: bool = False


def release_group(g: int, groups: int, parts: list[dict[str, np.ndarray]], job: BucketRelease) -> Any:
    """The buckets of group ``g`` of ``groups``, each bounded to ``k`` rows per person and handed to the handler
    (worker side)."""
    first, stop, _, _ = job.cells.group_cells(g, groups)
    where = f"the rows of buckets {first}..{stop - 1} (grouped by person)"
    try:
        values = bucket_values(parts, job.k, job.cells, first, stop, job.categorical, job.persons)
    except (OSError, MemoryError):
        raise
    except Exception as exc:
        return error_value(where, exc)
    accs = []
    for j, x in zip(range(first, stop), values):
        where = f"the rows of bucket {j} (grouped by person)"
        try:
            acc = job.handler(x, where, j, job.keys[j])
        except (OSError, MemoryError):
            raise
        except Exception as exc:
            acc = error_value(where, exc)
        if isinstance(acc, TaskError):
            return acc
        accs.append(acc)
    return job.combine(*accs)


# --- longitudinal releases: memoized reports, keyed by person ---------------------------------------------------
@dataclass(frozen=True)
class MemoRelease:
    """What a bucket of persons becomes in a longitudinal release: the exact sums of their memoized reports
    (:meth:`~ldp_dask.channels.Memoized.memo_stats` under the series' memo key, derived on the driver), the
    instantaneous layer drawn on them under the bucket's key, and each person's (person, report) digest pair for
    the ledger. Nothing else leaves the worker."""

    channel: Channel
    memo_key: int
    clip: bool

    def __call__(self, values: Any, where: str, index: int, key: bytes | None) -> dict[str, Any] | TaskError:
        x, person = values
        try:
            x, n_clipped = self.channel.prepare(x, clip=self.clip)
        except InputDataError as exc:
            return error_value(where, exc)
        exact, pairs = self.channel.memo_stats(x, person, self.memo_key)  # type: ignore[attr-defined]
        m = len(x)
        # every exact statistic (a capped channel's per-person reports too: two buckets whose sums agree are not the
        # same content), and the digest pairs
        digest = digest_arrays(np.array([m]), *(exact[k] for k in sorted(exact)), pairs)
        noisy = self.channel.add_noise(exact, m, generator(bind_key(key or b"", digest)))
        del exact
        return {"n": m, "clipped": n_clipped, "pieces": 1, "tag": content_tag(key or b"", digest),
                "stats": {k: exactsum.from_float(np.asarray(v, dtype=np.float64)) for k, v in noisy.items()},
                "pairs": pairs}


def combine_memos(*accs: dict[str, Any]) -> dict[str, Any]:
    """:func:`combine_sums`, and the buckets' digest pairs together."""
    return {**combine_sums(*accs), "pairs": np.concatenate([a["pairs"] for a in accs])}
