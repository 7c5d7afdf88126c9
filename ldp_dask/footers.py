"""What the Parquet footers prove, read on the driver before any task runs: nulls, extremes, and file stamps.

Exact facts about raw data: they live in driver memory only (never printed,
dropped when pickled) and are used to refuse a release before a cluster
starts where the statistics prove the workers would refuse it, and to tell
whether a file may have changed since a partitioned release (its stamp, keyed
before it is stored: :mod:`ldp_dask.partitions`).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from ._validation import InputDataError

__all__ = ["FooterStatistics", "footer_statistics", "stamp", "footer_bytes", "VERSION_FIELDS", "footers_shared",
           "shared_footers"]


class FooterStatistics:
    """What the Parquet footers prove about a column: nulls, and its smallest and largest value, per file.

    Exact facts about raw data, so they live in driver memory only: they
    never print, and pickling (a task runner persisting a planned dataset,
    say) drops them. Used to refuse a release before a cluster starts where
    the statistics prove the workers would refuse it.
    """

    __slots__ = ("nulls", "low", "high", "stamps", "facts")

    def __init__(self) -> None:
        self.nulls: str | None = None  # a file with nulls in the column
        self.low: tuple[float, str] | None = None  # the smallest min of a row group, and its file
        self.high: tuple[float, str] | None = None
        #: per file, a digest of its footer, size and modification time: whether it may have changed since a
        #: partitioned release (keyed before it is written anywhere, :mod:`ldp_dask.partitions`)
        self.stamps: dict[str, bytes] = {}
        #: per file, where it really lies and what the ledger checks about it (:mod:`ldp_dask.locations`)
        self.facts: dict[str, Any] = {}

    def __repr__(self) -> str:
        return "FooterStatistics(...)"

    def __reduce__(self) -> Any:
        return (FooterStatistics, ())

    def add(self, low: Any, high: Any, nulls: int, where: str) -> None:
        if nulls and self.nulls is None:
            self.nulls = where
        if low is not None and (self.low is None or low < self.low[0]):
            self.low = (low, where)
        if high is not None and (self.high is None or high > self.high[0]):
            self.high = (high, where)

    def check_range(self, column: str, domain: tuple[float, float], clip: bool) -> None:
        """Raise :class:`InputDataError` if a row group's statistics prove an infinite value, or (unless
        ``clip``) a value outside ``domain``: what the workers would refuse."""
        for seen in (self.low, self.high):
            if seen is not None and np.isinf(seen[0]):
                raise InputDataError(f"column {column!r} contains infinite values (the Parquet statistics of "
                                     f"{seen[1]!r} show it); ldp_dask does not impute: drop or fill them first")
        if clip:
            return
        lo, hi = domain
        for seen, out in ((self.low, lambda v: v < lo), (self.high, lambda v: v > hi)):
            if seen is not None and out(seen[0]):
                raise InputDataError(
                    f"column {column!r} contains values outside the declared domain [{lo:g}, {hi:g}] (the Parquet "
                    f"statistics of {seen[1]!r} prove it, before any row is read); widen the domain or pass "
                    "clip=True (--clip) to clamp them")


#: What the file systems say about a file's version: local modification time, S3's ETag and LastModified, ...
VERSION_FIELDS = ("size", "mtime", "ETag", "LastModified", "last_modified", "etag", "generation", "md5Hash")


def footer_bytes(meta: pq.FileMetaData) -> bytes:
    """A file's serialized footer, as pickling writes it."""
    return bytes(meta.__reduce__()[1][0])


def stamp(meta: pq.FileMetaData, info: dict[str, Any], footer: bytes | None = None) -> bytes:
    """A digest of a file's footer (its thrift bytes: row groups, sizes, statistics) and of its size and version
    as the file system reports them: equal for an untouched file. Exact facts about the data, so it stays in
    driver memory and is keyed before it is stored (:mod:`ldp_dask.partitions`)."""
    h = hashlib.blake2b(digest_size=32)
    h.update(footer_bytes(meta) if footer is None else footer)
    h.update(json.dumps({k: info.get(k) for k in VERSION_FIELDS}, sort_keys=True, default=str).encode())
    return h.digest()


def footer_statistics(meta: pq.FileMetaData, columns: list[str], numeric: bool, stats: FooterStatistics,
                       where: str) -> None:
    """Fold a footer's statistics of ``columns`` (the first is the released one) into ``stats``."""
    names = meta.schema.names
    for c, name in enumerate(columns):
        if name not in names:
            continue
        j = names.index(name)
        for rg in range(meta.num_row_groups):
            st = meta.row_group(rg).column(j).statistics
            if st is None:
                continue
            nulls = st.null_count if st.has_null_count else 0
            bounded = c == 0 and numeric and st.has_min_max
            stats.add(st.min if bounded else None, st.max if bounded else None, nulls, where)


#: the footers read inside :func:`footers_shared`, by file and what the file system says of it
_FOOTERS: contextvars.ContextVar[dict[Any, Any] | None] = contextvars.ContextVar("ldp_dask_footers", default=None)


@contextlib.contextmanager
def footers_shared() -> Iterator[None]:
    """Inside the block, every file's footer is read once however many columns are planned from it (a plan's
    columns: :func:`ldp_dask.plans.plan_datasets`); a file whose size or modification time the listing reports
    changed is read again."""
    token = _FOOTERS.set({})
    try:
        yield
    finally:
        _FOOTERS.reset(token)


def shared_footers() -> dict[Any, Any] | None:
    """The footers read so far inside :func:`footers_shared` (None outside it), for the planner to read from and
    add to; capture it before starting threads, which do not see this context."""
    return _FOOTERS.get()
