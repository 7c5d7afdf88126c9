"""An incremental plan: a nightly series of a plan, each night reading only the files added or changed.

Every statistic of the plan — and every public group of a grouped one — is a partitioned release
(:mod:`ldp_dask.partitions`): each file is a partition with noise of its own, kept in the summary. A night given
``since`` — the directory of an earlier night's plan — takes each statistic's channel, the design and the shares of
the rows from that night's summaries (the split is chosen on the first night and kept: the sums of different
channels cannot be added), plans every summary's partitions against that night's, and reads only the files that
must be read: for a plan they are the same files for every statistic, since they are decided by the files' keyed
stamps. One read of each such file feeds every statistic; the kept sums of the others are added. Each summary is
then bit-identical to one reading every file: a row split draws each row's statistic from its file's location and
row groups (never from its place in one night's plan), and a public group's noise from its key.

The ledger charges one part per file read anew, at the plan's ε per row (Σ ε_i splitting ε, max ε_i splitting the
rows), on the file's own rows when the dataset is declared append-only (docs/privacy.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from functools import partial
from typing import Any

from .. import exactsum
from .._validation import InputDataError, LdpDaskError
from ..engine import run, task_rows, tasks_of
from ..ledger import BudgetExceeded, Part
from ..noise import TAG_MODULUS, Secret, named_base_keys
from ..options import RunOptions
from ..partitions import PartitionPlan, plan_partitions
from ..privacy import epsilon_per_unit
from ..release import Charge, release
from ..source import Dataset
from ..summary import Partition, Summary, read_summary, sum_partitions
from ..tasks import ByFile, combine_files, file_sums
from .budget import check
from .model import NOT_CHANNEL, Plan, Statistic
from .results import PlanRelease, cells_of, group_keys, group_metadata, plan_content_tag, statistic_metadata
from .tasks import ASSIGN_BITS, Grouping, PlanJob, combine_plan, plan_sums, row_lots

__all__ = ["release_series", "previous_summaries", "check_unedited", "published_by"]

#: What a night makes of one statistic: its summary, or its public groups' (one per key and "other").
Made = Summary | list[Summary]


def _suffixes(s: Statistic) -> list[str]:
    """The file-name suffixes of a statistic's summaries: one, or one per public group."""
    return [""] if s.group is None or not s.group[2] else [f".{k}" for k in group_keys(s)]


def previous_summaries(plan_: Plan, since: str | os.PathLike[str], secret: Secret,
                       summary_name: Callable[[str], str]) -> dict[str, list[Summary]]:
    """The earlier night's summaries of every statistic (verified under the key), by label, one per public group:
    a statistic or group missing from that night cannot be extended."""
    import fsspec

    out: dict[str, list[Summary]] = {}
    base = os.fspath(since).rstrip("/")
    fs, _ = fsspec.core.url_to_fs(base)
    for s in plan_.statistics:
        out[s.label] = []
        for suffix in _suffixes(s):
            path = f"{base}/{summary_name(s.label + suffix)}"
            if not fs.exists(fsspec.core.url_to_fs(path)[1]):
                raise LdpDaskError(f"the earlier plan in {base!r} has no summary of statistic {s.label + suffix!r} "
                                   f"({path}): a series extends the plan it started with; a changed plan starts a "
                                   "new series (run it without --since)")
            summary = read_summary(path, key=secret)
            if not (summary.metadata.get("plan") or {}).get("design") or not summary.partitions:
                raise LdpDaskError(f"{path} was not released by an incremental plan (run the first night with "
                                   "--incremental)")
            out[s.label].append(summary)
    return out


