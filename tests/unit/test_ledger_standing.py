"""The ledger's kept standing against the budget rules applied to its whole history.

A release's checks and receipt read each root's kept fold plus the releases since (ldp_dask.ledger.standing), found
by the indexes (ldp_dask.ledger.index). Here a seeded random history — nested roots, datasets declared with local
and central budgets and append-only, files hard-linked across datasets, partitioned releases per row and per
person, releases that follow a table's log, free re-runs, aborted and refused releases — is played on a real SQLite
ledger, and after every step each root's spend, composed central ε and the whole listing must equal, exactly, what
the pure rules (ldp_dask.ledger.budget, ldp_dask.ledger.central) give over every active release.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

from ldp_dask import LdpDaskError
from ldp_dask.ledger import Ledger, Part
from ldp_dask.ledger.budget import ROW_UNIT, charges_of, dataset_summaries, log_followed, spent_per_person
from ldp_dask.ledger.central import central_budget, central_spend
from ldp_dask.ledger.memos import series_states
from ldp_dask.ledger.store import ACTIVE

ROOTS = ["file:///d", "file:///d/a", "file:///d/b", "file:///d/a/x.parquet", "file:///e", "file:///t"]
FILES = {"file:///d/a": ["file:///d/a/x.parquet", "file:///d/a/y.parquet"],
         "file:///d/b": ["file:///d/b/z.parquet"], "file:///e": ["file:///e/w.parquet", "file:///e/x-link.parquet"],
         "file:///t": ["file:///t/p0.parquet", "file:///t/p1.parquet"]}


def _follows(declared, root, rows):
    """The rule of which roots' rows are followed by location, over the whole history."""
    return log_followed(rows, root) or any(
        d["append_only"] and not d["fallback"] and d["privacy_unit"] == ROW_UNIT and
        (root.rstrip("/") + "/").startswith(d["root"].rstrip("/") + "/") for d in declared)


def _reference(led: Ledger):
    with led.store.transaction() as tx:
        rows = tx.all(f"SELECT id, root, column_name, scope, privacy_unit, epsilon, parts, files, key_id, central, "
                      f"table_log FROM releases WHERE status IN {ACTIVE} ORDER BY id")
        declared = tx.all("SELECT * FROM datasets ORDER BY name")
        series = series_states(tx)
    return rows, declared, series


def _check(led: Ledger) -> None:
    rows, declared, series = _reference(led)
    charges = charges_of(rows)
    for root in ROOTS:
        unit = next((r["privacy_unit"] for r in rows if r["root"].rstrip("/") == root or
                     r["root"].startswith(root + "/") or root.startswith(r["root"].rstrip("/") + "/")), ROW_UNIT)
        want = spent_per_person(charges, root, unit, _follows(declared, root, rows))
        assert led.spent(root) == want, root
        d = next((d for d in declared if d["root"] == root), None)
        spent, central = led.standing(root)
        assert spent == want
        assert central == central_spend(rows, root, central_budget(d) if d else None, charges), root
    items = dataset_summaries(declared, rows, _follows, series)
    budgets = {d["root"]: central_budget(d) for d in declared}
    for item in items:
        item["central"] = central_spend(rows, item["root"], budgets.get(item["root"]), charges)
    assert led.summary() == items


def _check_pending(led: Ledger, pending: dict) -> None:
    """A release's checks see it before it is recorded: its spend and events with the others', on every root."""
    from ldp_dask.ledger.central import counts, dataset_events
    from ldp_dask.ledger.standing import View

    rows, declared, _ = _reference(led)
    every = [*rows, pending]
    charges = charges_of(every)
    with led.store.transaction() as tx:
        view = View(tx, declared)
        for root in ROOTS:
            unit = next((r["privacy_unit"] for r in every if r["root"].rstrip("/") == root or
                         r["root"].startswith(root + "/") or root.startswith(r["root"].rstrip("/") + "/")), ROW_UNIT)
            assert view.spent(root, pending) == spent_per_person(charges, root, unit, _follows(declared, root, every))
            assert view.events(root, pending) == counts(dataset_events(every, root, charges)), root


def _files(rng, root):
    out = []
    for loc in FILES.get(root, []):
        if rng.random() < 0.7:
            # x-link.parquet is a hard link of /d/a/x.parquet: the same identity at two locations
            fid = "7:1" if loc.endswith(("x.parquet", "x-link.parquet")) else f"7:{abs(hash(loc)) % 1000}"
            out.append({"loc": loc, "id": fid, "state": "s", "footer": f"f-{loc}"})
    return out


