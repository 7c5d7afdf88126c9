"""Apache Iceberg tables as sources: a table at a snapshot, read through the data files its manifests list.

``iceberg://CATALOG/NAMESPACE.TABLE[@SNAPSHOT]`` names a table of a catalog pyiceberg knows (``~/.pyiceberg.yaml``
or ``PYICEBERG_CATALOG__NAME__…`` variables: REST, Glue, Hive, SQL, …) at a snapshot id (default its current one).
The catalog named ``local`` is the embedded default when no such configuration names it: a pyiceberg
``SqlCatalog`` on an SQLite file beside the default ledger (``iceberg.sqlite``; on the ledger's PostgreSQL database
when the ledger is there), its tables under ``warehouse/`` beside it (``$LDP_DASK_WAREHOUSE`` to put them
elsewhere). No server to start; :func:`iceberg_catalog` returns it to create and write tables.

The files read are the data files of the snapshot's scan plan (pyiceberg's ``plan_files``), planned and read like
any Parquet files. Refused in one line: a snapshot with delete files (merge-on-read deletes: rows deleted beside
their files would be released), and a table whose columns were renamed (its older files carry the old names).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from ._validation import InputDataError, LdpDaskError

__all__ = ["ICEBERG", "LOCAL_CATALOG", "iceberg_catalog", "open_iceberg", "iceberg_commits"]

ICEBERG = "iceberg://"
#: the catalog name that is the embedded default when no pyiceberg configuration names it
LOCAL_CATALOG = "local"


def _pyiceberg() -> Any:
    try:
        import pyiceberg.catalog
    except ImportError:  # pragma: no cover - the test extra installs it
        raise LdpDaskError("Iceberg sources need the pyiceberg package: pip install 'ldp_dask[iceberg]'") from None
    return pyiceberg.catalog


def _embedded() -> dict[str, str]:
    """The embedded catalog's properties: beside the default ledger (a file, or a PostgreSQL database)."""
    from .ledger import default_ledger_path

    ledger = default_ledger_path()
    if ledger.startswith(("postgresql://", "postgres://")):
        uri = "postgresql+psycopg://" + ledger.split("://", 1)[1]
        home = os.path.join(os.path.expanduser("~"), ".ldp_dask")
    else:
        home = os.path.dirname(os.path.abspath(ledger))
        uri = f"sqlite:///{os.path.join(home, 'iceberg.sqlite')}"
    warehouse = os.environ.get("LDP_DASK_WAREHOUSE") or os.path.join(home, "warehouse")
    if "://" not in warehouse:
        os.makedirs(warehouse, exist_ok=True)
        warehouse = f"file://{os.path.abspath(warehouse)}"
    return {"type": "sql", "uri": uri, "warehouse": warehouse}


def iceberg_catalog(name: str = LOCAL_CATALOG) -> Any:
    """The pyiceberg catalog ``name``: as pyiceberg's configuration defines it, or, for ``local`` when nothing
    defines it, the embedded ``SqlCatalog`` beside the default ledger (module docstring).

    Examples
    --------
    >>> catalog = iceberg_catalog()                                              # doctest: +SKIP
    >>> catalog.create_namespace_if_not_exists("shop")                           # doctest: +SKIP
    >>> catalog.create_table("shop.events", schema=table.schema).append(table)   # doctest: +SKIP
    """
    catalogs = _pyiceberg()
    from pyiceberg.utils.config import Config

    config = Config()  # read now: pyiceberg's own copy is read once, when it is first imported
    configured = name.lower() in (config.get_known_catalogs() or [])
    if not configured and name != LOCAL_CATALOG:
        raise InputDataError(f"no Iceberg catalog named {name!r}: define it in ~/.pyiceberg.yaml or with "
                             f"PYICEBERG_CATALOG__{name.upper()}__URI (the catalog {LOCAL_CATALOG!r} is the "
                             "embedded default)")
    try:
        return catalogs.load_catalog(name, **(dict(config.get_catalog_config(name) or {}) if configured
                                              else _embedded()))
    except Exception as exc:  # noqa: BLE001 - each catalog kind raises its own errors
        raise InputDataError(f"cannot open the Iceberg catalog {name!r}: {' '.join(str(exc).split())[:300]}") from None


def parse_iceberg(source: str) -> tuple[str, str, int | None]:
    """``iceberg://CATALOG/NAMESPACE.TABLE[@SNAPSHOT]`` → ``(CATALOG, NAMESPACE.TABLE, SNAPSHOT or None)``."""
    rest = source[len(ICEBERG):]
    where, _, snapshot = rest.partition("@")
    catalog, _, table = where.partition("/")
    if not catalog or "." not in table or table.startswith(".") or table.endswith("."):
        raise LdpDaskError(f"The 'source' parameter {source!r} names no Iceberg table: expected "
                           "iceberg://CATALOG/NAMESPACE.TABLE[@SNAPSHOT], e.g. iceberg://local/shop.events")
    if snapshot and not snapshot.isdigit():
        raise LdpDaskError(f"The snapshot in {source!r} must be a snapshot id, a whole number "
                           f"(iceberg://local/shop.events@3055729675574597004). Got {snapshot!r} instead.")
    return catalog, table, int(snapshot) if snapshot else None


