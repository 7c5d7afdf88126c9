"""Running a plan: every statistic of a report from one pass over the data, as one release.

::

    plan each statistic's column (footers only) ─► split ε (:func:`ldp_dask.plans.check`) ─► build the channels
        ─► one map/reduce: each task reads its pieces' columns once and feeds every statistic
           (:func:`ldp_dask.tasks.plan_sums`); one tree combines them all ─► one summary per statistic
        ─► estimates, tests and quantiles from the summaries (post-processing)
        ─► one release: one ledger entry charged Σ ε_i per row (split ε) or max ε_i (split rows), every
           output published together

The statistics of a plan are independent releases sharing a read: statistic i's noise is keyed by the release key,
its own context (column, channel, parameters, its place in the plan) and the task, so it is exactly the noise a
release of that statistic alone would draw from those rows, under another key. When the rows are split, the row
each statistic gets is chosen by a keyed draw from the row's place in the plan (:func:`ldp_dask.tasks.assign_rows`),
never from its values: the choice is independent of the data, so each row is released once, at its statistic's ε
(parallel composition), and each statistic's number of rows is a public function of n and the key.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from . import exactsum
from ._validation import LdpDaskError, check_probability
from .channels import value_kind_of
from .engine import run, task_rows, tasks_of
from .noise import TAG_MODULUS, Secret, named_base_keys, partition_base_keys
from .options import RunOptions
from .outputs import Described, Description, Table, json_bytes
from .plans import Plan, Statistic, check
from .policy import warn_cells
from .privacy import ROW_UNIT, epsilon_per_unit
from .receipts import Receipted
from .release import Charge, Outputs, plan, release
from .source import Dataset
from .summary import Summary, summary_mac_key
from .tasks import ASSIGN_BITS, PlanJob, combine_plan, plan_sums, row_lots

__all__ = ["release_plan", "PlanRelease", "StatisticRelease"]

@dataclass(frozen=True)
class StatisticRelease:
    """One statistic of a released plan: its summary, its ε and share of the rows, and what was computed from it
    (an estimate, local quantiles, a goodness-of-fit test)."""

    statistic: Statistic
    summary: Summary
    epsilon: float
    share: float | None
    predicted_se: float
    result: Any
    quantiles: Any = None

    @property
    def label(self) -> str:
        return self.statistic.label

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.label, "column": self.statistic.column, "target": self.statistic.target,
                "channel": self.summary.channel.name, "params": self.summary.channel.params(),
                "epsilon": self.epsilon, "share_of_rows": self.share, "n": self.summary.n,
                "predicted_se": self.predicted_se, "result": self.result.to_dict(),
                "quantiles": None if self.quantiles is None else self.quantiles.to_dict()}


@dataclass(frozen=True)
class PlanRelease(Described, Receipted):
    """A released plan: the design chosen, the total ε per row charged, and each statistic's release.

    ``receipt`` is the ledger's one entry for the whole plan; ``written`` the outputs published (a summary, a page
    per statistic, the index page and ``estimates.json``)."""

    design: str
    epsilon: float
    charged: float
    statistics: tuple[StatisticRelease, ...]
    level: float

    def __getitem__(self, label: str) -> StatisticRelease:
        for s in self.statistics:
            if s.label == label:
                return s
        raise KeyError(f"the plan has no statistic {label!r}; it has {', '.join(s.label for s in self.statistics)}")

    def to_dict(self) -> dict[str, Any]:
        r = self.receipt
        return {"design": self.design, "epsilon": self.epsilon, "charged": self.charged, "level": self.level,
                "statistics": [s.to_dict() for s in self.statistics],
                "receipt": None if r is None else dataclasses.asdict(r), "written": dict(self.written)}

    def describe(self) -> Description:
        how = ("every row reports every statistic, at the ε shown (their sum is charged)"
               if self.design == "split-epsilon" else
               "every row reports one statistic, chosen by a keyed draw, at the ε shown (the largest is charged)")
        rows = tuple((s.label, s.summary.channel.name, f"{s.epsilon:.4g}", f"{s.summary.n:,}",
                      _headline(s)) for s in self.statistics)
        return Description(f"Plan of {len(self.statistics)} statistics", f"ε {self.charged:g} per row; {how}",
                           (("design", self.design), ("confidence", f"{self.level:g}")),
                           Table(("statistic", "channel", "ε", "reports", "result"), rows))


def _headline(s: StatisticRelease) -> str:
    d = s.result.describe()
    return d.headline or d.title


def _plan_datasets(plan_: Plan, source: Any, options: RunOptions) -> tuple[list[Dataset], Plan]:
    """Each statistic's column planned (metadata only) with its own null policy; the pieces must be one plan."""
    from .commands import typed_categories

    out = []
    for s in plan_.statistics:
        kind = value_kind_of(s.channel, s.options.get("categories"))
        opts = options if s.fill is None else dataclasses.replace(options, nulls=s.fill)
        out.append(plan(source, s.column, kind, opts))
    first = [(p.path, p.row_groups, p.start, p.stop, p.num_rows) for p in out[0].pieces]
    for d in out[1:]:
        if [(p.path, p.row_groups, p.start, p.stop, p.num_rows) for p in d.pieces] != first:  # pragma: no cover
            raise LdpDaskError(f"column {d.column!r} was planned in other pieces than {out[0].column!r}: a plan "
                               "reads the columns of one table")
    typed = []
    for s, d in zip(plan_.statistics, out):
        if "categories" in s.options:
            s = dataclasses.replace(s, options={**s.options,
                                                "categories": typed_categories(list(s.options["categories"]), d)})
        typed.append(s)
    return out, Plan(tuple(typed))