def _same(a: Any, b: Any) -> bool:
    """Two option values alike (numbers compared as floats, lists item by item)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    return bool(a == b)


def published_by(since: str | os.PathLike[str] | None,
                 previous: dict[str, list[Summary]] | None) -> dict[str, Summary] | None:
    """The earlier night's summaries a night builds on, by where they are (for the ledger's check that it has a
    record of them, :meth:`~ldp_dask.ledger.Ledger.check_published`)."""
    if since is None or previous is None:
        return None
    return {f"{os.fspath(since).rstrip('/')}/{label}#{i}": s for label, got in previous.items()
            for i, s in enumerate(got)}


def check_unedited(plan_: Plan, previous: dict[str, list[Summary]]) -> None:
    """Refuse a plan whose statistic now declares an option its series' first night released otherwise (bins 8 →
    16, a narrower domain, other categories): the night would keep the first night's channel in silence. A changed
    statistic starts a new series, as an added one does."""
    for s in plan_.statistics:
        released = previous[s.label][0].channel.params()
        for key, value in s.options.items():
            if key in released and key not in NOT_CHANNEL and key != "epsilon" and not _same(value, released[key]):
                raise LdpDaskError(f"statistic {s.label!r} now declares {key} = {value!r}; its series released "
                                   f"{key} = {released[key]!r} on its first night. A changed statistic starts a new "
                                   "series (run it without --since)")


def _split(plan_: Plan, datasets: list[Dataset], epsilon: float, design: str | None,
           previous: dict[str, list[Summary]] | None) -> tuple[tuple[Any, ...], str, tuple[int, ...] | None]:
    """The channels, the design and the lots of a row split: the earlier night's, or chosen now."""
    if previous is None:
        checked = check(plan_, {s.column: d.n for s, d in zip(plan_.statistics, datasets)}, epsilon, design)
        channels = tuple(p.channel for p in checked.statistics)
        shares = None if checked.design == "split-epsilon" else \
            [p.rows / max(1, d.n) for p, d in zip(checked.statistics, datasets)]
        return channels, checked.design, None if shares is None else tuple(int(x) for x in row_lots(shares))
    check_unedited(plan_, previous)
    first = [previous[s.label][0] for s in plan_.statistics]
    meta = [x.metadata["plan"] for x in first]
    chosen = meta[0]["design"]
    if design is not None and design != chosen:
        raise LdpDaskError(f"the series started with design {chosen!r}; a night cannot change it (design={design!r} "
                           "starts a new series, without --since)")
    shares = None if chosen == "split-epsilon" else [m["share_of_rows"] for m in meta]
    return (tuple(x.channel for x in first), chosen,
            None if shares is None else tuple(int(x) for x in row_lots(shares)))


