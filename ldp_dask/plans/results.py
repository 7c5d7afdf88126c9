"""What a released plan returns: per statistic its summary (or per public group), ε, share of the rows and
results; for the whole plan the design, ε charged, the ledger's receipt and the outputs published; and how a
statistic's summaries become its results (:func:`statistic_release`), for a plan and for a night of a series.

Every result here is post-processing of the plan's summaries: printing, saving or rendering them spends nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..channels.categorical import OTHER
from ..noise import TAG_MODULUS
from ..outputs import Described, Description, Table, jsonable, restated
from ..privacy import ROW_UNIT
from ..receipts import Receipted
from ..summary import Summary
from .model import Statistic

__all__ = ["GroupRelease", "PublicGroups", "StatisticRelease", "PlanRelease", "headline", "statistic_metadata",
           "plan_content_tag", "cells_of", "group_keys", "group_metadata", "statistic_release"]


def headline(result: Any) -> str:
    """A result's one line (its headline, else its title)."""
    d = result.describe()
    return d.headline or d.title


@dataclass(frozen=True)
class GroupRelease:
    """One public group of a statistic: its key (``"__other__"`` for the rest), its summary, its results."""

    key: Any
    summary: Summary
    result: Any
    quantiles: Any = None

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"group": self.key, "n": self.summary.n, "result": self.result.to_dict(),
                         "quantiles": None if self.quantiles is None else self.quantiles.to_dict()})


@dataclass(frozen=True)
class PublicGroups(Described):
    """A statistic's results per public group: each group released on its own rows, whose number is released."""

    column: str
    by: str
    groups: tuple[GroupRelease, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "public-groups", "group_by": self.by, "groups": [g.to_dict() for g in self.groups]}

    def to_table(self) -> Any:
        """Every group's tidy table (its result's ``to_table()``) one under the other, with ``group`` (the key),
        ``group_by`` and ``group_rows`` (its exact rows) first; columns one group lacks are null there (a group
        with no rows has no estimate)."""
        import pyarrow as pa

        tables = []
        for g in self.groups:
            t = g.result.to_table()
            t = t.add_column(0, "group_rows", pa.array([g.summary.n] * t.num_rows, pa.int64()))
            t = t.add_column(0, "group_by", pa.array([self.by] * t.num_rows, pa.string()))
            tables.append(t.add_column(0, "group", pa.array([str(g.key)] * t.num_rows, pa.string())))
        return pa.concat_tables([t.replace_schema_metadata(None) for t in tables], promote_options="permissive")

    def describe(self) -> Description:
        rows = tuple((str(g.key), f"{g.summary.n:,}", headline(g.result)) for g in self.groups)
        return Description(
            f"{self.column} per {self.by} (public group)",
            f"{len(self.groups)} groups, each released on its own rows",
            (("group sizes", f"released exactly: {self.by} was declared public, so how many rows each key has is "
                             "published with its estimate"),),
            Table((self.by, "rows", "result"), rows))


