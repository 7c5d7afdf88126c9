"""What a planned source is: its :class:`Piece` s, the :class:`Reader` a worker reads them with, the
:class:`Dataset` that holds them and its structural fingerprint, and the null policy applied on reading.

:mod:`ldp_dask.source` plans a :class:`Dataset` from Parquet or in-memory data; everything downstream (tasks,
readers, ledgers) sees only these types. The fingerprint is public (it is written into summaries), so it hashes
only structure — relative file names, row counts, the column's name and type — never content.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ._validation import InputDataError
from .options import DEFAULT_PARTITION_ROWS

__all__ = ["Piece", "Reader", "Dataset", "fill_nulls", "task_rows_for", "NULLS_HINT", "TASK_ROWS", "TASK_PIECES",
           "ROWS_PER_NOISE_CELL"]


#: What a refused null says to do: a null is not a value of the domain, so a release needs a policy for it.
NULLS_HINT = ("choose a policy: --nulls value V (Python: nulls=V) replaces each null by the public value V before "
              "privatization; or drop or fill them first")

#: Consecutive pieces smaller than this many rows (or the planned partition size, if smaller) are read by one
#: task, up to :data:`TASK_PIECES` of them: a task then costs tens of milliseconds of work against Dask's few
#: milliseconds of overhead, however small the files.
TASK_ROWS = 1 << 20
TASK_PIECES = 256
#: A release with d noisy coordinates draws d noise values per task, whatever its rows: its tasks read at least
#: ROWS_PER_NOISE_CELL·d rows (up to the planned partition size), so that the noise stays a small part of a
#: task's work (adaptive Haar's 2^17 coordinates: 2^21 rows; about 230 ns per lattice coordinate, measured).
ROWS_PER_NOISE_CELL = 16


def task_rows_for(noise_cells: int) -> int:
    """Rows a task reads before it is cut, for a release of ``noise_cells`` noisy coordinates per partition."""
    return max(TASK_ROWS, ROWS_PER_NOISE_CELL * int(noise_cells))


@dataclass(frozen=True)
class Piece:
    """One partition: row groups of a file, or ``[start, stop)`` of an array."""

    index: int
    num_rows: int
    path: str | None = None
    row_groups: tuple[int, ...] = ()
    start: int = 0
    stop: int = 0


@dataclass(frozen=True)
class Reader:
    """What a worker needs to read any piece of a dataset, and nothing more.

    Shared by every task of a release and sent to the cluster once with the
    plan's pieces; a task names only the range of pieces it reads, so its
    payload does not grow with the number of partitions.
    """

    kind: str
    column: str
    value_kind: str = "numeric"
    fs: Any = None
    unit: str | None = None
    values: Any = field(default=None, repr=False, compare=False)
    unit_values: Any = field(default=None, repr=False, compare=False)
    #: the public value that replaces a null (None: a null fails the read), see :func:`fill_nulls`
    fill: Any = None
    #: what a null unit does: "error", or "drop" (the row belongs to no person, :data:`ldp_dask.units.NO_PERSON`)
    unit_nulls: str = "error"


@dataclass(frozen=True)
class Dataset:
    """A planned source: its pieces, size and structural fingerprint."""

    kind: str  # "parquet" or "memory"
    column: str
    pieces: tuple[Piece, ...]
    n: int
    fingerprint: str
    description: str
    fs: Any = None
    values: Any = field(default=None, repr=False, compare=False)
    #: "numeric" (float/int columns, read as numpy) or "categorical" (string, dictionary or
    #: integer columns, read as pyarrow arrays for the categorical channels)
    value_kind: str = "numeric"
    #: the population's location, for the budget ledger: the resolved directory of a directory or a
    #: glob, the file of a single file (as a URL, e.g. ``file:///data/flights``); ``memory:…`` in memory
    root: str = ""
    #: the privacy unit's column (None: each row is its own unit), and its values for in-memory data
    unit: str | None = None
    unit_values: Any = field(default=None, repr=False, compare=False)
    #: the planned rows per partition (``partition_rows``), which also bounds how many rows one task reads
    target_rows: int = DEFAULT_PARTITION_ROWS
    #: what the Parquet footers prove (driver memory only; see :class:`FooterStatistics`)
    footer_statistics: Any = field(default=None, repr=False, compare=False)
    #: rows a task reads before it is cut (at most ``target_rows``): None for :data:`TASK_ROWS`, or more for a
    #: release with many noisy coordinates (:meth:`for_noise_cells`)
    task_rows: int | None = None
    #: the public value that replaces a null of the column (None: nulls are refused)
    fill: Any = None
    #: the directory the files' relative names are taken from (Parquet sources)
    base: str = ""
    #: tasks never read pieces of two files (a partitioned release: a file is a partition, :mod:`ldp_dask.partitions`)
    by_file: bool = False
    #: what a null unit does: "error", or "drop" (the row belongs to no person)
    unit_nulls: str = "error"
    #: the table format read, when the files came from a table's log (:mod:`ldp_dask.tables`): its format,
    #: location, identity and version, recorded in every summary
    table: dict[str, Any] | None = None

    def relative(self, path: str) -> str:
        """A file's name relative to :attr:`base` (as the fingerprint and partitioned releases name it)."""
        return _relative(path, self.base)

    def for_noise_cells(self, cells: int) -> Dataset:
        """This plan with tasks sized for a release of ``cells`` noisy coordinates per partition (:func:`task_rows_for`)."""
        rows = task_rows_for(cells)
        return self if rows == (self.task_rows or TASK_ROWS) else dataclasses.replace(self, task_rows=rows)

    def check_range(self, domain: tuple[float, float], clip: bool = False) -> None:
        """Refuse, before any row is read, what the footers' statistics prove the workers would refuse: an
        infinite value, or a value outside ``domain`` (unless ``clip``: then it is clamped where it is read)."""
        if self.footer_statistics is not None:
            self.footer_statistics.check_range(self.column, domain, clip)

    @functools.cached_property
    def tasks(self) -> tuple[tuple[int, int], ...]:
        """The pieces each task reads, as ``[start, stop)`` ranges of :attr:`pieces`, in order.

        Consecutive pieces are grouped while the group has fewer than
        ``min(task_rows, target_rows)`` rows and fewer than ``TASK_PIECES``
        pieces; a piece that large is a task of its own. A function of the
        plan (and of the release's number of noisy coordinates, through
        ``task_rows``), never of the cluster, so a release is the same on any
        number of workers. With :attr:`by_file` a task never crosses files.
        """
        limit = min(self.task_rows or TASK_ROWS, self.target_rows)
        out: list[tuple[int, int]] = []
        start, rows = 0, 0
        for i, p in enumerate(self.pieces):
            if i > start and (rows + p.num_rows > limit or i - start >= TASK_PIECES
                              or (self.by_file and p.path != self.pieces[i - 1].path)):
                out.append((start, i))
                start, rows = i, 0
            rows += p.num_rows
        if self.pieces:
            out.append((start, len(self.pieces)))
        return tuple(out)

    @property
    def reader(self) -> Reader:
        """The part of the dataset a worker needs to read its pieces."""
        return Reader(self.kind, self.column, self.value_kind, self.fs, self.unit, self.values, self.unit_values,
                      self.fill, self.unit_nulls)

    @property
    def layout(self) -> str:
        """A digest of the partitioning (which rows form which partition): part of what makes a re-run identical."""
        shape = [(p.path, list(p.row_groups), p.start, p.stop) for p in self.pieces]
        layout: dict[str, Any] = {"fingerprint": self.fingerprint, "pieces": shape}
        tasks = self.tasks
        if len(tasks) != len(self.pieces):  # pieces read together (a partition of persons per task)
            layout["tasks"] = [list(t) for t in tasks]
        return _fingerprint(layout)


def fill_nulls(col: pa.Array | pa.ChunkedArray, fill: Any, name: str) -> pa.Array | pa.ChunkedArray:
    """``col`` as it is without nulls; else with each null replaced by ``fill`` (cast to the column's type), or
    refused when there is no fill (the null policy, ``--nulls``)."""
    import pyarrow.compute as pc

    if not col.null_count:
        return col
    if fill is None:
        raise InputDataError(f"column {name!r} contains null values; {NULLS_HINT}")
    t = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, t)
    try:
        value = pa.scalar(fill).cast(t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        raise InputDataError(f"the null fill value {fill!r} cannot be stored in a column of type {t}") from None
    return pc.fill_null(col, value)


def _fingerprint(structure: dict[str, Any]) -> str:
    blob = json.dumps(structure, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def _relative(path: str, root: str) -> str:
    """``os.path.relpath`` for a path under ``root`` (the common case, without its per-call cost)."""
    head = root.rstrip("/") + "/"
    if root and path.startswith(head) and "/../" not in path and "/./" not in path:
        return path[len(head):]
    return os.path.relpath(path, root) if root else path
