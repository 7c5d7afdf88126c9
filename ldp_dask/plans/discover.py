"""Group keys found privately: a plan whose ``group_by`` says ``groups = "discover"``.

::

    check the whole plan (footers only) and the budget for all of ε ─► release A: the most frequent values of
    each such group column (heavy hitters, at share·ε; its report in ``out/discover/``) ─► the keys: the values
    found whole whose interval excludes 0, most frequent first ─► release B: the plan over those keys, as
    private groups, at (1 − share)·ε (its report in ``out/``)

Release A is the heavy-hitters release of :class:`ldp_dask.HeavyHitters` (Bassily, Nissim, Stemmer & Thakurta 2017
for the prefix search); release B's statistics are grouped by a function of A's output alone (post-processing), so
the two compose as any two releases of the same rows do: a row (a person, with a privacy unit) spends share·ε +
(1 − share)·ε = ε, charged in the ledger as two entries. This is the local analogue of private partition
selection (PipelineDP) and of Tumult Analytics' ``get_groups``: no key reaches the report unless the privatized
reports found it, and no group's size is ever released exactly (the groups are private: every row reports its
(group, value) pair, :class:`ldp_dask.GroupMean`, :class:`ldp_dask.GroupHistogram`).

The budget of every declared dataset the table lies in is checked for the whole ε before release A, so that a
plan refused for its budget spends nothing; once A is charged, a failure of B (a worker's error, an interrupt)
leaves A's ε spent and its report published, and a re-run with the same key reproduces A for free (the ledger's
rule for an identical release).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from .._validation import LdpDaskError, check_epsilon
from ..options import RunOptions
from .model import Plan, Statistic
from .results import PlanRelease

__all__ = ["discovery_plan", "found_keys", "release_discovered", "DISCOVERY_FOLDER"]

#: where release A's report is written, inside the plan's ``out``
DISCOVERY_FOLDER = "discover"


def discovery_plan(plan: Plan) -> Plan:
    """Release A: one heavy-hitters statistic per discovered group column (named ``<column>.keys``), listing as many
    values as its statistics take at most."""
    d = plan.discovery
    assert d is not None
    extra = {} if d.alphabet is None else {"alphabet": d.alphabet}
    return Plan(tuple(Statistic(column, "heavy-hitters", {"top": top, "max_bytes": d.max_bytes, **extra},
                                name=f"{column}.keys")
                      for column, top in plan.discovered.items()))


def found_keys(found: PlanRelease) -> dict[str, list[Any]]:
    """The keys of each column from release A, most frequent first: the values it listed whole (not cut at
    ``max_bytes``) whose interval at its level lies above 0; when none does, the first value listed whole.

    Raises
    ------
    LdpDaskError
        A column none of whose listed values is whole (every frequent value is longer than ``max_bytes``).
    """
    out = {}
    for s in found.statistics:
        est = s.result
        whole = [(label, float(low)) for label, low, cut in zip(est.labels, est.ci_low, est.info["truncated"])
                 if not cut]
        if not whole:
            raise LdpDaskError(f"no value of {s.statistic.column!r} was found whole: every value listed is longer "
                               f"than max_bytes = {est.info['max_bytes']} bytes (the discovery's ε is spent; raise "
                               "max_bytes in the plan's [discover] table)")
        sure = [label for label, low in whole if low > 0]
        out[s.statistic.column] = sure or [whole[0][0]]
    return out


def release_discovered(plan_: Plan, source: Any, epsilon: float, out: str | os.PathLike[str] | None,
                       overwrite: bool, level: float, design: str | None, opts: RunOptions,
                       release_plan: Callable[..., PlanRelease]) -> PlanRelease:
    """Releases A and B of a plan with discovered groups (the module's diagram); ``release_plan`` runs each."""
    from ..ledger import open_ledger
    from .budget import check_plan

    assert plan_.discovery is not None
    epsilon = check_epsilon(epsilon)
    found_eps = epsilon * plan_.discovery.share
    check_plan(plan_, source, epsilon, opts, design)  # the whole plan, over placeholder keys, before anything
    if out is not None and not overwrite:
        _refuse_existing(plan_, out, opts)
    ledger = open_ledger(opts.ledger)
    if ledger is not None:
        _check_budget(ledger, plan_, source, epsilon, opts)
    where = None if out is None else f"{os.fspath(out).rstrip('/')}/{DISCOVERY_FOLDER}"
    # a leftover of a run whose release B failed is replaced: release B's own outputs do not exist (checked above)
    first = release_plan(discovery_plan(plan_), source, found_eps, out=where, overwrite=True, level=level,
                         options=opts)
    keys = found_keys(first)
    second = release_plan(plan_.with_found(keys), source, epsilon - found_eps, out=out, overwrite=overwrite,
                          level=level, design=design, options=opts, discovery=first)
    return second


def _refuse_existing(plan_: Plan, out: Any, opts: RunOptions) -> None:
    """Refuse before release A when release B's outputs exist (B would refuse them after A was charged)."""
    from .._io import check_output

    for path in plan_.targets(out).values():
        if path is not None:
            check_output(path, False, "out", storage_options=opts.storage_options)


def _check_budget(ledger: Any, plan_: Plan, source: Any, epsilon: float, opts: RunOptions) -> None:
    """Refuse before release A when the whole ε would exceed the budget of a dataset declared over the table."""
    from ..ledger import BudgetExceeded
    from ..ledger.budget import overlaps
    from ..release import plan

    root = plan(source, next(iter(plan_.discovered)), "categorical", dataclasses.replace(opts, nulls="other")).root
    share = plan_.discovery.share if plan_.discovery is not None else 0.0
    for d in ledger.datasets():
        if overlaps(d["root"], root):
            spent = ledger.spent(d["root"])
            if spent + epsilon > d["epsilon_limit"] * (1 + 1e-12):
                raise BudgetExceeded(f"the plan (ε {epsilon:g}: its keys found at {epsilon * share:g}"
                                     f", its statistics at the rest) would exceed the budget of dataset "
                                     f"{d['name']!r}: {spent:g} of {d['epsilon_limit']:g} spent; nothing was read")
