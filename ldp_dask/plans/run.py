"""Running a plan: every statistic of a report from one pass over the data, as one release.

::

    plan each statistic's column (footers only) ─► split ε (:func:`ldp_dask.plans.check`) ─► build the channels
        ─► one map/reduce: each task reads its pieces' columns once and feeds every statistic
           (:func:`ldp_dask.plans.tasks.plan_sums`); one tree combines them all ─► one summary per statistic
        ─► estimates, tests and quantiles from the summaries (post-processing)
        ─► one release: one ledger entry charged Σ ε_i per row (split ε) or max ε_i (split rows), every
           output published together

The statistics of a plan are independent releases sharing a read: statistic i's noise is keyed by the release key,
its own context (column, channel, parameters, its place in the plan) and the task, so it is exactly the noise a
release of that statistic alone would draw from those rows, under another key. When the rows are split, the row
each statistic gets is chosen by a keyed draw from the row's place in the plan (:func:`ldp_dask.plans.tasks.assign_rows`),
never from its values: the choice is independent of the data, so each row is released once, at its statistic's ε
(parallel composition), and each statistic's number of rows is a public function of n and the key.

Groups (docs/how-to/plans.md): a *public* group releases the statistic on each declared key's rows (and the
"other" rows) apart, each under its own key: a row is in one group, so ε per row is unchanged (parallel
composition), and each group's number of rows is released. A *private* group runs the ``group-mean`` channel over
(group, value) pairs (:class:`ldp_dask.channels.GroupMean`): no row's group and no group's size is released.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Unpack

from .._io import file_stem
from .._validation import LdpDaskError, check_probability
from ..engine import run, task_rows, tasks_of
from ..noise import Secret, named_base_keys, partition_base_keys
from ..options import RunKwargs, RunOptions
from ..outputs import json_bytes
from ..policy import warn_cells
from ..privacy import epsilon_per_unit
from ..release import Charge, Outputs, release
from ..source import Dataset
from ..summary import Summary, summary_mac_key, summary_of
from .bounded import plan_person_sums
from .budget import check, check_unit_plan, plan_datasets
from .model import Plan
from .results import (
    PlanRelease,
    StatisticRelease,
    cells_of,
    group_keys,
    group_metadata,
    plan_content_tag,
    statistic_metadata,
    statistic_release,
)
from .tasks import ASSIGN_BITS, Grouping, PlanJob, combine_plan, plan_sums, row_lots

__all__ = ["release_plan", "PlanRelease", "StatisticRelease"]


def release_plan(plan_: Plan | str | os.PathLike[str], source: Any, epsilon: float, *,
                 out: str | os.PathLike[str] | None = None, overwrite: bool = False, level: float = 0.95,
                 design: str | None = None, incremental: bool = False, since: str | os.PathLike[str] | None = None,
                 skip_changed: bool = False, longitudinal: bool = False, options: RunOptions | None = None,
                 **run_options: Unpack[RunKwargs]) -> PlanRelease:
    """Release every statistic of a plan from one pass over ``source``, as one release (a plan whose groups are
    found privately, ``groups = "discover"``: as two, :mod:`ldp_dask.plans.discover`).

    Parameters
    ----------
    plan_ : Plan or path
        The statistics (:class:`~ldp_dask.Plan`, or its TOML file).
    source : path, URL, pandas DataFrame or pyarrow Table
        The table: a Parquet file, directory, glob or URL, or in-memory data holding every column of the plan.
    epsilon : float
        The total ε per row. The split among the statistics is chosen as ``ldp-dask plan check`` shows it
        (:func:`ldp_dask.plans.check`): split ε (every row reports every statistic at ε_i, Σ ε_i = ε; basic
        composition) or split rows (every row reports one statistic, at the full ε; parallel composition),
        whichever predicts the smaller weighted sum of variances.
    out : path, optional
        A directory to write into: ``<name>.summary.parquet`` and ``<name>.html`` per statistic, ``index.html``
        (the report) and ``estimates.json``. Published together, atomically, before the charge is committed.
    overwrite : bool
        Replace existing outputs.
    level : float
        Confidence level of every interval and band (a goodness-of-fit statistic uses its own ``alpha``).
    design : {"split-epsilon", "split-rows"}, optional
        Force a design instead of the one predicting less error.
    incremental : bool
        A night of a series (:mod:`ldp_dask.plans.series`): every statistic (every public group) is a partitioned
        release, each file a partition kept in its summary. The design and the split are chosen on the first
        night and kept.
    since : path, optional
        The ``out`` directory of the series' earlier night: only the files added or changed since are read (once,
        for every statistic) and charged; the others' kept sums are reused. Implies ``incremental``.
    skip_changed : bool
        With ``since``: a file changed since that night is not released again; its kept sums are used.
    longitudinal : bool
        With a privacy unit (``privacy_unit=``): a longitudinal release of every statistic
        (docs/how-to/longitudinal.md). Every person reports every statistic (split ε), each statistic's report
        memoized on the state of the person's value, capped (:func:`ldp_dask.channels.memoized`): statistic i's
        ε_i is its series' whole cost per person, so ``epsilon`` is the plan's, charged at its first night.
        Histograms, frequencies and means, without groups; each statistic reads its column on its own pass
        (its persons bounded apart), under one ledger entry and one report.
    options : RunOptions, optional
        How the release runs (cluster, key, ledger, clipping, ...); ``**run_options`` override its fields.

    Returns
    -------
    PlanRelease
        The design, ε charged per row, and per statistic its summary and estimate (with intervals): unbiased for
        the population the rows are a sample of, with variance the closed form :func:`ldp_dask.plans.check`
        predicts (sampling plus privacy noise; for split rows, of the statistic's share of the rows).

    Raises
    ------
    LdpDaskError
        A statistic the plan cannot run, a privacy unit outside a longitudinal plan, a bad option.
    BudgetExceeded
        The ledger's budget would be exceeded by the plan's total; nothing is read.
    """
    if not isinstance(plan_, Plan):
        plan_ = Plan.from_toml(plan_)
    level = check_probability(level, "level")
    opts = RunOptions.of(options, **run_options)
    if plan_.discovery is None:
        return _release_plan(plan_, source, epsilon, out=out, overwrite=overwrite, level=level, design=design,
                             incremental=incremental, since=since, skip_changed=skip_changed,
                             longitudinal=longitudinal, options=opts)
    if incremental or since is not None or longitudinal:
        raise LdpDaskError("a plan whose groups are found privately (groups = \"discover\") is released whole each "
                           "time: the keys found would change from night to night, and with them the groups a series "
                           "adds up; find the keys once (ldp-dask estimate --top over a heavy-hitters release) and "
                           "declare them, or leave out incremental, since and longitudinal")
    from .discover import release_discovered

    return release_discovered(plan_, source, epsilon, out, overwrite, level, design, opts, _release_plan)


def _release_plan(plan_: Plan, source: Any, epsilon: float, *, out: str | os.PathLike[str] | None,
                  overwrite: bool, level: float, design: str | None = None, incremental: bool = False,
                  since: str | os.PathLike[str] | None = None, skip_changed: bool = False, longitudinal: bool = False,
                  options: RunOptions, discovery: PlanRelease | None = None) -> PlanRelease:
    """:func:`release_plan` of a plan with its keys declared; ``discovery``: the release that found them (shown in
    the report)."""
    from ..pipeline import release_metadata, with_key

    opts = options
    if opts.privacy_unit is not None and not longitudinal:
        check_unit_plan(plan_, design)
    if longitudinal and (incremental or since is not None):
        raise LdpDaskError("a longitudinal plan reads the whole table each night (its persons' reports repeat by "
                           "themselves): it is not incremental; leave out incremental and since")
    datasets, by, plan_ = plan_datasets(plan_, source, opts)
    if longitudinal:
        return _longitudinal(plan_, datasets, opts, epsilon, design, out, overwrite, level)  # never discovered
    if opts.privacy_unit is not None and (incremental or since is not None):
        from .nights import release_nights

        return release_nights(plan_, datasets, by, opts, epsilon, since, skip_changed, plan_.targets(out), _writer,
                              overwrite, level, lambda label: f"{file_stem(label)}.summary.parquet")
    if opts.privacy_unit is not None:
        return _found_by(_per_person(plan_, datasets, by, opts, epsilon, out, overwrite, level, discovery),
                         discovery)
    if incremental or since is not None:
        return _series(plan_, datasets, by, opts, epsilon, design, since, skip_changed, out, overwrite, level)
    rows = {s.column: d.n for s, d in zip(plan_.statistics, datasets)}
    checked = check(plan_, rows, epsilon, design)
    channels = tuple(p.channel for p in checked.statistics)
    for ch, d, p in zip(channels, datasets, checked.statistics):
        if getattr(ch, "domain", None) is not None:
            d.check_range(ch.domain, opts.clip)  # type: ignore[attr-defined]
        warn_cells(ch, max(1, int(p.rows)))
    shares = lots = None
    if checked.design == "split-rows":
        lots = tuple(int(x) for x in row_lots([p.rows / max(1, d.n) for p, d in zip(checked.statistics, datasets)]))
        shares = tuple(x / (1 << ASSIGN_BITS) for x in lots)  # exactly the probabilities the rows are drawn with
    base = datasets[0].for_noise_cells(max(ch.dim for ch in channels))
    secret, opts = with_key(opts)
    spent = [epsilon_per_unit(ch, 1) for ch in channels]
    charged = sum(spent) if shares is None else max(spent)
    params = {s.label: {"column": s.column, "channel": ch.name, "params": ch.params(), "epsilon": e,
                        **({} if shares is None else {"share": r}),
                        **({} if s.group is None else {"group_by": s.group[0], "groups": list(s.group[1]),
                                                        "group_kind": "public" if s.group[2] else "private"})}
              for s, ch, e, r in zip(plan_.statistics, channels, spent, shares or [None] * len(spent))}
    charge = Charge("local", "plan", params, charged, context={"mode": "summary", "design": checked.design})
    whole = dataclasses.replace(base, column=",".join(dict.fromkeys(s.column for s in plan_.statistics)))
    group_columns = list(by)
    groupings = tuple(None if s.group is None else Grouping(len(datasets) + group_columns.index(s.group[0]),
                                                            s.group[1], s.group[2], cells_of(s, ch))
                      for s, ch in zip(plan_.statistics, channels))

    def compute(sec: Secret, _: Outputs) -> PlanRelease:
        tasks = tasks_of(base)
        contexts = [{"v": 1, "fingerprint": d.fingerprint, "column": d.column, "channel": ch.name,
                     "params": ch.params(), "mode": "summary", "plan": s.label, "design": checked.design,
                     **({} if s.group is None else {"group": [s.group[0], list(map(str, s.group[1])), s.group[2]]})}
                    for s, d, ch in zip(plan_.statistics, datasets, channels)]
        keys = tuple(tuple(partition_base_keys(sec, c, len(tasks))) for c in contexts)
        assign = named_base_keys(sec, {"plan": sorted(params), "shares": shares}, ["assign"])[0]
        labels = (dataclasses.replace(by[c].reader, value_kind="labels", fill=None) for c in group_columns)
        readers = (*(d.reader for d in datasets), *labels)
        job = PlanJob(readers, base.pieces, channels, keys, opts.clip, lots, assign, groupings)
        acc = run(tasks, plan_sums, job, combine_plan, opts, rows=[task_rows(base.pieces, t) for t in tasks],
                  in_process=base.kind == "memory", desc=f"plan of {len(channels)}")
        read = [sum(g["n"] for g in a["groups"]) if "groups" in a else a["n"] for a in acc["plan"]]
        if sum(read) != (base.n if shares else base.n * len(channels)):  # pragma: no cover - a planning bug
            raise RuntimeError("a plan's statistics did not read the planned rows")
        released = []
        for s, d, ch, a, p, e, r in zip(plan_.statistics, datasets, channels, acc["plan"], checked.statistics,
                                        spent, shares or [None] * len(spent)):
            metadata = statistic_metadata(s, release_metadata(d, sec, "summary", opts, None), ch, e, checked.design, r,
                                          len(channels), charged)
            made: Summary | list[Summary] = summary_of(ch, a, metadata, opts.clip) if "groups" not in a else [
                summary_of(ch, g, group_metadata(metadata, k), opts.clip) for k, g in zip(group_keys(s), a["groups"])]
            released.append(statistic_release(s, made, e, r, p.se, level))
        return PlanRelease(checked.design, float(epsilon), charged, tuple(released), level)

    targets = plan_.targets(out)
    done = release(whole, charge, compute, opts, targets=targets, write=_writer(secret, discovery),
                   overwrite=overwrite, content_tag=plan_content_tag, central=PlanRelease.central_events)
    return _found_by(done.attach(), discovery)


def _found_by(result: PlanRelease, discovery: PlanRelease | None) -> PlanRelease:
    """A released plan with the release that found its groups' keys, if any."""
    return result if discovery is None else dataclasses.replace(result, discovery=discovery)


def _longitudinal(plan_: Plan, datasets: list[Dataset], opts: RunOptions, epsilon: float, design: str | None,
                  out: Any, overwrite: bool, level: float) -> PlanRelease:
    """A longitudinal plan: ε split among the statistics (every person reports each), each statistic a memoized
    series of its own (:mod:`ldp_dask.longitudinal`), one release, one report."""
    from ..channels import memoized
    from ..longitudinal import capped_series, check_longitudinal, memo_update, series_root, with_night
    from ..pipeline import run_memoized, with_key
    from ..predict import predict

    if design not in (None, "split-epsilon"):
        raise LdpDaskError("a longitudinal plan splits ε: every person reports every statistic, each memoized; "
                           f"design={design!r} is not offered")
    for s in plan_.statistics:
        if s.group is not None or s.target in ("quantiles", "gof"):
            raise LdpDaskError(f"the statistic {s.label!r} has no memoized form (a longitudinal plan releases "
                               "histograms, frequencies and means, without groups)")
    checked = check(plan_, {s.column: d.n for s, d in zip(plan_.statistics, datasets)}, epsilon, "split-epsilon")
    channels = tuple(memoized(p.channel) for p in checked.statistics)
    seen: dict[Any, str] = {}
    for s, ch in zip(plan_.statistics, channels):  # one series each: the same memo key would draw the same reports
        twin = seen.setdefault((s.column, ch.name, repr(sorted(ch.params().items()))), s.label)
        if twin != s.label:
            raise LdpDaskError(f"the statistics {twin!r} and {s.label!r} would release the same memoized reports "
                               "(the same column, channel and parameters): keep one of them")
    secret, opts = with_key(opts)
    opts = with_night(opts)
    for d, ch in zip(datasets, channels):
        check_longitudinal(d, ch, "summary", opts, secret)
        if getattr(ch, "domain", None) is not None:
            d.check_range(ch.domain, opts.clip)  # type: ignore[attr-defined]
    spent = [ch.epsilon_spent() for ch in channels]
    params = {s.label: {"column": s.column, "channel": ch.name, "params": ch.params(), "epsilon": e}
              for s, ch, e in zip(plan_.statistics, channels, spent)}
    roots = [series_root(d, opts) for d in datasets]  # read from the ledger once a statistic
    capped = tuple(c for d, ch, r in zip(datasets, channels, roots) for c in capped_series(d, ch, secret, opts, r))
    uncapped = sum(e for ch, e in zip(channels, spent) if not hasattr(ch, "cap"))  # a capped series: by its nights
    charge = Charge("local", "plan", params, uncapped,
                    context={"mode": "summary", "design": "split-epsilon", "longitudinal": 1, "night": opts.night},
                    capped=capped)
    whole = dataclasses.replace(datasets[0], column=",".join(dict.fromkeys(s.column for s in plan_.statistics)))
    updates: dict[int, list[Any]] = {}

    def compute(sec: Secret, _: Outputs) -> PlanRelease:
        released, found = [], []
        for s, d, ch, e, r in zip(plan_.statistics, datasets, channels, spent, roots):
            summary, pairs = run_memoized(d, ch, sec, opts, r)
            found.append(memo_update(summary, pairs))
            statistic_metadata(s, summary.metadata, ch, e, "split-epsilon", None, len(channels), sum(spent))
            summary.metadata.update(privacy_unit=d.unit, epsilon_per_unit=e)
            predicted = predict(ch, summary.n)  # the memoized channel's, not the one-night channel the split used
            released.append(statistic_release(s, summary, e, None, predicted.se if predicted else float("nan"),
                                              level))
        result = PlanRelease("split-epsilon", float(epsilon), sum(spent), tuple(released), level)
        updates[0] = found  # one release, one result (the release path may replace the object)
        return result

    done = release(whole, charge, compute, opts, targets=plan_.targets(out), write=_writer(secret),
                   overwrite=overwrite, content_tag=plan_content_tag, memos=lambda r: updates.pop(0))
    return done.attach()


def _per_person(plan_: Plan, datasets: list[Dataset], by: dict[str, Dataset], opts: RunOptions, epsilon: float,
                out: Any, overwrite: bool, level: float, discovery: PlanRelease | None = None) -> PlanRelease:
    """A plan with a privacy unit: ε per person split among the statistics (:func:`ldp_dask.plans.check_units`).
    Every person's rows are bounded **once** for the whole plan — k rows chosen by keyed randomness, padded when a
    person has fewer (:func:`ldp_dask.persons.map_units` over every statistic's column and every group column at
    once, :class:`~ldp_dask.reading.Columns`) — and each kept row reports every statistic, statistic i at ε_i/k
    (:class:`~ldp_dask.plans.tasks.PlanBucket`; a private group's statistic its row's (group, value) pair), so a
    person spends Σ ε_i = ε (basic composition) wherever its rows' groups fall, under one ledger entry charged ε
    per person and one report."""
    from ..persons import count_persons
    from ..pipeline import release_metadata, with_key
    from ..predict import predict
    from ..privacy import per_row_channel
    from .budget import check_units

    k = opts.max_contributions
    persons = count_persons(datasets[0], opts)
    checked = check_units(plan_, persons, k, epsilon, str(opts.privacy_unit))
    channels = tuple(p.channel for p in checked.statistics)
    rows = tuple(per_row_channel(ch, k) for ch in channels)  # what each kept row is privatized with
    for ch, row, d in zip(channels, rows, datasets):
        if getattr(ch, "domain", None) is not None:
            d.check_range(ch.domain, opts.clip)  # type: ignore[attr-defined]
        warn_cells(row, max(1, persons * k))
    secret, opts = with_key(opts)
    spent = [epsilon_per_unit(row, opts.unit) for row in rows]
    params = {s.label: {"column": s.column, "channel": ch.name, "params": ch.params(), "epsilon": e}
              for s, ch, e in zip(plan_.statistics, channels, spent)}
    charge = Charge("local", "plan", params, sum(spent), context={"mode": "summary", "design": "split-epsilon"})
    base = datasets[0].for_noise_cells(max(row.dim for row in rows))
    whole = dataclasses.replace(base, column=",".join(dict.fromkeys(s.column for s in plan_.statistics)))

    def compute(sec: Secret, _: Outputs) -> PlanRelease:
        sums = plan_person_sums(plan_, base, datasets, by, rows, params, sec, opts)
        released = []
        for s, d, row, a, e in zip(plan_.statistics, datasets, rows, sums, spent):
            metadata = release_metadata(d, sec, "summary", opts, None)
            statistic_metadata(s, metadata, row, e, "split-epsilon", None, len(rows), sum(spent))
            metadata.update(privacy_unit=d.unit, max_contributions=k, epsilon_per_unit=e)
            summary = summary_of(row, a, metadata, opts.clip)
            predicted = predict(summary.channel, summary.n)
            released.append(statistic_release(s, summary, e, None, predicted.se if predicted else float("nan"),
                                              level))
        return PlanRelease("split-epsilon", float(epsilon), sum(spent), tuple(released), level)

    return release(whole, charge, compute, opts, targets=plan_.targets(out), write=_writer(secret, discovery),
                   overwrite=overwrite, content_tag=plan_content_tag, central=PlanRelease.central_events).attach()


def _series(plan_: Plan, datasets: list[Dataset], by: dict[str, Dataset], opts: RunOptions, epsilon: float,
            design: str | None, since: Any, skip_changed: bool, out: Any, overwrite: bool,
            level: float) -> PlanRelease:
    """A night of an incremental plan (:func:`ldp_dask.plans.series.release_series`)."""
    from ..pipeline import with_key
    from ..predict import predict
    from .series import release_series

    secret, opts = with_key(opts)
    labels = tuple(dataclasses.replace(d.reader, value_kind="labels", fill=None) for d in by.values())

    def finish(made: list[Summary | list[Summary]], spent: list[float], charged: float, chosen: str,
               shares: tuple[float, ...] | None) -> PlanRelease:
        released = []
        for i, (s, m, e) in enumerate(zip(plan_.statistics, made, spent)):
            first = m if isinstance(m, Summary) else m[0]
            p = predict(first.channel, first.n if isinstance(m, Summary) else sum(x.n for x in m) / len(m))
            released.append(statistic_release(s, m, e, None if shares is None else shares[i],
                                              p.se if p is not None else float("nan"), level))
        return PlanRelease(chosen, float(epsilon), charged, tuple(released), level)

    return release_series(plan_, datasets, labels, opts, secret, epsilon, design, since, skip_changed,
                          plan_.targets(out), _writer(secret), overwrite, finish,
                          lambda label: f"{file_stem(label)}.summary.parquet")




def _summary_bytes(summary: Summary, mac: bytes) -> Any:
    return lambda fh: summary.write_parquet(fh, mac)


def _writer(secret: Secret, discovery: PlanRelease | None = None) -> Any:
    """What stages a plan's outputs: every summary (signed as a single release's is), a page per statistic, the
    index page and the estimates as JSON (with ``discovery``, the release that found its groups' keys)."""
    from ..report import plan_pages

    mac = summary_mac_key(secret)

    def write(result: PlanRelease, outputs: Outputs) -> None:
        if "index" not in outputs:
            return
        result = _found_by(result, discovery)
        for s in result.statistics:
            for suffix, summary in s.summaries:
                outputs.write(f"summary:{s.label}{suffix}", _summary_bytes(summary, mac))
        index, pages = plan_pages(result, {s.label: f"{file_stem(s.label)}.html" for s in result.statistics})
        for label, html in pages.items():
            outputs.write(f"page:{label}", html.encode())
        outputs.write("index", index.encode())
        body = {k: v for k, v in result.to_dict().items() if k not in ("receipt", "written")}
        outputs.write("estimates", json_bytes(body))

    return write
