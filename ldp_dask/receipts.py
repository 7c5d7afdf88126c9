"""What the ledger recorded for a release, riding on the result it released.

Every releasing function (:func:`ldp_dask.privatize`, :func:`ldp_dask.gof.run`,
:func:`ldp_dask.central.quantiles`, :func:`ldp_dask.central.bounds`) returns
its result with ``result.receipt`` (a :class:`Receipt`, or None for
post-processing, which releases nothing new) and ``result.written`` (the
outputs published, ``{label: path}``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .ledger.budget import nights_left, remaining
from .privacy import ROW_UNIT

__all__ = ["Receipt", "Receipted", "attach", "central_spend_line"]

T = TypeVar("T")


def central_spend_line(spend: Mapping[str, Any]) -> str:
    """A dataset's composed central guarantee in words: ``ε 0.031 at δ 1e-06 (the dataset's δ, its central
    budget's) composed over 4 mechanism(s) (budget ε 1 at that δ)``."""
    budget = spend.get("budget")
    of = f" (budget ε {budget['epsilon']:g} at that δ)" if budget else ""
    whose = spend.get("whose", "the dataset's δ")
    return (f"ε {spend['epsilon']:.3g} at δ {spend['delta']:g} ({whose}) composed over {spend['events']} "
            f"mechanism(s){of}")


@dataclass(frozen=True)
class Receipt:
    """What the ledger recorded for one release.

    Attributes
    ----------
    ledger : str or None
        The ledger's location; None when the release was not recorded.
    scope : str
        ``"local"`` or ``"central"``.
    epsilon : float
        ε per privacy unit charged by this release: 0 when it provably
        reproduced a recorded release, or was not recorded.
    reused : bool
        True when an identical release (same key, data, partitioning and parameters) was already recorded.
    dataset : str or None
        The dataset charged: a declared name, or the release's root.
    total, limit : float or None
        The dataset's spend per person after this release (all columns and
        scopes), and its budget. ``total`` is None when the outputs were
        published but the ledger could not be reached to commit the charge
        (``note`` says so: the charge is settled by the ledger's recovery).
    privacy_unit : str
        What ε is counted per: ``"row"`` or the column naming a person.
    key_id, key_source : str
        Public identifier and origin of the key (never the key).
    partitions : tuple of int or None
        A partitioned release's ``(charged, read)``: of the files it read, how
        many were released anew (charged) rather than reproducing a recorded
        partition; None for a release charged as one.
    spend : mapping or None
        A longitudinal release: for a capped series its ``nights``, ``cap``
        and ``max`` (what every person has spent in it: min(cap,
        nights·ε_bits)), with ``capped`` true; for an uncapped one the
        distribution of ε over the persons of its series after it
        (``persons``, ``p50``, ``p90``, ``p99``, ``max``, ``mean``).
        ``epsilon`` is then the increase of its ``max``.
    central : mapping or None
        The central guarantee of the dataset's releases after this one,
        composed (:func:`ldp_dask.ledger.central.central_spend`): ``epsilon``
        at ``delta`` for the same unit, over ``events`` mechanisms, beside its
        central ``budget`` (``epsilon``, ``delta``) if one is declared.
    """

    ledger: str | None
    scope: str
    epsilon: float
    reused: bool
    total: float | None
    limit: float | None
    key_id: str
    key_source: str
    dataset: str | None = None
    privacy_unit: str = ROW_UNIT
    partitions: tuple[int, int] | None = None
    note: str = ""
    spend: Mapping[str, Any] | None = None
    central: Mapping[str, Any] | None = None

    @property
    def remaining(self) -> float | None:
        """ε per person left in the budget after this release (None without a budget or a ledger)."""
        return None if self.limit is None or self.total is None else remaining(self.limit, self.total)

    @property
    def nights_left(self) -> int | None:
        """For a partitioned release (a night of a series) that was charged: how many more such nights the
        budget allows at this night's rate, ⌊remaining / ε charged⌋; None otherwise."""
        left = self.remaining
        if self.partitions is None or left is None or self.epsilon <= 0:
            return None
        return nights_left(left, self.epsilon)

    def line(self) -> str:
        """One line for the operator, e.g. ``ledger: ε 1 per row spent; dataset d now 2 of budget 3 (path)``."""
        if self.ledger is None:
            return (f"ledger: not recorded (ledger=False / --no-ledger): nothing charged, no budget checked; "
                    f"privacy unit: {self.privacy_unit}")
        note = ("identical to a recorded release: no ε spent" if self.reused
                else f"ε {self.epsilon:g} per {self.privacy_unit} spent")
        if self.partitions is not None and self.privacy_unit != ROW_UNIT:  # a unit series: a night is one part
            charged, read = self.partitions
            note = (f"tonight's files released anew as one night over their persons, ε {self.epsilon:g} per "
                    f"{self.privacy_unit} (whatever the number of files)" if charged else
                    "tonight's files reproduced a recorded night: no ε spent" if read else
                    "no file new tonight: no ε spent")
        elif self.partitions is not None:
            charged, read = self.partitions
            note = (f"{charged} of {read} partitions read released anew, ε {self.epsilon:g} per "
                    f"{self.privacy_unit} on their rows" if charged else
                    f"no partition released anew ({read} read reproduced recorded ones): no ε spent")
        if self.spend is not None and not self.reused:
            s = self.spend
            parts = s.get("series", [s])
            spread = "; ".join(series_spend(p, self.privacy_unit) for p in parts)
            note = (f"the largest spend per {self.privacy_unit} of its series grew by ε {self.epsilon:g}: {spread}"
                    + (f" (by statistic; the largest add up to {s.get('max', 0):g})" if len(parts) > 1 else ""))
        limit = (f" of budget {self.limit:g}, remaining {self.remaining:.3g}" if self.limit is not None
                 else " (no budget set)")
        if self.nights_left is not None:
            limit += f"; {self.nights_left} more night(s) fit at ε {self.epsilon:g} a night"
        if self.total is None:  # published, but the ledger could not be reached to commit the charge
            return f"ledger: {note}, {self.note} ({self.ledger})"
        found = f". Note: {self.note}" if self.note else ""
        central = f"; central {central_spend_line(self.central)}" if self.central is not None else ""
        return f"ledger: {note}; dataset {self.dataset} now {self.total:g}{limit}{central} ({self.ledger}){found}"


