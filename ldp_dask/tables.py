"""Table formats as sources: a Delta Lake table at a version (or an Iceberg table at a snapshot,
:mod:`ldp_dask.iceberg`), read through the files its own log lists.

``delta://PATH[@VERSION]`` (PATH a directory or an object-storage URL; VERSION a whole number, default the
newest) names the Parquet files of the table as it was at that version — the files its transaction log adds and
has not removed — which the pipeline then plans and reads like any Parquet files (:mod:`ldp_dask.source`). Files
a later commit removed, and the ``_delta_log`` itself, are never read. Every summary records the table's format,
identity (the id in its metadata, which survives renames and copies) and version.

Refused in one line, before any work: a table whose rows are not all in its files as written — deletion vectors
(rows deleted by a mask beside the file, not by rewriting it) and column mapping (columns renamed in the log,
not in the files) — since reading its files would release deleted rows or the wrong columns.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from ._validation import InputDataError, LdpDaskError

__all__ = ["DELTA", "TableVersion", "is_table_source", "parse_table_source", "open_table"]

DELTA = "delta://"
ICEBERG = "iceberg://"
_VERSION = re.compile(r"^(?P<path>.+?)(?:@(?P<version>[^@/]*))?$")


@dataclass(frozen=True)
class TableVersion:
    """A table at one version: where it is, what it is, and the data files of that version (sorted)."""

    format: str
    location: str
    identity: str
    version: int
    files: tuple[str, ...]
    #: an Iceberg table's catalog and name (``local/shop.events``); empty for a Delta table (its location names it)
    name: str = ""

    def describe(self) -> str:
        """``Delta table /data/events at version 3``, ``Iceberg table local/shop.events at snapshot 305…``."""
        if self.format == "iceberg":
            return f"Iceberg table {self.name} at snapshot {self.version}"
        return f"Delta table {self.location} at version {self.version}"

    def to_metadata(self) -> dict[str, Any]:
        """What a summary records of the table it read."""
        return {"format": self.format, "location": self.location, "id": self.identity, "version": self.version,
                **({"name": self.name} if self.name else {})}


def is_table_source(source: Any) -> bool:
    """Whether ``source`` names a table format (``delta://…``, ``iceberg://…``) rather than Parquet files."""
    return isinstance(source, str) and source.startswith((DELTA, ICEBERG))


def parse_table_source(source: str) -> tuple[str, str, int | None]:
    """``delta://PATH[@VERSION]`` → ``("delta", PATH, VERSION or None)``; ``iceberg://CATALOG/NS.TABLE[@SNAPSHOT]``
    → ``("iceberg", "CATALOG/NS.TABLE", SNAPSHOT or None)``; checked."""
    if source.startswith(ICEBERG):
        from .iceberg import parse_iceberg

        catalog, name, snapshot = parse_iceberg(source)
        return "iceberg", f"{catalog}/{name}", snapshot
    if not source.startswith(DELTA):
        raise LdpDaskError(f"The 'source' parameter {source!r} is not a table source (delta://PATH[@VERSION]).")
    m = _VERSION.match(source[len(DELTA):])
    if m is None or not m.group("path"):
        raise LdpDaskError(f"The 'source' parameter {source!r} names no table: expected delta://PATH[@VERSION].")
    version = m.group("version")
    if version is not None and not version.isdigit():
        raise LdpDaskError(f"The table version in {source!r} must be a whole number >= 0 (delta://PATH@3). "
                           f"Got {version!r} instead.")
    return "delta", m.group("path"), None if version is None else int(version)


def open_table(source: str, storage_options: dict[str, Any] | None = None) -> TableVersion:
    """The table ``source`` names, at its version: its identity and data files, from its own log."""
    kind, path, version = parse_table_source(source)
    if kind == "iceberg":
        from .iceberg import open_iceberg

        t = open_iceberg(source)
        if not t["files"]:
            raise InputDataError(f"the Iceberg table {t['name']!r} has no data files at snapshot {t['version']}")
        location = t["location"]
        where = _fsspec_path(location) if location.startswith("file:") else location.rstrip("/")
        return TableVersion("iceberg", where, t["id"], t["version"], tuple(sorted(_fsspec_path(u) for u in t["files"])),
                            t["name"])
    try:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError
    except ImportError:  # pragma: no cover - the test extra installs it
        raise LdpDaskError("Delta Lake sources need the deltalake package: pip install 'ldp_dask[delta]'") from None
    try:
        table = DeltaTable(path, version=version, storage_options=_strings(storage_options))
    except TableNotFoundError:
        raise InputDataError(f"no Delta table at {path!r} (no _delta_log there)") from None
    except Exception as exc:  # noqa: BLE001 - deltalake raises its own types for a version it does not have
        raise InputDataError(f"cannot open the Delta table {path!r}"
                             f"{'' if version is None else f' at version {version}'}: "
                             f"{' '.join(str(exc).split())[:300]}") from None
    _check_readable(table, path)
    files = tuple(sorted(_fsspec_path(u) for u in table.file_uris()))
    if not files:
        raise InputDataError(f"the Delta table {path!r} has no data files at version {table.version()}")
    where = path.rstrip("/") if "://" in path else os.path.abspath(path)
    return TableVersion("delta", where, str(table.metadata().id), int(table.version()), files)


def _check_readable(table: Any, path: str) -> None:
    """Refuse a table whose files do not hold its rows and columns as written (see the module's docstring)."""
    features = set(getattr(table.protocol(), "reader_features", None) or ())
    config = table.metadata().configuration or {}
    if "deletionVectors" in features and config.get("delta.enableDeletionVectors", "false") == "true":
        raise InputDataError(f"the Delta table {path!r} uses deletion vectors (rows deleted beside their files): "
                             "reading its files would release deleted rows; rewrite it without them "
                             "(delta.enableDeletionVectors = false, then OPTIMIZE with a purge)")
    if config.get("delta.columnMapping.mode", "none") != "none":
        raise InputDataError(f"the Delta table {path!r} maps its column names (delta.columnMapping.mode = "
                             f"{config['delta.columnMapping.mode']!r}): its files do not carry the names it shows")


def _fsspec_path(uri: str) -> str:
    """A data file's URI as the file systems here take it: a local path for ``file://``, else the URL."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path) if parsed.scheme else os.path.abspath(uri)
    return uri


def _strings(options: dict[str, Any] | None) -> dict[str, str] | None:
    """Storage options as deltalake takes them: its own (upper-case ``AWS_…``, ``AZURE_…``, ``GOOGLE_…``) as
    given, and s3fs's (``endpoint_url``, ``client_kwargs.endpoint_url``, ``key``, ``secret``) translated; the
    rest is fsspec's alone. Credentials may also come from the environment, as for Parquet."""
    if not options:
        return None
    out = {k: str(v) for k, v in options.items() if k.isupper() and not isinstance(v, dict)}
    endpoint = options.get("endpoint_url") or (options.get("client_kwargs") or {}).get("endpoint_url")
    if endpoint:
        out.setdefault("AWS_ENDPOINT_URL", str(endpoint))
        if str(endpoint).startswith("http://"):
            out.setdefault("AWS_ALLOW_HTTP", "true")
    for theirs, ours in (("key", "AWS_ACCESS_KEY_ID"), ("secret", "AWS_SECRET_ACCESS_KEY")):
        if theirs in options:
            out.setdefault(ours, str(options[theirs]))
    return out or None
