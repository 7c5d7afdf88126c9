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
names a channel with one (histogram, mean, hybrid-mean, rr, hadamard, subset) or a target that chooses one.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import LdpDaskError, check_epsilon, check_probability, check_q
from ..channels import Channel, build_channel
from ..predict import predict
from .split import split_epsilon, split_rows

__all__ = ["Statistic", "Plan", "PlannedStatistic", "PlanCheck", "check", "check_plan", "plan_datasets",
           "split_epsilon", "split_rows"]

#: What a statistic may say besides its column, channel or target, and weight.
_KEYS = {"column", "channel", "target", "weight", "name", "domain", "bins", "categories", "other", "noise",
         "mechanism", "encoding", "group_by", "q", "null", "alpha", "haar_level", "nulls", "groups", "group_kind",
         "top", "alphabet", "max_bytes"}
#: The channel a plan runs for each target: one whose estimate has a closed-form variance (``auto`` chooses among
#: several by their predicted errors, :func:`ldp_dask.channels.choose_channel`). A distribution and its quantiles
#: come from the Laplace histogram (the square wave, ``auto``'s choice for a distribution alone, has no closed form);
#: a goodness-of-fit test from the Haar channel it is calibrated for.
TARGET_CHANNELS = {"distribution": "histogram", "quantiles": "histogram", "mean": "auto", "frequencies": "auto",
                   "gof": "haar", "heavy_hitters": "heavy-hitters"}
#: What each channel a plan may run estimates, when the statistic names the channel rather than a target.
_CHANNEL_TARGETS = {"histogram": "distribution", "mean": "mean", "hybrid-mean": "mean", "rr": "frequencies",
                    "hadamard": "frequencies", "subset": "frequencies", "haar": "gof",
                    "heavy-hitters": "heavy_hitters"}
#: A statistic's keys that are not its channel's options: what its estimate or test takes, and its null policy.
NOT_CHANNEL = _NOT_CHANNEL = ("q", "null", "alpha", "nulls", "target", "haar_level", "group_by", "groups", "group_kind",
                              "top", "alphabet")
#: What a group may be: "private" (the label is privatized with the value) or "public" (declared public by the
#: operator: each group released on its own rows, group sizes released).
GROUP_KINDS = ("private", "public")
#: The targets a private group offers: means (the group-mean channel), and shares of categories or of a
#: distribution's bins within each group (the group-histogram channel).
PRIVATE_TARGETS = ("mean", "frequencies", "distribution")
#: The most keys a group may declare (besides "other").
MAX_GROUP_KEYS = 4095
#: A row split is offered only when every statistic expects at least this many rows (P(none) ≤ e^-30).
MIN_SPLIT_ROWS = 30
#: The largest plan file read (10^4 statistics take about 1 MiB).
MAX_PLAN_BYTES = 16 << 20


