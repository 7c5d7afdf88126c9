"""Release plans: a table's report — several statistics over several columns — with its budget split chosen.

A plan lists statistics (a TOML file, or :class:`Plan` in Python)::

    [[statistic]]
    column = "distance"
    channel = "histogram"
    domain = [0, 5000]
    bins = 50

    [[statistic]]
    column = "carrier"
    target = "frequencies"           # the channel --channel auto chooses for the target
    categories = ["AA", "DL", "UA"]
    weight = 2                       # this statistic's error counts twice in the split

Given the total ε per row, :func:`check` chooses how to share it, before anything is spent and from the Parquet
footers only (the row counts): every statistic's predicted variance is a closed form of its ε and n
(:mod:`ldp_dask.predict`), and of two designs the one with the smaller weighted sum of predicted variances is
chosen:

* **split ε** — every row reports every statistic, statistic i at ε_i, Σ ε_i = ε (basic composition). With
  variances v_i(ε_i) the weighted sum Σ w_i v_i(ε_i) is minimised numerically (SLSQP), started from
  ε_i ∝ (w_i a_i)^(1/3), the optimum when v_i = a_i/ε_i² (Laplace noise dominating);
* **split rows** — every row reports one statistic, chosen by a keyed hash with probability ρ_i, at the full ε
  (parallel composition: ε per row unchanged). A statistic then has about ρ_i·n reports, its variance is
  v_i(ε)/ρ_i at n = 1 report scale, and ρ_i ∝ √(w_i v_i(ε)) minimises the sum (Wang et al.'s comparison of
  splitting the budget and splitting the users, as in multi-freq-ldpy).

Statistics whose estimate has no closed-form variance (the square wave, wavelets) cannot be planned this way: a plan
names a channel with one (histogram, mean, hybrid-mean, rr, hadamard) or a target that chooses one.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._validation import LdpDaskError, check_epsilon
from .channels import Channel, build_channel, value_kind_of
from .predict import predict

__all__ = ["Statistic", "Plan", "PlannedStatistic", "PlanCheck", "check", "check_plan", "split_epsilon",
           "split_rows"]

#: What a statistic may say besides its column, channel or target, and weight.
_KEYS = {"column", "channel", "target", "weight", "name", "domain", "bins", "categories", "other", "noise",
         "mechanism", "encoding", "group_by"}


@dataclass(frozen=True)
class Statistic:
    """One statistic of a plan: a column, a channel (or ``"auto"`` with a target) and its options, a weight.

    Parameters
    ----------
    column : str
        The column released.
    channel : str
        A channel name (``histogram``, ``mean``, ``hybrid-mean``, ``rr``, ``hadamard``) or ``"auto"``.
    options : mapping
        The channel's options: ``domain``, ``bins``, ``categories``, ``target`` (for ``auto``), ...
    weight : float
        How much this statistic's predicted variance counts when the budget is split (default 1).
    name : str, optional
        Its label in outputs (default ``column.channel``).
    """

    column: str
    channel: str
    options: Mapping[str, Any] = field(default_factory=dict)
    weight: float = 1.0
    name: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.column, str) and self.column):
            raise LdpDaskError(f"The 'column' of a statistic must be a column name. Got {self.column!r} instead.")
        if not (isinstance(self.weight, (int, float)) and not isinstance(self.weight, bool)
                and 0 < self.weight < math.inf):
            raise LdpDaskError(f"The 'weight' of statistic {self.label!r} must be a number > 0. "
                               f"Got {self.weight!r} instead.")

    @property
    def label(self) -> str:
        return self.name or f"{self.column}.{self.options.get('target', self.channel) if self.channel == 'auto' else self.channel}"

    def build(self, epsilon: float, n: int) -> Channel:
        """The statistic's channel at ``epsilon`` for ``n`` rows."""
        opts = dict(self.options)
        domain = opts.pop("domain", None)
        bins = opts.pop("bins", None)
        return build_channel(self.channel, epsilon, tuple(domain) if domain is not None else None, bins=bins, n=n,
                             **opts)


