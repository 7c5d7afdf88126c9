"""The central guarantee of a dataset's releases, composed (docs/privacy.md, "The central guarantee").

Every release is also centrally differentially private for the same unit: a summary-mode release at the
(ε, δ) its summary states (:mod:`ldp_dask.amplification`), any other at the ε it is charged (an ε-LDP output is
ε-DP, δ = 0; a central release is ε-DP by construction). The ledger records each release's *events*: the
independent mechanisms it consists of, each an (ε, δ) pair (a plan splitting ε is one event per statistic; a plan
splitting rows, or a grouped statistic, one event, the worst of its parallel parts). This module composes the
events of every release that touches a dataset by their privacy-loss distribution (Meiser and Mohammadi 2018):
each event enters as the loss of the dominating pair of an (ε, δ)-DP mechanism, which is what optimal composition
of (ε, δ)-DP mechanisms needs (Kairouz, Oh and Viswanath 2015). Copies of one event (a series of identical nights)
have a binomial loss, composed exactly (:func:`homogeneous`); several kinds of events are composed exactly per kind
and rounded up once onto a grid for their sum (:mod:`.accountant`), in time linear in the number of copies: every
receipt composes its dataset's releases anew.

Pure functions of the recorded releases — no database — like :mod:`.budget`, whose rule for which releases touch a
dataset they share: every release with a charge overlapping its root counts for every person in it (the
conservative rule; a dataset whose rows are followed by location is not tightened here).

Two kinds of releases are not composed as independent events:

* a *longitudinal* release charges the increase of its series' largest spend per person; its nights are one
  mechanism (the memoized reports), whose loss does not split into independent nights. All the longitudinal
  releases of a dataset enter as one pure event, the sum of their charges (basic composition bounds them);
* a privacy-unit release over files (a nightly series) charges each file read anew on its own, since a person may
  be in every file: each such file is one more copy of the release's events.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from .._validation import LdpDaskError
from ..amplification import homogeneous
from .accountant import grouped_epsilon
from .budget import charges_of, over_budget, overlaps, release_of

__all__ = ["compose", "homogeneous", "dataset_events", "central_spend", "report_delta", "delta_label", "encode_events",
           "central_budget", "check_central_budget", "over_central_budgets", "counts", "spend_of_events", "LONGITUDINAL", "DEFAULT_REPORT_DELTA"]

#: what a longitudinal release records in place of its events
LONGITUDINAL = {"longitudinal": True}
#: a dataset without a central budget reports its composed ε at this δ (or at 10× the sum of its releases' δ,
#: where that is larger: composition adds the δ's up)
DEFAULT_REPORT_DELTA = 1e-6


def encode_events(events: Sequence[tuple[float, float]] | None, longitudinal: bool = False) -> str | None:
    """A release's events as the ledger records them (None: the release is one pure event of its charge)."""
    if longitudinal:
        return json.dumps(LONGITUDINAL)
    if events is None:
        return None
    return json.dumps({"events": [[float(e), float(d)] for e, d in events]})


def _round_up(x: float, digits: int = 4) -> float:
    """``x`` rounded up to ``digits`` significant digits (events that differ below that compose as one group)."""
    if x <= 0:
        return 0.0
    scale = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    return math.ceil(x / scale * (1 - 1e-12)) * scale


def dataset_events(rows: Sequence[Mapping[str, Any]], root: str,
                   charges: Sequence[tuple[str, float, Any]] | None = None) -> list[tuple[float, float]]:
    """The (ε, δ) events of every active release with a charge overlapping ``root``, for the most exposed person.

    ``rows`` are the ledger's active releases (``id``, ``root``, ``epsilon``, ``privacy_unit``, ``parts``,
    ``files``, ``central``; ``charges``: :func:`~.budget.charges_of` them, when at hand). A release charged nothing
    here (a free re-run) adds nothing; one recorded without events adds its charge, pure; longitudinal releases add
    one pure event together."""
    top = root.rstrip("/")
    charged: dict[Any, float] = {}
    copies: dict[Any, set[Any]] = {}
    for loc, e, who in charges_of([dict(r) for r in rows]) if charges is None else charges:
        if e > 0 and overlaps(loc, top):
            rid = release_of(who)
            charged[rid] = max(charged.get(rid, 0.0), e)
            copies.setdefault(rid, set()).add(who)
    events: list[tuple[float, float]] = []
    longitudinal = 0.0
    for r in rows:
        if r["id"] not in charged:
            continue
        recorded = json.loads(r["central"]) if r.get("central") else None
        if recorded == LONGITUDINAL:
            longitudinal += charged[r["id"]]
            continue
        mine = ([(float(e), float(d)) for e, d in recorded["events"]] if recorded is not None
                else [(charged[r["id"]], 0.0)])
        events += mine * len(copies[r["id"]])  # a part is a copy only with a privacy unit (charges_of's ids)
    if longitudinal > 0:
        events.append((longitudinal, 0.0))
    return events


