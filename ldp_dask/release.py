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
  target and no entry in the ledger. SIGTERM, SIGHUP and SIGINT are such
  interrupts until the charge is settled; from then on they wait until the
  outputs are published and the charge committed (:mod:`ldp_dask._signals`).
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

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import fsspec

from ._io import StagedOutputs, resolve_root
from ._signals import terminations
from ._validation import LdpDaskError
from .ledger import LEDGER_STAMP, ROW_UNIT, SCOPES, Ledger, LedgerError, Part, Reservation, open_ledger
from .ledger.memos import MemoUpdate
from .locations import ledger_files, listing
from .noise import Secret
from .options import RunOptions
from .policy import check_epsilon_spent, warn
from .receipts import Receipt, attach
from .source import Dataset, open_source

__all__ = ["Charge", "Receipt", "Released", "release", "publish", "plan", "Outputs"]

R = TypeVar("R")

#: Staged outputs of one release (see :class:`ldp_dask._io.StagedOutputs`).
Outputs = StagedOutputs


@dataclass(frozen=True)
class Charge:
    """What a release spends: ε per privacy unit in a scope, for a mechanism with its public parameters.

    ``context`` holds whatever else decides the output (mode, clipping, ...):
    with the key, the partitioning and the parameters it forms the release
    key, so that only a provably identical re-run is free.
    """

    scope: str
    mechanism: str
    params: Mapping[str, Any]
    epsilon: float
    context: Mapping[str, Any] = field(default_factory=dict)
    #: a partitioned release's parts (one per file it reads, :class:`~ldp_dask.ledger.Part`), each charged on its
    #: own location; None: the release is charged as one, on the dataset's root
    parts: tuple[Part, ...] | None = None
    #: capped longitudinal series the release continues, ``(series, cap, ε_bits)`` each: the ledger adds what their
    #: next nights cost (:func:`ldp_dask.ledger.memos.capped_increase`) to ``epsilon``, the rest of the charge
    capped: tuple[tuple[str, float, float | None], ...] = ()

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise LdpDaskError(f"The 'scope' parameter must be one of {', '.join(SCOPES)}. Got {self.scope!r} instead.")


@dataclass(frozen=True)
class Released(Generic[R]):
    """A result, the ledger's receipt (None for post-processing, which releases nothing new) and the outputs
    published (``{label: path}``): what :func:`release` returns inside the package."""

    result: R
    receipt: Receipt | None
    written: dict[str, str] = field(default_factory=dict)

    def attach(self) -> R:
        """The result with the receipt and the outputs riding on it (:class:`~ldp_dask.receipts.Receipted`; a
        tuple of results gets them on each): what the public functions return."""
        return attach(self.result, self.receipt, self.written)


def plan(source: Any, column: str | None, value_kind: str, options: RunOptions) -> Dataset:
    """Plan ``source`` into partitions (metadata only; a planned :class:`~ldp_dask.source.Dataset` passes through)."""
    return open_source(source, column, options.partition_rows, options.storage_options, value_kind=value_kind,
                       unit=options.privacy_unit, fill=options.nulls, unit_nulls=options.unit_nulls)


def _dataset_inputs(dataset: Dataset) -> tuple[tuple[str, bool], ...]:
    """The planned source as outputs must avoid it: its files, then its root (a directory, or the one file)."""
    if dataset.kind != "parquet" or not dataset.root:
        return ()
    paths = {p.path for p in dataset.pieces if p.path is not None}  # a file has many pieces: resolve it once
    files = {resolve_root(dataset.fs.unstrip_protocol(path)) for path in paths}
    return (*((f, False) for f in sorted(files)), (dataset.root, dataset.root not in files))


def _table_read(dataset: Dataset) -> dict[str, Any] | None:
    """The table a release reads, as the ledger records it; ``followed`` unless a night could not follow its log
    (:mod:`ldp_dask.table_nights`)."""
    if dataset.table is None:
        return None
    return {**dataset.table, "followed": bool(dataset.table.get("followed", True))}