@dataclass(frozen=True)
class Plan:
    """The statistics of a report (:func:`Plan.from_toml`, :func:`Plan.from_dict`)."""

    statistics: tuple[Statistic, ...]

    def __post_init__(self) -> None:
        if not self.statistics:
            raise LdpDaskError("A plan needs at least one statistic ([[statistic]] tables in its TOML file).")
        labels = [s.label for s in self.statistics]
        twice = sorted({x for x in labels if labels.count(x) > 1})
        if twice:
            raise LdpDaskError(f"A plan names statistic {twice[0]!r} twice; give each a distinct 'name'.")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "the plan") -> Plan:
        items = data.get("statistic")
        if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
            raise LdpDaskError(f"{where} must hold [[statistic]] tables (a list of statistics).")
        out = []
        for i, item in enumerate(items, 1):
            unknown = sorted(set(item) - _KEYS)
            if unknown:
                raise LdpDaskError(f"statistic {i} of {where} has unknown key(s) {', '.join(map(repr, unknown))}; "
                                   f"the keys are {', '.join(sorted(_KEYS))}.")
            if "group_by" in item:
                raise LdpDaskError(f"statistic {i} of {where} has a group_by: grouped statistics are not offered "
                                   "yet; release each group's rows separately.")
            if ("channel" in item) == ("target" in item):
                raise LdpDaskError(f"statistic {i} of {where} must name either a 'channel' or a 'target'.")
            opts = {k: v for k, v in item.items() if k not in ("column", "channel", "weight", "name")}
            out.append(Statistic(item.get("column", ""), item.get("channel", "auto"), opts,
                                 item.get("weight", 1.0), item.get("name")))
        return cls(tuple(out))

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Plan:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise LdpDaskError(f"cannot read the plan {os.fspath(path)!r}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise LdpDaskError(f"the plan {os.fspath(path)!r} is not valid TOML: {exc}") from None
        return cls.from_dict(data, f"the plan {os.fspath(path)!r}")


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

    def lines(self) -> list[str]:
        how = ("each row reports every statistic, at the ε shown (their sum is ε)" if self.design == "split-epsilon"
               else "each row reports one statistic, chosen by a keyed hash, at the full ε")
        out = [f"plan: ε {self.epsilon:g} per row; {how}. Weighted sum of predicted variances {self.objective:.4g} "
               f"(the other design: {self.other_objective:.4g})"]
        for p in self.statistics:
            out.append(f"  {p.statistic.label:<28} {p.channel.name:<12} ε {p.epsilon:<8.4g} rows {p.rows:>14,.0f}  "
                       f"predicted SE of {p.what} {p.se:.3g}")
        return out


def _variance(stat: Statistic, epsilon: float, n: float) -> tuple[float, Channel, str]:
    ch = stat.build(epsilon, max(1, int(n)))
    p = predict(ch, n)
    if p is None:
        raise LdpDaskError(f"statistic {stat.label!r} uses the {ch.name!r} channel, whose estimate has no closed-form "
                           "variance: a plan splits its budget by predicted variances, so name a channel with one "
                           "(histogram, mean, hybrid-mean, rr, hadamard) or a target that chooses one")
    return p.se**2, ch, p.what


def split_epsilon(variance: Sequence[Any], weights: Sequence[float], epsilon: float) -> np.ndarray:
    """ε_i ≥ 0 with Σ ε_i = ε minimising Σ w_i·variance_i(ε_i) (``variance`` a function of ε per statistic)."""
    from scipy.optimize import minimize

    w = np.asarray(weights, float)
    m = len(w)
    if m == 1:
        return np.array([epsilon])
    a = np.array([max(v(epsilon) * epsilon**2, 1e-300) for v in variance])  # v ≈ a/ε² near the optimum
    start = (w * a) ** (1 / 3)
    start = epsilon * start / start.sum()

    def objective(x: np.ndarray) -> float:
        return float(sum(wi * v(max(xi, 1e-9)) for wi, v, xi in zip(w, variance, x)))

    res = minimize(objective, start, method="SLSQP", bounds=[(epsilon * 1e-4, epsilon)] * m,
                   constraints=[{"type": "eq", "fun": lambda x: x.sum() - epsilon}],
                   options={"ftol": 1e-12, "maxiter": 200})
    x = res.x if res.success and objective(res.x) <= objective(start) else start
    return np.asarray(x) * epsilon / float(np.sum(x))


def split_rows(unit_variances: Sequence[float], weights: Sequence[float]) -> np.ndarray:
    """Shares ρ_i of the rows (Σ ρ_i = 1) minimising Σ w_i·v_i/ρ_i: ρ_i ∝ √(w_i v_i)."""
    r = np.sqrt(np.asarray(weights, float) * np.asarray(unit_variances, float))
    return r / r.sum()


def check(plan: Plan, rows: Mapping[str, int], epsilon: float) -> PlanCheck:
    """Split ``epsilon`` (per row) among the plan's statistics and predict each one's standard error, from the public
    row count of each column (``rows``: column → n). Nothing is read but those counts; nothing is spent."""
    epsilon = check_epsilon(epsilon)
    stats = plan.statistics
    w = [s.weight for s in stats]
    n = [float(rows[s.column]) for s in stats]

    def var_of(i: int) -> Any:
        return lambda e: _variance(stats[i], e, n[i])[0]

    eps = split_epsilon([var_of(i) for i in range(len(stats))], w, epsilon)
    by_eps = [_variance(s, e, ni) for s, e, ni in zip(stats, eps, n)]
    obj_eps = float(sum(wi * v for wi, (v, _, _) in zip(w, by_eps)))
    unit = [_variance(s, epsilon, ni)[0] * ni for s, ni in zip(stats, n)]  # variance × reports: one report's share
    rho = split_rows(unit, w)
    by_rows = [_variance(s, epsilon, max(1.0, r * ni)) for s, r, ni in zip(stats, rho, n)]
    obj_rows = float(sum(wi * v for wi, (v, _, _) in zip(w, by_rows)))
    if obj_eps <= obj_rows:
        planned = tuple(PlannedStatistic(s, ch, float(e), ni, math.sqrt(v), what)
                        for s, e, ni, (v, ch, what) in zip(stats, eps, n, by_eps))
        return PlanCheck("split-epsilon", epsilon, planned, obj_eps, obj_rows)
    planned = tuple(PlannedStatistic(s, ch, epsilon, r * ni, math.sqrt(v), what)
                    for s, r, ni, (v, ch, what) in zip(stats, rho, n, by_rows))
    return PlanCheck("split-rows", epsilon, planned, obj_rows, obj_eps)


def check_plan(plan: Plan, source: Any, epsilon: float, options: Any = None) -> PlanCheck:
    """:func:`check` for a source: each statistic's column is planned from the Parquet footers (its type checked
    against its channel, its rows counted); no row is read, nothing is spent or recorded."""
    from .options import RunOptions
    from .release import plan as plan_source

    opts = RunOptions.of(options)
    if opts.privacy_unit is not None:
        raise LdpDaskError("a plan's budget split counts ε per row: plans with a privacy unit are not offered yet")
    rows: dict[str, int] = {}
    for s in plan.statistics:
        kind = value_kind_of(s.channel, s.options.get("categories"))
        rows[s.column] = plan_source(source, s.column, kind, opts).n
    return check(plan, rows, epsilon)
