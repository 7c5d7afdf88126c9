"""Where rows come from: planning partitions over Parquet or in-memory data (:func:`open_source`).

This module knows files and arrays, nothing of statistics. What it plans, a
:class:`~ldp_dask.dataset.Dataset` of :class:`~ldp_dask.dataset.Piece` s, is
defined in :mod:`ldp_dask.dataset` (and re-exported here). Only metadata is
read on the driver; values are read by :func:`ldp_dask.reading.read_piece` where the piece is
processed.

The fingerprint is public (it is written into summaries), so it hashes only
structure — relative file names, row counts, the column's name and type —
never content, sizes or column statistics: a deterministic function of the
values would break differential privacy.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ._io import is_local, resolve_root
from ._validation import InputDataError, LdpDaskError, check_int
from .dataset import (
    NULLS_HINT,
    Dataset,
    Piece,
    Reader,
    _fingerprint,
    _relative,
    fill_nulls,
    task_rows_for,
)
from .footers import FooterStatistics, footer_bytes, footer_statistics, shared_footers, stamp
from .locations import file_facts, list_files
from .options import DEFAULT_PARTITION_ROWS
from .tables import is_table_source, open_table, parse_table_source

__all__ = ["Piece", "Dataset", "Reader", "open_source", "source_root", "typed_categories",
           "DEFAULT_PARTITION_ROWS", "task_rows_for", "fill_nulls", "NULLS_HINT"]

def _is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def is_text(t: pa.DataType) -> bool:
    """A string column in any of Arrow's layouts (``string_view`` is what delta-rs writes when it rewrites a
    file: a compaction must not change what a column is)."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_categorical(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_categorical(t.value_type)
    return is_text(t) or pa.types.is_integer(t)


_KIND_CHECK = {"numeric": (_is_numeric, "a numeric column is required"),
               "categorical": (_is_categorical, "a string, dictionary or integer column is required")}


def open_source(
    source: Any,
    column: str | None = None,
    partition_rows: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    value_kind: str = "numeric",
    unit: str | None = None,
    fill: Any = None,
    unit_nulls: str = "error",
) -> Dataset:
    """Plan a source into partitions.

    Parameters
    ----------
    source : str, path, numpy array, pandas DataFrame or Series, pyarrow Table, or Dataset
        A Parquet file, directory, glob or fsspec URL; or in-memory data; a
        :class:`Dataset` planned earlier is returned as it is.
    column : str, optional
        The column to read (optional for a 1-D array or a Series).
    partition_rows : int, optional
        Target rows per partition (whole row groups are never split).
    storage_options : dict, optional
        Passed to fsspec for URLs (credentials, endpoints, ...).
    value_kind : {"numeric", "categorical"}
        What the column must hold: numbers (read as numpy), or categories —
        strings, dictionary-encoded strings or integers (read as pyarrow arrays).
    unit : str, optional
        The privacy unit's column (integers or strings naming a person), read
        beside the column (:mod:`ldp_dask.units`).
    fill : float or str, optional
        The public value that replaces each null of the column before it is
        privatized (``--nulls value V``); None (default): a column with nulls
        is refused, from the Parquet footers before any work.
    unit_nulls : {"error", "drop"}
        A null in the unit column: refused (from the footers, before any
        work), or the row dropped (it belongs to no person).

    Raises
    ------
    InputDataError
        Missing or non-numeric column, empty dataset, no or corrupt Parquet files.
    """
    if isinstance(source, Dataset):  # already planned (CLI, flows): don't read footers twice
        if source.unit != unit:
            raise LdpDaskError(f"the dataset was planned with privacy unit {source.unit!r}, not {unit!r}")
        return source
    if value_kind not in _KIND_CHECK:
        raise LdpDaskError(f"The 'value_kind' parameter must be 'numeric' or 'categorical'. Got {value_kind!r}.")
    target = DEFAULT_PARTITION_ROWS if partition_rows is None else check_int(
        partition_rows, "partition_rows", 1
    )
    if unit is not None and unit == column:
        raise LdpDaskError(f"The privacy unit {unit!r} cannot be the released column itself.")
    if is_table_source(source):  # a table format: the Parquet files its log lists at the version named
        table = open_table(str(source), dict(storage_options or {}))
        ds = _with_fill(_open_parquet(table.location, column, target, dict(storage_options or {}), value_kind, unit,
                                      fill is not None, unit_nulls == "drop", only=table.files), fill)
        ds = dataclasses.replace(ds, description=table.describe(), table=table.to_metadata())
        return ds if unit is None else dataclasses.replace(ds, unit_nulls=unit_nulls)
    if isinstance(source, (str, os.PathLike)):
        ds = _with_fill(_open_parquet(os.fspath(source), column, target, dict(storage_options or {}), value_kind,
                                      unit, fill is not None, unit_nulls == "drop"), fill)
        return ds if unit is None else dataclasses.replace(ds, unit_nulls=unit_nulls)
    ds = _with_fill(_open_memory(source, column, target, value_kind, fill), fill)
    if unit is None:
        return ds
    units = _memory_units(source, unit, ds.n, unit_nulls == "drop")
    return dataclasses.replace(ds, unit=unit, unit_values=units, unit_nulls=unit_nulls, fingerprint=_fingerprint(
        {"fingerprint": ds.fingerprint, "unit": unit}))


