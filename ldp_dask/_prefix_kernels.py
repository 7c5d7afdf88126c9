"""Numba kernels of the heavy-hitter channel (:mod:`ldp_dask.channels.heavy_hitters`): strings to fixed-width
bytes, and the keyed hash of a value's prefix. The workers hash rows' prefixes and the driver hashes candidate
prefixes with the same inline function, so the two always agree (tests check both against a pure-Python
reference)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from ._kernels import _mix

__all__ = ["fixed_width", "item_hashes", "row_item_hashes", "item_buckets", "prefix_counts"]


@njit(cache=True, nogil=True)
def fixed_width(offsets: np.ndarray, data: np.ndarray, width: int, out: np.ndarray) -> None:
    """Arrow strings (``offsets``, ``data``) → ``out`` of shape (n, width + 1): column 0 the length capped at
    width + 1 (width + 1: longer than width), then the first ``width`` bytes, zero-padded."""
    for i in range(out.shape[0]):
        a = offsets[i]
        n = offsets[i + 1] - a
        out[i, 0] = min(n, width + 1)
        for k in range(min(n, width)):
            out[i, 1 + k] = data[a + k]


@njit(cache=True, nogil=True, inline="always")
def _item_hash(row: np.ndarray, cut: Any, complete: int, salt: np.uint64) -> np.uint64:
    """The item (the first ``cut`` bytes of ``row[1:]``, complete or a proper prefix): eight bytes at a time,
    little-endian, each word mixed into the state under the salt; then the length and the flag."""
    h = salt
    k = 0
    while k < cut:
        w = np.uint64(0)
        for b in range(min(8, cut - k)):
            w |= np.uint64(row[1 + k + b]) << np.uint64(8 * b)
        h = _mix(h ^ w, salt)
        k += 8
    return _mix(h ^ np.uint64(2 * cut + complete), salt ^ np.uint64(0x9E3779B97F4A7C15))


@njit(cache=True, nogil=True)
def item_hashes(x: np.ndarray, cut: np.ndarray, complete: np.ndarray, salt: np.uint64, out: np.ndarray) -> None:
    """``out[i]``: the hash of candidate i, the first ``cut[i]`` bytes of ``x[i, 1:]``, flagged ``complete[i]``."""
    for i in range(x.shape[0]):
        out[i] = _item_hash(x[i], cut[i], complete[i], salt)


@njit(cache=True, nogil=True, inline="always")
def _row_hash(row: np.ndarray, group: int, per_level: int, levels: int, start: int, salt: np.uint64) -> np.uint64:
    """A row's item at its group's level: its first level + start bytes, complete when the value has no more."""
    cut = min(group // per_level, levels - 1) + start
    n = int(row[0])
    return _item_hash(row, min(n, cut), 1 if n <= cut else 0, salt)


@njit(cache=True, nogil=True, inline="always")
def _bucket(hashed: np.uint64, key: np.uint64, width: int) -> np.int64:
    """The bucket of an item in a group of key ``key``: the top 32 bits of a keyed mix scaled to ``width``."""
    return np.int64(((_mix(hashed, key) >> np.uint64(32)) * np.uint64(width)) >> np.uint64(32))


@njit(cache=True, nogil=True)
def item_buckets(hashes: np.ndarray, groups: np.ndarray, keys: np.ndarray, width: int, out: np.ndarray) -> None:
    """``out[i]``: the bucket of item hash ``hashes[i]`` in group ``groups[i]`` (of key ``keys[groups[i]]``)."""
    for i in range(hashes.shape[0]):
        out[i] = _bucket(hashes[i], keys[groups[i]], width)


@njit(cache=True, nogil=True)
def prefix_counts(x: np.ndarray, n_groups: int, per_level: int, levels: int, start: int, salt: np.uint64,
                  keys: np.ndarray, width: int, counts: np.ndarray, rows: np.ndarray) -> None:
    """The exact statistics of a block in one pass: row i in group i mod ``n_groups`` adds 1 to the cell of its
    item's bucket (``counts``, group-major) and to its group's rows."""
    for i in range(x.shape[0]):
        g = i % n_groups
        b = _bucket(_row_hash(x[i], g, per_level, levels, start, salt), keys[g], width)
        counts[g * width + b] += 1
        rows[g] += 1


@njit(cache=True, nogil=True)
def row_item_hashes(x: np.ndarray, groups: np.ndarray, per_level: int, levels: int, start: int, salt: np.uint64,
                    out: np.ndarray) -> None:
    """``out[i]``: the hash of row i's item at the level of its group (``min(group // per_level, levels − 1)``):
    its first level + start bytes, complete when the value has no more."""
    for i in range(x.shape[0]):
        out[i] = _row_hash(x[i], groups[i], per_level, levels, start, salt)