def release_series(plan_: Plan, datasets: list[Dataset], labels: tuple[Any, ...], opts: RunOptions, secret: Secret,
                   epsilon: float, design: str | None, since: str | os.PathLike[str] | None, skip_changed: bool,
                   targets: dict[str, str | None], write: Any, overwrite: bool,
                   finish: Callable[[list[Made], list[float], float, str, tuple[float, ...] | None], PlanRelease],
                   summary_name: Callable[[str], str]) -> PlanRelease:
    """One night of an incremental plan (module docstring). ``labels`` are the readers of the group columns (in the
    order the statistics name them); ``finish(made, ε per statistic, ε charged, design, shares)`` post-processes
    each statistic's summary or summaries into the plan's result; ``targets`` and ``write`` are its outputs."""
    from ..pipeline import release_metadata

    if datasets[0].kind != "parquet":
        raise LdpDaskError("an incremental plan needs a Parquet source: its files are the partitions")
    previous = previous_summaries(plan_, since, secret, summary_name) if since is not None else None
    channels, chosen, lots = _split(plan_, datasets, epsilon, design, previous)
    shares = None if lots is None else tuple(x / (1 << ASSIGN_BITS) for x in lots)
    spent = [epsilon_per_unit(ch, 1) for ch in channels]
    charged = sum(spent) if lots is None else max(spent)
    if previous is not None and abs(charged - epsilon) > 1e-9 * max(1.0, epsilon):
        raise LdpDaskError(f"the series in {str(since)!r} spends ε {charged:g} per row a night, split among its "
                           f"statistics on its first night; --epsilon {epsilon:g} would need another split, so it "
                           "starts a new series (run it without --since)")
    files = [dataclasses.replace(d, by_file=True) for d in datasets]
    units = [(i, k) for i, s in enumerate(plan_.statistics)
             for k in ([None] if s.group is None or not s.group[2] else range(len(group_keys(s))))]
    plans = [plan_partitions(files[i], channels[i], "summary", opts.clip, secret, charged,
                             since=None if previous is None else previous[plan_.statistics[i].label][k or 0],
                             skip_changed=skip_changed, rows_kept=lots is None and k is None)
             for i, k in units]
    reading = plans[0].to_read
    if any(tuple(f.name for f in p.to_read) != tuple(f.name for f in reading) for p in plans[1:]):
        raise LdpDaskError("the summaries of the earlier plan kept different files: release the plan without "
                           "--since to start a new series")
    file_keys = _file_keys(plans, [f.name for f in reading])
    by_key = {q.key: q.root for q in plans[0].parts}
    lineage = [(hashlib.sha256(json.dumps([file_keys[name], by_key[key]]).encode()).hexdigest(), by_key[key], name)
               for key, name in plans[0].lineage]  # re-read rows pay where they came from (ldp_dask.table_nights)
    parts = (tuple(Part(f.root, file_keys[f.name], charged) for f in reading)
             + tuple(Part(root, key, charged) for key, root, _ in lineage))
    first = {i: p for p, (i, _) in reversed(list(zip(plans, units)))}
    datasets = [first[i].with_table(d) for i, d in enumerate(datasets)]
    params = {s.label: {"column": s.column, "channel": ch.name, "params": ch.params(), "epsilon": e,
                        **({} if shares is None else {"share": r})}
              for s, ch, e, r in zip(plan_.statistics, channels, spent, shares or [None] * len(spent))}
    charge = Charge("local", "plan", params, charged, context={
        "mode": "summary", "design": chosen, "partitioned": sorted({p.context_id for p in plans})}, parts=parts)
    whole = plans[0].with_table(dataclasses.replace(files[0], column=",".join(dict.fromkeys(
        s.column for s in plan_.statistics))))

    def compute(sec: Secret, _: Any) -> PlanRelease:
        read = _read(plan_, files, labels, channels, lots, units, plans, sec, opts)
        made: list[Made] = []
        for i, (s, d, ch, e) in enumerate(zip(plan_.statistics, datasets, channels, spent)):
            base = statistic_metadata(s, release_metadata(d, sec, "summary", opts, None), ch, e, chosen,
                                      None if shares is None else shares[i], len(channels), charged)
            out = []
            for u, (j, k) in enumerate(units):
                if j != i:
                    continue
                p = plans[u]
                kept = p.kept(read[u])
                meta = dict(base) if k is None else group_metadata(base, group_keys(s)[k])
                meta.update(partition_context=p.context_id, partitions_read=len(read[u]),
                            partitions_reused=len(kept) - len(read[u]))
                tag = sum(int(x.tag, 16) for x in kept) % TAG_MODULUS
                out.append(Summary(ch, sum(x.rows for x in kept), sum_partitions(kept), meta,
                                   content_tag=f"{tag:064x}", partitions=kept))
            made.append(out if s.group is not None and s.group[2] else out[0])
        return finish(made, spent, charged, chosen, shares)

    def part_tags(result: PlanRelease) -> dict[str, str]:
        summaries = [x for st in result.statistics for _, x in st.summaries]  # in the units' order
        out: dict[str, int] = {}
        for p, summary in zip(plans, summaries):
            tags = {x.path: int(x.tag, 16) for x in summary.partitions}
            for f in p.to_read:
                key = file_keys[f.name]
                out[key] = (out.get(key, 0) + tags[f.name]) % TAG_MODULUS
        out.update((key, out[file_keys[name]]) for key, _, name in lineage if file_keys[name] in out)
        return {k: f"{v:064x}" for k, v in out.items()}

    try:
        return release(whole, charge, compute, opts, targets=targets, write=write, overwrite=overwrite,
                       content_tag=plan_content_tag, part_tags=part_tags, central=PlanRelease.central_events,
                       published=published_by(since, previous)).attach()
    except BudgetExceeded as exc:
        changed = plans[0].changed
        if not changed:
            raise
        raise BudgetExceeded(f"{exc}. Of the files it would release, {', '.join(changed[:3])} changed since the "
                             "--since plan (a correction?) and would be released again; --skip-changed releases "
                             "the new files only") from None


