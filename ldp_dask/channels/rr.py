"""Randomized response on a categorical column (Duchi, Jordan and Wainwright 2018; Warner 1965; docs/channels.md).

The category domain c_1..c_d is public (given by the user); a value outside
it is an error unless ``other=True`` maps it to an extra category. Encodings:

``kary`` (generalized randomized response, the default)
    report the true category with probability p = e^α/(e^α + d − 1), else one
    of the d − 1 others uniformly. Likelihood ratio p/((1 − p)/(d − 1)) = e^α.
``unary`` (Duchi, Jordan and Wainwright 2018: per-coordinate RR on the one-hot vector)
    keep each of the d bits with probability q = e^{α/2}/(1 + e^{α/2}), flip it
    otherwise. Two one-hot vectors differ in two bits: ratio (q/(1−q))² = e^α.
``warner`` (Warner 1965; d = 2)
    report the true bit with probability e^α/(1 + e^α).

``epsilon_spent()`` is the log of the largest likelihood ratio, computed from
the channel's own probabilities (nudged down by ulps where float rounding of
p would overspend).

Released statistic ``sum``: per category, the number of rows reporting it
(kary, warner) or reporting its bit as 1 (unary). Summary mode draws it
exactly in distribution from the exact counts N (docs/privacy.md): unary:
Binomial(N_c, q) + Binomial(m − N_c, 1 − q) per bit; kary: per true category
Binomial(N_c, p) keep their category and the rest are spread as
Multinomial(·, uniform over the d − 1 others).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._validation import InputDataError, LdpDaskError, check_epsilon
from .base import Channel, Option

__all__ = ["RandomizedResponse", "ENCODINGS", "OTHER", "MAX_CATEGORIES"]

ENCODINGS = ("kary", "unary", "warner")
#: Label of the extra category of ``other=True``.
OTHER = "__other__"
MAX_CATEGORIES = 100_000
#: Up to this many categories the k-ary summary draws one multinomial per true category (O(d²), cheap for small
#: d); above it, one uniform draw per moved row (O(rows + d)).
MULTINOMIAL_MAX_CATEGORIES = 1024


def _check_categories(categories: Any) -> list[Any]:
    if isinstance(categories, (str, bytes)) or not hasattr(categories, "__iter__"):
        raise LdpDaskError(f"The 'categories' parameter must be a list of category labels. Got {categories!r} instead.")
    cats = list(categories)
    if not cats:
        raise LdpDaskError("The 'categories' parameter must not be empty.")
    kinds = {type(c) for c in cats}
    if not (kinds <= {str} or kinds <= {int}):
        raise LdpDaskError("The 'categories' parameter must hold only strings or only integers. "
                           f"Got types {sorted(k.__name__ for k in kinds)} instead.")
    seen: set[Any] = set()
    dup = [c for c in cats if c in seen or seen.add(c)]  # type: ignore[func-returns-value]
    if dup:
        raise LdpDaskError(f"The 'categories' parameter has duplicates: {dup[:5]!r}.")
    if len(cats) > MAX_CATEGORIES:
        raise LdpDaskError(f"The 'categories' parameter has {len(cats):,} categories; the limit is {MAX_CATEGORIES:,}.")
    return cats


class RandomizedResponse(Channel):
    """Randomized response over a public list of categories.

    Parameters
    ----------
    epsilon : float
        Privacy parameter α > 0 per row.
    categories : sequence of str or int
        The public category domain (no duplicates).
    encoding : {"kary", "unary", "warner"}
        See the module docstring; ``warner`` needs exactly two categories.
    other : bool
        Map values outside ``categories`` to an extra category ``"__other__"``
        instead of failing.
    """

    name = "rr"
    value_kind = "categorical"
    options = (
        Option("categories", "the public categories", many=True),
        Option("encoding", "generalized k-ary (kary), per-bit unary, or Warner's (two categories)", default="kary",
               choices=ENCODINGS),
        Option("other", "map values outside the categories to '__other__' instead of failing", default=False,
               switch=True),
    )

    @classmethod
    def build(cls, epsilon: float, domain: Any = None, n: int | None = None, **options: Any) -> "RandomizedResponse":
        if domain is not None:
            raise LdpDaskError("The 'rr' channel takes a list of categories, not a numeric 'domain'.")
        if "categories" not in options:
            raise LdpDaskError("The 'rr' channel needs the public list of categories ('categories').")
        return cls(epsilon=epsilon, **options)

    def __init__(self, epsilon: float, categories: Sequence[Any], encoding: str = "kary", other: bool = False) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.categories = _check_categories(categories)
        if encoding not in ENCODINGS:
            raise LdpDaskError(f"The 'encoding' parameter must be one of {', '.join(ENCODINGS)}. Got {encoding!r} instead.")
        self.encoding = encoding
        self.other = bool(other)
        self.labels = self.categories + ([OTHER] if self.other else [])
        d = self.dim = len(self.labels)
        if d < 2:
            raise LdpDaskError("randomized response needs at least two categories (counting 'other').")
        if encoding == "warner" and d != 2:
            raise LdpDaskError(f"The 'warner' encoding needs exactly two categories; got {d}.")
        e = math.exp(self.epsilon)
        if encoding == "unary":
            h = math.exp(self.epsilon / 2)
            self.keep = h / (1.0 + h)
            while 2 * math.log(self.keep / (1 - self.keep)) > self.epsilon:
                self.keep = math.nextafter(self.keep, 0.0)
        else:
            self.keep = e / (e + d - 1)
            while self._kary_ratio() > self.epsilon:
                self.keep = math.nextafter(self.keep, 0.0)
        self._value_set = pa.array(self.categories)

    def _kary_ratio(self) -> float:
        return math.log(self.keep / ((1.0 - self.keep) / (self.dim - 1)))

    def epsilon_spent(self) -> float:
        if self.encoding == "unary":
            return 2 * math.log(self.keep / (1.0 - self.keep))
        return self._kary_ratio()

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "categories": list(self.categories), "encoding": self.encoding,
                "other": self.other}

    # --- response probabilities (estimators use them) ------------------------------------------------------
    @property
    def report_probabilities(self) -> tuple[float, float]:
        """(P(report c | true c), P(report c | true ≠ c)) per category or bit."""
        if self.encoding == "unary":
            return self.keep, 1.0 - self.keep
        return self.keep, (1.0 - self.keep) / (self.dim - 1)

    # --- data ------------------------------------------------------------------------------------------------
    def prepare(self, x: Any, clip: bool = False) -> tuple[np.ndarray, int]:
        """Map raw values (pyarrow or numpy; strings, dictionary or integers) to category codes 0..d−1.

        Values outside the categories raise unless ``other``; messages never quote values.
        """
        if isinstance(x, np.ndarray) and x.dtype.kind in "iu" and x.dtype != object:
            arr: Any = pa.array(x)
        elif isinstance(x, (pa.Array, pa.ChunkedArray)):
            arr = x.combine_chunks() if isinstance(x, pa.ChunkedArray) else x
        else:
            try:
                arr = pa.array(np.asarray(x) if not isinstance(x, list) else x)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                raise InputDataError("the column cannot be read as categories") from None
        if pa.types.is_dictionary(arr.type):
            codes_dict = self._codes(arr.dictionary)
            codes = pc.take(codes_dict, arr.indices)
        else:
            codes = self._codes(arr)
        missing = codes.null_count
        if missing:
            if not self.other:
                raise InputDataError(
                    "the column contains values outside the declared categories; "
                    "add them to the category list or pass other=True (--other)"
                )
            codes = pc.fill_null(codes, self.dim - 1)
        return np.asarray(codes.to_numpy(zero_copy_only=False), dtype=np.int64), 0

    def _codes(self, arr: pa.Array) -> pa.Array:
        want = self._value_set.type
        if arr.type != want:
            both_int = pa.types.is_integer(arr.type) and pa.types.is_integer(want)
            both_str = (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)) and pa.types.is_string(want)
            if not (both_int or both_str):
                raise InputDataError(
                    f"the column has type {arr.type} but the categories are {'integers' if pa.types.is_integer(want) else 'strings'}"
                )
            if both_int and pa.types.is_uint64(arr.type) and not pa.types.is_uint64(want):
                # values above the categories' type cannot be categories: make them missing, not a cast error
                limit = pa.scalar(np.iinfo(want.to_pandas_dtype()).max, pa.uint64())
                arr = pc.if_else(pc.less_equal(arr, limit), arr, pa.scalar(None, pa.uint64()))
            arr = arr.cast(want)
        return pc.index_in(arr, value_set=self._value_set)

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return {"counts": np.bincount(x, minlength=self.dim).astype(np.int64)}

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        N = np.asarray(exact["counts"], dtype=np.int64)
        d = self.dim
        if self.encoding == "unary":
            ones = rng.binomial(N, self.keep) + rng.binomial(m - N, 1.0 - self.keep)
            return {"sum": ones.astype(np.float64)}
        kept = rng.binomial(N, self.keep)
        moved = N - kept
        out = kept.astype(np.int64)
        if d > MULTINOMIAL_MAX_CATEGORIES:
            # each moved row draws its report uniformly among the d − 1 other categories: O(rows + d) in time
            # and memory, the same law as the multinomials below, which cost O(d²)
            true = np.repeat(np.arange(d), moved)
            slot = rng.integers(0, d - 1, size=len(true))
            out += np.bincount(slot + (slot >= true), minlength=d)
            return {"sum": out.astype(np.float64)}
        uniform = np.full(d - 1, 1.0 / (d - 1))
        for start in range(0, d, 1024):  # bound memory at 1024 × (d − 1) counts
            stop = min(d, start + 1024)
            spread = rng.multinomial(moved[start:stop], uniform)  # (rows, d − 1): among the *other* categories
            cats = np.arange(start, stop)[:, None]
            others = np.arange(d - 1)[None, :]
            cols = others + (others >= cats)  # slot i of true category c is category i, skipping c
            out += np.bincount(cols.ravel(), weights=spread.ravel(), minlength=d).astype(np.int64)
        return {"sum": out.astype(np.float64)}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n, d = len(x), self.dim
        if self.encoding == "unary":
            bits = np.zeros((n, d))
            bits[np.arange(n), x] = 1.0
            flip = rng.random((n, d)) >= self.keep
            return np.where(flip, 1.0 - bits, bits)
        stay = rng.random(n) < self.keep
        other = rng.integers(0, d - 1, size=n)
        other += other >= x  # uniform over the d − 1 categories other than x
        report = np.where(stay, x, other)
        z = np.zeros((n, d))
        z[np.arange(n), report] = 1.0
        return z