def counts(events: Sequence[tuple[float, float]] | Mapping[tuple[float, float], int]) -> Counter[tuple[float, float]]:
    """Events as counts of each (ε, δ): what every function here reads, whatever order they were listed in."""
    return Counter(events) if not isinstance(events, Mapping) else Counter(dict(events))


def report_delta(events: Sequence[tuple[float, float]] | Mapping[tuple[float, float], int],
                 declared: float | None = None) -> float:
    """The δ a dataset's composed ε is stated at, and every central statement of a reading of the dataset (a
    release's receipt, a plan's pages and artifacts): its central budget's δ, else :data:`DEFAULT_REPORT_DELTA` or
    ten times the sum of its events' δ, the larger. (Not the δ each summary states alone: m mechanisms stated at
    δ each compose only at a δ above m·δ.) ``events``: a list, or counts of each."""
    if declared is not None:
        return float(declared)
    total = sum((Fraction(d) * n for (_, d), n in counts(events).items()), Fraction(0))
    return max(DEFAULT_REPORT_DELTA, 10.0 * float(total))


def delta_label(declared: bool, of: str = "the dataset") -> str:
    """How a reading labels its δ (:func:`report_delta`): ``the dataset's δ, its central budget's`` or ``the
    dataset's δ``."""
    return f"{of}'s δ, its central budget's" if declared else f"{of}'s δ"


def compose(events: Sequence[tuple[float, float]] | Mapping[tuple[float, float], int], delta: float) -> float:
    """The smallest ε at which the adaptive composition of ``events`` ((ε, δ)-DP mechanisms) is (ε, ``delta``)-DP.

    Events equal to 4 significant digits (rounded up) compose as one kind. A single mechanism is stated at its own ε
    (at a larger δ it holds a hair less); copies of one kind are composed exactly (:func:`homogeneous`); several
    kinds by their privacy-loss distribution, exact per kind and rounded up onto one grid
    (:func:`~.accountant.grouped_epsilon`: at most the number of kinds × the grid step above the exact ε). Never more
    than basic composition (the sum of the ε, where the δ's add up to at most ``delta``); ``inf`` when the events'
    δ's alone exceed ``delta``. Its cost does not grow with the number of copies beyond their binomials (O(copies)),
    since a receipt composes its dataset's releases on every release.
    """
    live = {ev: n for ev, n in counts(events).items() if (ev[0] > 0 or ev[1] > 0) and n > 0}
    if not live:
        return 0.0
    if sum(live.values()) == 1 and next(iter(live))[1] <= delta:  # one mechanism: its own ε (the accountant's
        return float(next(iter(live))[0])  # import costs 0.8 s)
    groups = _groups(live)
    total = math.fsum(e * c for (e, _), c in sorted(groups.items()))
    basic = total if math.fsum(d * c for (_, d), c in sorted(groups.items())) <= delta else math.inf
    if len(groups) == 1:  # k copies of one mechanism: exact, in O(k)
        ((e, d), count), = groups.items()
        return float(min(homogeneous(e, d, count, delta), basic))
    return float(min(grouped_epsilon(groups, delta), basic))


