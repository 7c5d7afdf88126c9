"""A plan's budget: how its ε (or its rows) is shared among the statistics, each one's predicted error, and the checks
made before anything is spent (:func:`check`, :func:`check_plan`).

Given the total ε per row, :func:`check` chooses how to share it, before anything is spent and from the Parquet
footers only (the row counts): every statistic's predicted variance is a closed form of its ε and n
(:mod:`ldp_dask.predict`), and of two designs the one with the smaller weighted sum of predicted variances is
chosen. Statistics of different units (a mean in km, a share) add up once each variance is counted in units of the
error at which its estimate would be beyond use — half the domain for a mean, the typical share 1/K for a histogram
bin or a category (:attr:`ldp_dask.predict.Prediction.limit`): v_i = (SE_i / limit_i)².

* **split ε** — every row reports every statistic, statistic i at ε_i, Σ ε_i = ε (basic composition). With
  variances v_i(ε_i) the weighted sum Σ w_i v_i(ε_i) is minimised numerically (SLSQP), started from
  ε_i ∝ (w_i a_i)^(1/3), the optimum when v_i = a_i/ε_i² (Laplace noise dominating);
* **split rows** — every row reports one statistic, chosen by a keyed hash with probability ρ_i, at the full ε
  (parallel composition: ε per row unchanged). A statistic then has about ρ_i·n reports, its variance is
  v_i(ε)/ρ_i at n = 1 report scale, and ρ_i ∝ √(w_i v_i(ε)) minimises the sum (Wang et al.'s comparison of
  splitting the budget and splitting the users, as in multi-freq-ldpy).

Statistics whose estimate has no closed-form variance (the square wave, wavelets) cannot be planned this way: a plan
names a channel with one (histogram, mean, hybrid-mean, rr, hadamard, subset, heavy-hitters) or a target that
chooses one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import LdpDaskError, check_epsilon
from ..channels import Channel
from ..predict import predict
from .model import MIN_SPLIT_ROWS, Plan, Statistic
from .split import split_epsilon, split_rows

__all__ = ["PlannedStatistic", "PlanCheck", "check", "check_plan", "check_unit_plan", "check_units",
           "plan_datasets", "split_epsilon", "split_rows"]


@dataclass(frozen=True)
class PlannedStatistic:
    """A statistic as a plan would release it: its channel, its ε (or its share of the rows), rows, predicted SE."""

    statistic: Statistic
    channel: Channel
    epsilon: float
    rows: float
    se: float
    what: str


@dataclass(frozen=True)
class PlanCheck:
    """What :func:`check` found: the design chosen and each statistic's prediction, and the other design's total."""

    design: str
    epsilon: float
    statistics: tuple[PlannedStatistic, ...]
    objective: float
    other_objective: float
    #: what ε is counted per (a column naming a person, or "row"), the reports per person and the persons counted
    unit: str = "row"
    k: int = 1
    persons: int | None = None
    #: a plan with groups found privately: the ε (per row or person) spent finding them first, and their columns
    #: (:class:`~ldp_dask.plans.model.Discovery`); ``epsilon`` is then what the statistics share
    found: tuple[float, tuple[str, ...]] | None = None

    def lines(self) -> list[str]:
        return ([] if self.found is None else [
            f"keys of {', '.join(self.found[1])} found first, at ε {self.found[0]:.4g} per {self.unit} (a "
            f"heavy-hitters release); the statistics below share the rest, over the keys found (the predictions "
            "assume each statistic's 'top' keys)"]) + self._lines()

    def _lines(self) -> list[str]:
        if self.unit != "row":
            out = [f"plan: ε {self.epsilon:g} per {self.unit}; about {self.persons:,} persons (a sketch of the unit "
                   f"column), each making {self.k} report{'s' if self.k > 1 else ''} to every statistic at the ε "
                   f"shown per {self.unit} (their sum is ε; each {self.unit} weighted equally). Weighted sum of "
                   f"relative variances {self.objective:.4g}"]
        else:
            how = ("each row reports every statistic, at the ε shown (their sum is ε)" if self.design == "split-epsilon"
                   else "each row reports one statistic, chosen by a keyed hash, at the full ε")
            out = [f"plan: ε {self.epsilon:g} per row; {how}. Weighted sum of relative variances {self.objective:.4g} "
                   f"(the other design: {self.other_objective:.4g})"]
        for p in self.statistics:
            g = p.statistic.group
            per = "" if g is None else f" per {'public' if g[2] else 'private'} group of {g[0]} ({len(g[1]) + 1} groups)"
            out.append(f"  {p.statistic.label:<28} {p.channel.name:<12} ε {p.epsilon:<8.4g} "
                       f"{'rows' if self.unit == 'row' else 'reports'} {p.rows:>14,.0f}  "
                       f"predicted SE of {p.what}{per} {p.se:.3g}")
        if self.unit != "row":
            out.append(f"as a nightly series (--incremental): a night costs ε {self.epsilon:g} per {self.unit} once, "
                       f"whatever the number of its new files (they are bounded together); a night with no new file "
                       f"costs nothing; N nights cost up to N × {self.epsilon:g} per {self.unit}, composed in the "
                       "ledger (the same persons come back)")
        return out


#: The row count the ε split is optimised at: every predicted variance is ∝ 1/n, so the split does not depend on n,
#: and computing it at one n makes it the same bits every night of a series whose n grows.
SPLIT_ROWS = 1_000_000


def _variance(stat: Statistic, epsilon: float, n: float, at: float | None = None) -> tuple[float, Channel, str, float]:
    """A statistic's predicted variance at ``epsilon`` from ``n`` reports (its channel built for n; predicted from
    ``at`` reports when given), in units of the error at which it would be beyond use (a mean's half-width, a
    typical share: :attr:`~ldp_dask.predict.Prediction.limit`), so that statistics of different units add up; with
    its channel, what it predicts, and its SE in the data's units. A public group's is a typical group's, from
    n/G reports (G groups with "other")."""
    ch = stat.build(epsilon, max(1, int(n)))
    group = stat.group
    m = n if at is None else at
    p = predict(ch, m / stat.groups if group is not None and group[2] else m)
    if p is None:
        raise LdpDaskError(f"statistic {stat.label!r} uses the {ch.name!r} channel, whose estimate has no closed-form "
                           "variance: a plan splits its budget by predicted variances, so name a channel with one "
                           "(histogram, mean, hybrid-mean, rr, hadamard, subset, haar, heavy-hitters) or a target that "
                           "chooses one")
    return (p.se / p.limit) ** 2, ch, p.what, p.se


def check(plan: Plan, rows: Mapping[str, int], epsilon: float, design: str | None = None) -> PlanCheck:
    """Split ``epsilon`` (per row) among the plan's statistics and predict each one's standard error, from the public
    row count of each column (``rows``: column → n). Nothing is read but those counts; nothing is spent.
    ``design`` (``"split-epsilon"`` or ``"split-rows"``) forces a design; by default the one predicting the smaller
    weighted sum of variances is chosen."""
    epsilon = check_epsilon(epsilon)
    stats = plan.statistics
    n_all = [float(rows[s.column]) for s in stats]
    top = max(n_all)
    # identical statistics (all but the name: channel, options, weight, rows) are one class, computed once
    keys = [(s.column, s.channel, repr(sorted(s.options.items())), s.weight, ni) for s, ni in zip(stats, n_all)]
    index: dict[Any, int] = {}
    of = [index.setdefault(k, len(index)) for k in keys]
    first = {k: i for i, k in reversed(list(enumerate(of)))}  # each class's first statistic
    reps = [stats[first[i]] for i in range(len(index))]
    count = np.bincount(of, minlength=len(reps))
    w = [s.weight for s in reps]
    n = [float(rows[s.column]) for s in reps]

    def var_of(i: int) -> Any:  # at a fixed scale (SPLIT_ROWS): the split is the same for every n
        return lambda e: _variance(reps[i], e, n[i], SPLIT_ROWS * n[i] / top)[0]

    eps = split_epsilon([var_of(i) for i in range(len(reps))], w, epsilon,
                        None if len(reps) == len(stats) else count.tolist())
    by_eps = [_variance(s, e, ni) for s, e, ni in zip(reps, eps, n)]
    obj_eps = float(sum(ci * wi * v[0] for ci, wi, v in zip(count, w, by_eps)))
    unit = [_variance(s, epsilon, ni, SPLIT_ROWS * ni / top)[0] * ni / top  # ∝ one report's variance
            for s, ni in zip(reps, n)]
    rho = split_rows(list(np.repeat(unit, count)), list(np.repeat(w, count)))
    rho_class = np.array([rho[first[i]] for i in range(len(reps))])
    by_rows = [_variance(s, epsilon, max(1.0, r * ni)) for s, r, ni in zip(reps, rho_class, n)]
    obj_rows = float(sum(ci * wi * v[0] for ci, wi, v in zip(count, w, by_rows)))
    if design not in (None, "split-epsilon", "split-rows"):
        raise LdpDaskError(f"The 'design' parameter must be 'split-epsilon' or 'split-rows' (or None: the one "
                           f"predicting less error). Got {design!r} instead.")
    # a row split draws each statistic's rows at random: one expecting fewer than MIN_SPLIT_ROWS may get none, or a
    # handful no estimate can be read from
    few = [(s.label, float(rho[i]) * n[k]) for i, (s, k) in enumerate(zip(stats, of))
           if float(rho[i]) * n[k] < MIN_SPLIT_ROWS]
    if design == "split-rows" and few:
        raise LdpDaskError(f"split-rows would give statistic {few[0][0]!r} about {few[0][1]:.3g} rows (fewer than "
                           f"{MIN_SPLIT_ROWS}: it may get none); split ε instead (design='split-epsilon')")
    if design == "split-epsilon" or (design is None and (obj_eps <= obj_rows or few)):
        planned = tuple(PlannedStatistic(s, by_eps[k][1], float(eps[k]), n[k], by_eps[k][3], by_eps[k][2])
                        for s, k in zip(stats, of))
        return PlanCheck("split-epsilon", epsilon, planned, obj_eps, obj_rows)
    planned = tuple(PlannedStatistic(s, by_rows[k][1], epsilon, float(rho[i]) * n[k], by_rows[k][3], by_rows[k][2])
                    for i, (s, k) in enumerate(zip(stats, of)))
    return PlanCheck("split-rows", epsilon, planned, obj_rows, obj_eps)


def check_unit_plan(plan: Plan, design: str | None = None) -> None:
    """Refuse, naming why, what a plan with a privacy unit cannot run: a public group (it publishes how many
    reports fall in each key exactly; with a person's k reports spread over their rows, that count moves with which
    keys a person's rows carry and how many, which the unit protects: a person with one row under key A against
    the same person with rows under A and B changes two counts by whole reports, an unbounded loss), or a split of
    the rows. A private group is offered: its label is privatized with the value."""
    public = [s.label for s in plan.statistics if s.group is not None and s.group[2]]
    if public:
        raise LdpDaskError(f"statistic {public[0]!r} has a public group: with a privacy unit a public group would "
                           "publish how many of the persons' reports fall in each key, which moves with which keys "
                           "a person's rows carry (protected by the unit); declare it group_kind = \"private\" "
                           "(the label is privatized with the value), or release it per row")
    if design not in (None, "split-epsilon"):
        raise LdpDaskError(f"a plan with a privacy unit splits ε per person among its statistics (every person "
                           f"reports each); design={design!r} is not offered with a unit")


def check_units(plan: Plan, persons: int, k: int, epsilon: float, unit: str = "person") -> PlanCheck:
    """:func:`check` for a plan with a privacy unit: ε per person split among the statistics (split ε; every
    person makes k reports to each, each privatized at ε_i/k), each statistic's error predicted for ``persons``
    persons × k reports at ε_i/k (each person weighted equally). The split is the per-row one for ``persons``
    rows: every predicted variance scales alike with k."""
    from ..privacy import per_row_channel

    check_unit_plan(plan)
    base = check(plan, {s.column: persons for s in plan.statistics}, epsilon, "split-epsilon")
    out = []
    for p in base.statistics:
        row = per_row_channel(p.channel, k)
        pr = predict(row, persons * k)
        se, what = (pr.se, pr.what) if pr is not None else (p.se, p.what)
        out.append(dataclasses.replace(p, rows=float(persons * k), se=se, what=what))
    return dataclasses.replace(base, statistics=tuple(out), unit=unit, k=k, persons=persons)


def plan_datasets(plan_: Plan, source: Any, options: Any) -> tuple[list[Any], dict[str, Any], Plan]:
    """Each statistic's column planned (metadata only) with its own null policy, and each group column as
    categories; the pieces must be one plan. Categories and group keys are typed as their columns."""
    from ..footers import footers_shared

    with footers_shared():  # each file's footer read once for every column
        return _plan_datasets(plan_, source, options)


def _plan_datasets(plan_: Plan, source: Any, options: Any) -> tuple[list[Any], dict[str, Any], Plan]:
    from ..channels import value_kind_of
    from ..channels.categorical import OTHER
    from ..release import plan
    from ..source import typed_categories

    planned: dict[tuple[str, str, str], Any] = {}  # a column read the same way by several statistics: planned once
    out = []
    for s in plan_.statistics:
        kind = value_kind_of(s.channel if s.group is None or s.group[2] else "auto", s.options.get("categories"))
        how = (s.column, kind, repr(s.fill))
        if how not in planned:
            planned[how] = plan(source, s.column, kind,
                                options if s.fill is None else dataclasses.replace(options, nulls=s.fill))
        out.append(planned[how])
    by = {}
    for s in plan_.statistics:
        if s.group is not None and s.group[0] not in by:  # a null label is "other": nulls are not refused
            by[s.group[0]] = plan(source, s.group[0], "categorical", dataclasses.replace(options, nulls=OTHER))
    first = [(p.path, p.row_groups, p.start, p.stop, p.num_rows) for p in out[0].pieces]
    for d in [*out[1:], *by.values()]:
        if [(p.path, p.row_groups, p.start, p.stop, p.num_rows) for p in d.pieces] != first:  # pragma: no cover
            raise LdpDaskError(f"column {d.column!r} was planned in other pieces than {out[0].column!r}: a plan "
                               "reads the columns of one table")
    typed = []
    for s, d in zip(plan_.statistics, out):
        options_ = dict(s.options)
        if "categories" in options_:
            options_["categories"] = typed_categories(list(options_["categories"]), d)
        if s.group is not None and not s.discovers:
            options_["groups"] = typed_categories(list(options_["groups"]), by[s.group[0]])
        typed.append(dataclasses.replace(s, options=options_))
    return out, by, Plan(tuple(typed), plan_.discovery)


def check_plan(plan: Plan, source: Any, epsilon: float, options: Any = None, design: str | None = None) -> PlanCheck:
    """:func:`check` for a source: each statistic's column is planned from the Parquet footers (its type checked
    against its channel, its rows counted), and every check a release makes from the footers is made here too —
    the values' range against each channel's domain (unless ``clip``), the nulls, the cells per row — so that a
    plan that passes is not refused by the release for a reason the footers show. No row is read, nothing is
    spent or recorded."""
    from ..options import RunOptions
    from ..policy import warn_cells

    opts = RunOptions.of(options)
    if opts.privacy_unit is not None:
        check_unit_plan(plan, design)
    found = None
    if plan.discovery is not None:  # the keys are found first, at a share of ε; the statistics share the rest
        epsilon = check_epsilon(epsilon)
        found = (epsilon * plan.discovery.share, tuple(plan.discovered))
        epsilon -= found[0]
    datasets, _, plan = plan_datasets(plan, source, opts)  # each column (and group column) from the footers
    if opts.privacy_unit is not None:  # persons counted from a sketch of the unit column (one pass, nothing spent)
        from ..persons import count_persons

        persons = count_persons(datasets[0], opts)
        checked = check_units(plan, persons, opts.max_contributions, epsilon, opts.privacy_unit)
    else:
        rows = {s.column: d.n for s, d in zip(plan.statistics, datasets)}
        checked = check(plan, rows, epsilon, design)
    ranged: set[tuple[int, Any]] = set()
    for p, d in zip(checked.statistics, datasets):
        domain = getattr(p.channel, "domain", None)
        if domain is not None and (id(d), tuple(domain)) not in ranged:  # a column and domain checked once
            ranged.add((id(d), tuple(domain)))
            d.check_range(tuple(domain), opts.clip)
    for p in checked.statistics:
        warn_cells(p.channel, max(1, int(p.rows)))
    return checked if found is None else dataclasses.replace(checked, found=found)
