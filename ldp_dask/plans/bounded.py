"""A plan's statistics over persons bounded once: the one map/reduce that both a plan with a privacy unit
(:func:`ldp_dask.plans.release_plan`) and a night of its incremental series (:mod:`ldp_dask.plans.nights`) run.

Every person's rows are bounded to k by :func:`ldp_dask.persons.map_units` over every statistic's column and every
private group's label column at once (:class:`~ldp_dask.reading.Columns`), and each kept row reports every
statistic under the statistic's own keys (:class:`~ldp_dask.plans.tasks.PlanBucket`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ..noise import Secret, partition_base_keys
from ..options import RunOptions
from ..source import Dataset
from .model import Plan
from .results import cells_of

__all__ = ["plan_person_sums"]


def plan_person_sums(plan_: Plan, base: Dataset, datasets: Sequence[Dataset], by: Mapping[str, Dataset],
                     rows: Sequence[Any], params: Mapping[str, Any], sec: Secret, opts: RunOptions,
                     extra: Mapping[str, Any] | None = None) -> list[Any]:
    """Each statistic's accumulator from one bounding of every person over ``base`` (its pieces are the buckets):
    statistic i's noise keyed by its own context (``datasets[i]``'s fingerprint, its per-row channel ``rows[i]``,
    its label), the bounding by the plan's (``base``'s fingerprint, the statistics, the unit, k, and ``extra``)."""
    from ..persons import map_units
    from ..reading import Columns
    from ..tasks import ChannelJob
    from .tasks import Grouping, PlanBucket, combine_plan

    k = opts.max_contributions
    # each private group's labels travel with the values, as their group's index (one field per column and keys)
    fields = list(dict.fromkeys((s.group[0], s.group[1]) for s in plan_.statistics if s.group is not None))
    labels = tuple(dataclasses.replace(by[c].reader, value_kind="labels", fill=None) for c, _ in fields)
    groupings = tuple(None if s.group is None else
                      Grouping(len(datasets) + fields.index((s.group[0], s.group[1])), s.group[1], False,
                               cells_of(s, row)) for s, row in zip(plan_.statistics, rows))
    buckets = len(base.tasks)
    contexts = [{"v": 1, "fingerprint": d.fingerprint, "column": d.column, "channel": row.name,
                 "params": row.params(), "mode": "summary", "unit": d.unit, "k": k, "plan": s.label}
                for s, d, row in zip(plan_.statistics, datasets, rows)]
    keys = tuple(tuple(partition_base_keys(sec, c, buckets)) for c in contexts)
    jobs = tuple(ChannelJob(d.reader, (), (), row, opts.clip, "summary") for d, row in zip(datasets, rows))
    context = {"v": 1, "fingerprint": base.fingerprint, "plan": sorted(params), "unit": base.unit, "k": k,
               **(extra or {})}
    reader = Columns((*(d.reader for d in datasets), *labels), (*([None] * len(datasets)), *(ks for _, ks in fields)))
    acc = map_units(base, sec, context, PlanBucket(jobs, keys, groupings), combine_plan, opts, reader=reader)
    return list(acc["plan"])
