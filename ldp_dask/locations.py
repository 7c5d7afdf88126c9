"""Where a dataset's rows really lie, and what the ledger checks about its files.

A Parquet source reaches its files by whatever spelling the user gave: a
directory, a glob, a symbolic link into another directory, a hard link, a URL.
The budget ledger charges a release where the rows *are*, so for every file a
release reads it records (:func:`ledger_files`):

* ``loc`` — the file's resolved location (symbolic links followed, the path
  made absolute: :func:`ldp_dask._io.resolve_root`);
* ``id`` — its device and inode, where the file system has them, so that two
  hard links to one file are known as one;
* ``state`` — a keyed digest of its size and version (modification time,
  ETag, …): whether it changed since;
* ``footer`` — a keyed digest of its Parquet footer (row groups, sizes,
  statistics): whether a new file is a byte copy of a charged one.

The digests are keyed (:func:`ldp_dask.noise.keyed_digest`): exact facts
about raw data never reach the ledger in a form anyone without the key can
test a guess against. For a dataset declared append-only the ledger lists its
files on every release (:func:`listing`) and compares.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import fsspec

from ._io import is_local, resolve_root
from ._validation import InputDataError
from .footers import VERSION_FIELDS

__all__ = ["FileFacts", "file_facts", "ledger_files", "listing", "list_files", "file_identity", "read_identities"]

@dataclass(frozen=True)
class FileFacts:
    """A file as the ledger compares it (driver memory only: ``state`` and ``footer`` are exact, unkeyed)."""

    loc: str
    ident: str | None
    state: bytes
    footer: bytes | None = None


def _tree(fs: Any, directory: str) -> dict[str, dict[str, Any]]:
    """The files under ``directory``, recursively, without those under a name starting with ``_`` or ``.``."""
    return {p: info for p, info in fs.find(directory, detail=True).items()
            if not any(part.startswith(("_", ".")) for part in p[len(directory):].split("/") if part)}


def list_files(fs: Any, path: str) -> dict[str, dict[str, Any]]:
    """The Parquet files of a glob, a directory (recursively, hive partitions included; names starting with
    ``_`` or ``.`` skipped, as Spark and pyarrow do) or a file, sorted, with what the file system says of each
    (size, modification time or ETag). A glob's matches may be directories (``flights/date=*/``): each stands for
    the files under it, as a directory does."""
    if any(c in path for c in "*?["):
        found: dict[str, dict[str, Any]] = {}
        for p, info in fs.glob(path, detail=True).items():
            found.update(_tree(fs, p) if info.get("type") == "directory" else {p: info})
    elif fs.isdir(path):
        found = _tree(fs, path)
    elif fs.exists(path):
        found = {path: fs.info(path)}
    else:
        raise InputDataError(f"no such file or directory: {path!r}")
    files = sorted(p for p, info in found.items() if info.get("type") != "directory")
    if not files:
        raise InputDataError(f"no Parquet files found at {path!r}")
    return {f: found[f] for f in files}


def file_facts(fs: Any, path: str, info: Mapping[str, Any], footer: bytes | None = None) -> FileFacts:
    """The facts of one file: ``info`` is what the file system's listing said of it, ``footer`` its serialized
    Parquet footer (None where it was not read)."""
    ident = None
    if is_local(fs):
        st = os.stat(path)  # follows links: the file the rows are in
        ident = f"{st.st_dev}:{st.st_ino}"
        version: dict[str, Any] = {"size": st.st_size, "mtime": st.st_mtime_ns}
    else:
        version = {k: info.get(k) for k in VERSION_FIELDS}
    state = hashlib.blake2b(json.dumps(version, sort_keys=True, default=str).encode(), digest_size=32).digest()
    foot = None if footer is None else hashlib.blake2b(footer, digest_size=32).digest()
    return FileFacts(resolve_root(fs.unstrip_protocol(path)), ident, state, foot)


def _keyed(secret: Any, label: str, value: bytes | None) -> str | None:
    from .noise import keyed_digest

    return None if value is None else keyed_digest(secret, label, value)[:32]


def file_identity(secret: Any, facts: FileFacts | None) -> str:
    """A keyed digest of a file's Parquet footer alone, wherever it lies: equal for a link or a byte copy (what
    :func:`ldp_dask.partitions.merge` compares); empty without a footer."""
    return "" if facts is None or facts.footer is None else str(_keyed(secret, "partition-identity", facts.footer))


def read_identities(secret: Any, dataset: Any) -> list[str]:
    """The :func:`file_identity` of every file a planned Parquet dataset reads, sorted."""
    stats = getattr(dataset, "footer_statistics", None)
    if dataset.kind != "parquet" or stats is None:
        return []
    paths = {p.path for p in dataset.pieces if p.path is not None}
    return sorted({file_identity(secret, f) for p, f in stats.facts.items() if p in paths} - {""})


def ledger_files(secret: Any, facts: Mapping[str, FileFacts]) -> list[dict[str, Any]]:
    """The files a release reads, as the ledger records them (keyed under ``secret``), one per location."""
    out: dict[str, dict[str, Any]] = {}
    for f in facts.values():
        out[f.loc] = {"loc": f.loc, "id": f.ident, "state": _keyed(secret, "file-state", f.state),
                      "footer": _keyed(secret, "file-footer", f.footer)}
    return [out[k] for k in sorted(out)]


def listing(secret: Any, storage_options: Mapping[str, Any] | None = None
            ) -> Callable[[str], dict[str, dict[str, Any]]]:
    """``root → {loc: {"state", "id"}}``: the Parquet files now under a root (as a source lists them), keyed as
    :func:`ledger_files` keys them; an absent root has none."""
    def files_under(root: str) -> dict[str, dict[str, Any]]:
        fs, path = fsspec.core.url_to_fs(root, **dict(storage_options or {}))
        if not fs.exists(path):
            return {}
        try:
            listed = list_files(fs, path)
        except InputDataError:  # no Parquet file left under it
            return {}
        out = {}
        for p, info in listed.items():
            f = file_facts(fs, p, info)
            out[f.loc] = {"state": _keyed(secret, "file-state", f.state), "id": f.ident}
        return out

    return files_under