def _with_fill(ds: Dataset, fill: Any) -> Dataset:
    """``ds`` with nulls replaced by ``fill`` on reading; the policy is part of the release's fingerprint."""
    if fill is None:
        return ds
    if ds.value_kind == "numeric" and not isinstance(fill, (int, float)):
        raise LdpDaskError(f"The null fill value must be a number for the numeric column {ds.column!r}. "
                           f"Got {fill!r} instead.")
    return dataclasses.replace(ds, fill=fill, fingerprint=_fingerprint({"fingerprint": ds.fingerprint,
                                                                       "nulls": ["value", repr(fill)]}))


def _memory_units(source: Any, unit: str, n: int, drop: bool = False) -> pa.Array:
    import pandas as pd

    if isinstance(source, pa.Table) and unit in source.column_names:
        col = source.column(unit).combine_chunks()
    elif isinstance(source, pd.DataFrame) and unit in source.columns:
        col = pa.array(source[unit])
    else:
        raise InputDataError(f"the privacy unit column {unit!r} was not found; an in-memory source needs a pandas "
                             "DataFrame or a pyarrow Table holding it")
    if not _is_unit_type(col.type):
        raise InputDataError(f"the privacy unit column {unit!r} has type {col.type}; an integer or string id is "
                             "required")
    if col.null_count and not drop:
        raise InputDataError(f"the privacy unit column {unit!r} contains null values; every row needs a person "
                             "(--unit-nulls drop, or unit_nulls='drop', drops those rows)")
    assert len(col) == n
    return col