def release_plan(plan_: Plan | str | os.PathLike[str], source: Any, epsilon: float, *,
                 out: str | os.PathLike[str] | None = None, overwrite: bool = False, level: float = 0.95,
                 design: str | None = None, options: RunOptions | None = None, **run_options: Any) -> PlanRelease:
    """Release every statistic of a plan from one pass over ``source``, as one release.

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
        A statistic the plan cannot run, a privacy unit (not offered for plans yet), a bad option.
    BudgetExceeded
        The ledger's budget would be exceeded by the plan's total; nothing is read.
    """
    from .pipeline import _metadata, _with_key

    if not isinstance(plan_, Plan):
        plan_ = Plan.from_toml(plan_)
    level = check_probability(level, "level")
    opts = RunOptions.of(options, **run_options)
    if opts.privacy_unit is not None:
        raise LdpDaskError("a plan splits ε per row: plans with a privacy unit are not offered yet; release each "
                           "statistic on its own with --privacy-unit")
    datasets, plan_ = _plan_datasets(plan_, source, opts)
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
    secret, opts = _with_key(opts)
    spent = [epsilon_per_unit(ch, 1) for ch in channels]
    charged = sum(spent) if shares is None else max(spent)
    params = {s.label: {"column": s.column, "channel": ch.name, "params": ch.params(), "epsilon": e,
                        **({} if shares is None else {"share": r})}
              for s, ch, e, r in zip(plan_.statistics, channels, spent, shares or [None] * len(spent))}
    charge = Charge("local", "plan", params, charged, context={"mode": "summary", "design": checked.design})
    whole = dataclasses.replace(base, column=",".join(dict.fromkeys(s.column for s in plan_.statistics)))

    def compute(sec: Secret, _: Outputs) -> PlanRelease:
        tasks = tasks_of(base)
        contexts = [{"v": 1, "fingerprint": d.fingerprint, "column": d.column, "channel": ch.name,
                     "params": ch.params(), "mode": "summary", "plan": s.label, "design": checked.design}
                    for s, d, ch in zip(plan_.statistics, datasets, channels)]
        keys = tuple(tuple(partition_base_keys(sec, c, len(tasks))) for c in contexts)
        assign = named_base_keys(sec, {"plan": sorted(params), "shares": shares}, ["assign"])[0]
        job = PlanJob(tuple(d.reader for d in datasets), base.pieces, channels, keys, opts.clip, lots, assign)
        acc = run(tasks, plan_sums, job, combine_plan, opts, rows=[task_rows(base.pieces, t) for t in tasks],
                  in_process=base.kind == "memory", desc=f"plan of {len(channels)}")
        if sum(a["n"] for a in acc["plan"]) != (base.n if shares else base.n * len(channels)):  # pragma: no cover
            raise RuntimeError("a plan's statistics did not read the planned rows")
        released = []
        for s, d, ch, a, p, e, r in zip(plan_.statistics, datasets, channels, acc["plan"], checked.statistics,
                                        spent, shares or [None] * len(spent)):
            metadata = _metadata(d, sec, "summary", opts, None)
            metadata.update(privacy_unit=ROW_UNIT, max_contributions=1, epsilon_per_unit=e,
                            plan={"statistic": s.label, "target": s.target, "design": checked.design,
                                  "share_of_rows": r, "statistics": len(channels), "epsilon_charged": charged})
            summary = Summary(ch, int(a["n"]), {k: exactsum.to_float(v) for k, v in a["stats"].items()}, metadata,
                              n_clipped=int(a["clipped"]) if opts.clip else None, content_tag=f"{a['tag']:064x}")
            released.append(_post_process(s, summary, e, r, p.se, level))
        return PlanRelease(checked.design, float(epsilon), charged, tuple(released), level)

    targets = _targets(plan_, out)
    done = release(whole, charge, compute, opts, targets=targets, write=_writer(secret), overwrite=overwrite,
                   content_tag=lambda r: f"{sum(int(s.summary.content_tag, 16) for s in r.statistics) % TAG_MODULUS:064x}")
    return done.attach()


