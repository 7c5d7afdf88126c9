"""The one release path. Every release — CLI, Python API, flows, goodness-of-fit, central quantiles — runs here.

::

    declare and check the outputs ─► resolve the key (driver only) ─► reserve ε in the ledger
        ─► compute (the Dask map/reduce and what follows it) ─► write every output beside its target
        ─► publish the outputs (rename into place) ─► commit the charge

The rules about releases are written here once:

* **Refusals come before work.** An output that exists (without
  ``overwrite``) and a release that would exceed its budget
  (:class:`~ldp_dask.ledger.BudgetExceeded`) are refused before any data is read.
* **Nothing is charged unless everything is published.** Any exception — bad
  data found on a worker, a failed write, an interrupt — removes what was
  staged and aborts the reservation: a failed release leaves no file at any
  target and no entry in the ledger.
* **What a re-run costs** is the ledger's rule (:meth:`~ldp_dask.ledger.Ledger.reserve`):
  the same key, dataset, column and parameters reproduce the same release, so
  it is recorded without a new charge.
* **The key never leaves the driver.** It is resolved here and handed to the
  compute step, which derives per-partition keys from it
  (:mod:`ldp_dask.noise`); workers never see it.

Post-processing (estimates, tests from a summary, reports) spends nothing and
writes through :func:`publish` alone, with the same staging.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

from ._io import StagedOutputs
from ._validation import LdpDaskError
from .ledger import SCOPES, Ledger, Reservation, open_ledger
from .noise import Secret
from .options import RunOptions
from .source import Dataset, open_source

__all__ = ["Charge", "Receipt", "Released", "release", "publish", "plan", "Outputs"]

R = TypeVar("R")

#: Staged outputs of one release (see :class:`ldp_dask._io.StagedOutputs`).
Outputs = StagedOutputs


@dataclass(frozen=True)
class Charge:
    """What a release spends: ε in a scope, for a mechanism with its public parameters.

    The ledger charges it per dataset (structural fingerprint) and column.
    """

    scope: str
    mechanism: str
    params: Mapping[str, Any]
    epsilon: float

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise LdpDaskError(f"The 'scope' parameter must be one of {', '.join(SCOPES)}. Got {self.scope!r} instead.")


@dataclass(frozen=True)
class Receipt:
    """What the ledger recorded for one release.

    Attributes
    ----------
    ledger : str or None
        The ledger file; None when the release was not recorded.
    scope : str
        ``"local"`` or ``"central"``.
    epsilon : float
        ε charged by this release: 0 when it reproduced a recorded release or
        was not recorded.
    reused : bool
        True when an identical release (same key, data and parameters) was already recorded.
    total, limit : float or None
        The dataset-and-column's spend in this scope after this release, and its budget.
    key_id, key_source : str
        Public identifier and origin of the key (never the key).
    """

    ledger: str | None
    scope: str
    epsilon: float
    reused: bool
    total: float | None
    limit: float | None
    key_id: str
    key_source: str

    def line(self) -> str:
        """One line for the operator, e.g. ``ledger: ε 1 spent; local total now 2 of budget 3 (path)``."""
        if self.ledger is None:
            return "ledger: not recorded (no ledger)"
        note = "identical to a recorded release: no ε spent" if self.reused else f"ε {self.epsilon:g} spent"
        limit = f" of budget {self.limit:g}" if self.limit is not None else ""
        return f"ledger: {note}; {self.scope} total now {self.total:g}{limit} ({self.ledger})"


@dataclass(frozen=True)
class Released(Generic[R]):
    """A result, the ledger's receipt (None for post-processing, which releases nothing new) and the outputs
    published (``{label: path}``)."""

    result: R
    receipt: Receipt | None
    written: dict[str, str] = field(default_factory=dict)


def plan(source: Any, column: str | None, value_kind: str, options: RunOptions) -> Dataset:
    """Plan ``source`` into partitions (metadata only; a planned :class:`~ldp_dask.source.Dataset` passes through)."""
    return open_source(source, column, options.partition_rows, options.storage_options, value_kind=value_kind)


def _location(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)


def publish(targets: Mapping[str, str | os.PathLike[str] | None], produce: Callable[[StagedOutputs], R],
            *, overwrite: bool = False, storage_options: Mapping[str, Any] | None = None) -> tuple[R, dict[str, str]]:
    """Declare ``targets``, run ``produce(outputs)`` (which computes and writes them), then publish them all.

    On any exception the staged outputs are removed and nothing is published.
    Returns ``produce``'s result and ``{label: path}`` of the published outputs.
    """
    outputs = StagedOutputs(overwrite, storage_options)
    for label, path in targets.items():
        outputs.declare(label, path)
    try:
        result = produce(outputs)
        written = outputs.publish()
    except BaseException:
        outputs.discard()
        raise
    return result, written


def release(dataset: Dataset, charge: Charge, compute: Callable[[Secret, StagedOutputs], R],
            options: RunOptions, *, targets: Mapping[str, str | os.PathLike[str] | None] | None = None,
            write: Callable[[R, StagedOutputs], None] | None = None, overwrite: bool = False) -> Released[R]:
    """Release ``compute``'s result for ``dataset``: check, reserve, compute, write, publish, commit.

    Parameters
    ----------
    dataset : Dataset
        The planned source (:func:`plan`): its fingerprint and column key the ledger.
    charge : Charge
        What the release spends.
    compute : callable ``(secret, outputs) -> result``
        The work: receives the resolved key and the staged outputs (a
        directory output is filled during the work, e.g. privatized rows).
    options : RunOptions
        Key, ledger and the run's other options.
    targets : mapping of label to path, optional
        The release's outputs (None: not requested); checked before any work.
    write : callable ``(result, outputs)``, optional
        Writes the result's files with :meth:`StagedOutputs.write`.
    overwrite : bool
        Replace existing outputs.

    Returns
    -------
    Released
        The result, the ledger's receipt and the published outputs.
    """
    secret = options.key()
    ledger = open_ledger(options.ledger)
    first = next((os.fspath(p) for p in (targets or {}).values() if p is not None), None)
    reservation: list[Reservation] = []

    def produce(outputs: StagedOutputs) -> R:
        if ledger is not None:  # the outputs are checked by now: refuse an over-budget release before any work
            reservation.append(ledger.reserve(
                fingerprint=dataset.fingerprint, column=dataset.column, scope=charge.scope,
                channel=charge.mechanism, params=dict(charge.params), epsilon=charge.epsilon,
                key_id=secret.key_id, dataset=dataset.description, output=_location(first) if first else None,
                flow_run_id=options.flow_run_id, reproducible=secret.reproducible))
        result = compute(secret, outputs)
        if write is not None:
            write(result, outputs)
        return result

    try:
        result, written = publish(targets or {}, produce, overwrite=overwrite, storage_options=options.storage_options)
    except BaseException:
        if reservation:
            ledger.abort(reservation[0])  # type: ignore[union-attr]
        raise
    if reservation:
        ledger.commit(reservation[0])  # type: ignore[union-attr]
    return Released(result, _receipt(ledger, reservation[0] if reservation else None, charge, secret), written)


def _receipt(ledger: Ledger | None, r: Reservation | None, charge: Charge, secret: Secret) -> Receipt:
    if ledger is None or r is None:
        return Receipt(None, charge.scope, 0.0, False, None, None, secret.key_id, secret.source)
    return Receipt(str(ledger.path), charge.scope, r.epsilon, r.reused, r.spent_before + r.epsilon, r.limit,
                   secret.key_id, secret.source)