@dataclass(frozen=True)
class StatisticRelease:
    """One statistic of a released plan: its summary (None for a public group: one per group, in ``groups``), its
    ε and share of the rows, its predicted SE, and what was computed from it (an estimate, local quantiles, a
    goodness-of-fit test, group means, or :class:`PublicGroups`)."""

    statistic: Statistic
    summary: Summary | None
    epsilon: float
    share: float | None
    predicted_se: float
    result: Any
    quantiles: Any = None
    groups: tuple[GroupRelease, ...] = ()

    @property
    def label(self) -> str:
        return self.statistic.label

    @property
    def summaries(self) -> list[tuple[str, Summary]]:
        """``(suffix, summary)`` of each summary: ``("", s)``, or one per public group (``"." + key``)."""
        if self.summary is not None:
            return [("", self.summary)]
        return [(f".{g.key}", g.summary) for g in self.groups]

    @property
    def n(self) -> int:
        """The rows it was released from (all its groups')."""
        return sum(s.n for _, s in self.summaries)

    @property
    def channel_name(self) -> str:
        return self.summaries[0][1].channel.name

    def read_at(self, reading: tuple[float, str]) -> StatisticRelease:
        """This statistic with its summaries carrying ``reading`` (the δ of the plan's reading and its label) and
        its results' central statements restated at it."""
        if self.summary is not None:
            summary = dataclasses.replace(self.summary, reading=reading)
            return dataclasses.replace(self, summary=summary, result=restated(self.result, summary),
                                       quantiles=restated(self.quantiles, summary))
        groups = []
        for g in self.groups:
            summary = dataclasses.replace(g.summary, reading=reading)
            groups.append(dataclasses.replace(g, summary=summary, result=restated(g.result, summary),
                                              quantiles=restated(g.quantiles, summary)))
        return dataclasses.replace(self, groups=tuple(groups))

    def to_dict(self) -> dict[str, Any]:
        ch = self.summaries[0][1].channel
        return {"name": self.label, "column": self.statistic.column, "target": self.statistic.target,
                "group_by": None if self.statistic.group is None else self.statistic.group[0],
                "group_kind": None if self.statistic.group is None else
                ("public" if self.statistic.group[2] else "private"),
                "channel": ch.name, "params": ch.params(), "epsilon": self.epsilon, "share_of_rows": self.share,
                "n": self.n, "predicted_se": self.predicted_se, "result": self.result.to_dict(),
                "quantiles": None if self.quantiles is None else self.quantiles.to_dict()}


