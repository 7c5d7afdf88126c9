"""Partitioned releases: a table that grows a file a day, released night after night at the cost of the new day.

A *partitioned* release (``incremental=True``, ``--incremental``) treats each
file of a Parquet source as a partition of people:

* **Its noise is its own.** A file's tasks draw their noise under keys derived
  from the secret, the release's public context and the file's *location* (not
  its place in today's plan), bound to its content as every partition's key is
  (:mod:`ldp_dask.noise`). An unchanged file therefore reproduces its noisy sums
  bit for bit in any later release, however many files were added beside it,
  and whether the release read its day's directory or the whole table.
* **Its sums are kept.** The summary keeps each file's noisy sums beside the
  totals, with its row count, task layout, a keyed stamp of its footer, size
  and modification time, and the keyed digest of its content
  (:class:`~ldp_dask.summary.Partition`). Only noisy values; the digests are
  keyed, so nobody without the key can test a guess about the data.
* **A later release reads only what changed** (``since=SUMMARY``, ``--since``):
  a file whose name, layout and stamp match a kept partition is not read; its
  kept sums are used. Every other file is read: a new one, or one whose footer,
  size or modification time changed. A re-read file whose content did not
  change reproduces its kept sums exactly (same key, same content) and costs
  nothing; a changed one gets fresh noise and is charged.
* **The totals are the exact sum of the partitions' sums, rounded once**
  (:func:`~ldp_dask.summary.sum_partitions`), so a release built from kept
  sums is bit-identical to one that read every file with the same key.
* **The ledger charges partitions, not nights** (:class:`~ldp_dask.ledger.Part`):
  each file read is charged on its own location unless it reproduces a
  recorded partition, and with ε per row a row pays only for the releases
  that included it with fresh noise.

Summaries of disjoint data merge (:func:`merge`), and a window of the last days
of a hive-partitioned table (``date=2026-11-23/``) is a selection of kept
partitions (:mod:`ldp_dask.windows`): neither reads data or spends ε.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._validation import LdpDaskError
from .ledger import ROW_UNIT, Part, overlaps
from .locations import file_identity
from .noise import Secret, keyed_digest
from .policy import warn
from .source import Dataset, Piece
from .summary import Partition, Summary
from .table_nights import first_night, table_night
from .windows import parse_window, rebuilt, window_of

__all__ = ["FilePlan", "PartitionPlan", "plan_partitions", "tonight_dataset", "night_partition", "kept_nights",
           "merge", "merge_summaries", "params_following_n", "follows_n"]


@dataclass(frozen=True)
class FilePlan:
    """A file of the source as a partition: its pieces, the row groups each task reads, its keyed stamp."""

    path: str
    name: str
    pieces: tuple[Piece, ...]
    layout: tuple[tuple[int, ...], ...]
    stamp: str = ""
    #: where its rows lie, as the ledger compares locations, and its ledger part key
    root: str = ""
    key: str = ""
    #: a keyed digest of its footer alone (:attr:`ldp_dask.summary.Partition.identity`)
    identity: str = ""

    @property
    def rows(self) -> int:
        return sum(p.num_rows for p in self.pieces)

    def task_names(self) -> list[str]:
        """The names the file's tasks are keyed by: its location and the task's number in it."""
        return [f"{self.root}#{j}" for j in range(len(self.layout))]


@dataclass(frozen=True)
class PartitionPlan:
    """What a partitioned release will do, decided before any row is read.

    Attributes
    ----------
    context : dict
        The public context its keys are derived from (column, channel and parameters, mode, clipping, nulls).
    context_id : str
        A keyed digest of the context: a kept partition is reused only by a release with the same one.
    files : tuple of FilePlan
        Every file, in the plan's order.
    reused : dict of str to Partition
        The files whose kept sums are used without reading them, by relative name.
    parts : tuple of Part
        What the ledger is asked to charge: one part per file that is read; with a privacy unit one part for all
        of them (the night: its persons bounded once).
    changed : tuple of str
        The files a kept partition of ``since`` had, that changed since (read again, unless skipped: then reused).
    night : str, optional
        With a privacy unit, the ledger part key of the files read together tonight (None when none is read).
    """

    context: dict[str, Any]
    context_id: str
    files: tuple[FilePlan, ...]
    reused: dict[str, Partition]
    parts: tuple[Part, ...]
    changed: tuple[str, ...] = ()
    night: str | None = None
    #: a table's night (:mod:`ldp_dask.table_nights`): files not read because kept partitions hold their rows,
    #: those partitions, and what the summary records of the table
    covered: frozenset[str] = frozenset()
    carried: tuple[Partition, ...] = ()
    table: dict[str, Any] | None = None
    #: lineage parts (each charged where a re-read file's rows came from), with the file whose tag they take
    lineage: tuple[tuple[str, str], ...] = ()

    @property
    def to_read(self) -> tuple[FilePlan, ...]:
        return tuple(f for f in self.files if f.name not in self.reused and f.name not in self.covered)

    def kept(self, read: Mapping[str, Partition]) -> tuple[Partition, ...]:
        """The summary's partitions: each file's, read tonight (``read``, by name) or reused, then the carried
        ones, each once."""
        out: dict[int, Partition] = {}  # by identity: a night's partition serves each of its files
        for p in [*(read.get(f.name) or self.reused.get(f.name) for f in self.files if f.name not in self.covered),
                  *self.carried]:
            if p is not None:
                out.setdefault(id(p), p)
        return tuple(out.values())

    def with_table(self, dataset: Dataset) -> Dataset:
        """``dataset`` with what its summaries record of its table tonight (groups, lineage, files, followed)."""
        if self.table is None or dataset.table is None:
            return dataset
        return dataclasses.replace(dataset, table={**dataset.table, **self.table})

    def part_tags(self, partitions: Sequence[Partition]) -> dict[str, str]:
        """The content tags of the partitions read, by their ledger part key."""
        tags = {p.path: p.tag for p in partitions}
        if self.night is not None:  # one partition for the night's files, named by its first file
            first = self.to_read[0].name
            return {self.night: tags[first]} if first in tags else {}
        by_file = {f.name: f.key for f in self.to_read}
        out = {f.key: tags[f.name] for f in self.to_read if f.name in tags}
        out.update((key, out[by_file[name]]) for key, name in self.lineage if by_file.get(name) in out)
        return out


def plan_partitions(dataset: Dataset, channel: Any, mode: str, clip: bool, secret: Secret, epsilon: float,
                    scope: str = "local", since: Summary | None = None, skip_changed: bool = False,
                    k: int = 1, rows_kept: bool = True) -> PartitionPlan:
    """Split ``dataset`` (planned with ``by_file``) into file partitions, and decide which kept ones to reuse.

    ``rows_kept=False``: a kept partition holds some of its file's rows (a plan's public group, or its share of a
    row split), so its rows are not compared with the file's; the keyed stamp still covers the file's footer.

    Raises :class:`~ldp_dask.LdpDaskError` when ``since`` cannot be extended
    by this release: another key, channel, parameters, column or null policy,
    or a summary that is not partitioned or not verified under the key.
    """
    from ._io import resolve_root

    context = {"v": 1, "partitioned": 1, "column": dataset.column, "channel": channel.name,
               "params": channel.params(), "mode": mode, "clip": bool(clip),
               "nulls": None if dataset.fill is None else repr(dataset.fill)}
    if dataset.unit is not None:  # (absent per row: the contexts of per-row series stay what they were)
        context.update(unit=dataset.unit, k=int(k))
    context_id = keyed_digest(secret, "partition-context", json.dumps(context, sort_keys=True, default=str).encode())
    stamps = dataset.footer_statistics.stamps if dataset.footer_statistics is not None else {}
    files: list[FilePlan] = []
    for start, stop in dataset.tasks:  # with by_file, a task never crosses files
        path = dataset.pieces[start].path
        assert path is not None
        groups = tuple(g for p in dataset.pieces[start:stop] for g in p.row_groups)
        if files and files[-1].path == path:
            last = files[-1]
            files[-1] = dataclasses.replace(last, pieces=last.pieces + dataset.pieces[start:stop],
                                            layout=last.layout + (groups,))
            continue
        name = dataset.relative(path)
        material = stamps.get(path)
        if material is None:  # pragma: no cover - every planned Parquet file has a footer stamp
            raise LdpDaskError(f"no footer stamp for {path!r}: plan the dataset again")
        root = resolve_root(dataset.fs.unstrip_protocol(path))
        stamp = keyed_digest(secret, "partition-stamp", context_id.encode(), root.encode(), material)
        facts = dataset.footer_statistics.facts.get(path) if dataset.footer_statistics is not None else None
        identity = file_identity(secret, facts)
        files.append(FilePlan(path, name, dataset.pieces[start:stop], (groups,), stamp, root, identity=identity))
    release = json.dumps([scope, channel.name, channel.params(), secret.key_id, context_id, dataset.unit or ROW_UNIT],
                         sort_keys=True, default=str)
    files = [dataclasses.replace(f, key=hashlib.sha256(json.dumps([f.root, [list(t) for t in f.layout], release])
                                                       .encode()).hexdigest()) for f in files]
    reused: dict[str, Partition] = {}
    changed: list[str] = []
    table = None
    if since is not None:
        _check_since(since, dataset, channel, secret, context_id)
        if dataset.table is not None:  # a table's night: its log decides what it rewrote or changed
            table = table_night(since, dataset.table, dataset.fs, files, skip_changed)
            since = dataclasses.replace(since, partitions=tuple(p for p in since.partitions
                                                                if p.path not in table.handled))
    elif dataset.table is not None:
        table = first_night(files)
    rest = files if table is None else [f for f in files if f.name not in table.covered]
    if since is not None and dataset.unit is not None:
        reused, changed = _reused_nights(since, rest, skip_changed)
    elif since is not None:
        base = str(since.metadata.get("root", "")).rstrip("/")
        kept = {f"{base}/{p.path}": p for p in since.partitions}
        for f in rest:
            p = kept.get(f.root)
            if p is None:
                continue
            # with a privacy unit a partition keeps its reports (k per person), not its rows: the stamp covers those
            if p.stamp == f.stamp and p.layout == f.layout and (dataset.unit is not None or not rows_kept
                                                                 or p.rows == f.rows):
                reused[f.name] = p
            else:
                changed.append(f.name)
        if changed and skip_changed:
            warn(f"{len(changed)} file(s) changed since the --since summary and are not released again "
                 f"(--skip-changed): {', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}; their earlier "
                 "sums are kept")
            for name in changed:
                reused[name] = kept[next(f.root for f in files if f.name == name)]
    extra: dict[str, Any] = {}
    if table is not None:
        changed = [*table.changed, *changed]
        extra = dict(covered=table.covered, carried=table.carried, table=table.metadata)
    new = [f for f in rest if f.name not in reused]
    if dataset.unit is not None:  # tonight's files bounded together: one part, ε per person once
        night = hashlib.sha256(json.dumps([[f.root, [list(t) for t in f.layout]] for f in new] + [release])
                               .encode()).hexdigest() if new else None
        tonight: tuple[Part, ...] = (Part(dataset.root, night, float(epsilon)),) if night is not None else ()
        return PartitionPlan(context, context_id, tuple(files), reused, tonight, tuple(changed), night, **extra)
    parts = [Part(f.root, f.key, float(epsilon)) for f in new]
    lineage: list[tuple[str, str]] = []
    if table is not None and table.origins:  # re-read rows pay again where they came from (table_nights)
        base = str(dataset.root).rstrip("/")
        for f in new:
            for origin in table.origins.get(f.name, ()):
                key = hashlib.sha256(json.dumps([f.key, "lineage", origin]).encode()).hexdigest()
                parts.append(Part(f"{base}/{origin}", key, float(epsilon)))
                lineage.append((key, f.name))
    return PartitionPlan(context, context_id, tuple(files), reused, tuple(parts), tuple(changed),
                         lineage=tuple(lineage), **extra)


def tonight_dataset(dataset: Dataset, plan_: PartitionPlan) -> Dataset:
    """With a privacy unit, the files read tonight as one dataset whose persons are bounded together: its pieces
    renumbered, its fingerprint (the noise keys' context) naming the files' locations and layouts (one file:
    exactly as a partition of one file always was), so a night re-run on unchanged files reproduces its sums."""
    from .dataset import _fingerprint

    tonight = plan_.to_read
    pieces = tuple(dataclasses.replace(p, index=i) for i, p in enumerate(q for f in tonight for q in f.pieces))
    one = tonight[0]
    shape: dict[str, Any] = ({"partition": one.root, "layout": [list(t) for t in one.layout],
                              "context": plan_.context_id} if len(tonight) == 1 else
                             {"night": [[f.root, [list(t) for t in f.layout]] for f in tonight],
                              "context": plan_.context_id})
    return dataclasses.replace(dataset, pieces=pieces, n=sum(f.rows for f in tonight), fingerprint=_fingerprint(shape))


def night_partition(plan_: PartitionPlan, night: Summary, secret: Secret) -> Partition:
    """The partition a privacy-unit night keeps: one file's, or, for several files read together, one partition
    naming them all (its members), stamped by their stamps together."""
    from .summary_format import Member

    tonight = plan_.to_read
    one = tonight[0]
    tag = night.content_tag or "0" * 64
    if len(tonight) == 1:
        return Partition(one.name, night.n, one.layout, one.stamp, tag, night.sums, one.identity)
    stamp = keyed_digest(secret, "night-stamp", *(f.stamp.encode() for f in tonight))
    return Partition(one.name, night.n, (), stamp, tag, night.sums, "",
                     tuple(Member(f.name, f.rows, f.layout, f.stamp, f.identity) for f in tonight))


def kept_nights(plan_: PartitionPlan, new: Partition | None) -> list[Partition]:
    """A privacy-unit summary's partitions: tonight's and the reused nights', in the files' order, each once."""
    return list(plan_.kept({f.name: new for f in plan_.to_read} if new is not None else {}))


def _reused_nights(since: Summary, files: Sequence[FilePlan],
                   skip_changed: bool) -> tuple[dict[str, Partition], list[str]]:
    """With a privacy unit, which kept partitions (each a night's files, their persons bounded together) are
    reused: one whose every file is still there with the same stamp and layout. Otherwise its files still there
    are read again, with tonight's new ones (or, with ``skip_changed``, its sums are kept)."""
    from .summary_format import Member

    base = str(since.metadata.get("root", "")).rstrip("/")
    by_root = {f.root: f for f in files}
    reused: dict[str, Partition] = {}
    changed: list[str] = []
    for p in since.partitions:
        members = p.members or (Member(p.path, p.rows, p.layout, p.stamp, p.identity),)  # a partition of one file
        now = [by_root.get(f"{base}/{m.path}") for m in members]
        present = [f for f in now if f is not None]
        if all(f is not None and f.stamp == m.stamp and f.layout == m.layout for f, m in zip(now, members)):
            reused.update((f.name, p) for f in present)
            continue
        changed += [f.name for f in present]
        if skip_changed:
            reused.update((f.name, p) for f in present)
    if changed and skip_changed:
        warn(f"{len(changed)} file(s) changed since the --since summary and are not released again "
             f"(--skip-changed): {', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}; their earlier "
             "sums are kept")
    return reused, changed


def _check_since(since: Summary, dataset: Dataset, channel: Any, secret: Secret, context_id: str) -> None:
    """Refuse a ``since`` summary this release cannot extend, naming what differs."""
    meta = since.metadata
    where = "the --since summary"
    if not since.partitions:
        raise LdpDaskError(f"{where} keeps no partitions: it was not a partitioned release (release it with "
                           "--incremental, or incremental=True, to start a series)")
    if meta.get("key_id") != secret.key_id:
        raise LdpDaskError(f"{where} was released under key id {meta.get('key_id')}; this run's key is "
                           f"{secret.key_id}. Extend a series with the key that started it")
    if since.integrity != "verified" and since.integrity != "released here":
        raise LdpDaskError(f"{where} is {since.integrity}; its kept sums are reused only when its MAC matches "
                           "under the release key")
    if since.channel.name != channel.name or since.channel.params() != channel.params():
        raise LdpDaskError(f"{where} was released with {since.channel!r}; this release uses {channel!r}. Kept sums "
                           "are reused only by the same channel and parameters (parameters chosen from n, such as "
                           "bins='auto', change as the table grows: fix them for a series)")
    if meta.get("column") != dataset.column:
        raise LdpDaskError(f"{where} released column {meta.get('column')!r}, not {dataset.column!r}")
    if meta.get("partition_context") != context_id:
        raise LdpDaskError(f"{where} was released with another mode, clipping, null policy or privacy unit than "
                           "this release; its kept sums cannot be reused")


# --- merging summaries of disjoint data ------------------------------------------------------------------------
def _locations(s: Summary) -> list[str]:
    """Where a summary's rows lie: its partitions' files, else its whole root."""
    root = str(s.metadata.get("root") or "")
    if not root:
        raise LdpDaskError(f"a summary of {s.metadata.get('source')!r} does not record where its rows lie (it was "
                           "released by an earlier ldp_dask); it cannot be merged safely")
    if not s.partitions:
        return [root]
    return [f"{root.rstrip('/')}/{p.path}" for p in s.partitions]


def merge(summaries: Sequence[Summary]) -> Summary:
    """Combine summaries of disjoint data released with the same channel and parameters (no data read, no ε).

    The totals add up exactly (each input's totals, or, when every input
    keeps its partitions, the exact sum of all partitions rounded once, so
    merging night summaries gives what one release over their files gives).
    Refused with one line: mismatched channels, parameters, columns or
    privacy units; a person-level privacy unit (a person may have rows in
    both); overlapping data (a file or directory in two inputs).
    """
    from . import exactsum

    if len(summaries) < 2:
        raise LdpDaskError(f"merge needs at least two summaries. Got {len(summaries)}.")
    first = summaries[0]
    for i, s in enumerate(summaries[1:], 2):
        if s.channel.name != first.channel.name or s.channel.params() != first.channel.params():
            raise LdpDaskError(f"summary {i} was released with {s.channel!r}, summary 1 with {first.channel!r}: "
                               "only releases of the same channel and parameters merge")
        if s.metadata.get("column") != first.metadata.get("column"):
            raise LdpDaskError(f"summary {i} releases column {s.metadata.get('column')!r}, summary 1 "
                               f"{first.metadata.get('column')!r}")
        if s.metadata.get("mode", "summary") != first.metadata.get("mode", "summary"):
            raise LdpDaskError(f"summary {i} was released in {s.metadata.get('mode')!r} mode, summary 1 in "
                               f"{first.metadata.get('mode')!r}")
    for i, s in enumerate(summaries, 1):
        if s.privacy_unit != ROW_UNIT:
            raise LdpDaskError(f"summary {i} counts ε per {s.privacy_unit!r}: a person may have rows in several "
                               "summaries, so merging them would spend more than either says; merge per-row "
                               "releases only")
    seen: list[tuple[str, int]] = []
    for i, s in enumerate(summaries, 1):
        for loc in _locations(s):
            clash = next(((other, j) for other, j in seen if overlaps(other, loc)), None)
            if clash is not None:
                raise LdpDaskError(f"summaries {clash[1]} and {i} overlap: both hold rows of {min(loc, clash[0])!r}; "
                                   "only summaries of disjoint data merge (the same rows twice would be counted "
                                   "twice)")
        seen += [(loc, i) for loc in _locations(s)]
    # the same rows under two names (a hard link, a byte copy, a root edited in an unsigned summary): the files'
    # keyed identities meet, whatever their paths (comparable under one key)
    held: dict[tuple[str, str], int] = {}
    for i, s in enumerate(summaries, 1):
        kept = [(p.identity, p.path) for p in s.partitions] if s.partitions else \
            [(x, "a file") for x in s.metadata.get("file_identities") or () if isinstance(x, str)]
        for identity, what in kept:
            if not identity:
                continue
            j = held.setdefault((str(s.metadata.get("key_id")), identity), i)
            if j != i:
                raise LdpDaskError(f"summaries {j} and {i} overlap: both hold a file with the same content "
                                   f"({what!r} in summary {i}: a link or a copy of a file of summary {j}); only "
                                   "summaries of disjoint data merge (the same rows twice would be counted twice)")
    key_ids = sorted({str(s.metadata.get("key_id")) for s in summaries})
    roots = [str(s.metadata["root"]).rstrip("/") for s in summaries]
    root = _common_root(roots)
    meta: dict[str, Any] = {k: v for k, v in first.metadata.items()
                            if k in ("column", "mode", "clip", "nulls", "privacy_unit", "max_contributions",
                                     "epsilon_per_unit", "partition_context")}
    meta.update(source=" + ".join(str(s.metadata.get("source")) for s in summaries), root=root,
                key_id=key_ids[0] if len(key_ids) == 1 else "several", merged_from=len(summaries),
                key_source=first.metadata.get("key_source") if len(key_ids) == 1 else "several",
                reproducible=all(s.metadata.get("reproducible", False) for s in summaries),
                insecure_seed=any(s.metadata.get("insecure_seed", False) for s in summaries),
                partitions=None if any(s.metadata.get("partitions") is None for s in summaries)
                else sum(int(s.metadata["partitions"]) for s in summaries))
    if len(key_ids) > 1 or len({s.metadata.get("partition_context") for s in summaries}) > 1:
        meta.pop("partition_context", None)
    if len(key_ids) == 1:  # comparable under one key: a later merge still sees every file
        meta["file_identities"] = sorted({x for s in summaries for x in s.metadata.get("file_identities") or ()})
    integrity = next((s.integrity for s in summaries if not s.verified), "released here")
    if all(s.partitions for s in summaries):
        parts = tuple(dataclasses.replace(p, path=_under(f"{r}/{p.path}", root))
                      for s, r in zip(summaries, roots) for p in s.partitions)
        return dataclasses.replace(rebuilt(first, parts, meta), integrity=integrity)
    sums = {k: exactsum.to_float(exactsum.add(*(exactsum.from_float(s.sums[k]) for s in summaries)))
            for k in first.sums}
    return Summary(first.channel, sum(s.n for s in summaries), sums, meta, integrity=integrity)


def _common_root(roots: Sequence[str]) -> str:
    parts = [r.split("/") for r in roots]
    common = []
    for segs in zip(*parts):
        if len(set(segs)) != 1:
            break
        common.append(segs[0])
    return "/".join(common)


def _under(path: str, root: str) -> str:
    return path[len(root) + 1:] if root and path.startswith(root + "/") else path


def merge_summaries(summaries: Sequence[Any], *, out: Any = None, window: str | None = None, key: Any = None,
                    overwrite: bool = False, storage_options: Mapping[str, Any] | None = None,
                    allow_unverified: bool = False) -> Summary:
    """Merge summaries of disjoint data (:func:`merge`), or take a window of kept partitions (:func:`window`).

    Post-processing of released values: no data is read and no ε is spent.

    Parameters
    ----------
    summaries : sequence of paths or Summary
        Two or more summaries to merge; one is enough with ``window``.
    out : path or URL, optional
        Write the result there (atomically; an input is never replaced).
    window : str, optional
        ``"30d"``: keep only the partitions of the last 30 days (hive
        ``date=YYYY-MM-DD/`` directories), ending at the newest one.
    key : secret, path or Secret, optional
        The release key, to check the inputs' MACs and sign the result (else
        the environment's key). Without a key that verifies every input, the
        result is written without a MAC and marked not verified.
    overwrite : bool
        Replace an existing output.
    allow_unverified : bool
        Merge inputs that the key at hand cannot verify (no MAC, another key
        id; :func:`ldp_dask.read_summary`); refused otherwise.

    Raises
    ------
    LdpDaskError
        Mismatched channels, parameters, columns or privacy units; overlapping data; a window over a summary
        without kept partitions or over files without a date directory.
    """
    import os

    from .release import publish
    from .summary import _key_at_hand, read_summary, summary_mac_key

    sec = _key_at_hand(key)
    given = list(summaries)
    if not given or (len(given) < 2 and window is None):
        raise LdpDaskError(f"merge needs at least two summaries, or one with a window. Got {len(given)}.")
    read = [read_summary(s, key=sec, allow_unverified=allow_unverified) for s in given]
    result = read[0] if len(read) == 1 else merge(read)
    if window is not None:
        result = window_of(result, parse_window(window))
    signed = (sec is not None and all(s.verified for s in read) and result.metadata.get("key_id") == sec.key_id)
    if out is not None:
        mac = summary_mac_key(sec) if signed else None
        inputs = [os.fspath(s) for s in given if not isinstance(s, Summary)]
        publish({"summary": out}, lambda o: o.write("summary", lambda fh: result.write_parquet(fh, mac)),
                overwrite=overwrite, storage_options=storage_options, inputs=inputs)
    return result


#: what a series of partitioned releases needs of its channel, said once for the CLI and the flows
FOLLOWS_N = ("the channel's parameters are chosen from n ({params}) and will change as the table grows, and a "
             "later --since release will then be refused: fix them (e.g. --bins, --levels) for an incremental series")


def params_following_n(build: Any, n: int) -> list[str]:
    """The parameters of ``build(n)`` (a channel built for n rows) that change with n (``["the channel"]`` when the
    channel itself does), or ``[]``."""
    now, later = build(n), build(4 * n)
    if now.name == later.name and now.params() == later.params():
        return []
    return sorted(k for k in set(now.params()) | set(later.params())
                  if now.params().get(k) != later.params().get(k)) or ["the channel"]


def follows_n(build: Any, n: int) -> str | None:
    """The warning :data:`FOLLOWS_N` when ``build(n)`` (a channel built for n rows) changes with n, else None."""
    changed = params_following_n(build, n)
    if not changed:
        return None
    message = FOLLOWS_N.format(params=", ".join(changed))
    warn(message)
    return message
