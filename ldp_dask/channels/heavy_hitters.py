"""Heavy hitters of a column whose values nobody listed: count-mean sketches of the values' prefixes, one per
level, in one pass (prefix extension in the family of Bassily, Nissim, Stemmer and Thakurta 2017 and Wang, Li,
Jha 2021's PEM; docs/channels.md).

A value is the UTF-8 bytes of its text (an integer: its decimal text). With B = ``max_bytes`` and s = min(2, B)
bytes at the first level, level ℓ = 0..L − 1 (L = B − s + 1) sees the *item* (first min(len, ℓ + s) bytes,
complete = len ≤ ℓ + s): a value of k ≤ B bytes is the same complete item at every level from k − s on, and a
longer value is, at the last level, the proper prefix of its first B bytes. The rows of a block are dealt in turn
to G = L·h + h_E groups (row i to group i mod G: positions, never values): group g < L·h
sketches level ⌊g/h⌋ with its own hash function, and the h_E groups after them (the *estimate* groups, a share
``estimate_share`` of the rows) sketch the last level's item. A row reports the m bits of the optimized unary
encoding of its item's bucket in its group, exactly as the count-mean sketch
(:class:`~ldp_dask.channels.sketch.CountMeanSketch`) does: ε is that sketch's, log(p(1 − q)/((1 − p)q)) with
p = 1/2, q = 1/(e^α + 1), whatever the levels, since each row reports once.

The decoder (:func:`ldp_dask.estimators.heavy_hitters`) extends the kept prefixes of each level by every byte,
keeps the best ``beam`` by the level's groups, and lists the most frequent values found; their frequencies come
from the estimate groups alone, which took no part in finding them, so the intervals hold for whichever values
were found.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._validation import LdpDaskError
from .base import Channel, Option
from .sketch import DEFAULT_SALT, CountMeanSketch, _values

__all__ = ["HeavyHitters", "prefix_bytes", "MAX_LEVELS"]

#: The longest prefix found: values of more bytes are found as their first ``max_bytes`` bytes (marked truncated).
MAX_LEVELS = 128
#: The bytes of the first level's items (all 2^16 two-byte prefixes are scored there; each later level adds one).
START_BYTES = 2


def prefix_bytes(x: Any, width: int) -> np.ndarray:
    """Values (strings or integers) → uint8 array of shape (n, width + 1): column 0 the UTF-8 length capped at
    width + 1 (width + 1: longer), then the first ``width`` bytes, zero-padded."""
    from .._prefix_kernels import fixed_width

    offsets, raw = string_buffers(x)
    out = np.zeros((len(offsets) - 1, width + 1), dtype=np.uint8)
    if len(out):
        fixed_width(offsets, raw, width, out)
    return out


def string_buffers(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """Values (strings or integers) as Arrow lays out UTF-8 text: the n + 1 offsets (int64) and the bytes."""
    arr = _values(x)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if not pa.types.is_string(arr.type):
        arr = pc.cast(arr, pa.string())
    if not len(arr):
        return np.zeros(1, np.int64), np.zeros(1, np.uint8)
    _, off, data = arr.buffers()
    offsets = np.frombuffer(off, dtype=np.int32, count=len(arr) + 1 + arr.offset)[arr.offset:]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(1, np.uint8)
    return offsets.astype(np.int64), raw


class HeavyHitters(CountMeanSketch):
    """Prefix sketches for the heavy hitters of a string or integer column (no category list).

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    max_bytes : int
        B (1 ≤ B ≤ 128): values are found up to B bytes, by B − 1 prefix levels (the first sees two bytes); a
        longer value is found as its first B bytes, marked truncated.
    width : int
        m, the buckets of each hash function.
    level_hashes : int
        h, the groups (hash functions) of each level (2 ≤ h ≤ 64).
    estimate_share : float
        The share of rows in the estimate groups (0 < share < 1), which estimate the found values' frequencies.
    salt : int
        The public salt of the hash functions.

    Notes
    -----
    ε spent: that of the count-mean sketch, log(p(1 − q)/((1 − p)q)) ≤ α (p = 1/2, q = 1/(e^α + 1)): each row
    reports one optimized unary encoding. A found value's frequency is unbiased over hash functions that behave as
    random, with variance about 4e^α/(n_E(e^α − 1)²) for a rare value (n_E rows in the estimate groups) plus
    collisions Σ_u f_u²/(h_E·m) (Apple's differential-privacy team 2017); the search's levels each hold about
    (n − n_E)/L rows, so a value is found reliably once its share passes a few of the level's standard errors,
    4e^α/((n − n_E)/L·(e^α − 1)²) (the decoder states the share above which a miss has chance ≤ 5%).
    """

    name = "heavy-hitters"
    value_kind: ClassVar[str] = "categorical"
    options: ClassVar[tuple[Option, ...]] = (
        Option("max_bytes", "values are found up to this many bytes of UTF-8 (a prefix level a byte, after two)",
               type=int, default=16),
        Option("width", "m, the buckets of each hash function", type=int, default=1024),
        Option("level_hashes", "h, the groups (hash functions) of each prefix level", type=int, default=8),
        Option("estimate_share", "the share of rows that estimate the found values' frequencies", type=float,
               default=0.25),
        Option("salt", "the public salt of the hash functions", type=int, default=DEFAULT_SALT))

    def __init__(self, epsilon: float, max_bytes: int = 16, width: int = 1024, level_hashes: int = 8,
                 estimate_share: float = 0.25, salt: int = DEFAULT_SALT) -> None:
        levels, hashes = max_bytes, level_hashes
        if isinstance(levels, bool) or not isinstance(levels, (int, np.integer)) or not 1 <= levels <= MAX_LEVELS:
            raise LdpDaskError(f"The 'max_bytes' parameter must be an integer from 1 to {MAX_LEVELS}. Got "
                               f"{levels!r} instead.")
        if isinstance(hashes, bool) or not isinstance(hashes, (int, np.integer)) or not 2 <= hashes <= 64:
            raise LdpDaskError(f"The 'level_hashes' parameter must be an integer from 2 to 64. Got {hashes!r} "
                               "instead.")
        try:
            share = float(estimate_share)
        except (TypeError, ValueError):
            share = math.nan
        if not 0.0 < share < 1.0:
            raise LdpDaskError(f"The 'estimate_share' parameter must be a number strictly between 0 and 1. Got "
                               f"{estimate_share!r} instead.")
        super().__init__(epsilon, width=width, hashes=hashes, salt=salt)
        self.max_bytes, self.estimate_share = int(levels), share
        #: the first level sees this many bytes (PEM's starting fragment); each later level one more
        self.start = min(START_BYTES, self.max_bytes)
        self.levels = self.max_bytes - self.start + 1
        #: groups of the estimate: the share of all G groups nearest ``estimate_share`` (at least 2)
        self.estimate_groups = max(2, round(share / (1.0 - share) * self.levels * self.hashes))
        groups = self.levels * self.hashes + self.estimate_groups
        if groups * self.width > 1 << 24:
            raise LdpDaskError(f"The heavy-hitter sketch's (levels × hashes + estimate groups) × width must be at "
                               f"most {1 << 24:,}; got {groups:,} × {self.width:,}.")
        self._set_groups(groups)

    @classmethod
    def build(cls, epsilon: float, domain: Any = None, n: int | None = None, **options: Any) -> Channel:
        if domain is not None or options.get("categories") is not None:
            raise LdpDaskError("The 'heavy-hitters' channel takes no domain and no category list: it finds the "
                               "values.")
        return cls(epsilon=epsilon, **{k: v for k, v in options.items() if k != "categories"})

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "max_bytes": self.max_bytes, "width": self.width, "level_hashes": self.hashes,
                "estimate_share": self.estimate_share, "salt": self.salt}

    def level_groups(self, level: int) -> np.ndarray:
        """The groups that sketch prefix level ``level`` (0..L − 1) in the search."""
        return np.arange(level * self.hashes, (level + 1) * self.hashes)

    def estimate_group_ids(self) -> np.ndarray:
        """The estimate groups: they sketch the last level's item and take no part in the search."""
        return np.arange(self.levels * self.hashes, self.groups)

    # --- data ------------------------------------------------------------------------------------------------
    def prepare(self, x: Any, clip: bool = False) -> tuple[np.ndarray, int]:
        """Each value's first L bytes and its length (:func:`prefix_bytes`); nothing else of it is kept."""
        return prefix_bytes(x, self.max_bytes), 0

    def item_hashes(self, x: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """The hash of each prepared row's item at its group's level."""
        from .._prefix_kernels import row_item_hashes

        out = np.empty(len(x), dtype=np.uint64)
        row_item_hashes(np.ascontiguousarray(x, dtype=np.uint8), np.asarray(groups, dtype=np.int64), self.hashes,
                        self.levels, self.start, np.uint64(self.salt & 0xFFFFFFFFFFFFFFFF), out)
        return out

    def candidate_hashes(self, x: np.ndarray, cut: np.ndarray, complete: np.ndarray) -> np.ndarray:
        """The hash of each candidate item: the first ``cut`` bytes of ``x[:, 1:]``, complete or a prefix."""
        from .._prefix_kernels import item_hashes

        out = np.empty(len(x), dtype=np.uint64)
        item_hashes(np.ascontiguousarray(x, dtype=np.uint8), np.asarray(cut, dtype=np.int64),
                    np.asarray(complete, dtype=np.int64), np.uint64(self.salt & 0xFFFFFFFFFFFFFFFF), out)
        return out

    def buckets(self, hashes: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """The bucket of each item hash in its group: the top 32 bits of a keyed mix, scaled to {0, …, m − 1}."""
        from .._prefix_kernels import item_buckets

        hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
        out = np.empty(len(hashes), dtype=np.int64)
        item_buckets(hashes, np.ascontiguousarray(groups, dtype=np.int64), self._offsets, self.width, out)
        return out

    def _row_buckets(self, x: np.ndarray, groups: np.ndarray) -> np.ndarray:
        return self.buckets(self.item_hashes(x, groups), groups)

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Each group's bucket counts and rows, in one fused pass (the same cells as :meth:`privatize` reports)."""
        from .._prefix_kernels import prefix_counts

        counts = np.zeros(self.dim, dtype=np.int64)
        rows = np.zeros(self.groups, dtype=np.int64)
        prefix_counts(np.ascontiguousarray(x, dtype=np.uint8), self.groups, self.hashes, self.levels,
                      self.start, np.uint64(self.salt & 0xFFFFFFFFFFFFFFFF), self._offsets, self.width, counts, rows)
        return {"counts": counts, "rows": rows}

    def counted(self, x: Any, clip: bool = False) -> tuple[int, int, dict[str, np.ndarray]]:
        """:meth:`exact_stats` of ``prepare(x)`` in one pass over the Arrow strings, with no fixed-width copy."""
        from .._prefix_kernels import arrow_prefix_counts

        offsets, raw = string_buffers(x)
        counts = np.zeros(self.dim, dtype=np.int64)
        rows = np.zeros(self.groups, dtype=np.int64)
        arrow_prefix_counts(offsets, raw, self.groups, self.hashes, self.levels, self.start,
                            np.uint64(self.salt & 0xFFFFFFFFFFFFFFFF), self._offsets, self.width, counts, rows)
        return len(offsets) - 1, 0, {"counts": counts, "rows": rows}

    def _repeat(self, value: Any, n: int) -> np.ndarray:
        return np.repeat(np.asarray(value, dtype=np.uint8).reshape(1, -1), n, axis=0)