def _is_unit_type(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_unit_type(t.value_type)
    return pa.types.is_integer(t) or is_text(t) or pa.types.is_binary(t) or pa.types.is_binary_view(t)


# --- in-memory --------------------------------------------------------------------
def _open_memory(source: Any, column: str | None, target: int, value_kind: str = "numeric",
                 fill: Any = None) -> Dataset:
    values, name = _memory_values(source, column, value_kind, fill)
    if value_kind == "numeric" and values.dtype.kind not in "iuf":
        raise InputDataError(
            f"column {name!r} has dtype {values.dtype}; a numeric column is required"
        )
    if value_kind == "categorical":
        try:
            values = values if isinstance(values, pa.Array) else pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise InputDataError(f"column {name!r} cannot be read as categories ({exc})") from None
        if not _is_categorical(values.type):
            raise InputDataError(f"column {name!r} has type {values.type}; {_KIND_CHECK[value_kind][1]}")
        values = fill_nulls(values, fill, name)
    n = int(len(values))
    if n == 0:
        raise InputDataError("the dataset is empty (0 rows)")
    pieces = tuple(
        Piece(index=i, num_rows=min(n, s + target) - s, start=s, stop=min(n, s + target))
        for i, s in enumerate(range(0, n, target))
    )
    dtype = str(values.type) if isinstance(values, pa.Array) else values.dtype.str
    fp = _fingerprint({"kind": "memory", "column": name, "dtype": dtype, "n": n})
    # in-memory data has no location: its ledger root names the column and type only (not n, which the ledger
    # would otherwise keep exactly), so that releases of in-memory data of one column add up
    root = "memory:" + _fingerprint({"kind": "memory", "column": name, "dtype": dtype})
    return Dataset("memory", name, pieces, n, fp, f"in-memory {type(source).__name__}", None, values, value_kind,
                   root=root, target_rows=target)


def _memory_values(source: Any, column: str | None, value_kind: str = "numeric",
                   fill: Any = None) -> tuple[Any, str]:
    if isinstance(source, pa.Table):
        if column is None or column not in source.column_names:
            raise InputDataError(_missing(column, source.column_names, "the table"))
        col = source.column(column)
        col = fill_nulls(col, fill, column)
        check, need = _KIND_CHECK[value_kind]
        if not check(col.type):
            raise InputDataError(f"column {column!r} has type {col.type}; {need}")
        if value_kind == "categorical":
            return col.combine_chunks(), column
        return col.to_numpy(), column
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(source, pd.DataFrame):
        if column is None or column not in source.columns:
            raise InputDataError(_missing(column, list(source.columns), "the DataFrame"))
        source = source[column]
    if pd is not None and isinstance(source, pd.Series):
        name = column or (str(source.name) if source.name is not None else "value")
        if source.isna().any():
            if fill is None:
                raise InputDataError(f"column {name!r} contains null values; {NULLS_HINT}")
            source = source.fillna(fill)
        if value_kind == "categorical":
            return pa.array(source), name
        return source.to_numpy(), name
    if isinstance(source, (np.ndarray, list, tuple)):
        arr = np.asarray(source)
        if arr.ndim != 1:
            raise InputDataError(f"an in-memory array must be 1-D; got shape {arr.shape}")
        return arr, column or "value"
    raise LdpDaskError(
        "The 'source' parameter must be a Parquet path/URL, a 1-D numpy array, a pandas "
        f"DataFrame or Series, or a pyarrow Table. Got {type(source).__name__} instead."
    )


# --- Parquet -----------------------------------------------------------------------
#: Footers are read by this many threads where the file system is remote (a footer costs a round trip there).
FOOTER_THREADS = 16


def _open_parquet(url: str, column: str | None, target: int, storage_options: dict[str, Any],
                  value_kind: str = "numeric", unit: str | None = None, filled: bool = False,
                  drop_null_units: bool = False, only: tuple[str, ...] | None = None) -> Dataset:
    """Plan Parquet files with ``pyarrow.dataset``: discovery (directories, hive partitions, globs, any fsspec
    file system), then one footer per file (row groups, schema, statistics), read by threads where remote.
    ``only``: the files to read under the directory ``url``, as a table's log lists them (no discovery)."""
    if column is None:
        raise LdpDaskError("The 'column' parameter is required for a Parquet source.")
    try:
        fs, path = fsspec.core.url_to_fs(url, **storage_options)
    except (ValueError, ImportError) as exc:
        raise InputDataError(f"cannot open {url!r}: {exc}") from None
    if only is None:
        listed = list_files(fs, path)
    else:
        try:
            listed = {fs._strip_protocol(f): fs.info(f) for f in only}  # named as discovery names them
        except FileNotFoundError as exc:
            raise InputDataError(f"a data file of {url!r} is missing ({exc.args[0] if exc.args else exc}): the "
                                 "table's log lists a file its storage does not hold (vacuumed?)") from None
    files = list(listed)
    root = path if fs.isdir(path) else os.path.dirname(path)
    population = _population_root(fs, path)
    import pyarrow.dataset as pads

    parquet, arrow_fs = pads.ParquetFileFormat(), _arrow_filesystem(fs)
    check, need = _KIND_CHECK[value_kind]
    wanted = [column] if unit is None else [column, unit]

    shared = shared_footers()  # captured here: the footer threads do not see this context

    def footer(f: str) -> tuple[str, pq.FileMetaData, pa.Schema]:
        key = None if shared is None else (fs.protocol, f, repr(sorted(listed.get(f, {}).items(), key=str)))
        if shared is not None and key in shared:
            return shared[key]
        try:
            fragment = parquet.make_fragment(f, filesystem=arrow_fs)
            found = fragment.path, fragment.metadata, fragment.physical_schema
        except (pa.ArrowInvalid, pa.ArrowIOError, OSError, ValueError) as exc:
            raise InputDataError(f"{f!r} is not a readable Parquet file ({exc})") from None
        if shared is not None:
            shared[key] = found
        return found

    with ExitStack() as stack:
        # each footer is used and let go as it is read: 10^5 footers held at once took 0.8 GiB on the driver
        if is_local(fs) or len(files) < 2:  # local footers: threads measured no faster
            footers: Iterator[tuple[str, pq.FileMetaData, pa.Schema]] = map(footer, files)
        else:
            from concurrent.futures import ThreadPoolExecutor

            pool = stack.enter_context(ThreadPoolExecutor(FOOTER_THREADS, thread_name_prefix="ldp-footers"))
            footers = pool.map(footer, files)
        stats = FooterStatistics()
        pieces: list[Piece] = []
        structure: list[tuple[str, int]] = []
        col_type: str | None = None
        for f, meta, schema in footers:
            for name in wanted:
                if name not in schema.names and f"/{name}=" in "/" + _relative(f, root):
                    raise InputDataError(f"column {name!r} is a hive partition key of {url!r} (it is in the directory "
                                         "names, not in the files); only columns stored in the files can be released")
            if column not in schema.names:
                raise InputDataError(_missing(column, schema.names, f"file {f!r}"))
            t = schema.field(column).type
            if not check(t):
                raise InputDataError(f"column {column!r} in file {f!r} has type {t}; {need}")
            col_type = col_type or str(t)
            if unit is not None:
                if unit not in schema.names:
                    raise InputDataError(_missing(unit, schema.names, f"file {f!r}", "privacy unit column"))
                if not _is_unit_type(schema.field(unit).type):
                    raise InputDataError(f"the privacy unit column {unit!r} in file {f!r} has type "
                                         f"{schema.field(unit).type}; an integer or string id is required")
            footer_statistics(meta, wanted[:1] if drop_null_units else wanted, value_kind == "numeric", stats, f)
            raw = footer_bytes(meta)
            stats.stamps[f] = stamp(meta, listed[f], raw)
            stats.facts[f] = file_facts(fs, f, listed[f], raw)
            structure.append((_relative(f, root), meta.num_rows))
            group: list[int] = []
            rows = 0
            for rg in range(meta.num_row_groups):
                r = meta.row_group(rg).num_rows
                if group and rows + r > target:
                    pieces.append(Piece(len(pieces), rows, f, tuple(group)))
                    group, rows = [], 0
                group.append(rg)
                rows += r
            if rows:
                pieces.append(Piece(len(pieces), rows, f, tuple(group)))
    if stats.nulls is not None and not filled:
        hint = "" if unit is None else (f"; a row whose {unit!r} is null belongs to no person: --unit-nulls drop "
                                        "(unit_nulls='drop') drops such rows")
        raise InputDataError(f"column {column!r}{'' if unit is None else f' or {unit!r}'} contains null values "
                             f"(the Parquet statistics of {stats.nulls!r} show it); {NULLS_HINT}{hint}")
    n = sum(p.num_rows for p in pieces)
    if n == 0:
        raise InputDataError(f"the dataset at {url!r} is empty (0 rows)")
    shape: dict[str, Any] = {"kind": "parquet", "column": column, "type": col_type, "files": structure}
    if unit is not None:
        shape["unit"] = unit
    return Dataset("parquet", column, tuple(pieces), n, _fingerprint(shape), url, fs, None, value_kind,
                   root=population, unit=unit, target_rows=target, footer_statistics=stats, base=root)


def typed_categories(labels: list[Any], dataset: Dataset) -> list[Any]:
    """Categories given as text, typed as the column: integers on an integer column, else as given
    (``01 02 10`` matches the strings "01", "02", "10" of a string column)."""
    if not all(isinstance(x, str) for x in labels):
        return labels
    if dataset.kind == "memory" and dataset.values is not None:  # an in-memory column: its own type
        v = dataset.values
        t = v.type if isinstance(v, (pa.Array, pa.ChunkedArray)) else pa.from_numpy_dtype(np.asarray(v).dtype) \
            if np.asarray(v).dtype.kind in "iu" else pa.string()
    elif dataset.kind != "parquet" or not dataset.pieces:
        return labels
    else:
        t = pq.read_schema(dataset.pieces[0].path, filesystem=dataset.fs).field(dataset.column).type
    t = t.value_type if pa.types.is_dictionary(t) else t
    if not pa.types.is_integer(t):
        return labels
    try:
        return [int(x) for x in labels]
    except ValueError:
        raise LdpDaskError(f"column {dataset.column!r} holds integers, so every category must be one; "
                           f"got {next(x for x in labels if not x.lstrip('-').isdigit())!r}.") from None


def _arrow_filesystem(fs: Any) -> Any:
    """The pyarrow file system for an fsspec one: Arrow's own for local files, else a wrapper of ``fs``."""
    import pyarrow.fs as pafs

    if is_local(fs):
        return pafs.LocalFileSystem()
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs))


