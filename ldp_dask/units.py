"""Privacy units: exactly k reports per person, from rows chosen by keyed randomness, each privatized at ε/k.

With a unit column u naming the person a row belongs to, a release counts ε per
*person* (docs/privacy.md, "Privacy unit"):

1. every row gets a person id (a 64-bit hash of its unit value), a *cell*
   (the top bits of a keyed hash of the person id, scaled to the number of
   cells, :class:`Cells`; a run of consecutive cells makes a *bucket*) and a
   *rank* (a keyed hash of the person id and the row's position in the
   dataset);
2. each map task keeps, per person, its ``k`` rows of smallest rank (the
   bound is an aggregation: the k smallest of a union are among the k
   smallest of each part), in cell order; then rows are shuffled by bucket,
   so all the kept rows of a person meet in one place
   (:func:`ldp_dask.engine.shuffle`, never the driver);
3. in each bucket, cell by cell, each person keeps the ``k`` rows of
   smallest rank — a uniformly random subset of size min(k, rows),
   independent of the values — in an order that depends on the set of rows
   alone, not on how the map tasks cut them or the order they arrive in;
4. a person with fewer than k rows repeats them, in rank order, to k reports
   (:func:`pad_index`), so that every person makes exactly k reports and the
   number of reports, k times the number of persons, says nothing about how
   many rows anyone owns;
5. each report is privatized by the channel at ε/k. By basic composition of
   k non-interactive ε/k-LDP reports, everything released about one person is
   ε-LDP, whatever rows (how many, which values) the person owns. Dropped rows
   are never released.

Two different unit values that hash to the same person id are treated as one
person: they share k rows, which can only lower what each of them contributes.

This module is numpy and pandas (and the numba kernels it calls): it knows nothing of Dask.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ._kernels import bound_cells, integer_ids, tag_and_bound
from ._validation import InputDataError
from .noise import mix64
from .privacy import per_row_channel

__all__ = ["UnitKeys", "unit_keys", "Cells", "plan_cells", "person_ids", "cells_of", "ranks",
           "keep_contributions", "per_row_channel", "tag_rows", "kept_index", "bucket_values", "concat_rows", "COLUMNS",
           "KERNEL_MAX_K", "CELL_ROWS", "scratch", "pad_index", "NO_PERSON", "person_sketch", "sketch_count"]

#: The arrays of a tagged part: person id, rank, value (in cell order; the cell is a function of the person).
COLUMNS = ("person", "rank", "value")
#: Bounds up to this k run the kernels (:func:`ldp_dask._kernels.tag_and_bound`, :func:`ldp_dask._kernels.bound_cells`;
#: memory O(cell·k)); larger k the two sorts of :func:`keep_contributions`.
KERNEL_MAX_K = 16
#: The plan makes cells of about this many rows of the whole input, so that a cell's table of persons stays in the
#: processor's cache on both sides of the shuffle.
CELL_ROWS = 8192


@dataclass(frozen=True)
class UnitKeys:
    """Keys of the bucket and rank hashes (derived on the driver from the secret; never the secret)."""

    bucket: int
    rank: int


def unit_keys(secret_key: bytes, context: bytes) -> UnitKeys:
    """Derive the two 64-bit keys from the secret and the release's context (driver side)."""
    d = hmac.new(secret_key, b"ldp_dask/units/v1|" + context, hashlib.sha256).digest()
    return UnitKeys(int.from_bytes(d[:8], "little"), int.from_bytes(d[8:16], "little"))


def _mix(x: np.ndarray, key: int) -> np.ndarray:
    """A keyed 64-bit mixing bijection (SplitMix64's finalizer on x ⊕ key, twice)."""
    return mix64(mix64(np.asarray(x, dtype=np.uint64) ^ np.uint64(key)))


#: The id of a row whose unit is null, when such rows are dropped (``unit_nulls="drop"``): it belongs to no person,
#: and :func:`bucket_values` removes it before anything is released.
NO_PERSON = np.uint64(0xFFFFFFFFFFFFFFFF)


