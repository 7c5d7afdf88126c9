"""Throughput of summary mode against the non-private floor, rows mode and a naive privatizer.

Run: ``make bench`` (or ``python benchmarks/throughput.py [--rows N]``). One run
measures, side by side on the same Parquet data and the same Dask cluster
(LocalCluster, 2 worker processes × 1 thread):

(a) the non-private histogram of the column (read + bin + bincount + reduce): the floor;
(b) ldp_dask summary mode, LaplaceHistogram K = 1024;
(c) ldp_dask rows mode (every row's K-vector written to Parquet), on a subset;
(d) a naive dense privatizer (n × K Laplace draws, then sum), in one process, on a subset.

It prints rows/s and rows/s per core and rewrites the "throughput" section of
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_of, machine, make_data, tree_sum, write_section  # noqa: E402

import ldp_dask  # noqa: E402
from ldp_dask.reading import read_piece  # noqa: E402
from ldp_dask.source import open_source  # noqa: E402

DOMAIN = (0.0, 1.0)
WORKERS = 2


def _floor_piece(args):
    dataset, piece, bins = args
    x = read_piece(dataset, piece)
    idx = ((x - DOMAIN[0]) * (bins / (DOMAIN[1] - DOMAIN[0]))).astype(np.intp)
    np.minimum(idx, bins - 1, out=idx)
    return np.bincount(idx, minlength=bins)


def floor_histogram(client, path: str, bins: int) -> np.ndarray:
    """(a) non-private: same reading and partitioning, bincount, tree-summed counts."""
    ds = open_source(path, "x")
    return tree_sum(client, client.map(_floor_piece, [(ds.reader, p, bins) for p in ds.pieces], pure=False))


def naive_dense(x: np.ndarray, bins: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """(d) what a direct implementation does: every row's K-vector, then the sum."""
    scale = 2.0 / epsilon
    total = np.zeros(bins)
    idx = np.minimum((x * bins).astype(np.intp), bins - 1)
    for s in range(0, len(x), 4096):
        z = rng.laplace(0.0, scale, size=(min(4096, len(x) - s), bins))
        z[np.arange(len(z)), idx[s:s + 4096]] += 1.0
        total += z.sum(axis=0)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--bins", type=int, default=1024)
    ap.add_argument("--subset", type=int, default=100_000, help="rows for (c) and (d)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep-data", action="store_true")
    a = ap.parse_args()
    from distributed import Client, LocalCluster

    work = Path(tempfile.mkdtemp(prefix="ldp-bench-"))
    try:
        t = time.perf_counter()
        data = make_data(work / "data", a.rows, a.files)
        small = make_data(work / "small", a.subset, 1)
        print(f"wrote {a.rows:,} rows in {a.files} files in {time.perf_counter() - t:.1f} s", flush=True)
        ch = ldp_dask.LaplaceHistogram(1.0, a.bins, DOMAIN)
        with LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=logging.ERROR) as lc, Client(lc) as client:
            ldp_dask.privatize(str(small), column="x", channel=ch, client=client, seed=0)  # warm-up
            floor_histogram(client, str(small), a.bins)
            res = {}
            res["a"] = best_of(lambda: floor_histogram(client, str(data), a.bins), a.repeats)
            res["b"] = best_of(lambda: ldp_dask.privatize(str(data), column="x", channel=ch, client=client,
                                                          seed=1, ledger=False), a.repeats)
            rows_dir = work / "rows"

            def rows_mode():
                ldp_dask.privatize(str(small), column="x", channel=ch, client=client, seed=2, mode="rows",
                                   rows_path=str(rows_dir), overwrite=True, ledger=False)

            res["c"] = best_of(rows_mode, 1)
        x = pq.read_table(small / "part-000.parquet").column("x").to_numpy()
        res["d"] = best_of(lambda: naive_dense(x, a.bins, 1.0, np.random.default_rng(3)), 1)
    finally:
        if not a.keep_data:
            shutil.rmtree(work, ignore_errors=True)

    n = {"a": a.rows, "b": a.rows, "c": a.subset, "d": a.subset}
    cores = {"a": WORKERS, "b": WORKERS, "c": WORKERS, "d": 1}
    label = {
        "a": "(a) non-private histogram (floor)",
        "b": "(b) ldp_dask summary mode",
        "c": "(c) ldp_dask rows mode (writes n × K floats)",
        "d": "(d) naive dense privatizer (n × K Laplace draws)",
    }
    rate = {k: n[k] / res[k] for k in res}
    per_core = {k: rate[k] / cores[k] for k in res}
    lines = [f"| {label[k]} | {n[k]:,} | {cores[k]} | {res[k]:.3f} | {rate[k]:,.0f} | {per_core[k]:,.0f} |"
             for k in "abcd"]
    ratio_ba = res["b"] / res["a"]
    speedup_bd = per_core["b"] / per_core["d"]
    body = "\n".join([
        f"## Throughput: LaplaceHistogram, K = {a.bins}, ε = 1 (`benchmarks/throughput.py`)",
        "",
        f"Machine: {machine()}.",
        f"Dask LocalCluster of {WORKERS} worker processes × 1 thread; {a.files} Parquet files, one partition per "
        f"file; best of {a.repeats} runs for (a) and (b), one run for (c) and (d) on a {a.subset:,}-row subset.",
        "",
        "| path | rows | cores | seconds | rows/s | rows/s per core |",
        "|---|---|---|---|---|---|",
        *lines,
        "",
        f"- (b) / (a) time ratio: **{ratio_ba:.2f}×** (goal ≤ 1.5×).",
        f"- (b) vs (d), rows/s per core: **{speedup_bd:,.0f}×** faster (goal ≥ 1000×).",
        f"- (b) vs (c), rows/s per core: {per_core['b'] / per_core['c']:,.0f}× faster.",
    ])
    print(body)
    write_section("throughput", body)


if __name__ == "__main__":
    main()
