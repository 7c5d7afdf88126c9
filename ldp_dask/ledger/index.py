"""The ledger's indexes: where each release is charged, the files it read by identity, its parts by key.

The budget rules (:mod:`.budget`, :mod:`.central`) are pure functions of the releases whose charges overlap a root;
these tables let the ledger fetch exactly those, so that a release's ledger work does not grow with the history of
other datasets (docs/privacy.md, "The budget ledger"):

* ``release_locs``: every location a release is charged on directly — its root, each part's root, each file it
  read outside its root (:func:`.budget.charges_of`);
* ``release_files``: each file it read that has an identity (device and inode): a hard link makes a release
  charged wherever that file is known, so ``aliased`` lists the identities seen at two locations or more;
* ``release_parts``: a partitioned release's parts by key, with their content tags once settled.

:func:`relevant` returns the active releases with a charge overlapping any of some roots — a superset is harmless,
since every rule filters by overlap — and :func:`index_release` / :func:`drop_release` keep the tables in step with
``releases`` (one place each for every insert and delete). :func:`reindex` builds them for a ledger written before
they existed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from .store import ACTIVE, INDEX_SCHEMA, INDEX_TABLES, Tx

__all__ = ["INDEX_TABLES", "INDEX_SCHEMA", "index_release", "drop_release", "relevant", "aliased_records",
           "ROW_COLUMNS", "reindex", "recorded_parts", "tag_parts", "ancestors", "charged_locations", "fetch"]

#: the columns of a release the budget rules read
ROW_COLUMNS = ("id, root, epsilon, privacy_unit, parts, files, key_id, central, table_log, column_name, scope, "
               "status")

def ancestors(path: str) -> list[str]:
    """``path`` and every location above it (``file:///a/b`` → itself, ``file:///a``, ``file://``, …)."""
    path = path.rstrip("/")
    out = [path]
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        out.append(path)
    return out


def charged_locations(root: str, parts: str | None, files: Sequence[dict[str, Any]]) -> set[str]:
    from .budget import overlaps

    top = root.rstrip("/")
    if parts:
        return {top} | {p["root"].rstrip("/") for p in json.loads(parts)}
    return {top} | {f["loc"].rstrip("/") for f in files if not overlaps(f["loc"], top)}


def index_release(tx: Tx, rid: int, root: str, parts: str | None, files_json: str | None) -> None:
    """Index a release just inserted: its charged locations, its files' identities (marking any identity now known
    at a second location) and its parts' keys."""
    files = json.loads(files_json or "[]")
    for loc in sorted(charged_locations(root, parts, files)):
        tx.run("INSERT INTO release_locs (loc, release_id) VALUES (?, ?)", (loc, rid))
    for f in files:
        if not f.get("id"):
            continue
        loc = f["loc"].rstrip("/")
        if tx.one("SELECT loc FROM release_files WHERE file_id=? AND loc<>? LIMIT 1", (f["id"], loc)):
            tx.run("INSERT INTO aliased (file_id) VALUES (?) ON CONFLICT (file_id) DO NOTHING", (f["id"],))
        tx.run("INSERT INTO release_files (file_id, loc, release_id) VALUES (?, ?, ?)", (f["id"], loc, rid))
    for p in json.loads(parts or "[]"):
        tx.run("INSERT INTO release_parts (part_key, tag, release_id) VALUES (?, ?, ?)", (p["key"], p.get("tag"), rid))


def tag_parts(tx: Tx, rid: int, parts: Sequence[dict[str, Any]]) -> None:
    """Record a partitioned release's content tags, once settled."""
    tx.run("DELETE FROM release_parts WHERE release_id=?", (rid,))
    for p in parts:
        tx.run("INSERT INTO release_parts (part_key, tag, release_id) VALUES (?, ?, ?)", (p["key"], p.get("tag"), rid))


def drop_release(tx: Tx, rid: int, condition: str = "") -> bool:
    """Delete a release (``condition``: an extra ``AND …`` on its status) and its index rows; whether it was."""
    gone = tx.run(f"DELETE FROM releases WHERE id=? {condition}", (rid,)).rowcount
    if gone:
        for table in ("release_locs", "release_files", "release_parts"):
            tx.run(f"DELETE FROM {table} WHERE release_id=?", (rid,))
    return bool(gone)


def recorded_parts(tx: Tx, keys: Iterable[str], exclude: int | None = None) -> dict[str, set[str | None]]:
    """The parts of committed releases with one of ``keys``: content tags by part key."""
    out: dict[str, set[str | None]] = {}
    wanted = sorted(set(keys))
    for i in range(0, len(wanted), 500):
        chunk = wanted[i:i + 500]
        for r in tx.all("SELECT p.part_key, p.tag, p.release_id FROM release_parts p JOIN releases r ON "
                        f"r.id = p.release_id WHERE r.status='committed' AND p.part_key IN ({_marks(chunk)})", chunk):
            if r["release_id"] != exclude:
                out.setdefault(r["part_key"], set()).add(r["tag"])
    return out


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


def aliased_records(tx: Tx) -> list[dict[str, Any]]:
    """Every file record whose identity is known at two locations or more (hard links: few, usually none)."""
    return tx.all("SELECT file_id, loc, release_id FROM release_files WHERE file_id IN (SELECT file_id FROM aliased)")


def _overlapping_ids(tx: Tx, root: str, after: int) -> set[int]:
    top = root.rstrip("/")
    up = ancestors(top)
    ids = {r["release_id"] for r in tx.all(
        f"SELECT release_id FROM release_locs WHERE loc IN ({_marks(up)}) AND release_id > ?", [*up, after])}
    ids |= {r["release_id"] for r in tx.all(
        "SELECT release_id FROM release_locs WHERE loc >= ? AND loc < ? AND release_id > ?",
        (top + "/", top + "0", after))}
    return ids


def relevant(tx: Tx, roots: Iterable[str], after: int = 0, file_ids: Iterable[str] = (),
             aliases: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The active releases (id above ``after``) with a charge that may overlap one of ``roots``, or that read a file
    with one of ``file_ids``, in entry order: those charged there directly, and those that read a file whose
    identity is also known at a location overlapping one (a hard link charges them there).
    ``aliases``: :func:`aliased_records`, when at hand."""
    from .budget import overlaps

    roots = {r.rstrip("/") for r in roots}
    ids: set[int] = set()
    for root in roots:
        ids |= _overlapping_ids(tx, root, after)
    records = aliased_records(tx) if aliases is None else aliases
    linked = {a["file_id"] for a in records if any(overlaps(a["loc"], root) for root in roots)} | set(file_ids)
    if linked:
        wanted = sorted(linked)
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            ids |= {r["release_id"] for r in tx.all(
                f"SELECT release_id FROM release_files WHERE file_id IN ({_marks(chunk)}) AND release_id > ?",
                [*chunk, after])}
    return fetch(tx, ids)


def fetch(tx: Tx, ids: Iterable[int]) -> list[dict[str, Any]]:
    """The active releases among ``ids``, in entry order."""
    wanted = sorted(ids)
    out: list[dict[str, Any]] = []
    for i in range(0, len(wanted), 500):
        chunk = wanted[i:i + 500]
        out += tx.all(f"SELECT {ROW_COLUMNS} FROM releases WHERE id IN ({_marks(chunk)}) AND status IN {ACTIVE} "
                      "ORDER BY id", chunk)
    return out


def reindex(tx: Tx) -> None:
    """Build the indexes of a ledger written before they existed (every release, in entry order)."""
    for table in INDEX_TABLES:
        tx.run(f"DELETE FROM {table}")
    for r in tx.all("SELECT id, root, parts, files FROM releases ORDER BY id"):
        index_release(tx, int(r["id"]), r["root"], r["parts"], r["files"])
