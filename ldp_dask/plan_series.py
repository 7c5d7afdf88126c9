"""An incremental plan: a nightly series of a plan, each night reading only the files added or changed.

Every statistic of the plan is a partitioned release (:mod:`ldp_dask.partitions`): each file is a partition with
noise of its own, kept in the statistic's summary. A night given ``since`` — the directory of an earlier night's
plan — takes each statistic's channel from that night's summary (the ε split is chosen on the first night and kept:
the sums of different channels cannot be added), plans each statistic's partitions against that night's, and reads
only the files some statistic must read: for a plan they are the same files for every statistic, since they are
decided by the files' stamps. One read of each such file feeds every statistic; the kept sums of the others are
added. Each statistic's summary is then bit-identical to one reading every file.

The ledger charges one part per file read anew, at the plan's total ε per row (every statistic reports every
row: an incremental plan splits ε, never the rows, so a file's partition keeps its rows), on the file's own rows
when the dataset is declared append-only (docs/privacy.md).

Not offered yet: public groups in an incremental plan (each group would be a partitioned release of its own).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from typing import Any

from . import exactsum
from ._validation import InputDataError, LdpDaskError
from .channels.categorical import OTHER
from .engine import run, task_rows, tasks_of
from .ledger import BudgetExceeded, Part
from .noise import TAG_MODULUS, Secret, named_base_keys
from .options import RunOptions
from .partitions import PartitionPlan, plan_partitions
from .plan_results import PlanRelease
from .plan_tasks import Grouping, PlanByFile, PlanJob, combine_plan_files, plan_file_sums
from .plans import Plan, check
from .privacy import ROW_UNIT, epsilon_per_unit
from .release import Charge, release
from .source import Dataset
from .summary import Partition, Summary, read_summary, sum_partitions

__all__ = ["release_series", "previous_channels"]


def previous_channels(plan_: Plan, since: str | os.PathLike[str], secret: Secret,
                      summary_name: Callable[[str], str]) -> dict[str, Summary]:
    """The earlier night's summary of every statistic (verified under the key), by label: a statistic missing from
    it, or a night that split the rows, cannot be extended."""
    import fsspec

    out = {}
    base = os.fspath(since).rstrip("/")
    fs, _ = fsspec.core.url_to_fs(base)
    for s in plan_.statistics:
        path = f"{base}/{summary_name(s.label)}"
        if not fs.exists(fsspec.core.url_to_fs(path)[1]):
            raise LdpDaskError(f"the earlier plan in {base!r} has no summary of statistic {s.label!r} ({path}): a "
                               "series extends the plan it started with; a changed plan starts a new series "
                               "(run it without --since)")
        out[s.label] = read_summary(path, key=secret)
        if (out[s.label].metadata.get("plan") or {}).get("design") != "split-epsilon":
            raise LdpDaskError(f"{path} was not released by an incremental plan (it split the rows, or was no plan)")
    return out


def release_series(plan_: Plan, datasets: list[Dataset], labels: tuple[Any, ...], opts: RunOptions, secret: Secret,
                   epsilon: float,
                   since: str | os.PathLike[str] | None, skip_changed: bool, targets: dict[str, str | None],
                   write: Any, overwrite: bool,
                   finish: Callable[[list[Summary], list[float], float], PlanRelease],
                   summary_name: Callable[[str], str]) -> PlanRelease:
    """One night of an incremental plan (module docstring): ``labels`` are the readers of the group columns (in the
    order the statistics name them), ``finish(summaries, ε per statistic, ε charged)`` post-processes the summaries
    into the plan's result; ``targets`` and ``write`` are the plan's outputs."""
    from .pipeline import _metadata

    if any(s.group is not None and s.group[2] for s in plan_.statistics):
        raise LdpDaskError("an incremental plan with a public group is not offered yet (each group would be a "
                           "series of its own); release it without --incremental, or make the group private")
    if datasets[0].kind != "parquet":
        raise LdpDaskError("an incremental plan needs a Parquet source: its files are the partitions")
    previous = previous_channels(plan_, since, secret, summary_name) if since is not None else None
    if previous is not None:
        channels = tuple(previous[s.label].channel for s in plan_.statistics)
    else:
        rows = {s.column: d.n for s, d in zip(plan_.statistics, datasets)}
        channels = tuple(p.channel for p in check(plan_, rows, epsilon, "split-epsilon").statistics)
    spent = [epsilon_per_unit(ch, 1) for ch in channels]
    charged = sum(spent)
    if previous is not None and abs(charged - epsilon) > 1e-9 * max(1.0, epsilon):
        raise LdpDaskError(f"the series in {str(since)!r} spends ε {charged:g} per row a night, split among its "
                           f"statistics on its first night; --epsilon {epsilon:g} would need another split, so it "
                           "starts a new series (run it without --since)")
    files = [dataclasses.replace(d, by_file=True) for d in datasets]
    plans = [plan_partitions(d, ch, "summary", opts.clip, secret, charged,
                             since=None if previous is None else previous[s.label], skip_changed=skip_changed)
             for s, d, ch in zip(plan_.statistics, files, channels)]
    reading = plans[0].to_read
    if any(tuple(f.name for f in p.to_read) != tuple(f.name for f in reading) for p in plans[1:]):
        raise LdpDaskError("the statistics of the earlier plan kept different files: release the plan without "
                           "--since to start a new series")
    parts = tuple(Part(f.root, _file_key(plans, f.name), charged) for f in reading)
    params = {s.label: {"column": s.column, "channel": ch.name, "params": ch.params(), "epsilon": e}
              for s, ch, e in zip(plan_.statistics, channels, spent)}
    charge = Charge("local", "plan", params, charged, context={"mode": "summary", "design": "split-epsilon",
                                                               "partitioned": [p.context_id for p in plans]},
                    parts=parts)
    base = files[0]
    whole = dataclasses.replace(base, column=",".join(dict.fromkeys(s.column for s in plan_.statistics)))
    groupings = _groupings(plan_, len(datasets))

    def compute(sec: Secret, _: Any) -> PlanRelease:
        summaries = []
        read = _read(plan_, files, labels, channels, plans, sec, opts, groupings)
        for s, d, ch, p, e in zip(plan_.statistics, datasets, channels, plans, spent):
            kept = tuple(read[s.label].get(f.name) or p.reused[f.name] for f in p.files)
            metadata = _metadata(d, sec, "summary", opts, None)
            metadata.update(privacy_unit=ROW_UNIT, max_contributions=1, epsilon_per_unit=e,
                            partition_context=p.context_id, partitions_read=len(read[s.label]),
                            partitions_reused=len(kept) - len(read[s.label]),
                            plan={"statistic": s.label, "target": s.target, "design": "split-epsilon",
                                  "share_of_rows": None, "statistics": len(channels), "epsilon_charged": charged})
            if s.group is not None:
                metadata["group"] = {"column": s.group[0], "kind": "private", "labels": [*s.group[1], OTHER]}
            tag = sum(int(x.tag, 16) for x in kept) % TAG_MODULUS
            summaries.append(Summary(ch, sum(x.rows for x in kept), sum_partitions(kept), metadata,
                                     content_tag=f"{tag:064x}", partitions=kept))
        return finish(summaries, spent, charged)

    def part_tags(result: PlanRelease) -> dict[str, str]:
        out: dict[str, int] = {}
        for p, st in zip(plans, result.statistics):
            assert st.summary is not None
            tags = {x.path: int(x.tag, 16) for x in st.summary.partitions}
            for f in p.to_read:
                key = _file_key(plans, f.name)
                out[key] = (out.get(key, 0) + tags[f.name]) % TAG_MODULUS
        return {k: f"{v:064x}" for k, v in out.items()}

    def content_tag(result: PlanRelease) -> str:
        tags = [int(st.summary.content_tag or "0", 16) for st in result.statistics if st.summary is not None]
        return f"{sum(tags) % TAG_MODULUS:064x}"

    try:
        return release(whole, charge, compute, opts, targets=targets, write=write, overwrite=overwrite,
                       content_tag=content_tag, part_tags=part_tags).attach()
    except BudgetExceeded as exc:
        changed = plans[0].changed
        if not changed:
            raise
        raise BudgetExceeded(f"{exc}. Of the files it would release, {', '.join(changed[:3])} changed since the "
                             "--since plan (a correction?) and would be released again; --skip-changed releases "
                             "the new files only") from None


def _file_key(plans: list[PartitionPlan], name: str) -> str:
    """A file's ledger part key for the plan: its statistics' part keys together."""
    keys = [next(f.key for f in p.files if f.name == name) for p in plans]
    return hashlib.sha256(json.dumps(keys).encode()).hexdigest()


def _groupings(plan_: Plan, first: int) -> tuple[Grouping | None, ...]:
    columns = list(dict.fromkeys(s.group[0] for s in plan_.statistics if s.group is not None))
    return tuple(None if s.group is None else Grouping(first + columns.index(s.group[0]), s.group[1], False)
                 for s in plan_.statistics)


def _read(plan_: Plan, files: list[Dataset], labels: tuple[Any, ...], channels: tuple[Any, ...],
          plans: list[PartitionPlan], sec: Secret, opts: RunOptions,
          groupings: tuple[Grouping | None, ...]) -> dict[str, dict[str, Partition]]:
    """Read the files the night must read, once for every statistic: each statistic's partition of each file,
    keyed by the file's location (as a single partitioned release keys it)."""
    reading = plans[0].to_read
    out: dict[str, dict[str, Partition]] = {s.label: {} for s in plan_.statistics}
    if not reading:
        return out
    pieces = tuple(dataclasses.replace(p, index=i) for i, p in enumerate(p for f in reading for p in f.pieces))
    sub = dataclasses.replace(files[0], pieces=pieces, n=sum(p.num_rows for p in pieces))
    tasks = tasks_of(sub)
    names = [name for f in reading for name in f.task_names()]
    if len(names) != len(tasks):  # pragma: no cover - a planning bug
        raise RuntimeError(f"{len(tasks)} tasks for {len(names)} planned")
    by_path = {f.path: f for f in reading}
    owners = tuple(by_path[pieces[t.start].path or ""].name for t in tasks)
    keys = tuple(tuple(named_base_keys(sec, p.context, names)) for p in plans)
    readers = (*(d.reader for d in files), *labels)
    job = PlanJob(readers, pieces, channels, keys, opts.clip, None, b"", groupings)
    acc = run(tasks, plan_file_sums, PlanByFile(job, owners), combine_plan_files, opts,
              rows=[task_rows(pieces, t) for t in tasks], desc=f"plan of {len(channels)}, {len(reading)} files")
    for f in reading:
        per = acc["files"][f.name]["plan"]
        for s, p, a in zip(plan_.statistics, plans, per):
            if a["n"] != f.rows:  # pragma: no cover - a planning bug, not user input
                raise InputDataError(f"processed {a['n']} rows of {f.name}, planned {f.rows}")
            stamp = next(x.stamp for x in p.files if x.name == f.name)
            out[s.label][f.name] = Partition(f.name, f.rows, f.layout, stamp, f"{a['tag']:064x}",
                                             {k: exactsum.to_float(v) for k, v in a["stats"].items()}, f.identity)
    return out