@dataclass(frozen=True)
class Statistic:
    """One statistic of a plan: a column, a channel (or ``"auto"`` with a target) and its options, a weight.

    Parameters
    ----------
    column : str
        The column released.
    channel : str
        A channel name (``histogram``, ``mean``, ``hybrid-mean``, ``rr``, ``hadamard``, ``subset``) or ``"auto"``.
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
        if "q" in self.options:
            if self.target != "quantiles":
                raise LdpDaskError(f"statistic {self.label!r} gives 'q', the levels of a 'quantiles' target only")
            check_q(self.options["q"])
        if self.target == "gof":
            from ..gof.nulls import parse_null

            if "null" not in self.options:
                raise LdpDaskError(f"statistic {self.label!r} is a goodness-of-fit test: it needs its 'null' "
                                   "distribution (e.g. null = \"beta(2,2)\" or \"uniform\")")
            parse_null(self.options["null"])
            check_probability(self.options.get("alpha", 0.05), "alpha")
        elif "null" in self.options or "alpha" in self.options:
            raise LdpDaskError(f"statistic {self.label!r} gives 'null' or 'alpha', which only a 'gof' target takes")
        if self.target != "heavy_hitters" and ("top" in self.options or "alphabet" in self.options):
            raise LdpDaskError(f"statistic {self.label!r} gives 'top' or 'alphabet', which only a 'heavy_hitters' "
                               "target takes")
        self._check_group()
        if not (isinstance(self.weight, (int, float)) and not isinstance(self.weight, bool)
                and 0 < self.weight < math.inf):
            raise LdpDaskError(f"The 'weight' of statistic {self.label!r} must be a number > 0. "
                               f"Got {self.weight!r} instead.")

    def _check_group(self) -> None:
        o = self.options
        if "group_by" not in o:
            if "groups" in o or "group_kind" in o:
                raise LdpDaskError(f"statistic {self.label!r} gives 'groups' or 'group_kind' without a 'group_by'")
            return
        if not (isinstance(o["group_by"], str) and o["group_by"]):
            raise LdpDaskError(f"the 'group_by' of statistic {self.label!r} must be a column name. Got "
                               f"{o['group_by']!r} instead.")
        keys = o.get("groups")
        if not (isinstance(keys, list) and 1 <= len(keys) <= MAX_GROUP_KEYS and len(set(map(str, keys))) == len(keys)):
            raise LdpDaskError(f"statistic {self.label!r} groups by {o['group_by']!r}: it needs 'groups', the list of "
                               f"its keys (1 to {MAX_GROUP_KEYS}, distinct), declared in the plan and never read from "
                               "the data; rows with any other label, or none, form the group 'other'")
        kind = o.get("group_kind", "private")
        if kind not in GROUP_KINDS:
            raise LdpDaskError(f"the 'group_kind' of statistic {self.label!r} must be one of {', '.join(GROUP_KINDS)}."
                               f" Got {kind!r} instead.")
        if kind == "private" and (self.target not in PRIVATE_TARGETS or "target" not in o):
            raise LdpDaskError(f"statistic {self.label!r}: a private group_by is offered for the targets "
                               f"{', '.join(PRIVATE_TARGETS)} (a channel over the group and the value together), "
                               "named with target = ...; for quantiles or a test per group, declare "
                               "group_kind = \"public\" if the group label is public")
        if kind == "private" and self.target == "frequencies" and "categories" not in o:
            raise LdpDaskError(f"statistic {self.label!r}: frequencies per private group need their 'categories'")

    @property
    def group(self) -> tuple[str, tuple[Any, ...], bool] | None:
        """``(column, keys, public)`` of a grouped statistic, or None."""
        if "group_by" not in self.options:
            return None
        return (self.options["group_by"], tuple(self.options["groups"]),
                self.options.get("group_kind", "private") == "public")

    def cells(self, epsilon: float, n: int) -> int:
        """A private group's cells: its categories (and "other" when asked), or its distribution's bins (as the
        Laplace histogram chooses them for a typical group's rows when ``bins`` is "auto" or absent)."""
        if self.target == "frequencies":
            return len(self.options["categories"]) + (1 if self.options.get("other") else 0)
        bins = self.options.get("bins")
        if isinstance(bins, int):
            return bins
        domain = self.options.get("domain")
        return int(build_channel("histogram", epsilon, tuple(domain) if domain is not None else None, bins=bins,
                                 n=max(1, n // self.groups)).bins)  # type: ignore[attr-defined]

    @property
    def groups(self) -> int:
        """How many groups its estimates come in: the declared keys and "other" (1 without a group)."""
        g = self.group
        return 1 if g is None else len(g[1]) + 1

    @property
    def label(self) -> str:
        return self.name or f"{self.column}.{self.options.get('target') or self.channel}"

    @property
    def target(self) -> str:
        """What the statistic estimates: ``distribution``, ``quantiles``, ``mean``, ``frequencies``, ``gof`` or
        ``heavy_hitters``."""
        return str(self.options.get("target") or _CHANNEL_TARGETS.get(self.channel, "distribution"))

    @property
    def fill(self) -> Any:
        """The statistic's null policy: the public value that replaces a null (``nulls = 0``), or None (the
        run's own ``--nulls``)."""
        return self.options.get("nulls")

    def channel_options(self) -> dict[str, Any]:
        """The options its channel is built with (the plan's own keys removed)."""
        opts = {k: v for k, v in self.options.items() if k not in _NOT_CHANNEL}
        if self.channel == "auto":
            opts["target"] = self.options.get("target")
        if "haar_level" in self.options:
            opts["level"] = self.options["haar_level"]
        return opts

    def build(self, epsilon: float, n: int) -> Channel:
        """The statistic's channel at ``epsilon`` for ``n`` rows (a public group's: for a typical group's rows)."""
        opts = self.channel_options()
        domain = opts.pop("domain", None)
        bins = opts.pop("bins", None)
        group = self.group
        noise = {"noise": opts["noise"]} if "noise" in opts else {}
        if group is not None and not group[2] and self.target == "mean":  # a private group: (group, value) pairs
            return build_channel("group-mean", epsilon, tuple(domain) if domain is not None else None,
                                 groups=self.groups, **noise)
        if group is not None and not group[2]:  # shares within each private group: (group, cell) pairs
            return build_channel("group-histogram", epsilon, groups=self.groups, cells=self.cells(epsilon, n),
                                 **noise)
        n = max(1, n // self.groups)
        return build_channel(self.channel, epsilon, tuple(domain) if domain is not None else None, bins=bins, n=n,
                             **opts)


#: page stems a statistic may not take: the report's index page and its estimates file
RESERVED_STEMS = frozenset({"index", "estimates"})
#: the longest file name (bytes) the outputs may have: every common file system's limit
MAX_FILE_NAME = 255


@dataclass(frozen=True)
class Plan:
    """The statistics of a report (:func:`Plan.from_toml`, :func:`Plan.from_dict`)."""

    statistics: tuple[Statistic, ...]

    def __post_init__(self) -> None:
        if not self.statistics:
            raise LdpDaskError("A plan needs at least one statistic ([[statistic]] tables in its TOML file).")
        seen: dict[str, int] = {}
        for s in self.statistics:
            seen[s.label] = seen.get(s.label, 0) + 1
        twice = sorted(x for x, c in seen.items() if c > 1)
        if twice:
            raise LdpDaskError(f"A plan names statistic {twice[0]!r} twice; give each a distinct 'name'.")
        self.output_stems()

    def output_stems(self) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
        """The files a release of the plan writes, checked before any work: ``(statistic, suffix, stem)`` of each
        summary (one per public group, suffix ``.KEY``) and ``(statistic, stem)`` of each page. Refuses a name
        whose files would be the report's own (``index``, ``estimates``), two statistics (or a statistic and a
        public group of another) that would write the same file, and a name too long for a file system (255
        bytes a file name)."""
        from .._io import file_stem
        from ..channels.categorical import OTHER

        summaries = [(s.label, suffix, file_stem(s.label + suffix)) for s in self.statistics
                     for suffix in ([""] if s.group is None or not s.group[2]
                                    else [f".{k}" for k in (*s.group[1], OTHER)])]
        pages = [(s.label, file_stem(s.label)) for s in self.statistics]
        for label, stem in pages:
            if stem.lower() in RESERVED_STEMS:
                raise LdpDaskError(f"statistic {label!r}: its page would be {stem}.html, which the report's own "
                                   f"{'index page' if stem.lower() == 'index' else 'estimates file'} uses; give it "
                                   "another 'name'")
        seen: dict[str, tuple[str, str]] = {}
        for label, suffix, stem in summaries:
            other = seen.setdefault(stem.lower(), (label, suffix))
            if other != (label, suffix):
                what = " and ".join(f"{lb!r}" + (f" (its public group {sf[1:]!r})" if sf else "")
                                    for lb, sf in (other, (label, suffix)))
                raise LdpDaskError(f"statistics {what} would both write {stem}.summary.parquet (a public group's key "
                                   "is appended to its statistic's name); rename one with 'name'")
            if len(f"{stem}.summary.parquet".encode()) > MAX_FILE_NAME:
                raise LdpDaskError(f"statistic {label!r}: the file name {stem[:40]}….summary.parquet would be "
                                   f"{len(f'{stem}.summary.parquet'.encode())} bytes, over the {MAX_FILE_NAME} a file "
                                   "system allows; give it a shorter 'name'")
        return summaries, pages

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
            if ("channel" in item) == ("target" in item):
                raise LdpDaskError(f"statistic {i} of {where} must name either a 'channel' or a 'target'.")
            target = item.get("target")
            if target is not None and target not in TARGET_CHANNELS:
                raise LdpDaskError(f"statistic {i} of {where} has target {target!r}; the targets are "
                                   f"{', '.join(TARGET_CHANNELS)}.")
            channel = item.get("channel") or TARGET_CHANNELS[target]
            opts = {k: v for k, v in item.items() if k not in ("column", "channel", "weight", "name")}
            out.append(Statistic(item.get("column", ""), channel, opts, item.get("weight", 1.0), item.get("name")))
        return cls(tuple(out))

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Plan:
        where = os.fspath(path)
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_PLAN_BYTES + 1)  # never the whole of /dev/zero
        except OSError as exc:
            raise LdpDaskError(f"cannot read the plan {where!r}: {exc.strerror}") from None
        if len(raw) > MAX_PLAN_BYTES:
            raise LdpDaskError(f"the plan {where!r} is larger than {MAX_PLAN_BYTES // (1 << 20)} MiB: a plan is a "
                               "short TOML file of [[statistic]] tables")
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise LdpDaskError(f"the plan {where!r} is not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
        except tomllib.TOMLDecodeError as exc:
            raise LdpDaskError(f"the plan {where!r} is not valid TOML: {exc}") from None
        except RecursionError:
            raise LdpDaskError(f"the plan {where!r} nests its tables or arrays too deeply to be a plan") from None
        return cls.from_dict(data, f"the plan {where!r}")


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

    def lines(self) -> list[str]:
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
        if s.group is not None:
            options_["groups"] = typed_categories(list(options_["groups"]), by[s.group[0]])
        typed.append(dataclasses.replace(s, options=options_))
    return out, by, Plan(tuple(typed))


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
    return checked
