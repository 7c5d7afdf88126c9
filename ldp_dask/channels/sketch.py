"""A count-mean sketch of a column whose values nobody listed (Apple's differential-privacy team 2017; Cormode,
Maddock and Maple 2021; docs/channels.md).

No category list: any string or integer value. Each value v has a 64-bit hash (SipHash-2-4 of its text's UTF-8
bytes, keyed by the channel's public ``salt``; an integer is hashed as its decimal text), and h hash functions
H_j(v) ∈ {0, …, m − 1}, j = 0..h − 1, derived from it by a keyed mix of (salt, j). The rows of a block are dealt to
the h groups in turn (row i to group i mod h: a function of positions, never of values). A row of group j
reports the m bits of the optimized unary encoding of its bucket H_j(v): its own bucket's bit is 1 with
probability p = 1/2, every other bit with probability q = 1/(e^α + 1).

Privacy: the group is not a function of the value, and two values' bit vectors differ in at most two bits:
ratio p(1 − q)/((1 − p)q) = e^α, as for the optimized unary encoding (``epsilon_spent()``, q nudged by ulps where
float rounding would overspend). The salt and the hash functions are public; privacy does not rest on them.

Estimator (:func:`ldp_dask.estimators.sketch_frequencies`): for any candidate value v, group j's count T_j at
bucket H_j(v) over its n_j rows gives θ̂_j = (T_j/n_j − q)/(p − q), an unbiased estimate of the share of group j's
rows whose bucket is H_j(v): f_v plus the shares of the values that collide with v. Over hash functions that
behave as random, a collision has probability 1/m, so f̂_j = (m·θ̂_j − 1)/(m − 1) estimates f_v without bias, and
f̂ = Σ_j n_j f̂_j / n averages the groups. Its variance is about the optimized unary encoding's over the whole
domain, (m/(m − 1))²·4e^α/(n(e^α − 1)²) for a rare value, plus Σ_u f_u²/(hm) from collisions; the interval is
read from the spread of the h independent group estimates (Student's t on h − 1 degrees of freedom).

Released statistics: ``sum``, the h·m bit counts (group-major); ``rows``, each group's number of rows (a function
of the blocks' sizes alone, which are public). Summary mode draws ``sum`` exactly in law from the exact counts N:
Binomial(N, 1/2) + Binomial(n_j − N, q) per cell.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._validation import InputDataError, LdpDaskError, check_epsilon
from ..noise import mix64
from .base import Channel, Option, nudge

__all__ = ["CountMeanSketch", "value_hashes", "DEFAULT_SALT"]

#: The public salt of the hash functions unless one is given (any value works; the estimate needs the same one).
DEFAULT_SALT = 0x5EED_C0DE_2026
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MAX_CELLS = 1 << 24


def _values(x: Any) -> pa.Array:
    """The values as one pyarrow array, refusing missing values and types other than strings and integers."""
    if isinstance(x, pa.ChunkedArray):
        x = x.combine_chunks()
    if isinstance(x, pa.Array):
        arr = x
    else:
        try:
            arr = pa.array(x if isinstance(x, list) else np.asarray(x))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            raise InputDataError("the column cannot be read as strings or integers") from None
    if arr.null_count:
        raise InputDataError("the column has missing values; a sketch counts values, not their absence")
    kind = arr.type.value_type if pa.types.is_dictionary(arr.type) else arr.type
    if not (pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise InputDataError(f"the column has type {kind}; a sketch takes strings or integers")
    return arr


def value_hashes(x: Any, salt: int) -> np.ndarray:
    """Each value's 64-bit hash (uint64): SipHash-2-4 of its text's UTF-8 bytes keyed by ``salt`` (an integer is
    hashed as its decimal text, so 42 and "42" are one value). The distinct values are found first (pyarrow's
    dictionary encoding) and each is hashed once."""
    import pandas as pd  # on first use: `ldp-dask --help` builds this channel's options without pandas

    arr = _values(x)
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    text = pc.cast(arr.dictionary, pa.string())
    key = f"{int(salt) & 0xFFFFFFFFFFFFFFFF:016x}"
    words = np.asarray(text.to_numpy(zero_copy_only=False), dtype=object)
    distinct = np.asarray(pd.util.hash_array(words, encoding="utf8", hash_key=key, categorize=False), dtype=np.uint64)
    return distinct[np.asarray(arr.indices.to_numpy(zero_copy_only=False), dtype=np.int64)]


class CountMeanSketch(Channel):
    """A count-mean sketch of a string or integer column: h hash functions of m buckets, no category list.

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    width : int
        m, the buckets of each hash function (2 ≤ m; h·m ≤ 2^24).
    hashes : int
        h, the hash functions (2 ≤ h ≤ 1024): rows are dealt to them in turn.
    salt : int
        The public salt of the hash functions.

    Notes
    -----
    ε spent: log(p(1 − q)/((1 − p)q)) ≤ α with p = 1/2, q = 1/(e^α + 1). Frequencies of candidate values
    (:func:`ldp_dask.estimators.sketch_frequencies`) are unbiased over hash functions that behave as random, with
    variance about (m/(m − 1))²·4e^α/(n(e^α − 1)²) for a rare value plus Σ_u f_u²/(hm) from collisions
    (Apple's differential-privacy team 2017).
    """

    name = "sketch"
    value_kind: ClassVar[str] = "categorical"
    options: ClassVar[tuple[Option, ...]] = (Option("width", "m, the buckets of each hash function", type=int, default=1024),
               Option("hashes", "h, the hash functions (rows dealt to them in turn)", type=int, default=32),
               Option("salt", "the public salt of the hash functions", type=int, default=DEFAULT_SALT))

    def __init__(self, epsilon: float, width: int = 1024, hashes: int = 32, salt: int = DEFAULT_SALT) -> None:
        self.epsilon = check_epsilon(epsilon)
        for name, value, lo, hi in (("width", width, 2, _MAX_CELLS), ("hashes", hashes, 2, 1024)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
                raise LdpDaskError(f"The {name!r} parameter must be an integer from {lo:,} to {hi:,}. "
                                   f"Got {value!r} instead.")
        if width * hashes > _MAX_CELLS:
            raise LdpDaskError(f"The sketch's width × hashes must be at most {_MAX_CELLS:,}; got "
                               f"{width:,} × {hashes:,}.")
        if isinstance(salt, bool) or not isinstance(salt, (int, np.integer)):
            raise LdpDaskError(f"The 'salt' parameter must be an integer. Got {salt!r} instead.")
        self.width, self.hashes, self.salt = int(width), int(hashes), int(salt)
        self._set_groups(self.hashes)
        e = math.exp(self.epsilon)
        self.p_in = 0.5
        self.p_out = nudge(1.0 / (e + 1.0), lambda q: math.log((1 - q) / q), self.epsilon, toward=1.0)

    def _set_groups(self, groups: int) -> None:
        """The rows are dealt to ``groups`` groups in turn, each with its own hash function (a keyed offset)."""
        self.groups = int(groups)
        self.dim = self.width * self.groups
        self._offsets = (np.uint64(self.salt & 0xFFFFFFFFFFFFFFFF)
                         + _GOLDEN * np.arange(1, self.groups + 1, dtype=np.uint64))

    @classmethod
    def build(cls, epsilon: float, domain: Any = None, n: int | None = None, **options: Any) -> Channel:
        if domain is not None or options.get("categories") is not None:
            raise LdpDaskError("The 'sketch' channel takes no domain and no category list: it counts any value.")
        return cls(epsilon=epsilon, **{k: v for k, v in options.items() if k != "categories"})

    def epsilon_spent(self) -> float:
        q = self.p_out
        return math.log(self.p_in * (1 - q) / ((1 - self.p_in) * q))

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "width": self.width, "hashes": self.hashes, "salt": self.salt}

    @property
    def report_probabilities(self) -> tuple[float, float]:
        """(P(own bucket's bit is 1), P(another bucket's bit is 1)) = (1/2, 1/(e^α + 1))."""
        return self.p_in, self.p_out

    def buckets(self, hashes: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """H_j(v) for values of 64-bit hashes ``hashes`` in groups ``groups``: the top 32 bits of a keyed mix,
        scaled to {0, …, m − 1} (multiply-shift: uniform for any m)."""
        z = mix64(np.asarray(hashes, dtype=np.uint64) ^ self._offsets[np.asarray(groups, dtype=np.int64)])
        return ((z >> np.uint64(32)) * np.uint64(self.width) >> np.uint64(32)).astype(np.int64)

    # --- data ------------------------------------------------------------------------------------------------
    def prepare(self, x: Any, clip: bool = False) -> tuple[np.ndarray, int]:
        """Each value's 64-bit hash (:func:`value_hashes`); the values themselves are not kept."""
        return value_hashes(x, self.salt), 0

    @property
    def integer_sums(self) -> bool:
        return True

    def _groups(self, n: int) -> np.ndarray:
        return np.arange(n, dtype=np.int64) % self.groups

    def _row_buckets(self, x: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """The bucket each prepared row reports in its group (here: of its value's hash)."""
        return self.buckets(x, groups)

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        groups = self._groups(len(x))
        cells = groups * self.width + self._row_buckets(x, groups)
        return {"counts": np.bincount(cells, minlength=self.dim).astype(np.int64),
                "rows": np.bincount(groups, minlength=self.groups).astype(np.int64)}

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        counts = np.asarray(exact["counts"], dtype=np.int64)
        rows = np.asarray(exact["rows"], dtype=np.int64)
        others = np.repeat(rows, self.width) - counts
        ones = rng.binomial(counts, self.p_in) + rng.binomial(others, self.p_out)
        return {"sum": ones.astype(np.float64), "rows": rows.astype(np.float64)}

    @property
    def view_dim(self) -> int:
        return self.width + 1

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each row's view: its group, then the m bits of its bucket's optimized unary encoding."""
        n = len(x)
        groups = self._groups(n)
        own = np.zeros((n, self.width), dtype=bool)
        own[np.arange(n), self._row_buckets(x, groups)] = True
        u = rng.random((n, self.width))
        bits = np.where(own, u < self.p_in, u >= 1.0 - self.p_out)
        return np.column_stack([groups.astype(np.float64), bits.astype(np.float64)])

    def row_sums(self, z: np.ndarray) -> dict[str, np.ndarray]:
        z = np.asarray(z, dtype=np.float64)
        groups = z[:, 0].astype(np.int64)
        sums = np.zeros((self.groups, self.width))
        np.add.at(sums, groups, z[:, 1:])
        return {"sum": sums.ravel(), "rows": np.bincount(groups, minlength=self.groups).astype(np.float64)}

    def _repeat(self, value: Any, n: int) -> np.ndarray:
        """One prepared value (here: a 64-bit hash) as ``n`` prepared rows."""
        return np.full(n, value, dtype=np.uint64)

    def log_likelihood(self, z: np.ndarray, hashed: Any) -> np.ndarray:
        """log P(view | a row of prepared value ``hashed``, here a value's 64-bit hash) of each row view ``z`` (the
        privacy audit's statistic)."""
        z = np.asarray(z)
        groups = z[:, 0].astype(np.int64)
        bits = z[:, 1:] == 1
        p, q = self.p_in, self.p_out
        own = self._row_buckets(self._repeat(hashed, len(z)), groups)
        base = np.where(bits, math.log(q), math.log1p(-q)).sum(axis=1)
        hit = bits[np.arange(len(z)), own]
        return base + np.where(hit, math.log(p / q), math.log((1 - p) / (1 - q)))