@dataclass(frozen=True)
class PlanRelease(Described, Receipted):
    """A released plan: the design chosen, the total ε per row charged, and each statistic's release.

    ``receipt`` is the ledger's one entry for the whole plan; ``written`` the outputs published (a summary per
    statistic or public group, a page per statistic, the index page and ``estimates.json``); ``reading`` the δ
    (and its label) its central statements are read at (:meth:`reading_delta`), set by the release path."""

    design: str
    epsilon: float
    charged: float
    statistics: tuple[StatisticRelease, ...]
    level: float
    reading: tuple[float, str] | None = field(default=None, compare=False, repr=False, kw_only=True)
    #: the release that found the keys of its ``groups = "discover"`` columns (:mod:`ldp_dask.plans.discover`),
    #: charged apart, before this one
    discovery: PlanRelease | None = field(default=None, compare=False, repr=False, kw_only=True)

    def __getitem__(self, label: str) -> StatisticRelease:
        for s in self.statistics:
            if s.label == label:
                return s
        raise KeyError(f"the plan has no statistic {label!r}; it has {', '.join(s.label for s in self.statistics)}")

    def central_events(self) -> list[tuple[float, float]]:
        """The central (ε, δ) of each independent mechanism of the plan, as the ledger composes them
        (:mod:`ldp_dask.ledger.central`): splitting ε, one per statistic; splitting rows, one for the plan (each
        row reports one statistic, chosen independently of the data: parallel composition). A statistic's public
        groups hold disjoint rows: the worst of their summaries' (:func:`~ldp_dask.amplification.central_event`)."""
        from ..amplification import central_event, worst_event

        per = [worst_event(central_event(x) for _, x in s.summaries) for s in self.statistics]
        return per if self.design == "split-epsilon" else [worst_event(per)]

    def to_dict(self) -> dict[str, Any]:
        r = self.receipt
        return {"design": self.design, "epsilon": self.epsilon, "charged": self.charged, "level": self.level,
                "statistics": [s.to_dict() for s in self.statistics],
                "receipt": None if r is None else dataclasses.asdict(r), "written": dict(self.written),
                **({} if self.discovery is None else {"discovery": self.discovery.to_dict(),
                                                      "found": self.found})}

    @property
    def found(self) -> dict[str, list[Any]]:
        """The keys of each group column found privately (none without a discovery)."""
        return {s.statistic.options["group_by"]: list(s.statistic.group[1]) for s in self.statistics
                if self.discovery is not None and s.statistic.group is not None
                and s.statistic.options["group_by"] in {x.statistic.column for x in self.discovery.statistics}}

    @property
    def unit(self) -> str:
        """What ε is counted per: ``"row"``, or the column naming a person."""
        return self.statistics[0].summaries[0][1].privacy_unit

    def describe(self) -> Description:
        unit = self.unit
        first = self.statistics[0].summaries[0][1]
        nights = len(first.partitions) if unit != "row" and first.partitions else 0
        if unit != "row":
            k = int(first.metadata.get("max_contributions", 1))
            how = (f"every {unit} makes {k} report{'s' if k > 1 else ''} to every statistic (its rows bounded by "
                   "keyed randomness), at the ε shown per {unit} (their sum is charged; each " + unit +
                   " weighted equally)").replace("{unit}", unit)
            if nights:  # a night of an incremental series with a unit: tonight's files bounded together
                how = (f"tonight's files bounded together, {how.replace('every statistic', 'every statistic tonight')}"
                       f"; the summaries keep {nights} night{'s' if nights > 1 else ''}, each released once")
        else:
            how = ("every row reports every statistic, at the ε shown (their sum is charged)"
                   if self.design == "split-epsilon" else
                   "every row reports one statistic, chosen by a keyed draw, at the ε shown (the largest is charged)")
        rows = tuple((s.label, s.channel_name, f"{s.epsilon:.4g}", f"{s.n:,}", headline(s.result))
                     for s in self.statistics)
        rate = f"ε {self.charged:g} per {unit}" + (" a night" if nights else "")
        facts: tuple[tuple[str, str], ...] = (("design", self.design), ("confidence", f"{self.level:g}"),
                                              ("central guarantee", self.central_line()))
        if self.discovery is not None:
            d = self.discovery
            rate = f"{rate} (and ε {d.charged:g} before, finding its groups' keys: ε {d.charged + self.charged:g} in all)"
            facts += tuple((f"keys of {column}", f"{len(keys)} found privately at ε {d.charged:g} per {unit} "
                            f"(heavy hitters; the report in discover/): {', '.join(map(str, keys[:20]))}"
                            + (" …" if len(keys) > 20 else ""))
                           for column, keys in self.found.items())
        return Description(f"Plan of {len(self.statistics)} statistics", f"{rate}; {how}", facts,
                           Table(("statistic", "channel", "ε", "reports", "result"), rows))

    def reading_delta(self) -> tuple[float, str]:
        """The one δ every central statement of the plan's pages and artifacts is stated at, and its label: its
        dataset's (the receipt's composition: the central budget's δ, else :func:`report_delta`), else, released
        without a ledger, the plan's own composition's."""
        from ..ledger.central import delta_label, report_delta

        if self.reading is not None:
            return self.reading
        spend = self.receipt.central if self.receipt is not None else None
        if spend is not None:
            return float(spend["delta"]), str(spend.get("whose", delta_label(False)))
        return report_delta(self.central_events()), delta_label(False, "the plan")

    def central_line(self) -> str:
        """The plan's central guarantee in words: its :meth:`central_events` composed as the ledger composes a
        dataset's (:func:`ldp_dask.ledger.central.compose`), at :meth:`reading_delta`."""
        from ..ledger.central import compose

        events = self.central_events()
        delta, whose = self.reading_delta()
        return (f"ε {compose(events, delta):.3g} at δ {delta:g} ({whose}) per {self.unit}, {len(events)} "
                "mechanism(s) composed (each statistic's page states its own at the same δ)")

    def with_metadata(self, extra: dict[str, Any]) -> PlanRelease:
        """This plan with ``extra`` added to every summary's metadata (each statistic's, each public group's)."""
        def one(s: StatisticRelease) -> StatisticRelease:
            if s.summary is not None:
                return dataclasses.replace(s, summary=s.summary.with_metadata(extra))
            return dataclasses.replace(s, groups=tuple(dataclasses.replace(g, summary=g.summary.with_metadata(extra))
                                                       for g in s.groups))

        return dataclasses.replace(self, statistics=tuple(one(s) for s in self.statistics))

    def __post_init__(self) -> None:
        """Every statistic's summary and results are read at the plan's one δ (:meth:`reading_delta`)."""
        reading = self.reading_delta()
        object.__setattr__(self, "statistics", tuple(s.read_at(reading) for s in self.statistics))


