"""A nightly release of a Delta table, decided from the table's log: what is carried, read and charged.

:func:`table_night` takes the ``--since`` summary of a table, tonight's version of the same table and its files,
reads the commits between the two versions (:mod:`ldp_dask.table_log`) and decides, before any row is read:

* files a commit rewrote without changing data (an OPTIMIZE, a compaction) are **not read**: the partitions
  whose rows they hold are carried over as they are, so every released number stays bit-identical and nothing is
  charged. The summary records which files hold which partitions' rows (``groups``), so later nights follow them;
* files appended are read and charged on their own (the old logic does that: they are new names);
* files whose rows a commit changed where kept partitions were (a delete, an update, a merge) are read again,
  the kept partitions dropped, and with ε per row the rows pay again on the locations the partitions' rows came
  from (``lineage``): a row that stayed in the table through the rewrite has then paid every release that gave it
  fresh noise, on the one location it is followed by in the ledger.

The log is checked, not trusted blindly: a rewrite whose files do not hold the same number of rows as the files
it replaced is treated as a change. Where the log cannot be followed (a commit file cleaned up, a summary that
did not read this table's log) the night falls back to comparing files by their footer stamps, and the release is
marked as not followed by the log, which makes the ledger count the table conservatively from then on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._validation import LdpDaskError
from .policy import warn
from .table_log import APPENDED, CHANGED, REWRITTEN, UNTOUCHED, follow, read_commits, since_groups

__all__ = ["TableNight", "table_night"]


@dataclass(frozen=True)
class TableNight:
    """What the log decided (module docstring).

    Attributes
    ----------
    covered : frozenset of str
        Tonight's files that are not read: their rows are in ``carried``.
    carried : tuple of Partition
        Kept partitions carried over without reading their rows again.
    handled : frozenset of str
        Kept partitions decided here (carried, or dropped because their rows changed): the footer-stamp logic
        leaves them alone.
    changed : tuple of str
        Tonight's files read again because a commit changed rows where kept partitions were.
    origins : dict of str to tuple of str
        For a file read tonight whose rows came from other partitions' files: their names (the locations its rows
        pay on besides its own, with ε per row).
    metadata : dict
        What the summary records of the table besides its identity: ``groups``, ``lineage``, ``files`` (each
        file's rows), ``since`` (the version followed from) and ``followed``.
    """

    covered: frozenset[str] = frozenset()
    carried: tuple[Any, ...] = ()
    handled: frozenset[str] = frozenset()
    changed: tuple[str, ...] = ()
    origins: dict[str, tuple[str, ...]] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


def first_night(files: Sequence[Any]) -> TableNight:
    """A series' first night over a table: every file read, each the origin of its own rows."""
    return TableNight(metadata={"files": {f.name: f.rows for f in files}, "followed": True})


def table_night(since: Any, table: dict[str, Any], fs: Any, files: Sequence[Any], skip_changed: bool) -> TableNight:
    """Decide a night of a table from its log (module docstring); ``files`` are tonight's (:class:`FilePlan`)."""
    then = since.metadata.get("table") or {}
    if then and then.get("id") != table["id"]:
        raise LdpDaskError(f"the --since summary read the table {then.get('location')!r} (id {then.get('id')}); "
                           f"this release reads {table['location']!r} (id {table['id']}), another table: start a "
                           "new series (without --since)")
    if then and table["format"] == "delta" and int(then["version"]) > int(table["version"]):
        raise LdpDaskError(f"the --since summary read version {then['version']} of the Delta table "
                           f"{table['location']!r}; tonight's version {table['version']} is older: release a version "
                           f"at or after {then['version']}")
    rows_now = {f.name: f.rows for f in files}
    if not then or "files" not in then:
        why = "the --since summary did not record the table's files" if then else \
            "the --since summary did not read a table"
        return _unfollowed(why, rows_now)
    if table["format"] == "iceberg":  # snapshots, not commit files
        from .iceberg import iceberg_commits

        commits = iceberg_commits(table, int(then["version"]), int(table["version"]))
    else:
        commits = read_commits(fs, table["location"], int(then["version"]), int(table["version"]))
    if isinstance(commits, str):
        return _unfollowed(commits, rows_now)
    recorded = list(then.get("groups") or ())
    rows_then: dict[str, int] = {k: int(v) for k, v in then["files"].items()}
    lineage_then: dict[str, list[str]] = {k: list(v) for k, v in (then.get("lineage") or {}).items()}
    grouped = {p for g in recorded for p in g["partitions"]}
    kept = {p.path: p for p in since.partitions}
    covered: set[str] = set()
    carried: list[Any] = []
    handled: set[str] = set()
    changed: list[str] = []
    origins: dict[str, tuple[str, ...]] = {}
    groups: list[dict[str, Any]] = []
    skipped: list[str] = []
    for c in follow(since_groups(since.partitions, recorded), commits, rows_now):
        kind = c.kind
        if kind == UNTOUCHED and not set(c.kept) <= grouped:
            continue  # files as they were: kept or read by their footer stamps
        if kind == REWRITTEN and not c.kept:
            kind = APPENDED  # rows this series never released, rewritten: new to it
        if kind in (UNTOUCHED, REWRITTEN) and (any(f not in rows_then for f in c.before) or
                                               sum(rows_now[f] for f in c.live) != sum(rows_then[f] for f in c.before)):
            kind = CHANGED  # the log says no data changed, the row counts say otherwise (or cannot say)
        if kind == APPENDED:
            continue  # new names: read and charged on their own
        handled.update(c.kept)
        if kind == CHANGED and not skip_changed:
            changed += c.live
            came = tuple(sorted({o for p in c.kept for o in lineage_then.get(p, [p])}))
            origins.update((f, came) for f in c.live)
            continue
        if kind == CHANGED:
            skipped += c.live
        covered.update(c.live)
        carried += [kept[p] for p in c.kept if p in kept]
        if c.live and tuple(c.live) != tuple(c.kept):
            groups.append({"files": list(c.live), "partitions": list(c.kept)})
    if changed:
        warn(f"{len(changed)} file(s) of the table were rewritten by a delete, update or merge since the --since "
             "summary and are read again with fresh noise: each of their rows, changed or copied, pays ε again "
             "where it came from. A longitudinal release with a privacy unit charges only the persons whose rows "
             "changed (docs/how-to/tables.md)")
    if skipped:
        warn(f"{len(skipped)} file(s) of the table changed rows since the --since summary and are not released "
             f"again (--skip-changed): {', '.join(skipped[:5])}{' ...' if len(skipped) > 5 else ''}; their earlier "
             "sums are kept")
    dropped = handled - {p.path for p in carried}
    lineage = {p: o for p, o in lineage_then.items() if p not in dropped}
    lineage.update({f: sorted({f, *came}) for f, came in origins.items()})
    metadata = {"files": rows_now, "groups": groups, "lineage": lineage, "since": int(then["version"]),
                "followed": True}
    return TableNight(frozenset(covered), tuple(carried), frozenset(handled), tuple(changed), origins, metadata)


def _unfollowed(why: str, rows_now: dict[str, int]) -> TableNight:
    warn(f"the table's log cannot be followed tonight ({why}): its files are compared by their footer stamps "
         "instead, and the ledger counts the table conservatively from now on (every release of it counts for "
         "every row)")
    return TableNight(metadata={"files": rows_now, "followed": False, "unfollowed": why})
