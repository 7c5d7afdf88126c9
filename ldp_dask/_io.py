"""Atomic output: write to a temporary name beside the target, then rename.

A failed run therefore leaves nothing half-written at the target path.
Works for local paths and any fsspec URL (rename by ``fs.mv``).
:class:`StagedOutputs` does the same for all the files of one release at once:
every output is written beside its target first, and only when all of them are
written are they renamed into place (:func:`ldp_dask.release.release`).
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Callable, Mapping
from typing import IO, Any

import fsspec

from ._validation import LdpDaskError

__all__ = ["file_stem", "check_output", "atomic_write", "remove_quietly", "StagedOutputs", "temp_name", "resolve_root",
           "check_not_input", "is_local"]


def resolve_root(url: str) -> str:
    """A location as the ledger compares it: a URL with its protocol, local paths absolute with symlinks resolved."""
    if "://" not in url or url.startswith("file://"):
        local = url[len("file://"):] if url.startswith("file://") else url
        return "file://" + os.path.realpath(local)
    return url.rstrip("/")


def check_not_input(target: str, given: str, name: str, inputs: tuple[tuple[str, bool], ...]) -> None:
    """Refuse an output that is an input, holds one, or lies inside an input directory.

    ``target`` is the output's resolved URL (:func:`resolve_root`); ``inputs``
    are ``(resolved URL, is a directory)``. Writing there would replace raw
    data (``--out`` equal to the source), delete it (a rows directory around
    it, with ``--overwrite``) or add a file the next read of the source would
    take for data.
    """
    for where, is_dir in inputs:
        if target == where or where.startswith(target + "/"):
            raise LdpDaskError(f"The {name!r} path {given!r} is or contains the input {where!r}; write outputs "
                               f"elsewhere (an output never replaces the data it was computed from).")
        if is_dir and target.startswith(where + "/"):
            raise LdpDaskError(f"The {name!r} path {given!r} is inside the input directory {where!r}, where the next "
                               f"read of the source would take it for data; write outputs elsewhere.")


#: the outputs that are directories (privatized rows, filled by the workers); every other output is one file
DIRECTORY_OUTPUTS = ("rows",)


def check_output(path: str | os.PathLike[str], overwrite: bool, name: str = "out",
                 storage_options: Mapping[str, Any] | None = None, directory: bool = False) -> tuple[Any, str]:
    """Fail early (before any work) if ``path`` exists and ``overwrite`` is false, if a file output would replace
    a directory, or if its parent cannot be a directory (a file on the way). Creates nothing: the parent is made
    when the output is staged (:meth:`StagedOutputs.write`), so a refused release leaves no empty directory."""
    given = os.fspath(path)
    fs, p = fsspec.core.url_to_fs(given, **(storage_options or {}))
    if fs.exists(p) and not overwrite:
        raise LdpDaskError(
            f"The {name!r} path {given!r} already exists; pass overwrite=True (--overwrite) to replace it."
        )
    if not directory and fs.isdir(p):
        raise LdpDaskError(f"The {name!r} path {given!r} is a directory, and this output is one file: name a file "
                           f"(e.g. {given.rstrip('/')}/<name>.parquet); --overwrite never replaces a directory "
                           "with a file.")
    ancestor = os.path.dirname(p.rstrip("/"))
    while ancestor and not fs.exists(ancestor) and os.path.dirname(ancestor) != ancestor:
        ancestor = os.path.dirname(ancestor)
    if ancestor and fs.exists(ancestor) and not fs.isdir(ancestor):
        raise LdpDaskError(f"The {name!r} path {given!r} cannot be written: {ancestor!r} is a file, not a directory.")
    return fs, p


def atomic_write(path: str | os.PathLike[str], writer: Callable[[Any], None], overwrite: bool = False) -> str:
    """Call ``writer(file_object)`` on a temporary file, then rename it to ``path``."""
    outputs = StagedOutputs(overwrite)
    outputs.declare("out", path)
    try:
        outputs.write("out", writer)
        return outputs.publish()["out"]
    except BaseException:
        outputs.discard()
        raise


def remove_quietly(fs: Any, path: str) -> None:
    try:
        if fs.exists(path):
            fs.rm(path, recursive=True)
    except OSError:  # pragma: no cover - best effort cleanup
        pass


def temp_name(p: str, token: str) -> str:
    """The hidden name an output of the release ``token`` is staged under, beside its target ``p``.

    The ledger records the token, so a crashed run's staged outputs can be found.
    """
    return f"{os.path.dirname(p.rstrip('/')) or '.'}/.{os.path.basename(p.rstrip('/'))}.tmp-{token}"


def _move_into_place(fs: Any, tmp: str, p: str, directory: bool) -> None:
    if is_local(fs) and not directory:
        os.replace(tmp, p)
        return
    if fs.exists(p):
        fs.rm(p, recursive=True)
    fs.mv(tmp, p, recursive=directory)


class StagedOutputs:
    """The outputs of one release: declared before work, written beside their targets, published together.

    * :meth:`declare` checks a target before any work: it must not exist unless
      ``overwrite`` (its parent directory is created).
    * :meth:`write` writes a file's content to a hidden temporary name beside
      its target; :meth:`directory` gives a temporary directory to fill
      (privatized rows, written by workers).
    * :meth:`publish` renames everything into place once all of it is
      written; :meth:`discard` removes what was staged. A failed release
      therefore leaves nothing at any target, whichever output failed.
    """

    def __init__(self, overwrite: bool = False, storage_options: Mapping[str, Any] | None = None,
                 token: str | None = None, inputs: tuple[tuple[str, bool], ...] = ()) -> None:
        self.overwrite = bool(overwrite)
        #: the run's inputs, ``(resolved URL, is a directory)``: no output may be, hold or sit inside one
        self.inputs = tuple(inputs)
        self.storage_options = dict(storage_options or {})
        self.token = token or uuid.uuid4().hex
        #: labels renamed into place so far (a failure part-way through publish leaves these published)
        self.published: list[str] = []
        self._targets: dict[str, tuple[Any, str, str]] = {}  # label -> (fs, path, as given)
        self._staged: dict[str, tuple[str, bool]] = {}  # label -> (temporary path, is a directory)
        self._made: list[tuple[Any, str]] = []  # parent directories made by staging, deepest first

    def declare(self, label: str, path: str | os.PathLike[str] | None) -> None:
        """Declare an output (``None``: no such output) and check it now, before any work."""
        if path is None:
            return
        given = os.fspath(path)
        if self.inputs:
            fs0, p0 = fsspec.core.url_to_fs(given, **self.storage_options)
            check_not_input(resolve_root(fs0.unstrip_protocol(p0.rstrip("/"))), given, label, self.inputs)
        fs, p = check_output(given, self.overwrite, label, self.storage_options, label in DIRECTORY_OUTPUTS)
        self._targets[label] = (fs, p, given)

    def _parent(self, fs: Any, p: str) -> None:
        """Make ``p``'s parent directory (staging is the first write there), remembering what was made so that
        :meth:`discard` removes it again."""
        parent = os.path.dirname(p.rstrip("/"))
        missing = []
        while parent and not fs.exists(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
        if missing:
            fs.makedirs(missing[0], exist_ok=True)
            self._made.extend((fs, d) for d in missing)  # deepest first

    def locations(self) -> list[str]:
        """Every declared target as a full URL (what the ledger records to find staged outputs after a crash)."""
        return [fs.unstrip_protocol(p) for fs, p, _ in self._targets.values()]

    def __contains__(self, label: str) -> bool:
        return label in self._targets

    def write(self, label: str, content: bytes | Callable[[IO[bytes]], None]) -> None:
        """Write output ``label``'s content (bytes, or a function of a binary file) beside its target."""
        fs, p, _ = self._targets[label]
        tmp = temp_name(p, self.token)
        self._parent(fs, p)
        self._staged[label] = (tmp, False)
        with fs.open(tmp, "wb") as fh:
            if isinstance(content, (bytes, bytearray)):
                fh.write(content)
            else:
                content(fh)

    def directory(self, label: str) -> tuple[Any, str]:
        """A temporary directory beside output ``label``'s target, as ``(fs, path)``, to fill before publishing."""
        fs, p, _ = self._targets[label]
        tmp = temp_name(p, self.token)
        self._parent(fs, p)
        fs.makedirs(tmp, exist_ok=True)
        self._staged[label] = (tmp, True)
        return fs, tmp

    def published_paths(self) -> list[str]:
        """Where the outputs published so far lie (as given), in the order they were published."""
        return [self._targets[label][2] for label in self.published]

    def publish(self) -> dict[str, str]:
        """Rename every staged output into place; returns ``{label: path}`` of what was published."""
        published = {}
        for label, (tmp, is_dir) in list(self._staged.items()):
            fs, p, given = self._targets[label]
            _move_into_place(fs, tmp, p, is_dir)
            del self._staged[label]
            self.published.append(label)
            published[label] = given
        return published

    def discard(self) -> None:
        """Remove every staged (not yet published) output."""
        for label, (tmp, _) in list(self._staged.items()):
            remove_quietly(self._targets[label][0], tmp)
            del self._staged[label]
        if not self.published:  # nothing is out: the directories staging made go too (each if empty)
            for fs, d in sorted(self._made, key=lambda m: -len(m[1])):
                try:
                    if not fs.ls(d):
                        fs.rmdir(d)
                except OSError:  # pragma: no cover - best effort: another process wrote there meanwhile
                    pass
            self._made.clear()


def is_local(fs: Any) -> bool:
    """Whether an fsspec file system is the local disk."""
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "file" in protocol and type(fs).__name__ == "LocalFileSystem"


def file_stem(name: str) -> str:
    """``name`` (a column, a statistic) as one safe file-name part: letters, digits, ``_``, ``-`` and inner dots are
    kept; anything else (a ``/``, a leading ``.``) becomes ``_`` and the name gets 8 hex of its SHA-256, so a name
    like ``../..`` stays inside its folder and two names never share a file."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".")
    if safe == name and safe:
        return safe
    return f"{safe or 'column'}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
