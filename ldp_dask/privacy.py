"""The privacy unit as a value, and the one function that says what a release spends per unit.

A release counts ε per *unit*: per row (:class:`Row`), or per person
(:class:`Person`: the column naming the person a row belongs to, and ``k``,
the most rows a person contributes). With a person unit each person keeps at
most k of their rows, chosen by keyed randomness independent of the values
(:mod:`ldp_dask.units`), and each kept row is privatized by the channel at
ε/k. By basic composition of k non-interactive ε/k-LDP reports, everything
released about one person is ε-LDP (docs/privacy.md, "Privacy unit").

:func:`epsilon_per_unit` is where that arithmetic lives — the ledger's
charge, the summary's metadata (plain and partitioned) and the check made
when a summary file is read all call it::

    ε per unit = k · max(ε requested, ε spent) of the channel each kept row runs

where "ε spent" is what the per-row channel computes from its own
sensitivities (never more than requested; the max guards the record against
a channel that would spend less than it says).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._validation import LdpDaskError, check_int

if TYPE_CHECKING:  # the budget rules import this module: it stays free of the channels' imports
    from .channels import Channel

#: What a null in the privacy unit column does: refuse the release, or drop the row (it belongs to no person).
UNIT_NULLS = ("error", "drop")

__all__ = ["UNIT_NULLS", "Row", "Person", "Unit", "unit_of", "central_unit_details", "per_row_channel", "epsilon_per_unit", "ROW_UNIT", "MAX_K"]

#: What a release per row records as its unit.
ROW_UNIT = "row"
#: The largest bound on a person's rows.
MAX_K = 1_000_000


@dataclass(frozen=True)
class Row:
    """ε is counted per row: a person with many rows spends it many times."""

    @property
    def column(self) -> None:
        return None

    @property
    def k(self) -> int:
        return 1

    @property
    def name(self) -> str:
        return ROW_UNIT


@dataclass(frozen=True)
class Person:
    """ε is counted per person, named by ``column``; each person contributes at most ``k`` rows.

    Parameters
    ----------
    column : str
        The column naming the person a row belongs to (integers or strings).
    k : int
        Reports per person, 1–10^6 (default 1), each at ε/k, from min(k, rows) of its rows.
    nulls : {"error", "drop"}
        A row whose unit is null belongs to no person: refused (``"error"``, the default), or dropped before
        anything is released (``"drop"``). Dropping is safe: every person makes exactly k reports, so the number
        released does not count the dropped rows.
    """

    column: str
    k: int = 1
    nulls: str = "error"

    def __post_init__(self) -> None:
        if not (isinstance(self.column, str) and self.column):
            raise LdpDaskError(f"The 'privacy_unit' parameter must be a column name. Got {self.column!r}.")
        if self.column == ROW_UNIT:
            raise LdpDaskError(f"The 'privacy_unit' parameter names a column; {ROW_UNIT!r} is the per-row unit "
                               "(leave privacy_unit unset for it).")
        check_int(self.k, "max_contributions", 1, MAX_K)
        if self.nulls not in UNIT_NULLS:
            raise LdpDaskError(f"The 'unit_nulls' parameter must be one of {', '.join(UNIT_NULLS)}. "
                               f"Got {self.nulls!r} instead.")

    @property
    def name(self) -> str:
        return self.column


Unit = Row | Person


def unit_of(privacy_unit: Any = None, max_contributions: Any = 1, unit_nulls: Any = "error") -> Unit:
    """The unit for the public spelling ``privacy_unit=`` (a column, or None for rows), ``max_contributions=`` and
    ``unit_nulls=``."""
    if isinstance(privacy_unit, (Row, Person)):
        return privacy_unit
    if privacy_unit is None:
        check_int(max_contributions, "max_contributions", 1, MAX_K)
        if max_contributions != 1:
            raise LdpDaskError("The 'max_contributions' parameter needs 'privacy_unit' (the column naming a person).")
        if unit_nulls != "error":
            raise LdpDaskError("The 'unit_nulls' parameter needs 'privacy_unit' (the column naming a person).")
        return Row()
    return Person(privacy_unit, max_contributions, unit_nulls)


def central_unit_details(unit: str | None, k: int, epsilon: float) -> dict[str, Any]:
    """What a central release says of its privacy unit: the unit, its neighbours and, with a person, the k records
    each person is (bounded and padded) and the ε/k each runs at (group privacy), and the population estimated."""
    if unit is None:
        return {"privacy_unit": ROW_UNIT, "neighbours": "one record replaced, n public"}
    return {"privacy_unit": unit, "max_contributions": k, "epsilon_per_record": epsilon / k,
            "neighbours": f"one {unit}'s rows replaced, how many included ({k} records each, from rows chosen at "
                          "random; ε/k per record by group privacy), persons public",
            "population": f"each {unit} weighted equally"}


def per_row_channel(channel: Channel, k: int) -> Channel:
    """The channel each kept row is privatized with: the same parameters at ε/k per row."""
    from .channels import channel_from_params

    if k == 1:
        return channel
    params = channel.params()
    if "epsilon" not in params:  # pragma: no cover - every channel declares its ε
        raise LdpDaskError(f"the {channel.name!r} channel cannot be split across contributions")
    return channel_from_params(channel.name, {**params, "epsilon": channel.epsilon / k})


def epsilon_per_unit(row_channel: Channel, unit: Unit | int) -> float:
    """ε per unit of a release whose kept rows each run ``row_channel``: k · max(ε, ε spent).

    ``unit`` is a :class:`Row`, a :class:`Person`, or the bound k itself (as
    a summary file records it). ``row_channel`` is the channel a kept row
    runs (:func:`per_row_channel`), whose ``epsilon_spent()`` comes from its
    own sensitivities.
    """
    k = unit if isinstance(unit, int) else unit.k
    return k * max(row_channel.epsilon, row_channel.epsilon_spent())