def load_table(catalog: str, name: str) -> Any:
    """The table ``name`` of ``catalog``, or one line saying it is not there."""
    cat = iceberg_catalog(catalog)
    try:
        return cat.load_table(name)
    except Exception as exc:  # noqa: BLE001 - NoSuchTableError, NoSuchNamespaceError, …
        raise InputDataError(f"no Iceberg table {name!r} in the catalog {catalog!r} "
                             f"({type(exc).__name__})") from None


def open_iceberg(source: str) -> dict[str, Any]:
    """The table ``source`` names at its snapshot: its location, identity, snapshot id and data files."""
    catalog, name, snapshot = parse_iceberg(source)
    table = load_table(catalog, name)
    snap = table.current_snapshot() if snapshot is None else table.snapshot_by_id(snapshot)
    if snap is None:
        raise InputDataError(f"the Iceberg table {name!r} has no snapshot"
                             f"{'' if snapshot is None else f' {snapshot}'}"
                             f"{' (nothing was written to it yet)' if snapshot is None else ''}")
    _check_names(table, name)
    files = []
    for task in table.scan(snapshot_id=snap.snapshot_id).plan_files():
        if task.delete_files:
            raise InputDataError(f"the Iceberg table {name!r} has delete files at snapshot {snap.snapshot_id} "
                                 "(merge-on-read deletes): reading its data files would release deleted rows; "
                                 "rewrite it copy-on-write (rewrite_data_files) first")
        files.append(task.file.file_path)
    return {"format": "iceberg", "name": f"{catalog}/{name}", "location": str(table.metadata.location),
            "id": str(table.metadata.table_uuid), "version": int(snap.snapshot_id), "files": files}


def _check_names(table: Any, name: str) -> None:
    """Refuse a table whose columns were renamed: files written before carry the old names."""
    names: dict[int, set[str]] = {}
    for schema in table.metadata.schemas:
        for field in schema.fields:
            names.setdefault(field.field_id, set()).add(field.name)
    renamed = sorted("/".join(sorted(v)) for v in names.values() if len(v) > 1)
    if renamed:
        raise InputDataError(f"the Iceberg table {name!r} renamed columns ({', '.join(renamed[:3])}): files written "
                             "before carry the old names; rewrite its data files under the new names first")


def iceberg_commits(meta: dict[str, Any], start: int, stop: int) -> list[list[Any]] | str:
    """The data-file actions of the snapshots after ``start`` up to ``stop`` (:func:`ldp_dask.table_log.read_commits`
    for an Iceberg table), one list per snapshot, oldest first: each manifest entry a snapshot added or deleted,
    changing data unless the snapshot's operation is ``replace`` (a compaction). A string says why not: ``start``
    is not an ancestor of ``stop`` (a rollback, another branch), or a snapshot expired."""
    from .table_log import Action, relative_to

    catalog, _, name = meta["name"].partition("/")
    table = load_table(catalog, name)
    chain = []
    for snap in _lineage(table, stop):
        if snap.snapshot_id == start:
            break
        chain.append(snap)
    else:
        if any(s.snapshot_id == stop for s in _lineage(table, start)):
            raise LdpDaskError(f"the --since summary read snapshot {start} of the Iceberg table {name!r}; tonight's "
                               f"snapshot {stop} is older: release a snapshot at or after it")
        return f"snapshot {start} is not an ancestor of snapshot {stop} (expired, rolled back or another branch)"
    out = []
    for s in reversed(chain):
        data = str(getattr(s.summary.operation, "value", s.summary.operation)) != "replace"
        actions = []
        for manifest in s.manifests(table.io):
            if manifest.added_snapshot_id != s.snapshot_id:
                continue  # entries carried from earlier snapshots' manifests
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                status = int(getattr(entry.status, "value", entry.status))
                if entry.snapshot_id != s.snapshot_id or status == 0:  # 0: EXISTING
                    continue
                path = relative_to(entry.data_file.file_path, meta["location"])
                if path is None:
                    return f"snapshot {s.snapshot_id} names a file outside the table"
                actions.append(Action(path, status == 1, data))  # 1: ADDED, 2: DELETED
        out.append(actions)
    return out


def _lineage(table: Any, start: int) -> Iterator[Any]:
    """Snapshot ``start`` and its ancestors, newest first, as far as the table still holds them."""
    snap = table.snapshot_by_id(start)
    while snap is not None:
        yield snap
        snap = None if snap.parent_snapshot_id is None else table.snapshot_by_id(snap.parent_snapshot_id)
