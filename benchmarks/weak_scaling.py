"""Weak scaling: the rows per worker fixed, workers 1, 2, 4, … up to the machine's cores, beside DuckDB.

Run: ``python benchmarks/weak_scaling.py`` (or ``python benchmarks/scaling.py --weak``; part of ``make bench``).
At w workers the source is the first w·R/F files of one table (R rows per worker, F rows per file), so every
worker has the same work at every w, and the ideal is a constant time. On a LocalCluster of w worker processes
× 1 thread, in the same run at each w:

* DuckDB, ``threads = w``: a 256-bin histogram of ``x0``, and the plan's non-private equivalents in one query;
* ``ldp_dask.privatize``: the light channels (histogram, mean) of one column;
* ``ldp_dask.release_plan``: the 10-statistic plan of ``benchmarks/plans.py`` (histograms, means, a hybrid mean,
  quantiles, frequencies over 10 columns) in the design it chooses;
* a privacy-unit release: a histogram of ``x0`` at ε per person (k = 1), about 10 rows a person, each worker's
  block of files with its own persons (the shuffle moves kept rows between all workers).

Weak-scaling efficiency at w: time at 1 worker / time at w (1.0 is ideal). Defaults: R = 2^27 rows per worker on
8 or more cores (the issue's size), 2^23 below (a 2-core machine's CI-sized run). Rewrites the "weak-scaling"
section of RESULTS.md.

``--strong`` runs the same jobs over one fixed table at every w instead (strong scaling; efficiency: time at 1
worker / (w × time at w)), ``--rows`` rows in all: by default 2^28 on 8 or more cores, where the plan runs about
30 s on one worker (8.3·10^6 rows/s a worker measured), 2^24 below. Rewrites the "strong-scaling" section. The
light channels run 4–12× faster than the plan a worker: 30 s of them on one worker is 10^9 rows or more (about
80 GB of these columns), which we do not write for a benchmark.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_of, machine, write_section  # noqa: E402
from plans import CATEGORIES, PLAN, duckdb_query  # noqa: E402
from scaling import worker_counts  # noqa: E402

JOBS = ("duckdb", "duckdb-plan", "histogram", "mean", "plan", "unit")
WHAT = {
    "duckdb": "DuckDB: 256-bin histogram of x0 (threads = w)",
    "duckdb-plan": "DuckDB: the plan's non-private equivalents, one query (threads = w)",
    "histogram": "LaplaceHistogram of x0, 256 bins",
    "mean": "LaplaceMean of x1",
    "plan": "the 10-statistic plan, its chosen design",
    "unit": "histogram of x0, ε per person (k = 1)",
}
#: the jobs run again over object storage with ``--s3`` (DuckDB reads S3 only through an extension it downloads)
S3_JOBS = ("histogram", "mean", "plan", "unit")
BUCKET = "ldp-bench"


def make_table(directory: Path, files: int, rows: int, per_worker: int) -> Path:
    """``files`` files of ``rows`` rows of the plan's columns (x0..x6 Beta(2, 5), k0..k2 of 8 categories) and a
    ``person``. Each worker's block of ``per_worker`` files has its own persons, about 10 rows each, spread over the
    block's files: the persons grow with the workers while each keeps about 10 rows (weak scaling), and the
    shuffle still sends each person's rows to the worker its id hashes to, not the one that read them."""
    directory.mkdir(parents=True, exist_ok=True)
    persons = max(1, per_worker * rows // 10)
    for f in range(files):
        if (directory / f"part-{f:05d}.parquet").exists():  # --keep-data reuses them
            continue
        rng = np.random.default_rng(f)
        cols: dict[str, Any] = {f"x{j}": rng.beta(2, 5, rows) for j in range(7)}
        cols.update({f"k{j}": pa.array(np.array(CATEGORIES)[rng.integers(0, len(CATEGORIES), rows)])
                     for j in range(3)})
        cols["person"] = (f // per_worker) * persons + rng.integers(0, persons, rows)
        pq.write_table(pa.table(cols), directory / f"part-{f:05d}.parquet", row_group_size=1 << 20)
    return directory


def linked(data: Path, where: Path, files: int) -> Path:
    """A directory of the first ``files`` files of ``data``, as hard links (no copy)."""
    where.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        dst = where / f"part-{f:05d}.parquet"
        if not dst.exists():
            os.link(data / f"part-{f:05d}.parquet", dst)
    return where


def jobs(client: Any, source: str, threads: int, s3: tuple[str, dict[str, Any]] | None = None
         ) -> dict[str, Callable[[], Any]]:
    """The jobs at one worker count: over ``source`` on local disk, and over its copy ``s3 = (url, storage
    options)`` on the S3-compatible server (named ``<job> s3``)."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    hist = (f"SELECT least(floor(x0 * 256)::INTEGER, 255) AS b, count(*) FROM read_parquet('{source}/*.parquet') "
            "GROUP BY b")
    out: dict[str, Callable[[], Any]] = {"duckdb": lambda: con.execute(hist).fetchall(),
                                         "duckdb-plan": lambda: con.execute(duckdb_query(source)).fetchall()}
    out.update(_ours(client, source, {}))
    if s3 is not None:
        out.update({f"{k} s3": v for k, v in _ours(client, s3[0], {"storage_options": s3[1]}).items()})
    return out


def _ours(client: Any, source: str, extra: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    import ldp_dask
    from ldp_dask.channels import build_channel

    common: dict[str, Any] = {"client": client, "seed": 1, "ledger": False, **extra}
    h = build_channel("histogram", 1.0, (0.0, 1.0), 256)
    m = build_channel("mean", 1.0, (0.0, 1.0))
    plan = ldp_dask.Plan.from_dict(PLAN)
    return {
        "histogram": lambda: ldp_dask.privatize(source, column="x0", channel=h, **common),
        "mean": lambda: ldp_dask.privatize(source, column="x1", channel=m, **common),
        "plan": lambda: ldp_dask.release_plan(plan, source, 2.0, **common),
        "unit": lambda: ldp_dask.privatize(source, column="x0", channel=h, privacy_unit="person", **common),
    }


def s3_server(stack: contextlib.ExitStack) -> dict[str, Any]:
    """moto's S3-compatible server on 127.0.0.1 (the one the tests start), its credentials in this process's
    environment, which the workers inherit as a deployment's would; returns the storage options."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from s3_server import CREDENTIALS, s3_server

    endpoint = stack.enter_context(s3_server())
    os.environ.update(CREDENTIALS)
    return {"endpoint_url": endpoint}


def upload(data: Path, files: int, options: dict[str, Any], prefix: str) -> str:
    """The first ``files`` files of ``data`` under ``s3://<bucket>/<prefix>/``; returns that URL."""
    import s3fs

    fs = s3fs.S3FileSystem(**options)
    if not fs.exists(BUCKET):
        fs.mkdir(BUCKET)
    for f in range(files):
        name = f"part-{f:05d}.parquet"
        fs.put(str(data / name), f"{BUCKET}/{prefix}/{name}")
    fs.invalidate_cache()
    return f"s3://{BUCKET}/{prefix}"


def main(argv: list[str] | None = None) -> None:
    cores = os.cpu_count() or 1
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows-per-worker", type=int, default=(1 << 27) if cores >= 8 else (1 << 23))
    ap.add_argument("--rows-per-file", type=int, default=1 << 20)
    ap.add_argument("--max-workers", type=int, default=cores)
    ap.add_argument("--repeats", type=int, default=2, help="runs per job; the best time is kept")
    ap.add_argument("--keep-data", default=None, help="keep (or reuse) the data in this directory")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md as it is")
    ap.add_argument("--s3", action="store_true", help="run our jobs also over object storage: moto's S3-compatible "
                    "server on 127.0.0.1 (the test extra), the files copied there")
    ap.add_argument("--s3-max-rows", type=int, default=1 << 25, help="the most rows copied to the server at one "
                    "worker count (it holds them on this machine's disk and memory); larger counts run locally only")
    ap.add_argument("--strong", action="store_true", help="strong scaling: one table of --rows rows at every w")
    ap.add_argument("--rows", type=int, default=(1 << 28) if cores >= 8 else (1 << 24),
                    help="the rows of --strong's table")
    a = ap.parse_args(argv)
    ws = worker_counts(min(a.max_workers, cores))
    if a.strong:
        strong(a, ws)
        return
    per_worker = max(1, a.rows_per_worker // a.rows_per_file)
    work = Path(a.keep_data) if a.keep_data else Path(tempfile.mkdtemp(prefix="ldp-weak-"))
    total = ws[-1] * per_worker
    data = make_table(work / "data", total, a.rows_per_file, per_worker)
    print(f"{per_worker * a.rows_per_file:,} rows per worker ({per_worker} files of {a.rows_per_file:,}); "
          f"{machine()}", flush=True)
    names = [*JOBS, *(f"{j} s3" for j in S3_JOBS if a.s3)]
    times: dict[str, dict[int, float]] = {j: {} for j in names}
    try:
        with contextlib.ExitStack() as stack:
            options = s3_server(stack) if a.s3 else {}
            for w in ws:
                source = str(linked(data, work / f"w{w}", w * per_worker))
                fits = w * per_worker * a.rows_per_file <= a.s3_max_rows
                s3 = (upload(data, w * per_worker, options, f"w{w}"), options) if a.s3 and fits else None
                _run_at(w, jobs, source, s3, times, ws[0], w * per_worker * a.rows_per_file, a.repeats)
    finally:
        if not a.keep_data:
            shutil.rmtree(work, ignore_errors=True)
    if not a.no_write:
        report(times, ws, per_worker, a.rows_per_file, a.repeats)


def strong(a: argparse.Namespace, ws: list[int]) -> None:
    """The jobs over one table of ``a.rows`` rows at every worker count (module docstring)."""
    files = max(1, a.rows // a.rows_per_file)
    work = Path(a.keep_data) if a.keep_data else Path(tempfile.mkdtemp(prefix="ldp-strong-"))
    times: dict[str, dict[int, float]] = {j: {} for j in JOBS}
    try:
        source = str(make_table(work / "data", files, a.rows_per_file, files))
        print(f"{files * a.rows_per_file:,} rows ({files} files of {a.rows_per_file:,}); {machine()}", flush=True)
        for w in ws:
            _run_at(w, jobs, source, None, times, ws[0], files * a.rows_per_file, a.repeats, strong=True)
    finally:
        if not a.keep_data:
            shutil.rmtree(work, ignore_errors=True)
    if a.no_write:
        return
    lines = [f"## Strong scaling: {files * a.rows_per_file:,} rows, 1 to {ws[-1]} workers (`benchmarks/weak_scaling.py "
             "--strong`)", "", f"Machine: {machine()}.", "",
             f"One source at every w: {files} Parquet files of {a.rows_per_file:,} rows (the weak-scaling section's "
             "columns; about 10 rows a person), in the page cache; LocalClusters of w worker processes × 1 thread, "
             f"DuckDB with `threads = w` in the same run. Best of {a.repeats} after a warm-up. Efficiency: time at 1 "
             "worker / (w × time at w); 1.00 is ideal.", "", *_table(times, ws, strong=True)]
    write_section("strong-scaling", "\n".join(lines))


def _table(times: dict[str, dict[int, float]], ws: list[int], strong: bool = False) -> list[str]:
    """The jobs' times at each worker count and their efficiency at the most: t1/t_w (weak) or t1/(w·t_w)
    (strong, the first count being 1 worker)."""
    top = ws[-1]
    lines = ["| job | " + " | ".join(f"w = {w}" for w in ws) + f" | efficiency at {top} |",
             "|---|" + "---|" * (len(ws) + 1)]
    for j, t in times.items():
        if not t:
            continue
        what = WHAT[j] if j in WHAT else f"{WHAT[j[:-3]]}, read from the S3-compatible server"
        eff = f"{t[ws[0]] / t[top] / (top / ws[0] if strong else 1):.2f}" if top in t else "–"
        lines.append(f"| {what} | " + " | ".join(f"{t[w]:.2f} s" if w in t else "–" for w in ws) + f" | {eff} |")
    return lines


def _run_at(w: int, make: Callable[..., dict[str, Callable[[], Any]]], source: str,
            s3: tuple[str, dict[str, Any]] | None, times: dict[str, dict[int, float]], first: int, rows: int,
            repeats: int, strong: bool = False) -> None:
    """Every job at ``w`` workers (a fresh LocalCluster), each warmed up once, then its best of ``repeats``."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR) as lc, Client(lc) as client:
        for name, job in make(client, source, w, s3).items():
            job()  # warm-up: imports, numba compilation on every worker
            times[name][w] = best_of(job, repeats)
            print(f"w={w:>3}  {name:<12} {times[name][w]:8.2f} s  {rows / times[name][w] / 1e6:8.1f} M rows/s"
                  f"  efficiency {times[name][first] / times[name][w] / (w / first if strong else 1):.2f}",
                  flush=True)


def report(times: dict[str, dict[int, float]], ws: list[int], per_worker: int, rows: int, repeats: int) -> None:
    top = ws[-1]
    lines = [
        f"## Weak scaling: {per_worker * rows:,} rows per worker, 1 to {top} workers (`benchmarks/weak_scaling.py`)",
        "",
        f"Machine: {machine()}.", "",
        f"At w workers the source is w × {per_worker} Parquet files of {rows:,} rows (7 Beta(2, 5) float columns, 3 "
        "string columns of 8 categories, a person id: about 10 rows a person, each worker's block of files with its "
        "own persons), in the page cache; LocalClusters of w worker processes × 1 thread, DuckDB with `threads = w` in the same run. Best of "
        f"{repeats} after a warm-up. Efficiency: time at 1 worker / time at w (1.00 is ideal: the same work per "
        "worker in the same time).", "",
        *_table(times, ws),
    ]
    s3 = [j for j in S3_JOBS if times.get(f"{j} s3")]
    if s3:
        lines += ["", "Object storage ÷ local disk, the same job at the same w (moto's server, a Python process on "
                  "this machine, stands in for S3: what it shows is our reading path over HTTP, not S3's bandwidth):",
                  "", "| job | " + " | ".join(f"w = {w}" for w in ws) + " |", "|---|" + "---|" * len(ws)]
        lines += [f"| {WHAT[j]} | " + " | ".join(f"{times[j + ' s3'][w] / times[j][w]:.2f}×" if w in times[j + ' s3']
                                                 else "–" for w in ws) + " |" for j in s3]
    write_section("weak-scaling", "\n".join(lines))


if __name__ == "__main__":
    main()
