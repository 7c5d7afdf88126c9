"""Privacy units: at most k rows per person, chosen by keyed randomness, each privatized at ε/k.

With a unit column u naming the person a row belongs to, a release counts ε per
*person* (docs/privacy.md, "Privacy unit"):

1. every row gets a person id (a 64-bit hash of its unit value), a *bucket*
   (a keyed hash of the person id, modulo the number of buckets) and a *rank*
   (a keyed hash of the person id and the row's position in the dataset);
2. each partition keeps, per person, its ``k`` rows of smallest rank (the
   bound is an aggregation: the k smallest of a union are among the k
   smallest of each part), then rows are shuffled by bucket, so all the kept
   rows of a person meet in one place (:func:`ldp_dask.engine.shuffle`, never
   the driver);
3. in each bucket, each person keeps the ``k`` rows of smallest rank — a
   uniformly random subset of size min(k, rows), independent of the values —
   ordered by rank, whatever order the rows arrived in;
4. each kept row is privatized by the channel at ε/k per row. By basic
   composition of k non-interactive ε/k-LDP reports, everything released about
   one person is ε-LDP. Dropped rows are never released.

Two different unit values that hash to the same person id are treated as one
person: they share k rows, which can only lower what each of them contributes.

This module is numpy and pandas (and one numba kernel): it knows nothing of Dask.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ._kernels import smallest_ranks, tag_and_bound
from ._validation import InputDataError
from .privacy import per_row_channel

__all__ = ["UnitKeys", "unit_keys", "person_ids", "buckets", "ranks", "keep_contributions", "per_row_channel",
           "tag_rows", "kept_index", "bucket_values", "concat_rows", "COLUMNS", "KERNEL_MAX_K"]

#: The arrays of a tagged partition: bucket, person id, rank, value.
COLUMNS = ("bucket", "person", "rank", "value")
#: Bounds up to this k run the kernels (:func:`ldp_dask._kernels.tag_and_bound`, :func:`ldp_dask._kernels.smallest_ranks`;
#: memory O(n·k) when one person owns most rows); larger k the two sorts of :func:`keep_contributions`.
KERNEL_MAX_K = 16
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


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
    z = np.asarray(x, dtype=np.uint64) ^ np.uint64(key)
    with np.errstate(over="ignore"):
        for _ in range(2):
            z = (z ^ (z >> np.uint64(30))) * _M1
            z = (z ^ (z >> np.uint64(27))) * _M2
            z = z ^ (z >> np.uint64(31))
    return z


def person_ids(units: Any) -> np.ndarray:
    """A 64-bit id per row from its unit value (integers, strings, dictionary-encoded strings)."""
    if isinstance(units, (pa.Array, pa.ChunkedArray)):
        if isinstance(units, pa.ChunkedArray):
            units = units.combine_chunks()
        if pa.types.is_dictionary(units.type):
            units = units.dictionary_decode()
        if units.null_count:
            raise InputDataError("the privacy unit column contains null values; every row needs a person")
        units = units.to_numpy(zero_copy_only=False)
    values = np.asarray(units)
    if values.dtype.kind == "f":
        raise InputDataError("the privacy unit column holds floating-point numbers; use an integer or string id")
    return pd.util.hash_array(values, categorize=False).astype(np.uint64)


def buckets(person: np.ndarray, keys: UnitKeys, count: int) -> np.ndarray:
    """The bucket of each row: a keyed hash of its person, modulo ``count`` (all rows of a person agree)."""
    return (_mix(person, keys.bucket) % np.uint64(count)).astype(np.int64)


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


def _split(rows: dict[str, np.ndarray], bounds: np.ndarray) -> list[dict[str, np.ndarray]]:
    return [{c: v[bounds[g]:bounds[g + 1]] for c, v in rows.items()} for g in range(len(bounds) - 1)]


def tag_rows(values: Any, units: Any, first_row: int, keys: UnitKeys, count: int, groups: int,
             k: int) -> list[dict[str, np.ndarray]]:
    """A partition's rows tagged (bucket, person, rank, value), each person's ``k`` rows of smallest rank kept
    (the k smallest of a union are among the k smallest of each part), split into ``groups`` groups of
    consecutive buckets (bucket j in group j·groups // count). Worker side."""
    person = person_ids(units)
    value = _value_array(values)
    if k <= KERNEL_MAX_K:
        index, person, rank, bucket, bounds = tag_and_bound(person, first_row, np.uint64(keys.bucket),
                                                            np.uint64(keys.rank), count, groups, k)
        return _split({"bucket": bucket, "person": person, "rank": rank, "value": value[index]}, bounds)
    rank = ranks(person, np.arange(first_row, first_row + len(person), dtype=np.uint64), keys)
    keep = keep_contributions(person, rank, k)
    bucket = buckets(person[keep], keys, count)
    group = (bucket * groups) // count
    order = np.argsort(group, kind="stable")
    keep, bucket = keep[order], bucket[order]
    bounds = np.searchsorted(group[order], np.arange(groups + 1))
    return _split({"bucket": bucket, "person": person[keep], "rank": rank[keep], "value": value[keep]}, bounds)


def concat_rows(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Tagged rows of several parts as one (a part may be empty)."""
    if len(parts) == 1:
        return parts[0]
    return {c: np.concatenate([p[c] for p in parts]) for c in COLUMNS}


def kept_index(rows: dict[str, np.ndarray], k: int) -> np.ndarray:
    """Indices of each person's ``k`` rows of smallest rank: by the one-pass kernel up to :data:`KERNEL_MAX_K`,
    else by :func:`keep_contributions`. Either way a function of the rows and their order, which the plan fixes."""
    person, rank = rows["person"], rows["rank"]
    return smallest_ranks(person, rank, k) if k <= KERNEL_MAX_K else keep_contributions(person, rank, k)


def bucket_values(rows: dict[str, np.ndarray], k: int, first: int, stop: int, categorical: bool) -> list[Any]:
    """The values buckets ``first`` to ``stop`` release: at most ``k`` per person, one array per bucket (numpy,
    or a pyarrow array of categories).

    The rows arrive as the parts of a group concatenated in the order of the map tasks, which the plan fixes;
    the kept rows' order is a function of them, so the release is the same in this process and on any
    cluster, whatever order the parts completed in."""
    keep = kept_index(rows, k)
    bucket = rows["bucket"][keep] - first
    order = np.argsort(bucket.astype(np.uint16) if stop - first <= 1 << 16 else bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange(stop - first + 1))
    values = rows["value"][keep[order]]
    out = [values[bounds[i]:bounds[i + 1]] for i in range(stop - first)]
    return [pa.array(v) for v in out] if categorical else out  # an object array converts in C
