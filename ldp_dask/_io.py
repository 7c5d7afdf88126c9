"""Atomic output: write to a temporary name beside the target, then rename.

A failed run therefore leaves nothing half-written at the target path.
Works for local paths and any fsspec URL (rename by ``fs.mv``).
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import fsspec

from ._validation import LdpDaskError

__all__ = ["check_output", "atomic_write", "atomic_directory", "remove_quietly"]


def check_output(path: str | os.PathLike[str], overwrite: bool, name: str = "out") -> tuple[Any, str]:
    """Fail early (before any work) if ``path`` exists and ``overwrite`` is false."""
    fs, p = fsspec.core.url_to_fs(os.fspath(path))
    if fs.exists(p) and not overwrite:
        raise LdpDaskError(
            f"The {name!r} path {os.fspath(path)!r} already exists; pass overwrite=True (--overwrite) to replace it."
        )
    parent = os.path.dirname(p.rstrip("/"))
    if parent and not fs.exists(parent):
        fs.makedirs(parent, exist_ok=True)
    return fs, p


def atomic_write(path: str | os.PathLike[str], writer: Callable[[Any], None], overwrite: bool = False) -> str:
    """Call ``writer(file_object)`` on a temporary file, then rename it to ``path``."""
    fs, p = check_output(path, overwrite)
    tmp = f"{os.path.dirname(p) or '.'}/.{os.path.basename(p)}.tmp-{uuid.uuid4().hex}"
    try:
        with fs.open(tmp, "wb") as fh:
            writer(fh)
        if _local(fs):
            os.replace(tmp, p)
        else:
            if fs.exists(p):
                fs.rm(p, recursive=True)
            fs.mv(tmp, p)
    except BaseException:
        remove_quietly(fs, tmp)
        raise
    return os.fspath(path)


@contextmanager
def atomic_directory(path: str | os.PathLike[str], overwrite: bool = False) -> Iterator[tuple[Any, str]]:
    """Yield ``(fs, tmp_dir)``; on success the directory is renamed to ``path``."""
    fs, p = check_output(path, overwrite)
    tmp = f"{os.path.dirname(p.rstrip('/')) or '.'}/.{os.path.basename(p.rstrip('/'))}.tmp-{uuid.uuid4().hex}"
    fs.makedirs(tmp, exist_ok=True)
    try:
        yield fs, tmp
        if fs.exists(p):
            fs.rm(p, recursive=True)
        fs.mv(tmp, p, recursive=True)
    except BaseException:
        remove_quietly(fs, tmp)
        raise


def remove_quietly(fs: Any, path: str) -> None:
    try:
        if fs.exists(path):
            fs.rm(path, recursive=True)
    except OSError:  # pragma: no cover - best effort cleanup
        pass


def _local(fs: Any) -> bool:
    return type(fs).__name__ == "LocalFileSystem"
