"""Nightly releases over a table that gains 10^6 rows a day: incremental (--since) against a full re-run.

Run: ``python benchmarks/incremental.py`` (part of ``make bench``; about a minute and 0.3 GB of temporary
disk on 2 cores). For nights 1 to 30 it adds a day's file of 10^6 rows under ``date=YYYY-MM-DD/`` and
measures, side by side in the same run:

* **incremental**: ``privatize(since=last night's summary)`` with the budget ledger on, which reads only
  the new file and reuses the kept sums of the others (best of 3 runs; the repeats reproduce the release, so
  the ledger charges them nothing);
* **full re-run**: the release the nightly job made before, ``privatize`` over the whole table (every 5th
  night: its cost grows with the table, so a few points show the line; best of 2), also with a ledger;
* **floor**: the non-private histogram of the new day's file (read + bincount), the least any nightly job over
  the new data costs.

Two series: the histogram (64 bins), whose per-row work is small next to a night's fixed costs (planning,
the ledger, reading the kept summary), and the hybrid mean, whose per-row sampling dominates. It checks, at
night 30, that the incremental summary is bit-identical to a partitioned release that reads every file with
the same key, and reports what each ledger charged per row. Every job runs in this process
(``client="local"``) so that the comparison is of work, not of cluster start-up; ``--workers N`` runs the
releases on a LocalCluster of N worker processes instead. Rewrites the "incremental" section of RESULTS.md
and ``benchmarks/incremental.png``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_of, machine, write_section  # noqa: E402

import ldp_dask  # noqa: E402
from ldp_dask import HybridMean, LaplaceHistogram  # noqa: E402
from ldp_dask.ledger import Ledger  # noqa: E402

CHANNEL = LaplaceHistogram(epsilon=1.0, bins=64, domain=(0.0, 240.0))


def write_day(root: Path, night: int, rows: int) -> Path:
    folder = root / f"date=2026-10-{night:02d}" if night <= 31 else root / f"day={night:03d}"
    folder.mkdir(parents=True, exist_ok=True)
    values = np.random.default_rng(night).gamma(2.0, 15.0, rows).clip(0, 240)
    path = folder / "part.parquet"
    pq.write_table(pa.table({"delay": values}), path)
    return path


def floor(path: Path) -> float:
    """The non-private histogram of one file: read + bincount (best of 3)."""
    def job() -> None:
        x = pq.read_table(path, columns=["delay"]).column(0).to_numpy()
        np.bincount(np.minimum((x * (64 / 240.0)).astype(np.int64), 63), minlength=64)

    return best_of(job, 3)


#: the series: a channel whose per-row work is small next to a night's fixed costs, and one where it dominates
CHANNELS = {
    "histogram": (CHANNEL, "histogram, 64 bins"),
    "hybrid-mean": (HybridMean(epsilon=1.0, domain=(0.0, 240.0)), "hybrid mean (Piecewise/Duchi per row)"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows added each night")
    ap.add_argument("--full-every", type=int, default=5, help="run the full re-run every this many nights")
    ap.add_argument("--channel", choices=sorted(CHANNELS), action="append", default=None,
                    help="the series to run (default: all)")
    ap.add_argument("--workers", type=int, default=0, help="run releases on a LocalCluster of N workers (0: here)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    a = ap.parse_args()
    cluster = client = None
    if a.workers:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    results = {}
    try:
        for name in a.channel or list(CHANNELS):
            results[name] = series(CHANNELS[name][0], a, client)
    finally:
        if client is not None:
            client.close()
            cluster.close()
    report(results, a)


def series(channel: Any, a: argparse.Namespace, client: Any) -> tuple[list, bool, dict, dict]:
    """One channel's 30 nights: (rows of the table, bit-identity at the last night, the two ledgers' rows)."""
    work = Path(tempfile.mkdtemp(prefix="ldp-incremental-"))
    table, out = work / "table", work / "out"
    out.mkdir()
    inc_ledger, full_ledger = str(work / "incremental.sqlite"), str(work / "full.sqlite")
    key = work / "key"
    key.write_text("0123456789abcdef0123456789abcdef")
    run = {"client": client or "local", "secret_file": str(key)}
    rows_out = []
    previous = None
    # the operator's word that the table only gains files: the incremental ledger follows rows file by file
    from ldp_dask.source import source_root

    Ledger(inc_ledger).declare("table", source_root(str(table)), 1e6, append_only=True)
    warm = work / "warm"  # one release first, so that no night pays the process's first-use costs (imports, kernels)
    write_day(warm, 1, 1000)
    ldp_dask.privatize(str(warm), "delay", channel, out=work / "warm.parquet", incremental=True, ledger=False, **run)
    ldp_dask.privatize(str(warm), "delay", channel, ledger=False, **run)
    try:
        for night in range(1, a.nights + 1):
            path = write_day(table, night, a.rows)
            f = floor(path)
            summary = out / f"night{night:02d}.parquet"
            # best of 3: the repeats reproduce the first release exactly, so the ledger charges them nothing
            inc = best_of(lambda summary=summary, previous=previous: ldp_dask.privatize(
                str(table), "delay", channel, out=summary, since=previous, incremental=True, ledger=inc_ledger,
                overwrite=True, **run), 3)
            assert ldp_dask.read_summary(summary).metadata["partitions_read"] == 1
            previous = summary
            full = None
            if night == 1 or night % a.full_every == 0:
                full = best_of(lambda: ldp_dask.privatize(str(table), "delay", channel, ledger=full_ledger, **run), 2)
            rows_out.append((night, night * a.rows, inc, full, f))
            print(f"{channel.name} night {night:2d}: {night * a.rows:>11,} rows  incremental {inc:6.3f} s  "
                  f"full {'' if full is None else f'{full:6.3f} s'}  floor {f:6.3f} s", flush=True)
        final = ldp_dask.read_summary(previous, key=ldp_dask.noise.resolve_secret(secret_file=str(key)))
        everything = ldp_dask.privatize(str(table), "delay", channel, incremental=True, ledger=False, **run)
        identical = final.same_release(everything)
        (inc_row,) = Ledger(inc_ledger).summary()
        (full_row,) = Ledger(full_ledger).summary()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows_out, identical, inc_row, full_row


def report(results: dict, a: argparse.Namespace) -> None:
    where = "in process" if not a.workers else f"on a LocalCluster of {a.workers} workers"
    lines = [f"Machine: {machine()}. Releases {where}, ε = 1; {a.rows:,} rows added each night, one file per day "
             "(`python benchmarks/incremental.py`). The floor is the non-private histogram of the new day's file "
             "(read + bincount)."]
    for name, (rows, identical, inc_row, full_row) in results.items():
        lines += ["", f"**{CHANNELS[name][1]}**", ""] + table_of(rows, identical, inc_row, full_row)
    text = "\n".join(lines)
    print(text)
    if not a.no_write:
        plot(results)
        write_section("incremental", "## Incremental nightly releases\n\n" + text +
                      "\n\n![nightly cost](incremental.png)")


def table_of(rows: list, identical: bool, inc_row: dict, full_row: dict) -> list[str]:
    first, last = rows[0], rows[-1]
    full_runs = [r for r in rows if r[3] is not None]
    lines = [
        "| night | rows in table | incremental (s) | full re-run (s) | full / incremental | floor (s) | "
        "incremental / floor |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for night, n, inc, full, f in rows:
        if full is None and night not in (2, 3):
            continue
        ratio = "" if full is None else f"{full / inc:.1f}×"
        lines.append(f"| {night} | {n:,} | {inc:.3f} | {'' if full is None else f'{full:.3f}'} | {ratio} | "
                     f"{f:.3f} | {inc / f:.1f}× |")
    incs = np.array([r[2] for r in rows])
    per_night, fixed = np.polyfit([r[0] for r in full_runs], [r[3] for r in full_runs], 1)
    lines += [
        "",
        f"- Night {last[0]} incremental: {last[2]:.3f} s against night 1's {first[2]:.3f} s "
        f"({last[2] / first[2]:.2f}×); the median night costs {np.median(incs):.3f} s "
        f"(min {incs.min():.3f}, max {incs.max():.3f}).",
        f"- Full re-run at night {full_runs[-1][0]}: {full_runs[-1][3]:.3f} s, {full_runs[-1][3] / full_runs[0][3]:.1f}× "
        f"night 1's full release ({full_runs[0][3]:.3f} s) and {full_runs[-1][3] / full_runs[-1][2]:.1f}× that "
        f"night's incremental release. A least-squares line through the {len(full_runs)} full re-runs: "
        f"{fixed:.3f} s + {per_night:.3f} s per night of data: the full re-run grows linearly with the table's age.",
        f"- Night {last[0]}'s incremental summary is bit-identical to a release that reads all "
        f"{last[0]} files with the same key: {identical}.",
        f"- Ledger after {last[0]} incremental nights: ε {inc_row['spent']:g} per row, over "
        f"{len(inc_row['groups'])} partitions (each day charged once: the table is declared append-only; without the "
        f"declaration each night would count for every row). The {len(full_runs)} full re-runs, "
        f"each a new release of every row, charged ε {full_row['spent']:g} per row.",
    ]
    return lines


def plot(results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4), squeeze=False)
    for ax, (name, (rows, *_)) in zip(axes[0], results.items()):
        nights = [r[0] for r in rows]
        ax.plot(nights, [r[2] for r in rows], "o-", label="incremental (--since)")
        full = [(r[0], r[3]) for r in rows if r[3] is not None]
        ax.plot([n for n, _ in full], [t for _, t in full], "s-", label="full re-run")
        ax.plot(nights, [r[4] for r in rows], ":", color="grey", label="floor: non-private histogram of the new day")
        ax.set_xlabel("night (one more day of 10^6 rows each)")
        ax.set_ylabel("seconds")
        ax.set_title(CHANNELS[name][1])
        ax.legend()
    fig.suptitle("Nightly release cost as the table grows")
    fig.tight_layout()
    fig.savefig(Path(__file__).with_name("incremental.png"), dpi=110)


if __name__ == "__main__":
    main()