def basic_composition(events: Mapping[tuple[float, float], int], delta: float) -> float:
    """The sum of the events' ε where their δ's add up to at most ``delta`` (else ``inf``): :func:`compose` never
    states more (it takes the smaller), so a budget this fits needs no accountant."""
    groups = _groups(events)
    if math.fsum(d * c for (_, d), c in sorted(groups.items())) > delta:
        return math.inf
    return math.fsum(e * c for (e, _), c in sorted(groups.items()))


def _groups(events: Sequence[tuple[float, float]] | Mapping[tuple[float, float], int]) -> Counter[tuple[float, float]]:
    """The events that count (ε or δ above 0), rounded up as :func:`compose` groups them: ε to 4 significant
    digits, δ to 2."""
    groups: Counter[tuple[float, float]] = Counter()
    for (e, d), n in counts(events).items():
        if (e > 0 or d > 0) and n > 0:
            groups[(_round_up(e), _round_up(d, 2))] += n
    return groups


def central_spend(rows: Sequence[Mapping[str, Any]], root: str, budget: tuple[float, float] | None = None,
                  charges: Sequence[tuple[str, float, Any]] | None = None) -> dict[str, Any]:
    """A dataset's composed central spend: ``epsilon`` at ``delta`` (:func:`report_delta`) over its ``releases``
    events, beside its central ``budget`` (ε, δ) if declared."""
    return spend_of_events(counts(dataset_events(rows, root, charges)), budget)


def spend_of_events(events: Mapping[tuple[float, float], int], budget: tuple[float, float] | None,
                    composed: Callable[[Mapping[tuple[float, float], int], float], float] = compose) -> dict[str, Any]:
    """:func:`central_spend` of a dataset's events, as counts of each (ε, δ) (``composed``: :func:`compose`, or a
    memo of it)."""
    delta = report_delta(events, budget[1] if budget else None)
    return {"epsilon": composed(events, delta), "delta": delta, "events": int(sum(events.values())),
            "whose": delta_label(budget is not None),
            "budget": None if budget is None else {"epsilon": float(budget[0]), "delta": float(budget[1])}}


def check_central_budget(central: tuple[float, float] | None) -> tuple[float | None, float | None]:
    """A central budget (ε, δ) as declared, checked: ``(None, None)`` for none."""
    if central is None:
        return None, None
    if not (isinstance(central, (tuple, list)) and len(central) == 2):
        raise LdpDaskError(f"The 'central' parameter must be a pair (ε, δ). Got {central!r} instead.")
    eps, delta = central
    if not (isinstance(eps, (int, float)) and not isinstance(eps, bool) and 0 <= eps < math.inf):
        raise LdpDaskError(f"The central budget's ε must be a finite number >= 0. Got {eps!r} instead.")
    if not (isinstance(delta, (int, float)) and not isinstance(delta, bool) and 0 < delta < 1):
        raise LdpDaskError(f"The central budget's δ must be a number in (0, 1). Got {delta!r} instead.")
    return float(eps), float(delta)


def central_budget(dataset: Mapping[str, Any]) -> tuple[float, float] | None:
    """A declared dataset's central budget (ε, δ), or None."""
    if dataset.get("central_epsilon") is None:
        return None
    return float(dataset["central_epsilon"]), float(dataset["central_delta"])


def over_central_budgets(events_of: Callable[[str], Mapping[tuple[float, float], int]],
                         datasets: Sequence[Mapping[str, Any]], what: str = "its releases with this one",
                         composed: Callable[[str], Callable[[Mapping[tuple[float, float], int], float], float]]
                         | None = None) -> str | None:
    """Why the releases pass the central budget a dataset of ``datasets`` declares (``events_of(root)``: their
    events on a dataset's root, as counts; ``what`` names them in the message), or None when every one fits."""
    for d in datasets:
        budget = central_budget(d)
        if budget is None:
            continue
        events = events_of(d["root"])
        if basic_composition(events, budget[1]) <= budget[0]:  # composition is never above the sum: it fits
            continue
        spend = spend_of_events(events, budget, compose if composed is None else composed(d["root"]))
        if over_budget(spend["epsilon"], budget[0]):
            return (f"the dataset {d['name']!r} has a central budget of ε {budget[0]:g} at δ {budget[1]:g}, and "
                    f"{what} compose to ε {spend['epsilon']:.4g} at that δ")
    return None