def person_ids(units: Any, out: np.ndarray | None = None, nulls: str = "error") -> np.ndarray:
    """A 64-bit id per row from its unit value: integers by a mixing bijection (distinct integers, distinct ids,
    whatever their width), strings and other values by pandas' hash (``pd.util.hash_array``). With ``out`` (uint64,
    one per row) the ids are written there. A null unit is refused, or with ``nulls="drop"`` gets
    :data:`NO_PERSON`."""
    missing = None
    if isinstance(units, (pa.Array, pa.ChunkedArray)):
        if isinstance(units, pa.ChunkedArray):
            units = units.combine_chunks()
        if pa.types.is_dictionary(units.type):
            units = units.dictionary_decode()
        if units.null_count:
            if nulls != "drop":
                raise InputDataError("the privacy unit column contains null values; every row needs a person "
                                     "(--unit-nulls drop, or unit_nulls='drop', drops those rows)")
            missing = units.is_null().to_numpy(zero_copy_only=False)
            units = units.fill_null(pa.scalar(0 if pa.types.is_integer(units.type) else "", units.type))
        units = units.to_numpy(zero_copy_only=False)
    values = np.asarray(units)
    if values.dtype.kind == "f":
        raise InputDataError("the privacy unit column holds floating-point numbers; use an integer or string id")
    ids = np.empty(len(values), np.uint64) if out is None else out
    if len(ids) != len(values):
        raise ValueError(f"person_ids: out holds {len(ids)} ids for {len(values)} rows")
    if values.dtype.kind in "iu":  # one pass; an integer has the same id at every width
        integer_ids(values.astype(np.int64, copy=False), ids)
    else:
        ids[:] = pd.util.hash_array(values, categorize=False)
    if missing is not None:
        ids[missing] = NO_PERSON
    return ids