def _file_keys(plans: list[PartitionPlan], names: list[str]) -> dict[str, str]:
    """Each file's ledger part key for the plan: its summaries' part keys together (one lookup per file)."""
    by_plan = [{f.name: f.key for f in p.files} for p in plans]
    return {name: hashlib.sha256(json.dumps([keys[name] for keys in by_plan]).encode()).hexdigest()
            for name in names}


def _read(plan_: Plan, files: list[Dataset], labels: tuple[Any, ...], channels: tuple[Any, ...],
          lots: tuple[int, ...] | None, units: list[tuple[int, int | None]], plans: list[PartitionPlan], sec: Secret,
          opts: RunOptions) -> list[dict[str, Partition]]:
    """Read the files the night must read, once for every statistic: each summary's partition of each file, keyed
    by the file's location (as a single partitioned release keys it)."""
    reading = plans[0].to_read
    out: list[dict[str, Partition]] = [{} for _ in units]
    if not reading:
        return out
    pieces = tuple(dataclasses.replace(p, index=i) for i, p in enumerate(p for f in reading for p in f.pieces))
    places = tuple(f"{f.root}#{','.join(map(str, p.row_groups))}" for f in reading for p in f.pieces)
    sub = dataclasses.replace(files[0], pieces=pieces, n=sum(p.num_rows for p in pieces))
    tasks = tasks_of(sub)
    names = [name for f in reading for name in f.task_names()]
    if len(names) != len(tasks):  # pragma: no cover - a planning bug
        raise RuntimeError(f"{len(tasks)} tasks for {len(names)} planned")
    by_path = {f.path: f for f in reading}
    owners = tuple(by_path[pieces[t.start].path or ""].name for t in tasks)
    first_unit = {i: u for u, (i, _) in reversed(list(enumerate(units)))}
    keys = tuple(tuple(named_base_keys(sec, plans[first_unit[i]].context, names)) for i in range(len(channels)))
    assign = named_base_keys(sec, {"plan": [s.label for s in plan_.statistics], "lots": lots}, ["assign"])[0]
    columns = list(dict.fromkeys(s.group[0] for s in plan_.statistics if s.group is not None))
    groupings = tuple(None if s.group is None else Grouping(len(files) + columns.index(s.group[0]), s.group[1],
                                                            s.group[2], cells_of(s, ch))
                      for s, ch in zip(plan_.statistics, channels))
    job = PlanJob((*(d.reader for d in files), *labels), pieces, channels, keys, opts.clip, lots, assign, groupings,
                  places)
    acc = run(tasks, file_sums, ByFile(job, owners, plan_sums), partial(combine_files, combine=combine_plan), opts,
              rows=[task_rows(pieces, t) for t in tasks], desc=f"plan of {len(channels)}, {len(reading)} files")
    stamps = [{x.name: x.stamp for x in p.files} for p in plans]
    for f in reading:
        per = acc["files"][f.name]["plan"]
        for u, (i, k) in enumerate(units):
            a = per[i] if k is None else per[i]["groups"][k]
            if lots is None and k is None and a["n"] != f.rows:  # pragma: no cover - a planning bug
                raise InputDataError(f"processed {a['n']} rows of {f.name}, planned {f.rows}")
            out[u][f.name] = Partition(f.name, int(a["n"]), f.layout, stamps[u][f.name], f"{a['tag']:064x}",
                                       {k2: exactsum.to_float(v) for k2, v in a["stats"].items()}, f.identity)
    return out
