"""What a task reads on a worker: one piece's values, and its privacy-unit values.

A piece is a few row groups of one Parquet file (or a slice of in-memory
data) planned by :mod:`ldp_dask.source`. Reads never quote the data in an
error: a corrupt file names itself and the kind of failure; an ``OSError``
(a transient I/O failure) propagates, so Dask retries the task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ._io import is_local
from ._validation import InputDataError
from .source import Piece, Reader, fill_nulls

__all__ = ["read_piece", "read_units", "read_with_units", "read_columns", "Columns", "group_index"]


@dataclass(frozen=True)
class Columns:
    """Several readers of one source read together with its privacy unit (a plan with a unit: every statistic's
    column of each person's kept rows, :mod:`ldp_dask.persons`). Their values travel as one numpy structured
    array, field ``f<i>`` for reader i (numbers as read; categories as fixed-width text, built from each piece's
    dictionary without a Python object a row), so that the person shuffle keeps and moves whole rows."""

    readers: tuple[Reader, ...]
    #: per reader, the declared keys of a group label it reads (its values travel as their group's index,
    #: :func:`group_index`: a null or undeclared label is "other"), or None
    groups: tuple[tuple[Any, ...] | None, ...] = ()

    @property
    def unit_nulls(self) -> str:
        return self.readers[0].unit_nulls

    @property
    def kind(self) -> str:
        return self.readers[0].kind


def group_index(labels: Any, keys: tuple[Any, ...]) -> np.ndarray:
    """Each label's place among ``keys`` (:func:`ldp_dask.channels.categorical.category_codes`); a label among none
    of them, or a null, is ``len(keys)`` ("other")."""
    from .channels.categorical import category_codes

    codes = category_codes(labels, pa.array(list(keys)))
    return codes.fill_null(len(keys)).to_numpy(zero_copy_only=False).astype(np.intp)


def _coded(reader: Columns, values: list[Any]) -> list[Any]:
    """A :class:`Columns`' values with each group label replaced by its group's index."""
    keys = (*reader.groups, *([None] * (len(values) - len(reader.groups))))
    return [v if g is None else group_index(v, g) for v, g in zip(values, keys)]


def _as_records(values: list[Any]) -> np.ndarray:
    """Readers' values (numpy, or pyarrow categories) as one structured array, field ``f<i>`` each."""
    cols = []
    for v in values:
        if isinstance(v, (pa.Array, pa.ChunkedArray)):  # categories: fixed-width text, no Python object a row
            v = v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v
            if pa.types.is_dictionary(v.type):
                words = np.asarray(v.dictionary.to_pylist(), dtype=str)
                v = words[v.indices.to_numpy(zero_copy_only=False)] if len(words) else np.zeros(len(v), "U1")
            else:
                v = np.asarray(v.to_numpy(zero_copy_only=False)).astype(str)
        cols.append(np.asarray(v))
    out = np.empty(len(cols[0]) if cols else 0, dtype=[(f"f{i}", c.dtype) for i, c in enumerate(cols)])
    for i, c in enumerate(cols):
        out[f"f{i}"] = c
    return out


def read_units(reader: Reader, piece: Piece) -> pa.Array:
    """Read one piece's privacy unit values (a pyarrow array; nulls are refused where they are used)."""
    if reader.kind == "memory":
        return reader.unit_values[piece.start : piece.stop]
    return _read_columns(reader, piece, reader.unit).column(0).combine_chunks()


def read_with_units(reader: Reader | Columns, piece: Piece) -> tuple[Any, Any]:
    """:func:`read_piece` and :func:`read_units` of one piece, from one read of the file (both columns); for
    :class:`Columns`, every reader's values as one structured array."""
    if isinstance(reader, Columns):
        first = reader.readers[0]
        if first.kind == "memory":
            return _as_records(_coded(reader, [read_piece(r, piece) for r in reader.readers])), read_units(first, piece)
        names = list(dict.fromkeys(r.column for r in reader.readers))
        table = _read_columns(first, piece, *names, first.unit, dictionary=_dictionary(reader.readers))
        values = [_values(r, table.column(names.index(r.column))) for r in reader.readers]
        return _as_records(_coded(reader, values)), table.column(len(names)).combine_chunks()
    if reader.kind == "memory":
        return read_piece(reader, piece), read_units(reader, piece)
    table = _read_columns(reader, piece, reader.column, reader.unit, dictionary=_dictionary((reader,)))
    return _values(reader, table.column(0)), table.column(1).combine_chunks()


def read_columns(readers: tuple[Reader, ...], piece: Piece) -> list[Any]:
    """:func:`read_piece` of one piece for several readers of the same source (a plan's statistics), from one read
    of the file: each distinct column is read once, and each reader takes its values with its own null policy and
    value kind."""
    if not readers:
        return []
    if readers[0].kind == "memory":
        return [read_piece(r, piece) for r in readers]
    names = list(dict.fromkeys(r.column for r in readers))
    table = _read_columns(readers[0], piece, *names, dictionary=_dictionary(readers))
    return [_values(r, table.column(names.index(r.column))) for r in readers]


def _dictionary(readers: tuple[Reader, ...]) -> tuple[str, ...]:
    """The columns read as categories: read as dictionaries (string columns; ignored for others), which decodes a
    column of 8 distinct strings about 5 times faster than as strings (benchmarks/plans.py) and maps each
    distinct value to its category once."""
    return tuple(r.column for r in readers if r.value_kind in ("categorical", "labels"))


def _read_columns(reader: Reader, piece: Piece, *columns: str | None, dictionary: tuple[str, ...] = ()) -> pa.Table:
    fs = reader.fs
    as_dict = list(dictionary) or None
    try:
        if is_local(fs):
            # local: no read coalescing, which pays on object storage only (0.37 -> 0.31 ms per small file)
            pf = pq.ParquetFile(piece.path, memory_map=False, pre_buffer=False, read_dictionary=as_dict)
            return _no_views(pf.read_row_groups(list(piece.row_groups), columns=list(columns), use_threads=False))
        with fs.open(piece.path, "rb") as fh:
            pf = pq.ParquetFile(fh, read_dictionary=as_dict)
            return _no_views(pf.read_row_groups(list(piece.row_groups), columns=list(columns), use_threads=False))
    except pa.ArrowInvalid as exc:  # corrupt content: deterministic, not worth a retry
        raise InputDataError(f"{piece.path!r} could not be read as Parquet ({_no_values(exc)})") from None
    except OSError as exc:
        if type(exc) is OSError and CORRUPT.search(str(exc)):  # Arrow's I/O error for pages that do not decode
            raise InputDataError(f"{piece.path!r} could not be read as Parquet (a page does not decode: "
                                 f"{CORRUPT.search(str(exc)).group(0)})") from None  # type: ignore[union-attr]
        exc.add_note(f"reading {piece.path!r}")  # a transient failure: Dask retries it
        raise


#: Arrow's view layouts and the plain layouts with the same values
_PLAIN = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}