def series_spend(spread: Mapping[str, Any], unit: str) -> str:
    """One longitudinal series' spend as the ledger recorded it: a capped series' nights, spend and cap (the same
    for every person: no per-person table), or the distribution of an uncapped series' spend over its persons."""
    if spread.get("capped"):
        reached = "reached" if spread.get("max", 0) >= spread.get("cap", 0) * (1 - 1e-12) else "not reached yet"
        return (f"capped series, {spread.get('nights', 0)} night(s): ε {spread.get('max', 0):.3g} per {unit} in all, "
                f"its cap ε {spread.get('cap', 0):.3g} {reached} (every {unit}, whatever their changes)")
    return (f"over its {spread.get('persons', 0):,} persons ε median {spread.get('p50', 0):.3g}, 90% "
            f"{spread.get('p90', 0):.3g}, 99% {spread.get('p99', 0):.3g}, max {spread.get('max', 0):.3g}")


@dataclass(frozen=True)
class Receipted:
    """The receipt and the published outputs of the release a result came from (keyword-only, not compared)."""

    receipt: Receipt | None = field(default=None, compare=False, repr=False, kw_only=True)
    written: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False, kw_only=True)


def attach(result: T, receipt: Receipt | None, written: Mapping[str, str]) -> T:
    """``result`` with ``receipt`` and ``written`` on it (each element of a tuple; other values unchanged)."""
    if isinstance(result, tuple):
        return type(result)(attach(r, receipt, written) for r in result)
    if isinstance(result, Receipted):
        return dataclasses.replace(result, receipt=receipt, written=dict(written))
    return result
