"""Reserving a release's ε in the ledger: the one check every release passes before any work.

:func:`reserve_in` refuses, with one line, a release whose unit differs from its dataset's, or that would pass a
dataset's budget (local, or central), and otherwise records it as *reserved* — held at the most it may cost, or at
0 where it may prove a free re-run (decided at settle by its content tag) — in one transaction. Its request is one
object (:class:`Request`), built by :meth:`ldp_dask.ledger.Ledger.reserve` from its keyword arguments.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._validation import LdpDaskError
from .append_only import append_only_breaks
from .budget import BudgetExceeded, Part, over_budget, overlaps, remaining
from .central import over_central_budgets
from .index import charged_locations, index_release, recorded_parts
from .memos import capped_increase
from .standing import View

if TYPE_CHECKING:
    from . import Ledger

__all__ = ["Request", "Reservation", "reserve_in", "touching", "PENDING"]


@dataclass(frozen=True)
class Request:
    """Everything a release asks the ledger for (:meth:`ldp_dask.ledger.Ledger.reserve` documents each field)."""

    root: str
    column: str
    scope: str
    channel: str
    params: Mapping[str, Any]
    epsilon: float
    key_id: str
    release_key: str
    source: str | None
    privacy_unit: str
    outputs: tuple[str, ...]
    reproducible: bool
    flow_run_id: str | None
    epsilon_requested: float | None
    token: str
    parts: tuple[Part, ...] | None
    files: tuple[Mapping[str, Any], ...]
    files_json: str | None
    listing: Callable[[str], Mapping[str, Mapping[str, Any]]] | None
    #: capped longitudinal series, ``(series, cap, ε_bits)`` each: what their next nights cost
    #: (:func:`~ldp_dask.ledger.memos.capped_increase`, decided in the reservation's transaction) is added to
    #: ``epsilon``, which is then the rest of the release's charge
    capped: tuple[tuple[str, float, float | None], ...] = ()
    #: the table the release read (``{"format", "id", "version", "followed"}``, JSON), or None: its charges
    #: follow the table's log when ``followed`` (:func:`~ldp_dask.ledger.budget.log_followed`)
    table_log: str | None = None


@dataclass(frozen=True)
class Reservation:
    """A release's entry while it runs. ``epsilon`` is what it is charged (0 for a free identical re-run)."""

    id: int
    epsilon: float
    reused: bool
    token: str
    release_key: str
    identity: str
    spent_before: float
    limit: float | None
    tentative: bool = False
    requested: float = field(default=0.0)
    #: a partitioned release, once settled: how many of its parts were released anew (charged)
    parts: int | None = None
    #: the root of :attr:`identity` (the dataset whose budget is tightest), where the receipt's total is read
    identity_root: str = ""
    #: what the ledger found and the user should know (an append-only dataset counted conservatively from now on)
    note: str = ""
    #: a longitudinal release, once settled: the distribution of spend over its series' persons
    spread: dict[str, Any] | None = None


#: The id a release has in the rules before it is recorded.
PENDING = -1


def touching(view: View, pending: dict[str, Any], root: str) -> list[dict[str, Any]]:
    """The datasets a release not recorded yet (``pending``, id :data:`PENDING`) touches: those overlapping its
    root or any location its charges lie at (the real locations of the files it reads, their hard links)."""
    files = json.loads(pending.get("files") or "[]")
    where = charged_locations(root, pending.get("parts"), files) | view.elsewhere(pending) | {root}
    return [d for d in view.datasets if any(overlaps(d["root"], w) for w in where)]


