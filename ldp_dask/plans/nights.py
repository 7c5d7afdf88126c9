"""An incremental plan with a privacy unit: a night, not a file.

Each night of the series reads the files added or changed since the earlier night (``since``), and bounds the
persons of **all of them together, once for the whole plan** (:func:`ldp_dask.persons.map_units` over tonight's
files and every column the plan reads): a person keeps at most k rows tonight, each reporting every statistic at
ε_i/k (split ε, Σ ε_i = ε), wherever and in however many files their rows lie. So a night costs ε per person, and
the ledger charges it once: one part naming tonight's files (:func:`ldp_dask.partitions.plan_partitions`).

Every statistic's summary keeps one partition per night (:func:`ldp_dask.partitions.night_partition`): the night's
noisy sums, naming its files; a later night reuses the kept nights whose files did not change and reads the rest
again with its new files. A night's noise is keyed by its files' locations and layouts, so a night re-run on
unchanged files reproduces its sums (and is not charged again).

The same persons may appear every night: a series of N nights costs up to N·ε per person, as the ledger composes
it, and a summary's central statement treats its nights as the same persons (docs/privacy.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from typing import Any

from .._validation import LdpDaskError
from ..ledger import BudgetExceeded, Part
from ..noise import TAG_MODULUS, Secret
from ..options import RunOptions
from ..partitions import kept_nights, night_partition, plan_partitions, tonight_dataset
from ..policy import warn_cells
from ..privacy import epsilon_per_unit, per_row_channel
from ..release import Charge, release
from ..source import Dataset
from ..summary import Summary, sum_partitions, summary_of
from .bounded import plan_person_sums
from .budget import check_units
from .model import Plan
from .results import PlanRelease, plan_content_tag, statistic_metadata, statistic_release
from .series import check_unedited, previous_summaries, published_by

__all__ = ["release_nights"]


def _rows_channels(plan_: Plan, datasets: list[Dataset], opts: RunOptions, epsilon: float,
                   previous: dict[str, list[Summary]] | None, since: Any) -> tuple[Any, ...]:
    """Each statistic's per-row channel (ε_i/k): split on the first night for the persons counted then, and kept by
    every later night (the kept sums of different channels cannot be added)."""
    from ..persons import count_persons

    k = opts.max_contributions
    if previous is None:
        persons = count_persons(datasets[0], opts)
        checked = check_units(plan_, persons, k, epsilon, str(opts.privacy_unit))
        rows = tuple(per_row_channel(p.channel, k) for p in checked.statistics)
        for row in rows:
            warn_cells(row, max(1, persons * k))
        return rows
    check_unedited(plan_, previous)
    rows = tuple(previous[s.label][0].channel for s in plan_.statistics)
    charged = sum(epsilon_per_unit(row, opts.unit) for row in rows)
    if abs(charged - epsilon) > 1e-9 * max(1.0, epsilon):
        raise LdpDaskError(f"the series in {str(since)!r} spends ε {charged:g} per {opts.privacy_unit} a night, "
                           f"split among its statistics on its first night; --epsilon {epsilon:g} would need another "
                           "split, so it starts a new series (run it without --since)")
    return rows


def release_nights(plan_: Plan, datasets: list[Dataset], by: dict[str, Dataset], opts: RunOptions, epsilon: float,
                   since: str | os.PathLike[str] | None, skip_changed: bool, targets: dict[str, str | None],
                   write: Callable[[Secret], Any], overwrite: bool, level: float,
                   summary_name: Callable[[str], str]) -> PlanRelease:
    """One night of an incremental plan with a privacy unit (module docstring): tonight's files bounded together
    for every statistic, one ledger part at ε per person, each statistic's summary keeping its nights."""
    from ..pipeline import release_metadata, with_key
    from ..predict import predict

    if datasets[0].kind != "parquet":
        raise LdpDaskError("an incremental plan needs a Parquet source: its files are the partitions")
    secret, opts = with_key(opts)
    k = opts.max_contributions
    previous = previous_summaries(plan_, since, secret, summary_name) if since is not None else None
    rows = _rows_channels(plan_, datasets, opts, epsilon, previous, since)
    for row, d in zip(rows, datasets):
        if getattr(row, "domain", None) is not None:
            d.check_range(row.domain, opts.clip)
    spent = [epsilon_per_unit(row, opts.unit) for row in rows]
    charged = sum(spent)
    cells = max(row.dim for row in rows)
    files = [dataclasses.replace(d.for_noise_cells(cells), by_file=True) for d in datasets]
    plans = [plan_partitions(f, row, "summary", opts.clip, secret, charged, skip_changed=skip_changed, k=k,
                             since=None if previous is None else previous[s.label][0])
             for s, f, row in zip(plan_.statistics, files, rows)]
    tonight = plans[0].to_read
    datasets = [p.with_table(d) for p, d in zip(plans, datasets)]
    if any(tuple(f.name for f in p.to_read) != tuple(f.name for f in tonight) for p in plans[1:]):
        raise LdpDaskError("the summaries of the earlier plan kept different nights: release the plan without "
                           "--since to start a new series")
    night = (hashlib.sha256(json.dumps([p.night for p in plans]).encode()).hexdigest() if tonight else None)
    params = {s.label: {"column": s.column, "channel": row.name, "params": row.params(), "epsilon": e}
              for s, row, e in zip(plan_.statistics, rows, spent)}
    charge = Charge("local", "plan", params, charged, parts=(Part(files[0].root, night, charged),) if night else (),
                    context={"mode": "summary", "design": "split-epsilon",
                             "partitioned": sorted({p.context_id for p in plans})})
    whole = plans[0].with_table(dataclasses.replace(files[0], column=",".join(dict.fromkeys(
        s.column for s in plan_.statistics))))
    news: dict[int, list[Any]] = {}

    def read_tonight(sec: Secret) -> list[Summary] | None:
        """Tonight's files, their persons bounded once for every statistic: each statistic's night summary."""
        if not tonight:
            return None
        subs = [tonight_dataset(f, p) for f, p in zip(files, plans)]
        sums = plan_person_sums(plan_, subs[0], subs, by, rows, params, sec, opts, {"night": night})
        return [summary_of(row, a, {}, opts.clip) for row, a in zip(rows, sums)]

    def compute(sec: Secret, _: Any) -> PlanRelease:
        read = read_tonight(sec)
        released, new = [], []
        for i, (s, d, row, e, p) in enumerate(zip(plan_.statistics, datasets, rows, spent, plans)):
            part = None if read is None else night_partition(p, read[i], sec)
            new.append(part)
            kept = kept_nights(p, part)
            metadata = statistic_metadata(s, release_metadata(d, sec, "summary", opts, None), row, e,
                                          "split-epsilon", None, len(rows), charged)
            metadata.update(privacy_unit=d.unit, max_contributions=k, epsilon_per_unit=e,
                            partition_context=p.context_id, partitions_read=int(part is not None),
                            files_read=len(tonight), partitions_reused=len(kept) - int(part is not None))
            tag = sum(int(x.tag, 16) for x in kept) % TAG_MODULUS
            summary = Summary(row, sum(x.rows for x in kept), sum_partitions(kept), metadata,
                              content_tag=f"{tag:064x}", partitions=tuple(kept))
            predicted = predict(row, summary.n)
            released.append(statistic_release(s, summary, e, None, predicted.se if predicted else float("nan"),
                                              level))
        result = PlanRelease("split-epsilon", float(epsilon), charged, tuple(released), level)
        news[0] = new  # one release, one result (the release path may replace the object)
        return result

    def part_tags(result: PlanRelease) -> dict[str, str]:
        new = news.pop(0, [])
        if night is None or any(p is None for p in new):
            return {}
        return {night: f"{sum(int(p.tag, 16) for p in new) % TAG_MODULUS:064x}"}

    try:
        return release(whole, charge, compute, opts, targets=targets, write=write(secret), overwrite=overwrite,
                       content_tag=plan_content_tag, part_tags=part_tags, central=PlanRelease.central_events,
                       published=published_by(since, previous)).attach()
    except BudgetExceeded as exc:
        changed = plans[0].changed
        if not changed:
            raise
        raise BudgetExceeded(f"{exc}. Of tonight's files, {', '.join(changed[:3])} changed since the --since plan "
                             "(a correction?) and are read again with their night's other files; --skip-changed "
                             "keeps their earlier sums") from None
