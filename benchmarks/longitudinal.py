"""Thirty nights over 10^6 persons, 10% of whose values change each night: longitudinal (capped, uncapped) against
ordinary releases.

Run: ``make bench`` (or ``python benchmarks/longitudinal.py [--persons N] [--nights T] [--large N]``). A snapshot
table (one row per person: ``id``, ``x`` in [0, 1000]) is rewritten every night; each night 10% of the persons change
value, in one of two ways:

``drift``   a counter or a balance: x + N(0, 5²) (the histogram's cells are 50 wide);
``redraw``  a new value from the population's law: the worst case for memoization.

Each night, on one LocalCluster (2 worker processes × 1 thread), with a real SQLite ledger:

(a) the capped longitudinal release (the default: ``longitudinal=True``, privacy unit ``id``, a 20-cell histogram at
    ε = 1, each person's cell hashed into 2 values and the hash memoized; for ``drift`` a mean too): its wall time
    and the ledger's charge;
(b) the uncapped longitudinal release of the same night (``MemoHistogram``: ε per distinct report): its wall time,
    its charge and the distribution of ε over persons after the nights;
(c) the ordinary release of the same night with the same privacy unit and channel (``LaplaceHistogram``, ε 1 a
    night per person): its wall time;
(d) the release per row (no privacy unit) of the same data: the floor of a release.

With ``--large N`` (default 10^7), three nights of the capped histogram and of the ordinary release at N persons.

Accuracy, measured apart on night T's data (in process, the channels alone, ``--reps`` keys): the RMSE of the 20
cell shares for the capped histogram at ε 1 (ε_memo 0.5), the capped one at ε 2 (ε_memo 1), the uncapped one at
ε_memo 1 and a fresh one-night Laplace histogram at ε 1; the longitudinal nights' own errors are correlated (they
share reports), so the nights of (a) are not independent draws. It rewrites the "longitudinal" section of
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load, machine, write_section  # noqa: E402

import ldp_dask  # noqa: E402
from ldp_dask.channels import CappedHistogram, LaplaceHistogram, MemoHistogram  # noqa: E402
from ldp_dask.ledger.memos import MemoState, spend_of  # noqa: E402
from ldp_dask.noise import generator  # noqa: E402

WORKERS, CELLS, DOMAIN, EPS = 2, 20, (0.0, 1000.0), 1.0


def night_values(rng: np.random.Generator, x: np.ndarray, kind: str) -> np.ndarray:
    x = x.copy()
    move = rng.random(len(x)) < 0.1
    if kind == "drift":
        x[move] = np.clip(x[move] + rng.normal(0, 5, move.sum()), *DOMAIN)
    else:
        x[move] = np.clip(rng.gamma(3.0, 90.0, move.sum()), *DOMAIN)
    return x


def spend_distribution(ledger: Path) -> np.ndarray:
    """ε per person of the uncapped series in the ledger, from its current state."""
    with sqlite3.connect(ledger) as con:
        blob, eps, bits = con.execute("SELECT state, epsilon_memo, epsilon_bits FROM memo_states WHERE persons > 0 "
                                      "ORDER BY release_id DESC LIMIT 1").fetchone()
    return spend_of(MemoState.from_bytes(blob), eps, bits)


def accuracy(x: np.ndarray, reps: int) -> dict[str, float]:
    """RMSE of the cell shares over ``reps`` keys, for each channel (module docstring)."""
    from ldp_dask.estimators import frequencies
    from ldp_dask.summary import Summary

    n = len(x)
    truth = np.histogram(x, CELLS, DOMAIN)[0] / n
    person = np.arange(n, dtype=np.uint64) + np.uint64(1 << 50)
    memo = {"capped ε 1 (ε_memo 0.5)": CappedHistogram(EPS, CELLS, DOMAIN, g=2),
            "capped ε 2 (ε_memo 1)": CappedHistogram(2 * EPS, CELLS, DOMAIN, g=2),
            "uncapped ε_memo 1": MemoHistogram(EPS, CELLS, DOMAIN)}
    fresh = LaplaceHistogram(EPS, CELLS, DOMAIN)
    err: dict[str, list[np.ndarray]] = {k: [] for k in (*memo, "fresh one-night Laplace ε 1")}
    for r in range(reps):
        for name, ch in memo.items():
            sums = ch.memo_stats(x, person, (r + 1) << 70 | r)[0]["sum"]
            est = frequencies(Summary(ch, n, {"sum": np.asarray(sums, float)}, {"column": "x"}))
            err[name].append((est.frequencies - truth) ** 2)
        noisy = fresh.stats(x, generator(r + 12345))["sum"]
        err["fresh one-night Laplace ε 1"].append((noisy / n - truth) ** 2)
    return {k: float(np.sqrt(np.mean(v))) for k, v in err.items()}


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def series(kind: str, persons: int, nights: int, client, work: Path, statistic: str = "histogram",
           uncapped: bool = True) -> dict:
    rng = np.random.default_rng(1 if kind == "drift" else 2)
    root = work / f"{kind}-{statistic}-{persons}"
    root.mkdir()
    key = work / "series.key"
    capped_ledger, uncapped_ledger = work / f"{root.name}-capped.sqlite", work / f"{root.name}-uncapped.sqlite"
    x = np.clip(rng.gamma(3.0, 90.0, persons), *DOMAIN)
    one = (ldp_dask.LaplaceHistogram(EPS, CELLS, DOMAIN) if statistic == "histogram"
           else ldp_dask.LaplaceMean(EPS, DOMAIN))
    out: dict = {k: [] for k in ("capped", "uncapped", "ordinary", "per_row", "charged", "charged_uncapped")}
    common = dict(privacy_unit="id", secret_file=str(key), client=client)
    for night in range(nights):
        if night:
            x = night_values(rng, x, kind)
        pd.DataFrame({"id": np.arange(persons), "x": x}).to_parquet(root / "snapshot.parquet")
        day = f"2026-01-{night + 1:02d}"
        t = time.perf_counter()
        s = ldp_dask.privatize(str(root), "x", one, longitudinal=True, ledger=str(capped_ledger), night=day,
                               **common)
        out["capped"].append(time.perf_counter() - t)
        out["charged"].append(s.receipt.epsilon)
        if uncapped:
            t = time.perf_counter()
            u = ldp_dask.privatize(str(root), "x", MemoHistogram(EPS, CELLS, DOMAIN), ledger=str(uncapped_ledger),
                                   night=day, **common)
            out["uncapped"].append(time.perf_counter() - t)
            out["charged_uncapped"].append(u.receipt.epsilon)
        out["ordinary"].append(_timed(lambda: ldp_dask.privatize(str(root), "x", one, ledger=False, **common)))
        out["per_row"].append(_timed(lambda: ldp_dask.privatize(str(root), "x", one, secret_file=str(key),
                                                                ledger=False, client=client)))
        print(f"{kind} {statistic} {persons:,} night {night + 1}: capped {out['capped'][-1]:.2f} s (charged ε "
              f"{s.receipt.epsilon:g})"
              + (f", uncapped {out['uncapped'][-1]:.2f} s (charged ε {u.receipt.epsilon:g})" if uncapped else "")
              + f", ordinary {out['ordinary'][-1]:.2f} s, per row {out['per_row'][-1]:.2f} s", flush=True)
    out["cap"] = s.channel.epsilon_spent()
    if uncapped:
        out["spend"] = spend_distribution(uncapped_ledger) / u.channel.epsilon_spent()
    out["x"] = x
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--persons", type=int, default=1_000_000)
    p.add_argument("--nights", type=int, default=30)
    p.add_argument("--large", type=int, default=10_000_000, help="persons of the 3-night run (0: none)")
    p.add_argument("--reps", type=int, default=40)
    p.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    a = p.parse_args()
    from distributed import Client, LocalCluster

    started = load()
    work = Path(tempfile.mkdtemp(prefix="ldp-longitudinal-"))
    (work / "series.key").write_bytes(os.urandom(32))
    try:
        with LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=logging.ERROR) as lc, Client(lc) as client:
            results = {(kind, "histogram"): series(kind, a.persons, a.nights, client, work)
                       for kind in ("drift", "redraw")}
            results[("drift", "mean")] = series("drift", a.persons, a.nights, client, work, "mean", uncapped=False)
            large = series("redraw", a.large, 3, client, work, uncapped=False) if a.large else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rmse = accuracy(results[("redraw", "histogram")]["x"], a.reps)

    rows = []
    for (kind, statistic), r in results.items():
        capped, ordinary, per_row = (np.median(r[k]) for k in ("capped", "ordinary", "per_row"))
        if "spend" in r:
            sp = r["spend"]
            q = np.quantile(sp, [0.5, 0.99])
            unc = (f"{np.median(r['uncapped']):.2f} | {sum(r['charged_uncapped']):.2f} | {q[0]:.2f} | {q[1]:.2f} | "
                   f"{sp.max():.2f}")
        else:
            unc = "– | – | – | – | –"
        rows.append(f"| {kind} | {statistic} | {capped:.2f} | {sum(r['charged']):.4g} | {r['cap']:.4g} | {unc} | "
                    f"{ordinary:.2f} | {capped / ordinary:.2f} | {per_row:.2f} |")
    if large is not None:
        capped, ordinary, per_row = (np.median(large[k]) for k in ("capped", "ordinary", "per_row"))
        rows.append(f"| redraw, {a.large:,} persons, 3 nights | histogram | {capped:.2f} | {sum(large['charged']):.4g} | "
                    f"{large['cap']:.4g} | – | – | – | – | – | {ordinary:.2f} | {capped / ordinary:.2f} | {per_row:.2f} |")
    ratio = rmse["capped ε 2 (ε_memo 1)"] / rmse["uncapped ε_memo 1"]
    body = "\n".join([
        "## Longitudinal releases: 30 nights over the same persons (`benchmarks/longitudinal.py`)",
        "",
        f"{a.persons:,} persons, one row each, {a.nights} nights; each night 10% of the values change (`drift`: "
        f"x + N(0, 5²) on [0, 1000], whose {CELLS} cells are 50 wide; `redraw`: a new value from the population's "
        f"law). A {CELLS}-cell histogram at ε = {EPS:g} per person for the whole series (capped: each person's cell "
        "hashed into g = 2 values, the hash memoized at ε/2), and for `drift` also a mean (capped: α-point rounding "
        "to the domain's two ends at ε/2 each); the uncapped memoized histogram at ε_memo 1 a report beside it; "
        f"privacy unit `id`, a real SQLite ledger; LocalCluster {WORKERS} processes × 1 thread. Machine: "
        f"{machine().rsplit('; load', 1)[0]}; {started} (when the run started).",
        "",
        "Times are the median night's; the ledger's total is the sum of its nightly charges, per person (capped: the "
        "same for everyone; uncapped: the largest spend, with the spend over persons in units of ε_memo after the "
        "nights); ordinary: the same release with the same privacy unit, no memoization, no ledger, ε 1 a night; "
        "per row: no privacy unit.",
        "",
        "| changes | statistic | capped (s) | capped: ledger total | its cap | uncapped (s) | uncapped: ledger total | "
        "median | 99% | max | ordinary (s) | capped / ordinary | per row (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Accuracy of one night (night {a.nights}'s `redraw` data, {a.reps} keys each): RMSE of the {CELLS} cell "
        "shares " + ", ".join(f"{k} {v:.5f}" for k, v in rmse.items())
        + f". At the same ε per report the capped histogram's error is {ratio:.2f}× the uncapped one's (closed form "
        "at a rare cell 1.13×), for a series cost that no change can raise.",
    ])
    print(body)
    if not a.no_write:
        write_section("longitudinal", body)


if __name__ == "__main__":
    main()