def _files_read(dataset: Dataset, secret: Secret) -> list[dict[str, Any]]:
    """The files a release reads, where they really lie, as the ledger records them (:mod:`ldp_dask.locations`)."""
    stats = dataset.footer_statistics
    if dataset.kind != "parquet" or stats is None:
        return []
    paths = {p.path for p in dataset.pieces if p.path is not None}
    return ledger_files(secret, {p: f for p, f in stats.facts.items() if p in paths})


def _file_inputs(paths: Sequence[str | os.PathLike[str]],
                 storage_options: Mapping[str, Any] | None) -> tuple[tuple[str, bool], ...]:
    """Input files (a summary read by a post-processing step) as outputs must avoid them."""
    found = []
    for path in paths:
        fs, p = fsspec.core.url_to_fs(os.fspath(path), **(storage_options or {}))
        found.append((resolve_root(fs.unstrip_protocol(p.rstrip("/"))), False))
    return tuple(found)


def publish(targets: Mapping[str, str | os.PathLike[str] | None], produce: Callable[[StagedOutputs], R],
            *, overwrite: bool = False, storage_options: Mapping[str, Any] | None = None,
            outputs: StagedOutputs | None = None, before_publish: Callable[[R], None] | None = None,
            inputs: Sequence[str | os.PathLike[str]] = (),
            ) -> tuple[R, dict[str, str]]:
    """Declare ``targets``, run ``produce(outputs)`` (which computes and writes them), then publish them all.

    ``before_publish(result)`` runs once everything is staged, just before
    the renames (the release path settles the charge there). On any exception
    before publishing the staged outputs are removed and nothing is published.
    ``inputs`` are files the outputs are computed from: no target may be one
    (``estimate s.parquet --out s.parquet --overwrite`` is refused).
    Returns ``produce``'s result and ``{label: path}`` of the published outputs.
    """
    if outputs is None:
        outputs = StagedOutputs(overwrite, storage_options, inputs=_file_inputs(inputs, storage_options))
    for label, path in targets.items():
        outputs.declare(label, path)
    try:
        result = produce(outputs)
        if before_publish is not None:
            before_publish(result)
        written = outputs.publish()
    except BaseException:
        outputs.discard()
        raise
    return result, written


