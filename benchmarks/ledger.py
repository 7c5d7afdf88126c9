"""The budget ledger's cost per release against the size of its history.

Run: ``make bench`` (or ``python benchmarks/ledger.py [--sizes 0,1000,10000,100000]``). For each size N it builds a
SQLite ledger holding N committed releases spread over 30 declared datasets (each with a central budget; 10
columns per dataset, two channels alternating, every other release with a central event, each release reading one
file of its dataset: a year of nightly plans is about 10^5 releases), then times, side by side in the same run:

* a release's ledger work — reserve, settle (the central budget checked), commit and the receipt's standing —
  on a dataset holding N/30 of the history (``own``) and on a dataset declared fresh (``fresh``), median of 15;
* ``budget``: the summary of every dataset the ledger lists (what ``ldp-dask budget`` prints).

The history is written by SQL into a ledger one schema version back and opened with the ledger, which brings it up
to date (its migration indexes the history): the same path a user's ledger takes on upgrading. It prints a table,
the ratios to the empty ledger, and rewrites the "ledger" section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_section  # noqa: E402

from ldp_dask.ledger import Ledger  # noqa: E402

DATASETS = 30
REPEATS = 15


def _history(path: Path, n: int) -> None:
    """A ledger at ``path`` with ``n`` committed releases over :data:`DATASETS` datasets, one schema version back."""
    led = Ledger(path)
    for k in range(DATASETS):
        led.declare(f"ds{k:02d}", f"file:///data/ds{k:02d}", 1e9, central=(1e9, 1e-3))
    led.declare("fresh", "file:///data/fresh", 1e9, central=(1e9, 1e-3))
    con = sqlite3.connect(path)
    now = time.time()
    rows = []
    for i in range(n):
        k = i % DATASETS
        root = f"file:///data/ds{k:02d}"
        files = json.dumps([{"loc": f"{root}/part-{i // DATASETS:06d}.parquet", "id": f"2049:{i}",
                             "state": uuid.uuid4().hex[:16], "footer": uuid.uuid4().hex[:16]}])
        central = json.dumps({"events": [[0.05, 1e-12]]}) if i % 2 else None
        rows.append((now, root, root, f"c{(i // DATASETS) % 10}", "local",
                     ("laplace_histogram", "hadamard")[(i // DATASETS) % 2], "{}", "row", 0.1, 0.1, "bench",
                     uuid.uuid4().hex, uuid.uuid4().hex, "[]", uuid.uuid4().hex, None, None, files, central, None,
                     "committed", None, "bench", 0, now))
    con.executemany(
        "INSERT INTO releases (created_at, root, source, column_name, scope, channel, params, privacy_unit, epsilon, "
        "epsilon_requested, key_id, release_key, content_tag, outputs, token, flow_run_id, parts, files, central, "
        "table_log, status, note, host, pid, lease_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    _one_version_back(con)
    con.commit()
    con.close()


def _one_version_back(con: sqlite3.Connection) -> None:
    """Mark the ledger as written by the schema before the indexes (version 7), dropping them, so that opening it
    indexes the history the way an upgraded user's ledger is."""
    from ldp_dask.ledger import store

    for table in getattr(store, "INDEX_TABLES", ()):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    con.execute("UPDATE ledger_meta SET value='7' WHERE key='schema'")


def _release(led: Ledger, root: str, i: int) -> float:
    """One release's ledger work on ``root``: reserve, settle with a central event, commit, standing."""
    t = time.perf_counter()
    r = led.reserve(root=root, column="c0", scope="local", channel="laplace_histogram", params={}, epsilon=0.1,
                    key_id="bench", release_key=uuid.uuid4().hex, files=[
                        {"loc": f"{root}/timed-{i:04d}.parquet", "id": f"2050:{i}", "state": "s", "footer": "f"}])
    r = led.settle(r, uuid.uuid4().hex, central=[(0.05, 1e-12)])
    led.commit(r)
    led.standing(r.identity_root)
    return time.perf_counter() - t