def _listing(root):
    return {f["loc"]: {"state": "s", "id": f["id"]} for r, fs in FILES.items() for f in
            [{"loc": x, "id": "7:1" if x.endswith(("x.parquet", "x-link.parquet")) else f"7:{abs(hash(x)) % 1000}"}
             for x in fs] if f["loc"].startswith(root.rstrip("/") + "/")}


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_kept_standing_equals_the_rules_over_the_whole_history(tmp_path, seed):
    rng = np.random.default_rng(seed)
    led = Ledger(tmp_path / "ledger.sqlite")
    led.declare("d", "file:///d", 40.0, central=(30.0, 1e-5))
    led.declare("e", "file:///e", 40.0, append_only=bool(seed % 2))
    led.declare("da", "file:///d/a", 25.0)
    keys = [uuid.uuid4().hex for _ in range(4)]
    for step in range(70):
        root = ROOTS[int(rng.integers(len(ROOTS)))]
        kind = rng.random()
        parts = None
        if kind < 0.25 and root in FILES:  # a nightly release over the files, each a part
            parts = [Part(loc, f"part-{loc}", float(rng.choice([0.1, 0.2]))) for loc in FILES[root]]
        table = ({"format": "delta", "id": "tbl", "version": step, "followed": bool(rng.random() < 0.8)}
                 if root == "file:///t" else None)
        files, eps = _files(rng, root), float(rng.choice([0.1, 0.25, 0.5]))
        if parts is None:
            _check_pending(led, {"id": -1, "root": root, "privacy_unit": ROW_UNIT, "files": json.dumps(files),
                                 "epsilon": eps, "parts": None, "column_name": "c", "scope": "local",
                                 "table_log": json.dumps(table) if table else None, "central": None})
        try:
            r = led.reserve(root=root, column=f"c{int(rng.integers(3))}", scope=str(rng.choice(["local", "central"])),
                            channel="laplace", params={}, epsilon=eps, key_id="k",
                            release_key=keys[int(rng.integers(len(keys)))], parts=parts, files=files,
                            listing=_listing, table=table)
        except LdpDaskError:
            _check(led)
            continue
        _check(led)  # a reservation counts while it runs
        if rng.random() < 0.15:
            led.abort(r)
            _check(led)
            continue
        events = [(float(rng.choice([0.05, 0.1])), float(rng.choice([0.0, 1e-9])))
                  for _ in range(int(rng.integers(1, 3)))] if rng.random() < 0.6 else None
        tags = {p.key: str(rng.choice(["A", "B"])) for p in parts} if parts else None
        try:
            r = led.settle(r, str(rng.choice(["t1", "t2"])), part_tags=tags, central=events)
        except LdpDaskError:
            _check(led)
            continue
        _check(led)
        led.commit(r)
        _check(led)
    rows, _, _ = _reference(led)
    assert len(rows) > 30  # the history is long enough for the kept standing to be used
    with led.store.transaction() as tx:
        assert tx.one("SELECT count(*) AS n FROM root_states")["n"] > 0


def test_a_person_release_over_files_is_kept_per_file(tmp_path):
    """With a privacy unit each file is a release over the persons in it: the kept standing sums the parts."""
    led = Ledger(tmp_path / "ledger.sqlite")
    led.declare("d", "file:///d", 100.0, privacy_unit="user", central=(100.0, 1e-6))
    for night in range(6):
        parts = [Part(f"file:///d/p{i}.parquet", f"k{i}", 0.5) for i in range(night % 3 + 1)]
        r = led.reserve(root="file:///d", column="x", scope="local", channel="laplace", params={}, epsilon=0.5,
                        key_id="k", release_key=uuid.uuid4().hex, privacy_unit="user", parts=parts)
        led.commit(led.settle(r, None, part_tags={p.key: f"n{night}" for p in parts},
                              central=[(0.5, 0.0)] if night % 2 else None))
        _check(led)
    assert led.spent("file:///d") == 0.5 * (1 + 2 + 3 + 1 + 2 + 3)
    rows, _, _ = _reference(led)
    assert json.loads(rows[0]["parts"])[0]["epsilon"] == 0.5