def release(dataset: Dataset, charge: Charge, compute: Callable[[Secret, StagedOutputs], R],
            options: RunOptions, *, targets: Mapping[str, str | os.PathLike[str] | None] | None = None,
            write: Callable[[R, StagedOutputs], None] | None = None, overwrite: bool = False,
            content_tag: Callable[[R], str | None] | None = None,
            part_tags: Callable[[R], Mapping[str, str]] | None = None,
            memos: Callable[[R], MemoUpdate | Sequence[MemoUpdate]] | None = None,
            central: Callable[[R], Sequence[tuple[float, float]]] | None = None,
            published: Mapping[str, Any] | None = None) -> Released[R]:
    """Release ``compute``'s result for ``dataset``: check, reserve, compute, write, settle, publish, commit.

    Parameters
    ----------
    dataset : Dataset
        The planned source (:func:`plan`): its root keys the ledger.
    charge : Charge
        What the release spends, per privacy unit.
    compute : callable ``(secret, outputs) -> result``
        The work: receives the resolved key and the staged outputs (a
        directory output is filled during the work, e.g. privatized rows).
    options : RunOptions
        Key, ledger, privacy unit and the run's other options.
    targets : mapping of label to path, optional
        The release's outputs (None: not requested); checked before any work.
    write : callable ``(result, outputs)``, optional
        Writes the result's files with :meth:`StagedOutputs.write`.
    overwrite : bool
        Replace existing outputs.
    content_tag : callable ``(result) -> str``, optional
        The keyed digest of the content the output was computed from; without
        it a re-run is never free.
    part_tags : callable ``(result) -> {part key: tag}``, optional
        A partitioned release's content digests, one per part of ``charge.parts``.
    memos : callable ``(result) -> MemoUpdate or [MemoUpdate, ...]``, optional
        A longitudinal release's digest pairs (one per series: a plan has one
        per statistic): the ledger charges the increase of each series' largest
        spend per person, added up (:mod:`ldp_dask.ledger.memos`).
    central : callable ``(result) -> [(ε, δ), ...]``, optional
        The central guarantee of what the release publishes, as the
        independent mechanisms it consists of (:mod:`ldp_dask.ledger.central`;
        a summary's is :func:`ldp_dask.amplification.central_event`); without
        it the release is ε-DP at its charge, which the ledger composes.
    published : mapping of str to Summary, optional
        The published summaries this release builds on (an incremental
        series' earlier night), by where they are: refused before anything is
        reserved when the ledger has no record of the entries they carry
        (:meth:`~ldp_dask.ledger.Ledger.check_published`). A summary this
        release writes carries its entry (:data:`~ldp_dask.ledger.LEDGER_STAMP`).

    Returns
    -------
    Released
        The result, the ledger's receipt and the published outputs.
    """
    unit = options.privacy_unit or ROW_UNIT
    # before the key, the ledger, the data (a capped series at its cap: the most it can cost)
    check_epsilon_spent(charge.epsilon + sum(c[1] for c in charge.capped), unit, options.allow_large_epsilon)
    if options.night is not None and not charge.context.get("longitudinal"):
        raise LdpDaskError(f"The 'night' option ({options.night!r}) names the night of a longitudinal release; this "
                           "release is not longitudinal (--longitudinal, longitudinal=True): leave it out")
    secret = options.key()
    ledger = open_ledger(options.ledger)
    if ledger is not None:
        _check_persistent(targets or {})
        ledger.check_published([(f"the summary {where!r}", s.metadata[LEDGER_STAMP])
                                for where, s in (published or {}).items() if LEDGER_STAMP in s.metadata])
    outputs = StagedOutputs(overwrite, options.storage_options, inputs=_dataset_inputs(dataset))
    held: list[Reservation] = []
    release_key = hashlib.sha256(json.dumps(
        [dataset.root, dataset.column, charge.scope, charge.mechanism, dict(charge.params), secret.key_id,
         dataset.layout, unit, options.max_contributions, dict(charge.context)],
        sort_keys=True, default=str).encode()).hexdigest()

    def produce(staged: StagedOutputs) -> R:
        if ledger is None:
            return _compute(staged)
        # the outputs are checked by now: refuse an over-budget release before any work
        held.append(ledger.reserve(
            root=dataset.root, column=dataset.column, scope=charge.scope, channel=charge.mechanism,
            params=dict(charge.params), epsilon=charge.epsilon, key_id=secret.key_id, release_key=release_key,
            source=dataset.description, privacy_unit=unit, outputs=staged.locations(), token=staged.token,
            reproducible=secret.reproducible, flow_run_id=options.flow_run_id, parts=charge.parts,
            files=_files_read(dataset, secret), listing=listing(secret, options.storage_options),
            capped=charge.capped, table=_table_read(dataset)))
        with ledger.holding(held[0]):
            return _compute(staged)

    def _compute(staged: StagedOutputs) -> R:
        result = compute(secret, staged)
        if held and central is not None and hasattr(result, "reading"):  # a summary, a plan
            # its pages are written now, before the charge: at the δ its receipt will state (one δ per reading)
            reading = ledger.reading(held[0].identity_root, central(result))  # type: ignore[union-attr]
            result = dataclasses.replace(result, reading=reading)  # type: ignore[type-var]
        if held and hasattr(result, "with_metadata"):  # its summaries name the entry that charged them
            stamp = {"ledger": ledger.sequence()[0], "entry": held[0].id}  # type: ignore[union-attr]
            result = result.with_metadata({LEDGER_STAMP: stamp})
        if write is not None:
            write(result, staged)
        return result

    def settle(result: R) -> None:
        guard.publishing = True  # a termination signal from here on waits until the outputs are published
        if held:
            tag = content_tag(result) if content_tag is not None else None
            tags = part_tags(result) if part_tags is not None else None
            held[0] = ledger.settle(held[0], tag, secret.reproducible, part_tags=tags,  # type: ignore[union-attr]
                                    memos=memos(result) if memos is not None else None,
                                    central=central(result) if central is not None else None)

    with terminations() as guard:  # SIGTERM/SIGHUP/SIGINT: abort cleanly before publishing, or finish publishing
        try:
            result, written = publish(targets or {}, produce, outputs=outputs, before_publish=settle)
        except BaseException as exc:
            if held:
                # published in part (a rename failed after another succeeded): that output left, the charge stands
                try:
                    (ledger.commit if outputs.published else ledger.abort)(held[0])  # type: ignore[union-attr]
                except LedgerError:  # unreachable: recovery settles the entry (its lease ends); the cause is raised
                    pass
            if outputs.published:  # say exactly what is out and what it cost, never "nothing"
                charged = (f"charged ε {held[0].epsilon:g} per {unit} (recorded)" if held
                           else "not recorded in a ledger")
                exc.ldp_dask_published = (  # type: ignore[attr-defined]
                    f"published {', '.join(outputs.published_paths())} before the failure, and {charged}")
            raise
        if held:
            try:
                ledger.commit(held[0])  # type: ignore[union-attr]
            except LedgerError as exc:
                return Released(result, _pending(ledger, held[0], charge, secret, unit, exc),  # type: ignore[arg-type]
                                written)
        return Released(result, _receipt(ledger, held[0] if held else None, charge, secret, unit), written)