def measure(n: int, where: Path) -> dict[str, float]:
    path = where / f"ledger-{n}.sqlite"
    _history(path, n)
    t = time.perf_counter()
    led = Ledger(path)  # brings it up to date: the migration's cost, once
    opened = time.perf_counter() - t
    led.standing("file:///data/ds00")  # warm the imports (the accountant) before timing
    own = statistics.median(_release(led, "file:///data/ds00", i) for i in range(REPEATS))
    fresh = statistics.median(_release(led, "file:///data/fresh", REPEATS + i) for i in range(REPEATS))
    t = time.perf_counter()
    led.summary()
    first = time.perf_counter() - t  # the first listing after the upgrade folds every dataset's history once
    t = time.perf_counter()
    led.summary()
    budget = time.perf_counter() - t
    return {"n": n, "open": opened, "own": own, "fresh": fresh, "first": first, "budget": budget,
            "accountant": _accountant(led)}


def _accountant(led: Ledger) -> float:
    """What the receipt's composition of the own dataset's events alone costs (the accountant, median of 3)."""
    from ldp_dask.ledger.central import compose, report_delta
    from ldp_dask.ledger.standing import View

    with led.store.transaction() as tx:
        events = View(tx, tx.all("SELECT * FROM datasets")).events("file:///data/ds00")
    times = []
    for _ in range(3):
        t = time.perf_counter()
        compose(events, report_delta(events, 1e-3))
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="0,1000,10000,100000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="ldp-bench-ledger-") as d:
        results = []
        for n in sizes:
            results.append(measure(n, Path(d)))
            r = results[-1]
            print(f"N={n:>7}: open {r['open']:.3f} s, release own {1e3 * r['own']:.1f} ms (accountant "
                  f"{1e3 * r['accountant']:.1f} ms), fresh {1e3 * r['fresh']:.1f} ms, budget first "
                  f"{r['first']:.3f} s then {r['budget']:.3f} s",
                  flush=True)
    base = results[0]
    lines = ["| earlier releases | opening (migration) | release, own dataset | ratio | of which the accountant | "
             "own, without it | ratio | release, fresh dataset | ratio | `budget`, first after the upgrade | "
             "`budget` |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        rest = r["own"] - r["accountant"]
        lines.append(f"| {r['n']:,} | {r['open']:.2f} s | {1e3 * r['own']:.1f} ms | {r['own'] / base['own']:.2f}× | "
                     f"{1e3 * r['accountant']:.1f} ms | {1e3 * rest:.1f} ms | "
                     f"{rest / (base['own'] - base['accountant']):.2f}× | {1e3 * r['fresh']:.1f} ms | "
                     f"{r['fresh'] / base['fresh']:.2f}× | {r['first']:.2f} s | {r['budget']:.2f} s |")
    body = "\n".join([
        "## The budget ledger against its history (`benchmarks/ledger.py`)", "",
        f"Machine: {machine()}.", "",
        f"A SQLite ledger holding N committed releases over {DATASETS} declared datasets (central budgets on all, "
        "one file read per release, every other release with a central event). A release's ledger work is reserve, "
        "settle (central budget checked), commit and the receipt's standing, median of "
        f"{REPEATS}; `own` is a dataset holding N/{DATASETS} of the history, `fresh` one with none; `budget` is the "
        "summary of all datasets, the first time after the upgrade (each dataset's history folded once and kept) and "
        "again. Ratios are to the empty ledger in the same run. `of which the accountant` is one "
        "composition of the own dataset's central events, timed alone (two kinds of events: each kind's binomial "
        "loss, exact, rounded up once onto one grid and convolved, `ldp_dask/ledger/accountant.py`): a receipt "
        "states the composed central ε, and that composition grows with the history only through the binomials.",
        "", *lines])
    print(body)
    write_section("ledger", body)


if __name__ == "__main__":
    main()