def reserve_in(ledger: Ledger, request: Request, found: list[tuple[str, str]]) -> Reservation:
    """Reserve ``request`` in ``ledger`` (module docstring); ``found`` collects the append-only datasets whose
    promise broke, recorded by the caller even when the release is refused."""
    root, column, scope, channel, params, epsilon = (request.root, request.column, request.scope, request.channel,
                                                     request.params, request.epsilon)
    key_id, release_key, source, privacy_unit = request.key_id, request.release_key, request.source, request.privacy_unit
    outputs, reproducible, flow_run_id = request.outputs, request.reproducible, request.flow_run_id
    epsilon_requested, token, parts, files = request.epsilon_requested, request.token, request.parts, request.files
    files_json, listing = request.files_json, request.listing
    with ledger.store.transaction() as tx:
        ledger._recover(tx)
        if request.capped:  # a capped series' night costs what its number of nights says, nothing else
            epsilon = epsilon + sum(capped_increase(tx, *c) for c in request.capped)
        view = View(tx, tx.all("SELECT * FROM datasets"))
        for unit, where in view.fold(root).units.items():
            if unit != privacy_unit:
                raise LdpDaskError(
                    f"earlier releases of {where!r} used privacy unit {unit!r}; this release "
                    f"uses {privacy_unit!r}. ε per row and per person cannot be added up: release with the "
                    "same unit")
        recorded = recorded_parts(tx, [p.key for p in parts]) if parts is not None else {}
        if parts is None:
            maybe_free = bool(reproducible and tx.one(
                "SELECT id FROM releases WHERE release_key=? AND status='committed'", (release_key,)))
            charges = [(root, float(epsilon))]
        else:  # a part that may reproduce a recorded one is held at 0 until its content tag is known
            charges = [(p.root, 0.0 if reproducible and p.key in recorded else float(p.epsilon)) for p in parts]
            maybe_free = False

        def pending(held_charges: list[tuple[str, float]]) -> dict[str, Any]:
            stored = None if parts is None else json.dumps(
                [{"root": p.root, "key": p.key, "epsilon": e} for p, (_, e) in zip(parts, held_charges)])
            return {"id": PENDING, "root": root, "privacy_unit": privacy_unit, "files": files_json,
                    "epsilon": max((e for _, e in held_charges), default=0.0), "parts": stored,
                    "table_log": request.table_log}

        new = pending(charges)
        # every location the release's rows really lie at (links resolved): each dataset overlapping one
        declared = touching(view, new, root)
        for d in declared:
            if d["privacy_unit"] != privacy_unit:
                raise LdpDaskError(f"the dataset {d['name']!r} ({d['root']}) is declared with privacy unit "
                                   f"{d['privacy_unit']!r}; this release uses {privacy_unit!r}")
        notes = []
        for d in declared:
            if d["append_only"] and not d["fallback"]:
                broken = append_only_breaks(view.rows([d["root"]]), d["root"], files, key_id, listing)
                if broken:
                    d["fallback"] = broken
                    found.append((d["name"], broken))
                    notes.append(f"the dataset {d['name']!r} was declared append-only, but {broken}: its rows "
                                 "cannot be followed by location any more, so from now on every release of it "
                                 "counts for every row (the sum of their ε)")
        checks = [(d["name"], d["root"], float(d["epsilon_limit"])) for d in declared]

        def spent(croot: str, pending_release: dict[str, Any] | None = None) -> float:
            return view.spent(croot, pending_release)

        tight = min(checks, key=lambda c: c[2] - spent(c[1]), default=None)
        identity = tight[0] if tight else root
        before = spent(tight[1] if tight else root)
        limit = tight[2] if tight else None
        over = [c for c in checks if over_budget(spent(c[1], new), c[2])]
        tentative = parts is not None and any(e == 0.0 for _, e in charges)
        if over:
            if not maybe_free:
                name, croot, clim = over[0]
                s = spent(croot)
                raise BudgetExceeded(
                    f"this release needs ε = {epsilon:g} per {privacy_unit}, but the dataset {name!r} has spent "
                    f"{s:g} of its budget {clim:g} (remaining {remaining(clim, s):.3g}); nothing was run"
                    + "".join(f". Note: {n}" for n in notes))
            tentative = True  # may be a free re-run: decided by the content digest
            charges = [(root, 0.0)]
            new = pending(charges)
        full = over_central_budgets(view.events, declared, "its releases so far", view.composed)
        if full and not maybe_free:  # a composition only grows: no release charged anything can fit
            raise BudgetExceeded(f"{full}; nothing was run")
        held = new["epsilon"]
        stored = None if parts is None else json.dumps(
            [{"root": p.root, "key": p.key, "epsilon": e, "requested": float(p.epsilon)}
             for p, (_, e) in zip(parts, charges)])
        cur = tx.run(
            "INSERT INTO releases (created_at, root, source, column_name, scope, channel, params, privacy_unit, "
            "epsilon, epsilon_requested, key_id, release_key, content_tag, outputs, token, flow_run_id, parts, "
            "files, table_log, status, note, host, pid, lease_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "NULL, ?, ?, ?, ?, ?, ?, 'reserved', ?, ?, ?, ?) RETURNING id",
            (time.time(), root, source, column, scope, channel, json.dumps(dict(params), sort_keys=True,
                                                                           default=str),
             privacy_unit, held, float(epsilon_requested if epsilon_requested is not None else epsilon), key_id,
             release_key, json.dumps(list(outputs)), token, flow_run_id, stored, files_json, request.table_log,
             "; ".join(notes) or None, socket.gethostname(), os.getpid(), time.time() + ledger.lease_seconds))
        rid = int(cur.fetchone()[0])
        index_release(tx, rid, root, stored, files_json)
    return Reservation(rid, float(epsilon), False, token, release_key, identity, before, limit, tentative,
                       float(epsilon), identity_root=tight[1] if tight else root, note="; ".join(notes))