@dataclass(frozen=True)
class Cells:
    """How persons are cut into ``buckets`` buckets of ``per_bucket`` cells each: the cell of a person is the top
    32 bits of its keyed hash scaled to :attr:`count` (``⌊h·count / 2³²⌋``), its bucket ``cell // per_bucket``,
    which is the same hash scaled to ``buckets``. Buckets are the unit of release (one noise key each), cells the
    unit of the bounding kernels' tables."""

    key: int
    buckets: int
    per_bucket: int

    @property
    def count(self) -> int:
        return self.buckets * self.per_bucket

    def group_cells(self, g: int, groups: int) -> tuple[int, int, int, int]:
        """Buckets ``first..stop-1`` of group g (those j with j·groups // buckets == g) and their cells."""
        first = -(-g * self.buckets // groups)
        stop = -(-(g + 1) * self.buckets // groups)
        return first, stop, first * self.per_bucket, stop * self.per_bucket


def plan_cells(key: int, buckets: int, rows: int) -> Cells:
    """Cells of about :data:`CELL_ROWS` rows of the input (at least one per bucket)."""
    per_bucket = max(1, -(-rows // (buckets * CELL_ROWS)))
    if buckets * per_bucket >= 1 << 31:  # pragma: no cover - 2^42 rows
        raise ValueError(f"{buckets} buckets of {per_bucket} cells: too many cells")
    return Cells(key, buckets, per_bucket)


def cells_of(person: np.ndarray, key: int, count: int) -> np.ndarray:
    """The cell of each row's person: the top 32 bits of its keyed hash scaled to ``count`` cells."""
    with np.errstate(over="ignore"):
        return ((_mix(person, key) >> np.uint64(32)) * np.uint64(count) >> np.uint64(32)).astype(np.int64)


def ranks(person: np.ndarray, position: np.ndarray, keys: UnitKeys) -> np.ndarray:
    """A keyed random rank per row, from its person and its position in the dataset (distinct within a person)."""
    return _mix(_mix(np.asarray(position, dtype=np.uint64), keys.rank) ^ person, keys.rank ^ 0x5851F42D4C957F2D)


def keep_contributions(person: np.ndarray, rank: np.ndarray, k: int) -> np.ndarray:
    """Indices of the rows kept: per person, the ``k`` of smallest rank, ordered by (person, rank).

    The order depends only on the rows, not on how they arrived, so a bucket's
    release is the same whichever worker built it.
    """
    # by rank, then stably by person: the (person, rank) order in two sorts (faster than np.lexsort here);
    # ranks are distinct within a person, so the order does not depend on how the rows arrived
    by_rank = np.argsort(rank)
    order = by_rank[np.argsort(person[by_rank], kind="stable")]
    p = person[order]
    if len(p) == 0:
        return order
    start = np.r_[True, p[1:] != p[:-1]]
    group_start = np.maximum.accumulate(np.where(start, np.arange(len(p)), 0))
    return order[(np.arange(len(p)) - group_start) < k]


def _value_array(values: Any) -> np.ndarray:
    """A piece's values as numpy: numbers as they are, categories as an object array of Python values."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        return np.asarray(values.to_numpy(zero_copy_only=False), dtype=object)
    return np.asarray(values)


def tag_rows(values: Any, person: np.ndarray, first_row: int, keys: UnitKeys, cells: Cells, groups: int,
             k: int) -> list[dict[str, np.ndarray]]:
    """A map task's rows tagged (person, rank, value), each person's ``k`` rows of smallest rank kept (the k
    smallest of a union are among the k smallest of each part), in cell order, cut into ``groups`` groups of
    consecutive buckets (:meth:`Cells.group_cells`). ``person`` is :func:`person_ids` of the rows, whose
    positions in the dataset start at ``first_row``. Worker side."""
    value = _value_array(values)
    if k <= KERNEL_MAX_K:
        index, person, rank, starts = tag_and_bound(person, first_row, np.uint64(cells.key), np.uint64(keys.rank),
                                                    cells.count, k, scratch("spread", len(person), width=2),
                                                    scratch("cells", len(person), np.int32))
    else:
        rank = ranks(person, np.arange(first_row, first_row + len(person), dtype=np.uint64), keys)
        index, starts = _in_cell_order(keep_contributions(person, rank, k), person, cells)
        person, rank = person[index], rank[index]
    value = value[index]
    edges = [starts[cells.group_cells(g, groups)[2]] for g in range(groups)] + [len(index)]
    return [{"person": person[a:b], "rank": rank[a:b], "value": value[a:b]} for a, b in zip(edges, edges[1:])]


#: Large working arrays are kept for the next task on the same thread, up to this many bytes a thread in all: a map
#: task's persons' ids and values, the bounding kernel's scratch rows and cells (36 bytes a row; a direct shuffle's
#: map task reads about 2^22 rows: 144 MiB), a reduce's rows gathered into one and the positions it keeps. A fresh
#: buffer is faulted in page by page on a worker whose allocator returns memory at once (Dask's default), and the
#: kernel zeroes each page: 6.5-7 ms of a 4M-row map task's kernel; 5-30 ms (system time, more beside a busy
#: neighbour) of a 2M-row reduce's gathering.
SCRATCH_BYTES = 1 << 28
_SCRATCH = threading.local()


def scratch(name: str, rows: int, dtype: Any = np.uint64, width: int = 0) -> np.ndarray:
    """A buffer of ``rows`` rows (of ``width`` columns, or 1-d with ``width`` 0) of ``dtype``, this thread's cached
    one under ``name`` if large enough; a new one is kept in its place while the thread's buffers stay within
    :data:`SCRATCH_BYTES`. Its contents are left over from the last user: the caller overwrites it before reading,
    and copies out what it keeps past the next task on this thread."""
    shape = (rows, width) if width else (rows,)
    cache: dict[str, np.ndarray] = _SCRATCH.__dict__.setdefault("buffers", {})
    buf = cache.pop(name, None)
    if buf is not None and buf.dtype == dtype and len(buf) >= rows and buf.shape[1:] == shape[1:]:
        cache[name] = buf
        return buf[:rows]
    del buf  # too small, or another type: dropped
    row_bytes = max(width, 1) * np.dtype(dtype).itemsize
    held = sum(b.nbytes for b in cache.values())
    spare = max(rows, min(1 << 20, SCRATCH_BYTES // row_bytes))  # small requests get room to grow
    if held + spare * row_bytes > SCRATCH_BYTES:
        return np.empty(shape, dtype)
    cache[name] = np.empty((spare,) + shape[1:], dtype)
    return cache[name][:rows]


def _in_cell_order(index: np.ndarray, person: np.ndarray, cells: Cells, first: int = 0, stop: int | None = None,
                   rank: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``index`` sorted by the cell of ``person[index]`` (stably; or with ``rank``, by (cell, person, rank)), and
    each cell's start (cells first..stop-1)."""
    stop = cells.count if stop is None else stop
    cell = cells_of(person[index], cells.key, cells.count)
    if rank is None:
        order = np.argsort(cell, kind="stable")
    else:
        order = np.lexsort((rank[index], person[index], cell))
    return index[order], np.searchsorted(cell[order], np.arange(first, stop + 1))


def concat_rows(parts: list[dict[str, np.ndarray]], reuse: bool = False) -> dict[str, np.ndarray]:
    """Tagged rows of several parts as one (a part may be empty). With ``reuse``, numeric columns are gathered into
    this thread's scratch buffers (:func:`scratch`): valid until the next such call on this thread."""
    if len(parts) == 1:
        return parts[0]
    out = {}
    for c in COLUMNS:
        arrays = [p[c] for p in parts]
        dtype = np.result_type(*arrays)
        if reuse and dtype.kind in "iufb":
            out[c] = np.concatenate(arrays, out=scratch(f"rows-{c}", sum(len(a) for a in arrays), dtype))
        else:
            out[c] = np.concatenate(arrays)
    return out


def kept_index(parts: list[dict[str, np.ndarray]], k: int, cells: Cells, first: int, stop: int,
               reuse: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """The parts' rows as one, the positions of each person's ``k`` rows of smallest rank in cell order (cells
    ``first..stop-1``), and each cell's start in them.

    Up to :data:`KERNEL_MAX_K` by :func:`~ldp_dask._kernels.bound_cells` (no spread: the parts arrive in cell
    order; rows in another order, as the large shuffle delivers them, are first put in cell order), else by
    :func:`keep_contributions`. Either way the kept rows of a cell come in an order of the set of rows alone (by
    home slot, person and rank; or by rank and person): however the map tasks cut the rows and whatever order
    they arrive in, the result is the same. With ``reuse`` the rows and positions may live in this thread's scratch
    buffers (:func:`concat_rows`), valid until the next such call on this thread."""
    rows = concat_rows(parts, reuse)
    person, rank = rows["person"], rows["rank"]
    if k > KERNEL_MAX_K:  # (cell, person, rank): each person's kept rows together, by rank, as the kernel's order
        keep, starts = _in_cell_order(keep_contributions(person, rank, k), person, cells, first, stop, rank)
        return rows, keep, starts
    bounds = np.cumsum([0] + [len(p["person"]) for p in parts])
    out = scratch("kept", len(person), np.int64) if reuse else np.empty(len(person), np.int64)
    keep, starts = bound_cells(person, rank, bounds, np.uint64(cells.key), cells.count, first, stop, k, out)
    if len(starts) == 0:  # not in cell order
        order, _ = _in_cell_order(np.arange(len(person)), person, cells, first, stop)
        keep, starts = bound_cells(person[order], rank[order], np.array([0, len(order)]), np.uint64(cells.key),
                                   cells.count, first, stop, k, out)
        keep = order[keep]
    return rows, keep, starts


def pad_index(person: np.ndarray, starts: np.ndarray, k: int) -> tuple[np.ndarray | None, np.ndarray]:
    """Each person's kept rows repeated to exactly ``k`` reports: positions into ``person`` and each cell's start.

    ``person`` holds the kept rows' persons, each person's rows together and in rank order (at most k of them),
    cells starting at ``starts``. A person with r < k rows reports its rows in rank order, cycling: row i
    (0-based, by rank) fills slots i, i + r, ... of its k. Since the rank order is a uniformly random order of the
    person's rows, each row fills ⌊k/r⌋ or ⌈k/r⌉ slots and, on average over the key, exactly k/r: every person
    weighs the same, k reports, and within a person every row the same. The number of reports is then k times
    the number of persons, whatever rows each owns (docs/privacy.md, "Privacy unit"). Returns ``(None, starts)``
    when every person already has k rows."""
    n = len(person)
    if n == 0 or k == 1:  # k = 1: every person kept exactly one row
        return None, starts
    first = np.flatnonzero(np.r_[True, person[1:] != person[:-1]])
    counts = np.diff(np.r_[first, n])
    if len(first) * k == n:  # every person has k rows (none has more)
        return None, starts
    slot = np.tile(np.arange(k, dtype=np.int64), len(first))
    index = np.repeat(first, k) + slot % np.repeat(counts, k)
    return index, k * np.searchsorted(first, starts)


def bucket_values(parts: list[dict[str, np.ndarray]], k: int, cells: Cells, first: int, stop: int,
                  categorical: bool, persons: bool = False) -> list[Any]:
    """The values buckets ``first`` to ``stop`` release: exactly ``k`` reports per person (:func:`pad_index`),
    one array per bucket (numpy, or a pyarrow array of categories); with ``persons``, a pair per bucket: the
    values and each report's person id (a longitudinal release keys a person's report by it).

    The parts are those of a group from every map task; the kept rows and their order are a function of the
    set of rows alone (:func:`kept_index`), so the release is the same in this process and on any cluster,
    however many map tasks cut the rows and whatever order the parts completed in."""
    per = cells.per_bucket
    rows, keep, starts = kept_index(parts, k, cells, first * per, stop * per, reuse=True)
    person = rows["person"][keep]
    someone = person != NO_PERSON
    if not someone.all():  # rows of no person (a null unit, dropped): out before anything is released
        starts = np.concatenate([[0], np.cumsum(someone)])[starts]
        keep, person = keep[someone], person[someone]
    index, starts = pad_index(person, starts, k)
    if index is not None:
        keep = keep[index]
    values = rows["value"][keep]  # a copy: the rows and positions are scratch
    edges = starts[::per]
    out = [values[edges[i]:edges[i + 1]] for i in range(stop - first)]
    out = [pa.array(v) for v in out] if categorical else out  # an object array converts in C
    if not persons:
        return out
    ids = rows["person"][keep]
    return [(v, ids[edges[i]:edges[i + 1]]) for i, v in enumerate(out)]


#: Registers of the persons sketch (:func:`person_sketch`): 2^12, a relative error of about 1.04/√4096 = 1.6%.
SKETCH_BITS = 12


def person_sketch(person: np.ndarray) -> np.ndarray:
    """A HyperLogLog sketch of distinct persons (Flajolet, Fusy, Gandouet and Meunier 2007): per register (the top
    :data:`SKETCH_BITS` bits of a person's id, re-mixed), the most leading zeros + 1 of the rest. Sketches of
    disjoint or overlapping parts combine by ``np.maximum``; :func:`sketch_count` estimates the count. Rows of no
    person (:data:`NO_PERSON`) are left out."""
    b = SKETCH_BITS
    person = np.asarray(person, np.uint64)
    person = person[person != NO_PERSON]
    if len(person) == 0:
        return np.zeros(1 << b, np.uint8)
    h = _mix(person, 0x2545F4914F6CDD1D)
    index = (h >> np.uint64(64 - b)).astype(np.intp)
    rest = (h << np.uint64(b)) | np.uint64(1 << (b - 1))  # never 0: at most 64 - b leading zeros
    _, exponent = np.frexp(rest.astype(np.float64))  # 2^(exponent-1) <= rest < 2^exponent (to float precision)
    rank = (65 - exponent).astype(np.intp)  # 1 .. 65 - b
    seen = np.zeros((1 << b, 66), bool)  # which ranks each register saw: one scatter, no per-row maximum
    seen[index, rank] = True
    return np.where(seen.any(axis=1), 65 - np.argmax(seen[:, ::-1], axis=1), 0).astype(np.uint8)


def sketch_count(registers: np.ndarray) -> float:
    """The distinct persons a :func:`person_sketch` saw (HyperLogLog, with linear counting for small counts)."""
    m = len(registers)
    estimate = 0.7213 / (1 + 1.079 / m) * m * m / float(np.sum(np.ldexp(1.0, -registers.astype(np.int64))))
    zeros = int(np.count_nonzero(registers == 0))
    if estimate <= 2.5 * m and zeros:
        return m * float(np.log(m / zeros))
    return estimate
