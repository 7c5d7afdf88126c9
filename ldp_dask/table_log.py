"""What a Delta table's log says changed between two versions, as the partitioned releases need it.

A nightly release of a table (``--incremental``, ``--since``) keeps one noisy partition per file it read
(:mod:`ldp_dask.partitions`). Between the version its ``--since`` summary read and tonight's, the table's
transaction log (``_delta_log/NNNNNNNNNNNNNNNNNNNN.json``, one file per commit) lists every data file each commit
added or removed, and whether the commit changed data (``dataChange``): an OPTIMIZE, a compaction or a Z-order
rewrites files without changing a row and says so.

The files a commit touches are tied together (their rows may have moved between them), and so are the files one
kept partition names (the files of a privacy-unit night, or the files a compaction made out of kept partitions).
:func:`follow` joins them into *components* and says of each:

* **untouched** — no commit touched it: its files are kept or read as any file is (footer stamps);
* **rewritten** — only commits that changed no data touched it: its files now hold exactly the rows its kept
  partitions released, whose sums are carried over without reading them (free, bit-identical);
* **appended** — its commits added rows and it held no kept partition: its files are new rows, read and charged
  on their own;
* **changed** — a commit added or removed rows where kept partitions were (a delete, an update, a merge, or an
  append compacted together with old rows): its files are read again, and their rows pay again on the
  locations of the partitions they came from (their *lineage*), so that ε per row stays exact whatever the
  files went through.

Pure functions of the log's actions and the kept partitions; :func:`read_commits` reads the log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

__all__ = ["Action", "Component", "read_commits", "relative_to", "follow", "since_groups",
           "UNTOUCHED", "REWRITTEN", "APPENDED", "CHANGED"]

UNTOUCHED, REWRITTEN, APPENDED, CHANGED = "untouched", "rewritten", "appended", "changed"


@dataclass(frozen=True)
class Action:
    """One file a commit added or removed (its path relative to the table), and whether the commit says the
    action changed data."""

    path: str
    added: bool
    data: bool


@dataclass(frozen=True)
class Component:
    """Files tied together by commits and kept partitions: ``live`` the files at tonight's version, ``kept`` the
    kept partitions (by name) whose rows were in them at the ``--since`` version, ``kind`` what happened,
    ``before`` the files that held those rows at the ``--since`` version."""

    live: tuple[str, ...]
    kept: tuple[str, ...]
    kind: str
    before: tuple[str, ...] = ()


def relative_to(path: str, location: str) -> str | None:
    """A log path as a name relative to the table (paths in the log are URL-encoded, usually relative)."""
    parsed = urlparse(path)
    if not parsed.scheme:
        return unquote(path)
    full = unquote(parsed.path) if parsed.scheme == "file" else unquote(path)
    if location.startswith("file://"):
        location = unquote(urlparse(location).path)
    top = location.rstrip("/") + "/"
    return full[len(top):] if full.startswith(top) else None


def read_commits(fs: Any, location: str, start: int, stop: int) -> list[list[Action]] | str:
    """The data-file actions of the commits after version ``start`` up to ``stop`` (inclusive), one list per
    commit; or, as a string, why they cannot be read (a commit file cleaned up by the log's retention, a path
    outside the table, a file that does not parse)."""
    out: list[list[Action]] = []
    for version in range(start + 1, stop + 1):
        name = f"{location.rstrip('/')}/_delta_log/{version:020d}.json"
        try:
            with fs.open(name, "rb") as f:
                lines = f.read().decode("utf-8").splitlines()
        except FileNotFoundError:
            return f"the log no longer holds commit {version} (cleaned up after a checkpoint)"
        except (OSError, UnicodeDecodeError) as exc:
            return f"commit {version} of the log cannot be read ({type(exc).__name__})"
        actions = []
        for line in lines:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                return f"commit {version} of the log does not parse"
            for kind in ("add", "remove"):
                if kind in entry:
                    a = entry[kind]
                    name_ = relative_to(str(a.get("path", "")), location)
                    if not name_:
                        return f"commit {version} names a file outside the table ({a.get('path')!r})"
                    actions.append(Action(name_, kind == "add", bool(a.get("dataChange", True))))
        out.append(actions)
    return out


def _tie(sets: Any, names: Sequence[str]) -> None:
    """Tie ``names`` into one set of ``sets`` (a :class:`scipy.cluster.hierarchy.DisjointSet`)."""
    for n in names:
        if n not in sets:
            sets.add(n)
    for n in names[1:]:
        sets.merge(names[0], n)


def follow(groups: Sequence[tuple[Sequence[str], Sequence[str]]], commits: Sequence[Sequence[Action]],
           live: Iterable[str]) -> list[Component]:
    """The components of the table between the ``--since`` version and tonight's (module docstring).

    Parameters
    ----------
    groups : sequence of (files, partitions)
        At the ``--since`` version, the table's files and the kept partitions whose rows they held, tied
        together: one file and its own partition, a night's files and their one partition, or the files a
        compaction made and the partitions whose rows it moved into them.
    commits : sequence of sequences of Action
        The log's data-file actions, commit by commit (:func:`read_commits`).
    live : iterable of str
        The table's files at tonight's version.
    """
    from scipy.cluster.hierarchy import DisjointSet

    sets = DisjointSet()
    for files, partitions in groups:
        _tie(sets, [f"f:{f}" for f in files] + [f"p:{p}" for p in partitions])
    touched, data = set(), set()
    for actions in commits:
        if not actions:
            continue
        names = [f"f:{a.path}" for a in actions]
        _tie(sets, names)  # the rows of a commit's files may have moved between any of them
        touched.add(names[0])
        if any(a.data for a in actions):
            data.add(names[0])
    kept_of: dict[str, list[str]] = {}
    before_of: dict[str, list[str]] = {}
    for files, partitions in groups:
        for p in partitions:
            kept_of.setdefault(sets[f"p:{p}"], []).append(p)
        for f in files:
            before_of.setdefault(sets[f"f:{f}"], []).append(f)
    live_of: dict[str, list[str]] = {}
    for f in live:
        name = f"f:{f}"
        live_of.setdefault(sets[name] if name in sets else name, []).append(f)
    touched_roots = {sets[x] for x in touched}
    data_roots = {sets[x] for x in data}
    out = []
    for root in sorted(set(live_of) | set(kept_of)):
        now, kept = tuple(sorted(live_of.get(root, ()))), tuple(sorted(kept_of.get(root, ())))
        if root not in touched_roots:
            kind = UNTOUCHED
        elif root not in data_roots:
            kind = REWRITTEN
        elif not kept:
            kind = APPENDED
        else:
            kind = CHANGED
        out.append(Component(now, kept, kind, tuple(sorted(set(before_of.get(root, ()))))))
    return out


def since_groups(partitions: Sequence[Any], recorded: Sequence[Mapping[str, Any]]) -> list[tuple[list[str],
                                                                                                  list[str]]]:
    """The ``groups`` :func:`follow` takes, from a summary's kept partitions (each its own file, or a night of
    several: its members) and the groups it recorded (files a compaction made, with the partitions they hold)."""
    grouped = {p for g in recorded for p in g["partitions"]}
    out = [(list(g["files"]), list(g["partitions"])) for g in recorded]
    for p in partitions:
        if p.path in grouped:
            continue
        files = [m.path for m in p.members] if p.members else [p.path]
        out.append((files, [p.path]))
    return out
