"""Numba kernels of the heavy-hitter channel (:mod:`ldp_dask.channels.heavy_hitters`): strings to fixed-width
bytes, and the keyed hash of a value's prefix. The workers hash rows' prefixes and the driver hashes candidate
prefixes with the same inline function, so the two always agree (tests check both against a pure-Python
reference).

The hash is built for the count kernel's rate (``benchmarks/heavy_hitters.py``): each 8-byte word is absorbed by
one multiply and shift, ``h ← (h ⊕ w)·M₁; h ← h ⊕ (h ≫ 29)``, from h = salt; the length and completeness flag end
it through one SplitMix64 finalizer under a second key; a group's bucket is the top bits of one more finalizer of
the hash under the group's key. Two rounds of the finalizer at each step (the units' mix) measured 2.0·10⁷ rows/s,
these 4.3·10⁷ (10⁷ Zipf words of 6.5 bytes on average, one core). The salt is public: the hash spreads values over
buckets, it hides nothing (the report's noise does)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from ._kernels import _M1, _M2

__all__ = ["fixed_width", "item_hashes", "row_item_hashes", "item_buckets", "prefix_counts", "arrow_prefix_counts"]


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


#: the key that ends an item's hash is the salt's XOR with this (the golden ratio's 64 bits)
FINAL_KEY = 0x9E3779B97F4A7C15


@njit(cache=True, nogil=True, inline="always")
def _finalize(z: np.uint64) -> np.uint64:
    """SplitMix64's finalizer (one round): a bijection of 64 bits with full avalanche."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True, inline="always")
def _item_hash(row: np.ndarray, cut: Any, complete: int, salt: np.uint64, base: Any = 1) -> np.uint64:
    """The item (the first ``cut`` bytes from ``row[base]`` on, complete or a proper prefix): eight bytes at a
    time, little-endian, each word absorbed by a multiply and a shift from h = salt; then the length and the flag,
    and one finalizer under ``salt ⊕ FINAL_KEY``."""
    h = salt
    k = 0
    while k < cut:
        w = np.uint64(0)
        for b in range(min(8, cut - k)):
            w |= np.uint64(row[base + k + b]) << np.uint64(8 * b)
        h = (h ^ w) * _M1
        h ^= h >> np.uint64(29)
        k += 8
    return _finalize(h ^ np.uint64(2 * cut + complete) ^ salt ^ np.uint64(FINAL_KEY))


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
    """The bucket of an item in a group of key ``key``: the top 32 bits of its finalized hash under the key, scaled
    to ``width`` (multiply and shift)."""
    return np.int64(((_finalize(hashed ^ key) >> np.uint64(32)) * np.uint64(width)) >> np.uint64(32))


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
    g = 0
    for i in range(x.shape[0]):  # g = i mod n_groups, counted (a division a row cost a third of the pass)
        b = _bucket(_row_hash(x[i], g, per_level, levels, start, salt), keys[g], width)
        counts[g * width + b] += 1
        rows[g] += 1
        g += 1
        if g == n_groups:
            g = 0


@njit(cache=True, nogil=True)
def arrow_prefix_counts(offsets: np.ndarray, data: np.ndarray, n_groups: int, per_level: int, levels: int,
                        start: int, salt: np.uint64, keys: np.ndarray, width: int, counts: np.ndarray,
                        rows: np.ndarray) -> None:
    """:func:`prefix_counts` straight from Arrow strings (``offsets``, ``data``), with no fixed-width copy: the same
    items, hashes and cells (a value's item at a level never reaches past its ``levels − 1 + start`` bytes)."""
    g = 0
    for i in range(offsets.shape[0] - 1):
        a = offsets[i]
        n = offsets[i + 1] - a
        cut = min(g // per_level, levels - 1) + start
        b = _bucket(_item_hash(data, min(n, cut), 1 if n <= cut else 0, salt, a), keys[g], width)
        counts[g * width + b] += 1
        rows[g] += 1
        g += 1
        if g == n_groups:
            g = 0


@njit(cache=True, nogil=True)
def row_item_hashes(x: np.ndarray, groups: np.ndarray, per_level: int, levels: int, start: int, salt: np.uint64,
                    out: np.ndarray) -> None:
    """``out[i]``: the hash of row i's item at the level of its group (``min(group // per_level, levels − 1)``):
    its first level + start bytes, complete when the value has no more."""
    for i in range(x.shape[0]):
        out[i] = _row_hash(x[i], groups[i], per_level, levels, start, salt)