def _population_root(fs: Any, path: str) -> str:
    """The resolved root of a source: a directory's files and globs belong to the directory (symlinks resolved)."""
    glob = min((i for i, c in enumerate(path) if c in "*?["), default=None)
    if glob is not None:
        head = path[:glob]
        path = head.rstrip("/") if head.endswith("/") else os.path.dirname(head)
    if is_local(fs):
        path = os.path.realpath(path)
    return resolve_root(fs.unstrip_protocol(path.rstrip("/") or "/"))


def source_root(source: str | os.PathLike[str], storage_options: dict[str, Any] | None = None) -> str:
    """The ledger root of a Parquet source (which need not exist yet): see :class:`Dataset` ``root``."""
    url = os.fspath(source)
    if is_table_source(url):  # a table's budget is its directory's, whatever version is read
        kind, url, _ = parse_table_source(url)
        if kind == "iceberg":  # its directory is where its catalog says it lies
            from .iceberg import load_table

            catalog, _, name = url.partition("/")
            url = str(load_table(catalog, name).metadata.location)
    try:
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    except (ValueError, ImportError) as exc:
        raise InputDataError(f"cannot open {url!r}: {exc}") from None
    return _population_root(fs, path)


def _missing(column: str | None, names: list[Any], where: str, what: str = "column") -> str:
    shown = ", ".join(map(str, names[:20])) + (", ..." if len(names) > 20 else "")
    if column is None:
        return f"The 'column' parameter is required; {where} has columns: {shown}"
    return f"{what} {column!r} not found in {where}; available columns: {shown}"