def _pending(ledger: Ledger, r: Reservation, charge: Charge, secret: Secret, unit: str, exc: Exception) -> Receipt:
    """The receipt of a release whose outputs are published but whose charge the ledger could not commit: said,
    with the recovery that settles it (the entry stays *publishing*; its lease ends and it is committed)."""
    pending = (f"the outputs are published and the release is charged ε {r.epsilon:g} per {unit}, but the ledger "
               f"could not be reached to commit it ({exc}). It stays recorded as publishing: the first ledger "
               f"operation after its lease ends (within {ledger.lease_seconds:g} s) commits it (`ldp-dask budget "
               "--entries` shows it)")
    warn(pending)
    parts = None if charge.parts is None else (r.parts or 0, len(charge.parts))
    return Receipt(ledger.location, charge.scope, r.epsilon, r.reused, None, r.limit, secret.key_id, secret.source,
                   r.identity, unit, parts, "charge pending: " + pending)


def _receipt(ledger: Ledger | None, r: Reservation | None, charge: Charge, secret: Secret, unit: str) -> Receipt:
    if ledger is None or r is None:
        return Receipt(None, charge.scope, 0.0, False, None, None, secret.key_id, secret.source, None, unit)
    parts = None if charge.parts is None else (r.parts or 0, len(charge.parts))
    # the spend after this release, per person (a release on one file adds nothing to its siblings' rows)
    spent, central = ledger.standing(r.identity_root)
    return Receipt(ledger.location, charge.scope, r.epsilon, r.reused, spent, r.limit, secret.key_id, secret.source,
                   r.identity, unit, parts, r.note, r.spread, central)


#: file systems whose files vanish with the process: a charged release's outputs may not go there
TRANSIENT_PROTOCOLS = ("memory",)


def _check_persistent(targets: Mapping[str, str | os.PathLike[str] | None]) -> None:
    """Refuse, before any work, an output of a charged release on a file system that ends with the process
    (``memory://``): the ledger would charge a release nobody can read."""
    for label, path in targets.items():
        if path is None:
            continue
        protocol, _ = fsspec.core.split_protocol(os.fspath(path))
        if protocol in TRANSIENT_PROTOCOLS:
            raise LdpDaskError(f"the {label} output {os.fspath(path)!r} is on the {protocol}:// file system, which "
                               "ends with this process: the release would be charged and its output lost. Write it "
                               "to a directory or object storage (or release with ledger=False / --no-ledger)")
