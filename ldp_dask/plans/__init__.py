"""Plans: many statistics of one table as one release (docs/how-to/plans.md).

* :mod:`.model` — a plan's statistics (:class:`Plan`, from TOML): targets, channels, groups, output names;
* :mod:`.budget` — each statistic's predicted error, the budget split and the checks (:func:`check`,
  :func:`check_plan`), the datasets a plan reads;
* :mod:`.split` — how ε (or the rows) is shared among the statistics;
* :mod:`.tasks` — what one task of a plan does on a worker: read its pieces' columns once, feed every statistic;
* :mod:`.discover` — a plan whose groups' keys are found privately first (``groups = "discover"``);
* :mod:`.run` — :func:`release_plan`: the plan as one release, per row, per person, longitudinal or a night of a
  series;
* :mod:`.bounded` — a plan's statistics over persons bounded once (with a unit, whole or a night);
* :mod:`.nights` — a night of an incremental plan with a privacy unit (tonight's files bounded together);
* :mod:`.series` — a night of an incremental plan (each file a partition kept in every statistic's summary);
* :mod:`.results` — what a released plan is (:class:`PlanRelease`, :class:`StatisticRelease`) and how its
  statistics are estimated from their summaries.
"""

from __future__ import annotations

from .budget import (
    PlanCheck,
    PlannedStatistic,
    check,
    check_plan,
    check_unit_plan,
    check_units,
    plan_datasets,
    split_epsilon,
    split_rows,
)
from .model import Discovery, Plan, Statistic
from .results import PlanRelease, StatisticRelease
from .run import release_plan

__all__ = ["Plan", "Statistic", "Discovery", "PlannedStatistic", "PlanCheck", "check", "check_plan", "check_units",
           "check_unit_plan", "plan_datasets", "split_epsilon", "split_rows", "release_plan", "PlanRelease",
           "StatisticRelease"]
