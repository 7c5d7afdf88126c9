"""What every channel on a categorical column shares: the public category list and the mapping of raw values
(strings, dictionaries or integers, numpy or pyarrow) to category codes 0..d−1 (docs/channels.md).

A categorical channel releases, per category ``c``, a count of "supporting" reports ``T_c`` with

    P(a row of category c supports c) = p_in,   P(a row of another category supports c) = p_out,

so that ``(T_c/n − p_out)/(p_in − p_out)`` is an unbiased frequency (ldp_dask.estimators.frequencies). The
channels differ in what a row reports and in how ``T`` is read off the released sums (:meth:`support_counts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._validation import InputDataError, LdpDaskError
from .base import Channel, Option, use_fused

__all__ = ["CategoricalChannel", "CATEGORIES_OPTION", "OTHER_OPTION", "OTHER", "MAX_CATEGORIES", "check_categories",
           "category_codes"]

#: Label of the extra category of ``other=True``.
OTHER = "__other__"
#: Categories a channel takes (2^21: a domain of 2^20 values and '__other__' fit).
MAX_CATEGORIES = 1 << 21

CATEGORIES_OPTION = Option("categories", "the public categories", many=True)
OTHER_OPTION = Option("other", "map values outside the categories to '__other__' instead of failing", default=False,
                      switch=True)


def check_categories(categories: Any) -> list[Any]:
    """The public category list, validated: strings only or integers only, no duplicates, at most 2^21."""
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


def category_codes(x: Any, value_set: pa.Array) -> pa.Array:
    """Each value's place in ``value_set`` (pyarrow or numpy; strings, dictionary or integers), null where it is
    none of them or null. Each distinct value of a dictionary column is looked up once."""
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
        return pc.take(_codes(arr.dictionary, value_set), arr.indices)
    return _codes(arr, value_set)


#: Integer categories spanning at most this many values are looked up in a table (:func:`_lookup_table`).
LOOKUP_SPAN = 1 << 16
#: Integer dtypes the table lookup reads as they are (uint64 may exceed int64: the general path takes it).
_LOOKUP_DTYPES = frozenset(np.dtype(t) for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"))


def _lookup_table(categories: list[Any]) -> tuple[int, np.ndarray] | None:
    """(lo, table) with ``table[v − lo]`` the place of integer category v (−1 for none), when the categories are
    integers spanning at most :data:`LOOKUP_SPAN` values; else None."""
    if not categories or not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in categories):
        return None
    lo, hi = int(min(categories)), int(max(categories))
    if hi - lo >= LOOKUP_SPAN:
        return None
    lut = np.full(hi - lo + 1, -1, dtype=np.int64)
    lut[np.array(categories, dtype=np.int64) - lo] = np.arange(len(categories))
    return lo, lut


def _codes(arr: pa.Array, value_set: pa.Array) -> pa.Array:
    want = value_set.type
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
    return pc.index_in(arr, value_set=value_set)


_OUTSIDE = ("the column contains values outside the declared categories; add them to the category list or pass "
            "other=True (--other)")


class CategoricalChannel(Channel):
    """Base of the channels on a categorical column.

    Subclasses set ``self.dim`` and their response probabilities after calling :meth:`_set_categories`, and
    provide :attr:`report_probabilities` and :meth:`support_counts`.
    """

    value_kind: ClassVar[str] = "categorical"
    categories: list[Any]
    other: bool
    labels: list[Any]

    @classmethod
    def build(cls, epsilon: float, domain: Any = None, n: int | None = None, **options: Any) -> Channel:
        if domain is not None:
            raise LdpDaskError(f"The {cls.name!r} channel takes a list of categories, not a numeric 'domain'.")
        if "categories" not in options:
            raise LdpDaskError(f"The {cls.name!r} channel needs the public list of categories ('categories').")
        return cls(epsilon=epsilon, **options)  # type: ignore[call-arg]

    def _set_categories(self, categories: Sequence[Any], other: bool) -> int:
        """Validate and store the categories; return d, the number of labels (with ``__other__``)."""
        self.categories = check_categories(categories)
        self.other = bool(other)
        self.labels = self.categories + ([OTHER] if self.other else [])
        self._value_set = pa.array(self.categories)
        self._lut = _lookup_table(self.categories)
        if len(self.labels) < 2:
            raise LdpDaskError(f"the {self.name!r} channel needs at least two categories (counting 'other').")
        return len(self.labels)

    # --- what the estimator reads ------------------------------------------------------------------------------
    p_in: float
    p_out: float

    @property
    def report_probabilities(self) -> tuple[float, float]:
        """(p_in, p_out): the probability that a row supports its own category, and another one."""
        return self.p_in, self.p_out

    def index_columns(self) -> dict[str, dict[str, list[Any]]]:
        """The released ``sum`` holds one count per label (channels whose sums are indexed otherwise override it)."""
        return {"sum": {"label": [str(c) for c in self.labels]}}

    def support_counts(self, sums: np.ndarray) -> np.ndarray:
        """T_c, the number of reports supporting each category, from the released ``sum`` statistic."""
        return np.asarray(sums, dtype=np.float64)

    def log_likelihood(self, z: np.ndarray, code: int) -> np.ndarray:
        """log P(view | category ``code``) of each released row view ``z`` (the privacy audit's statistic)."""
        raise NotImplementedError

    # --- data ------------------------------------------------------------------------------------------------
    def prepare(self, x: Any, clip: bool = False) -> tuple[np.ndarray, int]:
        """Map raw values (pyarrow or numpy; strings, dictionary or integers) to category codes 0..d−1.

        Values outside the categories raise unless ``other``; messages never quote values. Integer values of
        integer categories are looked up in a table, in one fused pass (:func:`ldp_dask._kernels.lookup_codes`).
        """
        lut = getattr(self, "_lut", None)
        if lut is not None and isinstance(x, pa.ChunkedArray) and x.num_chunks == 1:
            x = x.chunk(0)
        if lut is not None and isinstance(x, pa.Array) and pa.types.is_integer(x.type) and x.null_count == 0:
            x = x.to_numpy(zero_copy_only=True)  # a view of the column's buffer: no copy
        if (lut is not None and isinstance(x, np.ndarray) and x.dtype in _LOOKUP_DTYPES and x.ndim == 1
                and use_fused(len(x))):
            from .._kernels import lookup_codes

            out = np.empty(len(x), dtype=np.int64)
            if lookup_codes(x, lut[0], lut[1], len(self.labels) - 1 if self.other else -1, out) and not self.other:
                raise InputDataError(_OUTSIDE)
            return out, 0
        codes = category_codes(x, self._value_set)
        missing = codes.null_count
        if missing:
            if not self.other:
                raise InputDataError(_OUTSIDE)
            codes = pc.fill_null(codes, len(self.labels) - 1)
        return np.asarray(codes.to_numpy(zero_copy_only=False), dtype=np.int64), 0

    @property
    def integer_sums(self) -> bool:
        return True  # category counts

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return {"counts": np.bincount(x, minlength=len(self.labels)).astype(np.int64)}
