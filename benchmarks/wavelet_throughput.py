"""Throughput of the wavelet channel's summary mode (db4, n = 10^7, ε = 1, levels from the paper).

Run: ``python benchmarks/wavelet_throughput.py`` (part of ``make bench``). Side by
side on the same Parquet data and the same LocalCluster (2 worker processes × 1
thread):

(a) the non-private computation of the same coefficient sums (read + fused
    numba accumulation + tree sum): the floor;
(a') the same with the per-level numpy path (S weighted ``bincount`` passes per
    level), to show what the numba kernel buys;
(b) ldp_dask summary mode (WaveletLaplace, exact sums + noise in distribution);
(c) ldp_dask rows mode (every row's full noisy vector written), on a subset;
(d) a naive dense per-row privatizer (design row + dim Laplace draws per row,
    then the sum), in one process, on a subset.

Rewrites the "wavelet-throughput" section of RESULTS.md.
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
from ldp_dask.channels import WaveletLaplace, wavelet_levels  # noqa: E402
from ldp_dask.source import open_source, read_piece  # noqa: E402

DOMAIN = (-5.0, 5.0)
WORKERS = 2


def _normal(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.clip(rng.normal(0.0, 1.0, n), *DOMAIN)


def _exact_piece(args):
    dataset, piece, channel, numpy_path = args
    x = read_piece(dataset, piece)
    if not numpy_path:
        return channel.exact_stats(x)["sum"]
    t = channel.to_unit(x)
    return np.concatenate([channel.basis.accumulate(t, j, k) for k, j in channel.levels])


def floor_sums(client, path: str, channel: WaveletLaplace, numpy_path: bool = False) -> np.ndarray:
    ds = open_source(path, "x")
    args = [(ds.reader, p, channel, numpy_path) for p in ds.pieces]
    return tree_sum(client, client.map(_exact_piece, args, pure=False))


def naive_dense(x: np.ndarray, channel: WaveletLaplace, rng: np.random.Generator) -> np.ndarray:
    """(d) what a direct implementation does: every row's noisy vector, then the sum."""
    total = np.zeros(channel.dim)
    for s in range(0, len(x), 2048):
        total += channel.privatize(x[s:s + 2048], rng).sum(axis=0)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--subset", type=int, default=20_000, help="rows for (c) and (d)")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    from distributed import Client, LocalCluster

    j0, j1 = wavelet_levels(a.rows, 1.0, "db4")
    ch = WaveletLaplace(1.0, DOMAIN, j0, j1, wavelet="db4")
    work = Path(tempfile.mkdtemp(prefix="ldp-wbench-"))
    try:
        t = time.perf_counter()
        data = make_data(work / "data", a.rows, a.files, _normal)
        small = make_data(work / "small", a.subset, 1, _normal)
        print(f"wrote {a.rows:,} rows in {a.files} files in {time.perf_counter() - t:.1f} s; {ch!r}, dim {ch.dim}",
              flush=True)
        with LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=logging.ERROR) as lc, Client(lc) as client:
            # warm-up: numba compiles (or loads its cache) once per worker process
            ldp_dask.privatize(str(small), column="x", channel=ch, client=client, seed=0)
            floor_sums(client, str(small), ch)
            res = {}
            res["a"] = best_of(lambda: floor_sums(client, str(data), ch), a.repeats)
            res["a2"] = best_of(lambda: floor_sums(client, str(data), ch, numpy_path=True), 1)
            res["b"] = best_of(lambda: ldp_dask.privatize(str(data), column="x", channel=ch, client=client, seed=1),
                               a.repeats)
            rows_dir = work / "rows"
            res["c"] = best_of(lambda: ldp_dask.privatize(str(small), column="x", channel=ch, client=client, seed=2,
                                                          mode="rows", rows_path=str(rows_dir), overwrite=True), 1)
        x = pq.read_table(small / "part-000.parquet", use_threads=False).column("x").to_numpy()
        res["d"] = best_of(lambda: naive_dense(x, ch, np.random.default_rng(3)), 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    n = {"a": a.rows, "a2": a.rows, "b": a.rows, "c": a.subset, "d": a.subset}
    cores = {"a": WORKERS, "a2": WORKERS, "b": WORKERS, "c": WORKERS, "d": 1}
    label = {
        "a": "(a) non-private coefficient sums, numba kernel (floor)",
        "a2": "(a') non-private coefficient sums, numpy bincount per level",
        "b": "(b) ldp_dask summary mode",
        "c": f"(c) ldp_dask rows mode (writes n × {ch.dim} floats)",
        "d": f"(d) naive dense privatizer (n × {ch.dim} Laplace draws)",
    }
    rate = {k: n[k] / res[k] for k in res}
    per_core = {k: rate[k] / cores[k] for k in res}
    lines = [f"| {label[k]} | {n[k]:,} | {cores[k]} | {res[k]:.3f} | {rate[k]:,.0f} | {per_core[k]:,.0f} |"
             for k in ("a", "a2", "b", "c", "d")]
    body = "\n".join([
        f"## Throughput: WaveletLaplace db4, levels {j0}–{j1} (dim {ch.dim}), ε = 1 (`benchmarks/wavelet_throughput.py`)",
        "",
        f"Machine: {machine()}.",
        f"Dask LocalCluster of {WORKERS} worker processes × 1 thread; {a.files} Parquet files of N(0, 1) values on "
        f"[−5, 5]; best of {a.repeats} runs for (a) and (b), one run for the others; (c) and (d) on a "
        f"{a.subset:,}-row subset.",
        "",
        "| path | rows | cores | seconds | rows/s | rows/s per core |",
        "|---|---|---|---|---|---|",
        *lines,
        "",
        f"- (b) / (a) time ratio: **{res['b'] / res['a']:.2f}×** (goal ≤ 3×).",
        f"- numba kernel vs numpy path: (a') / (a) = {res['a2'] / res['a']:.1f}× the time.",
        f"- (b) vs (d), rows/s per core: {per_core['b'] / per_core['d']:,.0f}× faster; "
        f"(b) vs (c): {per_core['b'] / per_core['c']:,.0f}× faster.",
    ])
    print(body)
    write_section("wavelet-throughput", body)


if __name__ == "__main__":
    main()