def _post_process(s: Statistic, summary: Summary, epsilon: float, share: float | None, predicted: float,
                  level: float) -> StatisticRelease:
    """What the plan computes from a statistic's summary: its estimate, quantiles or test (no further ε)."""
    from .estimators import estimate, local_quantiles

    quantiles = None
    result: Any
    if s.target == "gof":
        from .gof import test

        result = test(summary, s.options["null"], level=float(s.options.get("alpha", 0.05)))
    else:
        result = estimate(summary, level=level)
        if s.target == "quantiles":
            quantiles = local_quantiles(summary, **({"q": s.options["q"]} if "q" in s.options else {}), level=level)
    return StatisticRelease(s, summary, epsilon, share, predicted, result, quantiles)


def _safe(label: str) -> str:
    """A statistic's name as a file name (letters, digits, ``.-_``)."""
    return "".join(c if c.isalnum() or c in ".-_" else "_" for c in label)


def _targets(plan_: Plan, out: str | os.PathLike[str] | None) -> dict[str, str | None]:
    if out is None:
        return {}
    d = os.fspath(out).rstrip("/")
    targets: dict[str, str | None] = {"index": f"{d}/index.html", "estimates": f"{d}/estimates.json"}
    for s in plan_.statistics:
        targets[f"summary:{s.label}"] = f"{d}/{_safe(s.label)}.summary.parquet"
        targets[f"page:{s.label}"] = f"{d}/{_safe(s.label)}.html"
    return targets


def _summary_bytes(summary: Summary, mac: bytes) -> Any:
    return lambda fh: summary.write_parquet(fh, mac)


def _writer(secret: Secret) -> Any:
    """What stages a plan's outputs: every summary (signed as a single release's is), a page per statistic, the
    index page and the estimates as JSON."""
    from .report import plan_pages

    mac = summary_mac_key(secret)

    def write(result: PlanRelease, outputs: Outputs) -> None:
        if "index" not in outputs:
            return
        for s in result.statistics:
            outputs.write(f"summary:{s.label}", _summary_bytes(s.summary, mac))
        index, pages = plan_pages(result, {s.label: f"{_safe(s.label)}.html" for s in result.statistics})
        for label, html in pages.items():
            outputs.write(f"page:{label}", html.encode())
        outputs.write("index", index.encode())
        body = {k: v for k, v in result.to_dict().items() if k not in ("receipt", "written")}
        outputs.write("estimates", json_bytes(body))

    return write