def _plain(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t) and t.value_type in _PLAIN:
        return pa.dictionary(t.index_type, _PLAIN[t.value_type])
    return _PLAIN.get(t, t)


def _no_views(table: pa.Table) -> pa.Table:
    """Strings and bytes stored in Arrow's view layouts (as delta-rs writes them) as the plain layouts the channels
    and the person hashing take: the same values."""
    schema = pa.schema([f.with_type(_plain(f.type)) for f in table.schema])
    return table if schema.equals(table.schema) else table.cast(schema)


#: Arrow's messages for content that cannot decode (deterministic: a retry reads the same bytes)
CORRUPT = re.compile(r"deserializ\w* (thrift|page header)|[Cc]orrupt\w*( \w+)?|snappy|decompress\w*|"
                     r"[Ii]nvalid (page|column|compressed)\w*|magic bytes")


def _no_values(exc: BaseException) -> str:
    """An Arrow error's kind without its text, which may quote a value of the data."""
    return f"{type(exc).__name__}: the file's content does not decode as its schema says"


def read_piece(reader: Reader, piece: Piece) -> Any:
    """Read one piece's values: a numpy array (numeric), or a pyarrow Array (categorical).

    ``reader`` is :attr:`Dataset.reader`. No copy for in-memory data.
    """
    if reader.kind == "memory":
        assert reader.values is not None
        return reader.values[piece.start : piece.stop]
    # OSError (a transient I/O failure) propagates, so Dask retries the task
    return _values(reader, _read_columns(reader, piece, reader.column, dictionary=_dictionary((reader,))).column(0))


def _values(reader: Reader, col: pa.ChunkedArray) -> Any:
    """The column as read_piece returns it: nulls filled by the policy; numpy, or pyarrow for categories; a plan's
    group labels (value kind ``"labels"``) as they are, nulls included (a null label is the group "other")."""
    if reader.value_kind == "labels":
        return col.combine_chunks()
    col = fill_nulls(col, reader.fill, reader.column)
    if reader.value_kind == "categorical":
        return col.combine_chunks()
    if col.num_chunks == 1:
        return col.chunk(0).to_numpy()
    return col.to_numpy()