def statistic_metadata(s: Statistic, metadata: dict[str, Any], channel: Any, epsilon: float, design: str,
                       share: float | None, count: int, charged: float) -> dict[str, Any]:
    """A plan statistic's summary metadata: the release's, with its ε, its place in the plan, its group, and a
    private group's cells."""
    metadata.update(privacy_unit=ROW_UNIT, max_contributions=1, epsilon_per_unit=epsilon,
                    plan={"statistic": s.label, "target": s.target, "design": design, "share_of_rows": share,
                          "statistics": count, "epsilon_charged": charged})
    if s.group is not None:
        metadata["group"] = {"column": s.group[0], "kind": "public" if s.group[2] else "private",
                             "labels": [*s.group[1], OTHER]}
    spec = cells_of(s, channel)
    if spec is not None:
        metadata["cells"] = ({"kind": "bins", "domain": [spec[1], spec[2]], "bins": spec[3]} if spec[0] == "bins" else
                             {"kind": "categories", "labels": [*spec[1], *([OTHER] if spec[2] else [])]})
    return metadata


def cells_of(s: Statistic, channel: Any) -> tuple[Any, ...] | None:
    """A private group's cells, as its tasks map values to them (:class:`ldp_dask.plans.tasks.Grouping`); None for
    any other statistic."""
    if getattr(channel, "name", None) != "group-histogram":
        return None
    if s.target == "frequencies":
        return ("categories", tuple(s.options["categories"]), bool(s.options.get("other")))
    lo, hi = s.options["domain"]
    return ("bins", float(lo), float(hi), int(channel.cells))


def group_keys(s: Statistic) -> tuple[Any, ...]:
    """A grouped statistic's groups: its declared keys, then "other"."""
    assert s.group is not None
    return (*s.group[1], OTHER)


def group_metadata(metadata: dict[str, Any], key: Any) -> dict[str, Any]:
    """A public group's summary metadata: its statistic's, naming the group."""
    return {**metadata, "group": {**metadata["group"], "key": key}}


def statistic_release(s: Statistic, made: Summary | list[Summary], epsilon: float, share: float | None,
                      predicted: float, level: float) -> StatisticRelease:
    """A statistic's release from its summary, or from its public groups' summaries (one per key and "other")."""
    if isinstance(made, Summary):
        return _post_process(s, made, epsilon, share, predicted, level)
    groups = []
    for summary in made:
        one = _post_process(s, summary, epsilon, share, predicted, level)
        groups.append(GroupRelease(summary.metadata["group"]["key"], summary, one.result, one.quantiles))
    assert s.group is not None
    return StatisticRelease(s, None, epsilon, share, predicted, PublicGroups(s.column, s.group[0], tuple(groups)),
                            groups=tuple(groups))


def _post_process(s: Statistic, summary: Summary, epsilon: float, share: float | None, predicted: float,
                  level: float) -> StatisticRelease:
    """What the plan computes from a statistic's summary: its estimate, quantiles or test (no further ε)."""
    from ..estimators import estimate, local_quantiles

    quantiles = None
    result: Any
    if summary.n == 0:  # a declared public group (or "other") with no rows: a result, the rest is published
        from ..policy import warn

        key = summary.metadata.get("group", {}).get("key")
        warn(f"the statistic {s.label!r} has no rows in its group {key!r}: released as 'no rows' (no estimate; every "
             "interval is the whole feasible range)")
    if s.target == "gof":
        from ..gof import test

        result = test(summary, s.options["null"], level=float(s.options.get("alpha", 0.05)))
    elif s.target == "heavy_hitters" and summary.n > 0:
        result = estimate(summary, level=level, top=int(s.options.get("top", 10)),
                          **({"alphabet": s.options["alphabet"]} if "alphabet" in s.options else {}))
    else:
        result = estimate(summary, level=level)
        if s.target == "quantiles":
            quantiles = local_quantiles(summary, **({"q": s.options["q"]} if "q" in s.options else {}), level=level)
    return StatisticRelease(s, summary, epsilon, share, predicted, result, quantiles)


def plan_content_tag(result: PlanRelease) -> str:
    """A plan's keyed content tag: its summaries' tags, added (re-running the same plan on the same data is free)."""
    tags = [int(x.content_tag or "0", 16) for s in result.statistics for _, x in s.summaries]
    return f"{sum(tags) % TAG_MODULUS:064x}"
